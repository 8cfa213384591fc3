/* test_sched_zb.c — split backward (part of the sched suite): the checker's I/W rules, the
 * zero-bubble generators (zb-h1, zbv, dualpipev) over a range of shapes, their unit-cost
 * makespans, bubbles and peak in-flight counts against values derived by hand (in the comments)
 * or published, the split cost fields of the simulator, and the CSV forms with I and W. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_sched.h"
#include "sched_build.h"

#define EPS 1e-9

static pp_sched *gen(const char *kind, int D, int N)
{
    pp_sched_params p = {.ranks = D, .microbatches = N};
    pp_sched *s = NULL;
    cr_assert_eq(pp_sched_generate(kind, &p, &s), PP_OK, "%s D=%d N=%d: %s", kind, D, N,
                 pp_err_msg());
    return s;
}

/* Unit costs: F = 1 for L/D layers, B = 2F, I = W = F; links free. */
static pp_sim_result sim_unit(const pp_sched *s)
{
    pp_cost c;
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK, "%s", pp_err_msg());
    pp_sim_result r;
    cr_assert_eq(pp_sim_run(s, &c, 0, &r), PP_OK, "%s", pp_err_msg());
    pp_cost_fini(&c);
    return r;
}

static int find(const pp_sched *s, int r, int op, int stage, int mb)
{
    for (int i = 0; i < s->n_ops[r]; i++) {
        pp_action a = s->ops[r][i];
        if (a.op == op && a.stage == stage && a.mb == mb)
            return i;
    }
    cr_assert_fail("rank %d has no %s stage %d mb %d", r, pp_op_name(op), stage, mb);
    return -1;
}

static void move_to(pp_sched *s, int r, int from, int to)
{
    pp_action a = s->ops[r][from];
    if (from < to)
        memmove(&s->ops[r][from], &s->ops[r][from + 1], (size_t)(to - from) * sizeof a);
    else
        memmove(&s->ops[r][to + 1], &s->ops[r][to], (size_t)(from - to) * sizeof a);
    s->ops[r][to] = a;
}

static int count_op(const pp_sched *s, int op)
{
    int n = 0;
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->n_ops[r]; i++)
            n += s->ops[r][i].op == op;
    return n;
}

#define EXPECT_REJECT(s, ...)                                                                      \
    do {                                                                                           \
        cr_assert_neq(pp_sched_check(s), PP_OK, "accepted");                                       \
        const char *frags_[] = {__VA_ARGS__};                                                      \
        for (size_t k_ = 0; k_ < sizeof frags_ / sizeof frags_[0]; k_++)                           \
            cr_assert(strstr(pp_err_text(), frags_[k_]), "message \"%s\" lacks \"%s\"",            \
                      pp_err_text(), frags_[k_]);                                                  \
    } while (0)

/* ---- the checker's rules --------------------------------------------------------------------- */

Test(sched_zb, w_before_its_i_is_refused_with_the_reason)
{
    pp_sched *s = gen("zb-h1", 4, 8);
    int r = 2, i = find(s, r, PP_OP_I, 2, 3), w = find(s, r, PP_OP_W, 2, 3);
    move_to(s, r, w, i);
    EXPECT_REJECT(s, "rank 2, action ", "(W pipe 0 stage 2 mb 3): weight-gradient backward "
                                        "before its input-gradient backward (I at action");
    pp_sched_destroy(s);
}

Test(sched_zb, i_before_the_downstream_i_is_refused_with_the_reason)
{
    /* rank 1's I of mb 2 ahead of the RECV_B that brings stage 2's I: the gradient is not there */
    pp_sched *s = gen("zb-h1", 4, 8);
    int i = find(s, 1, PP_OP_I, 1, 2), rv = find(s, 1, PP_OP_RECV_B, 1, 2);
    move_to(s, 1, i, rv);
    EXPECT_REJECT(s, "rank 1, action ", "(I pipe 0 stage 1 mb 2): input-gradient backward (I) "
                                        "before the RECV_B of its input (action");
    pp_sched_destroy(s);
}

