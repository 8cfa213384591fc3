/* gen_v.c — the V placement the V-shaped single-pipe schedules share (zbv, dualpipev): 2D
 * stages on D ranks, rank d holding stage d on the way down and stage 2D-1-d on the way back, so
 * the turn (stages D-1 and D, both on rank D-1) is a local hand-over and a micro-batch starts and
 * ends on rank 0. The orders themselves are the generators' (gen_zbv.c, gen_dualpipev.c). */
#include "gen.h"

pp_status pp_gen_v_shape(const char *kind, const pp_sched_params *p,
                         pp_status (*rank_ops)(pp_sched *s, int D, int N, int d), pp_sched **out)
{
    int D = p->ranks, N = p->microbatches;
    pp_sched *s;
    pp_sched_split sp = pp_sched_params_split(p);
    PP_TRY(pp_sched_create(kind, D, N, 2, 1, p->layers, &sp, &s));
    for (int k = 0; k < 2 * D; k++)
        pp_sched_stage(s, 0, k)->rank = k < D ? k : 2 * D - 1 - k;
    pp_status st = PP_OK;
    for (int d = 0; d < D && st == PP_OK; d++)
        st = rank_ops(s, D, N, d);
    return pp_gen_finish(s, st, out);
}
