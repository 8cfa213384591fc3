/* test_tuner_search_cli.c — the main job as a user runs it: `pptune --model gpt-13b --nodes 32`
 * prints a leaderboard and writes a versioned profile; `pptune models`; bad model files give one
 * clear line and exit 2. Runs the built pptune. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_test_run.h"

#include "pp_profile.h"

#define PPTUNE PP_BINARY_DIR "/tuner/pptune"
#define PPRUN PP_BINARY_DIR "/runtime/pprun"

Test(tuner_search_cli, gpt13b_on_32_nodes_prints_a_leaderboard_and_writes_a_profile)
{
    char dir[] = "/tmp/pptune_prof_XXXXXX";
    cr_assert(mkdtemp(dir));
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd, PPTUNE " --model gpt-13b --nodes 32 -o %s/p.json", dir);
    int rc = pp_test_run_merged(cmd, &out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "dgx-h100"), "the cluster used is stated: %s", out);
    cr_assert(strstr(out, "  1  "), "a leaderboard row: %s", out);
    cr_assert(strstr(out, "no trials"), "predicted figures are said to be predicted: %s", out);
    cr_assert(strstr(out, "launch: pprun"), "%s", out);

    char path[600];
    snprintf(path, sizeof path, "%s/p.json", dir);
    json_error_t e;
    json_t *p = json_load_file(path, 0, &e);
    cr_assert(p, "profile unreadable: %s", e.text);
    cr_assert_str_eq(json_string_value(json_object_get(p, "schema")), "pptune-profile");
    cr_assert_eq(json_integer_value(json_object_get(p, "version")), 1);
    json_t *chosen = json_object_get(p, "chosen");
    json_t *pred = json_object_get(chosen, "predicted");
    double mfu = json_number_value(json_object_get(pred, "mfu"));
    double step = json_number_value(json_object_get(pred, "step_time_s"));
    cr_assert(mfu > 0 && mfu <= 1, "MFU %f", mfu);
    cr_assert(step > 0);
    cr_assert(json_is_true(json_object_get(pred, "fits")));
    cr_assert(json_object_get(chosen, "measured") == NULL, "no trials on a preset");
    cr_assert(json_array_size(json_object_get(p, "runners_up")) > 0);
    json_t *cl = json_object_get(p, "cluster");
    cr_assert_eq(json_integer_value(json_object_get(cl, "nodes")), 32);
    cr_assert(strlen(json_string_value(json_object_get(cl, "fingerprint"))) > 0);
    json_t *stats = json_object_get(p, "search");
    cr_assert(json_integer_value(json_object_get(stats, "candidates_seen")) > 100);
    cr_assert(strstr(json_string_value(json_object_get(p, "figures")), "predicted only"));
    json_decref(p);
    free(out);
    unlink(path);
    rmdir(dir);
}

Test(tuner_search_cli, default_store_path_is_the_stores_and_profiles_reads_it)
{
    char dir[] = "/tmp/pptune_xdg_XXXXXX";
    cr_assert(mkdtemp(dir));
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd,
             "XDG_DATA_HOME=%s " PPTUNE " --model gpt-1.3b --nodes 2 --schedules 1f1b", dir);
    cr_assert_eq(pp_test_run_merged(cmd, &out), 0, "%s", out);
    /* <store>/<fingerprint with ':' as '-'>/<model>.json, profiles/'s key */
    char prefix[600];
    snprintf(prefix, sizeof prefix, "profile: %s/pptune/profiles/sha256-", dir);
    const char *at = strstr(out, prefix);
    cr_assert(at, "%s", out);
    char path[700];
    cr_assert_eq(sscanf(at, "profile: %699s", path), 1);
    cr_assert(strstr(path, "/gpt-1.3b.json"), "%s", path);
    pp_profile *p = NULL;
    cr_assert_eq(pp_profile_read(path, &p), PP_OK, "profiles/ cannot read it: %s", pp_err_msg());
    cr_assert(p->has_chosen);
    cr_assert_str_eq(p->chosen.config.schedule, "1f1b");
    cr_assert_eq(p->cluster.nodes, 2);
    pp_profile_destroy(p);
    free(out);
    snprintf(cmd, sizeof cmd, "rm -r %s", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(tuner_search_cli, explain_lists_why_the_rest_lost)
{
    char *out;
    int rc = pp_test_run_merged(PPTUNE " --model gpt-13b --nodes 4 --no-save --explain=all", &out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "every rejected candidate"), "%s", out);
    cr_assert(strstr(out, "[rule     ]"), "rule rejects listed");
    cr_assert(strstr(out, "does not fit"), "memory rejects listed");
    free(out);
}

Test(tuner_search_cli, models_lists_presets_with_sizes)
{
    char *out;
    cr_assert_eq(pp_test_run_merged(PPTUNE " models", &out), 0, "%s", out);
    cr_assert(strstr(out, "gpt-13b          12.9 B"), "%s", out);
    cr_assert(strstr(out, "tiny             61.1 K"), "%s", out);
    cr_assert(strstr(out, "llama3-405b"), "%s", out);
    cr_assert(strstr(out, "tiny"), "%s", out);
    free(out);
}

