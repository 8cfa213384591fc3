/* pp_rt_plan.h — the runtime's memory plan: the bytes every pipeline rank of the bundled
 * runtime holds in a training step, by category, and where each of the step's buffers lives,
 * computed from the model, the schedule, the backend, the precision and what the transport
 * takes, without allocating anything or touching a device. The executor computes it when it
 * is created and allocates from it: each rank's step buffers are carved at their planned
 * offsets from one arena (runtime/executor_arena.c), so its backends' measured peaks equal the
 * plan by construction (tests/test_runtime_exec_mem.c, tests/test_cuda_rt.c); the tuner plans
 * the runtime's own trials with it (tuner/runtime_mem.c). Library pp_rt_plan: links only
 * pp_schedules and pp_common, never a backend, so the tuner can use it.
 *
 * What is counted: exactly the bytes the runtime allocates through its backends' accounting
 * (runtime/backend.c), in the order the executor allocates them (executor_run.c, stage_fwd.c,
 * stage_bwd.c, executor_sync.c), with the sizes of pp_rt_sizes.h:
 *   weights, grads: the parameters of the rank's stages (pp_rt_size_stage_params), fp32; on CUDA in
 *     bf16 also a 2-byte copy of every weight (made by the first AdamW step);
 *   optimizer: AdamW m and v, held from the first step on (sharded: of the replica's 1/dp);
 *   activations: the step's tokens and targets (ranks with a first / last stage; host memory
 *     beside a CUDA backend, so not counted there) and one slot per in-flight micro-batch;
 *     with split backward, a slot stays from F to W and its I adds the output gradients its
 *     W needs (held for W: pp_rt_size_wheld_bytes) until that W;
 *   communication: a received tensor until the compute consuming it ends, a produced one
 *     until its SEND, the packed gradients of every REDUCE until the step's end, then the
 *     data-parallel all-reduce buffer; and, with the in-process transport on host memory
 *     (the CPU backend, not staged), its copy of every message sent, on the sender until the
 *     receiver has taken it and the sender sends again (transport_thread.c reclaims then);
 *   workspace: a backward's scratch; on CUDA the kernel scratch (its largest single need,
 *     reached in the first step) and the cuBLAS workspace, held throughout.
 * The steady state (step >= 2) is planned: optimizer state and bf16 copies already exist.
 *
 * Buffer assignment (pp_rt_plan_assign): the step's buffers — received and produced tensors,
 * saved-activation slots, backward workspaces, REDUCE packs, the data-parallel buffer — are
 * listed in the order the rank allocates them, each with its bytes, category and offset in the
 * rank's arena (PP_RT_ARENA_ALIGN-aligned, placed greedily by size among the buffers alive at
 * the same time: runtime/plan/plan_arena.c; the arena is at least the buffers' peak sum). Outside the arena, with their sizes from
 * the same plan: the persistent state (weights, grads, optimizer state, bf16 copies, tokens;
 * the weights and grads are checked against it at creation), the backend's kernel scratch
 * (its row's figure: reserved at kernel_scratch when the executor creates the backend, which
 * then refuses a kernel needing more) and its GEMM library's workspace (CUDA's: cuBLAS), and
 * the transports' own message copies (the
 * in-process transport's, timing dependent: below).
 *
 * Exact when every byte is placed by the rank's program order (pp_rt_plan_is_exact). When
 * the in-process transport's copies count, when a receive completes depends on timing: the
 * plan simulates the schedule with unit costs (F = 1, B = 2, free links: pp_cost_init_unit)
 * and reclaims a copy at the sender's first SEND that starts after the matching RECV ended.
 * Not planned: the NCCL and MPI transports' own message buffers, the in-process transport's
 * copies of the context-parallel ring's messages (runtime/stage_cp.c; the staged plans, which
 * count no transport copies, stay exact), and what lives outside the
 * backends (thread stacks, the transports' queues, a device's context).
 */
