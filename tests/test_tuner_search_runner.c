/* test_tuner_search_runner.c — the whole search through the library alone: trials through a
 * fake runner (recalibration and the choice of the fastest measured candidate that fits), the
 * one pass that tries every setting when nothing fits, the leaderboard entries' shared schedule and memory, and
 * the lower bound (built from the cost model's own functions) keeping the exact leaderboard. */
#include <criterion/criterion.h>
#include <math.h>
#include <jansson.h>
#include <string.h>

#include "pp_tune.h"

/* 4 CPU "devices" of this machine: trials possible, the runtime's fp32 accounting. */
static pp_tune_hw local_cpus(void)
{
    pp_tune_hw hw = {.name = "local",
                     .source = "test",
                     .nodes = 1,
                     .gpus_per_node = 4,
                     .is_local = 1,
                     .cpu_devices = 1,
                     .mem_bytes = 1e10,
                     .peak_flops = 1e11,
                     .gemm_flops = 5e10,
                     .mem_bw = 1e10,
                     .intra_bw = 1e9,
                     .inter_bw = 1e9,
                     .intra_lat = 1e-6,
                     .inter_lat = 1e-6};
    return hw;
}

/* The fake runner: measures the candidate's predicted step time (found in the table the test
 * gives it) / (1 + the trials before it): the trials reverse the order. Trial number oom_call
 * (from 0; -1: none) runs out of memory. */
typedef struct {
    const pp_tune_result *table; /* predictions of a search without trials */
    int oom_call;
    int calls;
    pp_config seen[16];
    int seen_sp[16]; /* the trial's configuration's sequence_parallel */
} fake;

static double predicted(const fake *f, const pp_config *c)
{
    for (int i = 0; i < f->table->n_best; i++)
        if (pp_config_equal(&f->table->best[i].cfg, c))
            return f->table->best[i].step_time;
    return 1.0;
}

static pp_status fake_run(void *ctx, const pp_tune_trial_params *tp, pp_tune_trial_result *r)
{
    fake *f = ctx;
    memset(r, 0, sizeof *r);
    if (f->calls < 16) {
        f->seen[f->calls] = *tp->cfg;
        f->seen_sp[f->calls] = tp->cfg->sequence_parallel;
    }
    int call = f->calls++;
    double factor = 1.0 / (1.0 + call);
    if (call == f->oom_call) {
        snprintf(r->status, sizeof r->status, "oom");
        return PP_OK;
    }
    snprintf(r->status, sizeof r->status, "ok");
    r->step_time = factor * predicted(f, tp->cfg);
    r->peak = 1e6;
    return PP_OK;
}

static pp_tune_search_params params(const pp_tune_model *m, const pp_tune_hw *hw)
{
    pp_tune_search_params sp = {.model = m, .hw = hw, .allow_tp = 1, .keep = 6};
    pp_tune_opts_default(&sp.opts);
    return sp;
}

Test(tuner_search_runner, fake_runner_measurements_choose_the_winner)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    pp_tune_hw hw = local_cpus();
    pp_tune_search_params sp = params(&m, &hw);
    sp.allow_tp = 0; /* t = 1 only: the board is the same with and without trials (see below) */
    pp_tune_result *pred = NULL;
    cr_assert_eq(pp_tune_search(&sp, &pred), PP_OK, "%s", pp_err_msg());
    cr_assert_geq(pred->n_best, 4);
    cr_assert_eq(pred->trialled, 0, "no trials asked: none run");
    cr_assert_eq(pred->opts.precision, PP_PREC_FP32, "CPU devices: fp32");

    fake f = {.table = pred, .oom_call = -1};
    sp.trials = 3;
    sp.runner = (pp_tune_runner){.run = fake_run, .ctx = &f};
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(f.calls, 3);
    cr_assert_eq(r->trialled, 3);
    for (int i = 0; i < 3; i++) /* the best three in predicted order were run */
        cr_assert(pp_config_equal(&f.seen[i], &pred->best[i].cfg));
    /* measured 1, 1/2, 1/3 x predicted: the third is now first, then the second, the first */
    cr_assert(pp_config_equal(&r->best[0].cfg, &pred->best[2].cfg));
    cr_assert(pp_config_equal(&r->best[1].cfg, &pred->best[1].cfg));
    cr_assert(pp_config_equal(&r->best[2].cfg, &pred->best[0].cfg));
    /* the untried follow in their predicted order */
    for (int i = 3; i < r->n_best; i++) {
        cr_assert(pp_config_equal(&r->best[i].cfg, &pred->best[i].cfg));
        cr_assert_str_empty(r->best[i].trial_status);
    }
    cr_assert_float_eq(r->calibration, 0.5, 1e-12, "median of 1, 1/2, 1/3: %g", r->calibration);
    cr_assert_str_eq(r->best[0].trial_status, "ok");
    pp_tune_result_destroy(r);
    pp_tune_result_destroy(pred);
}

