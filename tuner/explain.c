/* explain.c — `--explain`: the questions a user asks of a search, answered from its result.
 *   - why were candidates rejected? counts by reason (numbers in a reason do not split it);
 *   - why not schedule X? the best candidate of each schedule searched, where its step time goes
 *     (pp_tune_breakdown) and where its memory goes, against #1, and what it lost by;
 *   - what does memory buy? the memory-vs-throughput Pareto front of the simulated candidates.
 * `--explain=all` adds every rejected candidate with its reason (thousands of lines). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "tune_cli.h"


static const char *STAGE[] = {"rule", "memory", "outranked", "bound"};

typedef struct {
    char key[200]; /* the reason with its numbers as '#' */
    long count, example; /* rejects index of the first */
    int stage;
} group;

/* The configuration and its settings: "zbv p=2 v=2 b=2 d=128 t=1 N=4 even [full-4,sp,z1]". */
static char *config_str(const pp_config *c, char *buf, size_t n)
{
    char set[48];
    size_t len = strlen(pp_config_str(c, buf, n));
    snprintf(buf + len, n - len, " [%s]", pp_tune_axes_str(c, set, sizeof set));
    return buf;
}

static void reason_key(const char *reason, char *key, size_t n)
{
    size_t o = 0;
    for (const char *p = reason; *p && o + 1 < n; p++) {
        if ((*p >= '0' && *p <= '9') || ((*p == '.' || *p == 'e' || *p == '+' || *p == '-') &&
                                         o > 0 && key[o - 1] == '#')) {
            if (o == 0 || key[o - 1] != '#')
                key[o++] = '#';
            continue;
        }
        key[o++] = *p;
    }
    key[o] = '\0';
}

