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

void pp_tune_sched_params(const pp_tune_model *m, const pp_config *c, pp_sched_params *out)
{
    pp_config_sched_params(c, m->layers, out);
}

static pp_status sanity(const pp_config *c, const pp_tune_prediction *p)
{
    char cb[160];
    if (!isfinite(p->step_time) || p->step_time <= 0)
        return PP_ERR(PP_ERR_INVALID, "%s: predicted step time %g s is not a positive number",
                      pp_config_str(c, cb, sizeof cb), p->step_time);
    if (!(p->mfu > 0 && p->mfu <= 1.0))
        return PP_ERR(PP_ERR_INVALID,
                      "%s: predicted MFU %.1f %% is outside (0, 100 %%]: the time model is "
                      "inconsistent with the device peak",
                      pp_config_str(c, cb, sizeof cb), 100 * p->mfu);
    return PP_OK;
}

static void fill_figures(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                         pp_tune_prediction *out)
{
    double seqs = (double)c->N * c->b * c->d;
    double gpus = (double)c->p * c->d * c->t * (c->cp > 1 ? c->cp : 1);
    double flops = pp_tune_model_flops(m, seqs);
    out->tokens_per_s = seqs * m->seq / out->step_time;
    out->tflops_per_gpu = flops / (out->step_time * gpus) / 1e12;
    out->mfu = flops / (out->step_time * gpus * hw->peak_flops);
}

static pp_status simulate(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                          const pp_tune_opts *o, const pp_sched *s, const pp_tune_rank_mem *mem,
                          int want_spans, pp_tune_step_extra *extra, pp_sim_result *sim)
{
    memset(sim, 0, sizeof *sim);
    pp_cost cost;
    PP_TRY(pp_tune_costs(m, hw, c, o, s, mem, &cost, extra));
    pp_status st = pp_sim_run(s, &cost, want_spans, sim);
    pp_cost_fini(&cost);
    return st;
}

pp_status pp_tune_simulate(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                           const pp_tune_opts *o, const pp_sched *s, pp_tune_step_extra *extra,
                           pp_sim_result *sim)
{
    return simulate(m, hw, c, o, s, NULL, 1, extra, sim);
}

/* What one simulated schedule yields, before the derived figures: the pieces the steady state
 * extrapolates (each grows linearly in N once the pipeline is full). */
typedef struct {
    double makespan;     /* s */
    double busy, idle;   /* s, summed over ranks */
    double optimizer;    /* s, the slowest rank's optimizer step */
    double bubble_ideal, bubble_total;
    double *end;         /* [D] each rank's step end: its last compute or REDUCE + its DP
                            all-reduce, s */
} figures;

/* f from a simulation of D ranks and its extra (dp_rank: D entries); frees sim. */
static void take_figures(pp_sim_result *sim, const pp_tune_step_extra *extra, int D, figures *f)
{
    f->makespan = sim->makespan;
    f->busy = f->idle = 0;
    for (int r = 0; r < D; r++) {
        /* after its last compute (a split backward's gradients are whole after its last W)
         * and its last replica sync */
        f->end[r] = sim->last_end[r] + extra->dp_rank[r];
        f->busy += sim->busy[r];
        f->idle += sim->idle[r];
    }
    f->optimizer = extra->optimizer;
    f->bubble_ideal = sim->bubble_over_ideal;
    f->bubble_total = sim->bubble_over_total;
    pp_sim_result_fini(sim);
}

/* Costs and simulates s (of configuration c, memory mem) into f (f->end: D entries). */
static pp_status point_figures(const pp_tune_model *m, const pp_tune_hw *hw,
                               const pp_config *c, const pp_tune_opts *o, const pp_sched *s,
                               const pp_tune_rank_mem *mem, figures *f)
{
    pp_tune_step_extra extra = {.dp_rank = pp_calloc((size_t)s->ranks, sizeof(double))};
    if (!extra.dp_rank)
        return PP_ERR_NOMEM;
    pp_sim_result sim;
    pp_status st = simulate(m, hw, c, o, s, mem, 0, &extra, &sim);
    if (st == PP_OK)
        take_figures(&sim, &extra, s->ranks, f);
    free(extra.dp_rank);
    return st;
}

