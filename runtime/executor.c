/* executor.c — the executor's lifecycle and step driver: checks that a schedule fits the
 * model, creates one backend per global rank (CPU or CUDA: executor_mem.c), the stages each
 * rank holds and the in-process transport; a step starts one thread per rank
 * (executor_run.c) and joins them.
 *
 * With a process transport (MPI) the same code runs one rank: this process's, on the calling
 * thread; what the ranks share after a step is in executor_dist.c.
 * Not here: the action semantics (executor_run.c), gradient syncs and AdamW
 * (executor_sync.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "executor.h"
#include "transport.h"

/* Expert parallelism: what the MoE block (runtime/stage_moe.c) and the gradient sums run. */
static pp_status check_ep(const pp_rt_exec_params *p, const pp_backend_row *row)
{
    if (p->ep < 0 || p->ep > 64)
        return PP_ERR(PP_ERR_INVALID, "expert-parallel ranks must be 1..64, got %d", p->ep);
    const pp_moe_cfg *e = &p->model->moe;
    if (e->experts > 0 && row && row->device_memory)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "mixture-of-experts layers (%d experts) run on the cpu backend only: the "
                      "%s backend has no MoE block yet",
                      e->experts, row->name);
    if (p->ep <= 1)
        return PP_OK;
    if (e->experts <= 0)
        return PP_ERR(PP_ERR_INVALID, "expert parallelism (ep %d): the model has no "
                                      "mixture-of-experts layers", p->ep);
    if (p->dp % p->ep || e->experts % p->ep)
        return PP_ERR(PP_ERR_INVALID,
                      "expert parallelism: ep %d must divide the data-parallel replicas (dp %d: "
                      "the expert ranks are carved out of them, as Megatron-Core's) and the "
                      "experts (%d)",
                      p->ep, p->dp, e->experts);
    const char *why = p->tp > 1      ? "tensor parallelism (tp > 1)"
                      : p->cp > 1    ? "context parallelism (cp > 1)"
                      : p->shard     ? "sharding (--shard)"
                      : row && strcmp(row->device_kind, "cpu") ? "a device backend"
                                                               : NULL;
    if (why)
        return PP_ERR(PP_ERR_UNSUPPORTED, "expert parallelism (ep %d) with %s: not run yet",
                      p->ep, why);
    return PP_OK;
}

