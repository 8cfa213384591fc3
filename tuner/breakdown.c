/* breakdown.c — where a candidate's predicted step time goes: compute, tensor-parallel
 * all-reduces, pipeline bubble, point-to-point transfers, data-parallel gradient sync and the
 * optimizer step, for --explain and the report.
 *
 * The parts are differences of the same time model's simulations, so they add up to the step
 * time: the schedule is simulated once with the links' and replica syncs' costs and once with
 * them free; the busiest rank's compute is the rest of the pipeline. It does not attribute time
 * per rank (the busiest rank speaks for the step, as the step's critical path mostly runs on it).
 */
#include <stdlib.h>
#include <string.h>

#include "pp_tune.h"

/* The busiest rank: the most compute in the simulation. */
static int busiest(const pp_sim_result *sim)
{
    int r = 0;
    for (int i = 1; i < sim->n_ranks; i++)
        if (sim->busy[i] > sim->busy[r])
            r = i;
    return r;
}

/* Tensor-parallel all-reduce time inside rank r's compute: one per layer per direction of
 * each F and B (or I) it runs (pp_tune_op_times.tp_allreduce). */
static double tp_time(const pp_sched *s, int r, double per_layer)
{
    double layers = 0;
    for (int i = 0; i < s->n_ops[r]; i++) {
        const pp_action *a = &s->ops[r][i];
        if (a->op == PP_OP_F || a->op == PP_OP_B || a->op == PP_OP_I)
            layers += pp_sched_stage_layers(s, a->pipe, a->stage);
    }
    return layers * per_layer;
}

static pp_status makespans(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                           const pp_tune_opts *o, const pp_sched *s, double *with_links,
                           double *free_links, double *busy, int *rank, double *optimizer)
{
    pp_cost cost;
    pp_tune_step_extra extra = {0};
    PP_TRY(pp_tune_costs(m, hw, c, o, s, NULL, &cost, &extra));
    *optimizer = extra.optimizer;
    pp_sim_result sim;
    pp_status st = pp_sim_run(s, &cost, 0, &sim);
    if (st == PP_OK) {
        *with_links = sim.makespan;
        pp_sim_result_fini(&sim);
        free(cost.latency), free(cost.inv_bw), free(cost.reduce);
        cost.latency = cost.inv_bw = cost.reduce = NULL;
        st = pp_sim_run(s, &cost, 0, &sim);
    }
    if (st == PP_OK) {
        *free_links = sim.makespan;
        *rank = busiest(&sim);
        *busy = sim.busy[*rank];
        pp_sim_result_fini(&sim);
    }
    pp_cost_fini(&cost);
    return st;
}

pp_status pp_tune_breakdown(const pp_tune_model *m, const pp_tune_hw *hw,
                            const pp_tune_prediction *p, const pp_tune_opts *o,
                            pp_tune_time_parts *out)
{
    memset(out, 0, sizeof *out);
    const pp_tune_config *c = &p->cfg;
    pp_sched_params sp;
    pp_tune_sched_params(m, c, &sp);
    pp_sched *s = NULL;
    PP_TRY(pp_sched_generate(c->kind, &sp, &s));
    double mk = 0, mk_free = 0, busy = 0, opt = 0;
    int r = 0;
    pp_status st = makespans(m, hw, c, o, s, &mk, &mk_free, &busy, &r, &opt);
    if (st == PP_OK) {
        pp_tune_op_times ot;
        pp_tune_op_times_compute(m, hw, c, o, &ot);
        out->tp = tp_time(s, r, ot.tp_allreduce);
        if (out->tp > busy)
            out->tp = busy;
        out->compute = busy - out->tp;
        out->bubble = mk_free > busy ? mk_free - busy : 0;
        out->p2p = mk > mk_free ? mk - mk_free : 0;
        out->optimizer = opt;
        double dp = p->step_time - opt - mk;
        out->dp = dp > 0 ? dp : 0;
    }
    pp_sched_destroy(s);
    PP_TRY(st);
    return PP_OK;
}
