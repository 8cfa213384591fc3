/* search_trials.c — the end of the search: trials of the leaderboard's best candidates through
 * the caller's runner (pprun in a child process by default), recalibration of the time model
 * from the measured / predicted ratio, and the choice of the winner.
 *
 * Only where the cluster is this machine or the allocation pptune runs in (sp->alloc: a Slurm
 * job or an MPI host file, each trial a job step over the nodes it needs, alloc.c): on its
 * CPU cores the runtime's CPU backend runs; on
 * its GPUs the CUDA backend in bf16 (rank g on GPU g), and a candidate the runtime itself
 * cannot fit on a GPU (its activations are fp32, nothing is recomputed: the runtime's own
 * memory model, pp_tune_memory_runtime_on, on the schedule the search already generated) is
 * left predicted rather than run into an out-of-memory.
 * Under an allocation: a node lost in one trial is left out of the later ones (srun --exclude);
 * a reduced trial (fewer data-parallel replicas than d) gets its full-size DP all-reduce probed
 * across the allocation and put in place of the one it ran (alloc_probe.c), said in its where.
 * Choice: measured candidates that ran "ok" and fit come first, fastest measured first; the
 * others follow in their predicted order (a uniform calibration does not reorder them).
 * Not here: printing (the caller's on_trial callback), how a trial runs (trials.c).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "search_impl.h"

static void report(const pp_tune_search_params *sp, const pp_tune_trial_event *ev)
{
    if (sp->on_trial)
        sp->on_trial(sp->progress_ctx, ev);
}

/* On a device backend: the largest per-rank peak of the runtime's run of p on it, in bf16
 * where it computes in it (0 when unknown). */