static pp_status check_params(const pp_rt_exec_params *p)
{
    if (!p->model || !p->sched)
        return PP_ERR(PP_ERR_INVALID, "the executor needs a model and a schedule");
    PP_TRY(pp_model_validate(p->model));
    const pp_sched *s = p->sched;
    if (p->micro_batch < 1)
        return PP_ERR(PP_ERR_INVALID, "micro-batch size must be at least 1, got %d",
                      p->micro_batch);
    if (p->seq < 1 || p->seq > p->model->seq)
        return PP_ERR(PP_ERR_INVALID,
                      "sequence length %d is outside 1..%d (the model's maximum sequence)", p->seq,
                      p->model->seq);
    if (p->dp < 1 || p->dp > 64)
        return PP_ERR(PP_ERR_INVALID, "data-parallel replicas must be 1..64, got %d", p->dp);
    int t = p->tp > 1 ? p->tp : 1, cp = p->cp > 1 ? p->cp : 1;
    if (p->cp < 0 || (long)p->dp * cp > 64)
        return PP_ERR(PP_ERR_INVALID,
                      "context-parallel ranks x data-parallel replicas must be 1..64, got cp %d "
                      "x dp %d",
                      p->cp, p->dp);
    PP_TRY(pp_model_check_cp(p->seq, cp, p->sequence_parallel ? t : 1));
    const pp_backend_row *row = pp_backend_row_of(p->backend);
    if (cp > 1 && row && !row->context_parallel)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "context parallelism (cp %d): the %s backend has no context-parallel "
                      "attention kernel (runtime/backend.h: attention_cp_fwd); run it on the "
                      "cpu backend",
                      cp, row->name);
    int dp = p->dp * cp; /* replicas, each cp rank one */
    if (p->tp < 0 || p->tp > 64)
        return PP_ERR(PP_ERR_INVALID, "tensor-parallel ranks must be 1..64, got %d", p->tp);
    PP_TRY(pp_model_check_tp(p->model, t));
    if (p->sequence_parallel)
        PP_TRY(pp_model_check_sp(p->seq, t));
    PP_TRY(pp_rt_check_recompute(p->recompute, p->recompute_layers));
    if (p->shard < PP_RT_SHARD_NONE || p->shard > PP_RT_SHARD_GRADIENTS)
        return PP_ERR(PP_ERR_INVALID, "shard: %d is none of 0 (none), 1 (optimizer), 2 (gradients)",
                      p->shard);
    if (p->shard == PP_RT_SHARD_GRADIENTS && dp > 1 && s->n_reduces > 0)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "shard gradients (ZeRO-2) with a schedule whose pipes share layers (%d "
                      "REDUCE actions, e.g. chimera): not run (their sum takes whole gradients "
                      "at the step's end); use shard optimizer",
                      s->n_reduces);
    PP_TRY(check_ep(p, row));
    if ((long)dp * s->ranks * t > 1024)
        return PP_ERR(PP_ERR_INVALID, "%d replicas x %d ranks x %d tensor ranks = %ld threads; at "
                      "most 1024",
                      dp, s->ranks, t, (long)dp * s->ranks * t);
    if (s->layers != p->model->layers)
        return PP_ERR(PP_ERR_INVALID,
                      "the schedule splits %d layers but the model has %d (generate it with "
                      "layers = %d)",
                      s->layers, p->model->layers, p->model->layers);
    if (!(p->clip >= 0.0f))
        return PP_ERR(PP_ERR_INVALID, "the clipping threshold must be >= 0, got %g",
                      (double)p->clip);
    for (int i = 0; i < s->n_pipes * s->stages_per_pipe; i++)
        if (s->stages[i].rank < 0 || s->stages[i].rank >= s->ranks)
            return PP_ERR(PP_ERR_INVALID, "stage %d of pipe %d is placed on rank %d, not 0..%d",
                          i % s->stages_per_pipe, i / s->stages_per_pipe, s->stages[i].rank,
                          s->ranks - 1);
    for (int m = 0; m < s->microbatches; m++)
        if (s->mb_pipe[m] >= s->n_pipes)
            return PP_ERR(PP_ERR_INVALID, "micro-batch %d goes through pipe %d of %d", m,
                          s->mb_pipe[m], s->n_pipes);
    /* A schedule that does not pass the checker could deadlock the rank threads. */
    PP_TRY(pp_sched_check(s));
    if (p->transport) {
        int G = dp * s->ranks * t, n = pp_transport_ranks(p->transport),
            self = pp_transport_self(p->transport);
        if (n != G && t > 1)
            return PP_ERR(PP_ERR_INVALID,
                          "the %s transport has %d ranks, but %d pipeline ranks x %d replicas x "
                          "%d tensor ranks need %d (launch %d processes)",
                          pp_transport_name(p->transport), n, s->ranks, dp, t, G, G);
        if (n != G)
            return PP_ERR(PP_ERR_INVALID,
                          "the %s transport has %d ranks, but %d pipeline ranks x %d replicas "
                          "need %d (launch %d processes)",
                          pp_transport_name(p->transport), n, s->ranks, dp, G, G);
        if (self < 0 || self >= G)
            return PP_ERR(PP_ERR_INVALID,
                          "the %s transport runs every rank in this process; pass NULL for the "
                          "in-process executor",
                          pp_transport_name(p->transport));
    }
    return PP_OK;
}

/* The stages' expert-parallel all-to-all over the rank's ep group, tagged with its order in
 * the step (replica field 2: the tensor-parallel collectives' kind, apart from tp's and
 * cp's). The MoE block runs on host memory: the transport takes its buffers as they are. */
static pp_status ep_alltoallv(void *ctx, const void *send, const size_t *send_bytes, void *recv,
                              const size_t *recv_bytes)
{
    rank_state *rs = ctx;
    pp_rt_executor *ex = rs->ex;
    uint64_t tag = pp_ex_coll_tag(TAG_TPAR, 2, rs->ep_seq++ & 0xfffff);
    return pp_transport_alltoallv(ex->tp, rs->g, rs->ep_group, ex->EP, tag, send, send_bytes,
                                  recv, recv_bytes);
}

/* The stages' tensor-parallel collectives (pp_rt_stage_params: the all-reduce, and under
 * sequence parallelism the all-gather and reduce-scatter) over the rank's group; each tagged
 * with its order in the step, which every member shares, and counted in the step's
 * tp_seconds / tp_bytes: the bytes this rank contributed (its n floats to an all-reduce or an
 * all-gather, its whole t * n partial sum to a reduce-scatter). */
