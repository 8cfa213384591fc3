/* test_tuner_output_units.c — what a person reads, second pass (issue 31): one set of units
 * in every command, breakdowns that add up to their totals, trials that say what ran and what
 * the calibration is, prose wrapped to the terminal, large memory tables cut to the ranks that
 * matter. Runs the built pptune. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_test_run.h"

#define PPTUNE PP_BINARY_DIR "/tuner/pptune"

/* bytes of "66.6 GiB" / "512 MiB" / "3.00 KiB" / "12 B" at s; -1 when it is none */
static double bytes_at(const char *s)
{
    double v;
    char unit[8];
    if (sscanf(s, "%lf %7s", &v, unit) != 2)
        return -1;
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    for (int k = 0; k < 5; k++)
        if (!strcmp(unit, u[k]))
            return v * pow(1024, k);
    return -1;
}

/* Item 4: the same figure reads the same in the search, simulate, diff and models: seconds
 * to 4 significant digits, tokens/s grouped, memory in GiB (never GB), parameters with B/M/K. */
Test(tuner_output_units, every_command_writes_a_figure_the_same_way)
{
    char dir[] = "/tmp/pptune_units_XXXXXX";
    cr_assert(mkdtemp(dir));
    pp_test_run_result r = pp_test_run("cd %s && " PPTUNE " --model gpt-13b --nodes 32 --for "
                                       "megatron -o a.json && " PPTUNE " --model gpt-13b "
                                       "--nodes 16 --for megatron -o b.json > /dev/null",
                                       dir);
    cr_assert_eq(r.code, 0, "%s", r.err);
    /* the #1 row: "  1  interleaved   2  7    2   2   128  1  1     4 uneven z1   1.235 ..." */
    const char *row = strstr(r.out, "\n  1  ");
    cr_assert(row, "%s", r.out);
    char sched[32], split[16], settings[32], step[16], tok[32];
    int p, v, b, d, t, cp, N;
    char G[8];
    cr_assert_eq(sscanf(row, " 1 %31s %d %d %7s %d %d %d %d %d %15s %31s %15s %31s", sched, &p, &v,
                        G, &b, &d, &t, &cp, &N, split, settings, step, tok),
                 13, "%s", row);
    /* the settings column as simulate's flags: z1 / z2 sharding, sp (one word here) */
    const char *shard = strstr(settings, "z2") ? "gradients" : strstr(settings, "z1") ? "optimizer"
                                                                                       : "none";
    cr_assert(!strcmp(settings, "-") || !strcmp(settings, "z1") || !strcmp(settings, "z2"),
              "settings %s: this test reads only sharding", settings);
    cr_expect_eq(strlen(step) - (strchr(step, '.') != NULL), 4, "4 significant digits: %s",
                 step);
    pp_test_run_done(&r);
    /* simulate of the same configuration says the same step time */
    r = pp_test_run(PPTUNE " simulate --model gpt-13b --nodes 32 --schedule %s -p %d -v %d -G %s "
                           "-b %d -t %d --cp %d --shard %s%s",
                    sched, p, v, G, b, t, cp, shard, !strcmp(split, "uneven") ? " --uneven" : "");
    cr_assert_eq(r.code, 0, "%s", r.err);
    char want[64];
    snprintf(want, sizeof want, "step time      %s s", step);
    cr_expect(strstr(r.out, want), "simulate says another step time than the board's %s: %s",
              step, r.out);
    cr_expect(strstr(r.out, "GiB of") && !strstr(r.out, " GB "), "%s", r.out);
    pp_test_run_done(&r);
    /* diff: grouped tokens/s, seconds as the board, GiB */
    r = pp_test_run("cd %s && " PPTUNE " diff a.json b.json", dir);
    cr_assert(r.code == 0 || r.code == 3, "%s", r.err);
    snprintf(want, sizeof want, "%s -> ", tok);
    cr_expect(strstr(r.out, want), "the board's tokens/s %s in the diff: %s", tok, r.out);
    snprintf(want, sizeof want, "predicted step time   %s -> ", step);
    cr_expect(strstr(r.out, want), "%s", r.out);
    cr_expect(!strstr(r.out, "e+0") && !strstr(r.out, " GB") && strstr(r.out, " GiB"), "%s",
              r.out);
    pp_test_run_done(&r);
    /* models and the search's model line: the tiny model's 61.1 K parameters both ways */
    r = pp_test_run(PPTUNE " models");
    cr_expect(strstr(r.out, "tiny") && !strstr(r.out, "0.000 B"), "%s", r.out);
    const char *tiny = strstr(r.out, "\ntiny ");
    char num[16] = "", unit[8] = "";
    cr_assert(tiny && sscanf(tiny, " tiny %15s %7s", num, unit) == 2, "%s", r.out);
    cr_expect_str_eq(unit, "K", "%s", tiny);
    pp_test_run_done(&r);
    r = pp_test_run(PPTUNE " simulate --model tiny --cluster dgx-h100 --schedule 1f1b -p 2 -b 1");
    snprintf(want, sizeof want, ": %s %s parameters", num, unit);
    cr_expect(strstr(r.out, want), "models says %s %s, the model line: %s", num, unit, r.out);
    cr_expect(!strstr(r.out, "e-0") && !strstr(r.out, "e+0"), "no exponent: %s", r.out);
    pp_test_run_done(&r);
    pp_test_run_result rm = pp_test_run("rm -rf %s", dir);
    pp_test_run_done(&rm);
}

