/* report.c — `pptune ... --report FILE.html`: one self-contained HTML page of a search, for a
 * person or a CI artifact, holding what the terminal and --explain say: what was searched
 * (model, cluster, options), the leaderboard with predicted (and, after trials, measured)
 * figures, the winner's memory per rank against capacity (bars), its Gantt chart with the time
 * model's costs (schedules/' SVG), the best of each schedule with its time and memory parts
 * (and, for a schedule with none that fits, why), the memory-vs-step-time Pareto front as a
 * chart and a table, the rejections by reason, predicted against measured step time after
 * trials, and where each figure came from (probe, preset, trial).
 *
 * Laid out for a laptop screen (1,366 px wide, no horizontal overflow: SVGs scale to the width,
 * long cells wrap) and for print (A4 landscape, figures and rows kept whole). Figures in
 * common/fmt.c's units, as the terminal writes them. Inline CSS and SVG only: no script, no
 * network, no external font. Written atomically: built in memory, then pp_file_write_atomic.
 * Decides nothing; everything shown is the search result's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "tune_cli.h"


static void esc(FILE *fp, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '<': fputs("&lt;", fp); break;
        case '>': fputs("&gt;", fp); break;
        case '&': fputs("&amp;", fp); break;
        case '"': fputs("&quot;", fp); break;
        default: fputc(*s, fp);
        }
}

static const char *CSS =
    "body{font:14px/1.4 sans-serif;margin:16px auto;padding:0 16px;max-width:1300px;color:#222}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;font-size:12px;max-width:100%}"
    "td,th{padding:3px 5px;border:1px solid #ddd;text-align:right;white-space:nowrap}"
    "th{background:#f3f3f3;white-space:normal}td.l,th.l{text-align:left}td.w{white-space:normal}"
    "tr.win td{background:#eef6e8}tr.none td{color:#777}"
    "pre{background:#f7f7f7;padding:8px;white-space:pre-wrap;font-size:12px}.src{color:#666;"
    "font-size:12px}.sw{display:inline-block;width:11px;height:11px;margin:0 3px 0 10px}"
    "svg{max-width:100%;height:auto}"
    "@media (max-width:1200px){.bar{display:none}table{font-size:11px}td,th{padding:2px 3px}}"
    "@page{size:A4 landscape;margin:12mm}"
    "@media print{body{margin:0;padding:0;max-width:none;font-size:11px}table{font-size:10px}"
    "h2{break-after:avoid}tr,svg,pre{break-inside:avoid}.bar{display:none}}";

static void describe(FILE *fp, const pp_tune_model *m, const pp_tune_hw *hw,
                     const pp_tune_result *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem) {
        pp_cli_tune_describe(mem, m, hw, &r->opts, &r->force, r->global_batch);
        fclose(mem);
        fputs("<pre>", fp);
        esc(fp, text);
        fputs("</pre>\n", fp);
    }
    free(text);
    fprintf(fp, "<p class=src>Sources: cluster figures from <b>");
    esc(fp, hw->source);
    fprintf(fp, "</b>; step times and memory <b>predicted</b> by the time and memory models "
                "(simulated schedules)%s. Memory in GiB (2<sup>30</sup> bytes).</p>\n",
            r->trialled > 0 ? "; rows marked <b>trial</b> were measured by pprun on this machine"
                            : "; no trials ran");
}

static void th(FILE *fp, const char *const *names, int n)
{
    for (int k = 0; k < n; k++)
        fprintf(fp, "<th>%s</th>", names[k]);
}

/* The leaderboard as the terminal's: the configuration's columns with G and the split, the
 * predicted figures, and the measured ones only when trials ran (no empty columns). */