typedef enum { TPC_ALLREDUCE, TPC_ALLGATHER, TPC_REDUCE_SCATTER } tp_coll_kind;

static pp_status tp_coll(rank_state *rs, tp_coll_kind k, const float *src, float *dst, size_t n)
{
    pp_rt_executor *ex = rs->ex;
    double t0 = pp_now();
    uint64_t tag = pp_ex_coll_tag(TAG_TPAR, 0, rs->tp_seq++ & 0xfffff);
    if (k == TPC_ALLGATHER) {
        PP_TRY(pp_ex_allgather(ex, rs, rs->tp_group, ex->TP, tag, src, dst, n));
    } else if (k == TPC_REDUCE_SCATTER) {
        PP_TRY(pp_ex_reduce_scatter(ex, rs, rs->tp_group, ex->TP, tag, src, dst, n));
    } else { /* in place on dst */
        float *host = NULL;
        pp_transport_req *req = NULL;
        PP_TRY(pp_ex_iallreduce(ex, rs, rs->tp_group, ex->TP, tag, dst, n, &host, &req));
        PP_TRY(pp_ex_wait(ex, rs, req, dst, host, n));
    }
    rs->tp_seconds += pp_now() - t0;
    rs->tp_bytes += (double)n * (k == TPC_REDUCE_SCATTER ? ex->TP : 1) * sizeof(float);
    return PP_OK;
}

static pp_status tp_allreduce(void *ctx, float *data, size_t n)
{
    return tp_coll(ctx, TPC_ALLREDUCE, data, data, n);
}

static pp_status tp_allgather(void *ctx, const float *part, float *full, size_t n)
{
    return tp_coll(ctx, TPC_ALLGATHER, part, full, n);
}

static pp_status tp_reduce_scatter(void *ctx, const float *full, float *part, size_t n)
{
    return tp_coll(ctx, TPC_REDUCE_SCATTER, full, part, n);
}

/* The stages' context-parallel ring (pp_rt_stage_params.cp_send / cp_recv): to the next rank
 * of the cp group and from the previous one, point to point with the tensor-parallel
 * collectives' tag kind and replica field 1 (a pair of ranks is never in both groups), each
 * tagged with its order in the step: the k-th send of a rank pairs with the next rank's k-th
 * receive. */
static pp_status cp_send(void *ctx, const float *buf, size_t n)
{
    rank_state *rs = ctx;
    pp_rt_executor *ex = rs->ex;
    int c = rs->replica % ex->CP, to = rs->cp_group[(c + 1) % ex->CP];
    uint64_t tag = pp_ex_coll_tag(TAG_TPAR, 1, rs->cp_sent++ & 0xfffff);
    return pp_ex_send(ex, rs, to, tag, buf, n * sizeof *buf);
}

/* Sent held (pp_transport_send_held): released at the end of the ring step by cp_release, so
 * the copy's lifetime is the sender's program order, as the memory plan counts it (the staged
 * backend's host copies are outside the accounting: sent plainly). */
static pp_status cp_send_held(void *ctx, const float *buf, size_t n)
{
    rank_state *rs = ctx;
    pp_rt_executor *ex = rs->ex;
    if (ex->staged)
        return cp_send(ctx, buf, n);
    int c = rs->replica % ex->CP, to = rs->cp_group[(c + 1) % ex->CP];
    uint64_t tag = pp_ex_coll_tag(TAG_TPAR, 1, rs->cp_sent++ & 0xfffff);
    return pp_transport_send_held(ex->tp, rs->g, to, tag, buf, n * sizeof *buf);
}

static pp_status cp_release(void *ctx)
{
    rank_state *rs = ctx;
    return pp_transport_release_held(rs->ex->tp, rs->g);
}

static pp_status cp_recv(void *ctx, float *buf, size_t n)
{
    rank_state *rs = ctx;
    pp_rt_executor *ex = rs->ex;
    int c = rs->replica % ex->CP, from = rs->cp_group[(c + ex->CP - 1) % ex->CP];
    uint64_t tag = pp_ex_coll_tag(TAG_TPAR, 1, rs->cp_received++ & 0xfffff);
    return pp_ex_recv(ex, rs, from, tag, buf, n * sizeof *buf);
}

/* The stages global rank g holds (its replica's copies of the stages placed on its rank, its
 * tensor-parallel shard of them). */
