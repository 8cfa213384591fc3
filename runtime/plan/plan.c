/* plan.c — the runtime's memory plan (pp_rt_plan.h): each rank's action list walked in order
 * with the executor's allocation rules and the sizes of pp_rt_sizes.h. The in-flight counts
 * come from the simulator (pp_sim_run), which also gives the timeline that decides when the
 * in-process transport's copies are reclaimed. What this does not do: allocate through a
 * backend, or know anything of CUDA beyond the sizes its backend asks for.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt_plan.h"
#include "pp_rt_sizes.h"

/* Everything a rank's walk needs, fixed for the whole plan. */
typedef struct {
    const pp_rt_plan_params *p;
    const pp_sched *s;
    size_t B, T, N, C, F, V, NH, seq;
    size_t t;  /* tensor-parallel ranks (1: none) */
    size_t sp; /* sequence shards: t with sequence parallelism, else 1 */
    int cuda, bf16;
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
    return pp_rt_size_stage_params((size_t)layers_of(x, pipe, stage), stage == 0, stage == S - 1, x->C,
                              x->F, x->V, x->seq, x->t);
}

static size_t slot_bytes(const plan_ctx *x, int pipe, int stage)
{
    int S = x->s->stages_per_pipe;
    return pp_rt_size_act_slot_bytes(x->B, x->T, (size_t)layers_of(x, pipe, stage), stage == 0,
                                stage == S - 1, x->C, x->F, x->V, x->NH, x->t, x->sp);
}

static size_t bwd_ws_bytes(const plan_ctx *x, int pipe, int stage)
{
    size_t scratch = x->cuda ? pp_rt_size_attn_scratch_cuda(x->NH / x->t, x->T)
                             : pp_rt_size_attn_scratch_cpu(x->T);
    return pp_rt_size_bwd_ws(x->N, x->C, x->F, (size_t)layers_of(x, pipe, stage),
                             stage == x->s->stages_per_pipe - 1, scratch, x->t, x->sp);
}

/* Held for W (split backward): what a stage's I keeps beside the slot until the W of the same
 * micro-batch (runtime/stage_bwd.c), PP_MEM_ACTS. */
static size_t wheld_bytes(const plan_ctx *x, int pipe, int stage)
{
    return pp_rt_size_wheld_bytes(x->N, (size_t)layers_of(x, pipe, stage), x->C, x->F, x->t,
                                  x->sp);
}

