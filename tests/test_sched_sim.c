/* test_sched_sim.c — the simulator: the textbook figures with unit costs (the seed article's
 * table, the closed forms of GPipe, 1F1B and interleaved 1F1B, peak activations) and cases worked
 * by hand on paper with link latency and bandwidth, a busy link, and a REDUCE that overlaps
 * compute. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_sched.h"
#include "sched_build.h"

#define EPS 1e-12

static pp_sched *gen(const char *kind, int D, int N, int v)
{
    pp_sched_params p = {.ranks = D, .microbatches = N, .chunks = v};
    pp_sched *s = NULL;
    pp_status st = pp_sched_generate(kind, &p, &s);
    cr_assert_eq(st, PP_OK, "%s D=%d N=%d v=%d: %s", kind, D, N, v, pp_err_msg());
    return s;
}

/* Unit costs (F = 1 for L/D layers, B = 2 F), links free. */
static pp_sim_result sim_unit(const pp_sched *s, int want_spans)
{
    pp_cost c;
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK, "%s", pp_err_msg());
    pp_sim_result r;
    pp_status st = pp_sim_run(s, &c, want_spans, &r);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    pp_cost_fini(&c);
    return r;
}

static double bubble_over_ideal(const char *kind, int D, int N, int v)
{
    pp_sched *s = gen(kind, D, N, v);
    pp_sim_result r = sim_unit(s, 0);
    double b = r.bubble_over_ideal;
    pp_sim_result_fini(&r);
    pp_sched_destroy(s);
    return b;
}

Test(sched_sim, seed_article_table)
{
    cr_assert_float_eq(bubble_over_ideal("1f1b", 4, 8, 0), 0.375, EPS);
    cr_assert_float_eq(bubble_over_ideal("interleaved", 4, 8, 2), 0.1875, EPS);
    cr_assert_float_eq(bubble_over_ideal("1f1b", 4, 32, 0), 0.09375, EPS);
}

Test(sched_sim, gpipe_and_1f1b_bubble_over_total_closed_form)
{
    const char *kinds[] = {"gpipe", "1f1b"};
    for (int k = 0; k < 2; k++)
        for (int D = 1; D <= 8; D++)
            for (int N = 1; N <= 12; N++) {
                pp_sched *s = gen(kinds[k], D, N, 0);
                pp_sim_result r = sim_unit(s, 0);
                double want = (double)(D - 1) / (N + D - 1);
                cr_assert_float_eq(r.bubble_over_total, want, EPS, "%s D=%d N=%d: %g, want %g",
                                   kinds[k], D, N, r.bubble_over_total, want);
                /* F = 1, B = 2: N + D - 1 slots of 3 */
                cr_assert_float_eq(r.makespan, 3.0 * (N + D - 1), EPS);
                cr_assert_float_eq(r.bubble_over_ideal, (double)(D - 1) / N, EPS);
                pp_sim_result_fini(&r);
                pp_sched_destroy(s);
            }
}

Test(sched_sim, interleaved_bubble_over_total_closed_form)
{
    for (int v = 2; v <= 4; v++)
        for (int D = 2; D <= 8; D *= 2)
            for (int N = D; N <= 4 * D; N += D) {
                pp_sched *s = gen("interleaved", D, N, v);
                pp_sim_result r = sim_unit(s, 0);
                double want = (double)(D - 1) / (v * N + D - 1);
                cr_assert_float_eq(r.bubble_over_total, want, EPS,
                                   "interleaved D=%d v=%d N=%d: %g, want %g", D, v, N,
                                   r.bubble_over_total, want);
                cr_assert_float_eq(r.bubble_over_ideal, (double)(D - 1) / (v * N), EPS);
                pp_sim_result_fini(&r);
                pp_sched_destroy(s);
            }
}

