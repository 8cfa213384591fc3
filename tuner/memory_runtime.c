/* memory_runtime.c — peak bytes per rank of the bundled runtime (pprun on the CPU backend), the
 * memory model used when the tuner plans trials on this machine (opts.precision = FP32), and
 * the same walk for the runtime's CUDA backend (pp_tune_memory_runtime_on: what differs is
 * listed in pp_tune.h and at cuda_ws_bytes below; checked against the CUDA backend's own
 * accounting under the CUDA emulation in CI, not yet against a GPU).
 *
 * The runtime allocates everything through its backend's counters (runtime/pp_rt.h), in fp32:
 *   weights, gradients: one buffer each per stage (parameters as in runtime/stage.c: token and
 *     position embedding on a pipe's first stage, 12 tensors per block, final LayerNorm and, when
 *     the embedding is elsewhere, the head's copy of the tied embedding);
 *   optimizer: AdamW m and v, 2 x parameters, held from the first step on;
 *   activations: the rank's token and target buffers (N B T int32 each, ranks with a first /
 *     last stage) and one slot per in-flight micro-batch per stage: per block N(8C + 2F) + 4N
 *     floats plus the B H T^2 attention probabilities, per head N(2C + V) + 2N, plus the
 *     micro-batch's tokens/targets (N = B T rows);
 *   communication: one B T C buffer per received tensor until the compute consuming it ends,
 *     per produced tensor until its SEND, the packed gradients of every REDUCE until the step's
 *     end, then the data-parallel all-reduce buffer; and the in-process transport's copy
 *     of every sent message, counted on the sender until the receiver has taken it and the
 *     sender sends again (runtime/transport_thread.c reclaims on the next send or the flush).
 *     When a message is taken depends on timing: the schedule is simulated (F = 1, B = 2,
 *     free links: the unit costs of schedules.md) and a copy is reclaimed at the sender's
 *     first SEND that starts after the matching RECV has completed in that timeline;
 *   workspace: during a backward, (2 N C + N max(F, 3C)) floats + T^2 floats of attention scratch.
 * The rank's action list is walked in order with these allocation rules, so the peak is the
 * rank's own (the order of allocations inside F and B follows runtime/executor_run.c).
 * Steady state (step >= 2) is modelled: the optimizer state is already allocated.
 * What this does not model: allocations outside the backend (thread stacks, the transport's
 * own queues), which the runtime does not count either.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_tune.h"

typedef struct {
    double N, C, F, V, T, H, B;
    int cuda, bf16; /* the CUDA backend (staged transports), its bf16 mode */
} dims;

static double block_params(const dims *x)
{
    return 2 * x->C + 3 * x->C * x->C + 3 * x->C + x->C * x->C + x->C + 2 * x->C +
           x->F * x->C + x->F + x->C * x->F + x->C;
}

static double stage_params(const pp_tune_model *m, const pp_sched *s, const dims *x, int pipe,
                           int stage)
{
    int S = s->stages_per_pipe, first = stage == 0, last = stage == S - 1;
    double n = pp_sched_stage_layers(s, pipe, stage) * block_params(x);
    if (first)
        n += x->V * x->C + (double)m->seq * x->C;
    if (last)
        n += 2 * x->C + (first ? 0 : x->V * x->C);
    return n;
}

/* Bytes of one micro-batch's slot of saved activations on a stage. */
static double slot_bytes(const pp_sched *s, const dims *x, int pipe, int stage)
{
    int S = s->stages_per_pipe, first = stage == 0, last = stage == S - 1;
    double layer = x->N * (8 * x->C + 2 * x->F) + 4 * x->N + x->B * x->H * x->T * x->T;
    double head = x->N * (2 * x->C + x->V) + 2 * x->N;
    double prefix = (first ? x->N : 0) + (last ? x->N : 0);
    return 4.0 * (prefix + pp_sched_stage_layers(s, pipe, stage) * layer + (last ? head : 0));
}

static double workspace_bytes(const pp_sched *s, const dims *x, int pipe, int stage)
{
    if (pp_sched_stage_layers(s, pipe, stage) == 0)
        return 4.0 * 2 * x->N * x->C;
    double big = x->N * (x->F > 3 * x->C ? x->F : 3 * x->C);
    /* attention scratch: the CPU backend's dS of one (batch row, head); the CUDA backend's dA
     * of every head of one batch row (runtime/cuda/attention_cuda.cu) */
    double scratch = 4.0 * x->T * x->T * (x->cuda ? x->H : 1);
    return 4.0 * (2 * x->N * x->C + big) + scratch;
}

