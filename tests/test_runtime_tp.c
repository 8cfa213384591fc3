/* test_runtime_tp.c — tensor parallelism in the runtime (Megatron-LM's split of every stage:
 * runtime/stage_fwd.c, stage_bwd.c): for t in {2, 4}, with every schedule (gpipe, 1f1b,
 * interleaved, chimera, bitpipe) on 2 pipeline ranks and dp = 2, the per-step loss, the global
 * gradient norm, the gradients of the first step and the parameters after three AdamW steps
 * (with clipping) equal those of the t = 1 run of the same schedule, with each tensor-parallel
 * shard compared against its place in the whole tensor (pp_rt_stage_global_index), and the
 * replicated tensors (LayerNorms, row-parallel biases, embedding, head) bit-identical on every
 * tensor-parallel rank. Split backward (I and W actions) at t = 2 against the fused schedule
 * at t = 1.
 *
 * Tolerance (fp32): loss and gradient norm 1e-5 relative; gradients 1e-5 relative per tensor
 * (||a - b|| / ||b||); parameters 1e-5 relative overall and 1e-3 per tensor (AdamW turns the
 * rounding of a nearly cancelling gradient element into a relative error of its update; see
 * test_runtime_exec_equiv.c). The split changes only the summation order of the row-parallel
 * products (t partial sums added in group order). Measured over this grid (2-core sandbox,
 * OpenBLAS): loss within 1.5e-8, gradient norm within 9e-8, gradients within 3.1e-7 per tensor,
 * parameters after three steps within 1.6e-5 per tensor (a LayerNorm bias) and 4.3e-8 overall.
 *
 * The test can fail: tp_drop_* run the same comparison with one conjugate operator removed
 * (f's backward all-reduce, or g's forward all-reduce: stage_impl.h's fault switch) and
 * assert that it then fails by far more than the tolerance (measured: without f the gradients
 * are off by 1.0 relative; without g the loss by 1.8e-4 and the gradients by 0.15).
 *
 * Sequence parallelism (*_sp_t2, *_sp_t4; Korthikanti et al. 2022, sec. 4.2.2): the same grid
 * and tolerances with --sequence-parallel. Measured (2-core sandbox, OpenBLAS): first-step loss
 * bit-identical to t = 1 (the reduce-scatter is the all-reduce's rows), gradient norm within
 * 4.1e-8, gradients within 3.3e-7 per tensor (a LayerNorm gain: its gradient is now summed over
 * the ranks' tokens), parameters after three steps within 1.6e-5 per tensor (a qkv bias) and
 * 4.3e-8 overall. sp_drop_* fail it without the forward reduce-scatter (loss off by 1.7e-4,
 * gradients by 0.11), without the backward one (gradients by 0.75) and without the LayerNorm
 * gradients' all-reduce (gradients by 1.05, and the tensor ranks' copies disagree).
 *
 * Vocabulary split (the embedding, the head and the loss over ceil(V/t) rows per rank, the
 * sums of exp all-reduced: vocab_*): the same tolerances over the whole grid, V = 64 and the
 * prime V = 61 (padding on the last ranks). Measured after the split (2-core sandbox,
 * OpenBLAS, every test above): loss within 1.5e-8, gradient norm within 6.6e-8, gradients
 * within 3.9e-7 per tensor, parameters after three steps within 2.1e-5 per tensor (a qkv bias)
 * and 1.4e-7 overall. Summing exp over the whole vocabulary of a padded rank fails the uneven
 * cases; vocab_drop_loss_allreduce_fails fails the loss without its all-reduce. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"
#include "sched_split.h"
#include "stage_impl.h" /* pp_stage_tp_fault */

#include "pp_test_ok.h"
#include "tiny_models.h"

enum { B = 2, T = 8, D = 2, N = 4, DP = 2, L = 4, STEPS = 3 };
static const double TOL = 1e-5;
static const double TOL_PARAM_TENSOR = 1e-3;

#define ADAMW PP_TEST_ADAMW
static const pp_model_cfg GPT = PP_TEST_GPT(L, T);
static const pp_model_cfg LLAMA = PP_TEST_LLAMA(L, T);
static const pp_model_cfg QWEN3 = PP_TEST_QWEN3(L, T);