Test(tuner_search_runner, a_failed_trial_is_recorded_and_never_chosen)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    pp_tune_hw hw = local_cpus();
    pp_tune_search_params sp = params(&m, &hw);
    sp.allow_tp = 0; /* t = 1 only, as above */
    pp_tune_result *pred = NULL;
    cr_assert_eq(pp_tune_search(&sp, &pred), PP_OK, "%s", pp_err_msg());
    fake f = {.table = pred, .oom_call = 1};
    sp.trials = 2;
    sp.runner = (pp_tune_runner){.run = fake_run, .ctx = &f};
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert(pp_config_equal(&r->best[0].cfg, &pred->best[0].cfg),
              "the only ok trial wins");
    cr_assert(pp_config_equal(&r->best[1].cfg, &pred->best[1].cfg),
              "the failed one stays in its predicted place");
    cr_assert_str_eq(r->best[1].trial_status, "oom", "and keeps its status");
    cr_assert_float_eq(r->calibration, 1.0, 1e-12);
    pp_tune_result_destroy(r);
    pp_tune_result_destroy(pred);
}

/* With trials on this machine the search keeps its best t > 1 candidate on the board, even
 * where t = 1 candidates outrank it on the prediction, and the last trial measures it: the
 * runtime runs tensor parallelism, and its communication is the least known figure. Without
 * trials the board is the plain ranking. */
Test(tuner_search_runner, a_tensor_parallel_candidate_is_kept_and_trialled)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    pp_tune_hw hw = local_cpus();
    pp_tune_search_params sp = params(&m, &hw);
    pp_tune_result *pred = NULL;
    cr_assert_eq(pp_tune_search(&sp, &pred), PP_OK, "%s", pp_err_msg());
    cr_assert(pred->allow_tp, "CPU devices search t > 1 now");
    int tp_in_top3 = 0;
    for (int i = 0; i < 3 && i < pred->n_best; i++)
        tp_in_top3 |= pred->best[i].cfg.t > 1;
    fake f = {.table = pred, .oom_call = -1};
    sp.trials = 3;
    sp.runner = (pp_tune_runner){.run = fake_run, .ctx = &f};
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(f.calls, 3);
    int tried_tp = 0;
    for (int i = 0; i < f.calls; i++)
        tried_tp |= f.seen[i].t > 1;
    cr_assert(tried_tp, "no trial measured a t > 1 candidate");
    int measured_tp = 0;
    for (int i = 0; i < r->n_best; i++)
        if (r->best[i].cfg.t > 1 && !strcmp(r->best[i].trial_status, "ok")) {
            measured_tp = 1;
            cr_assert(!r->best[i].predicted_only, "a measured t = %d candidate is not "
                                                  "predicted only", r->best[i].cfg.t);
        }
    cr_assert(measured_tp);
    if (!tp_in_top3) /* it took the third trial: the first two are the best two t = 1 */
        for (int i = 0; i < 2; i++)
            cr_assert_eq(f.seen[i].t, 1);
    pp_tune_result_destroy(r);
    pp_tune_result_destroy(pred);
}

/* On CPU devices a forced --sequence-parallel is kept (the runtime's CPU backend runs it), so
 * its t > 1 candidates are trialled with it: every trial the runner sees carries it. */
Test(tuner_search_runner, sequence_parallel_is_kept_on_cpus_and_trialled)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    pp_tune_hw hw = local_cpus();
    pp_tune_search_params sp = params(&m, &hw);
    sp.force.sequence_parallel = 1;
    pp_tune_result *pred = NULL;
    cr_assert_eq(pp_tune_search(&sp, &pred), PP_OK, "%s", pp_err_msg());
    cr_assert_gt(pred->n_best, 0);
    for (int i = 0; i < pred->n_best; i++)
        cr_assert(pred->best[i].cfg.t == 1 || pred->best[i].cfg.sequence_parallel);
    fake f = {.table = pred, .oom_call = -1};
    sp.trials = 4;
    sp.runner = (pp_tune_runner){.run = fake_run, .ctx = &f};
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_gt(f.calls, 0);
    for (int i = 0; i < f.calls && i < 16; i++)
        cr_assert(f.seen_sp[i], "trial %d (t = %d) runs without sequence parallelism", i,
                  f.seen[i].t);
    pp_tune_result_destroy(r);
    pp_tune_result_destroy(pred);
}

