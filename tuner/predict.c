/* predict.c — one configuration's predicted step: the schedule simulated with the time model's
 * costs, the memory model's per-rank peaks, and the derived throughput figures.
 *
 * Figures (units in the names): step time = when the last rank has finished its data-parallel
 * gradient all-reduce, begun after its own last backward in the simulated schedule, + the
 * optimizer step (timemodel.c); tokens/s = global batch x seq / step;
 * model TFLOP/s per GPU and MFU from Narayanan's FLOP count (no recompute FLOPs) over
 * p x d x t GPUs at the device's dense peak. The sanity limits (no MFU over 100 %, no negative
 * or non-finite time) are enforced here: a violation is an error, not a figure.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_tune.h"

void pp_tune_sched_params(const pp_tune_model *m, const pp_tune_config *c, pp_sched_params *out)
{
    memset(out, 0, sizeof *out);
    out->ranks = c->p;
    out->microbatches = c->N;
    /* chunks only where the schedule has a choice (the registry row's tunable v) */
    const pp_sched_desc *d = pp_sched_lookup(c->kind);
    out->chunks = d && d->chunks == 0 ? c->v : 0;
    out->group = c->G;
    out->layers = m->layers;
    out->uneven = c->uneven;
}

void pp_tune_config_to_profile(const pp_tune_config *c, pp_profile_config *out)
{
    *out = (pp_profile_config){.schedule = c->kind, .p = c->p, .v = c->v, .G = c->G, .b = c->b,
                               .d = c->d, .t = c->t, .N = c->N, .uneven = c->uneven};
}

pp_status pp_tune_config_from_profile(const pp_profile_config *c, pp_tune_config *out)
{
    memset(out, 0, sizeof *out);
    if (!c->schedule || strlen(c->schedule) >= sizeof out->kind)
        return PP_ERR(PP_ERR_INVALID, "schedule name \"%s\" is longer than %zu characters",
                      c->schedule ? c->schedule : "", sizeof out->kind - 1);
    snprintf(out->kind, sizeof out->kind, "%s", c->schedule);
    out->p = c->p, out->v = c->v, out->G = c->G, out->b = c->b;
    out->d = c->d, out->t = c->t, out->N = c->N, out->uneven = c->uneven;
    return PP_OK;
}

char *pp_tune_config_str(const pp_tune_config *c, char *buf, size_t n)
{
    char g[24] = "";
    if (c->G)
        snprintf(g, sizeof g, " G=%d", c->G);
    snprintf(buf, n, "%s p=%d v=%d%s b=%d d=%d t=%d N=%d %s", c->kind, c->p, c->v, g, c->b, c->d,
             c->t, c->N, c->uneven ? "uneven" : "even");
    return buf;
}

static pp_status sanity(const pp_tune_config *c, const pp_tune_prediction *p)
{
    char cb[160];
    if (!isfinite(p->step_time) || p->step_time <= 0)
        return PP_ERR(PP_ERR_INVALID, "%s: predicted step time %g s is not a positive number",
                      pp_tune_config_str(c, cb, sizeof cb), p->step_time);
    if (!(p->mfu > 0 && p->mfu <= 1.0))
        return PP_ERR(PP_ERR_INVALID,
                      "%s: predicted MFU %.1f %% is outside (0, 100 %%]: the time model is "
                      "inconsistent with the device peak",
                      pp_tune_config_str(c, cb, sizeof cb), 100 * p->mfu);
    return PP_OK;
}

static void fill_figures(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                         pp_tune_prediction *out)
{
    double seqs = (double)c->N * c->b * c->d, gpus = (double)c->p * c->d * c->t;
    double flops = pp_tune_model_flops(m, seqs);
    out->tokens_per_s = seqs * m->seq / out->step_time;
    out->tflops_per_gpu = flops / (out->step_time * gpus) / 1e12;
    out->mfu = flops / (out->step_time * gpus * hw->peak_flops);
}

/* When the last rank finishes its data-parallel all-reduce: each rank starts it after its own
 * last compute or REDUCE in the simulated schedule. Never before the makespan's end. */
