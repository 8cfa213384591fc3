/* inflight.c — the one walk of a rank's in-flight micro-batches: an F keeps its stage's
 * activations until the B of the same micro-batch and stage frees them. Its peak depends only
 * on the order of the rank's own actions, so it needs no timing: the simulator reports it as
 * peak_activations, the tuner's memory model weighs it by each stage's bytes, the runtime's plan
 * reads the simulator's. Split backward (I, W) will free here too, in one place. */
#include <stdlib.h>

#include "pp_sched.h"

double pp_sched_stage_units(const pp_sched *s, int pipe, int stage)
{
    double per_unit = (double)(s->layers > 0 ? s->layers : s->stages_per_pipe) / s->ranks;
    return pp_sched_stage_layers(s, pipe, stage) / per_unit;
}

double pp_sched_in_flight_peak(const pp_sched *s, int rank, const double *weight)
{
    double cur = 0, peak = 0;
    for (int i = 0; i < s->n_ops[rank]; i++) {
        const pp_action *a = &s->ops[rank][i];
        if (a->op != PP_OP_F && a->op != PP_OP_B)
            continue;
        double w = weight ? weight[a->pipe * s->stages_per_pipe + a->stage]
                          : pp_sched_stage_units(s, a->pipe, a->stage);
        cur += a->op == PP_OP_F ? w : -w;
        if (cur > peak)
            peak = cur;
    }
    return peak;
}
