/* rt_train.h — a few training steps of an executor for the tests that compare a run with a
 * setting against the same run without it (test_runtime_recompute.c, test_runtime_shard.c):
 * generate the schedule, create the executor, step on synthetic data, read back losses and
 * norms; and every rank's measured peaks held to the memory plan. Static functions: include
 * it from one test file of a suite part each. */
#ifndef PP_TEST_RT_TRAIN_H
#define PP_TEST_RT_TRAIN_H

#include <criterion/criterion.h>
#include <stdlib.h>

#include "pp_rt.h"
#include "pp_test_ok.h"

enum { RT_TRAIN_MAX_STEPS = 4 };

typedef struct {
    pp_sched *s;
    pp_rt_executor *ex;
    double loss[RT_TRAIN_MAX_STEPS], norm[RT_TRAIN_MAX_STEPS];
} rt_train;

/* Runs `steps` steps (update or not) of the schedule `kind` (D ranks, N micro-batches, v chunks)
 * with ep (its model, B, T and settings; the schedule is filled in) on synthetic data of
 * data_seed. */
static void rt_train_run(rt_train *u, const char *kind, int D, int N, int v,
                         pp_rt_exec_params ep, int steps, int update, uint64_t data_seed)
{
    cr_assert(steps >= 1 && steps <= RT_TRAIN_MAX_STEPS);
    pp_sched_params sp = {.ranks = D, .microbatches = N, .chunks = v,
                          .layers = ep.model->layers};
    OK(pp_sched_generate(kind, &sp, &u->s));
    ep.sched = u->s;
    OK(pp_rt_executor_create(&ep, &u->ex));
    int rows = pp_rt_executor_batch_rows(u->ex), T = ep.seq;
    pp_rt_data *d;
    OK(pp_rt_data_synthetic(ep.model->vocab, data_seed, &d));
    int32_t *batch = calloc((size_t)rows * (size_t)(T + 1), sizeof *batch);
    for (int i = 0; i < steps; i++) {
        OK(pp_rt_data_next(d, rows, T, batch));
        pp_rt_step_result r;
        OK(pp_rt_executor_step(u->ex, batch, update, &r));
        u->loss[i] = r.loss, u->norm[i] = r.grad_norm;
    }
    free(batch);
    pp_rt_data_destroy(d);
}

static void rt_train_stop(rt_train *u)
{
    pp_rt_executor_destroy(u->ex);
    pp_sched_destroy(u->s);
}

/* Every rank's measured peaks (each category and the total) equal its plan to the byte. */
static void rt_train_expect_plan(rt_train *u, const char *what)
{
    cr_assert(pp_rt_executor_plan_is_exact(u->ex), "%s: the plan is not exact here", what);
    for (int g = 0; g < pp_rt_executor_ranks(u->ex); g++) {
        pp_mem_stats got;
        pp_backend_mem_stats(pp_rt_executor_backend(u->ex, g), &got);
        const pp_rt_plan_rank *pl = pp_rt_executor_plan(u->ex, g);
        for (int m = 0; m < PP_MEM__COUNT; m++)
            cr_assert_eq(got.peak[m], pl->peak[m], "%s rank %d: %s peak %zu, plan %zu", what, g,
                         pp_mem_category_name((pp_mem_category)m), got.peak[m], pl->peak[m]);
        cr_assert_eq(got.peak_total, pl->peak_total, "%s rank %d", what, g);
    }
}

#endif
