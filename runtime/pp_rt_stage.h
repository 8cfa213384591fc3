/* pp_rt_stage.h — one pipeline stage of the model: the parameters, gradients and saved
 * activations of a layer range (plus the embedding on a pipe's first stage and final LN + head
 * + loss on its last); forward / backward of one micro-batch at a time; AdamW.
 * Shapes: B micro-batch size, T sequence length, C hidden, V vocabulary. Activations passed
 * between stages are fp32 (B, T, C) row-major; tokens are int32 (B, T).
 * Part of the runtime's public headers (pp_rt.h includes them all); stands alone.
 */
#ifndef PP_RT_STAGE_H
#define PP_RT_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "pp_common.h"
#include "pp_rt_backend.h"
#include "pp_rt_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_rt_stage pp_rt_stage;

typedef struct {
    const pp_model_cfg *model;
    int layer_begin, layer_end; /* [begin, end) transformer blocks; may be empty */
    int has_embed;              /* token + position embedding (a pipe's first stage) */
    int has_head;               /* final LN, LM head tied to the token embedding, loss */
    int micro_batch;            /* B */
    int seq;                    /* T <= model->seq */
    uint64_t seed;              /* every tensor derives from (seed, layer, name): a layer's
                                   weights are identical wherever it is placed */
    /* Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): the stage's blocks are split over
     * tp ranks (0 or 1: no split), of which this one is tp_rank. qkv (by heads) and the MLP's
     * first linear are column-parallel, the attention output and the MLP's second linear
     * row-parallel, the token embedding and the head split over the vocabulary (ceil(V/t)
     * rows each, Megatron-LM's VocabParallelEmbedding and column-parallel output layer, the
     * loss computed across them), LayerNorms, the row-parallel biases and the position
     * embedding whole on every rank. tp_allreduce sums data(n) in place over the stage's tp ranks (every rank
     * gets the same floats; each rank of the group calls it the same times, in the same
     * order); required when tp > 1. */
    int tp, tp_rank;
    pp_status (*tp_allreduce)(void *ctx, float *data, size_t n);
    void *tp_ctx;
    /* Where the stage's per-micro-batch memory comes from (a forward's saved-activation slot,
     * a backward's workspace): mem_alloc puts `bytes` of category cat at *out and returns
     * PP_OK, or an error with its message; mem_free gives back what mem_alloc gave, with the
     * same bytes and cat. Both NULL: the stage's backend (pp_backend_alloc / pp_backend_free).
     * The executor passes its memory plan's arena (runtime/executor_arena.c). */
    pp_status (*mem_alloc)(void *ctx, size_t bytes, pp_mem_category cat, void **out);
    void (*mem_free)(void *ctx, void *p, size_t bytes, pp_mem_category cat);
    void *mem_ctx;
    /* Sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2; Megatron-LM's
     * sequence_parallel), with tp > 1 (ignored at tp <= 1): the LayerNorms, residual adds and
     * the activations the stage sends and receives hold this rank's N/tp of the micro-batch's
     * N = B*T tokens (rows [tp_rank N/tp, ..) of the (B, T, C) layout: for B = 1 exactly
     * Megatron's split of the sequence); an all-gather enters each column-parallel linear and a
     * reduce-scatter leaves each row-parallel one (their conjugates in backward), and the
     * LayerNorms' partial gradients are all-reduced. seq % tp must be 0 (PP_ERR_INVALID
     * otherwise). tp_allgather copies every rank's n floats `part` to full + rank*n on every
     * rank; tp_reduce_scatter sums full (tp * n floats) over the ranks and leaves this rank's
     * slice of n floats in part (same calling rules as tp_allreduce). Required with it. */
    int sequence_parallel;
    pp_status (*tp_allgather)(void *ctx, const float *part, float *full, size_t n);
    pp_status (*tp_reduce_scatter)(void *ctx, const float *full, float *part, size_t n);
    /* Context parallelism (Megatron-Core's context_parallel_size; runtime/stage_cp.c): cp
     * ranks (0 or 1: none) share each sequence of seq tokens, this one (cp_rank) holding
     * seq / cp of them: chunks cp_rank and 2 cp - 1 - cp_rank of the 2 cp chunks, in that
     * order, at their true positions (tokens and activations passed in and out are the rank's
     * (B, seq / cp) of them). Attention reads the group's K/V; the loss is the mean over the
     * rank's tokens (the caller averages the ranks' losses and sums their gradients, as over
     * data-parallel replicas). 2 cp must divide seq. Attention is ring attention: cp_send
     * sends n floats to the next cp rank (cp_rank + 1 mod cp) without waiting for it to
     * receive them (the buffer may be reused when it returns), cp_recv receives n floats
     * from the previous one; every rank of the group calls them the same times in the same
     * order, and the k-th receive takes the previous rank's k-th send. Required with it. The
     * backend must have the context-parallel attention kernels (PP_ERR_UNSUPPORTED). */
    int cp, cp_rank;
    pp_status (*cp_send)(void *ctx, const float *buf, size_t n);
    pp_status (*cp_recv)(void *ctx, float *buf, size_t n);
    void *cp_ctx;
    /* Activation recomputation (pp_rt_sizes.h's PP_RT_RC_*: 0 none, 1 selective, 2 full) and,
     * with full, the first recompute_layers blocks of the stage (0: all). A recomputed block
     * reruns its forward (full) or its attention core (selective) on the same inputs at the
     * start of its backward, so the gradients are the same floats as without it; the slot is
     * smaller (pp_rt_stage_act_bytes), forward and backward take the recompute workspace. */
    int recompute, recompute_layers;
    /* 1: the stage allocates no gradient buffer; its tensors' grad pointers are NULL until the
     * caller points them (pp_rt_stage_set_grad) at memory it zeroed, before a backward writes
     * them (gradient sharding, runtime/executor_zero2.c, where the whole gradient lives only
     * while its micro-batches' backwards are in flight). */
    int grads_outside;
} pp_rt_stage_params;

