/* gen_zbh1.c — ZB-H1, the first hand-crafted zero-bubble schedule (Qi et al., "Zero Bubble
 * Pipeline Parallelism", ICLR 2024, Section 3.1).
 *
 * 1F1B with each backward split into I (input gradient, on the critical path: it feeds the
 * previous stage) and W (weight gradient, which nothing waits for), and the W passes moved into
 * the bubbles. Rank d (0-based) warms up with w = min(D-d-1, N) forwards, as 1F1B, then runs
 * steps F(w+j), I(j) for j < N - w, and after those the remaining I(j); from step j = d on, each
 * step is followed by the oldest W not yet run, so rank d keeps d weight gradients pending
 * (rank 0 none, the last rank D-1) and runs them after its last I, where 1F1B's cool-down
 * leaves that rank idle. This is the order PyTorch's _get_1f1b_rank_ops builds with
 * enable_zero_bubble at one chunk per rank (ScheduleInterleavedZeroBubble's rule
 * num_1f1b_microbatches = rank).
 *
 * Unit costs F = I = W = 1, free links, N >= D: the makespan is 3N + D - 1, so the bubble of
 * each rank is D - 1 against 1F1B's 3(D - 1), the paper's (p-1)(T_F + T_B - T_W) against
 * (p-1)(T_F + T_B + T_W) (test_sched_zb.c derives it step by step). Memory: activations are held
 * from F to W, and rank d holds at most min(D, N) micro-batches (1F1B: D - d): the paper's bound
 * p * M_B is 1F1B's first rank's, which every rank reaches here; I frees the part only the input
 * gradient needed (pp_sched_in_flight_peak_split). Deviation: none in the order; the paper's
 * figure places the steps on a time grid, which here is the simulator's business. */
#include "gen.h"

/* Rank d's list, pushed onto s. */
static pp_status rank_ops(pp_sched *s, int D, int N, int d)
{
    int w = D - d - 1 < N ? D - d - 1 : N;
    int next_w = 0; /* oldest micro-batch whose W has not run */
    pp_status st = PP_OK;
    for (int m = 0; m < w && st == PP_OK; m++)
        st = pp_sched_push(s, d, PP_OP_F, 0, d, m);
    for (int j = 0; j < N && st == PP_OK; j++) {
        if (w + j < N)
            st = pp_sched_push(s, d, PP_OP_F, 0, d, w + j);
        if (st == PP_OK)
            st = pp_sched_push(s, d, PP_OP_I, 0, d, j);
        if (st == PP_OK && j >= d)
            st = pp_sched_push(s, d, PP_OP_W, 0, d, next_w++);
    }
    while (next_w < N && st == PP_OK)
        st = pp_sched_push(s, d, PP_OP_W, 0, d, next_w++);
    return st;
}

pp_status pp_gen_zbh1(const pp_sched_params *p, pp_sched **out)
{
    return pp_gen_linear("zb-h1", p, rank_ops, out);
}
