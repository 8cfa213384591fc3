/* plan.c — the runtime's memory plan (pp_rt_plan.h): each rank's action list walked in order
 * with the executor's allocation rules and the sizes of pp_rt_sizes.h. walk() and
 * plan_rank() are the one place where a step's allocations are enumerated: every buffer the
 * executor carves from its arena is a buf_alloc here (in the executor's order), counted as it
 * is allocated and placed in the arena once the walk is done (plan_arena.c). The in-flight
 * counts come from the simulator (pp_sim_run), which also gives the timeline that decides
 * when the in-process transport's copies are reclaimed. What this does not do: allocate through
 * a backend, or know any backend beyond its row (pp_backends.h: what it can do, what its
 * kernels' scratch takes).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan_arena.h"
#include "pp_rt_plan.h"
#include "pp_rt_sizes.h"

/* Everything a rank's walk needs, fixed for the whole plan. */
typedef struct {
    const pp_rt_plan_params *p;
    const pp_sched *s;
    size_t B, T, N;
    pp_rt_dims d; /* the block's widths on one tensor-parallel rank (t, sp among them) */
    const pp_backend_row *be; /* the ranks' backend: what it can do (pp_backends.h) */
    int bf16;                 /* bf16 weights beside fp32 */
    int copies;   /* the in-process transport's copies count on the sender (host memory) */
    int tokens;   /* the step's tokens and targets are in the backend's memory */
    size_t io;    /* bytes of one activation between stages: B T C floats */
    double *done; /* [2 * n_pipes * S * N] when each RECV completed (copies only) */
    pp_sim_result sim;
} plan_ctx;

static int layers_of(const plan_ctx *x, int pipe, int stage)
{
    return pp_sched_stage_layers(x->s, pipe, stage);
}

static size_t stage_params(const plan_ctx *x, int pipe, int stage)
{
    int S = x->s->stages_per_pipe;
    return pp_rt_size_stage_params(&x->d, (size_t)layers_of(x, pipe, stage), stage == 0,
                                   stage == S - 1);
}

/* Gradient sharding's groups of a stage (executor_zero2.c): a tied embedding's copy ("wte" on
 * a pipe's first stage, "wte.head" on its last, with more than one stage) alone, the other
 * tensors together; c[i] the floats of each one's shard over dp. Returns how many (0..2). */
static int z2_groups(const plan_ctx *x, int pipe, int stage, size_t c[2])
{
    int S = x->s->stages_per_pipe, n = 0;
    size_t all = stage_params(x, pipe, stage), dp = (size_t)x->p->dp;
    size_t tied = S > 1 && !x->d.untied && (stage == 0 || stage == S - 1) ? x->d.Vl * x->d.C : 0;
    if (tied)
        c[n++] = (tied + dp - 1) / dp;
    if (all > tied)
        c[n++] = (all - tied + dp - 1) / dp;
    return n;
}

static int z2_on(const plan_ctx *x)
{
    return x->p->shard == PP_RT_SHARD_GRADIENTS && x->p->dp > 1;
}

/* Floats of the stage's whole gradient buffer (each group padded to dp shards) and of its
 * shards (*shard), the largest one's in *cmax. */
static size_t z2_whole(const plan_ctx *x, int pipe, int stage, size_t *shard, size_t *cmax)
{
    size_t c[2], w = 0;
    int n = z2_groups(x, pipe, stage, c);
    for (int i = 0; i < n; i++) {
        w += (size_t)x->p->dp * c[i];
        *shard += c[i];
        *cmax = c[i] > *cmax ? c[i] : *cmax;
    }
    return w;
}

static size_t slot_bytes(const plan_ctx *x, int pipe, int stage)
{
    int S = x->s->stages_per_pipe;
    return pp_rt_size_act_slot_bytes(&x->d, x->B, x->T, (size_t)layers_of(x, pipe, stage),
                                     stage == 0, stage == S - 1);
}

