/* test_cuda_rt.c — the runtime around the CUDA backend (part of the cuda suite; without a
 * device every test skips with one line; in CI it runs under the CUDA emulation, suite
 * cuda_emu, which checks the logic, not a GPU's behaviour):
 *   - the tuner's memory model of the runtime on CUDA (pp_tune_memory_runtime_on, fp32 and
 *     bf16) against the CUDA backend's own accounting: every rank's peak after two training
 *     steps of every schedule (D = 2, N = 4, the tiny preset at its full sequence length), the
 *     ranks threads staging through host memory as pprun --backend cuda runs them;
 *   - sharding (ZeRO-1 and 2) in bf16: the run equals the unsharded bf16 run (the bf16 weight
 *     copies rewritten from the gathered parameters) and its plan the measured peaks;
 *   - device-timed spans: the marks API (runtime/cuda/marks_cuda.cu) and the executor's spans
 *     on a CUDA backend (ordered, inside the step, every action timed).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda/cuda_sizes.h"
#include "pp_rt.h"
#include "pp_rt_place.h"
#include "pp_rt_sizes.h"
#include "pp_tune.h"

#include "pp_test_ok.h"
#include "rt_train.h"

/* The model's peak per rank against the measured one: equal to the byte. The backend counts
 * in program order on the host, and staged CUDA ranks keep no transport copies on the device
 * (the CPU model's bound is 3 % because those copies' lifetimes depend on timing). Measured
 * equal for every schedule here under the CUDA emulation. */
#define MEM_TOL 0.0

/* The recomputation the executors below run (a test sets it: each test its own process). */
static int g_recompute;
static int g_dp = 1, g_shard; /* the replicas and their sharding */

static pp_rt_executor *cuda_executor_or_skip(const pp_model_cfg *m, const pp_sched *s, int prec,
                                             int micro_batch)
{
    pp_rt_exec_params ep = {
        .model = m,
        .sched = s,
        .micro_batch = micro_batch,
        .seq = m->seq,
        .dp = g_dp,
        .seed = 99,
        .adamw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f},
        .clip = 1.0f,
        .backend = PP_RT_BACKEND_CUDA,
        .precision = prec,
        .recompute = g_recompute,
        .shard = g_shard};
    pp_rt_executor *ex = NULL;
    pp_status st = pp_rt_executor_create(&ep, &ex);
    if (st == PP_ERR_UNSUPPORTED)
        cr_skip_test("skipped: %s", pp_err_text());
    cr_assert_eq(st, PP_OK, "executor on cuda: %s", pp_err_msg());
    return ex;
}

/* Two optimizer steps on synthetic tokens. */
static void train_two_steps(pp_rt_executor *ex, int vocab, int seq)
{
    int rows = pp_rt_executor_batch_rows(ex);
    int32_t *b = calloc((size_t)rows * (seq + 1), sizeof *b);
    cr_assert(b);
    pp_rt_data *d;
    OK(pp_rt_data_synthetic(vocab, 5, &d));
    for (int i = 0; i < 2; i++) {
        pp_rt_step_result r;
        OK(pp_rt_data_next(d, rows, seq, b));
        OK(pp_rt_executor_step(ex, b, 1, &r));
    }
    pp_rt_data_destroy(d);
    free(b);
}

/* The executor's plan and the tuner's runtime model against the CUDA backend's accounting, for
 * kind on p ranks with micro-batches of b sequences (N of them). */
