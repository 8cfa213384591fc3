/* executor.h — private to runtime/: the executor's state, shared by executor.c (creation,
 * checks, the step driver), executor_run.c (one rank's action list), executor_sync.c
 * (gradient synchronisation and the optimizer step) and executor_dist.c (what ranks in other
 * processes share: losses, spans, memory statistics, parameter checksums). */
#ifndef PP_RT_EXECUTOR_H
#define PP_RT_EXECUTOR_H

#include <pthread.h>
#include <stdatomic.h>

#include "pp_rt.h"
#include "pp_rt_place.h"

/* Kinds of buffer a rank keeps between actions, per (pipe, stage, micro-batch). */
enum { SLOT_X_IN, SLOT_X_OUT, SLOT_DY, SLOT_DX, SLOT__COUNT };

/* A posted REDUCE: the gradients it covers on this rank and the packed buffer in flight. */
typedef struct {
    int id;
    pp_transport_req *req;
    float *buf; /* PP_MEM_COMM, n floats */
    size_t n;
    float *host; /* host copy in flight when the transport needs host memory (else NULL) */
} pending_reduce;

/* A rank's arena and its place in the step's buffer records (executor_arena.c). */
typedef struct {
    const pp_rt_plan_assignment *plan; /* the pipeline rank's records (ex->asg) */
    void *base;                        /* plan->arena_bytes of backend memory (reserved) */
    size_t bytes;
    int next;      /* records taken so far this step */
    int *live;     /* [plan->n] records handed out and not given back, n_live of them */
    int n_live;
    pp_status bad; /* the first misused free of the step (why), reported at its end */
    char why[256];
} pp_ex_arena;

typedef struct {
    int g, replica, r, tpr; /* global rank, dp replica, rank in the pipeline, tensor rank */
    struct pp_rt_executor *ex;
    pp_backend *be;
    int *tp_group;     /* [TP] the global ranks of this rank's tensor-parallel group */
    int tp_seq;        /* tensor-parallel all-reduces so far this step (their tags) */
    int *cp_group;     /* [CP] the global ranks sharing this rank's sequences (context
                          parallelism), in cp-rank order */
    int cp_sent, cp_received; /* the ring's sends and receives so far this step (tags) */
    int *ep_group;            /* [EP] the global ranks of this rank's expert-parallel group */
    int ep_seq;               /* its all-to-alls so far this step (their tags) */
    double tp_seconds; /* this step: time in tensor-parallel all-reduces */
    double tp_bytes;   /* this step: bytes this rank contributed to them */
    void **slot;         /* [n_pipes * S * N * SLOT__COUNT] buffers of io_bytes (PP_MEM_COMM) */
    int32_t *tok, *tgt;  /* [N][B*T] inputs / targets of the micro-batches (PP_MEM_ACTS) when
                            the rank holds a pipe's first / last stage, else NULL */
    pending_reduce *red; /* [n_red_cap] */
    int n_red, n_red_cap;
    double grad_sq; /* this rank's share of the squared gradient norm */
    float *zero_opt; /* sharded optimizer (executor_zero.c): AdamW m | v of this replica's
                        shard, PP_MEM_OPTIM, NULL until the first step */
    size_t zero_c;   /* floats of the replica's shard (of m, of v) it was sized for */
    struct pp_ex_z2 *z2; /* gradient sharding's state (executor_zero2.c), NULL until used */
    double norm;    /* the global norm, once synchronised */
    float aux;      /* this step: its stages' MoE load-balancing losses, summed (float, in
                       stage order, so that processes and threads add the same floats) */
    pp_status st;
    char err[1024];
    pthread_t thread;
    /* device backends: device-side timing of the step (executor_mem.c); NULL on the CPU */
    pp_backend_marks *marks;
    double *mark_s;   /* [n_marks] seconds from mark 0, as read back */
    double mark_base; /* host time of mark 0, seconds since the step began */
    void *stage_host; /* staging buffer of point-to-point messages (executor_mem.c), or NULL */
    size_t stage_cap;
    pp_ex_arena arena; /* every buffer of the step comes from it */
} rank_state;