Test(sched_sim, peak_activations_1f1b_and_gpipe)
{
    int D = 4;
    int Ns[] = {2, 4, 8};
    for (int t = 0; t < 3; t++) {
        int N = Ns[t];
        pp_sched *s = gen("1f1b", D, N, 0);
        pp_sim_result r = sim_unit(s, 0);
        for (int d = 0; d < D; d++) {
            double want = D - d < N ? D - d : N;
            cr_assert_float_eq(r.peak_activations[d], want, EPS, "1f1b N=%d rank %d: %g", N, d,
                               r.peak_activations[d]);
        }
        pp_sim_result_fini(&r);
        pp_sched_destroy(s);
        s = gen("gpipe", D, N, 0);
        r = sim_unit(s, 0);
        for (int d = 0; d < D; d++)
            cr_assert_float_eq(r.peak_activations[d], N, EPS);
        pp_sim_result_fini(&r);
        pp_sched_destroy(s);
    }
}

Test(sched_sim, busy_idle_transfers_and_spans)
{
    int D = 4, N = 8;
    pp_sched *s = gen("1f1b", D, N, 0);
    pp_sim_result r = sim_unit(s, 1);
    cr_assert_eq(r.cross_rank_transfers, 2L * (D - 1) * N); /* one F and one B hop per mb */
    long actions = 0;
    for (int d = 0; d < D; d++) {
        actions += s->n_ops[d];
        cr_assert_float_eq(r.busy[d], 3.0 * N, EPS);
        cr_assert_float_eq(r.idle[d], r.makespan - 3.0 * N, EPS);
        /* compute spans of one rank never overlap and follow program order */
        double t = 0;
        for (int i = 0; i < s->n_ops[d]; i++) {
            pp_action a = s->ops[d][i];
            pp_span sp = r.spans[d][i];
            if (a.op != PP_OP_F && a.op != PP_OP_B)
                continue;
            cr_assert(sp.start >= t - EPS, "rank %d action %d starts at %g before %g", d, i,
                      sp.start, t);
            cr_assert_float_eq(sp.end - sp.start, a.op == PP_OP_F ? 1.0 : 2.0, EPS);
            t = sp.end;
        }
    }
    cr_assert_eq(r.actions, actions);
    /* the last stage's first F can start only after D-1 forwards upstream */
    cr_assert_float_eq(r.spans[D - 1][1].start, D - 1.0, EPS);
    pp_sim_result_fini(&r);
    pp_sched_destroy(s);
}

Test(sched_sim, uneven_split_scales_costs_and_activations)
{
    /* Llama 3 split: 10 layers over 4 stages -> 2, 3, 3, 2; L/D = 2.5 layers cost 1 */
    pp_sched_params p = {.ranks = 4, .microbatches = 4, .layers = 10, .uneven = 1};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("1f1b", &p, &s), PP_OK, "%s", pp_err_msg());
    pp_sim_result r = sim_unit(s, 0);
    cr_assert_float_eq(r.busy[0], 4 * 3 * 0.8, EPS);
    cr_assert_float_eq(r.busy[1], 4 * 3 * 1.2, EPS);
    cr_assert_float_eq(r.peak_activations[0], 4 * 0.8, EPS);
    cr_assert_float_eq(r.peak_activations[1], 3 * 1.2, EPS);
    pp_sim_result_fini(&r);
    pp_sched_destroy(s);
}

/* ---- hand-worked cases --------------------------------------------------------------------- */

/* GPipe on 2 ranks, 2 micro-batches: stage 0 on rank 0, stage 1 on rank 1, F = 1, B = 2, every
 * transfer carries 128 bytes over a link of the given latency and time per byte. */
