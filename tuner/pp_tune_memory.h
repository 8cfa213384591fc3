/* pp_tune_memory.h — the per-rank memory model: activations, weights, gradients, optimizer state,
 * and the bundled runtime's own plan (memory.c, runtime_mem.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_MEMORY_H
#define PP_TUNE_MEMORY_H

#include "pp_config.h"
#include "pp_rt_plan.h"
#include "pp_sched.h"
#include "pp_tune_hw.h"
#include "pp_tune_model.h"
#include "pp_tune_opts.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double params;    /* parameters held by the rank (all its stages, after tensor split) */
    double expert_params; /* of which routed experts' (MoE: synchronised and sharded over the
                             expert-data-parallel group, pp_tune_expert_dp_config) */
    double weights;   /* bytes */
    double grads;
    double optim;
    double acts;      /* saved activations at the rank's peak */
    double comm;      /* send/receive buffers */
    double workspace; /* transient buffers and fixed framework reserve */
    double total;
    double peak_units; /* peak in-flight activations, micro-batch x (L/D layers) */
} pp_tune_rank_mem;

/* Bytes of activations one transformer layer keeps for one micro-batch of c->b sequences on
 * one rank, under c's tensor and sequence parallelism, recomputation (full: a recomputed
 * layer's) and context parallelism (Korthikanti et al. 2022 Table 2 per block variant; see
 * memory.c). */
double pp_tune_act_bytes_per_layer(const pp_tune_model *m, const pp_config *c,
                                   const pp_tune_opts *o);
/* Bytes one layer holds for one micro-batch between its I and its W (split backward): the
 * linears' inputs and output gradients, Korthikanti's terms (memory.c says which). */
double pp_tune_held_for_w_bytes_per_layer(const pp_tune_model *m, const pp_config *c,
                                          const pp_tune_opts *o);
/* Fills mem[0..D-1] for the schedule s of configuration c. */
pp_status pp_tune_memory(const pp_tune_model *m, const pp_config *c, const pp_sched *s,
                         const pp_tune_opts *o, pp_tune_rank_mem *mem);
/* The bundled runtime's own accounting (pprun, CPU backend, fp32): the runtime's memory plan
 * (runtime/plan/pp_rt_plan.h, adapted in runtime_mem.c), the one the executor's measured peaks
 * equal; pp_tune_memory uses it when o->precision is PP_PREC_FP32. t > 1 is planned as the
 * runtime splits each stage (Megatron's split, embedding and head replicated), and with
 * c->sequence_parallel as it runs sequence parallelism. */
pp_status pp_tune_memory_runtime(const pp_tune_model *m, const pp_config *c,
                                 const pp_sched *s, const pp_tune_opts *o, pp_tune_rank_mem *mem);
/* The same walk for the runtime on another backend: the CPU (as above), or the CUDA backend
 * (pprun --backend cuda) in fp32 or bf16 with a transport that stages through host memory
 * (threads, MPI: the transport's copies are not device memory). CUDA differs from the CPU's
 * accounting: the kernel scratch (its largest single need, first step: GEMM operand copies in
 * bf16, per-row losses, the gradient norm's partials) and the cuBLAS workspace under
 * workspace; every head's attention scratch of a batch row in the backward; in bf16 a 2-byte
 * copy of every weight; the step's tokens and targets stay in host memory. Equal to the
 * backend's own accounting to the byte (tests/test_cuda_rt.c, run under the CUDA emulation).
 * Not modelled: the NCCL transport's message buffers, and what the driver holds outside the
 * backend's accounting (context, memory-pool slack: bench_cuda_layer reports both). With
 * c->sequence_parallel it plans sequence parallelism as the runtime runs it. */
/* backend: a pprun backend's kind (a row of common/pp_backends.h with .choice); precision:
 * one the backend computes in (its row's precisions: bf16 on CUDA only). */
pp_status pp_tune_memory_runtime_on(const pp_tune_model *m, const pp_config *c,
                                    const pp_sched *s, const pp_tune_opts *o,
                                    pp_rt_backend_kind backend, pp_precision precision,
                                    pp_tune_rank_mem *mem);