/* Item 7: every memory rejection names every part of its total, and they add up to it (to the
 * rounding of the digits shown); every schedule's best in --explain adds up in time and in
 * memory. Over every reason of a search that rejects thousands (llama3-405b on 2048 nodes). */
Test(tuner_output_units, every_breakdown_adds_up_to_its_total)
{
    pp_test_run_result r =
        pp_test_run(PPTUNE " --model llama3-405b --nodes 2048 --explain=all --no-save");
    cr_assert_eq(r.code, 0, "%s", r.err);
    long checked = 0;
    for (const char *at = r.out; (at = strstr(at, " needs ")) != NULL; at++) {
        double total, part, sum = 0, units;
        char unit[8];
        int used;
        if (sscanf(at, " needs %lf %7s =%n", &total, unit, &used) != 2)
            continue;
        const char *q = at + used, *nl = strchr(at, '\n'), *gt = strstr(at, " > ");
        cr_assert(gt && gt < nl, "%.*s", (int)(nl - at), at);
        int parts = 0;
        while (q < gt) {
            const char *sp = strchr(q, ' ');
            while (sp && sp < gt && !(sp[1] >= '0' && sp[1] <= '9'))
                sp = strchr(sp + 1, ' ');
            if (!sp || sp >= gt || sscanf(sp, "%lf", &part) != 1)
                break;
            const char *after = strchr(sp + 1, ' ');
            if (after && !strncmp(after, " in flight)", 11)) { /* "(4 in flight)": a count */
                q = after + 11;
                continue;
            }
            sum += part, parts++;
            q = after ? after : gt;
        }
        cr_assert_eq(parts, 6, "weights, grads, optimizer, activations, comm, workspace: %.*s",
                     (int)(nl - at), at);
        cr_expect_leq(fabs(sum - total), 0.05 * (parts + 1),
                      "parts add up to %.2f, not %.1f %s: %.*s", sum, total, unit,
                      (int)(nl - at), at);
        (void)units;
        checked++;
    }
    cr_assert_gt(checked, 100, "memory rejections checked: %ld", checked);
    /* each schedule's best: "step parts... | memory parts total UNIT" */
    const char *best = strstr(r.out, "best candidate of each schedule");
    cr_assert(best, "%s", r.out);
    int rows = 0;
    for (const char *l = strchr(best, '\n'); l && (l = strchr(l + 1, '\n')) && l[1] == ' ';) {
        const char *bar = strchr(l, '|'), *nl = strchr(l + 1, '\n');
        if (!bar || bar > nl || (strstr(l, "configuration") && strstr(l, "configuration") < nl))
            continue;
        double x[7], m[6];
        const char *q = bar;
        while (q > l && q[-1] == ' ')
            q--;
        for (int k = 6; k >= 0; k--) { /* the 7 figures before the bar, right to left */
            while (q > l && q[-1] != ' ')
                q--;
            cr_assert_eq(sscanf(q, "%lf", &x[k]), 1, "%.*s", (int)(nl - l), l);
            while (q > l && q[-1] == ' ')
                q--;
        }
        cr_assert_eq(sscanf(bar + 1, "%lf %lf %lf %lf %lf %lf", &m[0], &m[1], &m[2], &m[3],
                            &m[4], &m[5]),
                     6, "%.*s", (int)(nl - l), l);
        double ts = x[1] + x[2] + x[3] + x[4] + x[5] + x[6];
        cr_expect_leq(fabs(ts - x[0]), 5e-4 * 7 * x[0], "time parts %g vs step %g: %.*s", ts,
                      x[0], (int)(nl - l), l);
        double ms = m[0] + m[1] + m[2] + m[3] + m[4];
        cr_expect_leq(fabs(ms - m[5]), 0.05 * 6, "memory parts %g vs total %g: %.*s", ms, m[5],
                      (int)(nl - l), l);
        rows++;
    }
    cr_assert_gt(rows, 0, "%s", best);
    pp_test_run_done(&r);
}