Test(sched_zb, i_before_the_downstream_i_on_the_same_rank_is_refused)
{
    /* zbv's turn: rank D-1 holds stages D-1 and D; stage D-1's I waits for stage D's I */
    pp_sched *s = gen("zbv", 4, 8);
    int up = find(s, 3, PP_OP_I, 4, 1), down = find(s, 3, PP_OP_I, 3, 1);
    cr_assert_lt(up, down);
    move_to(s, 3, down, up);
    EXPECT_REJECT(s, "rank 3, action ", "(I pipe 0 stage 3 mb 1): input-gradient backward (I) "
                                        "before the I of stage 4 (action");
    pp_sched_destroy(s);
}

Test(sched_zb, i_before_its_forward_and_missing_or_mixed_halves)
{
    const char *t = "schedule t ranks 1 microbatches 2\nplace d: 0\n"
                    "rank 0: F0.0 I0.0 W0.0 I1.0 F1.0 W1.0\n";
    pp_sched *s;
    cr_assert_eq(pp_sched_parse_text(t, "t.txt", &s), PP_OK, "%s", pp_err_msg());
    EXPECT_REJECT(s, "rank 0, action 3 (I pipe 0 stage 0 mb 1): input-gradient backward before "
                     "its forward (F at action 4)");
    pp_sched_destroy(s);
    t = "schedule t ranks 1 microbatches 2\nplace d: 0\nrank 0: F0.0 I0.0 W0.0 F1.0 I1.0\n";
    cr_assert_eq(pp_sched_parse_text(t, "t.txt", &s), PP_OK, "%s", pp_err_msg());
    EXPECT_REJECT(s, "rank 0, action 4 (I pipe 0 stage 0 mb 1): its weight-gradient backward "
                     "(W pipe 0 stage 0 mb 1) is missing");
    pp_sched_destroy(s);
    t = "schedule t ranks 1 microbatches 2\nplace d: 0\nrank 0: F0.0 B0.0 F1.0 W1.0\n";
    cr_assert_eq(pp_sched_parse_text(t, "t.txt", &s), PP_OK, "%s", pp_err_msg());
    EXPECT_REJECT(s, "rank 0, action 3 (W pipe 0 stage 0 mb 1): its input-gradient backward "
                     "(I pipe 0 stage 0 mb 1) is missing");
    pp_sched_destroy(s);
    /* B for one micro-batch, I + W for another: allowed (DualPipeV mixes them) */
    t = "schedule t ranks 1 microbatches 2\nplace d: 0\nrank 0: F0.0 B0.0 F1.0 I1.0 W1.0\n";
    cr_assert_eq(pp_sched_parse_text(t, "t.txt", &s), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    pp_sched_destroy(s);
}

Test(sched_zb, reduce_waits_for_the_last_w)
{
    /* two replicas of one stage reduce after their last W, not their last I */
    const char *t = "schedule t ranks 1 microbatches 2\nplace d: 0\n"
                    "rank 0: F0.0 F1.0 I0.0 I1.0 W0.0 W1.0\n";
    pp_sched *s;
    cr_assert_eq(pp_sched_parse_text(t, "t.txt", &s), PP_OK, "%s", pp_err_msg());
    int id;
    int ranks[] = {0};
    pp_stage_ref st[] = {{0, 0}};
    cr_assert_eq(pp_sched_add_reduce(s, ranks, 1, st, 1, &id), PP_OK);
    cr_assert_eq(pp_sched_push(s, 0, PP_OP_REDUCE, 0, id, -1), PP_OK);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    move_to(s, 0, 6, 4); /* REDUCE after the I's, before the W's */
    cr_assert_eq(s->ops[0][4].op, PP_OP_REDUCE);
    EXPECT_REJECT(s, "REDUCE before the last backward of pipe 0 stage 0 (0 of 2 backwards done; "
                     "the last is at action 6)");
    pp_sched_destroy(s);
}

/* ---- the generators pass the checker --------------------------------------------------------- */

Test(sched_zb, every_zero_bubble_schedule_passes_over_a_range_of_shapes)
{
    const char *kinds[] = {"zb-h1", "zbv", "dualpipev"};
    int tried = 0;
    for (int k = 0; k < 3; k++) {
        const pp_sched_desc *d = pp_sched_lookup(kinds[k]);
        cr_assert(d && d->split_backward && d->opt_in, "%s", kinds[k]);
        for (int D = 1; D <= 8; D++)
            for (int N = 1; N <= 20; N++) {
                pp_sched_params p = {.ranks = D, .microbatches = N};
                if (pp_sched_desc_check(d, &p) != PP_OK)
                    continue;
                pp_sched *s = gen(kinds[k], D, N);
                cr_assert_eq(pp_sched_check(s), PP_OK, "%s D=%d N=%d: %s", kinds[k], D, N,
                             pp_err_msg());
                int S = s->stages_per_pipe;
                /* every (stage, mb) has one F and one backward, and I/W appear */
                cr_assert_eq(count_op(s, PP_OP_F), S * N, "%s D=%d N=%d", kinds[k], D, N);
                cr_assert_eq(count_op(s, PP_OP_I), count_op(s, PP_OP_W));
                cr_assert_eq(count_op(s, PP_OP_B) + count_op(s, PP_OP_I), S * N);
                cr_assert_gt(count_op(s, PP_OP_W), 0, "%s D=%d N=%d", kinds[k], D, N);
                pp_sched_destroy(s);
                tried++;
            }
    }
    cr_assert_geq(tried, 300, "only %d shapes", tried);
}

Test(sched_zb, registry_rules_of_the_family)
{
    pp_sched_params p = {.ranks = 4, .microbatches = 7};
    cr_assert_eq(pp_sched_desc_check(pp_sched_lookup("dualpipev"), &p), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "dualpipev needs at least as many micro-batches as stages "
                                    "(N >= 2 x D = 8), got N = 7"),
              "%s", pp_err_text());
    p.chunks = 3;
    cr_assert_eq(pp_sched_desc_check(pp_sched_lookup("zbv"), &p), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "zbv has 2 chunks per rank"), "%s", pp_err_text());
    /* opt-in: out of the default search, in where named */
    const pp_sched_desc *z = pp_sched_lookup("zb-h1");
    cr_assert(!pp_sched_desc_searched(z, NULL) && !pp_sched_desc_searched(z, ""));
    cr_assert(pp_sched_desc_searched(z, "1f1b,zb-h1"));
    cr_assert(!pp_sched_desc_searched(z, "zb-h1x,1f1b"));
    cr_assert(pp_sched_desc_searched(pp_sched_lookup("1f1b"), NULL));
}