static size_t max_z(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* The CUDA backend's kernel scratch (pp_cuda_ws_reserve) for a stage: one buffer per rank that
 * only grows, so its size is the largest single need over the step, reached in the first step
 * (no bf16 weight copies exist before the first AdamW, so every GEMM converts both operands).
 * fp32: the loss kernel's per-row losses and the gradient norm's partial sums. bf16: also the
 * operand copies of each GEMM and of the attention's products. */
static size_t cuda_scratch_bytes(const plan_ctx *x, int pipe, int stage)
{
    int last = stage == x->s->stages_per_pipe - 1;
    size_t need = max_z(pp_rt_size_cuda_sumsq_ws(), last ? pp_rt_size_cuda_xent_ws(x->N) : 0);
    if (!x->bf16)
        return need;
    size_t e = 0, N = x->N, C = x->C, F = x->F, V = x->V, Cl = C / x->t, Fl = F / x->t;
    if (layers_of(x, pipe, stage) > 0) {
        /* in, out of this tensor-parallel rank's shards (the whole layers when t = 1) */
        const size_t lin[4][2] = {{C, 3 * Cl}, {Cl, C}, {C, Fl}, {Fl, C}};
        for (int i = 0; i < 4; i++) {
            size_t in = lin[i][0], out = lin[i][1];
            e = max_z(e, pp_rt_size_cuda_gemm_ws(N * in, out * in));  /* forward: x w^T */
            e = max_z(e, pp_rt_size_cuda_gemm_ws(N * out, out * in)); /* dx = dy w */
            e = max_z(e, pp_rt_size_cuda_gemm_ws(N * out, N * in));   /* dw = dy^T x */
        }
        e = max_z(e, pp_rt_size_cuda_attn_fwd_ws(x->B, x->T, Cl, x->NH / x->t));
        e = max_z(e, pp_rt_size_cuda_attn_bwd_ws(x->T, Cl, x->NH / x->t));
    }
    if (last) {
        e = max_z(e, pp_rt_size_cuda_gemm_ws(N * C, V * C)); /* logits = x wte^T */
        e = max_z(e, pp_rt_size_cuda_gemm_ws(N * V, V * C)); /* dx = dlogits wte */
        e = max_z(e, pp_rt_size_cuda_gemm_ws(N * V, N * C)); /* dwte += dlogits^T x */
    }
    return max_z(need, e);
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

static size_t recv_key(const pp_sched *s, int pipe, int stage, int mb, int bwd)
{
    return (((size_t)pipe * s->stages_per_pipe + (size_t)stage) * s->microbatches + (size_t)mb) *
               2 + (size_t)bwd;
}

/* A SEND of one activation at simulated time `now`, received at `taken`. */
static void send_message(const plan_ctx *x, tracker *t, double now, double taken)
{
    int64_t io = (int64_t)x->io;
    if (!x->copies) { /* staged (host copies outside the accounting) or the transport's own */
        bump(t, PP_MEM_COMM, -io);
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
    bump(t, PP_MEM_COMM, io);  /* the transport's copy */
    bump(t, PP_MEM_COMM, -io); /* the executor's buffer, freed after the send */
}

/* Rank r's actions in order (the order of allocations inside F and B follows executor_run.c). */
static void walk(const plan_ctx *x, int r, tracker *t, int64_t *reduces)
{
    const pp_sched *s = x->s;
    int S = s->stages_per_pipe;
    int64_t io = (int64_t)x->io;
    for (int i = 0; i < s->n_ops[r]; i++) {
        const pp_action *a = &s->ops[r][i];
        int first = a->stage == 0, last = a->stage == S - 1;
        switch ((pp_op_kind)a->op) {
        case PP_OP_RECV_F:
        case PP_OP_RECV_B:
            bump(t, PP_MEM_COMM, io);
            break;
        case PP_OP_SEND_F:
        case PP_OP_SEND_B: {
            int fwd = a->op == PP_OP_SEND_F;
            double now = 0, taken = 0;
            if (x->copies) {
                now = x->sim.spans[r][i].start;
                taken = x->done[recv_key(s, a->pipe, a->stage + (fwd ? 1 : -1), a->mb, !fwd)];
            }
            send_message(x, t, now, taken);
            break;
        }
        case PP_OP_F: {
            int64_t fws = (int64_t)pp_rt_size_fwd_ws(x->N, x->C, x->sp); /* sequence parallel */
            bump(t, PP_MEM_COMM, last ? 0 : io);                              /* output */
            bump(t, PP_MEM_ACTS, (int64_t)slot_bytes(x, a->pipe, a->stage)); /* saved */
            bump(t, PP_MEM_WORKSPACE, fws);
            bump(t, PP_MEM_WORKSPACE, -fws);
            bump(t, PP_MEM_COMM, first ? 0 : -io);                            /* input consumed */
            break;
        }
        case PP_OP_B:
        case PP_OP_I: { /* I: the held-for-W bytes come before the workspace; the slot stays */
            int64_t ws = (int64_t)bwd_ws_bytes(x, a->pipe, a->stage);
            int split = a->op == PP_OP_I;
            bump(t, PP_MEM_COMM, first ? 0 : io); /* input gradient */
            bump(t, PP_MEM_ACTS, split ? (int64_t)wheld_bytes(x, a->pipe, a->stage) : 0);
            bump(t, PP_MEM_WORKSPACE, ws);
            bump(t, PP_MEM_WORKSPACE, -ws);
            bump(t, PP_MEM_ACTS, split ? 0 : -(int64_t)slot_bytes(x, a->pipe, a->stage));
            bump(t, PP_MEM_COMM, last ? 0 : -io); /* output gradient consumed */
            break;
        }
        case PP_OP_W: /* frees what its I held and the slot */
            bump(t, PP_MEM_ACTS,
                 -(int64_t)(wheld_bytes(x, a->pipe, a->stage) + slot_bytes(x, a->pipe, a->stage)));
            break;
        case PP_OP_REDUCE: {
            int64_t bytes = (int64_t)reduce_bytes(x, a->stage, r);
            *reduces += bytes;
            bump(t, PP_MEM_COMM, bytes); /* held to the step's end */
            break;
        }
        default:
            break;
        }
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
    size_t scratch = 0; /* CUDA: the kernel scratch, held throughout */
    for (int pipe = 0; pipe < s->n_pipes; pipe++)
        for (int st = 0; st < S; st++)
            if (pp_sched_stage(s, pipe, st)->rank == r) {
                o->params += stage_params(x, pipe, st);
                first |= st == 0;
                last |= st == S - 1;
                if (x->cuda)
                    scratch = max_z(scratch, cuda_scratch_bytes(x, pipe, st));
            }
    size_t grads = 4 * o->params;
    bump(t, PP_MEM_WEIGHTS, (int64_t)((4 + (x->bf16 ? PP_RT_BF16_BYTES : 0)) * o->params));
    bump(t, PP_MEM_GRADS, (int64_t)grads);
    bump(t, PP_MEM_OPTIM, (int64_t)(8 * o->params));
    if (x->tokens)
        bump(t, PP_MEM_ACTS, (int64_t)(4 * (size_t)s->microbatches * x->N * (first + last)));
    if (x->cuda)
        bump(t, PP_MEM_WORKSPACE,
             (int64_t)(scratch + PP_RT_CUBLAS_WS_BYTES + PP_RT_CUBLAS_WS_ALIGN));
    int64_t reduces = 0;
    walk(x, r, t, &reduces);
    /* End of step (executor_sync.c): the REDUCE buffers are freed when they complete, then
     * the data-parallel buffer (all of the rank's gradients) is allocated. */
    bump(t, PP_MEM_COMM, -reduces);
    if (x->p->dp > 1)
        bump(t, PP_MEM_COMM, (int64_t)grads);
    o->peak_units = x->sim.peak_activations[r];
}

static pp_status check(const pp_rt_plan_params *p)
{
    if (!p || !p->model || !p->sched)
        return PP_ERR(PP_ERR_INVALID, "memory plan: model and schedule are required");
    PP_TRY(pp_model_validate(p->model));
    if (p->backend != PP_RT_BACKEND_CPU && p->backend != PP_RT_BACKEND_CUDA &&
        p->backend != PP_RT_BACKEND_CPU_STAGED)
        return PP_ERR(PP_ERR_INVALID,
                      "memory plan: backend kind %d is not CPU (0), CUDA (1) or staged CPU (2)",
                      p->backend);
    if (p->backend == PP_RT_BACKEND_CUDA && p->precision != PP_PREC_FP32 &&
        p->precision != PP_PREC_BF16)
        return PP_ERR(PP_ERR_INVALID, "memory plan: precision %d is not fp32 (0) or bf16 (1)",
                      p->precision);
    if (p->micro_batch < 1 || p->dp < 1 || p->seq < 1 || p->seq > p->model->seq)
        return PP_ERR(PP_ERR_INVALID,
                      "memory plan: needs micro_batch >= 1, dp >= 1, 1 <= seq <= %d (got %d, %d, "
                      "%d)",
                      p->model->seq, p->micro_batch, p->dp, p->seq);
    if (p->tp > 1)
        PP_TRY(pp_model_check_tp(p->model, p->tp));
    if (p->sequence_parallel)
        PP_TRY(pp_model_check_sp(p->seq, p->tp));
    if (p->sched->layers != p->model->layers)
        return PP_ERR(PP_ERR_INVALID, "memory plan: the schedule splits %d layers, the model has %d",
                      p->sched->layers, p->model->layers);
    return PP_OK;
}

int pp_rt_plan_is_exact(const pp_rt_plan_params *p)
{
    return (p->backend == PP_RT_BACKEND_CUDA || p->backend == PP_RT_BACKEND_CPU_STAGED) &&
           !(p->transport_caps & PP_TRANSPORT_CAP_DEVICE_MEM);
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
    x->B = (size_t)p->micro_batch, x->T = (size_t)p->seq, x->N = x->B * x->T;
    x->C = (size_t)m->hidden, x->F = (size_t)m->ffn, x->V = (size_t)m->vocab;
    x->NH = (size_t)m->heads, x->seq = (size_t)m->seq;
    x->t = p->tp > 1 ? (size_t)p->tp : 1;
    x->sp = x->t > 1 && p->sequence_parallel ? x->t : 1;
    x->cuda = p->backend == PP_RT_BACKEND_CUDA;
    x->bf16 = x->cuda && p->precision == PP_PREC_BF16;
    x->tokens = !x->cuda; /* beside a device: plain host memory */
    x->copies = p->backend == PP_RT_BACKEND_CPU && !(p->transport_caps & PP_TRANSPORT_CAP_DEVICE_MEM);
    x->io = pp_rt_size_io_bytes(x->N, x->C, x->sp);
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

pp_status pp_rt_plan_compute(const pp_rt_plan_params *p, pp_rt_plan_rank *out)
{
    PP_TRY(check(p));
    plan_ctx x;
    PP_TRY(ctx_init(p, &x));
    int max_ops = 1;
    for (int r = 0; r < p->sched->ranks; r++)
        max_ops = p->sched->n_ops[r] > max_ops ? p->sched->n_ops[r] : max_ops;
    tracker t = {.taken = pp_calloc((size_t)max_ops, sizeof(double))};
    if (!t.taken) {
        ctx_fini(&x);
        return PP_ERR_NOMEM;
    }
    for (int r = 0; r < p->sched->ranks; r++) {
        t.out = &out[r];
        plan_rank(&x, r, &t);
    }
    free(t.taken);
    ctx_fini(&x);
    return PP_OK;
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