static pp_status create_stages(pp_rt_executor *ex, int g)
{
    int k = pp_rt_place_dp(&ex->place, g), r = ex_pp(ex, g), tpr = pp_rt_place_tp(&ex->place, g);
    for (int p = 0; p < ex->P; p++)
        for (int s = 0; s < ex->S; s++) {
            const pp_stage *st = pp_sched_stage(ex->sched, p, s);
            if (st->rank != r)
                continue;
            pp_rt_stage_params sp = {
                .model = &ex->model,
                .layer_begin = st->layer_begin,
                .layer_end = st->layer_end,
                .has_embed = s == 0,
                .has_head = s == ex->S - 1,
                .micro_batch = ex->B,
                .seq = ex->T,
                .seed = ex->seed, /* same seed everywhere: replicas start identical */
                .tp = ex->TP,
                .tp_rank = tpr,
                .tp_allreduce = tp_allreduce,
                .tp_ctx = &ex->rk[g],
                .mem_alloc = pp_ex_stage_alloc, /* the memory plan's arena */
                .mem_free = pp_ex_stage_free,
                .mem_ctx = &ex->rk[g],
                .sequence_parallel = ex->SP,
                .tp_allgather = tp_allgather,
                .tp_reduce_scatter = tp_reduce_scatter,
                .recompute = ex->recompute,
                .recompute_layers = ex->recompute_layers,
                .grads_outside = ex->shard == PP_RT_SHARD_GRADIENTS, /* executor_zero2.c */
                .cp = ex->CP,
                .cp_rank = k % ex->CP,
                .cp_send = cp_send_held,
                .cp_release = cp_release,
                .cp_recv = cp_recv,
                .cp_ctx = &ex->rk[g],
                .ep = ex->EP,
                .ep_rank = k % ex->EP,
                .ep_alltoallv = ep_alltoallv,
                .ep_ctx = &ex->rk[g],
            };
            PP_TRY(pp_rt_stage_create(
                ex->be[g], &sp,
                &ex->stages[(((size_t)k * ex->TP + tpr) * ex->P + p) * ex->S + s]));
        }
    return PP_OK;
}

/* A step's tokens or targets for the rank's stages, which take them in host memory (the stage
 * checks them against the vocabulary there, and copies each micro-batch's into its slot): the
 * backend's memory where that is host memory (counted under PP_MEM_ACTS), plain host memory
 * next to a device backend. */
static int32_t *tokens_alloc(rank_state *rs, size_t bytes)
{
    if (!pp_backend_is_device(rs->be))
        return pp_backend_alloc(rs->be, bytes, PP_MEM_ACTS);
    int32_t *p = malloc(bytes);
    if (!p)
        (void)PP_ERR(PP_ERR_NOMEM, "cannot allocate the step's %zu bytes of tokens", bytes);
    return p;
}

static void tokens_free(rank_state *rs, int32_t *p, size_t bytes)
{
    if (!pp_backend_is_device(rs->be))
        pp_backend_free(rs->be, p, bytes, PP_MEM_ACTS);
    else
        free(p);
}

/* Per rank: the slot table, the token buffers, the span array. */
static pp_status create_rank(pp_rt_executor *ex, int g)
{
    rank_state *rs = &ex->rk[g];
    rs->g = g;
    rs->replica = pp_rt_place_dp(&ex->place, g);
    rs->r = ex_pp(ex, g);
    rs->tpr = pp_rt_place_tp(&ex->place, g);
    rs->be = ex->be[g];
    if (!(rs->tp_group = pp_calloc((size_t)ex->TP, sizeof *rs->tp_group)))
        return PP_ERR_NOMEM;
    for (int j = 0; j < ex->TP; j++)
        rs->tp_group[j] = ex_global(ex, rs->replica, rs->r, j);
    if (!(rs->ep_group = pp_calloc((size_t)ex->EP, sizeof *rs->ep_group)))
        return PP_ERR_NOMEM;
    for (int j = 0; j < ex->EP; j++)
        rs->ep_group[j] = ex_global(ex, rs->replica / ex->EP * ex->EP + j, rs->r, rs->tpr);
    if (!(rs->cp_group = pp_calloc((size_t)ex->CP, sizeof *rs->cp_group)))
        return PP_ERR_NOMEM;
    for (int j = 0; j < ex->CP; j++)
        rs->cp_group[j] = ex_global(ex, rs->replica / ex->CP * ex->CP + j, rs->r, rs->tpr);
    rs->slot = pp_calloc((size_t)ex->P * ex->S * ex->N * SLOT__COUNT, sizeof *rs->slot);
    int n_ops = ex->sched->n_ops[rs->r];
    int n_red = 0;
    for (int i = 0; i < n_ops; i++)
        n_red += ex->sched->ops[rs->r][i].op == PP_OP_REDUCE;
    rs->red = pp_calloc((size_t)n_red + 1, sizeof *rs->red);
    rs->n_red_cap = n_red;
    if (!rs->slot || !rs->red)
        return PP_ERR_NOMEM;
    int first = 0, last = 0;
    for (int p = 0; p < ex->P; p++) {
        first |= ex_rank_of(ex, p, 0) == rs->r;
        last |= ex_rank_of(ex, p, ex->S - 1) == rs->r;
    }
    size_t bytes = (size_t)ex->N * ex->B * ex->Tl * sizeof(int32_t);
    if (first && !(rs->tok = tokens_alloc(rs, bytes)))
        return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
    if (last && !(rs->tgt = tokens_alloc(rs, bytes)))
        return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
    return pp_ex_marks_create(ex, rs);
}