/* A stage on this plan's ranks as the backend's row sizes it (pp_backends.h). */
static pp_backend_stage stage_shape(const plan_ctx *x, int pipe, int stage)
{
    return (pp_backend_stage){.d = &x->d, .B = x->B, .T = x->T, .N = x->N,
                              .layers = (size_t)layers_of(x, pipe, stage),
                              .last = stage == x->s->stages_per_pipe - 1, .bf16 = x->bf16,
                              .kernel_threads = x->p->kernel_threads,
                              .blas_threads = x->p->blas_threads};
}

static size_t bwd_ws_bytes(const plan_ctx *x, int pipe, int stage)
{
    pp_backend_stage sh = stage_shape(x, pipe, stage);
    return pp_rt_size_bwd_ws(&x->d, x->B, x->T, sh.layers, sh.last, x->be->attn_scratch(&sh));
}

/* Held for W (split backward): what a stage's I keeps beside the slot until the W of the same
 * micro-batch (runtime/stage_bwd.c), PP_MEM_ACTS. */
static size_t wheld_bytes(const plan_ctx *x, int pipe, int stage)
{
    return pp_rt_size_wheld_bytes(&x->d, x->N, (size_t)layers_of(x, pipe, stage));
}

static size_t max_z(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* Gradient bytes of the stages of REDUCE `id` that rank r holds (the packed buffer). */
static size_t reduce_bytes(const plan_ctx *x, int id, int r)
{
    const pp_reduce *rd = &x->s->reduces[id];
    size_t n = 0;
    for (int k = 0; k < rd->n_stages; k++)
        if (pp_sched_stage(x->s, rd->stages[k].pipe, rd->stages[k].stage)->rank == r)
            n += stage_params(x, rd->stages[k].pipe, rd->stages[k].stage);
    return 4 * n;
}

/* ---- the rank's running count ---- */

typedef struct {
    int64_t cur[PP_MEM__COUNT], total;
    pp_rt_plan_rank *out;
    double *taken; /* when each copy this rank's transport still holds is received */
    int n_taken;
    pp_plan_arena arena; /* the step's buffers placed so far */
    int *reds;           /* [max ops] records of the REDUCE buffers posted */
    int *key_rec;        /* [n_keys] the record holding buffer `key`, or -1 */
    int *pend;           /* [pipes x stages] gradient sharding: I actions whose W has not run */
    size_t n_keys;
    int bad;             /* a buffer freed that was never allocated */
} tracker;

static void bump(tracker *t, pp_mem_category c, int64_t delta)
{
    t->cur[c] += delta;
    t->total += delta;
    if ((size_t)t->cur[c] > t->out->peak[c])
        t->out->peak[c] = (size_t)t->cur[c];
    if ((size_t)t->total > t->out->peak_total) {
        t->out->peak_total = (size_t)t->total;
        for (int k = 0; k < PP_MEM__COUNT; k++)
            t->out->at_peak[k] = (size_t)t->cur[k];
    }
}

/* Keys of the buffers a rank holds between actions (what the executor's slot table and the
 * stage's slots hold): the saved activations of (pipe, stage, mb); the tensor crossing
 * boundary b (between stages b and b + 1 of pipe) for mb, forward (an activation) or backward
 * (a gradient); what a split backward's I holds for the W of (pipe, stage, mb); the packed
 * buffer of REDUCE id. */
static size_t key_acts(const plan_ctx *x, int pipe, int stage, int mb)
{
    return ((size_t)pipe * x->s->stages_per_pipe + (size_t)stage) * x->s->microbatches + (size_t)mb;
}
static size_t key_boundary(const plan_ctx *x, int pipe, int b, int mb, int bwd)
{
    size_t psn = (size_t)x->s->n_pipes * x->s->stages_per_pipe * x->s->microbatches;
    return psn + 2 * key_acts(x, pipe, b, mb) + (size_t)bwd;
}
static size_t key_held(const plan_ctx *x, int pipe, int stage, int mb) /* split backward */
{
    size_t psn = (size_t)x->s->n_pipes * x->s->stages_per_pipe * x->s->microbatches;
    return 3 * psn + key_acts(x, pipe, stage, mb);
}
static size_t key_reduce(const plan_ctx *x, int id)
{
    return 4 * (size_t)x->s->n_pipes * x->s->stages_per_pipe * x->s->microbatches + (size_t)id;
}
/* gradient sharding: the stage's whole gradient while its backwards run (executor_zero2.c) */
static size_t key_grad(const plan_ctx *x, int pipe, int stage)
{
    return 4 * (size_t)x->s->n_pipes * x->s->stages_per_pipe * x->s->microbatches +
           (size_t)x->s->n_reduces + (size_t)pipe * x->s->stages_per_pipe + (size_t)stage;
}
static size_t n_keys(const pp_sched *s)
{
    return 4 * (size_t)s->n_pipes * s->stages_per_pipe * s->microbatches + (size_t)s->n_reduces +
           (size_t)s->n_pipes * s->stages_per_pipe;
}

/* A buffer of the step: counted, and placed in the arena. Returns its record. */
static int buf_alloc(tracker *t, pp_mem_category c, size_t bytes)
{
    bump(t, c, (int64_t)bytes);
    return pp_plan_arena_alloc(&t->arena, bytes, (int)c);
}

static void buf_free(tracker *t, int rec)
{
    if (rec < 0 || rec >= t->arena.n_recs) {
        t->bad = 1;
        return;
    }
    const pp_rt_plan_buf *b = &t->arena.recs[rec];
    bump(t, (pp_mem_category)b->cat, -(int64_t)b->bytes);
    pp_plan_arena_free(&t->arena, rec);
}

/* (A key out of range, from a stage before the first or after the last, is an error too.) */
static void key_alloc(tracker *t, size_t key, pp_mem_category c, size_t bytes)
{
    if (key >= t->n_keys || t->key_rec[key] >= 0) { /* or held twice */
        t->bad = 1;
        return;
    }
    t->key_rec[key] = buf_alloc(t, c, bytes);
}

static void key_free(tracker *t, size_t key)
{
    if (key >= t->n_keys) {
        t->bad = 1;
        return;
    }
    buf_free(t, t->key_rec[key]);
    t->key_rec[key] = -1;
}

static size_t recv_key(const pp_sched *s, int pipe, int stage, int mb, int bwd)
{
    return (((size_t)pipe * s->stages_per_pipe + (size_t)stage) * s->microbatches + (size_t)mb) *
               2 + (size_t)bwd;
}

/* A SEND of buffer `key` at simulated time `now`, received at `taken`: the transport's copy
 * (outside the arena) is made, then the executor's buffer freed. */
static void send_message(const plan_ctx *x, tracker *t, size_t key, double now, double taken)
{
    int64_t io = (int64_t)x->io;
    if (!x->copies) { /* staged (host copies outside the accounting) or the transport's own */
        key_free(t, key);
        return;
    }
    int k = 0;
    for (int i = 0; i < t->n_taken; i++) {
        if (t->taken[i] <= now)
            bump(t, PP_MEM_COMM, -io); /* reclaimed by this send */
        else
            t->taken[k++] = t->taken[i];
    }
    t->n_taken = k;
    t->taken[t->n_taken++] = taken;
    bump(t, PP_MEM_COMM, io); /* the transport's copy */
    key_free(t, key);         /* the executor's buffer, freed after the send */
}

/* Opens the stage's whole gradient before a backward allocates (B, I, W), closes it after a
 * B, or after the W that leaves no I waiting (executor_zero2.c). */
static void z2_open(const plan_ctx *x, tracker *t, const pp_action *a)
{
    if (!z2_on(x) || (a->op != PP_OP_B && a->op != PP_OP_I && a->op != PP_OP_W))
        return;
    size_t k = key_grad(x, a->pipe, a->stage), sh = 0, cm = 0;
    if (t->key_rec[k] < 0)
        key_alloc(t, k, PP_MEM_GRADS, 4 * z2_whole(x, a->pipe, a->stage, &sh, &cm));
}

static void z2_close(const plan_ctx *x, tracker *t, const pp_action *a)
{
    if (!z2_on(x) || (a->op != PP_OP_B && a->op != PP_OP_I && a->op != PP_OP_W))
        return;
    int *pend = &t->pend[(size_t)a->pipe * x->s->stages_per_pipe + (size_t)a->stage];
    if (a->op == PP_OP_I || (a->op == PP_OP_W && --*pend > 0)) {
        *pend += a->op == PP_OP_I;
        return;
    }
    key_free(t, key_grad(x, a->pipe, a->stage));
}

/* Rank r's actions in order (the order of allocations inside F and B follows executor_run.c,
 * stage_fwd.c and stage_bwd.c). Appends the REDUCE buffers' records to reds (n_red). */
static void walk(const plan_ctx *x, int r, tracker *t, int *reds, int *n_red)
{
    const pp_sched *s = x->s;
    int S = s->stages_per_pipe;
    for (int i = 0; i < s->n_ops[r]; i++) {
        const pp_action *a = &s->ops[r][i];
        int p = a->pipe, st = a->stage, m = a->mb, first = st == 0, last = st == S - 1;
        z2_open(x, t, a);
        switch ((pp_op_kind)a->op) {
        case PP_OP_RECV_F: /* the activation into stage st */
            key_alloc(t, key_boundary(x, p, st - 1, m, 0), PP_MEM_COMM, x->io);
            break;
        case PP_OP_RECV_B: /* the gradient of stage st's output */
            key_alloc(t, key_boundary(x, p, st, m, 1), PP_MEM_COMM, x->io);
            break;
        case PP_OP_SEND_F:
        case PP_OP_SEND_B: {
            int fwd = a->op == PP_OP_SEND_F;
            double now = 0, taken = 0;
            if (x->copies) {
                now = x->sim.spans[r][i].start;
                taken = x->done[recv_key(s, p, st + (fwd ? 1 : -1), m, !fwd)];
            }
            send_message(x, t, key_boundary(x, p, fwd ? st : st - 1, m, !fwd), now, taken);
            break;
        }
        case PP_OP_F: {
            /* sequence, context and vocabulary parallel, recomputation */
            size_t fws = pp_rt_size_fwd_ws(&x->d, x->B, x->T, (size_t)layers_of(x, p, st),
                                           last);
            if (!last) /* output */
                key_alloc(t, key_boundary(x, p, st, m, 0), PP_MEM_COMM, x->io);
            key_alloc(t, key_acts(x, p, st, m), PP_MEM_ACTS, slot_bytes(x, p, st)); /* saved */
            if (fws)
                buf_free(t, buf_alloc(t, PP_MEM_WORKSPACE, fws));
            if (!first) /* input consumed */
                key_free(t, key_boundary(x, p, st - 1, m, 0));
            break;
        }
        case PP_OP_B:
        case PP_OP_I: /* I: the held-for-W bytes come before the workspace; the slot stays */
            if (!first) /* input gradient */
                key_alloc(t, key_boundary(x, p, st - 1, m, 1), PP_MEM_COMM, x->io);
            if (a->op == PP_OP_I && wheld_bytes(x, p, st))
                key_alloc(t, key_held(x, p, st, m), PP_MEM_ACTS, wheld_bytes(x, p, st));
            buf_free(t, buf_alloc(t, PP_MEM_WORKSPACE, bwd_ws_bytes(x, p, st)));
            if (a->op == PP_OP_B)
                key_free(t, key_acts(x, p, st, m));
            if (!last) /* output gradient consumed */
                key_free(t, key_boundary(x, p, st, m, 1));
            break;
        case PP_OP_W: /* frees what its I held, then the slot (stage_bwd.c's order) */
            if (wheld_bytes(x, p, st))
                key_free(t, key_held(x, p, st, m));
            key_free(t, key_acts(x, p, st, m));
            break;
        case PP_OP_REDUCE: /* held to the step's end */
            if (st < 0 || st >= s->n_reduces) {
                t->bad = 1;
                break;
            }
            key_alloc(t, key_reduce(x, st), PP_MEM_COMM, reduce_bytes(x, st, r));
            reds[(*n_red)++] = t->key_rec[key_reduce(x, st)];
            t->key_rec[key_reduce(x, st)] = -1;
            break;
        default:
            break;
        }
        z2_close(x, t, a);
    }
}

static void plan_rank(const plan_ctx *x, int r, tracker *t)
{
    const pp_sched *s = x->s;
    int S = s->stages_per_pipe, first = 0, last = 0;
    pp_rt_plan_rank *o = t->out;
    memset(o, 0, sizeof *o);
    memset(t->cur, 0, sizeof t->cur);
    t->total = 0;
    t->n_taken = 0;
    size_t scratch = 0; /* the backend's kernel scratch, held throughout */
    size_t z2_shard = 0, z2_cmax = 0; /* gradient sharding's shards and largest one */
    for (int pipe = 0; pipe < s->n_pipes; pipe++)
        for (int st = 0; st < S; st++)
            if (pp_sched_stage(s, pipe, st)->rank == r) {
                o->params += stage_params(x, pipe, st);
                if (z2_on(x))
                    z2_whole(x, pipe, st, &z2_shard, &z2_cmax);
                first |= st == 0;
                last |= st == S - 1;
                if (x->be->kernel_scratch) {
                    pp_backend_stage sh = stage_shape(x, pipe, st);
                    scratch = max_z(scratch, x->be->kernel_scratch(&sh));
                }
            }
    size_t grads = 4 * o->params;
    o->kernel_scratch = scratch;
    bump(t, PP_MEM_WEIGHTS, (int64_t)((4 + (x->bf16 ? PP_RT_BF16_BYTES : 0)) * o->params));
    size_t dp = (size_t)x->p->dp, shard = (o->params + dp - 1) / dp; /* executor_zero.c */
    int zero = x->p->shard == PP_RT_SHARD_OPTIMIZER && dp > 1, z2 = z2_on(x);
    bump(t, PP_MEM_GRADS, (int64_t)(z2 ? 4 * z2_shard : grads)); /* z2: the shards only */
    bump(t, PP_MEM_OPTIM, (int64_t)(8 * (zero ? shard : z2 ? z2_shard : o->params)));
    if (x->tokens)
        bump(t, PP_MEM_ACTS, (int64_t)(4 * (size_t)s->microbatches * x->N * (first + last)));
    bump(t, PP_MEM_WORKSPACE, (int64_t)(scratch + x->be->library_workspace));
    pp_plan_arena_reset(&t->arena);
    for (size_t k = 0; k < t->n_keys; k++)
        t->key_rec[k] = -1;
    memset(t->pend, 0, (size_t)s->n_pipes * S * sizeof *t->pend);
    int n_red = 0;
    walk(x, r, t, t->reds, &n_red);
    /* End of step (executor_sync.c): the REDUCE buffers are freed as they complete, in the
     * order they were posted, then the data-parallel buffer (all of the rank's gradients) is
     * allocated and freed. */
    for (int i = 0; i < n_red; i++)
        buf_free(t, t->reds[i]);
    /* sharded: the pack padded to dp equal shards; gradient sharding: the all-gather of the
     * parameters, group by group through one buffer of the largest */
    if (x->p->dp > 1)
        buf_free(t, buf_alloc(t, PP_MEM_COMM, zero ? 4 * dp * shard
                                              : z2   ? 4 * dp * z2_cmax
                                                     : grads));
    t->bad |= t->arena.n_live != 0; /* every buffer of the step is freed within it */
    o->peak_units = x->sim.peak_activations[r];
    o->n_bufs = t->arena.n_recs;
}

static pp_status check(const pp_rt_plan_params *p)
{
    if (!p || !p->model || !p->sched)
        return PP_ERR(PP_ERR_INVALID, "memory plan: model and schedule are required");
    PP_TRY(pp_model_check_runnable(p->model));
    const pp_backend_row *be = pp_backend_row_of(p->backend);
    if (!be)
        return PP_ERR(PP_ERR_INVALID, "memory plan: backend kind %d: expected 0..%d (a row of "
                                      "pp_backend_list.h)", p->backend, PP_RT_BACKEND__COUNT - 1);
    /* a backend of one precision computes in it whatever is asked (the CPU's fp32) */
    if (be->precisions != (1u << PP_PREC_FP32) && !pp_backend_row_has_precision(be, p->precision))
        return PP_ERR(PP_ERR_INVALID, "memory plan: backend %s does not compute in precision %d",
                      be->name, p->precision);
    if (p->micro_batch < 1 || p->dp < 1 || p->seq < 1 || p->seq > p->model->seq)
        return PP_ERR(PP_ERR_INVALID,
                      "memory plan: needs micro_batch >= 1, dp >= 1, 1 <= seq <= %d (got %d, %d, "
                      "%d)",
                      p->model->seq, p->micro_batch, p->dp, p->seq);
    if (p->tp > 1)
        PP_TRY(pp_model_check_tp(p->model, p->tp));
    if (p->sequence_parallel)
        PP_TRY(pp_model_check_sp(p->seq, p->tp));
    PP_TRY(pp_rt_check_recompute(p->recompute, p->recompute_layers));
    PP_TRY(pp_model_check_cp(p->seq, p->cp, p->sequence_parallel ? p->tp : 1));
    if (p->cp > 1 && !be->context_parallel)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "context parallelism (--cp %d): the %s backend has no context-parallel "
                      "attention kernel (attention_cp_fwd / _bwd); run it on --backend cpu",
                      p->cp, be->name);
    if (p->sched->layers != p->model->layers)
        return PP_ERR(PP_ERR_INVALID, "memory plan: the schedule splits %d layers, the model has %d",
                      p->sched->layers, p->model->layers);
    return PP_OK;
}