static double step_end(const pp_sched *s, const pp_sim_result *sim, const double *dp_rank)
{
    double end = sim->makespan;
    for (int r = 0; r < s->ranks; r++) {
        double last = 0;
        for (int i = 0; i < s->n_ops[r]; i++) {
            int op = s->ops[r][i].op;
            if ((op == PP_OP_F || op == PP_OP_B || op == PP_OP_REDUCE) &&
                sim->spans[r][i].end > last)
                last = sim->spans[r][i].end;
        }
        if (last + dp_rank[r] > end)
            end = last + dp_rank[r];
    }
    return end;
}

static pp_status simulate(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                          const pp_tune_opts *o, const pp_sched *s, const pp_tune_rank_mem *mem,
                          pp_tune_step_extra *extra, pp_sim_result *sim)
{
    memset(sim, 0, sizeof *sim);
    pp_cost cost;
    PP_TRY(pp_tune_costs(m, hw, c, o, s, mem, &cost, extra));
    pp_status st = pp_sim_run(s, &cost, 1, sim);
    pp_cost_fini(&cost);
    return st;
}

pp_status pp_tune_simulate(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                           const pp_tune_opts *o, const pp_sched *s, pp_tune_step_extra *extra,
                           pp_sim_result *sim)
{
    return simulate(m, hw, c, o, s, NULL, extra, sim);
}

pp_status pp_tune_evaluate_mem(const pp_tune_model *m, const pp_tune_hw *hw,
                               const pp_tune_config *c, const pp_tune_opts *o, const pp_sched *s,
                               const pp_tune_rank_mem *mem, pp_tune_prediction *out)
{
    memset(out, 0, sizeof *out);
    out->cfg = *c;
    pp_tune_step_extra extra = {.dp_rank = pp_calloc((size_t)s->ranks, sizeof(double))};
    if (!extra.dp_rank)
        return PP_ERR_NOMEM;
    pp_sim_result sim;
    pp_status st = simulate(m, hw, c, o, s, mem, &extra, &sim);
    if (st == PP_OK) {
        out->pipeline_time = sim.makespan;
        out->step_time = step_end(s, &sim, extra.dp_rank) + extra.optimizer;
        out->bubble_ideal = sim.bubble_over_ideal;
        out->bubble_total = sim.bubble_over_total;
        pp_sim_result_fini(&sim);
    }
    free(extra.dp_rank);
    PP_TRY(st);
    for (int r = 0; r < s->ranks; r++)
        if (mem[r].total > out->peak_mem) {
            out->peak_mem = mem[r].total;
            out->peak_rank = r;
        }
    out->capacity = pp_tune_mem_capacity(hw, o);
    out->fits = out->peak_mem <= out->capacity;
    out->predicted_only = !m->runtime_model[0] || !hw->is_local;
    fill_figures(m, hw, c, out);
    PP_TRY(sanity(c, out));
    return PP_OK;
}

pp_status pp_tune_evaluate(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                           const pp_tune_opts *o, const pp_sched *s, pp_tune_prediction *out,
                           pp_tune_rank_mem *mem)
{
    pp_tune_rank_mem *own = mem ? mem : pp_calloc((size_t)s->ranks, sizeof *own);
    if (!own)
        return PP_ERR_NOMEM;
    pp_status st = pp_tune_memory(m, c, s, o, own);
    if (st == PP_OK)
        st = pp_tune_evaluate_mem(m, hw, c, o, s, own, out);
    if (!mem)
        free(own);
    PP_TRY(st);
    return PP_OK;
}

pp_status pp_tune_predict(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                          const pp_tune_opts *o, pp_tune_prediction *out, pp_tune_rank_mem *mem)
{
    pp_sched_params sp;
    pp_tune_sched_params(m, c, &sp);
    pp_sched *s = NULL;
    PP_TRY(pp_sched_generate(c->kind, &sp, &s));
    pp_status st = pp_tune_evaluate(m, hw, c, o, s, out, mem);
    pp_sched_destroy(s);
    PP_TRY(st);
    return PP_OK;
}