/* A mixture-of-experts config: `pptune models` states its exact total and active counts;
 * the search plans it with expert parallelism (issue 28's done-when: Mixtral 8x7B on 16 nodes,
 * a leaderboard with ep, #1's expert parallelism stated, a profile 1.5 whose chosen config and
 * model carry ep and the experts, no pprun launch line on GPUs: pprun runs MoE layers on the
 * cpu backend only). (pprun runs Qwen3-MoE's block, its per-head q/k norm with the experts:
 * runtime_moe/pprun_ep2_trains_as_ep1 with tests/fixtures/hf/tiny-qwen3-moe.json.) */
Test(tuner_search_cli, mixture_of_experts_are_counted_planned_with_ep_and_no_gpu_launch)
{
    char prof[] = "/tmp/pptune_moe_XXXXXX";
    int fd = mkstemp(prof);
    cr_assert_geq(fd, 0);
    close(fd);
    char *out;
    cr_assert_eq(pp_test_run_merged(PPTUNE " models --model-config "
                                           PP_FIXTURES_DIR "/hf/mixtral-8x7b-v0.1.json",
                                    &out),
                 0, "%s", out);
    cr_assert(strstr(out, "46,702,792,704 parameters in all, 12,879,925,248 active per token"),
              "%s", out);
    cr_assert(strstr(out, "experts: 8 of width 14336, top-2"), "%s", out);
    free(out);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             PPTUNE " --model-config " PP_FIXTURES_DIR "/hf/mixtral-8x7b-v0.1.json --nodes 16 "
                    "--schedules zbv -o %s", prof); /* the default search's winner's schedule
                                                      alone: a fifth of its time (ASan CI) */
    cr_assert_eq(pp_test_run_merged(cmd, &out), 0, "%s", out);
    cr_expect(strstr(out, ",ep8 ") || strstr(out, ",ep4 ") || strstr(out, " ep2 "), "%s", out);
    cr_expect(strstr(out, "; expert parallelism "), "%s", out);
    cr_expect(strstr(out, "launch: none with pprun: pprun runs mixture-of-experts layers on the cpu"),
              "%s", out);
    free(out);
    json_error_t err;
    json_t *p = json_load_file(prof, 0, &err);
    cr_assert_not_null(p, "%s", err.text);
    json_t *c = json_object_get(json_object_get(p, "chosen"), "config");
    json_t *moe = json_object_get(json_object_get(p, "model"), "moe");
    cr_expect_gt(json_integer_value(json_object_get(c, "ep")), 1);
    cr_expect_eq(json_integer_value(json_object_get(moe, "experts")), 8);
    cr_expect_eq(json_integer_value(json_object_get(moe, "top_k")), 2);
    cr_expect_eq(json_integer_value(json_object_get(moe, "ffn")), 14336);
    json_decref(p);
    unlink(prof);
}

Test(tuner_search_cli, bad_model_file_is_one_line_and_exit_2)
{
    char path[] = "/tmp/pptune_badmodel_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    const char *text = "{\"num_hidden_layers\": 0}";
    cr_assert(write(fd, text, strlen(text)) > 0);
    close(fd);
    char cmd[256], *out;
    snprintf(cmd, sizeof cmd, PPTUNE " --model-config %s --nodes 2 --no-save", path);
    cr_assert_eq(pp_test_run_merged(cmd, &out), 2, "%s", out);
    cr_assert(strstr(out, path) &&
                  strstr(out, "\"num_hidden_layers\": expected a positive integer"),
              "%s", out);
    free(out);
    unlink(path);
}

Test(tuner_search_cli, simulate_one_configuration)
{
    char *out;
    int rc = pp_test_run_merged(
        PPTUNE " simulate --model gpt-13b --nodes 4 --schedule interleaved -p 4 -v 2 "
               "-t 2 -b 2 --timeline",
        &out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "step time"), "%s", out);
    cr_assert(strstr(out, "fullest rank"), "%s", out);
    free(out);
}

Test(tuner_search_cli, tiny_on_this_machine_runs_trials_and_records_them)
{
    char path[] = "/tmp/pptune_local_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd,
             PPTUNE " --model tiny --cluster local --trials 2 --trial-steps 3 --keep 4 -o %s",
             path);
    cr_assert_eq(pp_test_run_merged(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "trials: #1") && strstr(out, "(--trials 2: the 2 fastest"), "%s", out);
    json_error_t e;
    json_t *p = json_load_file(path, 0, &e);
    cr_assert(p, "%s", e.text);
    json_t *measured = json_object_get(json_object_get(p, "chosen"), "measured");
    cr_assert(measured, "the winner was measured");
    cr_assert_str_eq(json_string_value(json_object_get(measured, "status")), "ok");
    cr_assert(json_number_value(json_object_get(measured, "step_time_s")) > 0);
    cr_assert(json_object_get(p, "calibration"));
    json_t *chosen = json_object_get(p, "chosen");
    int pp = (int)json_integer_value(json_object_get(json_object_get(chosen, "config"), "p"));
    json_t *pred_ranks = json_object_get(json_object_get(chosen, "predicted"), "memory_per_rank");
    json_t *meas_ranks = json_object_get(measured, "peak_bytes_per_rank");
    cr_assert_eq((int)json_array_size(pred_ranks), pp, "predicted memory for every rank");
    cr_assert_eq((int)json_array_size(meas_ranks), pp, "measured peak for every rank");
    for (int r = 0; r < pp; r++) {
        double pr = json_number_value(json_object_get(json_array_get(pred_ranks, r), "total"));
        double me = json_number_value(json_array_get(meas_ranks, r));
        cr_assert(me > 0 && pr > 0.97 * me && pr < 1.03 * me, "rank %d: %f vs %f", r, pr, me);
    }
    cr_assert(json_is_object(json_object_get(json_object_get(p, "cluster"), "description")),
              "a probed cluster's description is embedded");
    cr_assert(strstr(json_string_value(json_object_get(p, "figures")), "measured"));
    json_decref(p);
    free(out);
    unlink(path);
}