int pp_rt_plan_is_exact(const pp_rt_plan_params *p)
{
    const pp_backend_row *be = pp_backend_row_of(p->backend);
    return be && be->staged && !(p->transport_caps & PP_TRANSPORT_CAP_DEVICE_MEM);
}

static void ctx_fini(plan_ctx *x)
{
    pp_sim_result_fini(&x->sim);
    free(x->done);
}

static pp_status ctx_init(const pp_rt_plan_params *p, plan_ctx *x)
{
    const pp_sched *s = p->sched;
    const pp_model_cfg *m = p->model;
    memset(x, 0, sizeof *x);
    x->p = p;
    x->s = s;
    size_t t = p->tp > 1 ? (size_t)p->tp : 1, cp = p->cp > 1 ? (size_t)p->cp : 1;
    /* under context parallelism a rank holds seq / cp tokens of each sequence */
    x->B = (size_t)p->micro_batch, x->T = (size_t)p->seq / cp, x->N = x->B * x->T;
    x->d = pp_rt_dims_with_cp(pp_rt_dims_of(m, t, t > 1 && p->sequence_parallel ? t : 1), cp);
    x->d.rc = p->recompute, x->d.rc_k = (size_t)p->recompute_layers;
    x->be = pp_backend_row_of(p->backend); /* check() has refused a kind without a row */
    x->bf16 = p->precision == PP_PREC_BF16 && pp_backend_row_has_precision(x->be, PP_PREC_BF16);
    x->tokens = !x->be->device_memory; /* beside a device: plain host memory */
    x->copies = !x->be->staged && !(p->transport_caps & PP_TRANSPORT_CAP_DEVICE_MEM);
    x->io = pp_rt_size_io_bytes(x->N, x->d.C, x->d.sp);
    pp_cost cost;
    PP_TRY(pp_cost_init_unit(&cost, s, 2.0));
    pp_status st = pp_sim_run(s, &cost, x->copies, &x->sim);
    pp_cost_fini(&cost);
    if (st != PP_OK) {
        pp_sim_result_fini(&x->sim);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    if (!x->copies)
        return PP_OK;
    x->done = pp_calloc(2 * (size_t)s->n_pipes * s->stages_per_pipe * s->microbatches,
                        sizeof *x->done);
    if (!x->done) {
        ctx_fini(x);
        return PP_ERR_NOMEM;
    }
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->n_ops[r]; i++) {
            const pp_action *a = &s->ops[r][i];
            if (a->op == PP_OP_RECV_F || a->op == PP_OP_RECV_B)
                x->done[recv_key(s, a->pipe, a->stage, a->mb, a->op == PP_OP_RECV_B)] =
                    x->sim.spans[r][i].end;
        }
    return PP_OK;
}

