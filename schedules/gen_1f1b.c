/* gen_1f1b.c — 1F1B (PipeDream-Flush; Megatron's forward_backward_pipelining_without_interleaving).
 * Rank d warms up with w = min(D-d-1, N) forwards, then alternates F(w+i), B(i) for i < N-w,
 * then drains the remaining backwards. Peak in-flight activations on rank d: min(D-d, N). */
#include "gen.h"

pp_status pp_gen_1f1b(const pp_sched_params *p, pp_sched **out)
{
    int D = p->ranks, N = p->microbatches;
    pp_sched *s;
    pp_sched_split sp = pp_sched_params_split(p);
    PP_TRY(pp_sched_create("1f1b", D, N, 1, 1, p->layers, &sp, &s));
    for (int d = 0; d < D; d++)
        pp_sched_stage(s, 0, d)->rank = d;
    pp_status st = PP_OK;
    for (int d = 0; d < D && st == PP_OK; d++) {
        int w = D - d - 1 < N ? D - d - 1 : N;
        for (int m = 0; m < w && st == PP_OK; m++)
            st = pp_sched_push(s, d, PP_OP_F, 0, d, m);
        for (int i = 0; i < N - w && st == PP_OK; i++) {
            st = pp_sched_push(s, d, PP_OP_F, 0, d, w + i);
            if (st == PP_OK)
                st = pp_sched_push(s, d, PP_OP_B, 0, d, i);
        }
        for (int m = N - w; m < N && st == PP_OK; m++)
            st = pp_sched_push(s, d, PP_OP_B, 0, d, m);
    }
    return pp_gen_finish(s, st, out);
}