static pp_sim_result two_rank_gpipe(double latency, double inv_bw)
{
    pp_sched *s = gen("gpipe", 2, 2, 0);
    double f[2] = {1, 1}, b[2] = {2, 2}, bytes[2] = {128, 128};
    double lat[4] = {0, latency, latency, 0}, ibw[4] = {0, inv_bw, inv_bw, 0};
    pp_cost c = {.f = f,
                 .b = b,
                 .send_bytes_f = bytes,
                 .send_bytes_b = bytes,
                 .latency = lat,
                 .inv_bw = ibw};
    pp_sim_result r;
    cr_assert_eq(pp_sim_run(s, &c, 1, &r), PP_OK, "%s", pp_err_msg());
    /* the actions must be where the hand computation below expects them */
    cr_assert_eq(s->ops[0][1].op, PP_OP_SEND_F);
    cr_assert_eq(s->ops[0][3].op, PP_OP_SEND_F);
    cr_assert_eq(s->ops[1][3].op, PP_OP_F);
    cr_assert_eq(s->ops[1][7].op, PP_OP_SEND_B);
    pp_sched_destroy(s);
    return r;
}

Test(sched_sim, hand_worked_transfer_overlaps_compute)
{
    /* transfer = 0.25 + 128/256 = 0.75 < F = 1, so no queue.
     * rank 0: F0 [0,1], send F0 [1,1.75] while F1 runs [1,2], send F1 [2,2.75]
     * rank 1: F0 [1.75,2.75], F1 [2.75,3.75], B0 [3.75,5.75] send [5.75,6.5],
     *         B1 [5.75,7.75] send [7.75,8.5]
     * rank 0: B0 [6.5,8.5], B1 [8.5,10.5] -> makespan 10.5 (9 with free links) */
    pp_sim_result r = two_rank_gpipe(0.25, 1.0 / 256);
    cr_assert_float_eq(r.spans[0][1].start, 1.0, EPS);
    cr_assert_float_eq(r.spans[0][1].end, 1.75, EPS);
    cr_assert_float_eq(r.spans[0][2].start, 1.0, EPS); /* F1 runs during the transfer */
    cr_assert_float_eq(r.spans[0][3].start, 2.0, EPS);
    cr_assert_float_eq(r.spans[1][1].start, 1.75, EPS);
    cr_assert_float_eq(r.spans[1][3].start, 2.75, EPS);
    cr_assert_float_eq(r.spans[1][7].end, 8.5, EPS);
    cr_assert_float_eq(r.makespan, 10.5, EPS);
    cr_assert_float_eq(r.busy[0], 6, EPS);
    cr_assert_float_eq(r.idle[1], 4.5, EPS);
    cr_assert_float_eq(r.bubble_over_total, (4.5 + 4.5) / (2 * 10.5), EPS);
    cr_assert_eq(r.cross_rank_transfers, 4);
    pp_sim_result_fini(&r);
}

Test(sched_sim, hand_worked_busy_link_queues)
{
    /* transfer = 0.5 + 128/128 = 1.5 > F = 1: the second forward send is ready at 2 but the link
     * 0->1 is busy until 2.5, so it runs [2.5,4].
     * rank 1: F0 [2.5,3.5], F1 [4,5], B0 [5,7] send [7,8.5], B1 [7,9] send [9,10.5]
     * rank 0: B0 [8.5,10.5], B1 [10.5,12.5] -> makespan 12.5 */
    pp_sim_result r = two_rank_gpipe(0.5, 1.0 / 128);
    cr_assert_float_eq(r.spans[0][1].end, 2.5, EPS);
    cr_assert_float_eq(r.spans[0][3].start, 2.5, EPS); /* queued behind the first */
    cr_assert_float_eq(r.spans[0][3].end, 4.0, EPS);
    cr_assert_float_eq(r.spans[1][2].start, 3.5, EPS); /* RECV F1: waits from 3.5 ... */
    cr_assert_float_eq(r.spans[1][2].end, 4.0, EPS);   /* ... until the data arrives at 4 */
    cr_assert_float_eq(r.spans[1][3].start, 4.0, EPS);
    cr_assert_float_eq(r.makespan, 12.5, EPS);
    cr_assert_float_eq(r.idle[0], 6.5, EPS);
    pp_sim_result_fini(&r);
}

static pp_sched *two_pipe_with_reduces(void)
{
    pp_sched *s = two_ranks_with_reduces(0);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    return s;
}

