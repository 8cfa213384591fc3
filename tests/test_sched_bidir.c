/* test_sched_bidir.c — the bidirectional generators, Chimera and BitPipe: published orders,
 * placement, eager-sync placement, parameter errors, and (through the checker and simulator)
 * validity, makespan and bubble for a grid of D and N. Figures and orders come from the papers
 * and code: Chimera's D = 4 basic unit (Li & Hoefler, SC'21, arXiv:2107.06925), BitPipe's
 * D = 4 order as the authors' fork runs it (github.com/wuhouming/BitPipe; Wu et al.,
 * arXiv:2410.19367). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "pp_sched.h"
#include "sched_build.h"

static pp_sched *gen(const char *kind, int D, int N)
{
    pp_sched_params p = {.ranks = D, .microbatches = N};
    pp_sched *s = NULL;
    pp_status st = pp_sched_generate(kind, &p, &s);
    cr_assert_eq(st, PP_OK, "%s D=%d N=%d: %s", kind, D, N, pp_err_text());
    return s;
}

/* Rank r's compute order in the reference's BitPipe notation: F/B, d(own)/u(p), 1-based
 * micro-batch, '.', stage; REDUCEs as AR2 (even ids: second-half chunks) / AR1 (odd ids). */
static void bitpipe_order(const pp_sched *s, int r, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->n_ops[r]; i++) {
        pp_action a = s->ops[r][i];
        const char *sep = len ? " " : "";
        if (a.op == PP_OP_REDUCE)
            len += (size_t)snprintf(buf + len, n - len, "%sAR%d", sep, a.stage % 2 ? 1 : 2);
        else if (a.op == PP_OP_F || a.op == PP_OP_B)
            len += (size_t)snprintf(buf + len, n - len, "%s%s%s%d.%d", sep,
                                    a.op == PP_OP_F ? "F" : "B", a.pipe ? "u" : "d", (int)a.mb + 1,
                                    (int)a.stage);
    }
}

/* Rank r's compute order as "F0 F1 B0 ..." (0-based micro-batches, the Chimera notation). */
static void mb_order(const pp_sched *s, int r, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->n_ops[r]; i++) {
        pp_action a = s->ops[r][i];
        if (a.op == PP_OP_F || a.op == PP_OP_B)
            len += (size_t)snprintf(buf + len, n - len, "%s%s%d", len ? " " : "",
                                    a.op == PP_OP_F ? "F" : "B", (int)a.mb);
    }
}

/* Generates kind for D = N = 4 and compares every rank's order, written by fmt, to want. */
static void expect_orders(const char *kind, void (*fmt)(const pp_sched *, int, char *, size_t),
                          const char *const want[4])
{
    pp_sched *s = gen(kind, 4, 4);
    char buf[512];
    for (int r = 0; r < 4; r++) {
        fmt(s, r, buf, sizeof buf);
        cr_expect_str_eq(buf, want[r], "%s rank %d", kind, r);
    }
    pp_sched_destroy(s);
}

/* ---- orders ---------------------------------------------------------------------------------- */

Test(sched_bidir, bitpipe_d4_n4_equals_the_reference_test_vector)
{
    static const char *want[4] = {
        "Fd1.0 Fd2.0 Fu3.3 Fu3.4 Fu4.3 Fu4.4 Fd1.7 Bd1.7 Fd2.7 Bd2.7 Bu3.4 Bu3.3 Bu4.4 Bu4.3 "
        "Bd1.0 AR2 Bd2.0 AR1",
        "Fd1.1 Fu3.2 Fd2.1 Fu4.2 Fu3.5 Fd1.6 Fu4.5 Fd2.6 Bd1.6 Bu3.5 Bd2.6 Bu4.5 Bu3.2 Bd1.1 "
        "Bu4.2 Bd2.1 AR2 AR1",
        "Fu3.1 Fd1.2 Fu4.1 Fd2.2 Fd1.5 Fu3.6 Fd2.5 Fu4.6 Bu3.6 Bd1.5 Bu4.6 Bd2.5 Bd1.2 Bu3.1 "
        "Bd2.2 Bu4.1 AR2 AR1",
        "Fu3.0 Fu4.0 Fd1.3 Fd1.4 Fd2.3 Fd2.4 Fu3.7 Bu3.7 Fu4.7 Bu4.7 Bd1.4 Bd1.3 Bd2.4 Bd2.3 "
        "Bu3.0 AR2 Bu4.0 AR1",
    };
    expect_orders("bitpipe", bitpipe_order, want);
}