/* The model the grid runs: GPT's, or LLAMA where a test sets it (each test is its own
 * process). */
static pp_model_cfg MODEL = GPT;

typedef struct {
    pp_sched *s;
    pp_rt_executor *ex;
    double loss[STEPS + 1], norm[STEPS + 1];
} run;

/* Creates the executor (seqpar: sequence parallelism; where: -1 the schedule as generated,
 * else its backwards split, sched_split.h) and runs step 0 (gradients only: they stay in the
 * stages). */
static void run_case_opts(const char *kind, int tp, int seqpar, int where, run *out)
{
    int v = strcmp(kind, "interleaved") == 0 ? 2 : 0; /* bitpipe's natural v is 2 */
    pp_sched_params sp = {.ranks = D, .microbatches = N, .chunks = v, .layers = L};
    if (where < 0)
        OK(pp_sched_generate(kind, &sp, &out->s));
    else
        out->s = sched_split_gen(kind, D, N, v, L, where);
    pp_rt_exec_params ep = {.model = &MODEL,
                            .sched = out->s,
                            .micro_batch = B,
                            .seq = T,
                            .dp = DP,
                            .seed = 77,
                            .adamw = ADAMW,
                            .clip = 0.5f,
                            .tp = tp,
                            .sequence_parallel = seqpar};
    OK(pp_rt_executor_create(&ep, &out->ex));
    cr_assert_eq(pp_rt_executor_ranks(out->ex), DP * D * tp);
    pp_rt_data *data;
    OK(pp_rt_data_synthetic(MODEL.vocab, 5, &data));
    int rows = pp_rt_executor_batch_rows(out->ex);
    int32_t *batch = calloc((size_t)rows * (T + 1), sizeof *batch);
    cr_assert(batch);
    pp_rt_step_result res;
    OK(pp_rt_data_next(data, rows, T, batch));
    OK(pp_rt_executor_step(out->ex, batch, 0, &res));
    out->loss[0] = res.loss;
    out->norm[0] = res.grad_norm;
    for (int g = 0; g < res.n_ranks; g++) /* every rank took part in its group's all-reduces */
        cr_assert(tp == 1 ? res.tp_bytes[g] == 0 : res.tp_bytes[g] > 0,
                  "rank %d: %g tensor-parallel bytes", g, res.tp_bytes[g]);
    free(batch);
    pp_rt_data_destroy(data);
}

static void run_case_sp(const char *kind, int tp, int seqpar, run *out)
{
    run_case_opts(kind, tp, seqpar, -1, out);
}

static void run_case(const char *kind, int tp, run *out)
{
    run_case_opts(kind, tp, 0, -1, out);
}

/* Three AdamW steps on fresh batches. */
static void run_steps(run *r)
{
    pp_rt_data *data;
    OK(pp_rt_data_synthetic(MODEL.vocab, 6, &data));
    int rows = pp_rt_executor_batch_rows(r->ex);
    int32_t *batch = calloc((size_t)rows * (T + 1), sizeof *batch);
    cr_assert(batch);
    pp_rt_step_result res;
    for (int i = 1; i <= STEPS; i++) {
        OK(pp_rt_data_next(data, rows, T, batch));
        OK(pp_rt_executor_step(r->ex, batch, 1, &res));
        r->loss[i] = res.loss;
        r->norm[i] = res.grad_norm;
    }
    free(batch);
    pp_rt_data_destroy(data);
}

static void run_free(run *r)
{
    pp_rt_executor_destroy(r->ex);
    pp_sched_destroy(r->s);
}

typedef struct {
    double worst_tensor; /* largest per-tensor relative error */
    char worst[64];
    double overall;  /* over all compared elements */
    int split_brain; /* replicated tensors that differ between tensor ranks */
    int pad_nonzero; /* vocabulary padding elements that are not zero */
} cmp;

/* Every tensor of the tensor-parallel run (every replica, pipe, stage, tensor rank) against the
 * t = 1 run's tensor, element by element at its global index; grads or values. Counts the
 * replicated tensors that are not bit-identical across tensor ranks. */