static int find_op(const pp_sched *s, int r, int op, int stage)
{
    for (int i = 0; i < s->n_ops[r]; i++)
        if (s->ops[r][i].op == op && s->ops[r][i].stage == stage)
            return i;
    cr_assert_fail("rank %d has no %s with stage/id %d", r, pp_op_name(op), stage);
    return -1;
}

Test(sched_sim, hand_worked_reduce_overlaps_compute)
{
    /* F = 1, B = 2, links free, REDUCE #0 costs 3, #1 costs 2.
     * both ranks: F [0,1], F [1,2], B [2,4], issue R0 at 4 -> runs [4,7] while B [4,6] runs;
     * R1 issued at 6, but the reduce stream is busy with R0 until 7 -> runs [7,9].
     * makespan 9 (a blocking REDUCE would give 4+3+2+2 = 11). */
    pp_sched *s = two_pipe_with_reduces();
    pp_cost c;
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK, "%s", pp_err_msg());
    c.reduce = calloc(2, sizeof *c.reduce);
    c.reduce[0] = 3;
    c.reduce[1] = 2;
    pp_sim_result r;
    cr_assert_eq(pp_sim_run(s, &c, 1, &r), PP_OK, "%s", pp_err_msg());
    for (int d = 0; d < 2; d++) {
        pp_span r0 = r.spans[d][find_op(s, d, PP_OP_REDUCE, 0)];
        pp_span r1 = r.spans[d][find_op(s, d, PP_OP_REDUCE, 1)];
        cr_assert_float_eq(r0.start, 4, EPS);
        cr_assert_float_eq(r0.end, 7, EPS);
        cr_assert_float_eq(r1.start, 6, EPS); /* issued at 6 ... */
        cr_assert_float_eq(r1.end, 9, EPS);   /* ... completes at 7 + 2 */
        cr_assert_float_eq(r.busy[d], 6, EPS);
        cr_assert_float_eq(r.idle[d], 3, EPS);
    }
    int b = find_op(s, 0, PP_OP_B, 0); /* B(0,0,0) on rank 0 runs while R0 runs */
    cr_assert_float_eq(r.spans[0][b].start, 4, EPS);
    cr_assert_float_eq(r.spans[0][b].end, 6, EPS);
    cr_assert_float_eq(r.makespan, 9, EPS);
    pp_sim_result_fini(&r);
    pp_cost_fini(&c);
    pp_sched_destroy(s);
}