static void memory_model_matches_at(const char *kind, int prec, int p, int b, int N)
{
    pp_tune_model tm;
    pp_model_cfg rm;
    OK(pp_tune_model_preset("tiny", &tm));
    OK(pp_model_preset("tiny", &rm));
    pp_config c = {.p = p, .v = 1, .b = b, .d = g_dp, .t = 1, .N = N};
    c.schedule = kind;
    c.recompute = (pp_recompute)g_recompute, c.shard = (pp_shard)g_shard; /* the same values */
    const pp_sched_desc *desc = pp_sched_lookup(kind);
    c.v = desc->chunks ? desc->chunks : 2; /* fixed chunks (bitpipe, zbv...), else interleaved's */
    if (!desc->chunks)
        c.G = 2;
    pp_sched_params sp;
    pp_tune_sched_params(&tm, &c, &sp);
    pp_sched *s;
    OK(pp_sched_generate(kind, &sp, &s));
    pp_rt_executor *ex = cuda_executor_or_skip(&rm, s, prec, b);
    /* the kernels' scratch is the plan's from the start (pp_backend_scratch_reserve), beside
     * the cuBLAS workspace: the first step does not grow it */
    pp_mem_stats made[8];
    cr_assert(p <= 8);
    OK(pp_rt_executor_mem_stats(ex, made));
    for (int r = 0; r < p; r++) {
        const pp_rt_plan_rank *pl = pp_rt_executor_plan(ex, r);
        cr_assert_gt(pl->kernel_scratch, 0, "%s rank %d", kind, r);
        cr_expect_eq(made[r].current[PP_MEM_WORKSPACE],
                     pl->kernel_scratch + PP_RT_CUBLAS_WS_BYTES + PP_RT_CUBLAS_WS_ALIGN,
                     "%s rank %d: %zu bytes of workspace at creation, the plan's scratch %zu",
                     kind, r, made[r].current[PP_MEM_WORKSPACE], pl->kernel_scratch);
    }
    train_two_steps(ex, rm.vocab, rm.seq);
    pp_mem_stats got[8];
    OK(pp_rt_executor_mem_stats(ex, got));
    pp_tune_rank_mem want[8];
    OK(pp_tune_memory_runtime_on(&tm, &c, s, NULL, PP_RT_BACKEND_CUDA, (pp_precision)prec, want));
    /* the executor's own plan, computed at its creation, is exact here (staged ranks) */
    cr_expect(pp_rt_executor_plan_is_exact(ex), "%s: staged CUDA ranks plan exactly", kind);
    for (int r = 0; r < p; r++) {
        const pp_rt_plan_rank *pl = pp_rt_executor_plan(ex, r);
        cr_expect(pl && pl->peak_total == got[r].peak_total,
                  "%s %s rank %d: the executor's plan %zu B, the CUDA backend's accounting %zu B",
                  kind, prec == PP_PREC_BF16 ? "bf16" : "fp32", r, pl ? pl->peak_total : 0,
                  got[r].peak_total);
        for (int c = 0; pl && c < PP_MEM__COUNT; c++)
            cr_expect_eq(pl->peak[c], got[r].peak[c], "%s %s rank %d: %s peak: plan %zu, measured %zu",
                         kind, prec == PP_PREC_BF16 ? "bf16" : "fp32", r,
                         pp_mem_category_name((pp_mem_category)c), pl->peak[c], got[r].peak[c]);
    }
    for (int r = 0; r < p; r++) {
        double measured = (double)got[r].peak_total, err = (want[r].total - measured) / measured;
        cr_expect(fabs(err) <= MEM_TOL,
                  "%s %s rank %d: model %.0f B, the CUDA backend's accounting %.0f B (%+.2f %%)",
                  kind, prec == PP_PREC_BF16 ? "bf16" : "fp32", r, want[r].total, measured,
                  100 * err);
    }
    pp_rt_executor_destroy(ex);
    pp_sched_destroy(s);
}

static void memory_model_matches(const char *kind, int prec)
{
    memory_model_matches_at(kind, prec, 2, 1, 4);
}

static const char *const kinds[] = {"gpipe", "1f1b", "interleaved", "chimera", "bitpipe"};

Test(cuda_rt, memory_model_matches_the_backend_fp32)
{
    for (int k = 0; k < 5; k++)
        memory_model_matches(kinds[k], PP_PREC_FP32);
}

Test(cuda_rt, memory_model_matches_the_backend_bf16)
{
    for (int k = 0; k < 5; k++)
        memory_model_matches(kinds[k], PP_PREC_BF16);
}

/* Split backward: a slot held from F to W, and what each I holds for its W, in device memory
 * (fp32 and bf16, whose W GEMMs convert their operands through the kernel scratch). */
