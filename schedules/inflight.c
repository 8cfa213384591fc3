/* inflight.c — the one walk of a rank's in-flight micro-batches: an F keeps its stage's
 * activations until the B of the same micro-batch and stage frees them. Its peak depends only
 * on the order of the rank's own actions, so it needs no timing: the simulator reports it as
 * peak_activations, the tuner's memory model weighs it by each stage's bytes, the runtime's plan
 * reads the simulator's. Split backward: F holds `full` until I, which frees full - held; W frees
 * the held rest (held = full by default: activations are held until W). */
#include <stdlib.h>

#include "pp_sched.h"

double pp_sched_stage_units(const pp_sched *s, int pipe, int stage)
{
    double per_unit = (double)(s->layers > 0 ? s->layers : s->stages_per_pipe) / s->ranks;
    return pp_sched_stage_layers(s, pipe, stage) / per_unit;
}

static double weight_of(const pp_sched *s, const double *weight, const pp_action *a)
{
    return weight ? weight[a->pipe * s->stages_per_pipe + a->stage]
                  : pp_sched_stage_units(s, a->pipe, a->stage);
}

double pp_sched_in_flight_peak_split(const pp_sched *s, int rank, const double *full,
                                     const double *held)
{
    double cur = 0, peak = 0;
    for (int i = 0; i < s->n_ops[rank]; i++) {
        const pp_action *a = &s->ops[rank][i];
        if (!pp_op_is_compute(a->op))
            continue;
        double f = weight_of(s, full, a), h = held ? weight_of(s, held, a) : f;
        cur = pp_in_flight_step(a->op, cur, f, h);
        if (cur > peak)
            peak = cur;
    }
    return peak;
}

double pp_sched_in_flight_peak(const pp_sched *s, int rank, const double *weight)
{
    return pp_sched_in_flight_peak_split(s, rank, weight, NULL);
}

double pp_sched_held_for_w_peak(const pp_sched *s, int rank, const double *weight)
{
    double cur = 0, peak = 0;
    for (int i = 0; i < s->n_ops[rank]; i++) {
        const pp_action *a = &s->ops[rank][i];
        if (a->op != PP_OP_I && a->op != PP_OP_W)
            continue;
        cur = pp_held_for_w_step(a->op, cur, weight_of(s, weight, a));
        if (cur > peak)
            peak = cur;
    }
    return peak;
}