Test(sched_sim, reduce_waits_for_the_last_participant)
{
    /* Make rank 1's last backward (B(1,0,1)) 3 units longer: R1 is issued by rank 0 at 6 and by
     * rank 1 at 9, so it runs [9,11]. */
    pp_sched *s = two_pipe_with_reduces();
    pp_cost c;
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK);
    c.b[1 * s->stages_per_pipe + 0] = 5; /* pipe 1, stage 0 */
    c.reduce = calloc(2, sizeof *c.reduce);
    c.reduce[0] = 3;
    c.reduce[1] = 2;
    pp_sim_result r;
    cr_assert_eq(pp_sim_run(s, &c, 1, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_float_eq(r.spans[0][find_op(s, 0, PP_OP_REDUCE, 1)].end, 11, EPS);
    cr_assert_float_eq(r.makespan, 11, EPS);
    pp_sim_result_fini(&r);
    pp_cost_fini(&c);
    pp_sched_destroy(s);
}

Test(sched_sim, reduce_stream_is_fifo_per_rank)
{
    /* 3 ranks, stage 0 on rank 1, stages 1 and 2 on rank 2 (a local hop), rank 0 holds no
     * stage and only takes part in REDUCE #0 {0,1} (cost 4) and REDUCE #1 {0,2} (cost 1), which
     * it issues at time 0 in that order. F = 1, B = 2:
     * rank 1: F0 [0,1] ... B0 [7,9], issues #0 at 9;  rank 2: F1 [1,2] F2 [2,3] B2 [3,5] B1 [5,7],
     * issues #1 at 7. #1 has all its participants at 7, but rank 0's reduce stream runs #0 first,
     * [9,13], so #1 runs [13,14]. */
    pp_sched *s;
    cr_assert_eq(pp_sched_create("custom", 3, 1, 1, 1, 0, 0, &s), PP_OK);
    pp_sched_stage(s, 0, 0)->rank = 1;
    pp_sched_stage(s, 0, 1)->rank = 2;
    pp_sched_stage(s, 0, 2)->rank = 2;
    int ra[2] = {0, 1}, rb[2] = {0, 2};
    pp_stage_ref sa[1] = {{0, 0}}, sb[1] = {{0, 1}};
    cr_assert_eq(pp_sched_add_reduce(s, ra, 2, sa, 1, NULL), PP_OK);
    cr_assert_eq(pp_sched_add_reduce(s, rb, 2, sb, 1, NULL), PP_OK);
    const test_act r0[] = {{PP_OP_REDUCE, 0, 0, -1}, {PP_OP_REDUCE, 0, 1, -1}};
    const test_act r1[] = {{PP_OP_F, 0, 0, 0}, {PP_OP_B, 0, 0, 0}, {PP_OP_REDUCE, 0, 0, -1}};
    const test_act r2[] = {{PP_OP_F, 0, 1, 0},
                           {PP_OP_F, 0, 2, 0},
                           {PP_OP_B, 0, 2, 0},
                           {PP_OP_B, 0, 1, 0},
                           {PP_OP_REDUCE, 0, 1, -1}};
    push_acts(s, 0, r0, N_ACTS(r0));
    push_acts(s, 1, r1, N_ACTS(r1));
    push_acts(s, 2, r2, N_ACTS(r2));
    cr_assert_eq(pp_sched_lower_comms(s), PP_OK);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    pp_cost c;
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK);
    c.reduce = calloc(2, sizeof *c.reduce);
    c.reduce[0] = 4;
    c.reduce[1] = 1;
    pp_sim_result r;
    cr_assert_eq(pp_sim_run(s, &c, 1, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_float_eq(r.spans[0][0].start, 0, EPS); /* issued at 0 */
    cr_assert_float_eq(r.spans[0][0].end, 13, EPS);
    cr_assert_float_eq(r.spans[0][1].end, 14, EPS);
    cr_assert_float_eq(r.spans[2][find_op(s, 2, PP_OP_REDUCE, 1)].start, 7, EPS);
    cr_assert_float_eq(r.makespan, 14, EPS);
    cr_assert_float_eq(r.busy[0], 0, EPS);
    cr_assert_float_eq(r.peak_activations[2], 2, EPS); /* two stages' forwards in flight */
    pp_sim_result_fini(&r);
    pp_cost_fini(&c);
    pp_sched_destroy(s);
}

/* ---- errors ---------------------------------------------------------------------------------- */

Test(sched_sim, deadlocked_schedule_is_reported)
{
    pp_sched *s = two_ranks_receiving_first(); /* each rank receives before it sends */
    pp_cost c;
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK);
    pp_sim_result r;
    cr_assert_eq(pp_sim_run(s, &c, 1, &r), PP_ERR_DEADLOCK);
    cr_assert(strstr(pp_err_text(), "rank 0 waits at action 0 (RECV_F pipe 1 stage 1 mb 1"), "%s",
              pp_err_text());
    cr_assert(strstr(pp_err_text(), "for rank 1, which waits at action 0 (RECV_F pipe 0 stage 1 "
                                    "mb 0"),
              "%s", pp_err_text());
    cr_assert_null(r.busy); /* nothing to free after a failure */
    pp_sim_result_fini(&r);
    pp_cost_fini(&c);
    pp_sched_destroy(s);
}

Test(sched_sim, bad_inputs_are_rejected)
{
    pp_sched *s = gen("1f1b", 2, 2, 0);
    pp_cost c;
    cr_assert_eq(pp_cost_init_unit(&c, s, 0.0), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "ratio must be positive, got 0"), "%s", pp_err_text());
    pp_cost empty = {0};
    pp_sim_result r;
    cr_assert_eq(pp_sim_run(s, &empty, 0, &r), PP_ERR_INVALID);
    /* an action out of range is refused, not simulated out of bounds */
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK);
    s->ops[1][0].stage = 7;
    cr_assert_eq(pp_sim_run(s, &c, 0, &r), PP_ERR_CHECK);
    cr_assert(strstr(pp_err_text(), "rank 1, action 0"), "%s", pp_err_text());
    pp_sched_destroy(s);
    /* a schedule without SEND/RECV (never lowered) would ignore the links: refused */
    pp_sched_params p = {.ranks = 2, .microbatches = 2};
    const pp_sched_desc *g = pp_sched_find("1f1b");
    cr_assert_eq(g->generate(&p, &s), PP_OK);
    cr_assert_eq(pp_sim_run(s, &c, 0, &r), PP_ERR_CHECK);
    cr_assert(strstr(pp_err_text(), "rank 0, action 2 (B pipe 0 stage 0 mb 0): its input from "
                                    "another rank was never received"),
              "%s", pp_err_text());
    pp_cost_fini(&c);
    pp_sched_destroy(s);
}