Test(cuda_rt, memory_model_matches_the_backend_split_backward)
{
    memory_model_matches("zb-h1", PP_PREC_FP32);
    memory_model_matches("zb-h1", PP_PREC_BF16);
    /* the V on one rank (both stages on it, the turn local), large micro-batches: the GPU
     * trial the search runs on an emulated two-GPU machine */
    memory_model_matches_at("zbv", PP_PREC_BF16, 1, 16, 2);
    memory_model_matches_at("zbv", PP_PREC_FP32, 1, 16, 2);
    memory_model_matches_at("zbv", PP_PREC_BF16, 2, 4, 4);
}

/* Recomputation on the CUDA backend (the same stage code on its kernels): the smaller slots and
 * the recompute workspace planned to the byte in fp32 and bf16, fused and split backward. */
Test(cuda_rt, memory_model_matches_the_backend_with_recomputation)
{
    g_recompute = PP_RECOMPUTE_FULL;
    memory_model_matches("1f1b", PP_PREC_BF16);
    memory_model_matches("zb-h1", PP_PREC_FP32);
    g_recompute = PP_RECOMPUTE_SELECTIVE;
    memory_model_matches("interleaved", PP_PREC_BF16);
    memory_model_matches("zb-h1", PP_PREC_BF16);
}

/* The optimizer sharded over dp 2 on the CUDA backend: 1/2 of AdamW's state and the
 * reduce-scatter pack planned to the byte; in bf16 the whole tensors' bf16 copies too, written
 * from the gathered parameters (a shard's slices get none), where the unsharded run has them. */
Test(cuda_rt, memory_model_matches_the_backend_with_a_sharded_optimizer)
{
    g_dp = 2, g_shard = PP_SHARD_OPTIMIZER;
    memory_model_matches("1f1b", PP_PREC_FP32);
    memory_model_matches("zb-h1", PP_PREC_FP32);
    memory_model_matches("1f1b", PP_PREC_BF16);
    memory_model_matches("zb-h1", PP_PREC_BF16);
}

/* ZeRO-2 on the device: the shards and each stage's whole gradient in device memory (split
 * backward: open from an I to the W that leaves none waiting), in fp32 and bf16 */
Test(cuda_rt, memory_model_matches_the_backend_with_sharded_gradients)
{
    g_dp = 2, g_shard = PP_SHARD_GRADIENTS;
    memory_model_matches("zb-h1", PP_PREC_FP32);
    memory_model_matches("zb-h1", PP_PREC_BF16);
}

/* bf16 runs of 1f1b over p 2 x dp 2 (tiny, b 1, N 4, three steps; rt_train.h): losses, norms
 * and the parameters (downloaded). */
enum { BF16_STEPS = 3 };
typedef rt_train bf16_run;

static void bf16_train(bf16_run *u, int shard)
{
    if (pp_cuda_device_count() < 1)
        cr_skip_test("skipped: no CUDA device");
    pp_model_cfg rm;
    OK(pp_model_preset("tiny", &rm));
    pp_rt_exec_params ep = {
        .model = &rm,
        .micro_batch = 1,
        .seq = rm.seq,
        .dp = 2,
        .seed = 99,
        .adamw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f},
        .clip = 1.0f,
        .backend = PP_RT_BACKEND_CUDA,
        .precision = PP_PREC_BF16,
        .shard = shard};
    rt_train_run(u, "1f1b", 2, 4, 1, ep, BF16_STEPS, 1, 5);
}

/* Tensor j of (replica k, pipe 0, stage st) on the host (malloc'ed). */
static float *bf16_param(bf16_run *u, int k, int st, int j, size_t *n, const char **name)
{
    int nt;
    pp_rt_tensor *t = pp_rt_stage_tensors(pp_rt_executor_stage(u->ex, k, 0, st), &nt);
    cr_assert(j < nt);
    pp_rt_place pl = {.t = 1, .p = 2, .dp = 2};
    pp_backend *be = pp_rt_executor_backend(u->ex, pp_rt_place_global(&pl, 0, st, k));
    float *x = malloc(t[j].n * sizeof *x);
    cr_assert(x);
    OK(be->ops->download(be->ctx, x, t[j].data, t[j].n * sizeof *x));
    *n = t[j].n, *name = t[j].name;
    return x;
}