struct pp_rt_executor {
    float aux_total; /* the step's MoE load-balancing losses over every rank (float sum) */
    pp_model_cfg model;
    pp_sched *sched;
    int B, T, dp, D, S, P, N, G; /* G = dp * D * TP ranks */
    int TP;                       /* tensor-parallel ranks per pipeline rank (1: none) */
    int CP, Tl; /* context-parallel ranks (1: none), each of which is one of the dp replicas
                   (dp = data replicas x CP); Tl = T / CP tokens of a sequence per rank */
    int SP;                       /* sequence parallelism (with TP > 1) */
    int EP;                       /* expert-parallel ranks (1: none), carved from the dp ones */
    int recompute, recompute_layers; /* pp_rt_exec_params's (PP_RT_RC_*) */
    int shard;                    /* PP_RT_SHARD_* in effect (none at dp = 1) */
    pp_rt_place place;            /* {TP, D, dp}: pp_rt_place.h's global rank layout */
    uint64_t seed;
    pp_adamw adamw;
    float clip;
    int steps_done; /* AdamW steps applied */
    size_t io_bytes;
    pp_backend **be;      /* [G] */
    pp_rt_stage **stages; /* [dp * TP * P * S] index ((replica * TP + tpr) * P + pipe) * S + stage */
    pp_transport *tp;
    rank_state *rk;           /* [G] */
    double *losses;           /* [dp * N] index replica * N + mb */
    pp_rt_span **spans;       /* [G][n_ops of g % D] */
    pp_rt_span *sync, *optim; /* [G] */
    double *tp_seconds, *tp_bytes; /* [G] the step's tensor-parallel communication */
    /* the step in progress */
    const int32_t *batch;
    int update;
    double t0;
    atomic_int failed; /* first global rank that failed, -1 if none */
    int broken;
    int self;   /* the one global rank this process runs (process transport), or -1: all */
    int own_tp; /* tp is the executor's in-process transport (else borrowed) */
    int backend, precision, device; /* pp_rt_exec_params' */
    int device_mem;                 /* the backends' memory is a device's (the CUDA kind) */
    int staged; /* device_mem and the transport takes host memory: stage through host */
    unsigned tp_caps;      /* the transport's PP_TRANSPORT_CAP_* (0 for the in-process one) */
    pp_rt_plan_rank *plan; /* [D] the memory plan of each pipeline rank (executor_plan.c) */
    pp_rt_plan_assignment *asg; /* [D] its buffer assignment: what each rank's arena holds */
    int plan_exact;        /* pp_rt_plan_is_exact of it */
};

/* Whether global rank g runs in this process. */
static inline int ex_local(const pp_rt_executor *ex, int g)
{
    return ex->self < 0 || ex->self == g;
}

static inline pp_rt_stage *ex_stage(const pp_rt_executor *ex, int replica, int tpr, int pipe,
                                    int stage)
{
    return ex->stages[(((size_t)replica * ex->TP + tpr) * ex->P + pipe) * ex->S + stage];
}

/* The global rank of (replica, pipeline rank r, tensor rank tpr), and g's pipeline rank. */
static inline int ex_global(const pp_rt_executor *ex, int replica, int r, int tpr)
{
    return pp_rt_place_global(&ex->place, tpr, r, replica);
}
static inline int ex_pp(const pp_rt_executor *ex, int g)
{
    return pp_rt_place_pp(&ex->place, g);
}

static inline int ex_rank_of(const pp_rt_executor *ex, int pipe, int stage)
{
    return pp_sched_stage(ex->sched, pipe, stage)->rank;
}

/* executor_run.c: rank g's whole step (actions, then executor_sync_and_update). */
void *pp_ex_rank_main(void *arg);
typedef struct {
    pp_rt_executor *ex;
    int g;
} pp_ex_thread_arg;

/* executor_sync.c */
pp_status pp_ex_post_reduce(pp_rt_executor *ex, rank_state *rs, int id);
/* executor_zero.c: the dp reduce-scatter, the norm, AdamW on the replica's shard and the
 * parameters' all-gather (ex->shard == PP_RT_SHARD_OPTIMIZER, dp > 1); and freeing its state. */
pp_status pp_ex_sync_sharded(pp_rt_executor *ex, rank_state *rs);
/* executor_zero2.c: gradient sharding (ex->shard == PP_RT_SHARD_GRADIENTS, dp > 1). At the
 * step's start; around each B, I and W (open before it allocates anything, close after it);
 * at its end (the tied shards summed, norm, AdamW, all-gather); the tied embedding's shard of
 * the stage (pipe, stage) of this rank (its "wte" / "wte.head"). */
pp_status pp_ex_z2_begin(pp_rt_executor *ex, rank_state *rs);
pp_status pp_ex_z2_open(pp_rt_executor *ex, rank_state *rs, const pp_action *a);
pp_status pp_ex_z2_close(pp_rt_executor *ex, rank_state *rs, const pp_action *a);
pp_status pp_ex_z2_sync(pp_rt_executor *ex, rank_state *rs);
pp_status pp_ex_z2_tied(rank_state *rs, int pipe, int stage, float **data, size_t *n);
void pp_ex_z2_free(rank_state *rs);
/* executor_zero_ckpt.c: a sharded AdamW state in a checkpoint: whether it exists yet (on this
 * process's rank); stage (tpr, pipe, stage)'s whole m | v (2 nparams floats of host)
 * gathered from the replicas' shards; replica's own slice of it put back. */