/* runtime/cuda/params_cuda.cu: SUMSQ_BLOCKS partial sums in double */
#define CUDA_SUMSQ_BYTES (256.0 * 8)

static double align64(double n)
{
    return ceil(n / 64) * 64;
}

/* The CUDA backend's kernel scratch (pp_cuda_ws_reserve): one buffer per rank that only
 * grows, so its size is the largest single need over the step, reached in the first step (no
 * bf16 weight copies exist before the first AdamW, so every GEMM converts both operands).
 * fp32: the loss kernel's per-row losses and the gradient norm's partial sums. bf16: also the
 * operand copies of each GEMM (A padded to 64 elements) and of the attention's products. */
static double cuda_ws_bytes(const pp_sched *s, const dims *x, int pipe, int stage)
{
    int last = stage == s->stages_per_pipe - 1, layers = pp_sched_stage_layers(s, pipe, stage);
    /* bytes: the gradient norm's block partials (256 doubles, every rank), the per-row losses */
    double need = fmax(CUDA_SUMSQ_BYTES, last ? 4.0 * x->N : 0);
    if (!x->bf16)
        return need;
    double e = 0, N = x->N, C = x->C, V = x->V, T = x->T, H = x->H;
    if (layers > 0) {
        const double lin[4][2] = {{C, 3 * C}, {C, C}, {C, x->F}, {x->F, C}}; /* in, out */
        for (int i = 0; i < 4; i++) {
            double in = lin[i][0], out = lin[i][1];
            e = fmax(e, align64(N * in) + out * in);  /* forward: x w^T */
            e = fmax(e, align64(N * out) + out * in); /* dx = dy w */
            e = fmax(e, align64(N * out) + N * in);   /* dw = dy^T x */
        }
        e = fmax(e, align64(x->B * T * 3 * C) + x->B * H * T * T); /* attention forward */
        e = fmax(e, align64(T * 3 * C) + align64(T * C) + 2 * align64(H * T * T)); /* backward */
    }
    if (last) {
        e = fmax(e, align64(N * C) + V * C); /* logits = x wte^T */
        e = fmax(e, align64(N * V) + V * C); /* dx = dlogits wte */
        e = fmax(e, align64(N * V) + N * C); /* dwte += dlogits^T x */
    }
    return fmax(need, 2.0 * e);
}

/* cuBLAS workspace of each CUDA backend (runtime/cuda/backend_cuda.cu: 32 MiB + 256 B). */
#define CUDA_BLAS_WS_BYTES (32.0 * 1024 * 1024 + 256)

/* Gradient floats of the stages of reduce `id` held by rank r. */
static double reduce_bytes(const pp_tune_model *m, const pp_sched *s, const dims *x, int id, int r)
{
    const pp_reduce *rd = &s->reduces[id];
    double n = 0;
    for (int k = 0; k < rd->n_stages; k++)
        if (pp_sched_stage(s, rd->stages[k].pipe, rd->stages[k].stage)->rank == r)
            n += stage_params(m, s, x, rd->stages[k].pipe, rd->stages[k].stage);
    return 4.0 * n;
}

typedef struct {
    double cur, peak, acts, comm, work, at_acts, at_comm, at_work;
    double reduces; /* packed gradients of posted REDUCEs, held until the step's end */
} tracker;

static void bump(tracker *t, double delta_acts, double delta_comm, double delta_work)
{
    t->acts += delta_acts, t->comm += delta_comm, t->work += delta_work;
    t->cur += delta_acts + delta_comm + delta_work;
    if (t->cur > t->peak) {
        t->peak = t->cur;
        t->at_acts = t->acts, t->at_comm = t->comm, t->at_work = t->work;
    }
}

/* When each RECV completed in the simulated timeline, keyed by (pipe, stage, mb, direction). */
typedef struct {
    double *done; /* [2 * n_pipes * S * N] */
    const pp_sim_result *sim;
} timeline;

