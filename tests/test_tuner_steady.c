/* test_tuner_steady.c — huge N by the steady state (issue 18, finding 6): with a small
 * simulation budget (the test-only knob pp_tune_steady_budget_set), a configuration's
 * extrapolated figures equal its full simulation for every schedule and N = 64..512; the search
 * predicts huge-N candidates instead of refusing them, its leaderboard equals a full
 * simulation's, and the leaderboard keeps the prefix's schedule; a budget too small for the
 * schedule's period refuses with the reason.
 *
 * Costs are the time model's real ones (not unit costs), so equality is to a relative 1e-9:
 * the simulator's sums of thousands of floating-point durations round differently at N and at
 * the prefixes. In-flight counts are compared exactly. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_profile.h"
#include "pp_test_run.h"
#include "pp_tune.h"

#define BUDGET 48
#define REL 1e-9

static pp_tune_hw box(void)
{
    pp_tune_hw hw = {.name = "box",
                     .source = "test",
                     .fingerprint = "test-box",
                     .nodes = 1,
                     .gpus_per_node = 8,
                     .mem_bytes = 1e12,
                     .peak_flops = 1e15,
                     .gemm_flops = 8e14,
                     .mem_bw = 3e12,
                     .intra_bw = 4.5e11,
                     .inter_bw = 4.5e11,
                     .intra_lat = 2e-6,
                     .inter_lat = 5e-6};
    return hw;
}

static void restore(void)
{
    pp_tune_steady_budget_set(0);
}

static void expect_close(double got, double want, const char *what, const char *cfg)
{
    cr_expect(fabs(got - want) <= REL * fabs(want), "%s: %s extrapolated %.17g, simulated %.17g",
              cfg, what, got, want);
}

/* The full simulation (default budget) and the steady state (BUDGET) of c agree. */
static void compare(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c)
{
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    char cb[160];
    pp_config_str(c, cb, sizeof cb);
    pp_tune_prediction full, steady;
    pp_tune_rank_mem mf[8], ms[8];
    pp_tune_steady_budget_set(0);
    cr_assert_eq(pp_tune_predict(m, hw, c, &o, &full, mf), PP_OK, "%s: %s", cb, pp_err_msg());
    pp_tune_steady_budget_set(BUDGET);
    cr_assert_eq(pp_tune_predict(m, hw, c, &o, &steady, ms), PP_OK, "%s: %s", cb, pp_err_msg());
    cr_assert_eq(steady.cfg.N, c->N, "the prediction is of the real N");
    expect_close(steady.step_time, full.step_time, "step time", cb);
    expect_close(steady.pipeline_time, full.pipeline_time, "makespan", cb);
    expect_close(steady.bubble_ideal, full.bubble_ideal, "bubble (idle / busy)", cb);
    expect_close(steady.bubble_total, full.bubble_total, "bubble (idle / total)", cb);
    expect_close(steady.peak_mem, full.peak_mem, "peak memory", cb);
    expect_close(steady.tokens_per_s, full.tokens_per_s, "tokens/s", cb);
    cr_expect_eq(steady.peak_rank, full.peak_rank, "%s", cb);
    for (int r = 0; r < c->p; r++) {
        cr_expect_eq(round(ms[r].peak_units * 1e6), round(mf[r].peak_units * 1e6),
                     "%s: rank %d in flight %g vs %g", cb, r, ms[r].peak_units, mf[r].peak_units);
        expect_close(ms[r].total, mf[r].total, "a rank's memory", cb);
    }
    /* the breakdown of the step follows the same path */
    pp_tune_time_parts tf, ts;
    pp_tune_steady_budget_set(0);
    cr_assert_eq(pp_tune_breakdown(m, hw, &full, &o, &tf), PP_OK, "%s", pp_err_msg());
    pp_tune_steady_budget_set(BUDGET);
    cr_assert_eq(pp_tune_breakdown(m, hw, &steady, &o, &ts), PP_OK, "%s", pp_err_msg());
    double sum_f = tf.compute + tf.tp + tf.bubble + tf.p2p + tf.dp + tf.optimizer;
    double sum_s = ts.compute + ts.tp + ts.bubble + ts.p2p + ts.dp + ts.optimizer;
    expect_close(ts.compute, tf.compute, "breakdown compute", cb);
    expect_close(sum_s, sum_f, "breakdown total", cb);
}