static void board(FILE *fp, const pp_tune_result *r)
{
    static const char *head[] = {"p", "v", "G", "b", "d", "t", "cp", "N"};
    static const char *figs[] = {"predicted step s", "predicted tokens/s", "MFU", "bubble",
                                 "predicted peak", "usable"};
    static const char *meas[] = {"measured step s", "measured tokens/s", "model error",
                                 "measured peak", "trial"};
    int trials = r->trialled > 0;
    fprintf(fp, "<h2>Leaderboard</h2>\n<table><tr><th>#</th><th class=l>schedule</th>");
    th(fp, head, 8);
    fprintf(fp, "<th class=l>split</th><th class=l>settings</th>");
    th(fp, figs, 6);
    if (trials) {
        th(fp, meas, 4);
        fprintf(fp, "<th class=l>trial</th>");
    }
    fprintf(fp, "</tr>\n");
    char a[32], g[12], sp[32], st[16], pk[16], cap[16], ax[64];
    for (int i = 0; i < r->n_best; i++) {
        const pp_tune_prediction *p = &r->best[i];
        const pp_config *c = &p->cfg;
        snprintf(g, sizeof g, c->G ? "%d" : "-", c->G);
        fprintf(fp, "<tr%s><td>%d</td><td class=l>", i ? "" : " class=win", i + 1);
        esc(fp, c->schedule);
        fprintf(fp, "</td><td>%d</td><td>%d</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td>"
                    "<td>%d</td><td>%d</td><td class=l>%s</td><td class=l>%s</td><td>%s</td>"
                    "<td>%s</td><td>%.1f %%</td><td>%.1f %%</td><td>%s</td><td>%s</td>",
                c->p, c->v, g, c->b, c->d, c->t, c->cp, c->N,
                pp_config_split_str(c, sp, sizeof sp), pp_tune_axes_str(c, ax, sizeof ax),
                pp_fmt_seconds(p->step_time, st, sizeof st),
                pp_fmt_grouped(p->tokens_per_s, a, sizeof a), 100 * p->mfu, 100 * p->bubble_ideal,
                pp_fmt_bytes(p->peak_mem, pk, sizeof pk), pp_fmt_bytes(p->capacity, cap, sizeof cap));
        pp_cli_measured_figures mf;
        if (!trials)
            ;
        else if (pp_cli_measured(p, &mf))
            fprintf(fp, "<td>%s</td><td>%s</td><td>%+.0f %%</td><td>%s</td><td class=l>trial</td>",
                    pp_fmt_seconds(mf.step, st, sizeof st),
                    pp_fmt_grouped(mf.tokens_per_s, a, sizeof a), 100 * mf.error,
                    pp_fmt_bytes(mf.peak, pk, sizeof pk));
        else {
            fprintf(fp, "<td>-</td><td>-</td><td>-</td><td>-</td><td class=l>");
            esc(fp, p->trial_status[0] ? p->trial_status : "not run");
            fprintf(fp, "</td>");
        }
        fprintf(fp, "</tr>\n");
    }
    fprintf(fp, "</table>\n<p class=src>p pipeline ranks, v chunks per rank, G interleaving "
                "group, b micro-batch size, d data-parallel replicas, t tensor-parallel size, cp "
                "context-parallel size, N micro-batches per step; split: even, uneven (Llama 3's: "
                "the first and last stage one layer fewer) or F/L (the first stage holds F layers, "
                "the last L); settings: recompute - none, sel selective, full every layer, full-k "
                "the first k layers of each stage; sp sequence parallel; z1 optimizer state "
                "sharded over d x cp, z2 and gradients; %s</p>\n",
            trials ? "measured: pprun's median step after warm-up and its fullest rank's peak; "
                     "error = (predicted - measured) / measured step"
                   : "every figure predicted (no trials ran)");
}

static const char *MEM_NAME[] = {"weights", "grads", "optimizer", "activations", "comm",
                                 "workspace"};
static const char *MEM_COLOUR[] = {"#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1",
                                   "#9c755f"};

/* Stacked bar per pipeline rank of #1, the usable capacity as a red line. */
static void memory_bars(FILE *fp, const pp_tune_prediction *w)
{
    if (!w->mem)
        return;
    int P = w->cfg.p, row = 22, left = 60, width = 760;
    double scale = width / (w->capacity > w->peak_mem ? w->capacity * 1.05 : w->peak_mem * 1.05);
    fprintf(fp, "<h2>Memory per pipeline rank of #1 (predicted) against capacity</h2>\n<p>");
    for (int k = 0; k < 6; k++)
        fprintf(fp, "<span class=sw style=\"background:%s\"></span>%s", MEM_COLOUR[k],
                MEM_NAME[k]);
    char cap[16];
    fprintf(fp, "<span class=sw style=\"background:#d00\"></span>usable capacity %s</p>\n",
            pp_fmt_bytes(w->capacity, cap, sizeof cap));
    fprintf(fp, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"memory per rank\">\n",
            left + width + 80, P * row + 10, left + width + 80, P * row + 10);
    for (int r = 0; r < P; r++) {
        const pp_tune_rank_mem *m = &w->mem[r];
        double part[6] = {m->weights, m->grads, m->optim, m->acts, m->comm, m->workspace};
        double x = left;
        char b[16];
        fprintf(fp, "<text x=\"4\" y=\"%d\" font-size=\"12\">rank %d</text>", r * row + 16, r);
        for (int k = 0; k < 6; k++) {
            fprintf(fp, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                        "<title>rank %d %s %s</title></rect>",
                    x, r * row + 4, part[k] * scale, row - 6, MEM_COLOUR[k], r, MEM_NAME[k],
                    pp_fmt_bytes(part[k], b, sizeof b));
            x += part[k] * scale;
        }
        fprintf(fp, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%s</text>\n", x + 4,
                r * row + 16, pp_fmt_bytes(m->total, b, sizeof b));
    }
    double cx = left + w->capacity * scale;
    fprintf(fp, "<line x1=\"%.1f\" y1=\"0\" x2=\"%.1f\" y2=\"%d\" stroke=\"#d00\" "
                "stroke-width=\"2\"/></svg>\n",
            cx, cx, P * row + 10);
}

