/* test_tuner_output.c — what a person reads from a search (issue 17): the leaderboard's
 * columns, --explain's answers (rejections by reason, each schedule's best with its breakdown,
 * the Pareto front), the per-schedule bests the search library keeps, and the streams and exit
 * codes the README promises. Runs the built pptune where the output is the point. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_test_run.h"
#include "pp_tune.h"

#define PPTUNE PP_BINARY_DIR "/tuner/pptune"

static pp_tune_result *search(const char *model, int nodes, int keep, const char *schedules)
{
    static pp_tune_model m;
    static pp_tune_hw hw;
    cr_assert_eq(pp_tune_model_preset(model, &m), PP_OK);
    cr_assert_eq(pp_tune_hw_preset("dgx-h100", nodes, &hw), PP_OK, "%s", pp_err_msg());
    pp_tune_search_params sp = {.model = &m, .hw = &hw, .allow_tp = 1, .keep = keep,
                                .schedules = schedules};
    pp_tune_opts_default(&sp.opts);
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    return r;
}

static const pp_tune_candidate *sched_best(const pp_tune_result *r, const char *kind)
{
    for (int i = 0; i < r->n_sched_best; i++)
        if (!strcmp(r->sched_best[i].pred.cfg.schedule, kind))
            return &r->sched_best[i];
    return NULL;
}

/* The best BitPipe of the main job is simulated although it never makes the leaderboard, and
 * it is exactly the best a BitPipe-only search finds (the bound skips nothing that could win
 * its own schedule). */
Test(tuner_output, every_schedule_keeps_its_exact_best)
{
    pp_tune_result *all = search("gpt-13b", 32, 2, NULL);
    const pp_tune_candidate *bp = sched_best(all, "bitpipe");
    cr_assert(bp, "no bitpipe best among %d", all->n_sched_best);
    for (int i = 0; i < all->n_best; i++)
        cr_assert_str_neq(all->best[i].cfg.schedule, "bitpipe", "the test needs bitpipe to lose");
    pp_tune_result *only = search("gpt-13b", 32, 1, "bitpipe");
    cr_assert_eq(only->n_best, 1);
    cr_assert_float_eq(bp->pred.step_time, only->best[0].step_time, 1e-12);
    cr_assert_str_eq(bp->pred.cfg.schedule, "bitpipe");
    cr_assert_float_eq(bp->worst.total, bp->pred.peak_mem, 1.0, "worst rank's memory is kept");
    /* the winner's schedule's best is the winner */
    const pp_tune_candidate *w = sched_best(all, all->best[0].cfg.schedule);
    cr_assert(w);
    cr_assert_float_eq(w->pred.step_time, all->best[0].step_time, 1e-12);
    pp_tune_result_destroy(only);
    pp_tune_result_destroy(all);
}

Test(tuner_output, pareto_front_is_sorted_and_undominated)
{
    pp_tune_result *r = search("gpt-13b", 32, 10, NULL);
    cr_assert(r->n_pareto >= 2, "%d", r->n_pareto);
    for (int i = 1; i < r->n_pareto; i++) {
        cr_assert(r->pareto[i].pred.peak_mem > r->pareto[i - 1].pred.peak_mem);
        cr_assert(r->pareto[i].pred.step_time < r->pareto[i - 1].pred.step_time,
                  "more memory must buy speed on the front");
    }
    /* the fastest point is the leaderboard's #1; nothing kept beats any front point in both */
    cr_assert_float_eq(r->pareto[r->n_pareto - 1].pred.step_time, r->best[0].step_time, 1e-12);
    for (int i = 0; i < r->n_best; i++)
        for (int k = 0; k < r->n_pareto; k++)
            cr_assert(!(r->best[i].step_time < r->pareto[k].pred.step_time &&
                        r->best[i].peak_mem < r->pareto[k].pred.peak_mem));
    pp_tune_result_destroy(r);
}

Test(tuner_output, breakdown_adds_up_to_the_step)
{
    pp_tune_model m;
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_model_preset("gpt-13b", &m), PP_OK);
    cr_assert_eq(pp_tune_hw_preset("dgx-h100", 4, &hw), PP_OK);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 4, .v = 1, .b = 1, .d = 4, .t = 2, .N = 64};
    pp_tune_prediction p;
    pp_tune_rank_mem mem[4];
    cr_assert_eq(pp_tune_predict(&m, &hw, &c, &o, &p, mem), PP_OK, "%s", pp_err_msg());
    pp_tune_time_parts t;
    cr_assert_eq(pp_tune_breakdown(&m, &hw, &p, &o, &t), PP_OK, "%s", pp_err_msg());
    double sum = t.compute + t.tp + t.bubble + t.p2p + t.dp + t.optimizer;
    cr_assert_float_eq(sum, p.step_time, 1e-9 * p.step_time, "%g vs %g", sum, p.step_time);
    cr_assert(t.tp > 0, "t = 2 has tensor-parallel all-reduces");
    cr_assert(t.bubble > 0, "1F1B on 4 ranks has a bubble");
    cr_assert(t.dp > 0, "d = 4 syncs gradients");
    cr_assert(t.compute > t.bubble);
}