/* The case: llama3-405b on 2048 nodes fits with its settings searched in one pass (no
 * "retrying with"), the header and the #1 line state the winner's settings, and the profile's
 * chosen config records them (the options too, for readers of 1.0 and 1.1). */
Test(tuner_search_cli, llama3_405b_on_2048_nodes_searches_the_settings_and_states_them)
{
    char path[] = "/tmp/pptune_405b_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd, PPTUNE " --model llama3-405b --nodes 2048 -o %s", path);
    cr_assert_eq(pp_test_run_merged(cmd, &out), 0, "%s", out);
    cr_assert_null(strstr(out, "retrying"), "%s", out);
    cr_assert(strstr(out, "settings recompute, sequence parallelism, sharding, context "
                          "parallelism: searched"),
              "%s", out);
    const char *win = strstr(out, "\n#1 ");
    cr_assert(win && strstr(win, "recompute ") && strstr(win, "context parallelism "), "%s", out);
    json_error_t e;
    json_t *p = json_load_file(path, 0, &e);
    cr_assert(p, "%s", e.text);
    json_t *chosen = json_object_get(p, "chosen");
    json_t *c = json_object_get(chosen, "config");
    const char *shard = json_string_value(json_object_get(c, "shard"));
    cr_assert_not_null(shard);
    cr_assert_eq(json_is_true(json_object_get(json_object_get(p, "options"),
                                              "distributed_optimizer")),
                 strcmp(shard, "none") != 0, "the options say the chosen one's sharding");
    cr_assert(json_is_integer(json_object_get(c, "cp")));
    cr_assert(json_is_true(json_object_get(json_object_get(chosen, "predicted"), "fits")));
    cr_assert_eq(json_integer_value(json_object_get(p, "version_minor")), PP_PROFILE_VERSION_MINOR);
    json_decref(p);
    free(out);
    unlink(path);
}

/* One builder of pprun's command line: the profile's launch line is `pprun` + what
 * `pptune export --format pprun` prints for that profile (issue 11: they disagreed once). */
Test(tuner_search_cli, profile_launch_line_equals_the_pprun_export)
{
    char path[] = "/tmp/pptune_launch_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd, PPTUNE " --model tiny --cluster local --trials 0 -o %s", path);
    cr_assert_eq(pp_test_run_merged(cmd, &out), 0, "%s", out);
    free(out);
    json_error_t e;
    json_t *p = json_load_file(path, 0, &e);
    cr_assert(p, "%s", e.text);
    const char *launch =
        json_string_value(json_object_get(json_object_get(p, "chosen"), "launch"));
    cr_assert(launch);
    snprintf(cmd, sizeof cmd, PPTUNE " export --format pprun %s", path);
    cr_assert_eq(pp_test_run_merged(cmd, &out), 0, "%s", out);
    char want[600];
    snprintf(want, sizeof want, "pprun %s", out);
    want[strcspn(want, "\n")] = '\0';
    cr_assert_str_eq(launch, want);
    free(out);
    json_decref(p);
    unlink(path);
}

/* ---- absurd sizes (issue 18, finding 4): each once a SIGFPE (exit 136) from a 32-bit product
 * wrapping to 0; now exit 2 with a message naming the option or field ---- */
static void expect_refused(const char *args, const char *name)
{
    pp_test_run_result r = pp_test_run(PPTUNE " %s", args);
    cr_expect_eq(r.code, 2, "%s: exit %d: %s", args, r.code, r.err);
    cr_expect(strstr(r.err, name), "%s: the message names %s: %s", args, name, r.err);
    pp_test_run_done(&r);
}

Test(tuner_search_cli, products_of_huge_sizes_do_not_wrap_to_zero)
{
    expect_refused("--model gpt-13b --max-b 536870912 --no-save", "--max-b");
    expect_refused("simulate --model gpt-13b -p 65536 -t 65536", "-p x -t");
    expect_refused("simulate --model gpt-13b -b 536870912", "-b x d");
    char path[] = "/tmp/pptune_model_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "{\"format\": \"pptune-model\", \"version\": 1, \"name\": \"m\", \"layers\": 8,"
               " \"hidden\": 1024, \"heads\": 16, \"vocab\": 32000, \"seq\": 2048,"
               " \"global_batch\": 1073741824}");
    fclose(f);
    char args[256];
    snprintf(args, sizeof args, "--model-file %s --no-save", path);
    expect_refused(args, "global_batch");
    f = fopen(path, "w");
    fprintf(f, "{\"format\": \"pptune-model\", \"version\": 1, \"name\": \"m\", \"layers\": 8,"
               " \"hidden\": 1073741824, \"heads\": 16, \"vocab\": 32000, \"seq\": 2048}");
    fclose(f);
    expect_refused(args, "hidden"); /* 4 * hidden, the default FFN, was signed overflow */
    unlink(path);
    expect_refused("--model gpt-13b --global-batch 2000000000 --no-save", "--global-batch");
}