/* tol: relative 1e-5 plus abs (test_runtime_shard.c's fp32 tolerance: the norm, hence the
 * clipping factor, is summed in another order; ZeRO-2's gradient sums too) */
static int bf16_close(double a, double b, double abs)
{
    return fabs(a - b) <= abs + 1e-5 * fabs(b);
}

/* Sharding in bf16 on the device: the sharded AdamW steps the fp32 parameters as the unsharded
 * one does, and the bf16 copies the GEMMs read are rewritten from the gathered parameters
 * (pp_backend_weights_written), so steps 2 and 3 read the unsharded run's bf16 weights: the
 * same losses, norms and parameters within the fp32 sharded tests' tolerance, the replicas
 * bit for bit the same. A copy left unwritten or stale changes the losses of steps 2 and 3. */
static void bf16_sharded_trains_as_unsharded(int shard, double abs)
{
    bf16_run base, u;
    bf16_train(&base, PP_SHARD_NONE);
    bf16_train(&u, shard);
    const char *what = shard == PP_SHARD_OPTIMIZER ? "shard optimizer" : "shard gradients";
    for (int i = 0; i < BF16_STEPS; i++) {
        cr_expect(bf16_close(u.loss[i], base.loss[i], abs), "%s: step %d loss %.9g, unsharded %.9g",
                  what, i + 1, u.loss[i], base.loss[i]);
        cr_expect(bf16_close(u.norm[i], base.norm[i], abs), "%s: step %d norm %.9g, unsharded %.9g",
                  what, i + 1, u.norm[i], base.norm[i]);
    }
    double worst = 0;
    for (int st = 0; st < 2; st++) {
        int nt;
        pp_rt_stage_tensors(pp_rt_executor_stage(base.ex, 0, 0, st), &nt);
        for (int j = 0; j < nt; j++) {
            size_t n;
            const char *name;
            float *want = bf16_param(&base, 0, st, j, &n, &name);
            for (int k = 0; k < 2; k++) {
                float *got = bf16_param(&u, k, st, j, &n, &name);
                if (k == 1) {
                    float *r0 = bf16_param(&u, 0, st, j, &n, &name);
                    cr_expect(!memcmp(got, r0, n * sizeof *got), "%s: stage %d %s: replica 1 "
                              "differs from replica 0", what, st, name);
                    free(r0);
                }
                for (size_t i = 0; i < n; i++) {
                    double e = fabs((double)got[i] - want[i]);
                    worst = e > worst ? e : worst;
                    cr_assert(bf16_close(got[i], want[i], abs),
                              "%s: replica %d stage %d %s[%zu] = %.9g, unsharded %.9g", what, k,
                              st, name, i, (double)got[i], (double)want[i]);
                }
                free(got);
            }
            free(want);
        }
    }
    cr_log_info("%s, bf16: parameters within %.3g of the unsharded run's, losses %.9g %.9g %.9g "
                "(unsharded %.9g %.9g %.9g)", what, worst, u.loss[0], u.loss[1], u.loss[2],
                base.loss[0], base.loss[1], base.loss[2]);
    rt_train_expect_plan(&u, what); /* the bf16 copies where the unsharded run has them */
    rt_train_stop(&u);
    rt_train_stop(&base);
}

Test(cuda_rt, bf16_sharded_optimizer_trains_as_unsharded)
{
    bf16_sharded_trains_as_unsharded(PP_SHARD_OPTIMIZER, 1e-7);
}

Test(cuda_rt, bf16_sharded_gradients_trains_as_unsharded)
{
    bf16_sharded_trains_as_unsharded(PP_SHARD_GRADIENTS, 1e-4);
}

/* Once the plan's scratch is reserved, a kernel needing more is an error naming both sizes,
 * not a silent larger allocation: the gradient norm's partial sums need SUMSQ_BLOCKS doubles. */
