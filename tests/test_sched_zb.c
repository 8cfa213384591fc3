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
#include "sched_equal.h"
#include "sched_render.h"

#define EPS 1e-9

static pp_sched *gen(const char *kind, int D, int N);

/* ---- orders against PyTorch's ------------------------------------------------------------------
 * PyTorch's own test artifact (pytorch/pytorch test/distributed/pipelining/artifacts/
 * dualpipev_4rank_10mb.csv, ScheduleDualPipeV's compute order for 4 ranks and 10 micro-batches,
 * with I, W, full B and OVERLAP_F_B pairs) reads back as exactly pptune's dualpipev of that size.
 */
Test(sched_zb, dualpipev_is_pytorchs_order)
{
    pp_sched *theirs = read_pytorch_fixture("dualpipev_4rank_10mb.csv");
    pp_sched *ours = gen("dualpipev", 4, 10);
    snprintf(theirs->kind, sizeof theirs->kind, "%s", ours->kind);
    char why[256];
    cr_assert(pp_test_sched_equal(ours, theirs, why, sizeof why), "%s", why);
    pp_sched_destroy(theirs);
    pp_sched_destroy(ours);
}

/* The CSV forms carry I and W as PyTorch's cells, REDUCE_GRAD after a stage's last W. */
Test(sched_zb, csv_cells_of_a_split_backward)
{
    pp_sched *s = gen("zb-h1", 2, 2);
    char *csv = render(s, pp_sched_write_csv_compute);
    cr_assert_str_eq(csv, "0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1F1,1I1,1W0,1W1\n");
    free(csv);
    csv = render(s, pp_sched_write_csv);
    /* the forward send's wait after its I (what ships the input gradient), the reduce after
     * the last W (PyTorch's _add_reduce_grad counts B and W) */
    cr_assert_str_eq(csv, "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0I0,0WAIT_SEND_F0,0W0,0RECV_B1,"
                          "0I1,0WAIT_SEND_F1,0W1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n"
                          "1RECV_F0,1F0,1I0,1SEND_B0,1RECV_F1,1F1,1I1,1SEND_B1,1W0,1W1,"
                          "1REDUCE_GRAD,1WAIT_REDUCE_GRAD,1WAIT_SEND_B0,1WAIT_SEND_B1\n");
    pp_sched *back;
    cr_assert_eq(pp_sched_read_csv(csv, "zb.csv", &back), PP_OK, "%s", pp_err_msg());
    snprintf(back->kind, sizeof back->kind, "zb-h1");
    char why[256];
    cr_assert(pp_test_sched_equal(s, back, why, sizeof why), "%s", why);
    free(csv);
    pp_sched_destroy(back);
    pp_sched_destroy(s);
}

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

/* A one-rank schedule in the text form that the checker refuses with msg. */
static void expect_text_rejected(const char *text, const char *msg)
{
    pp_sched *s;
    cr_assert_eq(pp_sched_parse_text(text, "t.txt", &s), PP_OK, "%s", pp_err_msg());
    EXPECT_REJECT(s, PP_ERR_CHECK, msg);
    pp_sched_destroy(s);
}

/* ---- the checker's rules --------------------------------------------------------------------- */

/* kind's D = 4, N = 8 schedule with rank r's action (op, stage, mb) moved to where (to_op,
 * to_stage, mb) is, which the checker must refuse with both fragments of its message. */
static void expect_move_rejected(const char *kind, int r, int op, int stage, int to_op,
                                 int to_stage, int mb, const char *where, const char *why)
{
    pp_sched *s = gen(kind, 4, 8);
    move_to(s, r, find(s, r, op, stage, mb), find(s, r, to_op, to_stage, mb));
    EXPECT_REJECT(s, PP_ERR_CHECK, where, why);
    pp_sched_destroy(s);
}

Test(sched_zb, w_before_its_i_is_refused_with_the_reason)
{
    expect_move_rejected("zb-h1", 2, PP_OP_W, 2, PP_OP_I, 2, 3, "rank 2, action ",
                         "(W pipe 0 stage 2 mb 3): weight-gradient backward before its "
                         "input-gradient backward (I at action");
}

/* rank 1's I of mb 2 ahead of the RECV_B that brings stage 2's I: the gradient is not there */
Test(sched_zb, i_before_the_downstream_i_is_refused_with_the_reason)
{
    expect_move_rejected("zb-h1", 1, PP_OP_I, 1, PP_OP_RECV_B, 1, 2, "rank 1, action ",
                         "(I pipe 0 stage 1 mb 2): input-gradient backward (I) before the "
                         "RECV_B of its input (action");
}

