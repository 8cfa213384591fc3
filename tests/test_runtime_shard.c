/* test_runtime_shard.c — the optimizer state sharded over the dp replicas (ZeRO-1,
 * pp_rt_exec_params.shard = PP_RT_SHARD_OPTIMIZER, runtime/executor_zero.c), and the
 * gradients with it (ZeRO-2, PP_RT_SHARD_GRADIENTS, runtime/executor_zero2.c: each
 * micro-batch's gradient reduce-scattered into the shards, so only within fp32 rounding of
 * the unsharded run, gradients not compared bit for bit).
 *
 * The reduce-scatter gives each replica the same floats as that slice of the all-reduce, and
 * each element steps as the unsharded AdamW steps it; only the gradient norm is summed in
 * another order (each replica's shard rather than replica 0's tensors), so the clipping
 * factor may differ in fp32's last bits. So: the summed gradients equal the unsharded run's
 * bit for bit; losses, norms and parameters after two steps agree within fp32 rounding
 * (relative 1e-5); every replica ends with the same parameters; each holds 1/dp of AdamW's
 * state; the plan equals the measured peaks to the byte. A shard that stepped another
 * replica's slice would leave parameters unstepped and others stepped twice.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"
#include "pp_test_run.h"
#include "rt_train.h"

#define PPRUN PP_BINARY_DIR "/runtime/pprun"

enum { B = 2, T = 16, STEPS = 2 };

typedef struct {
    const char *kind;
    int D, N, v, dp, tp, backend;
    int cp; /* context-parallel ranks (0: none): sharded over dp x cp replicas */
} run_cfg;

typedef rt_train run;

static pp_model_cfg model(void)
{
    return (pp_model_cfg){.layers = 8, .hidden = 32, .heads = 2, .ffn = 64, .vocab = 128, .seq = T};
}

/* steps: STEPS with update, or 1 without (the gradients stay in the stages) */
static void start(run *u, const run_cfg *c, int shard, int update)
{
    pp_model_cfg m = model();
    pp_rt_exec_params ep = {.model = &m,
                            .micro_batch = B,
                            .seq = T,
                            .dp = c->dp,
                            .seed = 3,
                            .clip = 0.5f, /* clipping on: the norm's factor is used */
                            .adamw = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                      .weight_decay = 0.1f},
                            .backend = c->backend,
                            .tp = c->tp,
                            .cp = c->cp,
                            .shard = shard};
    rt_train_run(u, c->kind, c->D, c->N, c->v, ep, update ? STEPS : 1, update, 5);
}

static void stop(run *u)
{
    rt_train_stop(u);
}

/* Absolute part of the tolerance: 1e-7, or 1e-4 under ZeRO-2, whose gradient sums run in
 * another order. AdamW divides each gradient by its own running RMS, so where an element is a
 * small sum of larger terms (or zero in exact arithmetic, as the key bias's: softmax ignores a
 * shift of a query's scores) the changed rounding of the sum turns into a step of its own
 * size: measured, up to 1.7e-6 at lr 1e-2, and 5e-5 for 2 of the 61k parameters with cp 2
 * (every other one within 1e-5). 1e-4 is 1 % of one step; a shard stepped with another's
 * state, or stepped twice, moves by about the learning rate, and a micro-batch dropped or
 * counted twice moves the norm and the step-2 loss far past their 1e-5 relative. */
static double abs_tol = 1e-7;

static int close_to(double a, double b)
{
    return fabs(a - b) <= abs_tol + 1e-5 * fabs(b);
}

/* Each tensor of replica k, tensor rank r of a against b: bit for bit (exact) or within fp32
 * rounding; grads: the gradients, else the parameters. */
