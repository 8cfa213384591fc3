/* gen_gpipe.c — GPipe: stage d on rank d; every rank runs all N forwards, then all N backwards
 * (backwards in the same micro-batch order, as torch.distributed.pipelining's ScheduleGPipe). */
#include "gen.h"

static pp_status rank_ops(pp_sched *s, int D, int N, int d)
{
    (void)D;
    pp_status st = PP_OK;
    for (int m = 0; m < N && st == PP_OK; m++)
        st = pp_sched_push(s, d, PP_OP_F, 0, d, m);
    for (int m = 0; m < N && st == PP_OK; m++)
        st = pp_sched_push(s, d, PP_OP_B, 0, d, m);
    return st;
}

pp_status pp_gen_gpipe(const pp_sched_params *p, pp_sched **out)
{
    return pp_gen_linear("gpipe", p, rank_ops, out);
}