Test(sched_bidir, chimera_d4_n4_equals_the_published_order)
{
    static const char *want[4] = {
        "F0 F1 F2 B2 F3 B3 B0 B1",
        "F0 F2 F1 F3 B2 B0 B3 B1",
        "F2 F0 F3 F1 B0 B2 B1 B3",
        "F2 F3 F0 B0 F1 B1 B2 B3",
    };
    expect_orders("chimera", mb_order, want);
}

/* ---- placement, micro-batch split, reduces, transfers ------------------------------------- */

static int holds(const pp_sched *s, int r, int pipe, int stage)
{
    return pp_sched_stage(s, pipe, stage)->rank == r;
}

Test(sched_bidir, bitpipe_places_a_v_of_four_chunks_per_rank)
{
    for (int D = 2; D <= 8; D += 2) {
        pp_sched *s = gen("bitpipe", D, 2 * D);
        cr_assert_eq(s->n_pipes, 2);
        cr_assert_eq(s->stages_per_pipe, 2 * D);
        for (int d = 0; d < D; d++) {
            cr_assert(holds(s, d, 0, d) && holds(s, d, 0, 2 * D - 1 - d), "D=%d rank %d", D, d);
            cr_assert(holds(s, d, 1, D - 1 - d) && holds(s, d, 1, D + d), "D=%d rank %d", D, d);
        }
        /* down-stage s and up-stage s are replicas: the same layers */
        for (int k = 0; k < 2 * D; k++)
            cr_assert_eq(pp_sched_stage(s, 0, k)->layer_begin,
                         pp_sched_stage(s, 1, k)->layer_begin);
        /* groups of D: the first D/2 down, the rest up */
        for (int m = 0; m < 2 * D; m++)
            cr_assert_eq(s->mb_pipe[m], (m % D) >= D / 2, "D=%d mb %d", D, m);
        pp_sched_destroy(s);
    }
}

static int reduce_has(const pp_reduce *r, int pipe, int stage)
{
    for (int i = 0; i < r->n_stages; i++)
        if (r->stages[i].pipe == pipe && r->stages[i].stage == stage)
            return 1;
    return 0;
}

Test(sched_bidir, bitpipe_eager_syncs_pair_replicas_second_half_first)
{
    int D = 6;
    pp_sched *s = gen("bitpipe", D, D);
    cr_assert_eq(s->n_reduces, D); /* two per replica pair */
    for (int j = 0; j < D / 2; j++) {
        const pp_reduce *ar2 = &s->reduces[2 * j], *ar1 = &s->reduces[2 * j + 1];
        cr_assert_eq(ar2->n_ranks, 2);
        cr_assert_eq(ar2->ranks[0], j);
        cr_assert_eq(ar2->ranks[1], D - 1 - j);
        cr_assert_eq(ar2->n_stages, 4);
        cr_assert(reduce_has(ar2, 0, 2 * D - 1 - j) && reduce_has(ar2, 1, D + j) &&
                  reduce_has(ar2, 0, D + j) && reduce_has(ar2, 1, 2 * D - 1 - j));
        cr_assert(reduce_has(ar1, 0, j) && reduce_has(ar1, 1, D - 1 - j) &&
                  reduce_has(ar1, 0, D - 1 - j) && reduce_has(ar1, 1, j));
    }
    /* AR2 one backward early on every rank but the two middle ones; AR1 last everywhere */
    for (int d = 0; d < D; d++) {
        int n = s->n_ops[d], ar2 = -1, last_b = -1;
        for (int i = 0; i < n; i++) {
            if (s->ops[d][i].op == PP_OP_REDUCE && s->ops[d][i].stage % 2 == 0)
                ar2 = i;
            if (s->ops[d][i].op == PP_OP_B)
                last_b = i;
        }
        cr_assert_eq(s->ops[d][n - 1].op, PP_OP_REDUCE, "rank %d", d);
        cr_assert_eq(s->ops[d][n - 1].stage % 2, 1, "rank %d ends with AR1", d);
        if (d == D / 2 - 1 || d == D / 2)
            cr_assert_gt(ar2, last_b, "middle rank %d: AR2 after the last backward", d);
        else
            cr_assert_lt(ar2, last_b, "edge rank %d: AR2 before the last backward", d);
    }
    pp_sched_destroy(s);
}