/* The winner's schedule simulated with the time model's costs, drawn by schedules/. */
static void gantt(FILE *fp, const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_result *r)
{
    const pp_tune_prediction *w = &r->best[0];
    if (!w->sched)
        return;
    pp_tune_step_extra extra = {.dp_rank = NULL};
    pp_sim_result sim;
    if (pp_tune_simulate(m, hw, &w->cfg, &r->opts, w->sched, &extra, &sim) != PP_OK) {
        pp_err_clear();
        return;
    }
    char *svg = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&svg, &len);
    pp_sched_svg_opts so = {.unit = "s", .aggregate = -1};
    pp_status st = mem ? pp_sched_write_svg_opts(w->sched, &sim, &so, mem) : PP_ERR_NOMEM;
    if (mem)
        fclose(mem);
    pp_sim_result_fini(&sim);
    fprintf(fp, "<h2>Timeline of #1 with its predicted costs (seconds)</h2>\n");
    if (w->sched->microbatches != w->cfg.N) /* huge N: the steady state's longest prefix */
        fprintf(fp, "<p>The timeline of the longest prefix simulated, %d of the %d micro-batches: "
                    "the figures are extrapolated from its steady state.</p>\n",
                w->sched->microbatches, w->cfg.N);
    const char *start = svg ? strstr(svg, "<svg") : NULL;
    if (st == PP_OK && start)
        fprintf(fp, "%s\n", start);
    else
        pp_err_clear();
    free(svg);
}

/* A registry schedule with no fitting candidate: why (its commonest memory reason, else its
 * commonest rule), as --explain says it; nothing when it was not searched (no rejects). */
static void best_missing(FILE *fp, const pp_tune_result *r, const char *kind)
{
    for (int i = 0; i < r->n_sched_best; i++)
        if (!strcmp(r->sched_best[i].pred.cfg.schedule, kind))
            return;
    int n, at = 0;
    pp_cli_reason *g = pp_cli_reasons(r, kind, &n);
    while (at < n && g[at].example->stage != 1)
        at++;
    if (at == n)
        at = 0;
    if (n > 0) {
        fprintf(fp, "<tr class=none><td class=l>");
        esc(fp, kind);
        fprintf(fp, "</td><td class=\"l w\" colspan=16>no candidate %s (%ld like this): ",
                g[at].example->stage == 1 ? "fits" : "is valid", g[at].count);
        esc(fp, g[at].example->reason);
        fprintf(fp, "</td></tr>\n");
    }
    free(g);
}

static const char *PART_COLOUR[] = {"#4e79a7", "#76b7b2", "#bab0ac", "#edc948", "#e15759",
                                    "#b07aa1"};

/* One schedule's best: its step and parts in s, its fullest rank's memory and parts in the
 * total's unit (they add up), and the parts as a bar to the scale of the longest step. */