Test(tuner_search_runner, no_trials_off_this_machine_whatever_the_runner)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    pp_tune_hw hw = local_cpus();
    hw.is_local = 0;
    pp_tune_search_params sp = params(&m, &hw);
    fake f = {.oom_call = -1};
    sp.trials = 3;
    sp.runner = (pp_tune_runner){.run = fake_run, .ctx = &f};
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(f.calls, 0);
    cr_assert_eq(r->trialled, 0);
    pp_tune_result_destroy(r);
}

static void on_pass(void *ctx, const pp_tune_result *r)
{
    (void)r;
    (*(int *)ctx)++;
}

/* Nothing fits: one pass with every setting searched (no fallback switching one on after
 * another), and what did not fit says so with the settings it had, the most saving ones among
 * them. */
Test(tuner_search_runner, nothing_fits_in_one_pass_with_every_setting_tried)
{
    pp_tune_hw hw = {.name = "box",
                     .source = "test",
                     .nodes = 1,
                     .gpus_per_node = 8,
                     .mem_bytes = 1e8,
                     .peak_flops = 1e15,
                     .gemm_flops = 8e14,
                     .mem_bw = 3e12,
                     .intra_bw = 1e11,
                     .inter_bw = 1e11};
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    int passes = 0;
    pp_tune_search_params sp = {.model = &m, .hw = &hw, .allow_tp = 1, .keep = 5,
                                .on_pass = on_pass, .progress_ctx = &passes};
    pp_tune_opts_default(&sp.opts);
    pp_tune_force_init(&sp.force);
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(r->n_best, 0, "100 MB devices fit nothing");
    cr_assert_eq(passes, 1);
    int full_z2_sp = 0;
    for (long i = 0; i < r->n_rejects; i++) {
        const pp_config *c = &r->rejects[i].cfg;
        full_z2_sp |= r->rejects[i].stage == 1 && c->recompute == PP_RECOMPUTE_FULL &&
                      c->recompute_layers == 0 && c->shard == PP_SHARD_GRADIENTS &&
                      c->sequence_parallel && strstr(r->rejects[i].reason, "does not fit");
    }
    cr_assert(full_z2_sp, "the most saving settings were tried and did not fit");
    pp_tune_result_destroy(r);
}

Test(tuner_search_runner, leaderboard_entries_carry_their_schedule_and_memory)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset("dgx-h100", 1, &hw), PP_OK, "%s", pp_err_msg());
    pp_tune_search_params sp = {
        .model = &m, .hw = &hw, .allow_tp = 1, .keep = 8, .global_batch = 64};
    pp_tune_opts_default(&sp.opts);
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_gt(r->n_best, 0);
    for (int i = 0; i < r->n_best; i++) {
        const pp_tune_prediction *b = &r->best[i];
        cr_assert(b->sched && b->mem);
        cr_assert_eq(b->sched->ranks, b->cfg.p);
        cr_assert_eq(b->sched->microbatches, b->cfg.N);
        pp_tune_prediction again;
        pp_tune_rank_mem mem[64];
        cr_assert_eq(pp_tune_predict(&m, &hw, &b->cfg, &sp.opts, &again, mem), PP_OK);
        cr_assert_float_eq(again.step_time, b->step_time, 1e-15 * b->step_time);
        for (int k = 0; k < b->cfg.p; k++)
            cr_assert(!memcmp(&mem[k], &b->mem[k], sizeof mem[k]), "rank %d of #%d", k, i);
    }
    pp_tune_result_destroy(r);
}

static void bound_keeps_exact(pp_tune_opts o, pp_tune_force f, const pp_tune_hw *hw)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_search_params sp = {.model = &m, .hw = hw, .global_batch = 64, .allow_tp = 1,
                                .opts = o, .force = f, .max_cp = 2, .keep = 3};
    pp_tune_result *small = NULL, *all = NULL;
    cr_assert_eq(pp_tune_search(&sp, &small), PP_OK, "%s", pp_err_msg());
    sp.keep = 100000;
    cr_assert_eq(pp_tune_search(&sp, &all), PP_OK, "%s", pp_err_msg());
    cr_assert(small->bounded > 0, "the bound skipped nothing: the test shows nothing");
    cr_assert_eq(all->bounded, 0);
    cr_assert_eq(small->n_best, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_float_eq(small->best[i].step_time, all->best[i].step_time, 1e-15);
        cr_assert(pp_config_equal(&small->best[i].cfg, &all->best[i].cfg));
    }
    pp_tune_result_destroy(small);
    pp_tune_result_destroy(all);
}

