/* test_runtime_exec_split.c — the executor runs split backward (I and W actions: runtime/
 * executor_run.c, stage_bwd.c): loss and every gradient of a step, and the parameters after
 * AdamW steps, equal the unpipelined model's (test_runtime_exec_equiv.c's invariant) for
 * schedules whose backwards are split, with each W right after its I or every W deferred to
 * the end of the rank's program (the most held for W), and for the registry's zero-bubble
 * schedules (zb-h1, zbv, dualpipev); with data parallelism, interleaved stages and one rank
 * holding the whole pipe (every hop a hand-over). The memory plan of the same schedules equals
 * the measured peaks in test_runtime_exec_mem.c; tensor parallelism in test_runtime_tp.c. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "pp_rt.h"
#include "sched_split.h"
#include "test_runtime_exec_equiv.h"

static void check_split(const char *kind, int D, int N, int v, int dp, int where)
{
    int L = 2 * D * (v ? v : 1); /* two layers per stage */
    pp_sched *s = sched_split_gen(kind, D, N, v, L, where);
    char what[96];
    snprintf(what, sizeof what, "%s D=%d N=%d v=%d dp=%d split, W %s", kind, D, N, v, dp,
             where == SPLIT_W_AT_END ? "at the end" : "after its I");
    exec_check_sched(s, dp, what);
    pp_sched_destroy(s);
}

Test(runtime_exec_split, onef1b_w_after_i_d2)
{
    check_split("1f1b", 2, 4, 0, 1, SPLIT_W_AFTER_I);
}

Test(runtime_exec_split, onef1b_w_at_end_d4)
{
    check_split("1f1b", 4, 8, 0, 1, SPLIT_W_AT_END);
}

Test(runtime_exec_split, gpipe_w_at_end_dp2)
{
    check_split("gpipe", 2, 4, 0, 2, SPLIT_W_AT_END);
}

/* two stages per rank (Megatron's virtual pipeline): slots of both chunks held for W */
Test(runtime_exec_split, interleaved_w_at_end_d2)
{
    check_split("interleaved", 2, 4, 2, 1, SPLIT_W_AT_END);
}

Test(runtime_exec_split, one_rank_w_at_end)
{
    check_split("1f1b", 1, 3, 0, 1, SPLIT_W_AT_END);
}

/* The zero-bubble family from the registry (branch zbs's generators): ZB-H1, ZB-V (two chunks
 * per rank in a V) and DualPipeV, at D = 2 and 4, and with dp 2. */
static void check_named(const char *kind, int D, int N, int dp)
{
    exec_case c = {.kind = kind, .D = D, .N = N, .dp = dp};
    exec_check_case(&c);
}

Test(runtime_exec_split, zb_h1_d2_d4_dp2)
{
    check_named("zb-h1", 2, 4, 1);
    check_named("zb-h1", 4, 8, 1);
    check_named("zb-h1", 2, 4, 2);
}

Test(runtime_exec_split, zbv_d2_d4_dp2)
{
    check_named("zbv", 2, 4, 1);
    check_named("zbv", 4, 8, 1);
    check_named("zbv", 2, 4, 2);
}

Test(runtime_exec_split, dualpipev_d2_d4_dp2)
{
    check_named("dualpipev", 2, 4, 1);
    check_named("dualpipev", 4, 8, 1);
    check_named("dualpipev", 2, 4, 2);
}