Test(tuner_search_cli, an_absurd_timeline_width_is_refused)
{
    /* issue 18, finding 6: --width 1e9 took 2 GB */
    expect_refused("schedule --kind 1f1b --ranks 4 --microbatches 8 --width 1000000000",
                   "--width");
}

Test(tuner_search_cli, arguments_echoed_in_messages_keep_them_on_one_line)
{
    /* issue 18, finding 14: raw newlines from arguments let a message forge lines */
    pp_test_run_result r = pp_test_run(PPTUNE " --model 'x\nFAKE: ok' --no-save");
    cr_expect_eq(r.code, 2, "%s", r.err);
    cr_expect(strstr(r.err, "unknown model \"x\\nFAKE: ok\""), "%s", r.err);
    cr_expect_null(strstr(r.err, "\nFAKE"), "%s", r.err);
    pp_test_run_done(&r);
    r = pp_test_run(PPTUNE " schedule --kind 1f1b --ranks '4\nFAKE' --microbatches 4");
    cr_expect_eq(r.code, 2, "%s", r.err);
    cr_expect_null(strstr(r.err, "\nFAKE"), "%s", r.err);
    pp_test_run_done(&r);
}

/* --for FORMAT (issue 31 item 2): a search for an export target keeps to the schedules that
 * target runs (its row of the export table), so its profile exports there without a refusal:
 * for every format, every leaderboard row runs there and `export --format FORMAT` succeeds;
 * --schedules outside the target's and an unknown format are bad usage (exit 2). */
Test(tuner_search_cli, for_a_target_searches_what_it_runs_and_exports_there)
{
    int n;
    const pp_export_target *t = pp_profile_export_targets(&n);
    char dir[] = "/tmp/pptune_for_XXXXXX";
    cr_assert(mkdtemp(dir));
    for (int i = 0; i < n; i++) {
        if (t[i].target) /* a variant (--target): no --for of its own */
            continue;
        pp_test_run_result r = pp_test_run(
            "cd %s && " PPTUNE " --model gpt-13b --nodes 32 --for %s -o %s.json --top 10 && " PPTUNE
            " export --format %s %s.json > /dev/null",
            dir, t[i].format, t[i].format, t[i].format, t[i].format);
        cr_assert_eq(r.code, 0, "--for %s: %s%s", t[i].format, r.out, r.err);
        int rows = 0;
        for (const char *l = strstr(r.out, "\n  1  "); l && l[1] == ' '; l = strchr(l + 1, '\n')) {
            char sched[32];
            int k;
            if (sscanf(l + 1, "%d %31s", &k, sched) != 2)
                break;
            cr_expect(pp_profile_export_runs(&t[i], sched), "--for %s: row %d is %s", t[i].format,
                      k, sched);
            rows++;
        }
        cr_expect_gt(rows, 0, "--for %s: no leaderboard: %s", t[i].format, r.out);
        pp_test_run_done(&r);
    }
    pp_test_run_result r =
        pp_test_run(PPTUNE " --model gpt-13b --nodes 32 --for megatron --schedules zbv --no-save");
    cr_expect_eq(r.code, 2);
    cr_expect(strstr(r.err, "--schedules zbv: --for megatron runs only gpipe,1f1b,interleaved"),
              "%s", r.err);
    pp_test_run_done(&r);
    /* pprun runs recomputation and both shardings: --shard gradients is searched */
    r = pp_test_run(PPTUNE " --model gpt-13b --nodes 32 --for pprun --shard gradients --no-save");
    cr_expect_eq(r.code, 0, "%s", r.err);
    cr_expect(strstr(r.out, "z2"), "%s", r.out);
    pp_test_run_done(&r);
    /* ... but not ZeRO-2 with a schedule whose two pipes hold the same layers: a rule there */
    r = pp_test_run(PPTUNE " --model gpt-13b --nodes 32 --for pprun --schedules chimera,1f1b "
                           "--shard gradients --explain --no-save");
    cr_expect_eq(r.code, 0, "%s", r.err);
    cr_expect(strstr(r.out, "chimera     no candidate is valid") &&
                  strstr(r.out, "pprun (--for pprun) has no option for shard gradients with a "
                                "schedule whose pipes share layers"),
              "%s", r.out);
    pp_test_run_done(&r);
    r = pp_test_run(PPTUNE " --model gpt-13b --nodes 32 --for megatron-lm --no-save");
    cr_expect_eq(r.code, 2);
    cr_expect(strstr(r.err, "expected megatron, nemo"), "%s", r.err);
    pp_test_run_done(&r);
    pp_test_run_result rm = pp_test_run("rm -rf %s", dir);
    pp_test_run_done(&rm);
}