static void compare(run *a, int ka, run *b, int kb, const run_cfg *c, int grads, int exact,
                    const char *what)
{
    const pp_sched *s = a->s;
    for (int r = 0; r < (c->tp > 1 ? c->tp : 1); r++)
        for (int p = 0; p < s->n_pipes; p++)
            for (int st = 0; st < s->stages_per_pipe; st++) {
                int na, nb;
                pp_rt_tensor *ta =
                    pp_rt_stage_tensors(pp_rt_executor_stage_tp(a->ex, ka, r, p, st), &na);
                pp_rt_tensor *tb =
                    pp_rt_stage_tensors(pp_rt_executor_stage_tp(b->ex, kb, r, p, st), &nb);
                cr_assert_eq(na, nb);
                for (int j = 0; j < na; j++) {
                    const float *x = grads ? ta[j].grad : ta[j].data;
                    const float *y = grads ? tb[j].grad : tb[j].data;
                    if (exact) {
                        cr_assert(!memcmp(x, y, ta[j].n * sizeof(float)),
                                  "%s: tensor rank %d pipe %d stage %d: %s differs", what, r, p,
                                  st, ta[j].name);
                        continue;
                    }
                    for (size_t i = 0; i < ta[j].n; i++)
                        cr_assert(close_to(x[i], y[i]),
                                  "%s: tensor rank %d pipe %d stage %d: %s[%zu] = %.9g, "
                                  "unsharded %.9g",
                                  what, r, p, st, ta[j].name, i, (double)x[i], (double)y[i]);
                }
            }
}

static void check_same_training(const run_cfg *c, int shard)
{
    char what[128];
    snprintf(what, sizeof what, "%s D=%d v=%d dp=%d cp=%d t=%d, shard %s", c->kind, c->D, c->v,
             c->dp, c->cp, c->tp, shard == PP_RT_SHARD_OPTIMIZER ? "optimizer" : "gradients");
    run base, u;
    abs_tol = shard == PP_RT_SHARD_GRADIENTS ? 1e-4 : 1e-7;
    /* the gradients after the synchronisation: the same floats (ZeRO-2 keeps no whole
     * gradient past the step) */
    if (shard == PP_RT_SHARD_OPTIMIZER) {
        start(&base, c, PP_RT_SHARD_NONE, 0);
        start(&u, c, shard, 0);
        for (int k = 0; k < c->dp; k++)
            compare(&u, k, &base, k, c, 1, 1, what);
        stop(&u);
        stop(&base);
    }
    /* two steps */
    start(&base, c, PP_RT_SHARD_NONE, 1);
    start(&u, c, shard, 1);
    for (int i = 0; i < STEPS; i++) {
        cr_assert(close_to(u.loss[i], base.loss[i]), "%s: step %d loss %.17g, unsharded %.17g",
                  what, i + 1, u.loss[i], base.loss[i]);
        cr_assert(close_to(u.norm[i], base.norm[i]), "%s: step %d norm %.17g, unsharded %.17g",
                  what, i + 1, u.norm[i], base.norm[i]);
    }
    for (int k = 0; k < c->dp; k++) {
        compare(&u, k, &base, k, c, 0, 0, what);
        compare(&u, k, &u, 0, c, 0, 1, what); /* replicas stay identical */
    }
    /* AdamW's state: 1/dp of the unsharded rank's (ceil; ZeRO-2: of each group, a stage or a
     * tied embedding, so up to one float of padding more per group); ZeRO-2's gradients
     * between the steps: the same shards */
    for (int g = 0; g < pp_rt_executor_ranks(u.ex); g++) {
        pp_mem_stats ms, mb;
        pp_backend_mem_stats(pp_rt_executor_backend(u.ex, g), &ms);
        pp_backend_mem_stats(pp_rt_executor_backend(base.ex, g), &mb);
        size_t reps = (size_t)c->dp * (size_t)(c->cp > 1 ? c->cp : 1);
        size_t n = mb.peak[PP_MEM_OPTIM] / 8, per = (n + reps - 1) / reps;
        size_t slack = shard == PP_RT_SHARD_GRADIENTS ? 2 * (size_t)(c->v > 1 ? c->v : 2) : 0;
        cr_assert(ms.peak[PP_MEM_OPTIM] >= 8 * per && ms.peak[PP_MEM_OPTIM] <= 8 * (per + slack),
                  "%s rank %d: optimizer state %zu, want %zu (+ %zu floats)", what, g,
                  ms.peak[PP_MEM_OPTIM], 8 * per, slack);
        if (shard == PP_RT_SHARD_GRADIENTS)
            cr_assert_eq(ms.current[PP_MEM_GRADS], ms.peak[PP_MEM_OPTIM] / 2,
                         "%s rank %d: gradients held between steps %zu, want the shards' %zu",
                         what, g, ms.current[PP_MEM_GRADS], ms.peak[PP_MEM_OPTIM] / 2);
    }
    stop(&u);
    stop(&base);
}