Test(sched_bidir, bitpipe_v_turn_is_local_so_2d_minus_2_transfers_per_microbatch)
{
    int D = 4, N = 8;
    pp_sched *s = gen("bitpipe", D, N);
    cr_assert_eq(count_ops(s, PP_OP_SEND_F), N * (2 * D - 2));
    cr_assert_eq(count_ops(s, PP_OP_RECV_F), N * (2 * D - 2));
    cr_assert_eq(count_ops(s, PP_OP_SEND_B), N * (2 * D - 2));
    cr_assert_eq(count_ops(s, PP_OP_RECV_B), N * (2 * D - 2));
    cr_assert_eq(count_ops(s, PP_OP_F), N * 2 * D);
    pp_sched_destroy(s);
}

Test(sched_bidir, chimera_places_two_replicas_and_one_sync_per_pair)
{
    int D = 6;
    pp_sched *s = gen("chimera", D, 2 * D);
    for (int d = 0; d < D; d++) {
        cr_assert(holds(s, d, 0, d) && holds(s, d, 1, D - 1 - d), "rank %d", d);
        cr_assert_eq(s->ops[d][s->n_ops[d] - 1].op, PP_OP_REDUCE, "rank %d ends with its sync", d);
    }
    cr_assert_eq(s->n_reduces, D / 2);
    for (int j = 0; j < D / 2; j++) {
        const pp_reduce *r = &s->reduces[j];
        cr_assert_eq(r->ranks[0], j);
        cr_assert_eq(r->ranks[1], D - 1 - j);
        cr_assert(reduce_has(r, 0, j) && reduce_has(r, 1, j) && reduce_has(r, 0, D - 1 - j) &&
                  reduce_has(r, 1, D - 1 - j));
    }
    /* every rank runs each micro-batch once forward and once backward */
    cr_assert_eq(count_ops(s, PP_OP_F), 2 * D * D);
    cr_assert_eq(count_ops(s, PP_OP_SEND_F), 2 * D * (D - 1));
    pp_sched_destroy(s);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void expect_error(const char *kind, int D, int N, const char *text)
{
    pp_sched_params p = {.ranks = D, .microbatches = N};
    pp_sched *s = (pp_sched *)1;
    cr_assert_eq(pp_sched_generate(kind, &p, &s), PP_ERR_INVALID, "%s D=%d N=%d", kind, D, N);
    cr_assert_null(s);
    cr_assert(strstr(pp_err_text(), text), "%s D=%d N=%d: got \"%s\"", kind, D, N, pp_err_text());
}

Test(sched_bidir, odd_ranks_and_ragged_microbatches_are_refused_with_the_rule)
{
    expect_error("chimera", 3, 6, "chimera needs an even number of ranks, got 3");
    expect_error("bitpipe", 3, 6, "bitpipe needs an even number of ranks, got 3");
    expect_error("chimera", 1, 2, "chimera needs an even number of ranks, got 1");
    expect_error("chimera", 4, 6, "multiple of the ranks (N mod D = 0), got N = 6, D = 4");
    expect_error("bitpipe", 4, 6, "multiple of the ranks (N mod D = 0), got N = 6, D = 4");
    expect_error("bitpipe", 4, 2, "got N = 2, D = 4");
    pp_sched_params p = {.ranks = 4, .microbatches = 4, .chunks = 3};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("bitpipe", &p, &s), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "bitpipe has 2 chunks per rank per pipe (4 in all), got "
                                    "--chunks 3"),
              "%s", pp_err_text());
    p.chunks = 2;
    cr_assert_eq(pp_sched_generate("chimera", &p, &s), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "chimera has 1 chunk per rank per pipe (2 in all), got "
                                    "--chunks 2"),
              "%s", pp_err_text());
}

/* ---- validity, makespan and bubble (checker + simulator) --------------------------------- */

