/* gen_1f1b.c — 1F1B (PipeDream-Flush; Megatron's forward_backward_pipelining_without_interleaving).
 * Rank d warms up with w = min(D-d-1, N) forwards, then alternates F(w+i), B(i) for i < N-w,
 * then drains the remaining backwards. Peak in-flight activations on rank d: min(D-d, N). */
#include "gen.h"

static pp_status rank_ops(pp_sched *s, int D, int N, int d)
{
    int w = D - d - 1 < N ? D - d - 1 : N;
    pp_status st = PP_OK;
    for (int m = 0; m < w && st == PP_OK; m++)
        st = pp_sched_push(s, d, PP_OP_F, 0, d, m);
    for (int i = 0; i < N - w && st == PP_OK; i++) {
        st = pp_sched_push(s, d, PP_OP_F, 0, d, w + i);
        if (st == PP_OK)
            st = pp_sched_push(s, d, PP_OP_B, 0, d, i);
    }
    for (int m = N - w; m < N && st == PP_OK; m++)
        st = pp_sched_push(s, d, PP_OP_B, 0, d, m);
    return st;
}

pp_status pp_gen_1f1b(const pp_sched_params *p, pp_sched **out)
{
    return pp_gen_linear("1f1b", p, rank_ops, out);
}