static cmp compare(run *a, int tp, run *ref, int grads)
{
    cmp c = {0, "", 0, 0, 0};
    double d2 = 0, r2 = 0;
    const pp_sched *s = a->s;
    for (int k = 0; k < DP; k++)
        for (int p = 0; p < s->n_pipes; p++)
            for (int st = 0; st < s->stages_per_pipe; st++) {
                int n_ref, n0;
                pp_rt_tensor *tr =
                    pp_rt_stage_tensors(pp_rt_executor_stage(ref->ex, k, p, st), &n_ref);
                pp_rt_stage *s0 = pp_rt_executor_stage_tp(a->ex, k, 0, p, st);
                pp_rt_tensor *t0 = pp_rt_stage_tensors(s0, &n0);
                cr_assert_eq(n0, n_ref);
                /* the whole tensor reassembled from the shards, per tensor */
                for (int j = 0; j < n_ref; j++) {
                    cr_assert_str_eq(t0[j].name, tr[j].name);
                    double td2 = 0, tr2 = 0;
                    for (int q = 0; q < tp; q++) {
                        pp_rt_stage *sq = pp_rt_executor_stage_tp(a->ex, k, q, p, st);
                        int nq;
                        pp_rt_tensor *t = &pp_rt_stage_tensors(sq, &nq)[j];
                        const float *x = grads ? t->grad : t->data;
                        if (!t->sharded) {
                            cr_assert_eq(t->n, tr[j].n);
                            const float *x0 = grads ? t0[j].grad : t0[j].data;
                            c.split_brain += memcmp(x, x0, t->n * sizeof *x) != 0;
                            if (q > 0)
                                continue;
                        } else { /* 1/t, or ceil(V/t) vocabulary rows (padding past V) */
                            cr_assert(t->n * (size_t)tp >= tr[j].n &&
                                          t->n * (size_t)(tp - 1) < tr[j].n,
                                      "%s", t->name);
                        }
                        for (size_t i = 0; i < t->n; i++) {
                            size_t gi = pp_rt_stage_global_index(sq, j, i);
                            if (gi == PP_RT_STAGE_PAD) { /* padding stays zero */
                                c.pad_nonzero += x[i] != 0.0f;
                                continue;
                            }
                            cr_assert(gi < tr[j].n);
                            float y = grads ? tr[j].grad[gi] : tr[j].data[gi];
                            td2 += ((double)x[i] - y) * ((double)x[i] - y);
                            tr2 += (double)y * y;
                        }
                    }
                    double e = tr2 > 0 ? sqrt(td2 / tr2) : sqrt(td2);
                    if (e > c.worst_tensor) {
                        c.worst_tensor = e;
                        snprintf(c.worst, sizeof c.worst, "%s", tr[j].name);
                    }
                    d2 += td2;
                    r2 += tr2;
                }
            }
    c.overall = sqrt(d2 / r2);
    return c;
}

static double rel(double a, double b)
{
    return fabs(a - b) / fabs(b);
}

/* The equivalence: the tensor-parallel run (with sequence parallelism: seqpar; where >= 0: its
 * backwards split) against the t = 1 run of the schedule as generated. */