static int by_count(const void *a, const void *b)
{
    long x = ((const group *)a)->count, y = ((const group *)b)->count;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Groups r's rejects (kind: only those of that schedule; NULL all); *n groups, sorted by count
 * (caller frees). */
static group *group_rejects(const pp_tune_result *r, const char *kind, int *n)
{
    group *g = NULL;
    int ng = 0, cap = 0;
    char key[200];
    for (long i = 0; i < r->n_rejects; i++) {
        const pp_tune_reject *j = &r->rejects[i];
        if (kind && strcmp(j->cfg.schedule, kind) != 0)
            continue;
        char text[200];
        reason_key(pp_tune_reject_reason(j, text, sizeof text), key, sizeof key);
        int k = 0;
        while (k < ng && (g[k].stage != j->stage || strcmp(g[k].key, key) != 0))
            k++;
        if (k == ng) {
            size_t c = pp_grow(&g, (size_t)ng, (size_t)cap, sizeof *g, 32);
            if (!c)
                break;
            cap = (int)c;
            snprintf(g[ng].key, sizeof g[ng].key, "%s", key);
            g[ng].count = 0, g[ng].example = i, g[ng].stage = j->stage;
            ng++;
        }
        g[k].count++;
    }
    if (ng > 1)
        qsort(g, (size_t)ng, sizeof *g, by_count);
    *n = ng;
    return g;
}

pp_cli_reason *pp_cli_reasons(const pp_tune_result *r, const char *kind, int *n)
{
    int ng;
    group *g = group_rejects(r, kind, &ng);
    pp_cli_reason *out = g ? calloc((size_t)ng, sizeof *out) : NULL;
    for (int k = 0; out && k < ng; k++)
        out[k] = (pp_cli_reason){.count = g[k].count, .example = &r->rejects[g[k].example]};
    *n = out ? ng : 0;
    free(g);
    return out;
}

const char *pp_cli_reason_stage(int stage)
{
    return stage >= 0 && stage < 4 ? STAGE[stage] : "?";
}

void pp_cli_reasons_print(FILE *fp, const pp_tune_result *r, int max)
{
    int ng;
    group *g = group_rejects(r, NULL, &ng);
    char cb[160], text[200];
    for (int k = 0; k < ng && k < max; k++) {
        const pp_tune_reject *j = &r->rejects[g[k].example];
        fprintf(fp, "  %6ld  %-9s %s (e.g. %s)\n", g[k].count, STAGE[j->stage],
                pp_tune_reject_reason(j, text, sizeof text),
                config_str(&j->cfg, cb, sizeof cb));
    }
    if (ng > max)
        fprintf(fp, "  ... %d more reasons (--explain=all lists every candidate)\n", ng - max);
    free(g);
}

static void print_summary(FILE *fp, const pp_tune_result *r)
{
    fprintf(fp, "\nrejected candidates by reason (%ld in all; each line shows one example):\n",
            r->n_rejects);
    pp_cli_reasons_print(fp, r, 15);
}

static const char *PART[] = {"compute", "tensor-parallel", "bubble", "p2p", "data-parallel",
                             "optimizer"};

static void parts_array(const pp_tune_time_parts *t, double a[6])
{
    a[0] = t->compute, a[1] = t->tp, a[2] = t->bubble, a[3] = t->p2p, a[4] = t->dp,
    a[5] = t->optimizer;
}

/* "loses 0.12 s (+9 %) to #1: bubble +0.10 s, p2p +0.02 s" */
static void why_lost(FILE *fp, const pp_tune_candidate *c, const double mine[6],
                     const pp_tune_prediction *win, const double best[6])
{
    double d = c->pred.step_time - win->step_time;
    if (d <= 0) {
        fprintf(fp, "      = #1's schedule\n");
        return;
    }
    char s[16], b[16];
    fprintf(fp, "      loses %s s (%+.1f %%) to #1:", pp_fmt_seconds(d, s, sizeof s),
            100 * d / win->step_time);
    int order[6] = {0, 1, 2, 3, 4, 5}, shown = 0;
    for (int i = 0; i < 6; i++) /* largest difference first */
        for (int k = i + 1; k < 6; k++)
            if (mine[order[k]] - best[order[k]] > mine[order[i]] - best[order[i]]) {
                int t = order[i];
                order[i] = order[k], order[k] = t;
            }
    for (int i = 0; i < 6; i++) {
        double x = mine[order[i]] - best[order[i]];
        if (x > 0.005 * win->step_time)
            fprintf(fp, "%s %s +%s s", shown++ ? "," : "", PART[order[i]],
                    pp_fmt_seconds(x, s, sizeof s));
    }
    if (c->pred.peak_mem > win->peak_mem)
        fprintf(fp, "%s and %s more on its fullest rank", shown ? ";" : "",
                pp_fmt_bytes(c->pred.peak_mem - win->peak_mem, b, sizeof b));
    fprintf(fp, "\n");
}

/* The step time and its parts in seconds, its fullest rank's memory and its parts in the
 * total's unit (so each row's parts add up to its figures, to the last digit's rounding). */
static void best_row(FILE *fp, const char *label, const pp_tune_prediction *p,
                     const pp_tune_rank_mem *w, const double t[6])
{
    char cb[160], s[7][16];
    fprintf(fp, "  %-11s %-44s %7s", label, config_str(&p->cfg, cb, sizeof cb),
            pp_fmt_seconds(p->step_time, s[0], 16));
    for (int k = 0; k < 6; k++)
        fprintf(fp, " %7s", pp_fmt_seconds(t[k], s[k + 1], 16));
    double u;
    const char *unit = pp_fmt_bytes_unit(w->total, &u);
    fprintf(fp, " | %6.1f %6.1f %6.1f %6.1f %6.1f %6.1f %s\n", w->weights / u, w->grads / u,
            w->optim / u, w->acts / u, (w->comm + w->workspace) / u, w->total / u, unit);
}

/* Schedules of the registry that were searched but have no fitting candidate. */
static void print_without_best(FILE *fp, const pp_tune_result *r)
{
    int n_kinds;
    const pp_sched_desc *kinds = pp_sched_generators(&n_kinds);
    char text[200];
    for (int k = 0; k < n_kinds; k++) {
        int has = 0;
        for (int i = 0; i < r->n_sched_best; i++)
            has |= !strcmp(r->sched_best[i].pred.cfg.schedule, kinds[k].name);
        int ng;
        group *g = has ? NULL : group_rejects(r, kinds[k].name, &ng);
        int at = 0; /* the commonest memory reason, else the commonest rule */
        while (g && at < ng && r->rejects[g[at].example].stage != 1)
            at++;
        if (g && at == ng)
            at = 0;
        if (g && ng > 0)
            fprintf(fp, "  %-11s no candidate %s (%ld like this): %s\n", kinds[k].name,
                    r->rejects[g[at].example].stage == 1 ? "fits" : "is valid", g[at].count,
                    pp_tune_reject_reason(&r->rejects[g[at].example], text, sizeof text));
        free(g);
    }
}

static void print_schedule_bests(FILE *fp, const pp_tune_model *m, const pp_tune_hw *hw,
                                 const pp_tune_result *r)
{
    if (r->n_best == 0)
        return;
    const pp_tune_prediction *win = &r->best[0];
    pp_tune_time_parts tw;
    if (pp_tune_breakdown(m, hw, win, &r->opts, &tw) != PP_OK) {
        fprintf(fp, "\n(no time breakdown: %s)\n", pp_err_text());
        pp_err_clear();
        return;
    }
    double best[6];
    parts_array(&tw, best);
    fprintf(fp, "\nbest candidate of each schedule against #1 (predicted; the step's parts in s "
                "add up to it;\nthe fullest rank's memory and its parts, in the unit its row "
                "ends with):\n"
                "  %-11s %-44s %7s %7s %7s %7s %7s %7s %7s | %6s %6s %6s %6s %6s %6s\n",
            "", "configuration", "step s", "compute", "tensor", "bubble", "p2p", "data-p",
            "optim", "weight", "grads", "optim", "acts", "comm+ws", "total");
    best_row(fp, "#1", win, &win->mem[win->peak_rank], best);
    for (int i = 0; i < r->n_sched_best; i++) {
        const pp_tune_candidate *c = &r->sched_best[i];
        pp_tune_time_parts tc;
        if (pp_tune_breakdown(m, hw, &c->pred, &r->opts, &tc) != PP_OK) {
            fprintf(fp, "  %-11s (no breakdown: %s)\n", c->pred.cfg.schedule, pp_err_text());
            pp_err_clear();
            continue;
        }
        double mine[6];
        parts_array(&tc, mine);
        best_row(fp, c->pred.cfg.schedule, &c->pred, &c->worst, mine);
        why_lost(fp, c, mine, win, best);
    }
    print_without_best(fp, r);
    pp_cli_wrapped(fp, 3,
                   "  (compute and tensor: the busiest rank's layers and their tensor-parallel "
                   "all-reduces; bubble: its idle time in the pipeline; p2p: exposed transfers "
                   "and replica syncs; data-p: exposed gradient all-reduce; optim: the Adam "
                   "step)");
}

static void print_pareto(FILE *fp, const pp_tune_result *r)
{
    if (r->n_pareto == 0)
        return;
    fprintf(fp, "\nmemory vs throughput, the Pareto front of the %ld simulated candidates (each "
                "line needs less memory\nthan the next and is slower):\n"
                "       peak   step s     tokens/s  configuration\n",
            r->simulated);
    char cb[160], tok[32], pk[16], st[16];
    for (int i = 0; i < r->n_pareto; i++) {
        const pp_tune_prediction *p = &r->pareto[i].pred;
        fprintf(fp, "  %9s %8s %12s  %s\n", pp_fmt_bytes(p->peak_mem, pk, sizeof pk),
                pp_fmt_seconds(p->step_time, st, sizeof st),
                pp_fmt_grouped(p->tokens_per_s, tok, sizeof tok),
                config_str(&p->cfg, cb, sizeof cb));
    }
}

static void print_all(FILE *fp, const pp_tune_result *r)
{
    fprintf(fp, "\nevery rejected candidate (%ld):\n", r->n_rejects);
    char cb[160], text[200];
    for (long i = 0; i < r->n_rejects; i++) {
        const pp_tune_reject *j = &r->rejects[i];
        fprintf(fp, "  [%-9s] %-58s %s\n", STAGE[j->stage],
                config_str(&j->cfg, cb, sizeof cb),
                pp_tune_reject_reason(j, text, sizeof text));
    }
}

void pp_cli_step_parts_print(FILE *fp, const pp_tune_time_parts *t)
{
    double a[6];
    char s[6][16];
    parts_array(t, a);
    for (int k = 0; k < 6; k++)
        pp_fmt_seconds(a[k], s[k], 16);
    pp_cli_wrapped(fp, 15,
                   "\nstep's parts   compute %s s, tensor-parallel %s, bubble %s, p2p %s, "
                   "data-parallel %s, optimizer %s (the busiest rank; they add up to the step)",
                   s[0], s[1], s[2], s[3], s[4], s[5]);
}

void pp_cli_explain_print(FILE *fp, const pp_tune_model *m, const pp_tune_hw *hw,
                          const pp_tune_result *r, int all)
{
    print_summary(fp, r);
    print_schedule_bests(fp, m, hw, r);
    print_pareto(fp, r);
    if (all)
        print_all(fp, r);
    else
        fprintf(fp, "\n(--explain=all lists every rejected candidate with its reason)\n");
}