Test(cuda_rt, a_kernel_needing_more_scratch_than_reserved_fails)
{
    pp_backend *be = NULL;
    pp_status st = pp_backend_cuda_create(0, PP_PREC_FP32, &be);
    if (st == PP_ERR_UNSUPPORTED)
        cr_skip_test("skipped: %s", pp_err_text());
    OK(st);
    pp_mem_stats before, after;
    pp_backend_mem_stats(be, &before);
    size_t need = pp_rt_size_cuda_sumsq_ws(), small = need / 2;
    OK(pp_backend_scratch_reserve(be, small));
    pp_backend_mem_stats(be, &after);
    cr_assert_eq(after.current[PP_MEM_WORKSPACE], before.current[PP_MEM_WORKSPACE] + small);
    float *x = pp_backend_alloc(be, 1024 * sizeof(float), PP_MEM_WORKSPACE);
    cr_assert(x);
    OK(be->ops->zero(be->ctx, x, 1024 * sizeof(float)));
    double acc = 0;
    st = be->ops->sum_sq(be->ctx, x, 1024, &acc);
    cr_assert_eq(st, PP_ERR_CHECK, "sum_sq returned %d: %s", st, pp_err_msg());
    char want[96];
    snprintf(want, sizeof want, "needs %zu bytes of scratch, the memory plan reserved %zu", need,
             small);
    cr_assert(strstr(pp_err_msg(), want), "message: %s", pp_err_msg());
    /* reserved at the size it needs, the same call runs */
    OK(pp_backend_scratch_reserve(be, need));
    OK(be->ops->sum_sq(be->ctx, x, 1024, &acc));
    cr_assert_eq(acc, 0.0);
    pp_backend_free(be, x, 1024 * sizeof(float), PP_MEM_WORKSPACE);
    pp_backend_destroy(be);
}

Test(cuda_rt, marks_time_the_stream_and_forget_after_a_read)
{
    pp_backend *be = NULL;
    pp_status st = pp_backend_cuda_create(0, PP_PREC_FP32, &be);
    if (st == PP_ERR_UNSUPPORTED)
        cr_skip_test("skipped: %s", pp_err_text());
    OK(st);
    pp_cuda_marks *mk;
    OK(pp_cuda_marks_create(be, 3, &mk));
    enum { N = 256 };
    float *a = pp_backend_alloc(be, N * N * sizeof(float), PP_MEM_WORKSPACE);
    float *c = pp_backend_alloc(be, N * N * sizeof(float), PP_MEM_WORKSPACE);
    cr_assert(a && c, "%s", pp_err_msg());
    OK(be->ops->zero(be->ctx, a, N * N * sizeof(float)));
    OK(pp_cuda_marks_record(mk, 0));
    OK(be->ops->gemm(be->ctx, 0, 0, N, N, N, 1.0f, a, N, a, N, 0.0f, c, N));
    OK(pp_cuda_marks_record(mk, 1));
    double sec[3];
    OK(pp_cuda_marks_read(mk, sec));
    cr_expect(sec[0] == 0.0, "mark 0 is the origin, got %g s", sec[0]);
    cr_expect(sec[1] >= 0.0 && sec[1] < 10.0, "a 256^3 GEMM took %g s on the device", sec[1]);
    cr_expect(sec[2] == -1.0, "mark 2 was never recorded, got %g", sec[2]);
    /* a read forgets the records: without a new origin there is nothing to read */
    cr_expect_eq(pp_cuda_marks_read(mk, sec), PP_ERR_INVALID);
    cr_expect_eq(pp_cuda_marks_record(mk, 3), PP_ERR_INVALID, "mark 3 of 3 must be refused");
    pp_cuda_marks_destroy(mk);
    pp_backend_free(be, a, N * N * sizeof(float), PP_MEM_WORKSPACE);
    pp_backend_free(be, c, N * N * sizeof(float), PP_MEM_WORKSPACE);
    pp_backend_destroy(be);
}

/* The same marks through the backend table's optional ops (what the executor uses), and the
 * other device ops a CUDA backend fills. */