#ifndef PP_RT_PLAN_H
#define PP_RT_PLAN_H

#include <stddef.h>

#include "pp_common.h"
#include "pp_rt_mem.h"
#include "pp_backends.h"
#include "pp_rt_model.h"
#include "pp_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Arithmetic: pp_precision, in pp_common.h (one enum for tuner, profiles, pprun and backends). */

/* The backends of an executor's ranks (pp_rt_backend_kind) and what each can do: one row each
 * in common/pp_backends.h, which the plan asks, never a kind. */

/* What a transport can take (pp_transport_caps). 0: host memory only (in-process, MPI). */
enum {
    /* buffers may be device memory of the rank's backend, which it then moves without a host
     * copy (NCCL); the executor does not stage through host memory for it */
    PP_TRANSPORT_CAP_DEVICE_MEM = 1u << 0
};

typedef struct {
    const pp_model_cfg *model;
    const pp_sched *sched;   /* sched->layers must equal model->layers */
    int micro_batch;         /* B >= 1 */
    int seq;                 /* T, 1..model->seq */
    int dp;                  /* data-parallel replicas >= 1 (each plans the same) */
    int backend;             /* pp_rt_backend_kind */
    int precision;           /* pp_precision; CUDA only (the CPU computes in fp32) */
    unsigned transport_caps; /* PP_TRANSPORT_CAP_* of the transport (0: in-process threads) */
    int tp; /* tensor-parallel ranks per pipeline rank (0 or 1: none); each plans the same */
    int sequence_parallel; /* with tp > 1: activations of the rank's seq/tp tokens, the
                              stages' sequence-parallel workspaces (pp_rt_sizes.h) */
    int cp; /* context-parallel ranks (0 or 1: none): activations of seq/cp tokens, the
               ring attention's blocks (pp_rt_sizes.h); dp then counts dp x cp replicas,
               the group the gradients are all-reduced over */
    int recompute;         /* PP_RT_RC_* (pp_rt_sizes.h): the smaller slots and the
                              recompute workspace of forward and backward */
    int recompute_layers;  /* with PP_RT_RC_FULL: the first k blocks of each stage; 0 all */
    int kernel_threads;    /* a host-threads backend (the CPU's): its kernel threads per rank
                              and its BLAS threads per call (0: 1), which size the kernels'
                              per-thread scratch (pp_rt_size_cpu_kernel_scratch) */
    int blas_threads;
    int shard;             /* PP_RT_SHARD_* over dp > 1: OPTIMIZER holds AdamW's m and v of
                              1/dp of the rank's parameters (ceil(params / dp) each) and
                              reduce-scatters a dp x that pack instead of the all-reduce */
} pp_rt_plan_params;

/* Sharding over the data-parallel replicas, the values of pp_shard (profiles/pp_config.h). */
enum { PP_RT_SHARD_NONE = 0, PP_RT_SHARD_OPTIMIZER = 1, PP_RT_SHARD_GRADIENTS = 2 };

/* PP_OK for a recomputation the runtime runs (mode a PP_RT_RC_*, k >= 0 and only with full),
 * else PP_ERR_INVALID naming the value (runtime/plan/plan.c). */
pp_status pp_rt_check_recompute(int mode, int k);

/* One pipeline rank's plan (every dp replica and tensor-parallel rank of it plans the same:
 * the in-place tensor-parallel all-reduces allocate nothing through the backends). */
typedef struct {
    size_t params;                 /* parameters of the rank's stages (floats) */
    size_t peak[PP_MEM__COUNT];    /* high-water mark of each category over a step */
    size_t at_peak[PP_MEM__COUNT]; /* each category at the moment of peak_total */
    size_t peak_total;             /* high-water mark of the sum = sum of at_peak */
    double peak_units; /* the simulator's peak in-flight activations on the rank, in
                        * micro-batch x (L/D layers) (pp_sim_result.peak_activations) */
    size_t kernel_scratch; /* the kernels' scratch the backend holds (PP_MEM_WORKSPACE,
                            * reserved at creation: pp_backend_scratch_reserve; its row's
                            * kernel_scratch); on the CPU its kernel threads' attention
                            * scratch, 0 with one kernel thread */
    int n_bufs;         /* the step's buffers carved from the arena (pp_rt_plan_assign) */
    size_t arena_bytes; /* the arena they are carved from (its placement's high-water mark);
                         * 0 from pp_rt_plan_compute, which does not place them */
} pp_rt_plan_rank;