static void check_kind_opts(const char *kind, int tp, int seqpar, int where)
{
    run ref, a;
    run_case(kind, 1, &ref);
    run_case_opts(kind, tp, seqpar, where, &a);
    cr_assert(rel(a.loss[0], ref.loss[0]) <= TOL, "%s t=%d: loss %.9g, t=1 %.9g", kind, tp,
              a.loss[0], ref.loss[0]);
    cr_assert(rel(a.norm[0], ref.norm[0]) <= TOL, "%s t=%d: grad norm %.9g, t=1 %.9g", kind, tp,
              a.norm[0], ref.norm[0]);
    cmp g = compare(&a, tp, &ref, 1);
    cr_assert(g.worst_tensor <= TOL, "%s t=%d: gradients of %s differ by %.3g relative", kind, tp,
              g.worst, g.worst_tensor);
    cr_assert_eq(g.split_brain, 0, "%s t=%d: %d replicated gradients differ between tensor ranks",
                 kind, tp, g.split_brain);
    cr_assert_eq(g.pad_nonzero, 0, "%s t=%d: %d padding gradients are not zero", kind, tp,
                 g.pad_nonzero);
    run_steps(&ref);
    run_steps(&a);
    for (int i = 1; i <= STEPS; i++) {
        cr_assert(rel(a.loss[i], ref.loss[i]) <= TOL, "%s t=%d step %d: loss %.9g, t=1 %.9g", kind,
                  tp, i, a.loss[i], ref.loss[i]);
        cr_assert(rel(a.norm[i], ref.norm[i]) <= TOL, "%s t=%d step %d: grad norm %.9g, t=1 %.9g",
                  kind, tp, i, a.norm[i], ref.norm[i]);
    }
    cmp w = compare(&a, tp, &ref, 0);
    cr_assert(w.worst_tensor <= TOL_PARAM_TENSOR && w.overall <= TOL,
              "%s t=%d: parameters differ by %.3g overall, %s by %.3g", kind, tp, w.overall,
              w.worst, w.worst_tensor);
    cr_assert_eq(w.split_brain, 0, "%s t=%d: %d replicated parameters differ between tensor ranks",
                 kind, tp, w.split_brain);
    cr_assert_eq(w.pad_nonzero, 0, "%s t=%d: %d padding parameters are not zero", kind, tp,
                 w.pad_nonzero);
    run_free(&a);
    run_free(&ref);
}

static void check_kind_sp(const char *kind, int tp, int seqpar)
{
    check_kind_opts(kind, tp, seqpar, -1);
}

static void check_kind_as(const char *kind, int tp, int where)
{
    check_kind_opts(kind, tp, 0, where);
}

static void check_kind(const char *kind, int tp)
{
    check_kind_opts(kind, tp, 0, -1);
}