/* Bytes available per device after the headroom. */
double pp_tune_mem_capacity(const pp_tune_hw *hw, const pp_tune_opts *o);
/* Which memory model plans o: 1 for a mixed precision (16-bit weights beside fp32 main grads
 * and Adam, Megatron's: the Korthikanti-style model of memory.c and a GPU rank's fixed
 * reserve), 0 for one precision throughout, which is what the bundled runtime runs (its CPU
 * backend, pp_tune_search_adjust), planned by the runtime's own memory plan. */
int pp_tune_mixed_precision(const pp_tune_opts *o);
/* "126.9 GiB = weights 3.0 + grads 6.0 + optimizer 18.0 + activations 71.1 (4 in flight) +
 * comm 0.2 + workspace 28.6": a rank's total and every part of it, in the total's unit, so the
 * parts add up to it (to the rounding of the last digit); into buf, returns buf. */
char *pp_tune_rank_mem_str(const pp_tune_rank_mem *x, char *buf, size_t n);
/* Bytes per parameter of the weights, gradients and optimizer state (memory.c; Megatron-LM's
 * theoretical_memory_usage.py table): bf16 2 + 4 + 12, the CPU runtime's fp32 4 + 4 + 8; with
 * c->shard optimizer the optimizer's share divided by the sharding ranks
 * (pp_tune_shard_ranks), with gradients the gradients' too. The one copy: the memory model,
 * the time model's gradient sync and the search's lower bound read it. */
typedef struct {
    double weights, grads, optim;
} pp_tune_param_bytes;
pp_tune_param_bytes pp_tune_bytes_per_param(const pp_tune_opts *o, const pp_config *c);
/* ---- mixture-of-experts (memory.c) ----
 * c's expert parallelism (1 where unset). */
int pp_tune_ep(const pp_config *c);
/* The configuration whose data-parallel group is c's expert-data-parallel group: the d x cp
 * ranks holding a stage's dense weights hold the same routed experts in groups of ep, so each
 * expert is replicated on d x cp / ep ranks (Megatron-Core's expert data parallelism): cp 1,
 * d = d x cp / ep. Its pp_tune_bytes_per_param and the time model's sync and optimizer
 * functions give the experts' figures. */
pp_config pp_tune_expert_dp_config(const pp_config *c);
/* One layer's parameters on a rank after the tensor split (norms and the router replicated):
 * *dense everything but the routed experts (attention, norms, router, shared experts; or the
 * dense MLP), *experts the rank's routed experts (experts/ep of them, each split by t: expert
 * tensor parallelism = t). moe: whether the layer is a MoE layer. */
void pp_tune_layer_params_rank(const pp_tune_model *m, const pp_config *c, int moe,
                               double *dense, double *experts);
/* A MoE layer's activation terms for one micro-batch on the busiest expert-parallel rank,
 * bytes (memory.c says each term's derivation); routed terms include the load imbalance. */
typedef struct {
    double dispatch; /* top_k copies of each token's hidden state, permuted for the experts */
    double experts;  /* the routed experts' SwiGLU intermediates: gate, up, their product */
    double combine;  /* top_k expert outputs kept for the weighted sum's backward */
    double router;   /* the router's logits and probabilities (fp32) */
    double shared;   /* the shared experts' MLP activations (0 without shared experts) */
    double a2a;      /* the all-to-all's send and receive buffers (transient, in comm) */
    double total;    /* dispatch + experts + combine + router + shared (not a2a) */
} pp_tune_moe_acts;
void pp_tune_moe_acts_of(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o,
                         pp_tune_moe_acts *out);
/* Mixture-of-experts layers among layers [begin, end) of m. */
int pp_tune_moe_layers_in(const pp_tune_model *m, int begin, int end);

/* The ranks that hold the same weights and so reduce gradients together and share sharded
 * state: d x cp (context-parallel ranks hold the same weights; Megatron's data-parallel group
 * with context parallelism). */
int pp_tune_shard_ranks(const pp_config *c);

#ifdef __cplusplus
}
#endif
#endif