/* A named parameter tensor with its gradient (both in backend memory, fp32, n elements).
 * Names are stable across placements: "wte", "wpe", "h3.ln1.g", "h3.attn.qkv.w", "lnf.b",
 * and "wte.head" for the head's copy of the tied embedding on a stage that has the head but
 * not the embedding (its gradient is summed with the first stage's "wte", as Megatron does). */
typedef struct {
    const char *name;
    float *data;
    float *grad;
    size_t n;
    int sharded; /* 1: this rank holds 1/t of the tensor (pp_rt_stage_global_index maps it;
                    the vocabulary-split ones ceil(V/t) rows, with padding past V);
                    0: the whole tensor, identical on every tensor-parallel rank */
} pp_rt_tensor;

/* Creates the stage's parameters (initialised from the seed) and gradients (zero) in be's
 * memory into *out, freed by the caller with pp_rt_stage_destroy before be is destroyed
 * (be is borrowed). Returns PP_OK; PP_ERR_INVALID for parameters that do not fit the model
 * (the message names the field); PP_ERR_OOM when be runs out of memory. */
pp_status pp_rt_stage_create(pp_backend *be, const pp_rt_stage_params *p, pp_rt_stage **out);
/* Frees every buffer of the stage in its backend, then the stage. NULL is a no-op. */
void pp_rt_stage_destroy(pp_rt_stage *st);
/* Returns the bytes of the activation tensor a stage sends / receives: B*T*C*4, or this
 * rank's B*T*C*4/tp of it under sequence parallelism. */
size_t pp_rt_stage_io_bytes(const pp_rt_stage *st);
/* Returns the bytes of the activations one forward saves until its backward (PP_MEM_ACTS per
 * in-flight slot): the memory model's "activations per micro-batch" of this stage, exactly. */
size_t pp_rt_stage_act_bytes(const pp_rt_stage *st);
/* Forward of one micro-batch. slot identifies it until its backward (the micro-batch id):
 * the stage saves what backward needs under that slot (counted as PP_MEM_ACTS).
 *   tokens  (B,T) int32 in host memory, required when has_embed, else NULL (checked against
 *           the vocabulary here, then uploaded into the slot)
 *   x_in    (B,T,C) input activation when !has_embed, else NULL (under sequence
 *           parallelism this rank's B*T/tp rows of it, as are x_out, dx_out and dx_in)
 *   targets (B,T) int32 in host memory, required when has_head, else NULL
 *   x_out   (B,T,C) output when !has_head, else NULL
 *   loss    when has_head: receives the mean cross-entropy of this micro-batch
 * Returns PP_OK; PP_ERR_INVALID for a token outside the vocabulary, a slot already in use or a
 * missing / extra argument; PP_ERR_OOM when the slot cannot be allocated. */
pp_status pp_rt_stage_forward(pp_rt_stage *st, int slot, const int32_t *tokens, const float *x_in,
                              const int32_t *targets, float *x_out, float *loss);
/* Backward of the micro-batch in `slot`, accumulating into the parameter gradients and freeing
 * the slot's saved activations.
 *   dx_out    (B,T,C) gradient of the output when !has_head, else NULL
 *   dx_in     (B,T,C) receives the gradient of the input when !has_embed, else NULL
 *   loss_scale when has_head: d(total loss)/d(this micro-batch's mean loss), e.g. 1/(N*dp)
 * Returns PP_OK; PP_ERR_INVALID for a slot no forward filled; PP_ERR_OOM for its workspace. */
pp_status pp_rt_stage_backward(pp_rt_stage *st, int slot, const float *dx_out, float *dx_in,
                               float loss_scale);