/* Item 10: a large (32 or 64-rank) memory table shows the first, the last, the fullest and the emptiest
 * rank, and says so; --explain=all shows every rank, which confirms the fullest and emptiest. */
Test(tuner_output_units, a_large_memory_table_shows_the_ranks_that_matter)
{
    pp_test_run_result all = pp_test_run(PPTUNE " --model llama3-405b --nodes 2048 --no-save "
                                                 "--explain=all");
    pp_test_run_result cut = pp_test_run(PPTUNE " --model llama3-405b --nodes 2048 --no-save");
    cr_assert_eq(all.code, 0, "%s", all.err);
    cr_assert_eq(cut.code, 0, "%s", cut.err);
    double tot[1024];
    int n = 0, hi = 0, lo = 0;
    const char *t = strstr(all.out, "\n  rank   weights");
    cr_assert(t, "%.4000s", all.out);
    for (const char *l = strchr(t + 1, '\n'); l && l[1] == ' '; l = strchr(l + 1, '\n')) {
        int rank;
        if (sscanf(l, " %d", &rank) != 1 || rank != n)
            break;
        const char *nl = strchr(l + 1, '\n'), *e = nl;
        while (e > l && e[-1] != 'B') /* the total: the last "V UNIT" of the row */
            e--;
        const char *u = e;
        while (u > l && u[-1] != ' ')
            u--;
        u--;
        while (u > l && u[-1] != ' ')
            u--;
        tot[n] = bytes_at(u);
        cr_assert_gt(tot[n], 0, "%.*s", (int)(nl - l), l);
        hi = tot[n] > tot[hi] ? n : hi;
        lo = tot[n] < tot[lo] ? n : lo;
        n++;
    }
    /* the winner's pipeline ranks (p = 32 or 64 as the search settles), more than a table shows */
    cr_assert_gt(n, 8, "--explain=all: every rank: %.2000s", t);
    int shown[1024] = {0}, k = 0;
    char of[32];
    snprintf(of, sizeof of, "of %d ranks", n);
    t = strstr(cut.out, "\n  rank   weights");
    cr_assert(t, "%.4000s", cut.out);
    for (const char *l = strchr(t + 1, '\n'); l && l[1] == ' '; l = strchr(l + 1, '\n')) {
        int rank;
        if (sscanf(l, " %d", &rank) == 1 && rank >= 0 && rank < n)
            shown[rank] = 1, k++;
        else if (!strstr(l, "ranks between") && !strstr(l, of))
            break;
    }
    for (int r = 0; r < n; r++)
        cr_expect_eq(shown[r], r == 0 || r == n - 1 || r == hi || r == lo, "rank %d (fullest %d, "
                     "emptiest %d): %.2000s", r, hi, lo, t);
    cr_expect(strstr(cut.out, of) && strstr(cut.out, "--explain=all"), "%.4000s", cut.out);
    cr_expect_lt(k, 8);
    pp_test_run_done(&all);
    pp_test_run_done(&cut);
}