int pp_ex_zero_has_state(const pp_rt_executor *ex);
pp_status pp_ex_zero_state_get(pp_rt_executor *ex, int tpr, int pipe, int stage, float *host);
pp_status pp_ex_zero_state_put(pp_rt_executor *ex, int replica, int tpr, int pipe, int stage,
                               const float *host);
/* Under MPI: the pieces of stage (replica, tpr, pipe, stage)'s m | v that the replica's rank
 * (of this process) holds, into their places in host; mark(ctx, at, len) names each (at: its
 * offset in m, the same in v). */
typedef pp_status (*pp_ex_zero_mark_fn)(void *ctx, size_t at, size_t len);
pp_status pp_ex_zero_state_local(pp_rt_executor *ex, int replica, int tpr, int pipe, int stage,
                                 float *host, pp_ex_zero_mark_fn mark, void *ctx);
/* executor_sync.c: the global norm from every rank's rs->grad_sq (all-reduced over every rank,
 * into rs->norm), and the clipping factor of it (PyTorch's clip_grad_norm_). */
pp_status pp_ex_norm_allreduce(pp_rt_executor *ex, rank_state *rs);
float pp_ex_clip_scale(const pp_rt_executor *ex, const rank_state *rs);
void pp_ex_zero_free(rank_state *rs, int dp);
pp_status pp_ex_sync_and_update(pp_rt_executor *ex, rank_state *rs);
/* Checks that the participants of every REDUCE hold the same tensor names (else the packed
 * all-reduce would sum unrelated tensors). Run once at creation. */
pp_status pp_ex_check_reduces(pp_rt_executor *ex);

/* Tags of the collectives (point-to-point tags have bit 63 clear). */
static inline uint64_t pp_ex_coll_tag(int kind, int replica, int a)
{
    return (1ull << 63) | ((uint64_t)(kind & 0xff) << 48) | ((uint64_t)(replica & 0xffff) << 32) |
           (uint64_t)(uint32_t)a;
}
/* TAG_TPAR (kind 0): the stages' tensor-parallel all-reduces, index = their order in the step
 * (the MPI transport maps kinds 0..7 and indices below 2^20). */
enum { TAG_TPAR = 0, TAG_REDUCE, TAG_TIED, TAG_DP, TAG_NORM, TAG_LOSS, TAG_SPANS, TAG_GATHER };
/* TAG_GATHER's kinds (the tag's replica field, below 64 under MPI), one per message of the
 * executor's exchanges with process 0, so that two in a row cannot be mistaken: memory
 * statistics and parameter checksums (executor_dist.c), --save-weights' pieces (weights_hf.c),
 * a checkpoint's stages gathered and scattered (checkpoint_dist.c). */
enum {
    GATHER_MEM = 0,
    GATHER_CHECKSUM = 1,
    GATHER_WEIGHTS_LEN = 8,
    GATHER_WEIGHTS = 9,
    GATHER_CKPT_LEN = 16, /* saving: a stage's message length, then */
    GATHER_CKPT,          /* the message (index: the stage) */
    GATHER_CKPT_HEAD,     /* loading: the verdict, step, data position (index: the process) */
    GATHER_CKPT_STAGE_HEAD, /* a stage's parameter count and has_opt (index: the stage) */
    GATHER_CKPT_STAGE,      /* its parameters, */
    GATHER_CKPT_STAGE_OPT,  /* its AdamW state */
    GATHER_CKPT_TAIL,       /* the verdict of the stages' loading, */
    GATHER_CKPT_HISTORY,    /* the losses, gradient norms and step times */
};

/* executor_mem.c: the executor's only ways to create a backend and to move stage memory
 * through the transport, so that device memory works wherever host memory does. */
pp_status pp_ex_backend_create(const pp_rt_executor *ex, int g, pp_backend **out);
/* At the start of a rank's thread: makes the rank's device current on it (CUDA). */
pp_status pp_ex_rank_enter(pp_rt_executor *ex, rank_state *rs);
pp_status pp_ex_send(pp_rt_executor *ex, rank_state *rs, int to, uint64_t tag, const void *buf,
                     size_t bytes);
pp_status pp_ex_recv(pp_rt_executor *ex, rank_state *rs, int from, uint64_t tag, void *buf,
                     size_t bytes);
/* iallreduce_sum on data(n) in backend memory; *host receives the staging copy (NULL when
 * none) which pp_ex_wait uploads back and frees, also when the wait fails. */
