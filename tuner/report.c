/* report.c — `pptune ... --report FILE.html`: one self-contained HTML page of a search, for a
 * person or a CI artifact: what was searched (model, cluster, options), the leaderboard with
 * predicted and measured figures, the winner's memory per rank against capacity (bars), its
 * Gantt chart with the time model's costs (schedules/' SVG), the best of each schedule side by
 * side with its time breakdown, predicted against measured step time after trials, and where
 * each figure came from (probe, preset, trial).
 *
 * Inline CSS and SVG only: no script, no network, no external font. Written atomically: built in
 * memory, then pp_file_write_atomic. Decides nothing; everything shown is the search result's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune_cli.h"

#define GIB 1073741824.0

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
    "body{font:14px/1.4 sans-serif;margin:24px;color:#222}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;font-size:12px}td,th{padding:3px 7px;border:1px solid #ddd;"
    "text-align:right;white-space:nowrap}th{background:#f3f3f3}td.l,th.l{text-align:left}tr.win td{background:#eef6e8}"
    "pre{background:#f7f7f7;padding:8px;white-space:pre-wrap;font-size:12px}.src{color:#666;"
    "font-size:12px}.sw{display:inline-block;width:11px;height:11px;margin:0 3px 0 10px}";

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

static void board(FILE *fp, const pp_tune_result *r)
{
    fprintf(fp, "<h2>Leaderboard</h2>\n<table><tr><th>#</th><th class=l>schedule</th><th>p</th>"
                "<th>v</th><th>G</th><th>b</th><th>d</th><th>t</th><th>N</th><th>predicted "
                "step s</th><th>predicted tokens/s</th><th>MFU</th><th>bubble</th><th>predicted "
                "peak GiB</th><th>usable GiB</th><th>measured step s</th><th>measured "
                "tokens/s</th><th>model error</th><th>measured peak GiB</th><th "
                "class=l>source</th></tr>\n");
    char a[32], b[32];
    for (int i = 0; i < r->n_best; i++) {
        const pp_tune_prediction *p = &r->best[i];
        const pp_config *c = &p->cfg;
        pp_cli_measured_figures mf;
        int meas = pp_cli_measured(p, &mf);
        fprintf(fp, "<tr%s><td>%d</td><td class=l>%s</td><td>%d</td><td>%d</td><td>%d</td>"
                    "<td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%.4g</td><td>%s</td>"
                    "<td>%.1f %%</td><td>%.1f %%</td><td>%.3g</td><td>%.3g</td>",
                i ? "" : " class=win", i + 1, c->schedule, c->p, c->v, c->G, c->b, c->d, c->t, c->N,
                p->step_time, pp_fmt_grouped(p->tokens_per_s, a, sizeof a), 100 * p->mfu,
                100 * p->bubble_ideal, p->peak_mem / GIB, p->capacity / GIB);
        if (meas)
            fprintf(fp, "<td>%.4g</td><td>%s</td><td>%+.0f %%</td><td>%.3g</td><td "
                        "class=l>trial</td></tr>\n",
                    mf.step, pp_fmt_grouped(mf.tokens_per_s, b, sizeof b), 100 * mf.error,
                    mf.peak / GIB);
        else
            fprintf(fp, "<td>-</td><td>-</td><td>-</td><td>-</td><td class=l>predicted%s%s</td>"
                        "</tr>\n",
                    p->trial_status[0] ? "; trial: " : "", p->trial_status);
    }
    fprintf(fp, "</table>\n");
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
    fprintf(fp, "<span class=sw style=\"background:#d00\"></span>usable capacity %.1f GiB</p>\n",
            w->capacity / GIB);
    fprintf(fp, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "role=\"img\" aria-label=\"memory per rank\">\n",
            left + width + 80, P * row + 10);
    for (int r = 0; r < P; r++) {
        const pp_tune_rank_mem *m = &w->mem[r];
        double part[6] = {m->weights, m->grads, m->optim, m->acts, m->comm, m->workspace};
        double x = left;
        fprintf(fp, "<text x=\"4\" y=\"%d\" font-size=\"12\">rank %d</text>", r * row + 16, r);
        for (int k = 0; k < 6; k++) {
            fprintf(fp, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                        "<title>rank %d %s %.2f GiB</title></rect>",
                    x, r * row + 4, part[k] * scale, row - 6, MEM_COLOUR[k], r, MEM_NAME[k],
                    part[k] / GIB);
            x += part[k] * scale;
        }
        fprintf(fp, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%.1f GiB</text>\n", x + 4,
                r * row + 16, m->total / GIB);
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

static void bests(FILE *fp, const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_result *r)
{
    if (r->n_sched_best == 0)
        return;
    fprintf(fp, "<h2>Best of each schedule (predicted)</h2>\n<table><tr><th class=l>schedule</th>"
                "<th class=l>configuration</th><th>step s</th><th>vs #1</th><th>compute</th>"
                "<th>tensor-parallel</th><th>bubble</th><th>p2p</th><th>data-parallel</th>"
                "<th>optimizer</th><th>fullest rank GiB</th><th class=l>step's parts</th></tr>\n");
    static const char *col[] = {"#4e79a7", "#76b7b2", "#bab0ac", "#edc948", "#e15759", "#b07aa1"};
    double longest = 0;
    for (int i = 0; i < r->n_sched_best; i++)
        if (r->sched_best[i].pred.step_time > longest)
            longest = r->sched_best[i].pred.step_time;
    char cb[160];
    for (int i = 0; i < r->n_sched_best; i++) {
        const pp_tune_prediction *p = &r->sched_best[i].pred;
        pp_tune_time_parts t;
        if (pp_tune_breakdown(m, hw, p, &r->opts, &t) != PP_OK) {
            pp_err_clear();
            continue;
        }
        double part[6] = {t.compute, t.tp, t.bubble, t.p2p, t.dp, t.optimizer};
        fprintf(fp, "<tr><td class=l>%s</td><td class=l>%s</td><td>%.4g</td><td>%+.1f %%</td>",
                p->cfg.schedule, pp_config_str(&p->cfg, cb, sizeof cb), p->step_time,
                100 * (p->step_time / r->best[0].step_time - 1));
        for (int k = 0; k < 6; k++)
            fprintf(fp, "<td>%.3g</td>", part[k]);
        fprintf(fp, "<td>%.3g</td><td class=l><svg xmlns=\"http://www.w3.org/2000/svg\" "
                    "width=\"300\" height=\"14\">",
                p->peak_mem / GIB);
        double x = 0;
        for (int k = 0; k < 6; k++) {
            double wpx = longest > 0 ? 300 * part[k] / longest : 0;
            fprintf(fp, "<rect x=\"%.1f\" y=\"1\" width=\"%.1f\" height=\"12\" fill=\"%s\"/>", x,
                    wpx, col[k]);
            x += wpx;
        }
        fprintf(fp, "</svg></td></tr>\n");
    }
    fprintf(fp, "</table>\n<p>");
    static const char *name[] = {"compute", "tensor-parallel", "bubble", "p2p", "data-parallel",
                                 "optimizer"};
    for (int k = 0; k < 6; k++)
        fprintf(fp, "<span class=sw style=\"background:%s\"></span>%s", col[k], name[k]);
    fprintf(fp, "</p>\n<p class=src>Parts: the busiest rank's compute and its "
                "tensor-parallel all-reduces, its idle time in the pipeline (bubble), exposed "
                "transfers and replica syncs (p2p), exposed gradient all-reduce, the optimizer "
                "step; bars in the same colours, to the same scale.</p>\n");
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
                "<title>pptune: %s</title><style>%s</style></head><body>\n<h1>pptune: ",
            m->name, CSS);
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
        calibration(fp, r);
    } else {
        fprintf(fp, "<p>No candidate fits.</p>\n");
    }
    fprintf(fp, "</body></html>\n");
    if (fclose(fp) != 0 || !html) {
        free(html);
        return PP_ERR(PP_ERR_NOMEM, "--report: out of memory");
    }
    pp_status st = pp_file_write_atomic(path, html, len);
    free(html);
    return st;
}