Test(tuner_output, leaderboard_has_integers_headers_legend_and_gib)
{
    pp_test_run_result r = pp_test_run(PPTUNE " --model gpt-13b --nodes 32 --no-save");
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(!strstr(r.out, "e+0"), "no exponent notation: %s", r.out);
    cr_assert(strstr(r.out, "tokens/s") && strstr(r.out, "peak / usable"), "%s", r.out);
    cr_assert(strstr(r.out, "GiB = 2^30 bytes"), "legend: %s", r.out);
    cr_assert(strstr(r.out, "d data-parallel"), "legend names the columns");
    /* the #1 row's tokens/s, grouped by thousands */
    const char *row = strstr(r.out, "\n  1  ");
    cr_assert(row);
    char tok[32] = "";
    cr_assert(sscanf(row, " 1 %*s %*d %*d %*s %*d %*d %*d %*d %*d %*s %*s %*f %31s", tok) == 1,
              "%s", row);
    cr_assert(strchr(tok, ','), "grouped: %s", tok);
    cr_assert(!strstr(r.out, "34.3G"), "no bare G units");
    pp_test_run_done(&r);
}

Test(tuner_output, trials_put_measured_figures_in_the_main_columns)
{
    pp_test_run_result r = pp_test_run(
        PPTUNE " --model tiny --cluster local --trials 1 --trial-steps 2 --no-save");
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "measured:") && strstr(r.out, "predicted:"), "%s", r.out);
    cr_assert(strstr(r.out, "error"), "%s", r.out);
    const char *row = strstr(r.out, "\n  1  ");
    cr_assert(row, "%s", r.out);
    const char *bar = strchr(row, '|'), *nl = strchr(row + 1, '\n');
    cr_assert(bar && bar < nl, "predicted beside the measured: %s", row);
    cr_assert(strstr(row, "%") && strstr(row, "ok"), "the model's error and trial: %.*s",
              (int)(nl - row), row);
    pp_test_run_done(&r);
}

Test(tuner_output, explain_answers_by_reason_per_schedule_and_pareto)
{
    pp_test_run_result r = pp_test_run(PPTUNE " --model gpt-13b --nodes 32 --no-save --explain");
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "rejected candidates by reason"), "%s", r.out);
    cr_assert(strstr(r.out, "best candidate of each schedule against #1"), "%s", r.out);
    const char *bp = strstr(r.out, "\n  bitpipe     bitpipe p=");
    cr_assert(bp, "bitpipe's best with figures: %s", r.out);
    cr_assert(strstr(bp, "loses "), "why it lost");
    cr_assert(strstr(r.out, "Pareto front"), "%s", r.out);
    cr_assert(!strstr(r.out, "[rule     ]"), "the full list only on request");
    size_t lines = 0;
    for (const char *p = r.out; *p; p++)
        lines += *p == '\n';
    cr_assert(lines < 150, "explain is a summary: %zu lines", lines);
    pp_test_run_done(&r);

    r = pp_test_run(PPTUNE " --model gpt-13b --nodes 4 --no-save --explain=all");
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "[rule     ]") && strstr(r.out, "does not fit"), "%s", r.out);
    pp_test_run_done(&r);

    r = pp_test_run(PPTUNE " --model gpt-13b --nodes 4 --no-save --explain=some");
    cr_assert_eq(r.code, 2);
    cr_assert(strstr(r.err, "--explain") && strstr(r.err, "all"), "%s", r.err);
    pp_test_run_done(&r);
}

Test(tuner_output, missing_cluster_file_is_bad_input)
{
    pp_test_run_result r =
        pp_test_run(PPTUNE " --model gpt-13b --cluster /nonexistent/cluster.json --no-save");
    cr_assert_eq(r.code, 2, "%s", r.err);
    cr_assert(strstr(r.err, "/nonexistent/cluster.json"), "names the file: %s", r.err);
    pp_test_run_done(&r);
}

Test(tuner_output, unknown_schedule_names_are_refused)
{
    pp_test_run_result r = pp_test_run(PPTUNE " --model gpt-13b --nodes 4 --schedules foo,1f1b "
                                              "--no-save");
    cr_assert_eq(r.code, 2, "%s", r.out);
    cr_assert(strstr(r.err, "\"foo\"") && strstr(r.err, "1f1b"), "names it and the known: %s",
              r.err);
    cr_assert_str_eq(r.out, "", "refused before any search output");
    pp_test_run_done(&r);
}