static void tracker_fini(tracker *t)
{
    free(t->taken);
    free(t->reds);
    free(t->key_rec);
    free(t->pend);
    pp_plan_arena_fini(&t->arena);
}

void pp_rt_plan_assignment_fini(pp_rt_plan_assignment *a)
{
    if (!a)
        return;
    free(a->bufs);
    memset(a, 0, sizeof *a);
}

/* Rank r's records, copied out of the arena's table. */
static pp_status copy_assignment(const tracker *t, pp_rt_plan_assignment *a)
{
    memset(a, 0, sizeof *a);
    a->n = t->arena.n_recs;
    a->arena_bytes = t->arena.high;
    if (!(a->bufs = pp_calloc(a->n ? (size_t)a->n : 1, sizeof *a->bufs)))
        return PP_ERR_NOMEM;
    memcpy(a->bufs, t->arena.recs, (size_t)a->n * sizeof *a->bufs);
    return PP_OK;
}

static pp_status plan_all(const plan_ctx *x, pp_rt_plan_rank *out, pp_rt_plan_assignment *asg,
                          tracker *t)
{
    const pp_sched *s = x->s;
    for (int r = 0; r < s->ranks; r++) {
        t->out = &out[r];
        plan_rank(x, r, t);
        if (t->arena.nomem)
            return PP_ERR_NOMEM;
        if (t->bad)
            return PP_ERR(PP_ERR_CHECK,
                          "memory plan: rank %d frees a buffer it does not hold, or keeps one past "
                          "the step's end (plan.c's walk does not follow the schedule)",
                          r);
        if (!asg)
            continue; /* the placement is quadratic in the buffers: only when asked for */
        PP_TRY(pp_plan_arena_place(&t->arena));
        out[r].arena_bytes = t->arena.high;
        PP_TRY(copy_assignment(t, &asg[r]));
    }
    return PP_OK;
}