/* A message sent twice or received twice (each (pipe, stage, mb) direction is one message, whose
 * arrival the simulator holds from its SEND to its RECV) is refused, naming the action. */
Test(sched_sim, a_message_sent_or_received_twice_is_refused)
{
    for (int twice = 0; twice < 2; twice++) {
        pp_sched *s = gen("1f1b", 2, 2, 0);
        int r = twice ? 1 : 0, op = twice ? PP_OP_RECV_F : PP_OP_SEND_F, at = -1;
        for (int i = 0; i < s->n_ops[r] && at < 0; i++)
            if (s->ops[r][i].op == op)
                at = i;
        cr_assert_geq(at, 0);
        pp_action a = s->ops[r][at];
        cr_assert_eq(pp_sched_push(s, r, (pp_op_kind)a.op, a.pipe, a.stage, a.mb), PP_OK);
        s->ops[r][s->n_ops[r] - 1].peer = a.peer;
        pp_cost c;
        cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK);
        pp_sim_result res;
        cr_assert_eq(pp_sim_run(s, &c, 0, &res), PP_ERR_CHECK, "%s accepted",
                     twice ? "a second RECV" : "a second SEND");
        char want[64];
        snprintf(want, sizeof want, "rank %d, action %d", r, s->n_ops[r] - 1);
        cr_assert(strstr(pp_err_text(), want) &&
                      strstr(pp_err_text(), twice ? "received before" : "sent before"),
                  "%s", pp_err_text());
        pp_cost_fini(&c);
        pp_sched_destroy(s);
    }
}

/* ---- lanes: several cost tables in one pass -------------------------------------------------- */
/* Random costs (a fixed seed): every table the simulator reads, links and REDUCEs included. */
static void random_costs(const pp_sched *s, unsigned *seed, pp_cost *c)
{
    cr_assert_eq(pp_cost_init_unit(c, s, 2.0), PP_OK, "%s", pp_err_msg());
    size_t n = (size_t)s->n_pipes * s->stages_per_pipe, l = (size_t)s->ranks * s->ranks;
    c->send_bytes_f = calloc(n, sizeof(double));
    c->send_bytes_b = calloc(n, sizeof(double));
    c->latency = calloc(l, sizeof(double));
    c->inv_bw = calloc(l, sizeof(double));
    c->reduce = calloc((size_t)s->n_reduces + 1, sizeof(double));
    cr_assert(c->send_bytes_f && c->send_bytes_b && c->latency && c->inv_bw && c->reduce);
#define RND() ((double)(rand_r(seed) % 1000 + 1) / 337.0)
    for (size_t i = 0; i < n; i++) {
        c->f[i] = RND(), c->b[i] = RND(), c->i[i] = RND(), c->w[i] = RND();
        c->send_bytes_f[i] = RND(), c->send_bytes_b[i] = RND();
    }
    for (size_t i = 0; i < l; i++)
        c->latency[i] = RND() / 10, c->inv_bw[i] = RND() / 3;
    for (int i = 0; i < s->n_reduces; i++)
        c->reduce[i] = RND() * 2;
#undef RND
}