Test(tuner_search_runner, lower_bound_is_exact_with_latencies_and_every_setting)
{
    pp_tune_hw hw = {.name = "box",
                     .source = "test",
                     .nodes = 2,
                     .gpus_per_node = 4,
                     .mem_bytes = 8e10,
                     .peak_flops = 1e15,
                     .gemm_flops = 8e14,
                     .mem_bw = 3e12,
                     .intra_bw = 2e10,
                     .inter_bw = 5e9,
                     .intra_lat = 5e-6,
                     .inter_lat = 2e-5};
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_tune_force f = {.recompute = PP_RECOMPUTE_NONE, .shard = PP_SHARD_NONE, .cp = 1};
    bound_keeps_exact(o, f, &hw);
    f.shard = PP_SHARD_OPTIMIZER;
    bound_keeps_exact(o, f, &hw);
    /* every setting searched: recompute (block k included), sequence parallelism, the three
     * shardings, cp 1 and 2 */
    pp_tune_force_init(&f);
    bound_keeps_exact(o, f, &hw);
}

Test(tuner_search_runner, config_round_trips_through_the_profile_and_launch_uses_the_builder)
{
    pp_config c = {.schedule = "interleaved", .p = 4, .v = 2, .G = 8, .b = 1, .d = 2, .t = 1,
                   .N = 16, .uneven = 1, .sequence_parallel = 1,
                   .recompute = PP_RECOMPUTE_SELECTIVE, .shard = PP_SHARD_OPTIMIZER, .cp = 1,
                   .ep = 1};
    /* the one type: the profile's JSON form of it reads back to the same configuration */
    json_t *j = pp_config_to_json(&c);
    cr_assert_not_null(j);
    cr_assert_str_eq(json_string_value(json_object_get(j, "schedule")), "interleaved");
    cr_assert_str_eq(json_string_value(json_object_get(j, "split")), "uneven");
    cr_assert_str_eq(json_string_value(json_object_get(j, "recompute")), "selective");
    pp_config back = {0};
    cr_assert_eq(pp_config_from_json(j, "test", "config", &back), PP_OK, "%s", pp_err_msg());
    cr_assert(pp_config_equal(&back, &c), "round trip");
    json_object_set_new(j, "schedule", json_string("a-schedule-name-not-in-the-registry"));
    cr_assert_eq(pp_config_from_json(j, "test", "config", &back), PP_ERR_PARSE);
    cr_assert(strstr(pp_err_text(), "test: field \"config.schedule\": expected one of gpipe"),
              "%s", pp_err_text());
    json_decref(j);
    c.sequence_parallel = 0, c.recompute = PP_RECOMPUTE_NONE;

    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    pp_tune_hw gpus = {.cpu_devices = 0};
    char line[512], args[512];
    pp_profile_pprun_line l = {.model = "tiny", .config = &c, .seq = m.seq, .backend = "cuda",
                               .precision = PP_PREC_BF16};
    char want[600];
    snprintf(want, sizeof want, "pprun %s", pp_profile_pprun_args(&l, args, sizeof args));
    cr_assert_str_eq(pp_tune_launch_command(&m, &gpus, &c, NULL, line, sizeof line), want);
    /* the search's options: fp32 drops --precision; the configuration's sequence parallelism
     * with t > 1 adds it */
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    o.precision = PP_PREC_FP32;
    c.sequence_parallel = 1;
    c.t = 2;
    pp_tune_launch_command(&m, &gpus, &c, &o, line, sizeof line);
    cr_assert_null(strstr(line, "--precision"), "%s", line);
    cr_assert(strstr(line, " --tp 2 --sequence-parallel"), "%s", line);
}

Test(tuner_search_runner, a_runnable_presets_pprun_name_is_its_profile_name)
{
    /* Trials, the profile's launch line and its export (and pprun --profile) give pprun the
     * profile's model name for a preset: every runnable preset is named as pprun names it. */
    int n;
    const char *const *names = pp_tune_model_names(&n);
    for (int i = 0; i < n; i++) {
        pp_tune_model m;
        cr_assert_eq(pp_tune_model_preset(names[i], &m), PP_OK);
        pp_profile_pprun_line l = {0};
        if (pp_tune_pprun_model(&m, &l) != PP_OK) {
            cr_assert(!m.pprun, "%s: %s", m.name, pp_err_msg());
            continue;
        }
        cr_assert(m.pprun && l.model && !strcmp(l.model, m.name) && !l.model_config,
                  "%s runs as %s", m.name, l.model);
    }
}