/* Issue 30, finding 10: absurd sizes are refused with exit 2 before anything is allocated (a
 * 32 GiB link table for 65536 ranks, 1.4 TB of leaderboard for --keep 1000000000), not ended
 * by an out-of-memory exit 1. */
Test(tuner_search_cli, absurd_sizes_are_refused_before_allocating, .timeout = 120)
{
    expect_refused("schedule --kind 1f1b --ranks 65536 --microbatches 1", "at most 4096");
    expect_refused("--model tiny --cluster local --keep 1000000000 --no-save", "--keep");
    expect_refused("--model tiny --cluster local --top 1000000000 --no-save", "--top");
}

/* Issue 30, finding 11: the smaller ones. */
Test(tuner_search_cli, options_that_were_accepted_silently_are_refused, .timeout = 120)
{
    /* a blank before a number is a typo, not the number */
    expect_refused("--model tiny --cluster local --nodes ' 8' --no-save", "--nodes");
    expect_refused("schedule --kind 1f1b --ranks ' 2' --microbatches 4", "--ranks");
    /* --chunks with a schedule of one chunk per rank */
    expect_refused("schedule --kind 1f1b --ranks 2 --microbatches 4 --chunks 2", "--chunks 2");
    pp_test_run_result r = pp_test_run(PPRUN " --model tiny --schedule 1f1b --ranks 2 "
                                             "--microbatches 2 --chunks 3 --steps 1");
    cr_expect_eq(r.code, 2, "pprun --chunks 3 with 1f1b: exit %d: %s", r.code, r.err);
    cr_expect(strstr(r.err, "--chunks 3"), "%s", r.err);
    pp_test_run_done(&r);
    /* -o and --report naming one file */
    char dir[] = "/tmp/pptune_same_XXXXXX";
    cr_assert(mkdtemp(dir));
    char args[512];
    snprintf(args, sizeof args, "--model tiny --cluster local -o %s/x --report %s/./x", dir, dir);
    expect_refused(args, "name one file");
    char path[256];
    snprintf(path, sizeof path, "%s/x", dir);
    cr_expect_neq(access(path, F_OK), 0, "something was written to %s", path);
    /* a trace that cannot be written is a failed write (exit 1), as every other writer's */
    r = pp_test_run("ulimit -f 2; trap '' XFSZ; " PPRUN " --model tiny --schedule 1f1b --ranks 2 "
                    "--microbatches 4 --steps 3 --trace %s/t.json", dir);
    cr_expect_eq(r.code, 1, "pprun --trace past the file size limit: exit %d: %s", r.code, r.err);
    cr_expect(strstr(r.err, "write failed"), "%s", r.err);
    pp_test_run_done(&r);
    snprintf(path, sizeof path, "%s/t.json", dir);
    unlink(path);
    rmdir(dir);
}

/* What pprun runs is trialled, recomputation with context parallelism among it (the runtime's
 * ring reruns in the backward), and both shardings (on two cores: d = 2 with p = 1, so the
 * shards are real). What it does not run (sharding or cp in a GPU line's bf16, ZeRO-2 with
 * chimera) is named by pp_profile_pprun_unrun (test_profiles_pprun_line.c) and not trialled
 * (search_trials.c); no CPU candidate of this machine has it. */
Test(tuner_search_cli, settings_pprun_runs_are_trialled, .timeout = 300)
{
    pp_test_run_result r;
    const char *runs[] = {"--shard optimizer --recompute full", "--shard gradients --cp 1",
                          "--recompute full --cp 2"};
    for (int i = 0; i < 3; i++) {
        r = pp_test_run(PPTUNE " --model tiny --cluster local %s --trials 1 --trial-steps 2 "
                               "--no-save",
                        runs[i]);
        cr_assert_eq(r.code, 0, "%s: %.4000s", runs[i], r.err);
        cr_expect(!strstr(r.err, "trial not started"), "%s: %.4000s", runs[i], r.err);
        cr_expect(!strstr(r.out, "no trials: none could run"), "%s: %.4000s", runs[i], r.out);
        pp_test_run_done(&r);
    }
}

/* Issue 26: a search of a HuggingFace config.json on this machine trials the model the file
 * describes (pprun --model-config, the file the search read: Llama's block, measured.model says
 * what pprun trained), records the file by absolute path and SHA-256, and prints a launch line
 * that runs as printed from another directory (before: no trials, and `pprun --model
 * tiny-llama3`, which pprun refuses as unknown). */
#define TINY_LLAMA3 PP_FIXTURES_DIR "/hf/tiny-llama3.json"

/* `sha256sum FILE`'s digest (coreutils: a digest that is not pptune's own code). */
static void sha256sum(const char *path, char hex[65])
{
    pp_test_run_result r = pp_test_run("sha256sum '%s'", path);
    cr_assert_eq(r.code, 0, "%s", r.err);
    snprintf(hex, 65, "%.64s", r.out);
    pp_test_run_done(&r);
}

/* Makes the folder dir (a mkdtemp template) and searches config (a path relative to folder
 * `cd`; NULL: dir, into which the fixture is copied as config.json first) on this machine with
 * `trials` trials of a global batch of 8 (seconds each) and the options `more`, writing
 * dir/p.json; asserts exit 0. */