static size_t recv_key(const pp_sched *s, int pipe, int stage, int mb, int bwd)
{
    return (((size_t)pipe * s->stages_per_pipe + (size_t)stage) * s->microbatches + (size_t)mb) *
               2 + (size_t)bwd;
}

static pp_status timeline_build(const pp_sched *s, timeline *tl)
{
    memset(tl, 0, sizeof *tl);
    pp_cost cost;
    PP_TRY(pp_cost_init_unit(&cost, s, 2.0));
    pp_sim_result *sim = pp_calloc(1, sizeof *sim);
    tl->done = pp_calloc(2 * (size_t)s->n_pipes * s->stages_per_pipe * s->microbatches,
                         sizeof *tl->done);
    pp_status st = sim && tl->done ? pp_sim_run(s, &cost, 1, sim) : PP_ERR_NOMEM;
    pp_cost_fini(&cost);
    if (st != PP_OK) {
        free(sim);
        free(tl->done);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->n_ops[r]; i++) {
            const pp_action *a = &s->ops[r][i];
            if (pp_op_is_recv(a->op))
                tl->done[recv_key(s, a->pipe, a->stage, a->mb, a->op == PP_OP_RECV_B)] =
                    sim->spans[r][i].end;
        }
    tl->sim = sim;
    return PP_OK;
}

static void timeline_fini(timeline *tl)
{
    if (tl->sim) {
        pp_sim_result_fini((pp_sim_result *)tl->sim);
        free((void *)tl->sim);
    }
    free(tl->done);
}

/* Messages this rank sent whose copies are still counted: the time their receive completes. */
typedef struct {
    double *taken;
    int n;
} outbox;

static void send_message(outbox *ob, tracker *t, double now, double taken, double io, int staged)
{
    if (staged) { /* the transport's copy is in host memory, outside the device's accounting */
        bump(t, 0, -io, 0);
        return;
    }
    int k = 0;
    for (int i = 0; i < ob->n; i++) {
        if (ob->taken[i] <= now)
            bump(t, 0, -io, 0); /* reclaimed by this send */
        else
            ob->taken[k++] = ob->taken[i];
    }
    ob->n = k;
    ob->taken[ob->n++] = taken;
    bump(t, 0, io, 0);  /* the transport's copy */
    bump(t, 0, -io, 0); /* the executor's buffer, freed after the send */
}

static void walk(const pp_tune_model *m, const pp_sched *s, const dims *x, int r,
                 const timeline *tl, outbox *ob, tracker *t)
{
    int S = s->stages_per_pipe;
    double io = 4.0 * x->N * x->C;
    for (int i = 0; i < s->n_ops[r]; i++) {
        const pp_action *a = &s->ops[r][i];
        int first = a->stage == 0, last = a->stage == S - 1;
        switch ((pp_op_kind)a->op) {
        case PP_OP_RECV_F:
        case PP_OP_RECV_B:
            bump(t, 0, io, 0);
            break;
        case PP_OP_SEND_F:
        case PP_OP_SEND_B: {
            int fwd = a->op == PP_OP_SEND_F;
            double taken = tl->done[recv_key(s, a->pipe, pp_action_peer_stage(a), a->mb, !fwd)];
            send_message(ob, t, tl->sim->spans[r][i].start, taken, io, x->cuda);
            break;
        }
        case PP_OP_F:
            bump(t, 0, last ? 0 : io, 0);                             /* output buffer */
            bump(t, slot_bytes(s, x, a->pipe, a->stage), 0, 0);       /* saved activations */
            bump(t, 0, first ? 0 : -io, 0);                           /* input consumed */
            break;
        case PP_OP_B: {
            double ws = workspace_bytes(s, x, a->pipe, a->stage);
            bump(t, 0, first ? 0 : io, 0);                            /* input gradient */
            bump(t, 0, 0, ws);
            bump(t, 0, 0, -ws);
            bump(t, -slot_bytes(s, x, a->pipe, a->stage), last ? 0 : -io, 0);
            break;
        }
        case PP_OP_REDUCE: {
            double bytes = reduce_bytes(m, s, x, a->stage, r);
            t->reduces += bytes;
            bump(t, 0, bytes, 0); /* held to the end */
            break;
        }
        default:
            break;
        }
    }
}