static double runtime_peak_on_device(const pp_tune_model *m, const pp_tune_opts *o,
                                     const pp_tune_prediction *p, const pp_backend_row *be)
{
    const pp_sched *s = p->sched;
    if (!s || s->microbatches != p->cfg.N) /* huge N: the sched is the steady state's prefix */
        return 0;
    double peak = 0;
    pp_tune_rank_mem *mem = pp_calloc((size_t)s->ranks, sizeof *mem);
    pp_precision prec = pp_backend_row_has_precision(be, PP_PREC_BF16) ? PP_PREC_BF16 : PP_PREC_FP32;
    if (mem && pp_tune_memory_runtime_on(m, &p->cfg, s, o, pp_backend_kind(be), prec, mem) == PP_OK)
        for (int r = 0; r < s->ranks; r++)
            peak = mem[r].total > peak ? mem[r].total : peak;
    pp_err_clear();
    free(mem);
    return peak;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int measured_fit(const pp_tune_prediction *p)
{
    return !strcmp(p->trial_status, "ok") && p->measured_peak <= p->capacity;
}

/* Stable insertion sort (the list is the leaderboard: keep entries): measured-and-fitting
 * first by measured step time, the rest after them in their order. */
static void choose(pp_tune_result *r)
{
    for (int i = 1; i < r->n_best; i++) {
        pp_tune_prediction p = r->best[i];
        if (!measured_fit(&p))
            continue;
        int j = i;
        while (j > 0 &&
               (!measured_fit(&r->best[j - 1]) || r->best[j - 1].measured_step > p.measured_step)) {
            r->best[j] = r->best[j - 1];
            j--;
        }
        r->best[j] = p;
    }
}

/* A reduced trial (d_run < d replicas) ran its data-parallel all-reduce over d_run replicas at
 * most: the full-size one over d is timed across the allocation (the fullest stage's gradient
 * bytes) and put in its place in the measured step time; where says how. */
static void add_dp_allreduce(const pp_tune_search_params *sp, const pp_tune_alloc *a,
                             const pp_tune_prediction *p, double timeout_s,
                             pp_tune_trial_result *tr)
{
    size_t len = strlen(tr->where);
    char *w = tr->where + len;
    size_t left = sizeof tr->where - len;
    double bytes = 0;
    for (int r = 0; p->mem && r < p->cfg.p; r++)
        bytes = p->mem[r].grads > bytes ? p->mem[r].grads : bytes;
    pp_tune_dp_probe dp;
    pp_status st = !sp->prober ? PP_ERR(PP_ERR_UNSUPPORTED, "no probe program")
                   : bytes < 4 ? PP_ERR(PP_ERR_UNSUPPORTED, "gradient bytes unknown")
                               : pp_tune_dp_allreduce_probe(a, sp->prober, bytes, p->cfg.d,
                                                            tr->d_run, timeout_s, &dp);
    if (st != PP_OK) {
        snprintf(w, left, "; DP all-reduce over %d replicas not measured: %s", p->cfg.d,
                 pp_err_text());
        pp_err_clear();
        return;
    }
    double add = dp.full_s - dp.run_s;
    tr->step_time += add;
    char scaled[64];
    if (dp.ranks < p->cfg.d)
        snprintf(scaled, sizeof scaled, ", scaled to dp=%d by the ring formula 2(n-1)/n",
                 p->cfg.d);
    else
        snprintf(scaled, sizeof scaled, " at dp=%d", p->cfg.d);
    snprintf(w, left,
             "; DP all-reduce: probed over %d ranks%s (%d node%s, %.3g MB per rank, %.3g ms "
             "probed; %+.3g ms in the step)",
             dp.ranks, scaled, dp.nodes, dp.nodes == 1 ? "" : "s", dp.bytes / 1e6,
             dp.probed_s * 1e3, add * 1e3);
}

static void record(pp_tune_prediction *p, const pp_tune_trial_result *tr)
{
    snprintf(p->trial_status, sizeof p->trial_status, "%s", tr->status);
    p->measured_step = tr->step_time;
    p->measured_peak = tr->peak;
    snprintf(p->trial_detail, sizeof p->trial_detail, "%s", tr->detail);
    snprintf(p->trial_where, sizeof p->trial_where, "%s", tr->where);
    snprintf(p->trial_model, sizeof p->trial_model, "%s", tr->model);
    memcpy(p->measured_rank_peak, tr->peak_per_rank, sizeof p->measured_rank_peak);
}

/* The i-th leaderboard entry to trial: in order, except that the best candidate with t > 1
 * takes the k-th trial when it is not among the first k (the search kept it on the board for
 * this: the tensor-parallel communication is the least known part of the time model). */
static int trial_order(const pp_tune_result *r, int k, int i)
{
    int tp = -1;
    for (int j = 0; j < r->n_best && tp < 0; j++)
        if (r->best[j].cfg.t > 1)
            tp = j;
    if (tp < 0 || tp < k || k < 2 || i < k - 1)
        return i;
    if (i == k - 1)
        return tp;
    return i <= tp ? i - 1 : i;
}

pp_status pp_tune_search_trials(const pp_tune_search_params *sp, pp_tune_result *r)
{
    const pp_tune_model *m = sp->model;
    const pp_tune_hw *hw = sp->hw;
    int k = sp->trials;
    if (!hw->is_local || !m->pprun || k <= 0)
        return PP_OK;
    pp_tune_runner runner = sp->runner;
    char pprun[PATH_MAX];
    if (!runner.run) {
        if (pp_tune_pprun_find(pprun, sizeof pprun) != PP_OK) {
            pp_tune_trial_event ev = {.kind = PP_TUNE_TRIAL_NO_RUNNER, .message = pp_err_text()};
            report(sp, &ev);
            pp_err_clear();
            return PP_OK;
        }
        runner.run = pp_tune_runner_pprun;
        runner.ctx = pprun;
    }
    /* the allocation as the trials find it: a node lost in one is left out of the next */
    pp_tune_alloc live;
    if (sp->alloc)
        live = *sp->alloc;
    int n = 0;
    const pp_backend_row *be = pp_tune_hw_backend(hw);
    double ratios[64];
    int n_ratio = 0;
    int todo = k < r->n_best ? k : r->n_best;
    for (int i = 0; i < r->n_best && n < k; i++) {
        pp_tune_prediction *p = &r->best[trial_order(r, k, i)];
        char unrun[128], why[256];
        /* the trial's precision (trials.c): bf16 where its backend computes in it */
        int prec = pp_backend_row_has_precision(be, PP_PREC_BF16) ? PP_PREC_BF16 : PP_PREC_FP32;
        int no_cp = p->cfg.cp > 1 && !be->context_parallel;
        if (no_cp || pp_profile_pprun_unrun(&p->cfg, prec, unrun, sizeof unrun)) {
            /* its trial would measure another configuration, or be refused: not run, and said */
            if (no_cp)
                snprintf(why, sizeof why,
                         "pprun's %s backend has no context-parallel attention (cp %d): not "
                         "trialled",
                         be->name, p->cfg.cp);
            else
                snprintf(why, sizeof why, "pprun has no option for %s: not trialled", unrun);
            pp_tune_trial_event ev = {.kind = PP_TUNE_TRIAL_NOT_STARTED,
                                      .cfg = &p->cfg,
                                      .done = n,
                                      .total = todo,
                                      .message = why};
            report(sp, &ev);
            continue;
        }
        double need = be->device_memory ? runtime_peak_on_device(m, &r->opts, p, be) : 0;
        if (need > p->capacity) {
            pp_tune_trial_event ev = {.kind = PP_TUNE_TRIAL_SKIPPED,
                                      .cfg = &p->cfg,
                                      .done = n,
                                      .total = todo,
                                      .need = need,
                                      .capacity = p->capacity};
            report(sp, &ev);
            continue;
        }
        pp_tune_trial_event start = {
            .kind = PP_TUNE_TRIAL_START, .cfg = &p->cfg, .done = n, .total = todo};
        report(sp, &start);
        pp_tune_trial_params tp = {.model = m,
                                   .cfg = &p->cfg,
                                   .steps = sp->trial_steps > 0 ? sp->trial_steps : 5,
                                   .timeout_s = sp->trial_timeout_s > 0 ? sp->trial_timeout_s : 60,
                                   .backend = be,
                                   .alloc = sp->alloc ? &live : NULL};
        pp_tune_trial_result tr;
        memset(&tr, 0, sizeof tr);
        if (runner.run(runner.ctx, &tp, &tr) != PP_OK) {
            pp_tune_trial_event ev = {.kind = PP_TUNE_TRIAL_NOT_STARTED,
                                      .cfg = &p->cfg,
                                      .done = n,
                                      .total = todo,
                                      .message = pp_err_text()};
            report(sp, &ev);
            pp_err_clear();
            continue;
        }
        n++;
        /* the probe is a few all-reduces of one stage's gradients: 30 s at most (a step hung
         * by a fabric that lost a node then costs that, not a trial's limit) */
        if (!strcmp(tr.status, "ok") && sp->alloc && tr.d_run > 0 && tr.d_run < p->cfg.d)
            add_dp_allreduce(sp, &live, p, tp.timeout_s < 30 ? tp.timeout_s : 30, &tr);
        if (!strcmp(tr.status, "node-lost") && sp->alloc &&
            pp_tune_alloc_lose(&live, tr.lost_node)) {
            size_t len = strlen(tr.detail);
            snprintf(tr.detail + len, sizeof tr.detail - len, "; later trials exclude %s",
                     tr.lost_node);
        }
        record(p, &tr);
        if (!strcmp(tr.status, "ok") && p->step_time > 0 && n_ratio < 64)
            ratios[n_ratio++] = tr.step_time / p->step_time;
        pp_tune_trial_event done = {
            .kind = PP_TUNE_TRIAL_DONE, .cfg = &p->cfg, .done = n, .total = todo, .result = &tr};
        report(sp, &done);
    }
    pp_tune_trial_event end = {.kind = PP_TUNE_TRIAL_END, .done = todo, .total = todo};
    report(sp, &end);
    r->trialled = n;
    if (n_ratio > 0) {
        qsort(ratios, (size_t)n_ratio, sizeof *ratios, cmp_double);
        r->calibration = n_ratio % 2 ? ratios[n_ratio / 2]
                                     : 0.5 * (ratios[n_ratio / 2 - 1] + ratios[n_ratio / 2]);
    }
    choose(r);
    return PP_OK;
}