/* ---- unit-cost figures ------------------------------------------------------------------------
 * ZB-H1, F = I = W = 1, free links, N >= D (gen_zbh1.c's order). Rank d's forward of micro-batch
 * 0 runs in [d, d+1]; the last rank's I of mb 0 follows its F in [D, D+1], and the I's climb one
 * rank per unit, so rank d's first I runs in [2D-1-d, 2D-d]. Rank 0: F(0..D-1) in [0, D] (its
 * D-1 warm-up forwards and its first step's F), idle until its I(0) in [2D-1, 2D]: D - 1 idle
 * units; from there it runs W(0), F(D), I(1), W(1), ... each step F, I, W back to back, because
 * its upstream ranks run ahead (they keep W's pending), so its I's arrive in time. Its busy time
 * is 3N, so it ends at 3N + D - 1 with W(N-1). Rank d's last I runs one unit before rank
 * (d-1)'s, in [3N+D-3-d, 3N+D-2-d]; after it come its d pending W's and W(N-1-d): d + 1 units,
 * so it ends at 3N + D - 1 as well. Makespan 3N + D - 1, idle D - 1 on every rank:
 *   bubble_over_total = (D-1) / (3N + D - 1), bubble_over_ideal = (D-1) / (3N).
 * 1F1B with B = 2: 3N + 3(D-1); the bubble is a third of 1F1B's, the paper's (p-1)(T_F + T_B -
 * T_W) against (p-1)(T_F + T_B + T_W) (Qi et al., ICLR 2024, Section 3.1, with T_B its I).
 * Peak in-flight (held until W): rank d warms up with D-1-d forwards and runs d steps without a
 * W, reaching D - 1, then D at the next step's F before its first W: D on every rank (1F1B: D -
 * d); of those, held after I and before W: d + 1 on rank d. */