/* The prediction of c from its figures and its D ranks' memory. */
static pp_status finish(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                        const pp_tune_opts *o, const figures *f, const pp_tune_rank_mem *mem,
                        pp_tune_prediction *out)
{
    memset(out, 0, sizeof *out);
    out->cfg = *c;
    out->pipeline_time = f->makespan;
    /* the last rank's DP all-reduce, never before the makespan's end */
    double end = f->makespan;
    for (int r = 0; r < c->p; r++)
        end = f->end[r] > end ? f->end[r] : end;
    out->step_time = end + f->optimizer;
    out->bubble_ideal = f->bubble_ideal;
    out->bubble_total = f->bubble_total;
    for (int r = 0; r < c->p; r++)
        if (mem[r].total > out->peak_mem) {
            out->peak_mem = mem[r].total;
            out->peak_rank = r;
        }
    out->capacity = pp_tune_mem_capacity(hw, o);
    out->fits = out->peak_mem <= out->capacity;
    out->predicted_only = !m->pprun || !hw->is_local;
    fill_figures(m, hw, c, out);
    PP_TRY(sanity(c, out));
    return PP_OK;
}

pp_status pp_tune_evaluate_mem(const pp_tune_model *m, const pp_tune_hw *hw,
                               const pp_config *c, const pp_tune_opts *o, const pp_sched *s,
                               const pp_tune_rank_mem *mem, pp_tune_prediction *out)
{
    memset(out, 0, sizeof *out);
    figures f = {.end = pp_calloc((size_t)s->ranks, sizeof(double))};
    if (!f.end)
        return PP_ERR_NOMEM;
    pp_status st = point_figures(m, hw, c, o, s, mem, &f);
    if (st == PP_OK)
        st = finish(m, hw, c, o, &f, mem, out);
    free(f.end);
    PP_TRY(st);
    return PP_OK;
}

/* The lanes' costs, extras, simulations and figures (k of each, allocated by the caller's
 * one block). */
typedef struct {
    pp_cost cost;
    pp_tune_step_extra extra;
    pp_sim_result sim;
    figures f;
} lane;

static pp_status evaluate_lanes(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                                const pp_tune_opts *o, const pp_sched *s,
                                const pp_tune_rank_mem *const *mem, int k, lane *ln,
                                double *ends, pp_tune_prediction *out)
{
    int D = s->ranks;
    pp_status st = PP_OK;
    int costed = 0;
    for (; costed < k && st == PP_OK; costed++) {
        ln[costed].extra.dp_rank = ends + (size_t)costed * 2 * D;
        ln[costed].f.end = ends + ((size_t)costed * 2 + 1) * D;
        st = pp_tune_costs(m, hw, &c[costed], o, s, mem[costed], &ln[costed].cost,
                           &ln[costed].extra);
        if (st != PP_OK)
            costed--; /* pp_tune_costs leaves nothing to free on an error */
    }
    pp_cost *cost = st == PP_OK ? pp_calloc((size_t)k, sizeof *cost) : NULL;
    pp_sim_result *sim = cost ? pp_calloc((size_t)k, sizeof *sim) : NULL;
    if (st == PP_OK && !sim)
        st = PP_ERR_NOMEM;
    for (int i = 0; i < k && st == PP_OK; i++)
        cost[i] = ln[i].cost;
    if (st == PP_OK)
        st = pp_sim_run_lanes(s, cost, k, sim);
    for (int i = 0; i < k && st == PP_OK; i++) {
        take_figures(&sim[i], &ln[i].extra, D, &ln[i].f);
        st = finish(m, hw, &c[i], o, &ln[i].f, mem[i], &out[i]);
    }
    for (int i = 0; sim && i < k; i++)
        pp_sim_result_fini(&sim[i]);
    for (int i = 0; i < costed; i++)
        pp_cost_fini(&ln[i].cost);
    free(sim);
    free(cost);
    return st;
}

pp_status pp_tune_evaluate_lanes(const pp_tune_model *m, const pp_tune_hw *hw,
                                 const pp_config *c, const pp_tune_opts *o, const pp_sched *s,
                                 const pp_tune_rank_mem *const *mem, int k,
                                 pp_tune_prediction *out)
{
    lane *ln = pp_calloc((size_t)k + 1, sizeof *ln);
    double *ends = pp_calloc((size_t)k * 2 * s->ranks + 1, sizeof *ends);
    pp_status st = ln && ends ? evaluate_lanes(m, hw, c, o, s, mem, k, ln, ends, out)
                              : PP_ERR_NOMEM;
    free(ln);
    free(ends);
    return st;
}

