/* gen_place.c — the placements single-pipe schedules share, each followed by the generator's
 * per-rank order:
 *   one stage per rank (gpipe, 1f1b, zb-h1): stage d on rank d;
 *   the V (zbv, dualpipev): 2D stages on D ranks, rank d holding stage d on the way down and
 *   stage 2D-1-d on the way back, so the turn (stages D-1 and D, both on rank D-1) is a local
 *   hand-over and a micro-batch starts and ends on rank 0.
 * The orders themselves are the generators' (gen_gpipe.c, gen_1f1b.c, gen_zbh1.c, gen_zbv.c,
 * gen_dualpipev.c). */
#include "gen.h"

/* Every rank's order in turn, then the hand-over (or clean-up) of pp_gen_finish. */
static pp_status push_ranks(pp_sched *s, int D, int N,
                            pp_status (*rank_ops)(pp_sched *s, int D, int N, int d),
                            pp_sched **out)
{
    pp_status st = PP_OK;
    for (int d = 0; d < D && st == PP_OK; d++)
        st = rank_ops(s, D, N, d);
    return pp_gen_finish(s, st, out);
}

pp_status pp_gen_linear(const char *kind, const pp_sched_params *p,
                        pp_status (*rank_ops)(pp_sched *s, int D, int N, int d), pp_sched **out)
{
    int D = p->ranks, N = p->microbatches;
    pp_sched *s;
    pp_sched_split sp = pp_sched_params_split(p);
    PP_TRY(pp_sched_create(kind, D, N, 1, 1, p->layers, &sp, &s));
    for (int d = 0; d < D; d++)
        pp_sched_stage(s, 0, d)->rank = d;
    return push_ranks(s, D, N, rank_ops, out);
}

pp_status pp_gen_v_shape(const char *kind, const pp_sched_params *p,
                         pp_status (*rank_ops)(pp_sched *s, int D, int N, int d), pp_sched **out)
{
    int D = p->ranks, N = p->microbatches;
    pp_sched *s;
    pp_sched_split sp = pp_sched_params_split(p);
    PP_TRY(pp_sched_create(kind, D, N, 2, 1, p->layers, &sp, &s));
    for (int k = 0; k < 2 * D; k++)
        pp_sched_stage(s, 0, k)->rank = k < D ? k : 2 * D - 1 - k;
    return push_ranks(s, D, N, rank_ops, out);
}