pp_status pp_rt_plan_assign(const pp_rt_plan_params *p, pp_rt_plan_rank *out,
                            pp_rt_plan_assignment *asg)
{
    PP_TRY(check(p));
    const pp_sched *s = p->sched;
    if (asg)
        memset(asg, 0, (size_t)s->ranks * sizeof *asg);
    plan_ctx x;
    PP_TRY(ctx_init(p, &x));
    int max_ops = 1;
    for (int r = 0; r < s->ranks; r++)
        max_ops = s->n_ops[r] > max_ops ? s->n_ops[r] : max_ops;
    tracker t = {.taken = pp_calloc((size_t)max_ops, sizeof(double)),
                 .reds = pp_calloc((size_t)max_ops, sizeof(int)),
                 .key_rec = pp_calloc(n_keys(s) + 1, sizeof(int)),
                 .pend = pp_calloc((size_t)s->n_pipes * s->stages_per_pipe + 1, sizeof(int)),
                 .n_keys = n_keys(s)};
    pp_status st = t.taken && t.reds && t.key_rec && t.pend ? plan_all(&x, out, asg, &t) : PP_ERR_NOMEM;
    tracker_fini(&t);
    ctx_fini(&x);
    if (st != PP_OK && asg)
        for (int r = 0; r < s->ranks; r++)
            pp_rt_plan_assignment_fini(&asg[r]);
    return st;
}