pp_status pp_tune_evaluate(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
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

pp_status pp_tune_predict(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                          const pp_tune_opts *o, pp_tune_prediction *out, pp_tune_rank_mem *mem)
{
    if (c->N > pp_tune_steady_budget())
        return pp_tune_predict_steady(m, hw, c, o, out, mem, NULL);
    pp_sched_params sp;
    pp_tune_sched_params(m, c, &sp);
    pp_sched *s = NULL;
    PP_TRY(pp_sched_generate(c->schedule, &sp, &s));
    pp_status st = pp_tune_evaluate(m, hw, c, o, s, out, mem);
    pp_sched_destroy(s);
    PP_TRY(st);
    return PP_OK;
}

/* ---- Huge N: the steady state (issue 18, finding 6) --------------------------------------
 * A schedule's work is linear in N, but past its warm-up a pipeline repeats one period (the
 * registry's pp_sched_desc_period) with the same timing: each period adds the same time to the
 * makespan and to every rank's end, the same busy and idle time, and the same in-flight
 * activations (0 for 1F1B, whose in-flight count stops at D; one period's for GPipe). So for N
 * above the budget the three prefixes N1 < N2 < N3 with N's remainder modulo the period,
 * N3 - N2 = N2 - N1, N1 about N3 / 2 and N3 about the larger of 1024, 8 warm-ups (2 D v each)
 * and 4 periods, within the budget, are simulated; the figures must grow by the same step twice (to a
 * relative 1e-9: the simulator's sums of real costs round), and are extrapolated from N3 by
 * (N - N3) / (N3 - N2) steps. Where they do not, or the budget holds too few periods, the
 * candidate is refused with the reason. */
static int steady_budget = PP_TUNE_MAX_MICROBATCHES;

int pp_tune_steady_budget(void)
{
    return steady_budget;
}

void pp_tune_steady_budget_set(int n)
{
    steady_budget = n > 0 ? n : PP_TUNE_MAX_MICROBATCHES;
}

pp_status pp_tune_steady_prefixes(const pp_tune_model *m, const pp_config *c, int n[3])
{
    const pp_sched_desc *d = pp_sched_find(c->schedule);
    if (!d)
        return pp_err_trace(PP_ERR_INVALID, __FILE__, __LINE__);
    pp_sched_params sp;
    pp_tune_sched_params(m, c, &sp);
    long long P = pp_sched_desc_period(d, &sp), B = steady_budget, N = c->N;
    long long warm = 2LL * c->p * (c->v > 0 ? c->v : 1); /* past the warm-up and cool-down */
    /* long enough to be several warm-ups and periods past the start, no longer: the work is
     * the prefixes' (at least 1024 micro-batches, at most the budget) */
    long long want = 8 * warm > 4 * P ? 8 * warm : 4 * P;
    long long top = want < 1024 ? 1024 : want;
    top = top < B ? top : B;
    long long n3 = P > 0 && top >= N % P ? N % P + (top - N % P) / P * P : 0;
    long long k = n3 / 4 / (P > 0 ? P : 1);
    k = k < 1 ? 1 : k;
    long long n1 = n3 - 2 * k * P;
    if (P < 1 || n1 < warm || n1 < P)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "N = %lld micro-batches is above the simulation budget of %lld and the "
                      "budget holds too few of %s's periods of %lld micro-batches to extrapolate "
                      "its steady state",
                      N, B, d->name, P);
    n[0] = (int)n1, n[1] = (int)(n1 + k * P), n[2] = (int)n3;
    for (int i = 0; i < 3; i++) {
        sp.microbatches = n[i];
        pp_status st = pp_sched_desc_check(d, &sp);
        if (st != PP_OK)
            return pp_err_trace(st, __FILE__, __LINE__);
    }
    return PP_OK;
}

/* *out = the value at N of a figure that is a, b, c at the prefixes (N3 - N2 = N2 - N1 = one
 * step; N is `steps` more steps past N3). 0, with the figure's name (and rank r >= 0) in why,
 * when the two steps differ. */
static int linear(double a, double b, double c, double steps, double *out, const char *name,
                  int r, char *why, size_t n)
{
    double d1 = b - a, d2 = c - b;
    double scale = fmax(fabs(a), fmax(fabs(b), fabs(c)));
    *out = c + steps * d2;
    if (fabs(d2 - d1) <= 1e-9 * scale)
        return 1;
    if (r >= 0)
        snprintf(why, n, "rank %d's %s grows by %.6g then %.6g", r, name, d1, d2);
    else
        snprintf(why, n, "%s grows by %.6g then %.6g", name, d1, d2);
    return 0;
}