static pp_test_run_result hf_search_with(char *dir, const char *cd, const char *config,
                                         int trials, const char *more)
{
    cr_assert(mkdtemp(dir));
    pp_test_run_result r = pp_test_run(
        "cd %s && %s" PPTUNE " --model-config %s --cluster local --trials %d --trial-steps 2 "
        "--global-batch 8 %s -o %s/p.json",
        cd ? cd : dir, cd ? "" : "cp " TINY_LLAMA3 " config.json && ", config, trials, more,
        dir);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    return r;
}

static pp_test_run_result hf_search(char *dir, const char *cd, const char *config, int trials)
{
    return hf_search_with(dir, cd, config, trials, "");
}

/* The profile dir/p.json that hf_search wrote (into *p, which the caller frees; path: its
 * name) and the model its chosen row's trial trained, asserting the trial ran ok (out: the
 * search's output, for the message). */
static const char *trial_model(const char *dir, char *path, size_t n, json_t **p, const char *out)
{
    snprintf(path, n, "%s/p.json", dir);
    json_error_t e;
    *p = json_load_file(path, 0, &e);
    cr_assert(*p, "%s", e.text);
    json_t *measured = json_object_get(json_object_get(*p, "chosen"), "measured");
    cr_assert_str_eq(json_string_value(json_object_get(measured, "status")), "ok", "%s", out);
    return json_string_value(json_object_get(measured, "model"));
}

Test(tuner_search_cli, a_config_json_search_trials_its_llama_block_and_its_launch_line_runs)
{
    char dir[] = "/tmp/pptune_hfsearch_XXXXXX";
    /* the file named relatively (from its own folder), as a user would */
    pp_test_run_result r = hf_search(dir, PP_FIXTURES_DIR, "hf/tiny-llama3.json", 1);
    char abs[4096], hex[65];
    cr_assert(realpath(TINY_LLAMA3, abs));
    sha256sum(abs, hex);

    /* the trial ran the config's model: pprun's own summary, as the profile records it */
    char path[600];
    json_t *p;
    const char *ran = trial_model(dir, path, sizeof path, &p, r.out);
    json_error_t e;
    cr_assert(ran && !strncmp(ran, abs, strlen(abs)) && strstr(ran, "RMSNorm") &&
                  strstr(ran, "SwiGLU") && strstr(ran, "llama3 scaling") &&
                  strstr(ran, "2 KV heads") && strstr(ran, "untied head"),
              "the trial trained %s", ran ? ran : "(nothing recorded)");
    json_t *origin = json_object_get(json_object_get(p, "model"), "origin");
    cr_assert_str_eq(json_string_value(json_object_get(origin, "kind")), "config.json");
    cr_assert_str_eq(json_string_value(json_object_get(origin, "path")), abs);
    cr_assert_str_eq(json_string_value(json_object_get(origin, "sha256")), hex);

    /* the launch line as printed, run from elsewhere with pprun on the PATH */
    const char *at = strstr(r.out, "\nlaunch: ");
    cr_assert(at, "%s", r.out);
    char line[2048];
    snprintf(line, sizeof line, "%s", at + strlen("\nlaunch: "));
    line[strcspn(line, "\n")] = '\0';
    char want[4200];
    snprintf(want, sizeof want, "pprun --model-config %s ", abs);
    cr_assert(!strncmp(line, want, strlen(want)), "%s", line);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(p, "chosen"), "launch")),
                     line);
    pp_test_run_result run = pp_test_run("cd %s && PATH=" PP_BINARY_DIR "/runtime:$PATH %s "
                                         "--steps 2 --json --quiet",
                                         dir, line);
    cr_assert_eq(run.code, 0, "%s: %s", line, run.err);
    json_t *sum = json_loads(run.out, 0, &e);
    cr_assert(sum, "%s", run.out);
    json_t *m = json_object_get(sum, "model");
    cr_assert_str_eq(json_string_value(json_object_get(m, "name")), abs);
    cr_assert(strstr(ran, json_string_value(json_object_get(m, "block"))), "%s vs %s", ran,
              json_string_value(json_object_get(m, "block")));
    json_decref(sum);
    pp_test_run_done(&run);
    json_decref(p);
    pp_test_run_done(&r);
    unlink(path);
    rmdir(dir);
}

/* A search of this machine for the config.json fixture hf/NAME.json: its one trial trains the
 * block the file describes (pprun's own description of it holds every `needs`, NULL-ended),
 * measures the peak the search predicted (the runtime's plan) to the byte, and the search
 * prints a pprun launch line for the file. */
