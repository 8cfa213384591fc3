/* test_cuda_trials.c — pptune's trials on GPUs, end to end: `pptune search` on a cluster file
 * that says this machine has two GPUs runs its trials with `pprun --backend cuda --precision
 * bf16`, records them in the profile, and each trial's measured per-rank peak equals the
 * runtime's own CUDA memory model (pp_tune_memory_runtime_on) for that configuration.
 * Part of the cuda suite (the real pprun on a real GPU; skips without a device) and of the
 * cuda_emu suite (pprun_emu on the CPU emulation of CUDA with two emulated devices: checks the
 * path's logic, not a GPU's figures). PP_TEST_PPRUN names the pprun each suite runs.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_rt.h"
#include "pp_test_run.h"
#include "pp_tune.h"

#define PPTUNE PP_BINARY_DIR "/tuner/pptune"

/* A probed-looking cluster file of one node with two H200s (from the preset's description). */
static void two_gpu_cluster(const char *path)
{
    pp_test_run_result r = pp_test_run(PPTUNE " probe --preset hgx-h200 --nodes 1 --json");
    cr_assert_eq(r.code, 0, "pptune probe --preset: %s", r.err);
    json_error_t e;
    json_t *c = json_loads(r.out, 0, &e);
    cr_assert(c, "preset JSON: %s", e.text);
    pp_test_run_done(&r);
    /* "probed ...": the tuner treats the cluster as this machine, where trials run */
    json_object_set_new(c, "origin", json_string("probed (test: two GPUs of this machine)"));
    json_object_set_new(json_array_get(json_object_get(c, "nodes"), 0), "n_devices",
                        json_integer(2));
    json_t *dev = json_object_get(c, "devices");
    while (json_array_size(dev) > 2)
        json_array_remove(dev, json_array_size(dev) - 1);
    cr_assert_eq(json_dump_file(c, path, JSON_INDENT(1)), 0);
    json_decref(c);
}

/* The configuration a profile's candidate describes (the profiles' own reader of it). */
static pp_config config_of(json_t *cand)
{
    pp_config cfg = {0};
    cr_assert_eq(pp_config_from_json(json_object_get(cand, "config"), "profile", "config", &cfg),
                 PP_OK, "%s", pp_err_msg());
    return cfg;
}

/* Each of the candidate's measured rank peaks against the runtime's CUDA bf16 memory model. */
static int expect_measured_equals_model(json_t *cand, const pp_tune_model *m,
                                        const pp_tune_opts *o)
{
    json_t *meas = json_object_get(cand, "measured");
    if (!meas || strcmp(json_string_value(json_object_get(meas, "status")), "ok") != 0)
        return 0;
    pp_config cfg = config_of(cand);
    pp_sched_params sp;
    pp_tune_sched_params(m, &cfg, &sp);
    pp_sched *s;
    cr_assert_eq(pp_sched_generate(cfg.schedule, &sp, &s), PP_OK, "%s", pp_err_msg());
    pp_tune_rank_mem mem[8];
    cr_assert(s->ranks <= 8);
    cr_assert_eq(pp_tune_memory_runtime_on(m, &cfg, s, o, PP_RT_BACKEND_CUDA, PP_PREC_BF16, mem), PP_OK, "%s",
                 pp_err_msg());
    json_t *peaks = json_object_get(meas, "peak_bytes_per_rank");
    cr_assert_eq((int)json_array_size(peaks), cfg.p);
    for (int r = 0; r < cfg.p; r++) {
        double got = json_number_value(json_array_get(peaks, (size_t)r));
        cr_expect(got == mem[r].total,
                  "%s p=%d b=%d d=%d rank %d: measured %.0f B, the runtime's CUDA model %.0f B",
                  cfg.schedule, cfg.p, cfg.b, cfg.d, r, got, mem[r].total);
    }
    pp_sched_destroy(s);
    return 1;
}

Test(cuda_trials, search_on_a_gpu_machine_runs_cuda_trials_that_match_the_runtime_model)
{
    if (pp_cuda_device_count() < 1)
        cr_skip_test("skipped: no CUDA device (this build's pprun cannot run GPU trials here)");
    char dir[] = "/tmp/pptune_gpu_trials_XXXXXX";
    cr_assert(mkdtemp(dir));
    char cluster[96], profile[96];
    snprintf(cluster, sizeof cluster, "%s/cluster.json", dir);
    snprintf(profile, sizeof profile, "%s/profile.json", dir);
    two_gpu_cluster(cluster);
    setenv("PPTUNE_PPRUN", PP_TEST_PPRUN, 1);
    setenv("PP_CUDA_EMU_DEVICES", "2", 1); /* read by the emulation only */
    pp_test_run_result r = pp_test_run(PPTUNE " search --model tiny --cluster %s --trials 2 "
                                              "--trial-steps 2 --trial-timeout 120 -o %s",
                                       cluster, profile);
    cr_assert_eq(r.code, 0, "pptune search: %s\n%s", r.out, r.err);
    cr_expect(strstr(r.out, "trials: #1 to #2 run with pprun --backend cuda --precision bf16"),
              "%s", r.out);
    cr_expect(strstr(r.out, "launch: pprun --model tiny") &&
                  strstr(r.out, "--backend cuda --precision bf16"),
              "%s", r.out);
    pp_test_run_done(&r);

    json_error_t e;
    json_t *p = json_load_file(profile, 0, &e);
    cr_assert(p, "%s: %s", profile, e.text);
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    json_t *chosen = json_object_get(p, "chosen");
    cr_assert(json_is_object(chosen));
    cr_expect(strstr(json_string_value(json_object_get(chosen, "launch")),
                     "--backend cuda --precision bf16"));
    /* the profile's options: sequence parallelism is planned as the trials ran it */
    pp_tune_opts o = {.sequence_parallel = json_is_true(
                          json_object_get(json_object_get(p, "options"), "sequence_parallel"))};
    int checked = expect_measured_equals_model(chosen, &m, &o);
    json_t *runners = json_object_get(p, "runners_up");
    for (size_t i = 0; i < json_array_size(runners); i++)
        checked += expect_measured_equals_model(json_array_get(runners, i), &m, &o);
    cr_expect_eq(checked, 2, "two trials ran with status ok, found %d", checked);
    json_decref(p);
    unlink(profile);
    unlink(cluster);
    rmdir(dir);
}