/* Alignment of every buffer's offset in a rank's arena: what cudaMalloc guarantees, so a
 * carved buffer is as aligned as one allocated on its own. */
#define PP_RT_ARENA_ALIGN ((size_t)256)

/* Bytes a buffer of `bytes` takes in the arena: rounded up to PP_RT_ARENA_ALIGN and, in an
 * AddressSanitizer build, followed by a redzone of PP_RT_ARENA_ALIGN (the executor poisons
 * what no live buffer holds, so a kernel running past its buffer is reported as with malloc). */
static inline size_t pp_rt_plan_buf_len(size_t bytes)
{
    size_t b = bytes ? bytes : 1;
    b = (b + PP_RT_ARENA_ALIGN - 1) / PP_RT_ARENA_ALIGN * PP_RT_ARENA_ALIGN;
#if defined(__SANITIZE_ADDRESS__)
    b += PP_RT_ARENA_ALIGN;
#endif
    return b;
}

/* One buffer of a rank's step. */
typedef struct {
    size_t offset; /* in the rank's arena, a multiple of PP_RT_ARENA_ALIGN */
    size_t bytes;  /* requested (what the backends' accounting counts) */
    int cat;       /* pp_mem_category */
} pp_rt_plan_buf;

/* A pipeline rank's buffer assignment: its step's buffers in allocation order. The caller
 * owns it; pp_rt_plan_assignment_fini frees bufs. */
typedef struct {
    pp_rt_plan_buf *bufs; /* [n] */
    int n;
    size_t arena_bytes; /* = pp_rt_plan_rank.arena_bytes */
} pp_rt_plan_assignment;

/* Fills out[0 .. sched->ranks-1]. Returns PP_OK; PP_ERR_INVALID for a backend kind, precision
 * or size out of range, or a schedule that does not fit the model (the message names the
 * value); the simulator's error for a schedule that fails pp_sched_check. Allocates only
 * host scratch, freed before it returns. */
pp_status pp_rt_plan_compute(const pp_rt_plan_params *p, pp_rt_plan_rank *out);

/* pp_rt_plan_compute, and asg[0 .. sched->ranks-1] filled with each rank's buffers placed in
 * its arena (asg NULL: the same as pp_rt_plan_compute). Placing costs time quadratic in a
 * rank's buffers (about 1 ms for 1f1b of 8 ranks and 64 micro-batches, 0.24 s for interleaved
 * 8 x 4 chunks and 256 micro-batches on the 2-core sandbox; pp_rt_plan_compute: 0.1 and 1.3
 * ms), so the executor asks for it once and the tuner's per-candidate plans do not. On an
 * error nothing is left allocated in asg. */
pp_status pp_rt_plan_assign(const pp_rt_plan_params *p, pp_rt_plan_rank *out,
                            pp_rt_plan_assignment *asg);
/* Frees a->bufs and zeroes *a; NULL is a no-op. */
void pp_rt_plan_assignment_fini(pp_rt_plan_assignment *a);

/* Returns 1 when the plan of p equals the backends' measured peaks to the byte (staged
 * transports: every byte placed by program order), 0 when a transport's copies make it
 * depend on timing or are not planned (the in-process transport on host memory: within a
 * few percent, see tests/test_tuner_runtime.c). */
int pp_rt_plan_is_exact(const pp_rt_plan_params *p);

#ifdef __cplusplus
}
#endif
#endif