pp_status pp_ex_iallreduce(pp_rt_executor *ex, rank_state *rs, const int *group, int n_group,
                           uint64_t tag, float *data, size_t n, float **host,
                           pp_transport_req **req);
pp_status pp_ex_wait(pp_rt_executor *ex, rank_state *rs, pp_transport_req *req, float *data,
                     float *host, size_t n);
/* The transport's all-gather / reduce-scatter (pp_rt_transport.h) on backend memory, staged
 * through host copies where the transport takes host memory only (n: floats of one part). */
pp_status pp_ex_allgather(pp_rt_executor *ex, rank_state *rs, const int *group, int n_group,
                          uint64_t tag, const float *part, float *full, size_t n);
pp_status pp_ex_reduce_scatter(pp_rt_executor *ex, rank_state *rs, const int *group, int n_group,
                               uint64_t tag, const float *full, float *part, size_t n);
/* *acc += x[i]^2 for x(n) in backend memory, in double: the backend's sum_sq where it has one
 * (on the device), else a host loop in element order. */
pp_status pp_ex_sum_sq(rank_state *rs, const float *x, size_t n, double *acc);
/* Frees host memory of the staging copies (the backend's host_free, else free). */
void pp_ex_host_free(pp_backend *be, void *p);

/* Device-timed spans (device backends; every call is a no-op on a rank without marks). A rank
 * of n actions has 2n + 4 marks: 0 the origin, then each action's start and end, then the
 * gradient synchronisation's start and end and the optimizer's end. begin records the origin
 * (the stream is idle then: its host time is the device's); apply waits for the device and
 * rewrites the rank's spans with the device times. */
enum { EX_MARK_SYNC_START, EX_MARK_SYNC_END, EX_MARK_OPTIM_END };
static inline int ex_mark_action(int i, int end)
{
    return 1 + 2 * i + end;
}
static inline int ex_mark_after(int n_ops, int which)
{
    return 1 + 2 * n_ops + which;
}
pp_status pp_ex_marks_create(pp_rt_executor *ex, rank_state *rs);
void pp_ex_marks_destroy(rank_state *rs);
pp_status pp_ex_marks_begin(pp_rt_executor *ex, rank_state *rs);
pp_status pp_ex_mark(rank_state *rs, int k);
pp_status pp_ex_marks_apply(pp_rt_executor *ex, rank_state *rs);

/* Host data of the executor's own exchanges (losses, spans, gathers) through the transport:
 * as they are for a host-memory transport, through a device copy for NCCL. g: the rank. */
pp_status pp_ex_send_host(pp_rt_executor *ex, int g, int to, uint64_t tag, const void *buf,
                          size_t bytes);
pp_status pp_ex_recv_host(pp_rt_executor *ex, int g, int from, uint64_t tag, void *buf,
                          size_t bytes);
pp_status pp_ex_allreduce_host(pp_rt_executor *ex, int g, const int *group, int n_group,
                               uint64_t tag, float *data, size_t n);

/* executor_plan.c: the plan computed at creation (after the schedule is cloned), then checked
 * against the weights the ranks' stages allocated (PP_ERR_CHECK when they differ). */
pp_status pp_ex_plan_create(pp_rt_executor *ex);
pp_status pp_ex_plan_check(const pp_rt_executor *ex);

/* executor_arena.c: the rank's arena, reserved at creation (after its backend) and freed
 * after its stages; a step begins with the first record and must end having taken them all
 * (PP_ERR_CHECK otherwise). pp_ex_alloc hands out the plan's next buffer when it is `bytes`
 * of `cat` (PP_ERR_CHECK naming both when not); pp_ex_free gives one back (NULL: no-op).
 * pp_ex_stage_alloc / _free are the same for the stages (pp_rt_stage_params.mem_*; ctx: the
 * rank_state). */
pp_status pp_ex_arena_create(pp_rt_executor *ex, rank_state *rs);
void pp_ex_arena_destroy(rank_state *rs);
void pp_ex_arena_begin(rank_state *rs);
pp_status pp_ex_arena_end(rank_state *rs);
pp_status pp_ex_alloc(rank_state *rs, size_t bytes, pp_mem_category cat, void **out);
void pp_ex_free(rank_state *rs, void *p, size_t bytes, pp_mem_category cat);
pp_status pp_ex_stage_alloc(void *ctx, size_t bytes, pp_mem_category cat, void **out);
void pp_ex_stage_free(void *ctx, void *p, size_t bytes, pp_mem_category cat);

/* executor_dist.c: with a process transport, after a rank's step: the losses shared with
 * every process, the rank's spans sent to rank 0. */
pp_status pp_ex_share_results(pp_rt_executor *ex, rank_state *rs);

#endif