static void expect_config_search_trials(const char *name, const char *const *needs)
{
    char dir[] = "/tmp/pptune_cfgsearch_XXXXXX", rel[256], fixture[1024], path[600], abs[4096];
    snprintf(rel, sizeof rel, "hf/%s.json", name);
    snprintf(fixture, sizeof fixture, PP_FIXTURES_DIR "/%s", rel);
    pp_test_run_result r = hf_search(dir, PP_FIXTURES_DIR, rel, 1);
    cr_assert(realpath(fixture, abs));
    json_t *p;
    const char *ran = trial_model(dir, path, sizeof path, &p, r.out);
    for (const char *const *n = needs; *n; n++)
        cr_assert(ran && strstr(ran, *n), "%s: the trial trained %s, without \"%s\"", name,
                  ran ? ran : "(nothing recorded)", *n);
    json_t *chosen = json_object_get(p, "chosen"), *cfg = json_object_get(chosen, "config");
    double measured = json_number_value(json_object_get(json_object_get(chosen, "measured"),
                                                        "peak_bytes"));
    double predicted = json_number_value(
        json_object_get(json_object_get(chosen, "predicted"), "peak_bytes_per_rank_max"));
    /* Every byte the plan places by program order is exact; the in-process transport's copy of
     * a pipeline message lives on the sender until the receiver takes it, which the plan can
     * only predict from a simulated timeline (runtime/plan/pp_rt_plan.h), and which the OS
     * decides on a loaded machine. So with p = 1 (no pipeline messages) the peak is equal to
     * the byte, and with p > 1 it differs by whole message copies (b x seq x hidden fp32
     * values: no sequence or context parallelism in these trials), at most one per send. */
    long pipe = json_integer_value(json_object_get(cfg, "p"));
    long b = json_integer_value(json_object_get(cfg, "b"));
    long nmb = json_integer_value(json_object_get(cfg, "N"));
    json_t *model = json_object_get(p, "model");
    double io = 4.0 * (double)b * (double)json_integer_value(json_object_get(model, "seq")) *
                (double)json_integer_value(json_object_get(model, "hidden"));
    double diff = measured - predicted;
    cr_assert(measured > 0 && io > 0 && !json_is_true(json_object_get(cfg, "sequence_parallel")) &&
                  json_integer_value(json_object_get(cfg, "cp")) == 1,
              "%s: a trial with sequence or context parallelism (not this test's case)", name);
    if (pipe == 1)
        cr_assert(diff == 0, "%s: measured %.0f B, predicted %.0f B", name, measured, predicted);
    else
        cr_assert(fmod(fabs(diff), io) == 0 && fabs(diff) <= 2 * nmb * io,
                  "%s (p = %ld): measured %.0f B, predicted %.0f B, not within whole message "
                  "copies of %.0f B",
                  name, pipe, measured, predicted, io);
    char want[4200];
    snprintf(want, sizeof want, "\nlaunch: pprun --model-config %s ", abs);
    cr_assert(strstr(r.out, want), "%s", r.out);
    json_decref(p);
    pp_test_run_done(&r);
    unlink(path);
    rmdir(dir);
}

/* A Qwen3ForCausalLM config.json (tests/fixtures/hf/tiny-qwen3.json: the per-head q/k RMSNorm,
 * head_dim 16 for hidden 32 / 4 heads): the search trials Qwen3's block. */
Test(tuner_search_cli, a_qwen3_config_json_search_trials_its_block)
{
    static const char *const needs[] = {"q/k RMSNorm", "head_dim 16", "2 KV heads", NULL};
    expect_config_search_trials("tiny-qwen3", needs);
}

/* A MixtralForCausalLM config.json (tests/fixtures/hf/tiny-mixtral.json: 4 experts, top-2): the
 * search plans the MoE block with the runtime's own plan and trials its experts. */
Test(tuner_search_cli, a_mixtral_config_json_search_trials_its_experts)
{
    static const char *const needs[] = {"experts: 4 of width 48, top-2", NULL};
    expect_config_search_trials("tiny-mixtral", needs);
}

/* The profile's config.json is checked where pprun reads it again: pprun --profile trains the
 * file while it is the one the search read, and both pprun --profile and the pprun export refuse
 * it once changed (exit 2, the file and both digests named); the export names it by path. */
Test(tuner_search_cli, a_changed_config_json_is_refused_by_pprun_profile_and_the_export)
{
    char dir[] = "/tmp/pptune_hfchanged_XXXXXX";
    pp_test_run_result r = hf_search(dir, NULL, "config.json", 0);
    pp_test_run_done(&r);
    r = pp_test_run("cd / && " PPTUNE " export --format pprun %s/p.json", dir);
    cr_assert_eq(r.code, 0, "%s", r.err);
    char want[256];
    snprintf(want, sizeof want, "--model-config %s/config.json --schedule ", dir);
    cr_assert(!strncmp(r.out, want, strlen(want)), "%s", r.out);
    pp_test_run_done(&r);
    r = pp_test_run("cd / && " PPRUN " --profile %s/p.json --steps 1 --json --quiet", dir);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "llama3 scaling"), "%s", r.out);
    pp_test_run_done(&r);

    r = pp_test_run("cd %s && sed -i 's/\"num_hidden_layers\": 4/\"num_hidden_layers\": 2/' "
                    "config.json && " PPRUN " --profile p.json --steps 1",
                    dir);
    cr_assert_eq(r.code, 2, "a changed file trained: %s%s", r.out, r.err);
    char file[300];
    snprintf(file, sizeof file, "config.json %s/config.json changed since pptune read it", dir);
    cr_assert(strstr(r.err, file) && strstr(r.err, "SHA-256 now"), "%s", r.err);
    pp_test_run_done(&r);
    r = pp_test_run("cd %s && " PPTUNE " export --format pprun p.json", dir);
    cr_assert_eq(r.code, 2, "%s", r.out);
    cr_assert(strstr(r.err, file), "%s", r.err);
    pp_test_run_done(&r);
    r = pp_test_run("rm -r %s", dir);
    pp_test_run_done(&r);
}

