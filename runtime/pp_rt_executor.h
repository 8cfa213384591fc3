/* pp_rt_executor.h — the executor: runs training steps of a pp_sched over ranks that each hold
 * their stages, a backend and a place in a transport; its memory plan (pp_rt_plan.h), step
 * results, memory statistics and parameter checksums.
 * Part of the runtime's public headers (pp_rt.h includes them all); stands alone.
 */
#ifndef PP_RT_EXECUTOR_PUB_H
#define PP_RT_EXECUTOR_PUB_H

#include <stddef.h>
#include <stdint.h>

#include "pp_common.h"
#include "pp_rt_backend.h"
#include "pp_rt_model.h"
#include "pp_rt_plan.h"
#include "pp_rt_stage.h"
#include "pp_rt_transport.h"
#include "pp_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs training steps of a schedule: dp pipeline replicas of sched->ranks ranks each, every
 * rank a thread with its own backend (CPU unless pp_rt_exec_params.backend says CUDA),
 * talking through the in-process transport. Global
 * rank g = replica * D + r without tensor parallelism (pp_rt_exec_params.tp says how it
 * places tensor-parallel ranks). Each rank holds the stages the schedule places on it; bidirectional
 * schedules hold two replicas of every layer (one per pipe) which start identical (same seed).
 *
 * One step: every rank walks its action list (RECV via the transport, F/B through the stage
 * with slot = micro-batch id, and a split backward's I and W as pp_rt_stage_backward_input /
 * _weight, SEND via the transport; hops between stages of one rank handed
 * over directly; REDUCE posted as a non-blocking all-reduce over its participants); then,
 * per rank, wait for the REDUCEs, sum the tied embedding gradient ("wte" of a pipe's first
 * stage + "wte.head" of its last, as Megatron), all-reduce across the dp replicas, the global
 * gradient norm (each layer counted once), optional clipping, AdamW.
 * The loss is the mean over the N micro-batches of all dp replicas (loss_scale 1/(N*dp)).
 *
 * Data: a step consumes dp*N*B rows of T+1 tokens; micro-batch m of replica k is rows
 * (k*N + m)*B .. +B, so a one-stage reference over the same rows sees the same data. */
typedef struct pp_rt_executor pp_rt_executor;

typedef struct {
    const pp_model_cfg *model;
    const pp_sched *sched; /* copied; sched->layers must equal model->layers */
    int micro_batch;       /* B >= 1 */
    int seq;               /* T, 1..model->seq */
    int dp;                /* data-parallel pipeline replicas >= 1 */
    uint64_t seed;         /* parameter initialisation */
    pp_adamw adamw;
    float clip; /* clip the global gradient norm to this; 0 = no clipping */
    /* NULL: every rank a thread of this process (an in-process transport the executor owns).
     * Else a process transport of dp * D ranks (borrowed: destroy it after the executor) of
     * which this process is pp_transport_self(): the executor then creates and runs that rank
     * only, on the calling thread. Losses and the gradient norm of a step are shared with
     * every process; spans of every rank are gathered on rank 0. */
    pp_transport *transport;
    /* The ranks' backends (zero: CPU). PP_RT_BACKEND_CUDA: a CUDA backend of `precision`
     * (pp_precision) per rank, on device `device` under a process transport (the launch's
     * local rank), else rank g on device g % pp_cuda_device_count(). Every tensor then lives
     * in device memory: the in-process and MPI transports get it staged through host memory
     * (download, send, upload), a CUDA-aware transport (NCCL) gets device pointers.
     * PP_ERR_UNSUPPORTED without CUDA or without a device (the message says which). */
    int backend; /* pp_rt_backend_kind */
    int precision;
    int device;
    /* Tensor-parallel ranks per pipeline rank (0 or 1: none). Every stage is split over tp
     * ranks as Megatron-LM splits it (pp_rt_stage_params.tp); the ranks are then dp * D * tp,
     * global rank g = tp_rank + tp * (pipeline rank + D * replica) (plan/pp_rt_place.h). A
     * process transport then has dp * D * tp ranks. PP_ERR_INVALID when tp does not divide
     * the model's heads or MLP width (pp_model_check_tp). */
    int tp;
    /* Sequence parallelism with tp > 1 (pp_rt_stage_params.sequence_parallel; ignored at
     * tp <= 1): PP_ERR_INVALID unless tp divides seq. Its all-gathers and reduce-scatters
     * count in the step's tp_seconds / tp_bytes. */
    int sequence_parallel;
    /* Activation recomputation on every stage (pp_rt_stage_params.recompute, .recompute_layers;
     * planned: pp_rt_plan_params): PP_ERR_INVALID for a mode or k the runtime does not run. */
    int recompute, recompute_layers;
    /* Sharding over the dp x cp replicas (pp_rt_plan.h's PP_RT_SHARD_*; a no-op at one):
     * PP_RT_SHARD_OPTIMIZER (ZeRO-1): the gradients reduce-scattered, each replica steps AdamW
     * on its 1/dp of them with 1/dp of the state, the parameters all-gathered
     * (runtime/executor_zero.c). PP_RT_SHARD_GRADIENTS (ZeRO-2): each stage's gradient
     * reduce-scattered into the replicas' shards as its backwards finish (per micro-batch;
     * runtime/executor_zero2.c), then as ZeRO-1; not with REDUCE actions (chimera).
     * PP_ERR_UNSUPPORTED for those and for bf16 on CUDA (the bf16 weight copies are written
     * per tensor by AdamW); PP_ERR_INVALID for another value. */
    int shard;
    /* Context parallelism (Megatron-Core's context_parallel_size; 0 or 1: none): each dp
     * replica is cp replicas that share its sequences, every one holding seq / cp tokens of
     * each (pp_rt_stage_params.cp; 2 cp must divide seq). They are replicas to everything but
     * attention and the data: the ranks are dp * cp * D * tp, replica k = cp rank + cp * dp
     * index, the gradients are all-reduced over all dp * cp and the loss is the mean of their
     * losses (the mean over every token), so a step still consumes dp*N*B rows. The backend's
     * row must have context_parallel (PP_ERR_UNSUPPORTED otherwise). */
    int cp;
} pp_rt_exec_params;