/* A rank's backend, stages and state are made on the rank's own thread: the ranks'
 * initialisation runs in parallel, and each rank's memory is first touched by the thread (and
 * so the NUMA node) that will use it. */
static pp_status create_rank_all(pp_rt_executor *ex, int g)
{
    ex->rk[g].ex = ex;
    PP_TRY(pp_ex_backend_create(ex, g, &ex->be[g]));
    ex->rk[g].be = ex->be[g];
    ex->rk[g].r = ex_pp(ex, g);
    ex->rk[g].g = g;
    PP_TRY(pp_ex_arena_create(ex, &ex->rk[g]));
    /* a device backend's kernel scratch at the plan's size, held to it */
    PP_TRY(pp_backend_scratch_reserve(ex->be[g], ex->plan[ex_pp(ex, g)].kernel_scratch));
    PP_TRY(create_stages(ex, g));
    PP_TRY(create_rank(ex, g));
    return PP_OK;
}

/* Runs fn({ex, g}) on one thread per rank g (each rank's st and err cleared first) and joins
 * them all. A thread that cannot start is an error; with abort_tp the transport is aborted then
 * too, so that the ranks already started and waiting on the missing one wake up (at creation
 * there is no transport of the executor's own yet). */
static pp_status on_rank_threads(pp_rt_executor *ex, void *(*fn)(void *), int abort_tp)
{
    pp_ex_thread_arg *args = pp_calloc((size_t)ex->G, sizeof *args);
    if (!args)
        return PP_ERR_NOMEM;
    int started = 0;
    pp_status st = PP_OK;
    for (int g = 0; g < ex->G; g++) {
        args[g] = (pp_ex_thread_arg){ex, g};
        ex->rk[g].st = PP_OK;
        ex->rk[g].err[0] = '\0';
        if (pthread_create(&ex->rk[g].thread, NULL, fn, &args[g]) != 0) {
            st = PP_ERR(PP_ERR_NOMEM, "cannot start the thread of rank %d", g);
            if (abort_tp)
                pp_transport_abort(ex->tp);
            break;
        }
        started++;
    }
    for (int g = 0; g < started; g++)
        pthread_join(ex->rk[g].thread, NULL);
    free(args);
    return st;
}

static void *create_rank_main(void *arg)
{
    pp_ex_thread_arg *ta = arg;
    rank_state *rs = &ta->ex->rk[ta->g];
    pp_err_clear();
    rs->st = create_rank_all(ta->ex, ta->g);
    if (rs->st != PP_OK)
        snprintf(rs->err, sizeof rs->err, "%s", pp_err_msg());
    return NULL;
}

static pp_status create_ranks(pp_rt_executor *ex)
{
    if (ex->self >= 0) { /* a process transport: this process is one rank */
        PP_TRY(create_rank_all(ex, ex->self));
        return PP_OK;
    }
    PP_TRY(on_rank_threads(ex, create_rank_main, 0));
    for (int g = 0; g < ex->G; g++)
        if (ex->rk[g].st != PP_OK)
            return PP_ERR(ex->rk[g].st, "rank %d: %s", g, ex->rk[g].err);
    return PP_OK;
}