Test(tuner_steady, extrapolated_figures_equal_the_full_simulation_for_every_schedule,
     .fini = restore)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_hw hw = box();
    struct {
        const char *kind;
        int v, G;
    } k[] = {{"gpipe", 1, 0},       {"1f1b", 1, 0},    {"interleaved", 2, 4},
             {"interleaved", 3, 8}, {"chimera", 1, 0}, {"bitpipe", 2, 0},
             {"zb-h1", 1, 0},       {"zbv", 2, 0},     {"dualpipev", 2, 0}};
    int Ns[] = {64, 100, 128, 256, 512};
    int compared = 0;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        for (size_t j = 0; j < sizeof Ns / sizeof Ns[0]; j++) {
            pp_config c = {
                .p = 4, .v = k[i].v, .G = k[i].G, .b = 1, .d = 2, .t = 1, .N = Ns[j]};
            c.schedule = k[i].kind;
            pp_sched_params sp;
            pp_tune_sched_params(&m, &c, &sp);
            if (pp_sched_desc_check(pp_sched_lookup(c.schedule), &sp) != PP_OK) {
                pp_err_clear(); /* N = 100 for a schedule needing N mod 8 = 0 or >= D */
                continue;
            }
            compare(&m, &hw, &c);
            compared++;
        }
    cr_assert_geq(compared, 43, "only %d configurations compared", compared);
}

Test(tuner_steady, prefixes_share_n_mod_the_period_and_fit_the_budget, .fini = restore)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_steady_budget_set(BUDGET);
    pp_config c = {
        .schedule = "interleaved", .p = 4, .v = 2, .G = 8, .b = 1, .d = 2, .t = 1, .N = 500};
    int n[3];
    cr_assert_eq(pp_tune_steady_prefixes(&m, &c, n), PP_OK, "%s", pp_err_msg());
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(n[i] % 8, 500 % 8, "prefix %d: N %d", i, n[i]);
        cr_expect_leq(n[i], BUDGET);
    }
    cr_expect_lt(n[0], n[1]);
    cr_expect_eq(n[2] - n[1], n[1] - n[0]);
    /* a group larger than the budget cannot repeat in it: refused, saying why */
    c.G = 64;
    cr_assert_eq(pp_tune_steady_prefixes(&m, &c, n), PP_ERR_UNSUPPORTED);
    cr_expect(strstr(pp_err_text(), "periods of 64 micro-batches"), "%s", pp_err_text());
    pp_tune_hw hw = box();
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_tune_prediction p;
    cr_expect_eq(pp_tune_predict(&m, &hw, &c, &o, &p, NULL), PP_ERR_UNSUPPORTED);
    pp_err_clear();
}

/* b = 1 only: every candidate has N = 512 / d >= 64 micro-batches, above BUDGET */
Test(tuner_steady, prefixes_still_in_their_warm_up_are_refused_with_the_figure, .fini = restore)
{
    /* G = 16 with the budget 48: the prefixes 16, 32, 48 (one period each); rank 0's in-flight
     * activations still grow over the first group, so the figures are not linear */
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_hw hw = box();
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {
        .schedule = "interleaved", .p = 4, .v = 2, .G = 16, .b = 4, .d = 2, .t = 1, .N = 64};
    pp_tune_prediction p;
    pp_tune_steady_budget_set(BUDGET);
    cr_assert_eq(pp_tune_predict(&m, &hw, &c, &o, &p, NULL), PP_ERR_UNSUPPORTED);
    cr_expect(strstr(pp_err_text(), "N = 16, 32, 48 micro-batches are not in a steady state "
                                    "(rank 0's acts grows by"),
              "%s", pp_err_text());
    pp_err_clear();
    /* and the full simulation, which it would have had to match, is indeed not linear there:
     * with the default budget the same configuration predicts fine */
    pp_tune_steady_budget_set(0);
    cr_expect_eq(pp_tune_predict(&m, &hw, &c, &o, &p, NULL), PP_OK, "%s", pp_err_msg());
}

static pp_tune_result *search(const pp_tune_model *m, const pp_tune_hw *hw, int gb)
{
    pp_tune_search_params sp = {
        .model = m, .hw = hw, .global_batch = gb, .allow_tp = 1, .keep = 5, .max_b = 1};
    pp_tune_opts_default(&sp.opts);
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    return r;
}

