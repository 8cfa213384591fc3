/* gen_gpipe.c — GPipe: stage d on rank d; every rank runs all N forwards, then all N backwards
 * (backwards in the same micro-batch order, as torch.distributed.pipelining's ScheduleGPipe). */
#include "gen.h"

pp_status pp_gen_gpipe(const pp_sched_params *p, pp_sched **out)
{
    int D = p->ranks, N = p->microbatches;
    pp_sched *s;
    pp_sched_split sp = pp_sched_params_split(p);
    PP_TRY(pp_sched_create("gpipe", D, N, 1, 1, p->layers, &sp, &s));
    pp_status st = PP_OK;
    for (int d = 0; d < D; d++)
        pp_sched_stage(s, 0, d)->rank = d;
    for (int d = 0; d < D && st == PP_OK; d++) {
        for (int m = 0; m < N && st == PP_OK; m++)
            st = pp_sched_push(s, d, PP_OP_F, 0, d, m);
        for (int m = 0; m < N && st == PP_OK; m++)
            st = pp_sched_push(s, d, PP_OP_B, 0, d, m);
    }
    return pp_gen_finish(s, st, out);
}
