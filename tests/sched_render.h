/* sched_render.h — helpers the format suites (test_sched_fmt.c, test_sched_csv.c) share: a
 * generated schedule, and a renderer's output as a string. Include after
 * <criterion/criterion.h>. */
#ifndef PP_TEST_SCHED_RENDER_H
#define PP_TEST_SCHED_RENDER_H

#include <stdio.h>
#include <stdlib.h>

#include "pp_sched.h"
#include "pp_test_run.h"

/* A renderer that needs only the schedule (text, csv, csv-compute). */
typedef pp_status (*render_fn)(const pp_sched *s, FILE *fp);

/* Renders with fn into a string the caller frees. */
static inline char *render(const pp_sched *s, render_fn fn)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    cr_assert(fp);
    cr_assert_eq(fn(s, fp), PP_OK, "%s", pp_err_msg());
    fclose(fp);
    return buf;
}

/* kind's schedule of D ranks, N micro-batches, v chunks (0: its natural value). */
static inline pp_sched *generate(const char *kind, int D, int N, int v)
{
    pp_sched_params p = {.ranks = D, .microbatches = N, .chunks = v};
    pp_sched *s = NULL;
    cr_assert_eq(pp_sched_generate(kind, &p, &s), PP_OK, "%s D=%d N=%d: %s", kind, D, N,
                 pp_err_msg());
    return s;
}

/* tests/fixtures/pytorch/NAME read as a PyTorch CSV; it must pass the checker. */
static inline pp_sched *read_pytorch_fixture(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/pytorch/%s", PP_FIXTURES_DIR, name);
    char *text = pp_test_slurp(path);
    cr_assert(text, "cannot read %s", path);
    pp_sched *s;
    cr_assert_eq(pp_sched_read_csv(text, name, &s), PP_OK, "%s", pp_err_msg());
    free(text);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s: %s", name, pp_err_msg());
    return s;
}

#endif