/* ZeRO-1, then ZeRO-2 (each micro-batch's gradient reduce-scattered into the replicas'
 * shards, runtime/executor_zero2.c: the sums run in another order, so within fp32 rounding). */
static void check_both(const run_cfg *c)
{
    check_same_training(c, PP_RT_SHARD_OPTIMIZER);
    check_same_training(c, PP_RT_SHARD_GRADIENTS);
}

Test(runtime_shard, one_f_one_b_dp2_trains_as_unsharded)
{
    check_both(&(run_cfg){"1f1b", 2, 4, 0, 2, 1, PP_RT_BACKEND_CPU, 0});
}

Test(runtime_shard, interleaved_dp2_trains_as_unsharded)
{
    check_both(&(run_cfg){"interleaved", 2, 4, 2, 2, 1, PP_RT_BACKEND_CPU, 0});
}

/* split backward (ZeRO-2: the stage's whole gradient open from an I until no I waits for its
 * W) with tensor parallelism */
Test(runtime_shard, zb_h1_dp2_tp2_trains_as_unsharded)
{
    check_both(&(run_cfg){"zb-h1", 2, 4, 0, 2, 2, PP_RT_BACKEND_CPU, 0});
}

/* dp 4 over one pipeline rank: the pack is not a multiple of 4 floats everywhere (padding) */
Test(runtime_shard, dp4_trains_as_unsharded)
{
    check_both(&(run_cfg){"1f1b", 1, 2, 0, 4, 1, PP_RT_BACKEND_CPU, 0});
}

/* Over the cp ranks too (each is a replica): dp 1 x cp 2 shards in halves. */
Test(runtime_shard, cp2_shards_over_the_context_parallel_ranks)
{
    check_both(&(run_cfg){"1f1b", 2, 4, 0, 1, 1, PP_RT_BACKEND_CPU, 2});
}

/* The plan (1/dp of AdamW's state, the padded reduce-scatter pack; ZeRO-2: the shards, each
 * stage's whole gradient while its backwards run) equals the measured peaks */
Test(runtime_shard, plan_equals_measured)
{
    static const run_cfg cs[] = {{"1f1b", 2, 4, 0, 2, 1, PP_RT_BACKEND_CPU_STAGED, 0},
                                 {"zbv", 2, 4, 0, 2, 1, PP_RT_BACKEND_CPU_STAGED, 0},
                                 {"1f1b", 1, 2, 0, 4, 2, PP_RT_BACKEND_CPU_STAGED, 0},
                                 {"zb-h1", 2, 4, 0, 2, 1, PP_RT_BACKEND_CPU_STAGED, 0},
                                 {"interleaved", 2, 4, 2, 2, 1, PP_RT_BACKEND_CPU_STAGED, 0},
                                 {"1f1b", 2, 4, 0, 1, 1, PP_RT_BACKEND_CPU_STAGED, 2}};
    for (int shard = PP_RT_SHARD_OPTIMIZER; shard <= PP_RT_SHARD_GRADIENTS; shard++)
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
            run u;
            start(&u, &cs[i], shard, 1);
            char what[64];
            snprintf(what, sizeof what, "%s dp=%d cp=%d t=%d shard %s", cs[i].kind, cs[i].dp,
                     cs[i].cp, cs[i].tp,
                     shard == PP_RT_SHARD_OPTIMIZER ? "optimizer" : "gradients");
            rt_train_expect_plan(&u, what);
            stop(&u);
        }
}

/* pprun: --shard gradients runs; with a schedule whose pipes share layers it is refused in one
 * line. */
Test(runtime_shard, pprun_refuses_what_it_does_not_run)
{
    pp_test_run_result r = pp_test_run(PPRUN " --dp 2 --shard gradients --steps 1");
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    pp_test_run_done(&r);
    r = pp_test_run(PPRUN " --dp 2 --shard gradients --schedule chimera --steps 1");
    cr_assert_eq(r.code, 2, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.err, "--shard gradients with a schedule whose pipes share layers: not run "
                            "by pprun yet"),
              "%s", r.err);
    pp_test_run_done(&r);
}