static void expect_same_doubles(const double *a, const double *b, int n, const char *what,
                                const char *kind, int lane)
{
    cr_expect(!memcmp(a, b, (size_t)n * sizeof *a), "%s, lane %d: %s differs from its own pass",
              kind, lane, what);
}

/* Each lane of pp_sim_run_lanes is, double for double, the pass of its own table. */
Test(sched_sim, lanes_equal_their_own_passes_to_the_bit)
{
    struct {
        const char *kind;
        int D, N, v;
    } cases[] = {{"gpipe", 4, 8, 0},       {"1f1b", 5, 12, 0},  {"interleaved", 4, 8, 2},
                 {"zb-h1", 4, 9, 0},       {"zbv", 4, 8, 2},    {"chimera", 4, 8, 0},
                 {"bitpipe", 4, 8, 2},     {"dualpipev", 4, 10, 2}};
    unsigned seed = 27;
    enum { K = 5 };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        pp_sched *s = gen(cases[k].kind, cases[k].D, cases[k].N, cases[k].v);
        pp_cost c[K];
        pp_sim_result lanes[K], own;
        for (int i = 0; i < K; i++)
            random_costs(s, &seed, &c[i]);
        cr_assert_eq(pp_sim_run_lanes(s, c, K, lanes), PP_OK, "%s", pp_err_msg());
        for (int i = 0; i < K; i++) {
            cr_assert_eq(pp_sim_run(s, &c[i], 0, &own), PP_OK, "%s", pp_err_msg());
            const char *kd = cases[k].kind;
            expect_same_doubles(&lanes[i].makespan, &own.makespan, 1, "makespan", kd, i);
            expect_same_doubles(&lanes[i].bubble_over_total, &own.bubble_over_total, 1,
                                "bubble", kd, i);
            expect_same_doubles(lanes[i].busy, own.busy, s->ranks, "busy", kd, i);
            expect_same_doubles(lanes[i].idle, own.idle, s->ranks, "idle", kd, i);
            expect_same_doubles(lanes[i].last_end, own.last_end, s->ranks, "last end", kd, i);
            expect_same_doubles(lanes[i].peak_activations, own.peak_activations, s->ranks,
                                "peak activations", kd, i);
            expect_same_doubles(lanes[i].peak_held_for_w, own.peak_held_for_w, s->ranks,
                                "held for W", kd, i);
            cr_expect_eq(lanes[i].cross_rank_transfers, own.cross_rank_transfers);
            cr_expect_eq(lanes[i].actions, own.actions);
            /* the lanes differ from each other: the test compares something */
            if (i > 0)
                cr_expect_neq(lanes[i].makespan, lanes[0].makespan, "%s", kd);
            pp_sim_result_fini(&own);
            pp_sim_result_fini(&lanes[i]);
            pp_cost_fini(&c[i]);
        }
        pp_sched_destroy(s);
    }
    pp_sim_result r;
    pp_cost c;
    pp_sched *s = gen("1f1b", 2, 2, 0);
    cr_assert_eq(pp_cost_init_unit(&c, s, 2.0), PP_OK);
    cr_expect_eq(pp_sim_run_lanes(s, &c, 0, &r), PP_ERR_INVALID, "no lane is refused");
    cr_expect(strstr(pp_err_msg(), "lanes"), "%s", pp_err_msg());
    pp_err_clear();
    pp_cost_fini(&c);
    pp_sched_destroy(s);
}