pp_status pp_rt_plan_compute(const pp_rt_plan_params *p, pp_rt_plan_rank *out)
{
    return pp_rt_plan_assign(p, out, NULL);
}

const char *pp_mem_category_name(pp_mem_category c)
{
    static const char *const names[PP_MEM__COUNT] = {
        [PP_MEM_WEIGHTS] = "weights", [PP_MEM_GRADS] = "grads", [PP_MEM_OPTIM] = "optim",
        [PP_MEM_ACTS] = "acts",       [PP_MEM_COMM] = "comm",   [PP_MEM_WORKSPACE] = "workspace",
    };
    if ((int)c < 0 || c >= PP_MEM__COUNT)
        return "unknown";
    return names[c];
}

pp_status pp_rt_check_recompute(int mode, int k)
{
    if (mode < PP_RT_RC_NONE || mode > PP_RT_RC_FULL)
        return PP_ERR(PP_ERR_INVALID, "recompute: mode %d is none of 0 (none), 1 (selective), "
                                      "2 (full)", mode);
    if (k < 0 || (k > 0 && mode != PP_RT_RC_FULL))
        return PP_ERR(PP_ERR_INVALID, "recompute layers: %d; expected 0, or k >= 1 with full "
                                      "recomputation (the first k blocks of each stage)", k);
    return PP_OK;
}
