/* test_runtime_exec.c — the executor against the unpipelined reference over the grid the
 * issue asks for: every generator (gpipe, 1f1b, interleaved with v = 2 and 3, chimera,
 * bitpipe), D in {2, 4}, N in {D, 2D}, even and uneven (Llama 3) layer splits, dp in {1, 2}.
 *
 * Layer counts (test_runtime_exec_equiv.c, layers_for): even splits use L = 12 (S = 2, 4, 6,
 * 12) or 16 (S = 8); uneven splits the smallest L >= 10 with (L + 2) % S == 0: L = 10 for
 * S = 4 and 6, L = 14 for S = 8, L = 22 for S = 12. An uneven split needs S >= 3, so the
 * D = 2, v = 1 schedules (gpipe, 1f1b, chimera with S = 2) run even splits only.
 * Chimera needs an even D and N a multiple of D; bitpipe N a multiple of D: the grid fits.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "test_runtime_exec_equiv.h"

static void grid(const char *kind, int v)
{
    int S1 = v ? v : (strcmp(kind, "bitpipe") == 0 ? 2 : 1);
    for (int D = 2; D <= 4; D += 2)
        for (int N = D; N <= 2 * D; N += D)
            for (int uneven = 0; uneven <= 1; uneven++)
                for (int dp = 1; dp <= 2; dp++) {
                    if (uneven && S1 * D < 3)
                        continue;
                    exec_case c = {
                        .kind = kind, .D = D, .N = N, .v = v, .uneven = uneven, .dp = dp};
                    exec_check_case(&c);
                }
}

Test(runtime_exec, gpipe_equals_reference)
{
    grid("gpipe", 0);
}

Test(runtime_exec, one_f_one_b_equals_reference)
{
    grid("1f1b", 0);
}

Test(runtime_exec, interleaved_v2_equals_reference)
{
    grid("interleaved", 2);
}

Test(runtime_exec, interleaved_v3_equals_reference)
{
    grid("interleaved", 3);
}

Test(runtime_exec, chimera_equals_reference)
{
    grid("chimera", 0);
}

Test(runtime_exec, bitpipe_equals_reference)
{
    grid("bitpipe", 0);
}

/* Llama 3's interleaved figure: 4 ranks, v = 2, N = 10 in groups of G = 5, uneven split. */
Test(runtime_exec, interleaved_llama3_groups_equal_reference)
{
    exec_case c = {
        .kind = "interleaved", .D = 4, .N = 10, .v = 2, .uneven = 1, .dp = 1, .group = 5};
    exec_check_case(&c);
}

/* First/last-stage splits (Megatron's --decoder-first/last-pipeline-num-layers), every schedule:
 * head-heavy (fewer layers on the last stage), embedding-aware (fewer on the first), both, and
 * a bidirectional pipe pair that shares one split; L = 12 throughout. */
Test(runtime_exec, first_last_stage_splits_equal_reference)
{
    static const exec_case cases[] = {
        {.kind = "gpipe", .D = 2, .N = 4, .dp = 1, .layers = 12, .first = 7, .last = 5},
        {.kind = "1f1b", .D = 2, .N = 4, .dp = 2, .layers = 12, .last = 4}, /* 8 + 4 */
        {.kind = "1f1b", .D = 4, .N = 4, .dp = 1, .layers = 12, .first = 4, .last = 2},
        {.kind = "1f1b", .D = 3, .N = 6, .dp = 1, .layers = 12, .first = 2}, /* 2 + 5 + 5 */
        {.kind = "interleaved",
         .D = 2,
         .N = 4,
         .v = 2,
         .dp = 1,
         .layers = 12,
         .first = 4,
         .last = 2}, /* virtual stages 4 + 3 + 3 + 2 */
        {.kind = "chimera", .D = 2, .N = 2, .dp = 1, .layers = 12, .first = 7, .last = 5},
        {.kind = "chimera", .D = 4, .N = 4, .dp = 1, .layers = 12, .first = 2, .last = 2},
        {.kind = "bitpipe", .D = 2, .N = 2, .dp = 1, .layers = 12, .first = 4, .last = 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        exec_check_case(&cases[i]);
}

Test(runtime_exec, one_rank_schedule_equals_reference)
{
    exec_case c = {.kind = "gpipe", .D = 1, .N = 3, .dp = 2};
    exec_check_case(&c);
}

/* ---- errors: bad parameters are refused with the value named; a failure inside a step stops
 * every rank (no hang) and says which rank and action failed ---- */
static pp_rt_executor *try_create(pp_model_cfg *m, const pp_sched *s, int seq, pp_status *st)
{
    pp_rt_exec_params ep = {.model = m,
                            .sched = s,
                            .micro_batch = 1,
                            .seq = seq,
                            .dp = 1,
                            .seed = 1,
                            .adamw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f}};
    pp_rt_executor *ex = NULL;
    *st = pp_rt_executor_create(&ep, &ex);
    return ex;
}

Test(runtime_exec, refuses_schedules_that_do_not_fit)
{
    pp_model_cfg m = exec_tiny_model(8);
    pp_sched_params sp = {.ranks = 2, .microbatches = 2, .layers = 4};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("1f1b", &sp, &s), PP_OK);
    pp_status st;
    cr_assert_null(try_create(&m, s, 8, &st));
    cr_assert_eq(st, PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "the schedule splits 4 layers but the model has 8"), "%s",
              pp_err_text());
    m.layers = 4;
    cr_assert_null(try_create(&m, s, m.seq + 1, &st));
    cr_assert_eq(st, PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "sequence length 9 is outside 1..8"), "%s", pp_err_text());
    /* a schedule missing its last backward fails the checker before any thread starts */
    s->n_ops[0]--;
    cr_assert_null(try_create(&m, s, 8, &st));
    cr_assert(st == PP_ERR_CHECK || st == PP_ERR_DEADLOCK, "%d: %s", st, pp_err_text());
    s->n_ops[0]++;
    pp_sched_destroy(s);
}

Test(runtime_exec, a_failing_rank_stops_the_step_and_is_named, .timeout = 60)
{
    pp_model_cfg m = exec_tiny_model(4);
    pp_sched_params sp = {.ranks = 4, .microbatches = 4, .layers = 4};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("1f1b", &sp, &s), PP_OK);
    pp_status st;
    pp_rt_executor *ex = try_create(&m, s, 8, &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    int rows = pp_rt_executor_batch_rows(ex);
    int32_t *batch = calloc((size_t)rows * 9, sizeof *batch);
    /* micro-batch 2's first token is outside the vocabulary: rank 0's F of mb 2 fails while
     * ranks 1..3 wait for data that will never come; the abort must wake them. */
    batch[2 * 9] = 1000;
    pp_rt_step_result r;
    st = pp_rt_executor_step(ex, batch, 1, &r);
    cr_assert_neq(st, PP_OK);
    cr_assert(strstr(pp_err_text(), "rank 0 (replica 0, pipeline rank 0)"), "%s", pp_err_text());
    cr_assert(strstr(pp_err_text(), "F pipe 0 stage 0 mb 2"), "%s", pp_err_text());
    batch[2 * 9] = 1;
    cr_assert_eq(pp_rt_executor_step(ex, batch, 1, &r), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "failed in an earlier step"), "%s", pp_err_text());
    free(batch);
    pp_rt_executor_destroy(ex);
    pp_sched_destroy(s);
}