static void best_row(FILE *fp, const pp_tune_model *m, const pp_tune_hw *hw,
                     const pp_tune_result *r, const pp_tune_candidate *c, double longest)
{
    const pp_tune_prediction *p = &c->pred;
    char cb[160], s[16];
    fprintf(fp, "<tr><td class=l>");
    esc(fp, p->cfg.schedule);
    fprintf(fp, "</td><td class=\"l w\">");
    esc(fp, pp_config_str(&p->cfg, cb, sizeof cb));
    fprintf(fp, "</td><td>%s</td><td>%+.1f %%</td>", pp_fmt_seconds(p->step_time, s, sizeof s),
            100 * (p->step_time / r->best[0].step_time - 1));
    pp_tune_time_parts t;
    if (pp_tune_breakdown(m, hw, p, &r->opts, &t) != PP_OK) { /* said, not dropped */
        fprintf(fp, "<td class=\"l w\" colspan=6>no time breakdown: ");
        esc(fp, pp_err_text());
        fprintf(fp, "</td>");
        pp_err_clear();
        memset(&t, 0, sizeof t);
    } else {
        double part[6] = {t.compute, t.tp, t.bubble, t.p2p, t.dp, t.optimizer};
        for (int k = 0; k < 6; k++)
            fprintf(fp, "<td>%s</td>", pp_fmt_seconds(part[k], s, sizeof s));
    }
    const pp_tune_rank_mem *w = &c->worst;
    double u;
    const char *unit = pp_fmt_bytes_unit(w->total, &u);
    fprintf(fp, "<td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td>"
                "<td>%.1f %s</td>",
            w->weights / u, w->grads / u, w->optim / u, w->acts / u, (w->comm + w->workspace) / u,
            w->total / u, unit);
    double part[6] = {t.compute, t.tp, t.bubble, t.p2p, t.dp, t.optimizer}, x = 0;
    fprintf(fp, "<td class=\"l bar\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"150\" "
                "height=\"14\" viewBox=\"0 0 150 14\">");
    for (int k = 0; k < 6; k++) {
        double wpx = longest > 0 ? 150 * part[k] / longest : 0;
        fprintf(fp, "<rect x=\"%.1f\" y=\"1\" width=\"%.1f\" height=\"12\" fill=\"%s\"/>", x, wpx,
                PART_COLOUR[k]);
        x += wpx;
    }
    fprintf(fp, "</svg></td></tr>\n");
}

static void bests(FILE *fp, const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_result *r)
{
    if (r->n_sched_best == 0)
        return;
    fprintf(fp, "<h2>Best of each schedule (predicted)</h2>\n<table><tr><th class=l rowspan=2>"
                "schedule</th><th class=l rowspan=2>configuration</th><th rowspan=2>step s</th>"
                "<th rowspan=2>vs #1</th><th colspan=6>the step's parts, s</th><th colspan=6>"
                "its fullest rank's memory</th><th class=\"l bar\" rowspan=2>step's parts</th></tr>\n"
                "<tr><th>compute</th><th>tensor-parallel</th><th>bubble</th><th>p2p</th>"
                "<th>data-parallel</th><th>optimizer</th><th>weights</th><th>grads</th>"
                "<th>optimizer</th><th>activations</th><th>comm + work&shy;space</th>"
                "<th>total</th></tr>\n");
    double longest = 0;
    for (int i = 0; i < r->n_sched_best; i++)
        if (r->sched_best[i].pred.step_time > longest)
            longest = r->sched_best[i].pred.step_time;
    for (int i = 0; i < r->n_sched_best; i++)
        best_row(fp, m, hw, r, &r->sched_best[i], longest);
    int n;
    const pp_sched_desc *kinds = pp_sched_generators(&n);
    for (int k = 0; k < n; k++)
        best_missing(fp, r, kinds[k].name);
    fprintf(fp, "</table>\n<p>");
    static const char *name[] = {"compute", "tensor-parallel", "bubble", "p2p", "data-parallel",
                                 "optimizer"};
    for (int k = 0; k < 6; k++)
        fprintf(fp, "<span class=sw style=\"background:%s\"></span>%s", PART_COLOUR[k], name[k]);
    fprintf(fp, "</p>\n<p class=src>Parts: the busiest rank's compute and its "
                "tensor-parallel all-reduces, its idle time in the pipeline (bubble), exposed "
                "transfers and replica syncs (p2p), exposed gradient all-reduce, the optimizer "
                "step; they add up to the step time; bars in the same colours, to the same "
                "scale. Memory: the fullest rank's parts in the unit of its total, adding up to "
                "it.</p>\n");
}

/* The memory-vs-step-time Pareto front of the simulated candidates: a chart (memory on x,
 * step time on y, the front as a staircase, each point titled with its configuration) and the
 * table --explain prints. */