Test(tuner_output, nothing_fits_goes_to_stderr_with_reasons)
{
    pp_test_run_result r =
        pp_test_run(PPTUNE " --model llama3-405b --nodes 2 --no-save");
    cr_assert_eq(r.code, 1);
    cr_assert(strstr(r.err, "no candidate fits"), "%s", r.err);
    cr_assert(strstr(r.err, "does not fit"), "the reasons: %s", r.err);
    cr_assert(!strstr(r.out, "no candidate fits"), "%s", r.out);
    pp_test_run_done(&r);
}

Test(tuner_output, dash_o_writes_the_profile_to_stdout)
{
    pp_test_run_result r = pp_test_run(PPTUNE " --model gpt-1.3b --nodes=2 --schedules=1f1b -o -");
    cr_assert_eq(r.code, 0, "%s", r.err);
    json_error_t e;
    json_t *p = json_loads(r.out, 0, &e);
    cr_assert(p, "stdout is the profile alone: %s\n%s", e.text, r.out);
    cr_assert_str_eq(json_string_value(json_object_get(p, "schema")), "pptune-profile");
    json_decref(p);
    cr_assert(strstr(r.err, "tokens/s"), "the leaderboard went to stderr: %s", r.err);
    cr_assert(access("-", F_OK) != 0, "no file named -");
    pp_test_run_done(&r);
}

static char *report_of(const char *args, const char *dir)
{
    pp_test_run_result r =
        pp_test_run("cd %s && " PPTUNE " %s --no-save --report %s/r.html", dir, args, dir);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "report: "), "%s", r.out);
    pp_test_run_done(&r);
    char path[300];
    snprintf(path, sizeof path, "%s/r.html", dir);
    return pp_test_slurp(path);
}