/* Split backward (zero-bubble schedules' I and W actions). pp_rt_stage_backward_input is
 * pp_rt_stage_backward (same arguments, same input gradient, same errors) except that it
 * leaves the weight gradients of the linears and of the head to pp_rt_stage_backward_weight:
 * the slot stays, and with it pp_rt_stage_held_bytes of output gradients (PP_MEM_ACTS). The
 * LayerNorms' and the embedding's gradients are accumulated by I. After an I the slot takes
 * no B and no second I (PP_ERR_INVALID); a failed I releases the slot as a failed B does.
 * pp_rt_stage_backward_weight accumulates them and frees the slot; PP_ERR_INVALID for a slot
 * whose I has not run. I and W of one slot together accumulate the same gradients as its B
 * (the same GEMMs on the same floats; only their order among other micro-batches differs). */
pp_status pp_rt_stage_backward_input(pp_rt_stage *st, int slot, const float *dx_out, float *dx_in,
                                     float loss_scale);
pp_status pp_rt_stage_backward_weight(pp_rt_stage *st, int slot);
/* Returns the bytes an I holds for its W besides the slot (pp_rt_size_wheld_bytes). */
size_t pp_rt_stage_held_bytes(const pp_rt_stage *st);
/* Returns the stage's parameter tensors, *n of them (owned by the stage, valid until it is
 * destroyed). */
pp_rt_tensor *pp_rt_stage_tensors(pp_rt_stage *st, int *n);
/* Returns the stage's tensor with this name ("h3.attn.qkv.w", "wte.head"), owned by the
 * stage, or NULL if it holds none. */
pp_rt_tensor *pp_rt_stage_tensor(pp_rt_stage *st, const char *name);
/* Returns the index in the whole (unsplit) tensor of element i of the stage's tensor
 * `tensor` (an index into pp_rt_stage_tensors): i itself for a tensor that is not sharded;
 * PP_RT_STAGE_PAD for an element of the vocabulary padding (a rank's rows past the
 * vocabulary when t does not divide it: zero, part of no whole tensor). */
#define PP_RT_STAGE_PAD ((size_t)-1)
size_t pp_rt_stage_global_index(const pp_rt_stage *st, int tensor, size_t i);
/* The names within a block ("ln1.g", "attn.qkv.w", ...) of the tensors the model's blocks
 * hold, in allocation order, into names (static strings); returns how many. */
#define PP_RT_BLOCK_TENSORS_MAX 14
int pp_rt_block_tensors(const pp_model_cfg *m, const char *names[PP_RT_BLOCK_TENSORS_MAX]);
/* The whole (unsplit) shape of the stage tensor `name` ("wte", "h3.attn.qkv.w", "lnf.g") of
 * model m: rows and cols (PyTorch nn.Linear's (out, in); cols 0 for a vector). Returns 1, or 0
 * for a name the model has no tensor of. */
int pp_rt_tensor_shape(const pp_model_cfg *m, const char *name, int64_t *rows, int64_t *cols);
/* Sets every gradient of the stage to zero (before a step's first backward). */
void pp_rt_stage_zero_grad(pp_rt_stage *st);
/* Points tensor `tensor`'s gradient at g (n floats of backend memory, or NULL): the stage was
 * created with grads_outside. */
void pp_rt_stage_set_grad(pp_rt_stage *st, int tensor, float *g);

/* AdamW (Loshchilov & Hutter), applied to every tensor of the stage. grad_scale multiplies the
 * gradients first (1 or a clipping factor); step counts from 1. Optimizer state is allocated on
 * the first call (PP_MEM_OPTIM). Weight decay is not applied to LayerNorm gains/biases or biases. */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
} pp_adamw;
/* Returns PP_OK; PP_ERR_INVALID for step < 1; PP_ERR_OOM when the optimizer state cannot be
 * allocated. */
pp_status pp_rt_stage_adamw(pp_rt_stage *st, const pp_adamw *hp, int step, float grad_scale);
/* AdamW on elements [off, off + len) of the stage's tensor `tensor` (an index into
 * pp_rt_stage_tensors) with the caller's gradient and state (m, v: len floats each, backend
 * memory) for them: a sharded optimizer's slice (ZeRO-1, runtime/executor_zero.c). Each element
 * steps exactly as pp_rt_stage_adamw steps it, weight decay as the tensor's. Returns PP_OK;
 * PP_ERR_INVALID for a step < 1 or a range outside the tensor. */
pp_status pp_rt_stage_adamw_slice(pp_rt_stage *st, int tensor, size_t off, size_t len,
                                  const float *grad, float *m, float *v, const pp_adamw *hp,
                                  int step, float grad_scale);

#ifdef __cplusplus
}
#endif
#endif