static void pareto(FILE *fp, const pp_tune_result *r)
{
    if (r->n_pareto == 0)
        return;
    double x0 = INFINITY, x1 = 0, y0 = INFINITY, y1 = 0;
    for (int i = 0; i < r->n_pareto; i++) {
        const pp_tune_prediction *p = &r->pareto[i].pred;
        x0 = fmin(x0, p->peak_mem), x1 = fmax(x1, p->peak_mem);
        y0 = fmin(y0, p->step_time), y1 = fmax(y1, p->step_time);
    }
    double xs = x1 > x0 ? x1 - x0 : x1 > 0 ? x1 : 1, ys = y1 > y0 ? y1 - y0 : y1 > 0 ? y1 : 1;
    const int W = 900, H = 320, L = 70, R = 20, T = 14, B = 40;
    double u;
    const char *unit = pp_fmt_bytes_unit(x1, &u);
    char a[16], b[16];
    fprintf(fp, "<h2>Memory against step time: the Pareto front of the %ld simulated "
                "candidates</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"Pareto front: "
                "memory against step time\">\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                "fill=\"none\" stroke=\"#999\"/>\n",
            r->simulated, W, H, W, H, L, T, W - L - R, H - T - B);
    fprintf(fp, "<text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text><text x=\"%d\" y=\"%d\" "
                "font-size=\"11\" text-anchor=\"end\">%s</text><text x=\"%d\" y=\"%d\" "
                "font-size=\"12\" text-anchor=\"middle\">peak memory of the fullest rank (%s)"
                "</text>\n",
            L, H - B + 14, pp_fmt_bytes(x0, a, sizeof a), W - R, H - B + 14,
            pp_fmt_bytes(x1, b, sizeof b), (L + W - R) / 2, H - 8, unit);
    fprintf(fp, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%s s</text>"
                "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%s s</text>"
                "<text x=\"12\" y=\"%d\" font-size=\"12\" transform=\"rotate(-90 12 %d)\" "
                "text-anchor=\"middle\">step time</text>\n",
            L - 4, T + 10, pp_fmt_seconds(y1, a, sizeof a), L - 4, H - B,
            pp_fmt_seconds(y0, b, sizeof b), (T + H - B) / 2, (T + H - B) / 2);
#define PX(v) (L + 10 + ((v) - x0) / xs * (W - L - R - 20))
#define PY(v) (H - B - 10 - ((v) - y0) / ys * (H - T - B - 20))
    fprintf(fp, "<polyline fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1.5\" points=\"");
    for (int i = 0; i < r->n_pareto; i++) {
        const pp_tune_prediction *p = &r->pareto[i].pred;
        if (i > 0) /* the staircase: memory grows first, then the step time falls */
            fprintf(fp, "%.1f,%.1f ", PX(p->peak_mem), PY(r->pareto[i - 1].pred.step_time));
        fprintf(fp, "%.1f,%.1f ", PX(p->peak_mem), PY(p->step_time));
    }
    fprintf(fp, "\"/>\n");
    char cb[160];
    for (int i = 0; i < r->n_pareto; i++) {
        const pp_tune_prediction *p = &r->pareto[i].pred;
        fprintf(fp, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#e15759\"><title>", PX(p->peak_mem),
                PY(p->step_time));
        esc(fp, pp_config_str(&p->cfg, cb, sizeof cb));
        fprintf(fp, ": %s, %s s</title></circle>\n", pp_fmt_bytes(p->peak_mem, a, sizeof a),
                pp_fmt_seconds(p->step_time, b, sizeof b));
    }
#undef PX
#undef PY
    fprintf(fp, "</svg>\n<table><tr><th>peak</th><th>step s</th><th>tokens/s</th>"
                "<th class=l>configuration</th></tr>\n");
    char tok[32];
    for (int i = 0; i < r->n_pareto; i++) {
        const pp_tune_prediction *p = &r->pareto[i].pred;
        fprintf(fp, "<tr><td>%s</td><td>%s</td><td>%s</td><td class=l>",
                pp_fmt_bytes(p->peak_mem, a, sizeof a), pp_fmt_seconds(p->step_time, b, sizeof b),
                pp_fmt_grouped(p->tokens_per_s, tok, sizeof tok));
        esc(fp, pp_config_str(&p->cfg, cb, sizeof cb));
        fprintf(fp, "</td></tr>\n");
    }
    fprintf(fp, "</table>\n<p class=src>Each point needs less memory than the next and is "
                "slower: what memory buys.</p>\n");
}