/* Index (pipe * S + stage) of some stage placed on pipeline rank r (every rank holds one). */
static int first_stage_of(const pp_rt_executor *ex, int r)
{
    for (int i = 0; i < ex->P * ex->S; i++)
        if (ex_rank_of(ex, i / ex->S, i % ex->S) == r)
            return i;
    return 0;
}

static pp_status create_all(pp_rt_executor *ex)
{
    int G = ex->G;
    ex->be = pp_calloc((size_t)G, sizeof *ex->be);
    ex->stages = pp_calloc((size_t)ex->dp * ex->TP * ex->P * ex->S, sizeof *ex->stages);
    ex->rk = pp_calloc((size_t)G, sizeof *ex->rk);
    ex->losses = pp_calloc((size_t)ex->dp * ex->N, sizeof *ex->losses);
    ex->spans = pp_calloc((size_t)G, sizeof *ex->spans);
    ex->sync = pp_calloc((size_t)G, sizeof *ex->sync);
    ex->optim = pp_calloc((size_t)G, sizeof *ex->optim);
    ex->tp_seconds = pp_calloc((size_t)G, sizeof *ex->tp_seconds);
    ex->tp_bytes = pp_calloc((size_t)G, sizeof *ex->tp_bytes);
    if (!ex->be || !ex->stages || !ex->rk || !ex->losses || !ex->spans || !ex->sync ||
        !ex->optim || !ex->tp_seconds || !ex->tp_bytes)
        return PP_ERR_NOMEM;
    /* every rank's spans, also under a process transport: rank 0 gathers them there */
    for (int g = 0; g < G; g++)
        if (!(ex->spans[g] =
                  pp_calloc((size_t)ex->sched->n_ops[ex_pp(ex, g)] + 1, sizeof *ex->spans[g])))
            return PP_ERR_NOMEM;
    PP_TRY(create_ranks(ex));
    int g0 = ex->self < 0 ? 0 : ex->self;
    ex->io_bytes = pp_rt_stage_io_bytes(
        ex->stages[((size_t)ex->rk[g0].replica * ex->TP + ex->rk[g0].tpr) * ex->P * ex->S +
                   first_stage_of(ex, ex->rk[g0].r)]);
    if (ex->self >= 0) {
        /* The REDUCE check needs every rank's stages, which live in other processes: the same
         * schedule passes it in-process (pprun's equivalence test runs both). */
        /* a host-memory transport keeps its buffers out of a device backend's accounting */
        if (!ex->staged)
            pp_transport_bind(ex->tp, ex->self, ex->be[ex->self]);
        return PP_OK;
    }
    PP_TRY(pp_ex_check_reduces(ex));
    PP_TRY(pp_transport_thread_create(G, ex->staged ? NULL : ex->be, &ex->tp));
    ex->own_tp = 1;
    return PP_OK;
}

