/* tune_trials_cli.c — the program side of trials: finds pprun, runs the top candidates through
 * pp_tune_trial (trials.c) with a progress bar, recalibrates the time model from the measured /
 * predicted ratio and puts the fastest measured candidate that fits first.
 * Only where the cluster is this machine: on its CPU cores the runtime's CPU backend runs; on
 * its GPUs the CUDA backend in bf16 (rank g on GPU g), and a candidate the runtime itself
 * cannot fit on a GPU (its activations are fp32, nothing is recomputed: the runtime's own
 * memory model, pp_tune_memory_runtime_on) is left predicted rather than run into an
 * out-of-memory. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tune_cli.h"

/* $PPTUNE_PPRUN, the build tree (tuner/pptune -> runtime/pprun), or pprun beside pptune. */
static int find_pprun(char *path, size_t n) /* n = PATH_MAX */
{
    const char *env = getenv("PPTUNE_PPRUN");
    if (env && *env) {
        snprintf(path, n, "%s", env);
        return access(path, X_OK) == 0;
    }
    char exe[PATH_MAX - 32]; /* room for the suffixes below */
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return 0;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    snprintf(path, n, "%s/../runtime/pprun", exe);
    if (access(path, X_OK) == 0)
        return 1;
    snprintf(path, n, "%s/pprun", exe);
    return access(path, X_OK) == 0;
}

static void bar(int done, int total, const char *what)
{
    int width = 30, fill = total ? width * done / total : width;
    fprintf(stderr, "\rtrials    [%.*s%*s] %d/%d %-40s", fill, "##############################",
            width - fill, "", done, total, what);
    if (done == total)
        fprintf(stderr, "\n");
    fflush(stderr);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Measured-and-fitting first (by measured time), then the rest by calibrated prediction. */
static double rank_key(const pp_tune_prediction *p, double cal)
{
    if (!strcmp(p->trial_status, "ok") && p->measured_peak <= p->capacity)
        return p->measured_step;
    return 1e30 + p->step_time * (cal > 0 ? cal : 1.0);
}

/* On GPUs: the largest per-rank peak of the runtime's CUDA bf16 run of c (0 when unknown). */
static double runtime_peak_on_gpu(const pp_tune_model *m, const pp_tune_config *c)
{
    pp_sched_params sp;
    pp_tune_sched_params(m, c, &sp);
    pp_sched *s;
    if (pp_sched_generate(c->kind, &sp, &s) != PP_OK)
        return 0;
    double peak = 0;
    pp_tune_rank_mem *mem = calloc((size_t)s->ranks, sizeof *mem);
    if (mem && pp_tune_memory_runtime_on(m, c, s, PP_TUNE_RT_CUDA_BF16, mem) == PP_OK)
        for (int r = 0; r < s->ranks; r++)
            peak = mem[r].total > peak ? mem[r].total : peak;
    free(mem);
    pp_sched_destroy(s);
    return peak;
}

static double g_cal;
static int by_key(const void *a, const void *b)
{
    double x = rank_key(a, g_cal), y = rank_key(b, g_cal);
    return (x > y) - (x < y);
}

int pp_cli_run_trials(const pp_tune_model *m, const pp_tune_hw *hw, pp_tune_result *r, int k,
                      int steps, double timeout_s, int progress)
{
    char pprun[PATH_MAX];
    if (!find_pprun(pprun, sizeof pprun)) {
        fprintf(stderr, "pptune search: cannot find pprun for trials (set PPTUNE_PPRUN); "
                        "figures stay predicted\n");
        return -1;
    }
    int n = 0, cuda = !hw->cpu_devices;
    double ratios[64];
    int n_ratio = 0;
    int todo = k < r->n_best ? k : r->n_best;
    for (int i = 0; i < r->n_best && n < k; i++) {
        pp_tune_prediction *p = &r->best[i];
        if (p->cfg.t != 1)
            continue;
        char cb[160];
        double need = cuda ? runtime_peak_on_gpu(m, &p->cfg) : 0;
        if (need > p->capacity) {
            fprintf(stderr,
                    "%spptune search: not trialled: %s: the bundled runtime needs %.1f GiB per GPU "
                    "(fp32 activations, no recompute), %.1f GiB usable\n",
                    progress ? "\n" : "", pp_tune_config_str(&p->cfg, cb, sizeof cb),
                    need / 1073741824.0, p->capacity / 1073741824.0);
            continue;
        }
        if (progress)
            bar(n, todo, pp_tune_config_str(&p->cfg, cb, sizeof cb));
        pp_tune_trial_params tp = {.model = m, .cfg = &p->cfg, .pprun = pprun, .steps = steps,
                                   .timeout_s = timeout_s, .cuda = cuda};
        pp_tune_trial_result tr;
        if (pp_tune_trial(&tp, &tr) != PP_OK) {
            fprintf(stderr, "pptune search: trial not started: %s\n", pp_err_text());
            continue;
        }
        n++;
        snprintf(p->trial_status, sizeof p->trial_status, "%s", tr.status);
        p->measured_step = tr.step_time;
        p->measured_peak = tr.peak;
        snprintf(p->trial_detail, sizeof p->trial_detail, "%s", tr.detail);
        memcpy(p->measured_rank_peak, tr.peak_per_rank, sizeof p->measured_rank_peak);
        if (!strcmp(tr.status, "ok") && p->step_time > 0 && n_ratio < 64)
            ratios[n_ratio++] = tr.step_time / p->step_time;
        else if (strcmp(tr.status, "ok") != 0)
            fprintf(stderr, "\npptune search: trial %s: %s (%s), the search goes on\n", cb,
                    tr.status, tr.detail);
    }
    if (progress)
        bar(todo, todo, "done");
    r->trialled = n;
    if (n_ratio > 0) {
        qsort(ratios, (size_t)n_ratio, sizeof *ratios, cmp_double);
        r->calibration = n_ratio % 2 ? ratios[n_ratio / 2]
                                     : 0.5 * (ratios[n_ratio / 2 - 1] + ratios[n_ratio / 2]);
    }
    g_cal = r->calibration;
    qsort(r->best, (size_t)r->n_best, sizeof *r->best, by_key);
    return n;
}