/* Extrapolates the three prefixes' figures fs and memory pm ([3][D]) to N into f and mem
 * (D entries); 0 with the first figure that is not linear in why. */
static int extrapolate(const figures fs[3], const pp_tune_rank_mem *pm, int D, double steps,
                       figures *f, pp_tune_rank_mem *mem, char *why, size_t n)
{
#define LIN(fld, name, r) linear(fs[0].fld, fs[1].fld, fs[2].fld, steps, &f->fld, name, r, why, n)
    int ok = LIN(makespan, "the makespan", -1) && LIN(busy, "the busy time", -1) &&
             LIN(idle, "the idle time", -1) && LIN(optimizer, "the optimizer step", -1);
    for (int r = 0; r < D && ok; r++)
        ok = LIN(end[r], "step end", r);
#undef LIN
#define MEM(fld)                                                                                 \
    linear(pm[r].fld, pm[D + r].fld, pm[2 * D + r].fld, steps, &mem[r].fld, #fld, r, why, n)
    for (int r = 0; r < D && ok; r++)
        ok = MEM(params) && MEM(weights) && MEM(grads) && MEM(optim) && MEM(acts) &&
             MEM(comm) && MEM(workspace) && MEM(total) && MEM(peak_units);
#undef MEM
    f->bubble_ideal = f->busy > 0 ? f->idle / f->busy : 0;
    f->bubble_total = f->makespan > 0 ? f->idle / (D * f->makespan) : 0;
    return ok;
}

/* Generates, costs and simulates the prefix of n micro-batches into f and pm (D entries);
 * the schedule into *out. */
static pp_status prefix_point(const pp_tune_model *m, const pp_tune_hw *hw,
                              const pp_config *c, const pp_tune_opts *o, int n, figures *f,
                              pp_tune_rank_mem *pm, pp_sched **out)
{
    pp_config ci = *c;
    ci.N = n;
    pp_sched_params sp;
    pp_tune_sched_params(m, &ci, &sp);
    PP_TRY(pp_sched_generate(ci.schedule, &sp, out));
    PP_TRY(pp_tune_memory(m, &ci, *out, o, pm));
    PP_TRY(point_figures(m, hw, &ci, o, *out, pm, f));
    return PP_OK;
}

pp_status pp_tune_predict_steady(const pp_tune_model *m, const pp_tune_hw *hw,
                                 const pp_config *c, const pp_tune_opts *o,
                                 pp_tune_prediction *out, pp_tune_rank_mem *mem, pp_sched **prefix)
{
    memset(out, 0, sizeof *out);
    if (prefix)
        *prefix = NULL;
    int n[3];
    PP_TRY(pp_tune_steady_prefixes(m, c, n));
    int D = c->p;
    /* 4 x D ends, 4 x D memory entries: three prefixes and the extrapolation */
    double *ends = pp_calloc((size_t)4 * D, sizeof *ends);
    pp_tune_rank_mem *pm = pp_calloc((size_t)4 * D, sizeof *pm);
    figures fs[3], f = {.end = ends ? ends + 3 * D : NULL};
    pp_sched *s[3] = {NULL, NULL, NULL};
    pp_status st = ends && pm ? PP_OK : PP_ERR_NOMEM;
    for (int i = 0; i < 3 && st == PP_OK; i++) {
        fs[i] = (figures){.end = ends + i * D};
        st = prefix_point(m, hw, c, o, n[i], &fs[i], pm + i * D, &s[i]);
    }
    char why[160], cb[160];
    if (st == PP_OK &&
        !extrapolate(fs, pm, D, (double)(c->N - n[2]) / (n[2] - n[1]), &f, pm + 3 * D, why,
                         sizeof why))
        st = PP_ERR(PP_ERR_UNSUPPORTED,
                    "%s: the prefixes of N = %d, %d, %d micro-batches are not in a steady state "
                    "(%s): not extrapolated past the simulation budget of %d",
                    pp_config_str(c, cb, sizeof cb), n[0], n[1], n[2], why, steady_budget);
    if (st == PP_OK)
        st = finish(m, hw, c, o, &f, pm + 3 * D, out);
    if (st == PP_OK && mem)
        memcpy(mem, pm + 3 * D, (size_t)D * sizeof *mem);
    if (st == PP_OK && prefix)
        *prefix = s[2], s[2] = NULL;
    for (int i = 0; i < 3; i++)
        pp_sched_destroy(s[i]);
    free(ends);
    free(pm);
    PP_TRY(st);
    return PP_OK;
}