/* The rejections by reason, as --explain's summary (its first 15; the rest counted). */
static void reasons(FILE *fp, const pp_tune_result *r)
{
    int n;
    pp_cli_reason *g = pp_cli_reasons(r, NULL, &n);
    fprintf(fp, "<h2>Rejected candidates by reason (%ld in all)</h2>\n", r->n_rejects);
    if (n == 0) {
        fprintf(fp, "<p>None.</p>\n");
        free(g);
        return;
    }
    fprintf(fp, "<table><tr><th>count</th><th class=l>stage</th><th class=l>reason</th>"
                "<th class=l>for example</th></tr>\n");
    char cb[160];
    for (int k = 0; k < n && k < 15; k++) {
        fprintf(fp, "<tr><td>%ld</td><td class=l>%s</td><td class=\"l w\">", g[k].count,
                pp_cli_reason_stage(g[k].example->stage));
        esc(fp, g[k].example->reason);
        fprintf(fp, "</td><td class=\"l w\">");
        esc(fp, pp_config_str(&g[k].example->cfg, cb, sizeof cb));
        fprintf(fp, "</td></tr>\n");
    }
    fprintf(fp, "</table>\n");
    if (n > 15)
        fprintf(fp, "<p class=src>... %d more reasons (pptune ... --explain=all lists every "
                    "candidate).</p>\n",
                n - 15);
    free(g);
}

/* Predicted against measured step time of every trialled candidate, with the diagonal. */
static void calibration(FILE *fp, const pp_tune_result *r)
{
    if (r->trialled == 0)
        return;
    double hi = 0;
    for (int i = 0; i < r->n_best; i++) {
        pp_cli_measured_figures mf;
        if (pp_cli_measured(&r->best[i], &mf)) {
            hi = mf.step > hi ? mf.step : hi;
            hi = r->best[i].step_time > hi ? r->best[i].step_time : hi;
        }
    }
    if (hi <= 0)
        return;
    int S = 300;
    fprintf(fp, "<h2>Predicted against measured step time (trials)</h2>\n<p>Calibration "
                "(median measured / predicted): %.3g. Points on the diagonal are exact.</p>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">"
                "<rect x=\"40\" y=\"10\" width=\"%d\" height=\"%d\" fill=\"none\" "
                "stroke=\"#999\"/><line x1=\"40\" y1=\"%d\" x2=\"%d\" y2=\"10\" stroke=\"#ccc\"/>"
                "<text x=\"40\" y=\"%d\" font-size=\"11\">predicted s (0 .. %.3g)</text>"
                "<text x=\"2\" y=\"20\" font-size=\"11\">measured</text>\n",
            r->calibration, S + 60, S + 40, S, S, S + 10, S + 40, S + 28, hi * 1.1);
    double k = S / (hi * 1.1);
    for (int i = 0; i < r->n_best; i++) {
        pp_cli_measured_figures mf;
        if (pp_cli_measured(&r->best[i], &mf))
            fprintf(fp, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#e15759\"><title>#%d "
                        "predicted %.4g s, measured %.4g s</title></circle>\n",
                    40 + r->best[i].step_time * k, 10 + S - mf.step * k, i + 1,
                    r->best[i].step_time, mf.step);
    }
    fprintf(fp, "</svg>\n");
}

pp_status pp_cli_report_write(const char *path, const pp_tune_model *m, const pp_tune_hw *hw,
                              const pp_tune_result *r)
{
    char *html = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&html, &len);
    if (!fp)
        return PP_ERR(PP_ERR_NOMEM, "--report: out of memory");
    fprintf(fp, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width\"><title>pptune: ");
    esc(fp, m->name);
    fprintf(fp, "</title><style>%s</style></head><body>\n<h1>pptune: ", CSS);
    esc(fp, m->name);
    fprintf(fp, " on ");
    esc(fp, hw->name);
    fprintf(fp, "</h1>\n");
    describe(fp, m, hw, r);
    if (r->n_best > 0) {
        board(fp, r);
        memory_bars(fp, &r->best[0]);
        gantt(fp, m, hw, r);
        bests(fp, m, hw, r);
        pareto(fp, r);
        calibration(fp, r);
    } else {
        fprintf(fp, "<p>No candidate fits.</p>\n");
    }
    reasons(fp, r);
    fprintf(fp, "</body></html>\n");
    if (fclose(fp) != 0 || !html) {
        free(html);
        return PP_ERR(PP_ERR_NOMEM, "--report: out of memory");
    }
    pp_status st = pp_file_write_atomic(path, html, len);
    free(html);
    return st;
}