Test(tuner_output, report_is_one_self_contained_page)
{
    char dir[] = "/tmp/pptune_report_XXXXXX";
    cr_assert(mkdtemp(dir));
    char *html = report_of("--model gpt-13b --nodes 32", dir);
    cr_assert(!strncmp(html, "<!DOCTYPE html>", 15));
    cr_assert(!strstr(html, "<script") && !strstr(html, "<link") && !strstr(html, "src="),
              "nothing loaded from outside");
    cr_assert(!strstr(html, "https://"), "no network");
    cr_assert(strstr(html, "Leaderboard") && !strstr(html, "measured step s"),
              "no measured columns without trials (issue 31: no empty columns)");
    cr_assert(strstr(html, "<th class=l>split</th>") && strstr(html, "<td>-</td>"),
              "the split column, G as - where there is none");
    cr_assert(strstr(html, "Rejected candidates by reason") &&
                  strstr(html, "aria-label=\"Pareto front"),
              "what --explain says: the reasons and the Pareto front");
    cr_assert(strstr(html, "<td class=l>gpipe</td>"), "gpipe, though none fits, is said");
    cr_assert(strstr(html, "Memory per pipeline rank") && strstr(html, "usable capacity"));
    cr_assert(strstr(html, "Timeline of #1") && strstr(html, "<rect"));
    cr_assert(strstr(html, "Best of each schedule") && strstr(html, "<td class=l>bitpipe</td>"),
              "bitpipe's best side by side");
    cr_assert(strstr(html, "preset dgx-h100"), "the source of the figures");
    free(html);
    /* after trials: measured figures, their source and the calibration plot */
    html = report_of("--model tiny --cluster local --trials 2 --trial-steps 2", dir);
    cr_assert(strstr(html, "Predicted against measured step time") && strstr(html, "<circle"));
    cr_assert(strstr(html, "measured step s"), "after trials the measured columns");
    cr_assert(strstr(html, "class=l>trial</td>"), "rows measured are marked trial");
    free(html);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -r %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* A real browser renders the report: no script errors, the tables and images are there and
 * not empty, and a screenshot comes out. Debian's chromium (scripts/install-deps.sh). */
Test(tuner_output, report_renders_in_headless_chromium)
{
    if (system("command -v chromium >/dev/null 2>&1") != 0) {
        cr_skip_test("chromium is not installed: the browser check of the report is skipped");
        return;
    }
    char dir[] = "/tmp/pptune_chromium_XXXXXX";
    cr_assert(mkdtemp(dir));
    free(report_of("--model gpt-13b --nodes 32", dir));
    const char *flags = "--headless --no-sandbox --disable-gpu --hide-scrollbars "
                        "--enable-logging=stderr --v=0";
    pp_test_run_result r = pp_test_run("cd %s && HOME=%s timeout 120 chromium %s "
                                       "--dump-dom file://%s/r.html",
                                       dir, dir, flags, dir);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(!strstr(r.err, "Uncaught") && !strstr(r.err, "CONSOLE"),
              "script errors: %s", r.err);
    /* the DOM as rendered: tables with cells, inline SVG images with shapes */
    cr_assert(strstr(r.out, "<table>") && strstr(r.out, "<td>1</td>"), "%.2000s", r.out);
    cr_assert(strstr(r.out, "<svg") && strstr(r.out, "<rect"), "images");
    pp_test_run_done(&r);
    r = pp_test_run("cd %s && HOME=%s timeout 120 chromium %s --window-size=1280,1600 "
                    "--screenshot=%s/r.png file://%s/r.html",
                    dir, dir, flags, dir, dir);
    cr_assert_eq(r.code, 0, "%s", r.err);
    pp_test_run_done(&r);
    char path[300];
    snprintf(path, sizeof path, "%s/r.png", dir);
    FILE *fp = fopen(path, "rb");
    cr_assert(fp, "no screenshot");
    unsigned char sig[8];
    cr_assert_eq(fread(sig, 1, 8, fp), 8);
    cr_assert(!memcmp(sig, "\x89PNG\r\n\x1a\n", 8));
    fseek(fp, 0, SEEK_END);
    cr_assert(ftell(fp) > 20000, "a blank page compresses to far less: %ld bytes", ftell(fp));
    fclose(fp);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -r %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Timelines fit the terminal: every line of `pptune schedule` and `pptune simulate
 * --timeline` within $COLUMNS = 80 at D = 8, v = 4, N = 32. */
static void assert_lines_within(const char *out, int cols)
{
    const char *from = strstr(out, "time 0 .. "); /* the timeline, to the end */
    cr_assert(from, "no timeline: %s", out);
    for (const char *p = from; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (!strncmp(p, "rank ", 5) || !strncmp(p, "time ", 5) || !strncmp(p, "F/B", 3) ||
            !strncmp(p, "- and", 5) || !strncmp(p, "chunk", 5) || p[0] == ' ')
            cr_assert(n <= (size_t)cols, "%zu columns: %.*s", n, (int)n, p);
        p += n + (nl ? 1 : 0);
    }
}

Test(tuner_output, ascii_timelines_fit_the_terminal)
{
    pp_test_run_result r = pp_test_run("COLUMNS=80 " PPTUNE " schedule --kind interleaved "
                                       "--ranks 8 --chunks 4 --microbatches 32");
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "rank 7  "), "%s", r.out);
    assert_lines_within(r.out, 80);
    pp_test_run_done(&r);
    r = pp_test_run("COLUMNS=80 " PPTUNE " simulate --model gpt-13b --nodes 4 --schedule "
                    "interleaved -p 8 -v 5 -b 1 -t 4 --global-batch 32 --timeline");
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "rank 7  "), "%s", r.out);
    assert_lines_within(r.out, 80);
    cr_assert(strstr(r.out, "step's parts"), "the step's breakdown: %s", r.out);
    pp_test_run_done(&r);
    /* --width still decides when given */
    r = pp_test_run("COLUMNS=80 " PPTUNE " schedule --kind 1f1b --ranks 4 --microbatches 8 "
                    "--format ascii --width 150");
    cr_assert(strstr(r.out, "time 0 .. 33, 1 column = 0.22\n"), "%s", r.out); /* 33 / 150 */
    pp_test_run_done(&r);
}

Test(tuner_output, simulate_draws_an_svg_in_seconds_to_a_file)
{
    char dir[] = "/tmp/pptune_simsvg_XXXXXX";
    cr_assert(mkdtemp(dir));
    pp_test_run_result r = pp_test_run(PPTUNE " simulate --model gpt-13b --nodes 32 --schedule "
                                       "interleaved -p 8 -v 5 -G 16 -b 1 -t 2 --format svg "
                                       "-o %s/t.svg",
                                       dir);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "timeline: "), "%s", r.out);
    pp_test_run_done(&r);
    char path[300];
    snprintf(path, sizeof path, "%s/t.svg", dir);
    char *svg = pp_test_slurp(path);
    cr_assert(strstr(svg, "<svg") && strstr(svg, "time (s)"), "axis in seconds");
    cr_assert(strstr(svg, "alternating F/B"), "D = 8, v = 5, N = 64 is aggregated");
    free(svg);
    r = pp_test_run(PPTUNE " simulate --model gpt-13b --nodes 4 --schedule 1f1b -p 4 --format png");
    cr_assert_eq(r.code, 2);
    cr_assert(strstr(r.err, "ascii or svg"), "%s", r.err);
    pp_test_run_done(&r);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -r %s", dir);
    cr_assert_eq(system(cmd), 0);
}