Test(cuda_rt, the_table_device_ops_of_a_cuda_backend)
{
    pp_backend *be = NULL;
    pp_status st = pp_backend_create(PP_RT_BACKEND_CUDA, 0, PP_PREC_FP32, &be);
    if (st == PP_ERR_UNSUPPORTED)
        cr_skip_test("skipped: %s", pp_err_text());
    OK(st);
    cr_expect_eq(pp_backend_is_device(be), 1);
    cr_expect_geq(pp_backend_device_count(PP_RT_BACKEND_CUDA), 1);
    OK(pp_backend_sync(be));
    size_t f = 0, t = 0;
    OK(pp_backend_mem_info(be, &f, &t));
    cr_expect(t > 0 && f <= t, "free %zu of %zu", f, t);
    cr_assert_eq(pp_backend_has_marks(be), 1);
    pp_backend_marks *mk;
    OK(pp_backend_marks_create(be, 2, &mk));
    OK(pp_backend_marks_record(mk, 0));
    OK(pp_backend_marks_record(mk, 1));
    double sec[2];
    OK(pp_backend_marks_read(mk, sec));
    cr_expect(sec[0] == 0.0 && sec[1] >= 0.0, "marks %g %g", sec[0], sec[1]);
    cr_expect_eq(pp_backend_marks_record(mk, 2), PP_ERR_INVALID, "mark 2 of 2 must be refused");
    pp_backend_marks_destroy(mk);
    pp_backend_destroy(be);
}

Test(cuda_rt, executor_spans_on_cuda_are_ordered_and_inside_the_step)
{
    pp_tune_model tm;
    pp_model_cfg rm;
    OK(pp_tune_model_preset("tiny", &tm));
    OK(pp_model_preset("tiny", &rm));
    pp_sched_params sp = {.ranks = 2, .microbatches = 4, .layers = rm.layers};
    pp_sched *s;
    OK(pp_sched_generate("1f1b", &sp, &s));
    pp_rt_executor *ex = cuda_executor_or_skip(&rm, s, PP_PREC_FP32, 1);
    int rows = pp_rt_executor_batch_rows(ex);
    int32_t *b = calloc((size_t)rows * (rm.seq + 1), sizeof *b);
    cr_assert(b);
    pp_rt_data *d;
    OK(pp_rt_data_synthetic(rm.vocab, 5, &d));
    OK(pp_rt_data_next(d, rows, rm.seq, b));
    pp_rt_step_result r;
    OK(pp_rt_executor_step(ex, b, 1, &r));
    const double eps = 1e-3; /* the origin's host time vs the device's: one event's latency */
    for (int g = 0; g < r.n_ranks; g++) {
        double prev_end = 0.0, busy = 0.0;
        for (int i = 0; i < s->n_ops[g]; i++) {
            const pp_rt_span *sp_ = &r.spans[g][i];
            cr_expect(sp_->start <= sp_->end && sp_->start >= 0.0,
                      "rank %d action %d: span [%g, %g]", g, i, sp_->start, sp_->end);
            cr_expect(sp_->start + eps >= prev_end,
                      "rank %d action %d starts at %g before the previous action's end %g "
                      "(one stream runs them in order)",
                      g, i, sp_->start, prev_end);
            prev_end = sp_->end;
            if (s->ops[g][i].op == PP_OP_F || s->ops[g][i].op == PP_OP_B)
                busy += sp_->end - sp_->start;
        }
        cr_expect(busy > 0.0, "rank %d: its F and B took no device time", g);
        cr_expect(r.sync[g].start + eps >= prev_end && r.optim[g].end >= r.sync[g].end,
                  "rank %d: sync [%g, %g], optimizer end %g after the actions' end %g", g,
                  r.sync[g].start, r.sync[g].end, r.optim[g].end, prev_end);
        cr_expect(r.optim[g].end <= r.seconds + eps, "rank %d ends at %g after the step's %g s",
                  g, r.optim[g].end, r.seconds);
    }
    pp_rt_data_destroy(d);
    free(b);
    pp_rt_executor_destroy(ex);
    pp_sched_destroy(s);
}