typedef struct {
    double start, end; /* seconds since the step began */
} pp_rt_span;

typedef struct {
    double loss;      /* mean cross-entropy over the step's dp*N micro-batches */
    double grad_norm; /* global L2 norm of the (summed) model gradient, before clipping */
    double seconds;   /* wall time of the step */
    int n_ranks;      /* dp * D */
    /* Owned by the executor, valid until its next step: */
    const pp_rt_span *const *spans; /* [n_ranks][sched->n_ops[g % D]] every action */
    const pp_rt_span *sync;         /* [n_ranks] gradient synchronisation after the actions */
    const pp_rt_span *optim;        /* [n_ranks] clipping + AdamW (0-length when !update) */
    /* [n_ranks] the step's tensor-parallel collectives of each rank (all-reduces, and under
     * sequence parallelism all-gathers and reduce-scatters): wall seconds inside them
     * and the bytes it contributed (0 without tensor parallelism; under a process transport
     * only this process's rank is filled) */
    const double *tp_seconds, *tp_bytes;
} pp_rt_step_result;

/* Validates the parameters (messages name the value), computes the memory plan, creates
 * backends, stages, transport into *out, freed with pp_rt_executor_destroy. Returns PP_OK;
 * PP_ERR_INVALID for a schedule that does not fit the model, PP_ERR_CHECK/DEADLOCK from
 * pp_sched_check. */
pp_status pp_rt_executor_create(const pp_rt_exec_params *p, pp_rt_executor **out);
/* Frees the executor: its transport (when its own), stages and backends. NULL is a no-op. */
void pp_rt_executor_destroy(pp_rt_executor *ex);
/* Runs one step on batch[dp*N*B][T+1]. update = 0 stops after the gradient synchronisation
 * (gradients stay in the stages, parameters unchanged: for tests and gradient checks).
 * Fills *out (its arrays owned by the executor). Returns PP_OK, or the first failing rank's
 * error with its message. After a failed step the executor is unusable (destroy it). */
pp_status pp_rt_executor_step(pp_rt_executor *ex, const int32_t *batch, int update,
                              pp_rt_step_result *out);
/* Returns the number of global ranks, dp * D. */
int pp_rt_executor_ranks(const pp_rt_executor *ex);
/* Returns the executor's copy of the schedule (owned by it). */
const pp_sched *pp_rt_executor_sched(const pp_rt_executor *ex);
/* Returns the rows of T+1 tokens one step consumes: dp * N * B. */
int pp_rt_executor_batch_rows(const pp_rt_executor *ex);
/* Return the stage object of (pipe, stage) in a replica, and the backend of global rank g,
 * owned by the executor (NULL for a rank another process runs). */
pp_rt_stage *pp_rt_executor_stage(pp_rt_executor *ex, int replica, int pipe, int stage);
/* The same for tensor-parallel rank tp_rank of the stage (pp_rt_executor_stage is its rank 0);
 * NULL outside 0..tp-1. */
pp_rt_stage *pp_rt_executor_stage_tp(pp_rt_executor *ex, int replica, int tp_rank, int pipe,
                                     int stage);
/* Returns the tensor-parallel ranks per pipeline rank (1 without tensor parallelism). */
int pp_rt_executor_tp(const pp_rt_executor *ex);
pp_backend *pp_rt_executor_backend(pp_rt_executor *ex, int g);
/* Returns, with a process transport, the global rank this process runs (the others' stages and
 * backends are NULL here); -1 when every rank is a thread of this process. */
int pp_rt_executor_self(const pp_rt_executor *ex);
/* Returns the memory plan of global rank g (computed at creation: every replica of a
 * pipeline rank plans the same), owned by the executor; NULL for g outside 0..n_ranks-1.
 * After steps, pp_rt_executor_mem_stats' peaks equal it (to the byte when
 * pp_rt_executor_plan_is_exact returns 1). */
const pp_rt_plan_rank *pp_rt_executor_plan(const pp_rt_executor *ex, int g);
/* Returns pp_rt_plan_is_exact of the executor's plan: 1 when it is exact. */
int pp_rt_executor_plan_is_exact(const pp_rt_executor *ex);
/* Fills the memory statistics of every global rank into out[n_ranks] (the caller's).
 * Returns PP_OK, or the transport's error. With a process transport every
 * process must call it (it is a gather): rank 0 gets them all, another process its own. */
pp_status pp_rt_executor_mem_stats(pp_rt_executor *ex, pp_mem_stats *out);
/* A checksum of every parameter of every replica, bit for bit: FNV-1a (64 bit) over each
 * stage's tensors' float bits in tensor order, then FNV-1a over those stage hashes in
 * (replica, pipe, stage) order. Equal checksums mean equal parameters wherever the ranks ran.
 * A gather like pp_rt_executor_mem_stats: *out valid on rank 0 (0 on the other processes).
 * Returns PP_OK, or the backend's or transport's error. */
pp_status pp_rt_executor_param_checksum(pp_rt_executor *ex, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