/* Simulates s with unit costs (F of L/D layers = 1, B = fb_ratio x F, free links). */
static pp_sim_result simulate(const pp_sched *s, double fb_ratio)
{
    pp_cost c;
    pp_sim_result r;
    cr_assert_eq(pp_cost_init_unit(&c, s, fb_ratio), PP_OK, "%s", pp_err_text());
    cr_assert_eq(pp_sim_run(s, &c, 0, &r), PP_OK, "%s D=%d N=%d: %s", s->kind, s->ranks,
                 s->microbatches, pp_err_text());
    pp_cost_fini(&c);
    return r;
}

static double makespan(const pp_sched *s, double fb_ratio)
{
    pp_sim_result r = simulate(s, fb_ratio);
    double m = r.makespan;
    pp_sim_result_fini(&r);
    return m;
}

Test(sched_bidir, chimera_d4_n4_makespan_10_with_f_equal_b)
{
    pp_sched *s = gen("chimera", 4, 4);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_text());
    pp_sim_result r = simulate(s, 1.0);
    cr_expect_float_eq(r.makespan, 10.0, 1e-9);
    cr_expect_float_eq(r.bubble_over_total, 2.0 / 10.0, 1e-9); /* (D-2)/(2N+D-2) */
    pp_sim_result_fini(&r);
    pp_sched_destroy(s);
}

Test(sched_bidir, chimera_unit_reaches_the_paper_bubble_for_every_even_d)
{
    for (int D = 2; D <= 12; D += 2) {
        pp_sched *s = gen("chimera", D, D);
        pp_sim_result r = simulate(s, 1.0);
        /* busy 2N per rank, makespan 2N + D - 2 */
        cr_expect_float_eq(r.makespan, 3.0 * D - 2, 1e-9, "D=%d", D);
        cr_expect_float_eq(r.bubble_over_total, (D - 2.0) / (3.0 * D - 2), 1e-9, "D=%d", D);
        for (int d = 0; d < D; d++) {
            cr_expect_geq(r.peak_activations[d], D / 2 + 1 - 1e-9, "D=%d rank %d", D, d);
            cr_expect_leq(r.peak_activations[d], D + 1e-9, "D=%d rank %d", D, d);
        }
        pp_sim_result_fini(&r);
        pp_sched_destroy(s);
    }
}

Test(sched_bidir, bitpipe_d4_n4_makespan_14_bubble_one_seventh)
{
    pp_sched *s = gen("bitpipe", 4, 4);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_text());
    pp_sim_result r = simulate(s, 2.0);
    cr_expect_float_eq(r.makespan, 14.0, 1e-9); /* 28 chunk units */
    cr_expect_float_eq(r.bubble_over_total, 1.0 / 7.0, 1e-9);
    for (int d = 0; d < 4; d++) {
        cr_expect_float_eq(r.busy[d], 12.0, 1e-9, "rank %d busy 24 chunk units", d);
        /* reference: about 3D/4 .. D micro-batch x (L/D layers) units */
        cr_expect_geq(r.peak_activations[d], 3.0 - 1e-9, "rank %d", d);
        cr_expect_leq(r.peak_activations[d], 4.0 + 1e-9, "rank %d", d);
    }
    pp_sim_result_fini(&r);
    pp_sched_destroy(s);
}

/* The baseline for N > D: each rank runs the N = D order once per group of D micro-batches,
 * group after group, with the replica syncs after the last group. */
static pp_sched *concatenation(const char *kind, int D, int N)
{
    pp_sched *one = gen(kind, D, D), *s;
    cr_assert_eq(pp_sched_create(kind, D, N, one->chunks, 2, 0, 0, &s), PP_OK);
    for (int k = 0; k < 2 * one->stages_per_pipe; k++)
        s->stages[k].rank = one->stages[k].rank;
    for (int m = 0; m < N; m++)
        s->mb_pipe[m] = one->mb_pipe[m % D];
    for (int i = 0; i < one->n_reduces; i++)
        cr_assert_eq(pp_sched_add_reduce(s, one->reduces[i].ranks, one->reduces[i].n_ranks,
                                         one->reduces[i].stages, one->reduces[i].n_stages, NULL),
                     PP_OK);
    for (int r = 0; r < D; r++) {
        for (int g = 0; g < N / D; g++)
            for (int i = 0; i < one->n_ops[r]; i++) {
                pp_action a = one->ops[r][i];
                if (a.op == PP_OP_F || a.op == PP_OP_B)
                    cr_assert_eq(pp_sched_push(s, r, a.op, a.pipe, a.stage, a.mb + g * D), PP_OK);
            }
        for (int i = 0; i < one->n_ops[r]; i++)
            if (one->ops[r][i].op == PP_OP_REDUCE)
                cr_assert_eq(pp_sched_push(s, r, PP_OP_REDUCE, 0, one->ops[r][i].stage, -1), PP_OK);
    }
    pp_sched_destroy(one);
    cr_assert_eq(pp_sched_lower_comms(s), PP_OK);
    cr_assert_eq(pp_sched_check(s), PP_OK, "concatenation D=%d N=%d: %s", D, N, pp_err_text());
    return s;
}

