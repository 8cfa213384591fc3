/* pp_rt.h — the bundled pipeline runtime: a GPT-style decoder split into stages, backends that
 * compute it, transports that move tensors between ranks, and the executor that walks a
 * pp_sched's per-rank action lists for one training step.
 *
 * Layering (each part usable on its own, tested on its own):
 *   pp_model_cfg      sizes of the model (layers, hidden, heads, ffn, vocab, seq)
 *   pp_backend        a table of functions (buffers with byte accounting, GEMM, layer kernels)
 *                     + a context; the CPU backend (OpenBLAS + C) is the numerical reference
 *   pp_rt_stage       the parameters, gradients and saved activations of one stage (a layer
 *                     range, plus the embedding on a pipe's first stage and final LN + head +
 *                     loss on its last); forward / backward of one micro-batch at a time
 *   pp_transport      a table of functions moving tensors between ranks (threads in-process;
 *                     MPI and NCCL in a later issue)
 *   pp_rt_executor    runs every rank's actions for one step, then gradient syncs and AdamW
 *
 * Shapes: B micro-batch size, T sequence length, C hidden, V vocabulary. Activations passed
 * between stages are fp32 (B, T, C) row-major; tokens are int32 (B, T).
 * Ownership: *_create returns an object the caller frees with *_destroy (NULL is a no-op).
 */
#ifndef PP_RT_H
#define PP_RT_H

#include <stddef.h>
#include <stdint.h>

#include "pp_common.h"
#include "pp_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Model ------------------------------------------------------------------------------- */
typedef struct {
    int layers; /* L transformer blocks */
    int hidden; /* C */
    int heads;  /* NH; C % NH == 0 */
    int ffn;    /* MLP width, usually 4C */
    int vocab;  /* V */
    int seq;    /* maximum sequence length (learned positions) */
} pp_model_cfg;

/* Runnable presets: "tiny" (CI-sized), "small", "gpt-125m", ... PP_ERR_NOTFOUND lists the names. */
pp_status pp_model_preset(const char *name, pp_model_cfg *out);
/* Checks the sizes (positive, heads divide hidden); messages name the field. */
pp_status pp_model_validate(const pp_model_cfg *cfg);

/* ---- Memory accounting ------------------------------------------------------------------- */
typedef enum {
    PP_MEM_WEIGHTS = 0,
    PP_MEM_GRADS,
    PP_MEM_OPTIM,
    PP_MEM_ACTS,      /* activations saved for backward */
    PP_MEM_COMM,      /* send / receive buffers */
    PP_MEM_WORKSPACE, /* scratch of the kernels */
    PP_MEM__COUNT
} pp_mem_category;

const char *pp_mem_category_name(pp_mem_category c); /* "weights", "grads", ... */

typedef struct {
    size_t current[PP_MEM__COUNT]; /* bytes held now */
    size_t peak[PP_MEM__COUNT];    /* high-water mark of each category */
    size_t current_total;
    size_t peak_total; /* high-water mark of the sum (not the sum of peaks) */
} pp_mem_stats;

/* ---- Backend ----------------------------------------------------------------------------- */
/* A backend is a table of callbacks plus a context (ggml-backend style). Every byte the
 * runtime uses is allocated through it and counted in its pp_mem_stats. The kernels' exact
 * list is private to runtime/ (runtime/backend.h); code outside runtime/ only creates,
 * queries and destroys backends. One backend instance per rank. */
typedef struct pp_backend pp_backend;

pp_status pp_backend_cpu_create(pp_backend **out);
void pp_backend_destroy(pp_backend *be);
const char *pp_backend_name(const pp_backend *be);
void pp_backend_mem_stats(const pp_backend *be, pp_mem_stats *out);
void pp_backend_mem_reset_peak(pp_backend *be);
/* Buffers in the backend's memory (host for CPU, device for CUDA), counted under `cat`. */
void *pp_backend_alloc(pp_backend *be, size_t bytes, pp_mem_category cat);
void pp_backend_free(pp_backend *be, void *p, size_t bytes, pp_mem_category cat);

/* ---- Stage ------------------------------------------------------------------------------- */
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
} pp_rt_tensor;

pp_status pp_rt_stage_create(pp_backend *be, const pp_rt_stage_params *p, pp_rt_stage **out);
void pp_rt_stage_destroy(pp_rt_stage *st);
/* Bytes of the activation tensor a stage sends / receives: B*T*C*4. */
size_t pp_rt_stage_io_bytes(const pp_rt_stage *st);
/* Bytes of the activations one forward saves until its backward (PP_MEM_ACTS per in-flight
 * slot): the memory model's "activations per micro-batch" of this stage, exactly. */
size_t pp_rt_stage_act_bytes(const pp_rt_stage *st);
/* Forward of one micro-batch. slot identifies it until its backward (the micro-batch id):
 * the stage saves what backward needs under that slot (counted as PP_MEM_ACTS).
 *   tokens  (B,T) int32, required when has_embed, else NULL
 *   x_in    (B,T,C) input activation when !has_embed, else NULL
 *   targets (B,T) int32, required when has_head, else NULL
 *   x_out   (B,T,C) output when !has_head, else NULL
 *   loss    when has_head: receives the mean cross-entropy of this micro-batch */
pp_status pp_rt_stage_forward(pp_rt_stage *st, int slot, const int32_t *tokens, const float *x_in,
                              const int32_t *targets, float *x_out, float *loss);
/* Backward of the micro-batch in `slot`, accumulating into the parameter gradients and freeing
 * the slot's saved activations.
 *   dx_out    (B,T,C) gradient of the output when !has_head, else NULL
 *   dx_in     (B,T,C) receives the gradient of the input when !has_embed, else NULL
 *   loss_scale when has_head: d(total loss)/d(this micro-batch's mean loss), e.g. 1/(N*dp) */
pp_status pp_rt_stage_backward(pp_rt_stage *st, int slot, const float *dx_out, float *dx_in,
                               float loss_scale);
/* The stage's parameter tensors (owned by the stage). */
pp_rt_tensor *pp_rt_stage_tensors(pp_rt_stage *st, int *n);
void pp_rt_stage_zero_grad(pp_rt_stage *st);

/* AdamW (Loshchilov & Hutter), applied to every tensor of the stage. grad_scale multiplies the
 * gradients first (1 or a clipping factor); step counts from 1. Optimizer state is allocated on
 * the first call (PP_MEM_OPTIM). Weight decay is not applied to LayerNorm gains/biases or biases. */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
} pp_adamw;
pp_status pp_rt_stage_adamw(pp_rt_stage *st, const pp_adamw *hp, int step, float grad_scale);

#ifdef __cplusplus
}
#endif
#endif