Test(tuner_steady, the_search_predicts_huge_n_and_its_leaderboard_equals_full_simulation,
     .fini = restore)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_hw hw = box();
    pp_tune_result *full = search(&m, &hw, 512);
    pp_tune_steady_budget_set(BUDGET);
    pp_tune_result *steady = search(&m, &hw, 512);
    cr_assert_eq(steady->n_best, full->n_best);
    int huge = 0;
    for (int i = 0; i < steady->n_best; i++) {
        const pp_tune_prediction *p = &steady->best[i];
        expect_close(p->step_time, full->best[i].step_time, "leaderboard step", p->cfg.schedule);
        cr_assert_not_null(p->sched);
        if (p->cfg.N > BUDGET) {
            huge++;
            /* the entry keeps the longest prefix's schedule */
            cr_expect_leq(p->sched->microbatches, BUDGET);
            cr_expect_lt(p->sched->microbatches, p->cfg.N);
        }
    }
    cr_assert_gt(huge, 0, "no huge-N candidate on the leaderboard: the test shows nothing");
    /* the profile records the real N of every candidate (and its reader accepts it) */
    char path[] = "/tmp/pptune-steady-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_tune_profile_input in = {.model = &m,
                                .hw = &hw,
                                .opts = &steady->opts,
                                .result = steady,
                                .command_line = "pptune (test)"};
    cr_assert_eq(pp_tune_profile_write(&in, path), PP_OK, "%s", pp_err_msg());
    pp_profile *pf = NULL;
    cr_assert_eq(pp_profile_read(path, &pf), PP_OK, "%s", pp_err_msg());
    unlink(path);
    cr_assert(pf->has_chosen);
    cr_expect_eq(pf->chosen.config.N, steady->best[0].cfg.N);
    cr_assert_eq(pf->n_runners_up, steady->n_best - 1);
    for (int i = 0; i < pf->n_runners_up; i++)
        cr_expect_eq(pf->runners_up[i].config.N, steady->best[i + 1].cfg.N);
    pp_profile_destroy(pf);
    pp_tune_result_destroy(full);
    pp_tune_result_destroy(steady);
}

/* pptune simulate takes the same path for a huge N, and says so; its timeline is the prefix's */
Test(tuner_steady, simulate_with_huge_n_uses_the_steady_state_and_names_the_prefix, .fini = restore)
{
    pp_test_run_result r =
        pp_test_run("'%s' simulate --model gpt-13b --nodes 32 --global-batch 100000 --schedule "
                    "1f1b -p 8 -t 2 --timeline --width 80",
                    PP_BINARY_DIR "/tuner/pptune");
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_expect(strstr(r.out, "N = 6250 is above the simulation budget of 4096: figures "
                            "extrapolated from prefixes"),
              "%s", r.out);
    cr_expect(strstr(r.out, "timeline of the longest prefix simulated, N = 1024 of the 6250 "
                            "micro-batches"),
              "%s", r.out);
    cr_expect(strstr(r.out, "step's parts"), "the breakdown extrapolates too: %s", r.out);
    /* the printed step time (4 decimals) is the full simulation's of all 6250 micro-batches */
    pp_tune_model m;
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_model_preset("gpt-13b", &m), PP_OK);
    cr_assert_eq(pp_tune_hw_preset("dgx-h100", 32, &hw), PP_OK);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 8, .v = 1, .b = 1, .d = 16, .t = 2, .N = 6250};
    pp_tune_prediction p;
    pp_tune_steady_budget_set(8192); /* simulated whole */
    cr_assert_eq(pp_tune_predict(&m, &hw, &c, &o, &p, NULL), PP_OK, "%s", pp_err_msg());
    char line[64], s1[16], s2[16];
    snprintf(line, sizeof line, "step time      %s s (pipeline %s s",
             pp_fmt_seconds(p.step_time, s1, sizeof s1),
             pp_fmt_seconds(p.pipeline_time, s2, sizeof s2));
    cr_expect(strstr(r.out, line), "\"%s\" not in %s", line, r.out);
    pp_test_run_done(&r);
}

/* The search with the global batch of 100000 (b = 1 on 8 GPUs: N = 100000 / d >= 12500
 * for every candidate): huge-N candidates reach the leaderboard, which says how they were
 * predicted, and the profile holds their real N. */
Test(tuner_steady, a_search_with_a_global_batch_of_100000_ranks_huge_n_candidates)
{
    char dir[] = "/tmp/pptune-steady-XXXXXX";
    cr_assert(mkdtemp(dir));
    pp_test_run_result r = pp_test_run("'%s' --model gpt-1.3b --global-batch 100000 --max-b 1 "
                                       "-o '%s/p.json'",
                                       PP_BINARY_DIR "/tuner/pptune", dir);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_expect(strstr(r.out, "(N above 4096: predicted from the steady state of bounded "
                            "prefixes, not simulated whole)"),
              "%s", r.out);
    cr_expect(strstr(r.out, " 12500 even "), "an N = 12500 candidate on the board: %s", r.out);
    char path[64];
    snprintf(path, sizeof path, "%s/p.json", dir);
    pp_profile *pf = NULL;
    cr_assert_eq(pp_profile_read(path, &pf), PP_OK, "%s", pp_err_msg());
    int huge = pf->chosen.config.N > 4096;
    for (int i = 0; i < pf->n_runners_up; i++)
        huge += pf->runners_up[i].config.N > 4096;
    cr_expect_gt(huge, 0, "no candidate with N > 4096 in the profile");
    pp_profile_destroy(pf);
    unlink(path);
    rmdir(dir);
    pp_test_run_done(&r);
}
