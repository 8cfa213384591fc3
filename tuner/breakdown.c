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

static pp_status makespans(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
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

/* The pieces of the busiest rank for c's schedule with n micro-batches: the makespans with
 * and without link costs, the rank's compute and the tensor-parallel part of it. */
typedef struct {
    double mk, mk_free, busy, tp, opt;
} pieces;

static pp_status pieces_at(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                           const pp_tune_opts *o, int n, pieces *out)
{
    pp_config cn = *c;
    cn.N = n;
    pp_sched_params sp;
    pp_tune_sched_params(m, &cn, &sp);
    pp_sched *s = NULL;
    PP_TRY(pp_sched_generate(cn.schedule, &sp, &s));
    int r = 0;
    pp_status st = makespans(m, hw, &cn, o, s, &out->mk, &out->mk_free, &out->busy, &r, &out->opt);
    if (st == PP_OK) {
        pp_tune_op_times ot;
        pp_tune_op_times_compute(m, hw, &cn, o, &ot);
        out->tp = tp_time(s, r, ot.tp_allreduce);
    }
    pp_sched_destroy(s);
    PP_TRY(st);
    return PP_OK;
}

/* N above the steady-state budget: the pieces of the two longest prefixes the prediction used
 * (pp_tune_steady_prefixes), extrapolated along their step as the prediction is. */
static pp_status pieces_steady(const pp_tune_model *m, const pp_tune_hw *hw,
                               const pp_config *c, const pp_tune_opts *o, pieces *out)
{
    int n[3];
    pieces a, b;
    PP_TRY(pp_tune_steady_prefixes(m, c, n));
    PP_TRY(pieces_at(m, hw, c, o, n[1], &a));
    PP_TRY(pieces_at(m, hw, c, o, n[2], &b));
    double k = (double)(c->N - n[2]) / (n[2] - n[1]);
    *out = (pieces){.mk = b.mk + k * (b.mk - a.mk), .mk_free = b.mk_free + k * (b.mk_free - a.mk_free),
                    .busy = b.busy + k * (b.busy - a.busy), .tp = b.tp + k * (b.tp - a.tp),
                    .opt = b.opt};
    return PP_OK;
}

pp_status pp_tune_breakdown(const pp_tune_model *m, const pp_tune_hw *hw,
                            const pp_tune_prediction *p, const pp_tune_opts *o,
                            pp_tune_time_parts *out)
{
    memset(out, 0, sizeof *out);
    const pp_config *c = &p->cfg;
    pieces x = {0};
    if (c->N > pp_tune_steady_budget())
        PP_TRY(pieces_steady(m, hw, c, o, &x));
    else
        PP_TRY(pieces_at(m, hw, c, o, c->N, &x));
    out->tp = x.tp > x.busy ? x.busy : x.tp;
    out->compute = x.busy - out->tp;
    out->bubble = x.mk_free > x.busy ? x.mk_free - x.busy : 0;
    out->p2p = x.mk > x.mk_free ? x.mk - x.mk_free : 0;
    out->optimizer = x.opt;
    double dp = p->step_time - x.opt - x.mk;
    out->dp = dp > 0 ? dp : 0;
    return PP_OK;
}