/* the gradient an I ships cannot leave before the I has run */
Test(sched_zb, send_b_before_its_i_is_refused)
{
    expect_move_rejected("zb-h1", 1, PP_OP_SEND_B, 1, PP_OP_I, 1, 2, "rank 1, action ",
                         "(SEND_B pipe 0 stage 1 mb 2 peer 0): send before the I that produces "
                         "it (action");
}

/* zbv's turn: rank D-1 holds stages D-1 and D; stage D-1's I waits for stage D's I (local) */
Test(sched_zb, i_before_the_downstream_i_on_the_same_rank_is_refused)
{
    expect_move_rejected("zbv", 3, PP_OP_I, 3, PP_OP_I, 4, 1, "rank 3, action ",
                         "(I pipe 0 stage 3 mb 1): input-gradient backward (I) before the I of "
                         "stage 4 (action");
}

Test(sched_zb, i_before_its_forward_and_missing_or_mixed_halves)
{
#define ONE_RANK "schedule t ranks 1 microbatches 2\nplace d: 0\nrank 0: "
    expect_text_rejected(ONE_RANK "F0.0 I0.0 W0.0 I1.0 F1.0 W1.0\n",
                         "rank 0, action 3 (I pipe 0 stage 0 mb 1): input-gradient backward "
                         "before its forward (F at action 4)");
    expect_text_rejected(ONE_RANK "F0.0 I0.0 W0.0 F1.0 I1.0\n",
                         "rank 0, action 4 (I pipe 0 stage 0 mb 1): its weight-gradient "
                         "backward (W pipe 0 stage 0 mb 1) is missing");
    expect_text_rejected(ONE_RANK "F0.0 B0.0 F1.0 W1.0\n",
                         "rank 0, action 3 (W pipe 0 stage 0 mb 1): its input-gradient "
                         "backward (I pipe 0 stage 0 mb 1) is missing");
    /* B for one micro-batch, I + W for another: allowed (DualPipeV mixes them) */
    pp_sched *s;
    cr_assert_eq(pp_sched_parse_text(ONE_RANK "F0.0 B0.0 F1.0 I1.0 W1.0\n", "t.txt", &s), PP_OK,
                 "%s", pp_err_msg());
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    pp_sched_destroy(s);
#undef ONE_RANK
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
    EXPECT_REJECT(s, PP_ERR_CHECK,
                  "REDUCE before the last backward of pipe 0 stage 0 (0 of 2 backwards done; "
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
        cr_assert(d && d->split_backward, "%s", kinds[k]);
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
                cr_assert_eq(count_ops(s, PP_OP_F), S * N, "%s D=%d N=%d", kinds[k], D, N);
                cr_assert_eq(count_ops(s, PP_OP_I), count_ops(s, PP_OP_W));
                cr_assert_eq(count_ops(s, PP_OP_B) + count_ops(s, PP_OP_I), S * N);
                cr_assert_gt(count_ops(s, PP_OP_W), 0, "%s D=%d N=%d", kinds[k], D, N);
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
    cr_assert(strstr(pp_err_text(), "zbv has 2 chunks per rank, got --chunks 3"), "%s",
              pp_err_text());
    /* in the default search (the tuner prices I and W), and where named */
    const pp_sched_desc *z = pp_sched_lookup("zb-h1");
    cr_assert(!z->opt_in && pp_sched_desc_searched(z, NULL) && pp_sched_desc_searched(z, ""));
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

/* ZB-H1 holds at most min(D, N) micro-batches on every rank (warm-up D-1-d, then d steps without
 * a W: the count reaches D before the first W, or stops at N), for every shape. */
Test(sched_zb, zbh1_peak_in_flight_is_min_d_n_on_every_rank)
{
    for (int D = 1; D <= 8; D++)
        for (int N = 1; N <= 20; N++) {
            pp_sched *s = gen("zb-h1", D, N);
            for (int d = 0; d < D; d++)
                cr_assert_float_eq(pp_sched_in_flight_peak(s, d, NULL), D < N ? D : N, EPS,
                                   "D=%d N=%d rank %d", D, N, d);
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

/* ZB-V and DualPipeV, unit costs: a chunk holds L/(2D) layers, so its F = I = W = 1/2 and every
 * rank is busy 2N x 3 x 1/2 = 3N. Lower bound on the makespan: rank D-1 cannot start before the
 * forwards of stages 0..D-2 of micro-batch 0 have run, (D-1)/2, and is then busy 3N, so
 * makespan >= 3N + (D-1)/2. ZB-V reaches it for N >= 2D (measured here, every rank idle
 * (D-1)/2: the bubble is the pipeline's fill alone); at N = D, ZB-V's warm-up leaves every rank
 * idle D - 1 (measured: 3N + D - 1, ZB-H1's figure). DualPipeV's overlapped pairs start only
 * when the inputs of both halves are there, as PyTorch's simulator times them: 3N + D - 1 for
 * N >= 2D (every rank idle D - 1; dualpipev_pairs_start_together derives D = 2 by hand;
 * PyTorch's add_schedule_op_spacing gives twice these figures, its F being 1, on the 49 shapes
 * tests/torch/csv_interop.py compares). Peak in-flight for N >= 2D: D on every rank for
 * ZB-V, the paper's "same peak memory as 1F1B" (p M_B, Qi et al. Section 6); DualPipeV D + 1/2,
 * one chunk more (DualPipe's table has PP + 1 against 1F1B's PP). Held for W (measured): ZB-V
 * d + 1/2 on rank d, DualPipeV (d + 1)/2 (its first half runs fused B's). */
Test(sched_zb, v_shaped_unit_figures)
{
    struct {
        const char *kind;
        int D, N;
        double makespan;
    } c[] = {{"zbv", 4, 4, 15},        {"zbv", 4, 8, 25.5},      {"zbv", 8, 8, 31},
             {"zbv", 8, 16, 51.5},     {"dualpipev", 4, 8, 27},  {"dualpipev", 4, 16, 51},
             {"dualpipev", 8, 16, 55}, {"dualpipev", 8, 32, 103}};
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        int D = c[k].D, N = c[k].N, dual = c[k].kind[0] == 'd';
        pp_sched *s = gen(c[k].kind, D, N);
        pp_sim_result r = sim_unit(s);
        cr_assert_float_eq(r.makespan, c[k].makespan, EPS, "%s D=%d N=%d: %g", c[k].kind, D, N,
                           r.makespan);
        double bound = 3.0 * N + (D - 1) / 2.0;
        cr_assert_float_eq(r.makespan, N >= 2 * D && !dual ? bound : 3.0 * N + D - 1, EPS);
        for (int d = 0; d < D; d++) {
            cr_assert_float_eq(r.busy[d], 3.0 * N, EPS);
            cr_assert_float_eq(r.idle[d], r.makespan - 3.0 * N, EPS, "rank %d", d);
            if (N < 2 * D)
                continue;
            cr_assert_float_eq(r.peak_activations[d], dual ? D + 0.5 : D, EPS,
                               "%s D=%d N=%d rank %d", c[k].kind, D, N, d);
            cr_assert_float_eq(r.peak_held_for_w[d], dual ? (d + 1) / 2.0 : d + 0.5, EPS,
                               "%s D=%d N=%d rank %d", c[k].kind, D, N, d);
        }
        pp_sim_result_fini(&r);
        pp_sched_destroy(s);
    }
}

/* DualPipeV, D = 2, N = 4, by hand. Rank 0 holds stages 0 and 3, rank 1 stages 1 and 2; a
 * chunk's F = I = W = 1/2, B = 1; "F2.3+B0.0" is the pair of F of micro-batch 2 through stage 3
 * with B of micro-batch 0 through stage 0. PyTorch's order (gen_dualpipev.c) and the times:
 *   rank 0: F0.0 F1.0 F2.0 [0, 1.5]; F0.3 [1.5, 2] once F0.2 has run on rank 1 [1, 1.5]; I0.3,
 *           W0.3, F1.3 [2, 3.5]; F3.0+B1.3 [3.5, 5]; idle: F2.3+B0.0 waits for B0.1, which
 *           rank 1's pair F2.2+B0.1 ends at 5.5, and runs [5.5, 7]; B2.3 [7, 8]; idle again:
 *           F3.3+B1.0 waits for B1.1 (rank 1's F3.2+B1.1 ends at 8.5) [8.5, 10]; B3.3 [10, 11];
 *           I2.0 W2.0 I3.0 W3.0 [11, 13] (I3.0 needs I3.1, which rank 1 ends at 12: on time).
 *   rank 1: idle [0, 0.5]; F0.1 F0.2 F1.1 F1.2 F2.1 [0.5, 3]; B0.2 [3, 4] once I0.3 ended
 *           (2.5); F2.2+B0.1 [4, 5.5] (B0.1 takes B0.2's output, at 4); F3.1+B1.2 [5.5, 7];
 *           F3.2+B1.1 [7, 8.5]; B2.2 B2.1 [8.5, 10.5]; idle: I3.2 needs B3.3 (11); I3.2 I3.1
 *           W3.2 W3.1 [11, 13].
 * Makespan 13 = 3N + D - 1, PyTorch's simulator's 26 in its units (F = 1). Before pairs waited
 * for both inputs, F2.3 ran at 5 (F2.2's output leaving at 4.5, between the pair's halves) and
 * the step took 12.5. */
Test(sched_zb, dualpipev_pairs_start_together)
{
    pp_sched *s = gen("dualpipev", 2, 4);
    pp_cost c;
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK, "%s", pp_err_msg());
    pp_sim_result r;
    cr_assert_eq(pp_sim_run(s, &c, 1, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_float_eq(r.makespan, 13, EPS);
    int f = find(s, 0, PP_OP_F, 3, 2); /* the pair F2.3+B0.0 on rank 0 */
    cr_assert(s->ops[0][f].overlap && s->ops[0][f + 1].op == PP_OP_B);
    cr_assert_float_eq(r.spans[0][f].start, 5.5, EPS);
    cr_assert_float_eq(r.spans[0][f + 1].end, 7, EPS);
    int g = find(s, 1, PP_OP_F, 2, 2); /* F2.2+B0.1 on rank 1: starts when B0.2 ends */
    cr_assert(s->ops[1][g].overlap);
    cr_assert_float_eq(r.spans[1][g].start, 4, EPS);
    cr_assert_float_eq(r.spans[1][find(s, 1, PP_OP_B, 2, 0)].end, 4, EPS);
    int h = find(s, 0, PP_OP_F, 3, 3); /* F3.3+B1.0 waits for rank 1's F3.2+B1.1 */
    cr_assert_float_eq(r.spans[0][h].start, 8.5, EPS);
    cr_assert_float_eq(r.spans[1][find(s, 1, PP_OP_B, 1, 1)].end, 8.5, EPS);
    /* the last rank's first F(chunk 0), B(chunk 1) are two actions, as PyTorch writes them */
    cr_assert(!s->ops[1][find(s, 1, PP_OP_F, 1, 2)].overlap);
    for (int d = 0; d < 2; d++)
        cr_assert_float_eq(r.idle[d], 1, EPS, "rank %d", d);
    pp_sim_result_fini(&r);
    pp_cost_fini(&c);
    pp_sched_destroy(s);
}

/* The timeline legends name I and W only where a schedule has them; JSON adds the held-for-W
 * peaks. */
Test(sched_zb, renderers_know_i_and_w)
{
    pp_sched *s = gen("zb-h1", 2, 2);
    pp_cost c;
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK);
    pp_sim_result r;
    cr_assert_eq(pp_sim_run(s, &c, 1, &r), PP_OK, "%s", pp_err_msg());
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    cr_assert_eq(pp_sched_write_ascii(s, &r, 14, fp), PP_OK, "%s", pp_err_msg());
    fclose(fp);
    /* 7 units over 14 columns: rank 0 F0 [0,1] F1 [1,2], idle, I0 [3,4] W0 I1 W1 */
    cr_assert(strstr(buf, "I/W input/weight gradient"), "%s", buf);
    cr_assert(strstr(buf, "- = _ continue an F, a B or I, a W"), "%s", buf);
    cr_assert(strstr(buf, "rank 0  F0F1..I0W0I1W1"), "%s", buf);
    free(buf);
    fp = open_memstream(&buf, &len);
    cr_assert_eq(pp_sched_write_svg(s, &r, fp), PP_OK, "%s", pp_err_msg());
    fclose(fp);
    cr_assert(strstr(buf, "<title>W pipe 0 stage 0 mb 0:"), "%s", buf);
    cr_assert(strstr(buf, ">W0</text>") && strstr(buf, ">I1</text>"), "%s", buf);
    cr_assert(strstr(buf, "W weight gradient (faded)"), "%s", buf);
    free(buf);
    fp = open_memstream(&buf, &len);
    cr_assert_eq(pp_sched_write_json(s, &r, fp), PP_OK, "%s", pp_err_msg());
    fclose(fp);
    cr_assert(strstr(buf, "\"peak_held_for_w\": [1, 2],"), "%s", buf); /* rank d: d + 1 */
    cr_assert(strstr(buf, "{\"op\": \"W\", \"pipe\": 0, \"stage\": 1, \"mb\": 0}"), "%s", buf);
    free(buf);
    pp_sim_result_fini(&r);
    pp_cost_fini(&c);
    pp_sched_destroy(s);
    /* a schedule without them keeps its legend */
    s = gen("1f1b", 2, 2);
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK);
    cr_assert_eq(pp_sim_run(s, &c, 1, &r), PP_OK, "%s", pp_err_msg());
    fp = open_memstream(&buf, &len);
    cr_assert_eq(pp_sched_write_ascii(s, &r, 20, fp), PP_OK, "%s", pp_err_msg());
    fclose(fp);
    cr_assert(!strstr(buf, "I/W") && strstr(buf, "- and = continue an F and a B"), "%s", buf);
    free(buf);
    pp_sim_result_fini(&r);
    pp_cost_fini(&c);
    pp_sched_destroy(s);
}