pp_status pp_tune_memory_runtime(const pp_tune_model *m, const pp_tune_config *c,
                                 const pp_sched *s, pp_tune_rank_mem *mem)
{
    return pp_tune_memory_runtime_on(m, c, s, PP_TUNE_RT_CPU, mem);
}

pp_status pp_tune_memory_runtime_on(const pp_tune_model *m, const pp_tune_config *c,
                                    const pp_sched *s, pp_tune_rt_backend backend,
                                    pp_tune_rank_mem *mem)
{
    if (c->t != 1)
        return PP_ERR(PP_ERR_UNSUPPORTED, "the runtime does not run tensor parallelism (t = %d)",
                      c->t);
    if (backend != PP_TUNE_RT_CPU && backend != PP_TUNE_RT_CUDA_FP32 &&
        backend != PP_TUNE_RT_CUDA_BF16)
        return PP_ERR(PP_ERR_INVALID, "runtime backend %d is not cpu (0), cuda fp32 (1) or cuda "
                                      "bf16 (2)", (int)backend);
    dims x = {.C = m->hidden, .F = m->ffn, .V = m->vocab, .T = m->seq, .H = m->heads, .B = c->b};
    x.cuda = backend != PP_TUNE_RT_CPU;
    x.bf16 = backend == PP_TUNE_RT_CUDA_BF16;
    x.N = x.B * x.T;
    int S = s->stages_per_pipe;
    timeline tl;
    PP_TRY(timeline_build(s, &tl));
    int max_ops = 1;
    for (int r = 0; r < s->ranks; r++)
        max_ops = s->n_ops[r] > max_ops ? s->n_ops[r] : max_ops;
    outbox ob = {pp_calloc((size_t)max_ops, sizeof(double)), 0};
    if (!ob.taken) {
        timeline_fini(&tl);
        return PP_ERR_NOMEM;
    }
    for (int r = 0; r < s->ranks; r++) {
        pp_tune_rank_mem *o = &mem[r];
        memset(o, 0, sizeof *o);
        int first = 0, last = 0;
        double ws = 0; /* CUDA: the kernel scratch and the cuBLAS workspace, held throughout */
        for (int pipe = 0; pipe < s->n_pipes; pipe++)
            for (int st = 0; st < S; st++)
                if (pp_sched_stage(s, pipe, st)->rank == r) {
                    o->params += stage_params(m, s, &x, pipe, st);
                    first |= st == 0;
                    last |= st == S - 1;
                    if (x.cuda)
                        ws = fmax(ws, cuda_ws_bytes(s, &x, pipe, st));
                }
        if (x.cuda)
            ws += CUDA_BLAS_WS_BYTES;
        /* bf16: AdamW keeps a bf16 copy of every weight it updates (2 B per parameter) */
        o->weights = (x.bf16 ? 6 : 4) * o->params;
        o->grads = 4 * o->params;
        o->optim = 8 * o->params;
        /* the step's tokens / targets: the CPU backend's memory; host memory beside a GPU */
        double tokens = x.cuda ? 0 : 4.0 * c->N * x.N * (first + last);
        tracker t = {0};
        bump(&t, tokens, 0, 0);
        bump(&t, 0, 0, ws);
        ob.n = 0;
        walk(m, s, &x, r, &tl, &ob, &t);
        /* End of step (runtime/executor_sync.c): the REDUCE buffers are freed when they
         * complete, then the data-parallel buffer (all of the rank's gradients) is allocated. */
        bump(&t, 0, -t.reduces, 0);
        if (c->d > 1)
            bump(&t, 0, o->grads, 0);
        o->acts = t.at_acts;
        o->comm = t.at_comm;
        o->workspace = t.at_work;
        o->total = o->weights + o->grads + o->optim + t.peak;
        /* in-flight units as the Megatron-style model reports them */
        double unit_layers = (double)s->layers / s->ranks, cur = 0, peak = 0;
        for (int i = 0; i < s->n_ops[r]; i++) {
            const pp_action *a = &s->ops[r][i];
            if (a->op == PP_OP_F || a->op == PP_OP_B) {
                cur += (a->op == PP_OP_F ? 1 : -1) *
                       pp_sched_stage_layers(s, a->pipe, a->stage) / unit_layers;
                peak = cur > peak ? cur : peak;
            }
        }
        o->peak_units = peak;
    }
    free(ob.taken);
    timeline_fini(&tl);
    return PP_OK;
}