/* `pptune --layers L` plans and trials the model's first L blocks (pprun --layers L: a few
 * layers of a big model): the profile says L and the config's own count, the trial trained L
 * layers of the Llama block, and the launch line, the pprun export and pprun --profile give
 * pprun --layers L, each training L layers (before: no such option; a cut could not be tuned). */
static json_t *pprun_summary_model(const char *cmd, json_t **sum)
{
    pp_test_run_result run = pp_test_run("%s", cmd);
    cr_assert_eq(run.code, 0, "%s: %s", cmd, run.err);
    json_error_t e;
    *sum = json_loads(run.out, 0, &e);
    cr_assert(*sum, "%s: %s", cmd, run.out);
    pp_test_run_done(&run);
    return json_object_get(*sum, "model");
}

Test(tuner_search_cli, layers_cuts_the_model_for_the_plan_the_trial_and_the_launch_line)
{
    char dir[] = "/tmp/pptune_hflayers_XXXXXX";
    pp_test_run_result r = hf_search_with(dir, NULL, "config.json", 1, "--layers 2");
    cr_assert(strstr(r.out, "layers L=2 from --layers (the model has 4"), "%s", r.out);
    char path[600], cfg[600];
    json_t *p;
    const char *ran = trial_model(dir, path, sizeof path, &p, r.out);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    json_t *model = json_object_get(p, "model");
    cr_assert_eq(json_integer_value(json_object_get(model, "layers")), 2);
    json_t *origin = json_object_get(model, "origin");
    cr_assert_eq(json_integer_value(json_object_get(origin, "layers")), 4, "the config's own");
    json_t *chosen = json_object_get(p, "chosen");
    cr_assert(ran && strstr(ran, ": 2 layers, RMSNorm") && strstr(ran, "2 KV heads"),
              "the trial trained %s", ran ? ran : "(nothing recorded)");

    /* the launch line as printed, the export's line and --profile: 2 layers of the file */
    const char *launch = json_string_value(json_object_get(chosen, "launch"));
    char want[700];
    snprintf(want, sizeof want, "pprun --model-config %s --layers 2 --schedule ", cfg);
    cr_assert(launch && !strncmp(launch, want, strlen(want)), "%s", launch);
    char cmd[3000];
    json_t *sum;
    snprintf(cmd, sizeof cmd, "cd / && PATH=" PP_BINARY_DIR "/runtime:$PATH %s --steps 1 "
             "--json --quiet", launch);
    cr_assert_eq(json_integer_value(json_object_get(pprun_summary_model(cmd, &sum), "layers")),
                 2, "%s", cmd);
    json_decref(sum);
    pp_test_run_result x = pp_test_run(PPTUNE " export --format pprun %s", path);
    cr_assert_eq(x.code, 0, "%s", x.err);
    cr_assert(!strncmp(x.out, want + strlen("pprun "), strlen(want) - strlen("pprun ")), "%s",
              x.out);
    snprintf(cmd, sizeof cmd, "cd / && " PPRUN " %.*s --steps 1 --json --quiet",
             (int)strcspn(x.out, "\n"), x.out);
    pp_test_run_done(&x);
    cr_assert_eq(json_integer_value(json_object_get(pprun_summary_model(cmd, &sum), "layers")),
                 2, "%s", cmd);
    json_decref(sum);
    snprintf(cmd, sizeof cmd, "cd / && " PPRUN " --profile %s --steps 1 --json --quiet", path);
    cr_assert_eq(json_integer_value(json_object_get(pprun_summary_model(cmd, &sum), "layers")),
                 2, "%s", cmd);
    json_decref(sum);
    json_decref(p);
    pp_test_run_done(&r);
    r = pp_test_run("rm -r %s", dir);
    pp_test_run_done(&r);
}

/* A model pprun does not train gets no pprun line: the search says why instead of a launch
 * line, and the pprun export of its profile is refused (before: `pprun --model bert-large`,
 * and the export exited 0 with it). */
Test(tuner_search_cli, no_pprun_line_for_a_model_pprun_does_not_train)
{
    char path[] = "/tmp/pptune_bert_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    pp_test_run_result r =
        pp_test_run(PPTUNE " --model bert-large --nodes 2 --no-tp -o %s", path);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_null(strstr(r.out, "launch: pprun"), "%s", r.out);
    cr_assert(strstr(r.out, "launch: none with pprun: pprun cannot train model bert-large"),
              "%s", r.out);
    pp_test_run_done(&r);
    r = pp_test_run(PPTUNE " export --format pprun %s", path);
    cr_assert_eq(r.code, 2, "%s", r.out);
    cr_assert_str_eq(r.out, "");
    cr_assert(strstr(r.err, "planned by pptune but not run by pprun"), "%s", r.err);
    pp_test_run_done(&r);
    r = pp_test_run(PPTUNE " --model bert-large --nodes 2 --for pprun --no-save");
    cr_assert_eq(r.code, 2, "%s", r.out);
    cr_assert(strstr(r.err, "--for pprun: pprun cannot train model bert-large"), "%s", r.err);
    pp_test_run_done(&r);
    unlink(path);
}