#define TP_CASE(name, kind)                                                                        \
    Test(runtime_tp, name##_t2)                                                                    \
    {                                                                                              \
        check_kind(kind, 2);                                                                       \
    }                                                                                              \
    Test(runtime_tp, name##_t4)                                                                    \
    {                                                                                              \
        check_kind(kind, 4);                                                                       \
    }
TP_CASE(gpipe, "gpipe")
TP_CASE(onef1b, "1f1b")
TP_CASE(interleaved, "interleaved")
TP_CASE(chimera, "chimera")
TP_CASE(bitpipe, "bitpipe")

/* The zero-bubble family at t = 2 (against the same schedule at t = 1) */
Test(runtime_tp, zb_h1_t2)
{
    check_kind("zb-h1", 2);
}
Test(runtime_tp, zbv_t2)
{
    check_kind("zbv", 2);
}
Test(runtime_tp, dualpipev_t2)
{
    check_kind("dualpipev", 2);
}

/* Split backward (I, W) at t = 2 against the fused schedule at t = 1: I's f all-reduces are
 * B's, and W adds only local GEMMs. */
Test(runtime_tp, onef1b_split_w_at_end_t2)
{
    check_kind_as("1f1b", 2, SPLIT_W_AT_END);
}
Test(runtime_tp, interleaved_split_w_after_i_t2)
{
    check_kind_as("interleaved", 2, SPLIT_W_AFTER_I);
}
/* with sequence parallelism: W's GEMMs take the LayerNorm outputs I all-gathered and kept */
Test(runtime_tp, onef1b_split_w_at_end_t2_sp)
{
    check_kind_opts("1f1b", 2, 1, SPLIT_W_AT_END);
}

/* Without f's backward all-reduce the column-parallel layers' input gradients are partial: the
 * first step's loss still agrees (the forward is untouched), its gradients do not. */
Test(runtime_tp, tp_drop_f_fails)
{
    pp_stage_tp_fault = PP_TP_DROP_F;
    run ref, a;
    run_case("1f1b", 1, &ref);
    run_case("1f1b", 2, &a);
    cr_assert(rel(a.loss[0], ref.loss[0]) <= TOL);
    cmp g = compare(&a, 2, &ref, 1);
    cr_assert(g.worst_tensor > 100 * TOL, "without f the gradients still agree (%.3g)",
              g.worst_tensor);
    run_free(&a);
    run_free(&ref);
}

/* Without g's forward all-reduce each rank's block output holds its partial product only: the
 * loss moves (little at initialisation, where the residual stream dominates) and the gradients
 * are far off. */
Test(runtime_tp, tp_drop_g_fails)
{
    pp_stage_tp_fault = PP_TP_DROP_G;
    run ref, a;
    run_case("gpipe", 1, &ref);
    run_case("gpipe", 2, &a);
    cr_assert(rel(a.loss[0], ref.loss[0]) > TOL, "without g the loss still agrees (%.9g)",
              a.loss[0]);
    cmp g = compare(&a, 2, &ref, 1);
    cr_assert(g.worst_tensor > 100 * TOL, "without g the gradients still agree (%.3g)",
              g.worst_tensor);
    run_free(&a);
    run_free(&ref);
}

/* The same equivalence with sequence parallelism (Korthikanti et al. 2022: LayerNorms and
 * residuals on T/t tokens per rank, all-gather / reduce-scatter around the tensor-parallel
 * regions, the LayerNorms' partial gradients all-reduced), same tolerances. Measured over this
 * grid (2-core sandbox, OpenBLAS): see the SP paragraph at the top of the file. */
#define SP_CASE(name, kind)                                                                        \
    Test(runtime_tp, name##_sp_t2)                                                                 \
    {                                                                                              \
        check_kind_sp(kind, 2, 1);                                                                 \
    }                                                                                              \
    Test(runtime_tp, name##_sp_t4)                                                                 \
    {                                                                                              \
        check_kind_sp(kind, 4, 1);                                                                 \
    }
SP_CASE(gpipe, "gpipe")
SP_CASE(onef1b, "1f1b")
SP_CASE(interleaved, "interleaved")
SP_CASE(chimera, "chimera")
SP_CASE(bitpipe, "bitpipe")

/* The reduce-scatter is the rank's rows of the all-reduce bit for bit, and the LayerNorms
 * work row by row, so sequence parallelism's forward (the loss) is bit-identical to tensor
 * parallelism's; a rank's saved activations are smaller. */
Test(runtime_tp, sp_forward_is_bitwise_tp_and_saves_less)
{
    run tp, sp;
    run_case("1f1b", 2, &tp);
    run_case_sp("1f1b", 2, 1, &sp);
    cr_assert_eq(sp.loss[0], tp.loss[0], "loss %.9g with SP, %.9g without", sp.loss[0],
                 tp.loss[0]);
    for (int s = 0; s < 2; s++) {
        size_t a = pp_rt_stage_act_bytes(pp_rt_executor_stage_tp(sp.ex, 0, 1, 0, s));
        size_t b = pp_rt_stage_act_bytes(pp_rt_executor_stage_tp(tp.ex, 0, 1, 0, s));
        cr_assert_lt(a, b, "stage %d: %zu activation bytes with SP, %zu without", s, a, b);
        size_t io = pp_rt_stage_io_bytes(pp_rt_executor_stage_tp(sp.ex, 0, 1, 0, s));
        cr_assert_eq(io, (size_t)B * T * MODEL.hidden * 4 / 2, "stage %d sends %zu bytes", s, io);
    }
    run_free(&sp);
    run_free(&tp);
}

/* Runs kind at t = 2 with sequence parallelism and the fault switch set to `fault` against
 * the t = 1 run: the first step's loss error (relative) and the gradients' comparison. */
static cmp sp_faulty(int fault, const char *kind, double *loss_err)
{
    pp_stage_tp_fault = fault;
    run ref, a;
    run_case(kind, 1, &ref);
    run_case_sp(kind, 2, 1, &a);
    *loss_err = rel(a.loss[0], ref.loss[0]);
    cmp g = compare(&a, 2, &ref, 1);
    run_free(&a);
    run_free(&ref);
    return g;
}

/* Without the forward reduce-scatter (g-bar, after the row-parallel linears: each rank keeps
 * its rows of its own partial product) the loss and the gradients move. */
Test(runtime_tp, sp_drop_forward_reduce_scatter_fails)
{
    double loss;
    cmp g = sp_faulty(PP_TP_DROP_G, "gpipe", &loss);
    cr_assert(loss > TOL, "without it the loss still agrees (%.3g)", loss);
    cr_assert(g.worst_tensor > 100 * TOL, "without it the gradients still agree (%.3g)",
              g.worst_tensor);
}

/* Without the backward reduce-scatter (g's conjugate, after the column-parallel linears'
 * input gradients) the forward agrees and the gradients do not. */
Test(runtime_tp, sp_drop_backward_reduce_scatter_fails)
{
    double loss;
    cmp g = sp_faulty(PP_TP_DROP_F, "1f1b", &loss);
    cr_assert(loss <= TOL);
    cr_assert(g.worst_tensor > 100 * TOL, "without it the gradients still agree (%.3g)",
              g.worst_tensor);
}

/* Without the all-reduce of the LayerNorms' partial gradients each rank keeps the gradient of
 * its own tokens only: a LayerNorm's gradient is then far off, and differs between the tensor
 * ranks (they would drift apart under AdamW). */
Test(runtime_tp, sp_drop_layernorm_grad_allreduce_fails)
{
    double loss;
    cmp g = sp_faulty(PP_TP_DROP_LN, "interleaved", &loss);
    cr_assert(loss <= TOL);
    cr_assert(g.worst_tensor > 100 * TOL, "without it the gradients still agree (%.3g)",
              g.worst_tensor);
    cr_assert(strstr(g.worst, "ln") != NULL, "the worst tensor is %s, not a LayerNorm", g.worst);
    cr_assert_gt(g.split_brain, 0, "the tensor ranks' LayerNorm gradients still agree");
}

/* Layouts the split cannot take are refused with the size that does not divide. */
Test(runtime_tp, refuses_impossible_layouts)
{
    pp_sched *s;
    pp_sched_params sp = {.ranks = D, .microbatches = N, .layers = L};
    OK(pp_sched_generate("1f1b", &sp, &s));
    pp_rt_exec_params ep = {.model = &MODEL,
                            .sched = s,
                            .micro_batch = B,
                            .seq = T,
                            .dp = 1,
                            .seed = 1,
                            .adamw = ADAMW,
                            .tp = 3};
    pp_rt_executor *ex = NULL;
    cr_assert_eq(pp_rt_executor_create(&ep, &ex), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "must divide the model's 4 attention heads"), "%s",
              pp_err_msg());
    pp_model_cfg m = MODEL;
    m.ffn = 36; /* 4 heads split over 4, but not 36 % 8 */
    ep.model = &m;
    ep.tp = 8;
    m.heads = 8;
    cr_assert_eq(pp_rt_executor_create(&ep, &ex), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "MLP width \"ffn\" 36"), "%s", pp_err_msg());
    cr_assert_null(ex);
    /* sequence parallelism splits the sequence: t must divide it */
    ep.model = &MODEL;
    ep.tp = 4;
    ep.seq = 6;
    ep.sequence_parallel = 1;
    cr_assert_eq(pp_rt_executor_create(&ep, &ex), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "sequence length 6 must be a multiple of --tp 4"), "%s",
              pp_err_msg());
    cr_assert_null(ex);
    pp_sched_destroy(s);
}

/* ---- the Llama block: every schedule at t = 2, with and without sequence parallelism ---- */

/* The block `model` through the schedule at t = 2, with and without sequence parallelism. */
#define TP_BLOCK_CASE(model, name, kind)                                                           \
    Test(runtime_tp, name##_t2)                                                                    \
    {                                                                                              \
        MODEL = model;                                                                             \
        check_kind(kind, 2);                                                                       \
    }                                                                                              \
    Test(runtime_tp, name##_sp_t2)                                                                 \
    {                                                                                              \
        MODEL = model;                                                                             \
        check_kind_sp(kind, 2, 1);                                                                 \
    }
#define TP_EVERY_SCHEDULE(model, prefix)                                                           \
    TP_BLOCK_CASE(model, prefix##gpipe, "gpipe")                                                   \
    TP_BLOCK_CASE(model, prefix##onef1b, "1f1b")                                                   \
    TP_BLOCK_CASE(model, prefix##interleaved, "interleaved")                                       \
    TP_BLOCK_CASE(model, prefix##chimera, "chimera")                                               \
    TP_BLOCK_CASE(model, prefix##bitpipe, "bitpipe")                                               \
    TP_BLOCK_CASE(model, prefix##zb_h1, "zb-h1")                                                   \
    TP_BLOCK_CASE(model, prefix##zbv, "zbv")                                                       \
    TP_BLOCK_CASE(model, prefix##dualpipev, "dualpipev")
TP_EVERY_SCHEDULE(LLAMA, llama_)

Test(runtime_tp, llama_onef1b_split_w_at_end_t2_sp)
{
    MODEL = LLAMA;
    check_kind_opts("1f1b", 2, 1, SPLIT_W_AT_END);
}

/* A rank holding the wrong KV heads' shard would be caught: dropping f's all-reduce (the
 * same comparison's sensitivity) fails it for the Llama block too. */
Test(runtime_tp, llama_tp_drop_f_fails)
{
    MODEL = LLAMA;
    run ref, a;
    run_case("1f1b", 1, &ref);
    pp_stage_tp_fault = PP_TP_DROP_F;
    run_case("1f1b", 2, &a);
    pp_stage_tp_fault = PP_TP_DROP_NONE;
    cmp g = compare(&a, 2, &ref, 1);
    cr_assert(g.worst_tensor > 100 * TOL, "without f the gradients differ by only %.3g (%s)",
              g.worst_tensor, g.worst);
    run_free(&a);
    run_free(&ref);
}

/* ---- Qwen3's block (per-head q/k RMSNorm, head_dim 8 for hidden 16 / 4 heads): every
 * schedule at t = 2, with and without sequence parallelism; the norms' weights are whole on
 * every tensor rank and their gradients (of each rank's heads) all-reduced ---- */

TP_EVERY_SCHEDULE(QWEN3, qwen3_)

Test(runtime_tp, qwen3_interleaved_split_w_after_i_t2_sp)
{
    MODEL = QWEN3;
    check_kind_opts("interleaved", 2, 1, SPLIT_W_AFTER_I);
}

/* Without the all-reduce of the q/k norms' gradients (t = 2 under sequence parallelism) each
 * tensor rank keeps its own heads' part: the gradients differ from t = 1's and between the
 * ranks. */
Test(runtime_tp, qwen3_tp_drop_qk_norm_grad_allreduce_fails)
{
    MODEL = QWEN3;
    double loss_err;
    cmp g = sp_faulty(PP_TP_DROP_QKN, "1f1b", &loss_err);
    cr_assert(g.worst_tensor > 100 * TOL && strstr(g.worst, "norm"),
              "without the q/k norms' all-reduce the gradients differ by only %.3g (%s)",
              g.worst_tensor, g.worst);
    cr_assert(g.split_brain > 0, "the q/k norms' gradients agree between the ranks");
}

Test(runtime_tp, llama_t4_is_refused_naming_the_kv_heads)
{
    MODEL = LLAMA;
    pp_sched_params sp = {.ranks = D, .microbatches = N, .layers = L};
    pp_sched *s;
    OK(pp_sched_generate("1f1b", &sp, &s));
    pp_rt_exec_params ep = {.model = &MODEL, .sched = s, .micro_batch = B, .seq = T, .dp = 1,
                            .seed = 77, .adamw = ADAMW, .tp = 4};
    pp_rt_executor *ex = NULL;
    cr_assert_eq(pp_rt_executor_create(&ep, &ex), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "--tp 4 must divide the model's 2 KV heads"), "%s",
              pp_err_text());
    pp_sched_destroy(s);
}

/* ---- the vocabulary split (Megatron-LM's VocabParallelEmbedding, column-parallel head and
 * vocab_parallel_cross_entropy): every tensor rank holds ceil(V/t) rows of the embedding and
 * of the head; a vocabulary that t does not divide leaves zero padding rows on the last
 * ranks, masked out of the softmax, so losses and gradients still equal t = 1's (the grid's
 * tolerances; compare() checks the padding stays zero). 61 is prime: t = 2 gives 31 + 30
 * real rows, t = 4 gives 16 + 16 + 16 + 13. */

#define VOCAB_UNEVEN 61

Test(runtime_tp, vocab_uneven_onef1b_t2)
{
    MODEL.vocab = VOCAB_UNEVEN;
    check_kind("1f1b", 2);
}
Test(runtime_tp, vocab_uneven_interleaved_t4)
{
    MODEL.vocab = VOCAB_UNEVEN;
    check_kind("interleaved", 4);
}
Test(runtime_tp, vocab_uneven_gpipe_sp_t4)
{
    MODEL.vocab = VOCAB_UNEVEN;
    check_kind_sp("gpipe", 4, 1);
}
Test(runtime_tp, vocab_uneven_zbv_t2)
{
    MODEL.vocab = VOCAB_UNEVEN;
    check_kind("zbv", 2);
}
Test(runtime_tp, vocab_uneven_onef1b_split_w_at_end_sp_t2)
{
    MODEL.vocab = VOCAB_UNEVEN;
    check_kind_opts("1f1b", 2, 1, SPLIT_W_AT_END);
}
/* the untied head (its own vocabulary rows) */
Test(runtime_tp, llama_vocab_uneven_chimera_sp_t2)
{
    MODEL = LLAMA;
    MODEL.vocab = VOCAB_UNEVEN;
    check_kind_sp("chimera", 2, 1);
}

/* A rank holds its vocabulary rows only: ceil(V/t) x C of the embedding (and of a tied head's
 * copy, or an untied head) and the whole position table. */
Test(runtime_tp, embedding_and_head_hold_the_rank_vocabulary_rows)
{
    MODEL.vocab = VOCAB_UNEVEN;
    run a;
    run_case("1f1b", 4, &a);
    size_t C = (size_t)MODEL.hidden, Vl = (VOCAB_UNEVEN + 3) / 4;
    for (int q = 0; q < 4; q++) {
        pp_rt_stage *first = pp_rt_executor_stage_tp(a.ex, 0, q, 0, 0);
        pp_rt_stage *last = pp_rt_executor_stage_tp(a.ex, 0, q, 0, 1);
        pp_rt_tensor *wte = pp_rt_stage_tensor(first, "wte");
        pp_rt_tensor *head = pp_rt_stage_tensor(last, "wte.head");
        pp_rt_tensor *wpe = pp_rt_stage_tensor(first, "wpe");
        cr_assert(wte && head && wpe);
        cr_assert_eq(wte->n, Vl * C, "rank %d: wte holds %zu floats", q, wte->n);
        cr_assert_eq(head->n, Vl * C, "rank %d: the head holds %zu floats", q, head->n);
        cr_assert(wte->sharded && head->sharded && !wpe->sharded);
        cr_assert_eq(wpe->n, (size_t)T * C);
    }
    /* the last rank's 3 padding rows: no place in the whole tensor */
    pp_rt_stage *s3 = pp_rt_executor_stage_tp(a.ex, 0, 3, 0, 0);
    cr_assert_eq(pp_rt_stage_global_index(s3, 0, 13 * C), PP_RT_STAGE_PAD);
    cr_assert_eq(pp_rt_stage_global_index(s3, 0, 13 * C - 1), VOCAB_UNEVEN * C - 1);
    run_free(&a);
}

/* Without the all-reduce of the sums of exp and the target logits each rank normalises over
 * its own vocabulary rows: the loss moves and so do the gradients. */
Test(runtime_tp, vocab_drop_loss_allreduce_fails)
{
    run ref, a;
    run_case("1f1b", 1, &ref);
    pp_stage_tp_fault = PP_TP_DROP_VOCAB;
    run_case("1f1b", 2, &a);
    pp_stage_tp_fault = PP_TP_DROP_NONE;
    cr_assert(rel(a.loss[0], ref.loss[0]) > 100 * TOL, "without it the loss still agrees (%.9g)",
              a.loss[0]);
    cmp g = compare(&a, 2, &ref, 1);
    cr_assert(g.worst_tensor > 100 * TOL, "without it the gradients still agree (%.3g)",
              g.worst_tensor);
    run_free(&a);
    run_free(&ref);
}