pp_status pp_rt_executor_create(const pp_rt_exec_params *p, pp_rt_executor **out)
{
    *out = NULL;
    PP_TRY(check_params(p));
    pp_rt_executor *ex = pp_calloc(1, sizeof *ex);
    if (!ex)
        return PP_ERR_NOMEM;
    ex->model = *p->model;
    ex->B = p->micro_batch;
    ex->T = p->seq;
    ex->CP = p->cp > 1 ? p->cp : 1;
    ex->dp = p->dp * ex->CP; /* every cp rank is a replica (pp_rt_exec_params.cp) */
    ex->Tl = ex->T / ex->CP;
    ex->D = p->sched->ranks;
    ex->S = p->sched->stages_per_pipe;
    ex->P = p->sched->n_pipes;
    ex->N = p->sched->microbatches;
    ex->TP = p->tp > 1 ? p->tp : 1;
    ex->SP = ex->TP > 1 && p->sequence_parallel;
    ex->EP = p->ep > 1 ? p->ep : 1;
    ex->recompute = p->recompute, ex->recompute_layers = p->recompute_layers;
    ex->shard = ex->dp > 1 ? p->shard : PP_RT_SHARD_NONE; /* over the dp x cp replicas */
    ex->place = (pp_rt_place){.t = ex->TP, .p = ex->D, .dp = ex->dp};
    ex->G = pp_rt_place_ranks(&ex->place);
    ex->seed = p->seed;
    ex->adamw = p->adamw;
    ex->clip = p->clip;
    ex->tp = p->transport;
    ex->self = p->transport ? pp_transport_self(p->transport) : -1;
    ex->backend = p->backend;
    ex->precision = p->precision;
    ex->device = p->device;
    /* what the backend can do, from its row (common/pp_backends.h), never its kind */
    const pp_backend_row *be = pp_backend_row_of(p->backend);
    ex->device_mem = be && be->device_memory;
    /* a transport that takes device memory (NCCL) gets device pointers; the in-process and MPI
     * transports take host memory, so a device's tensors are staged through host copies */
    ex->tp_caps = p->transport ? pp_transport_caps(p->transport) : 0;
    ex->staged = be && be->staged && !(ex->tp_caps & PP_TRANSPORT_CAP_DEVICE_MEM);
    atomic_init(&ex->failed, -1);
    pp_status st = pp_sched_clone(p->sched, &ex->sched);
    if (st == PP_OK)
        st = pp_ex_plan_create(ex);
    if (st == PP_OK)
        st = create_all(ex);
    if (st == PP_OK)
        st = pp_ex_plan_check(ex);
    if (st != PP_OK) {
        pp_rt_executor_destroy(ex);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    *out = ex;
    return PP_OK;
}

static void destroy_rank(pp_rt_executor *ex, rank_state *rs)
{
    size_t n = (size_t)ex->P * ex->S * ex->N * SLOT__COUNT;
    for (size_t i = 0; rs->slot && i < n; i++)
        pp_ex_free(rs, rs->slot[i], ex->io_bytes, PP_MEM_COMM);
    for (int i = 0; i < rs->n_red; i++) {
        pp_ex_free(rs, rs->red[i].buf, rs->red[i].n * sizeof(float), PP_MEM_COMM);
        if (rs->red[i].host)
            pp_ex_host_free(rs->be, rs->red[i].host);
    }
    size_t bytes = (size_t)ex->N * ex->B * ex->Tl * sizeof(int32_t);
    tokens_free(rs, rs->tok, bytes);
    tokens_free(rs, rs->tgt, bytes);
    pp_ex_zero_free(rs, ex->dp);
    free(rs->slot);
    free(rs->red);
    free(rs->tp_group);
    free(rs->cp_group);
    free(rs->ep_group);
    pp_ex_marks_destroy(rs);
    pp_ex_host_free(rs->be, rs->stage_host);
}

void pp_rt_executor_destroy(pp_rt_executor *ex)
{
    if (!ex)
        return;
    /* The transport first: it returns the message buffers an aborted step left to the
     * backends, which go last (a borrowed one is only unbound from this rank's backend). */
    if (ex->own_tp)
        pp_transport_destroy(ex->tp);
    else if (ex->self >= 0 && ex->be && ex->be[ex->self] && !ex->staged)
        pp_transport_bind(ex->tp, ex->self, NULL);
    for (int g = 0; ex->rk && g < ex->G; g++)
        if (ex->rk[g].be)
            destroy_rank(ex, &ex->rk[g]);
    for (size_t i = 0; ex->stages && i < (size_t)ex->dp * ex->TP * ex->P * ex->S; i++)
        pp_rt_stage_destroy(ex->stages[i]); /* gives its slots back to the rank's arena */
    for (int g = 0; ex->rk && g < ex->G; g++)
        pp_ex_arena_destroy(&ex->rk[g]);
    for (int g = 0; ex->spans && g < ex->G; g++)
        free(ex->spans[g]);
    for (int g = 0; ex->be && g < ex->G; g++)
        pp_backend_destroy(ex->be[g]);
    free(ex->be);
    for (int r = 0; ex->asg && r < ex->D; r++)
        pp_rt_plan_assignment_fini(&ex->asg[r]);
    free(ex->asg);
    free(ex->plan);
    free(ex->stages);
    free(ex->rk);
    free(ex->losses);
    free(ex->spans);
    free(ex->sync);
    free(ex->optim);
    free(ex->tp_seconds);
    free(ex->tp_bytes);
    pp_sched_destroy(ex->sched);
    free(ex);
}

/* Starts one thread per rank and joins them all (also when one fails: the failing rank
 * aborts the transport, which wakes the others). */
static pp_status run_threads(pp_rt_executor *ex)
{
    if (ex->self >= 0) { /* a process transport: this process's rank, on this thread */
        pp_ex_thread_arg arg = {ex, ex->self};
        ex->rk[ex->self].st = PP_OK;
        ex->rk[ex->self].err[0] = '\0';
        pp_ex_rank_main(&arg);
        return PP_OK;
    }
    return on_rank_threads(ex, pp_ex_rank_main, 1);
}

pp_status pp_rt_executor_step(pp_rt_executor *ex, const int32_t *batch, int update,
                              pp_rt_step_result *out)
{
    memset(out, 0, sizeof *out);
    if (ex->broken)
        return PP_ERR(PP_ERR_INVALID, "this executor failed in an earlier step; create a new one");
    if (!batch)
        return PP_ERR(PP_ERR_INVALID, "a step needs a batch of %d rows",
                      pp_rt_executor_batch_rows(ex));
    ex->batch = batch;
    ex->update = update;
    for (int i = 0; i < ex->dp * ex->N; i++)
        ex->losses[i] = NAN;
    /* Processes start the step together, so their spans share a time origin (to the barrier's
     * skew: microseconds on one host). */
    if (ex->self >= 0 && pp_transport_barrier(ex->tp, ex->self) != PP_OK) {
        ex->broken = 1;
        return pp_err_trace(PP_ERR_DEVICE, __FILE__, __LINE__);
    }
    ex->t0 = pp_now();
    pp_status st = run_threads(ex);
    double seconds = pp_now() - ex->t0;
    int bad = atomic_load(&ex->failed);
    if (st != PP_OK || bad >= 0) {
        ex->broken = 1;
        if (st != PP_OK)
            return pp_err_trace(st, __FILE__, __LINE__);
        const rank_state *rs = &ex->rk[bad];
        if (ex->TP > 1)
            return PP_ERR(rs->st, "rank %d (replica %d, pipeline rank %d, tensor rank %d): %s",
                          bad, rs->replica, rs->r, rs->tpr, rs->err);
        return PP_ERR(rs->st, "rank %d (replica %d, pipeline rank %d): %s", bad, rs->replica, rs->r,
                      rs->err);
    }
    /* Mean over all micro-batches of all replicas, summed in a fixed order. */
    double sum = 0;
    for (int i = 0; i < ex->dp * ex->N; i++)
        sum += ex->losses[i];
    if (update)
        ex->steps_done++;
    if (ex->self < 0) { /* threads: the ranks' MoE losses in rank order (share_losses') */
        ex->aux_total = 0.0f;
        for (int g = 0; g < ex->G; g++)
            ex->aux_total += ex->rk[g].aux;
    }
    out->aux_loss = (double)ex->aux_total / (ex->dp * ex->N);
    out->loss = sum / (ex->dp * ex->N) + out->aux_loss;
    out->grad_norm = ex->rk[ex->self < 0 ? 0 : ex->self].norm;
    out->seconds = seconds;
    out->n_ranks = ex->G;
    out->spans = (const pp_rt_span *const *)ex->spans;
    out->sync = ex->sync;
    out->optim = ex->optim;
    out->tp_seconds = ex->tp_seconds;
    out->tp_bytes = ex->tp_bytes;
    return PP_OK;
}

int pp_rt_executor_ranks(const pp_rt_executor *ex)
{
    return ex->G;
}
const pp_sched *pp_rt_executor_sched(const pp_rt_executor *ex)
{
    return ex->sched;
}
int pp_rt_executor_batch_rows(const pp_rt_executor *ex)
{
    return ex->dp / ex->CP * ex->N * ex->B;
}

pp_rt_stage *pp_rt_executor_stage(pp_rt_executor *ex, int replica, int pipe, int stage)
{
    if (replica < 0 || replica >= ex->dp || pipe < 0 || pipe >= ex->P || stage < 0 ||
        stage >= ex->S)
        return NULL;
    return ex_stage(ex, replica, 0, pipe, stage);
}

pp_rt_stage *pp_rt_executor_stage_tp(pp_rt_executor *ex, int replica, int tp_rank, int pipe,
                                     int stage)
{
    if (tp_rank < 0 || tp_rank >= ex->TP || !pp_rt_executor_stage(ex, replica, pipe, stage))
        return NULL;
    return ex_stage(ex, replica, tp_rank, pipe, stage);
}

int pp_rt_executor_tp(const pp_rt_executor *ex)
{
    return ex->TP;
}

pp_backend *pp_rt_executor_backend(pp_rt_executor *ex, int g)
{
    return g >= 0 && g < ex->G ? ex->be[g] : NULL;
}

int pp_rt_executor_self(const pp_rt_executor *ex)
{
    return ex->self;
}