/* Item 9: prose lines (the model, cluster and training lines, the legends, the search and
 * trial notes) fit 100 columns when stdout is not a terminal and $COLUMNS when it is set; the
 * split codes have a legend. */
/* out with every run of blanks and line breaks as one blank (wrapped prose read as one line) */
static char *one_line(const char *out)
{
    char *s = malloc(strlen(out) + 1), *w = s;
    cr_assert_not_null(s);
    for (const char *p = out; *p; p++)
        if (!(*p == ' ' || *p == '\n') || (w > s && w[-1] != ' '))
            *w++ = *p == '\n' ? ' ' : *p;
    *w = '\0';
    return s;
}

static void prose_within(const char *out, size_t cols)
{
    for (const char *p = out; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        int prose = !strncmp(p, "model ", 6) || !strncmp(p, "cluster ", 8) ||
                    !strncmp(p, "training ", 9) || !strncmp(p, "searched ", 9) ||
                    !strncmp(p, "trials:", 7) || !strncmp(p, "calibration:", 12) ||
                    p[0] == '(' || (!strncmp(p, "         ", 9) && p[9] != ' ');
        cr_expect(!prose || n <= cols, "%zu columns (> %zu): %.*s", n, cols, (int)n, p);
        p += n + (nl ? 1 : 0);
    }
}

Test(tuner_output_units, prose_wraps_to_the_width_and_the_split_has_a_legend)
{
    pp_test_run_result r = pp_test_run("COLUMNS= " PPTUNE " --model gpt-13b --nodes 32 --no-save");
    cr_assert_eq(r.code, 0, "%s", r.err);
    prose_within(r.out, 100);
    char *flat = one_line(r.out); /* the legend is wrapped prose */
    cr_expect(strstr(r.out, " 4/4 ") && strstr(flat, "F/L (the first"),
              "the split 4/4 and its legend: %s", r.out);
    free(flat);
    pp_test_run_done(&r);
    r = pp_test_run("COLUMNS=80 " PPTUNE " --model gpt-13b --nodes 32 --no-save");
    prose_within(r.out, 80);
    pp_test_run_done(&r);
}

/* Item 8: trials say which rows ran (by the board's #) and why the others did not, the
 * calibration says what it is a ratio of, and a tiny model's memory reads in MiB/KiB. */
Test(tuner_output_units, trials_say_what_ran_and_what_calibration_is)
{
    pp_test_run_result r = pp_test_run(PPTUNE " --model tiny --cluster local --schedules "
                                              "zb-h1,zbv,1f1b --trials 2 --trial-steps 2 "
                                              "--no-save");
    cr_assert_eq(r.code, 0, "%s", r.err);
    const char *tr = strstr(r.out, "trials: ");
    cr_assert(tr, "%s", r.out);
    cr_expect(strstr(tr, "--trials 2") && strstr(tr, "not trialled"), "%s", tr);
    cr_expect(strstr(r.out, "calibration: the measured steps took ") &&
                  strstr(r.out, " x the predicted time"),
              "%s", r.out);
    /* every row whose trial ran is in the list of those run, the others in the rest */
    const char *rest = strstr(tr, "not trialled");
    for (const char *l = strstr(r.out, "\n  1  "); l && l[1] == ' '; l = strchr(l + 1, '\n')) {
        int k;
        if (sscanf(l, " %d", &k) != 1)
            break;
        const char *nl = strchr(l + 1, '\n');
        int ran = strstr(l, " ok\n") == nl - 3;
        char num[16];
        snprintf(num, sizeof num, "#%d", k);
        const char *at = strstr(tr, num);
        int listed_run = at && at < rest && k <= 2;
        if (ran)
            cr_expect(listed_run || (strstr(tr, "#1 to #2") && k <= 2), "row %d ran: %s", k, tr);
    }
    cr_expect(strstr(r.out, "MiB") || strstr(r.out, "KiB"), "%s", r.out);
    cr_expect(!strstr(r.out, " 0.0 GiB") && !strstr(r.out, " 0.00 GiB"), "%s", r.out);
    pp_test_run_done(&r);
}