Test(sched_bidir, bitpipe_n_above_d_is_no_worse_than_concatenating_groups)
{
    for (int D = 2; D <= 8; D += 2)
        for (int k = 2; k <= 4; k *= 2) {
            int N = k * D;
            pp_sched *s = gen("bitpipe", D, N), *c = concatenation("bitpipe", D, N);
            double ms = makespan(s, 2.0), mc = makespan(c, 2.0);
            cr_expect_leq(ms, mc + 1e-9, "D=%d N=%d: %g > concatenation %g", D, N, ms, mc);
            cr_expect_leq(makespan(s, 1.0), makespan(c, 1.0) + 1e-9, "D=%d N=%d F=B", D, N);
            pp_sched_destroy(s);
            pp_sched_destroy(c);
        }
    /* D = 4, N = 8: 53 chunk units; back-to-back groups take 56 (the authors' overlapped
     * loop, as we read their code, 54) */
    pp_sched *s = gen("bitpipe", 4, 8);
    cr_expect_float_eq(makespan(s, 2.0), 26.5, 1e-9);
    pp_sched_destroy(s);
}

Test(sched_bidir, chimera_n_above_d_is_no_worse_than_concatenating_units)
{
    for (int D = 2; D <= 8; D += 2)
        for (int k = 2; k <= 4; k *= 2) {
            int N = k * D;
            pp_sched *s = gen("chimera", D, N), *c = concatenation("chimera", D, N);
            cr_expect_leq(makespan(s, 2.0), makespan(c, 2.0) + 1e-9, "D=%d N=%d", D, N);
            cr_expect_leq(makespan(s, 1.0), makespan(c, 1.0) + 1e-9, "D=%d N=%d F=B", D, N);
            pp_sched_destroy(s);
            pp_sched_destroy(c);
        }
}

Test(sched_bidir, both_pass_the_checker_for_every_even_d_and_n_multiple_of_d)
{
    static const char *kinds[2] = {"chimera", "bitpipe"};
    for (int k = 0; k < 2; k++)
        for (int D = 2; D <= 8; D += 2)
            for (int f = 1; f <= 4; f *= 2) {
                pp_sched *s = gen(kinds[k], D, f * D);
                cr_expect_eq(pp_sched_check(s), PP_OK, "%s D=%d N=%d: %s", kinds[k], D, f * D,
                             pp_err_text());
                pp_sched_destroy(s);
            }
}

Test(sched_bidir, uneven_layers_keep_the_order_and_pass_the_checker)
{
    /* Llama-3 split over BitPipe's 2D = 8 stages of each pipe: 30 layers, first and last 3 */
    pp_sched_params p = {.ranks = 4, .microbatches = 8, .layers = 30, .uneven = 1};
    pp_sched *s, *even = gen("bitpipe", 4, 8);
    cr_assert_eq(pp_sched_generate("bitpipe", &p, &s), PP_OK, "%s", pp_err_text());
    cr_assert_eq(pp_sched_stage_layers(s, 0, 0), 3);
    cr_assert_eq(pp_sched_stage_layers(s, 1, 0), 3);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_text());
    for (int r = 0; r < 4; r++) {
        cr_assert_eq(s->n_ops[r], even->n_ops[r]);
        for (int i = 0; i < s->n_ops[r]; i++) {
            pp_action a = s->ops[r][i], b = even->ops[r][i];
            cr_assert(a.op == b.op && a.pipe == b.pipe && a.stage == b.stage && a.mb == b.mb,
                      "rank %d action %d", r, i);
        }
    }
    pp_sched_destroy(s);
    pp_sched_destroy(even);
}