Test(sched_zb, zbh1_unit_makespans_and_bubbles_equal_the_hand_derived_values)
{
    int shapes[][2] = {{4, 4}, {4, 8}, {8, 8}, {8, 16}};
    double want[] = {15, 27, 31, 55};
    for (int k = 0; k < 4; k++) {
        int D = shapes[k][0], N = shapes[k][1];
        pp_sched *s = gen("zb-h1", D, N);
        pp_sim_result r = sim_unit(s);
        cr_assert_float_eq(r.makespan, want[k], EPS, "D=%d N=%d: %g", D, N, r.makespan);
        cr_assert_float_eq(r.makespan, 3.0 * N + D - 1, EPS);
        cr_assert_float_eq(r.bubble_over_total, (D - 1.0) / (3.0 * N + D - 1), EPS);
        cr_assert_float_eq(r.bubble_over_ideal, (D - 1.0) / (3.0 * N), EPS);
        for (int d = 0; d < D; d++) {
            cr_assert_float_eq(r.busy[d], 3.0 * N, EPS);
            cr_assert_float_eq(r.idle[d], D - 1.0, EPS, "D=%d N=%d rank %d", D, N, d);
            cr_assert_float_eq(r.peak_activations[d], D, EPS, "D=%d N=%d rank %d", D, N, d);
            cr_assert_float_eq(r.peak_held_for_w[d], d + 1.0, EPS, "D=%d N=%d rank %d", D, N, d);
        }
        pp_sched *o = gen("1f1b", D, N);
        pp_sim_result q = sim_unit(o);
        /* the published ratio: a third of 1F1B's bubble */
        cr_assert_float_eq(r.makespan - 3.0 * N, (q.makespan - 3.0 * N) / 3, EPS);
        cr_assert_float_eq(q.peak_held_for_w[0], 0, EPS);
        pp_sim_result_fini(&q);
        pp_sim_result_fini(&r);
        pp_sched_destroy(o);
        pp_sched_destroy(s);
    }
}

/* The simulator takes I and W from the table: doubling W on one rank moves the figures as the
 * order says, and a table without I/W durations is refused with the reason. */
Test(sched_zb, split_costs_come_from_the_table)
{
    pp_sched *s = gen("zb-h1", 2, 2);
    pp_cost c;
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK);
    cr_assert_float_eq(c.i[0], 1, EPS);
    cr_assert_float_eq(c.w[1], 1, EPS);
    /* rank 0: F0 F1 I0 W0 I1 W1; rank 1: F0 I0 F1 I1 W0 W1. With W of stage 0 = 3: rank 1 runs
     * F0 [1,2] I0 [2,3] F1 [3,4] I1 [4,5] W0 [5,6] W1 [6,7]; rank 0 runs F0 [0,1] F1 [1,2],
     * I0 [3,4] (after rank 1's I0), W0 [4,7], I1 [7,8], W1 [8,11]. */
    c.w[0] = 3;
    pp_sim_result r;
    cr_assert_eq(pp_sim_run(s, &c, 0, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_float_eq(r.busy[0], 1 + 1 + 1 + 3 + 1 + 3, EPS);
    cr_assert_float_eq(r.busy[1], 6, EPS);
    cr_assert_float_eq(r.makespan, 11, EPS, "%g", r.makespan);
    pp_sim_result_fini(&r);
    free(c.w);
    c.w = NULL;
    cr_assert_eq(pp_sim_run(s, &c, 0, &r), PP_ERR_CHECK);
    cr_assert(strstr(pp_err_text(), "the cost table has no split-backward durations"), "%s",
              pp_err_text());
    pp_cost_fini(&c);
    pp_sched_destroy(s);
}

/* I frees part of the activations when the caller says how much W keeps. */
Test(sched_zb, in_flight_peak_with_i_freeing_part)
{
    pp_sched *s = gen("zb-h1", 4, 8);
    double full[4] = {10, 10, 10, 10}, held[4] = {4, 4, 4, 4};
    /* rank 3 (w = 0, three steps without W): F I F I F I F I W ... -> after step j < 3 it holds
     * j + 1 micro-batches as held-for-W (4 each); step 3: F (+10) on 3 held = 22, I, W */
    cr_assert_float_eq(pp_sched_in_flight_peak_split(s, 3, full, held), 22, EPS);
    cr_assert_float_eq(pp_sched_in_flight_peak_split(s, 3, full, NULL), 40, EPS);
    cr_assert_float_eq(pp_sched_in_flight_peak(s, 3, full), 40, EPS);
    /* rank 0: 4 forwards (40), then I W pairs */
    cr_assert_float_eq(pp_sched_in_flight_peak_split(s, 0, full, held), 40, EPS);
    cr_assert_float_eq(pp_sched_held_for_w_peak(s, 3, held), 16, EPS);
    pp_sched_destroy(s);
}
