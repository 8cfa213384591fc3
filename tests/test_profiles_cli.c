/* test_profiles_cli.c — `pptune diff`, `export`, `publish` and `fetch` as a user runs them: exit
 * codes a CI job acts on, what is printed, and that the store's token never is. */
#include <jansson.h>

#include "profiles_test.h"

/* A copy of a fixture with the chosen candidate's predicted throughput scaled, written to dir. */
static void scaled_copy(const char *fixture, double factor, const char *out)
{
    json_error_t e;
    json_t *j = json_load_file(fixture, 0, &e);
    cr_assert_not_null(j);
    json_t *pr = json_object_get(json_object_get(j, "chosen"), "predicted");
    double t = json_number_value(json_object_get(pr, "tokens_per_s"));
    json_object_set_new(pr, "tokens_per_s", json_real(t * factor));
    cr_assert_eq(json_dump_file(j, out, JSON_INDENT(2)), 0);
    json_decref(j);
}

Test(profiles_cli, diff_exit_code_says_whether_throughput_dropped)
{
    char dir[64], slow[128], cmd[1024], out[8192];
    pt_tmpdir(dir, sizeof dir);
    snprintf(slow, sizeof slow, "%s/slow.json", dir);
    scaled_copy(FIX "gpt-13b-dgx-h100-x32.json", 0.93, slow);
    snprintf(cmd, sizeof cmd, PPTUNE " diff " FIX "gpt-13b-dgx-h100-x32.json %s", slow);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 3, "%s", out);
    cr_assert(strstr(out, "throughput (predicted): -7.00 % (threshold -5.00 %): REGRESSION"), "%s",
              out);
    snprintf(cmd, sizeof cmd, PPTUNE " diff --threshold 8 " FIX "gpt-13b-dgx-h100-x32.json %s",
             slow);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "within threshold"), "%s", out);
    /* faster is never a regression */
    snprintf(cmd, sizeof cmd, PPTUNE " diff --quiet %s " FIX "gpt-13b-dgx-h100-x32.json", slow);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    cr_assert_str_eq(out, "");
    /* a missing file is an error, not a verdict */
    snprintf(cmd, sizeof cmd, PPTUNE " diff %s/none.json %s", dir, slow);
    int rc = pt_run(cmd, out, sizeof out);
    cr_assert(rc == 1 || rc == 2, "rc %d: %s", rc, out);
    cr_assert(strstr(out, "none.json"), "%s", out);
}

Test(profiles_cli, export_prints_flags_or_refuses_with_the_reason)
{
    char out[8192];
    cr_assert_eq(pt_run(PPTUNE " export --format megatron " FIX "gpt-13b-dgx-h100-x32-v1.1.json",
                        out, sizeof out),
                 0, "%s", out);
    /* a launch script: the environment, torchrun, pretrain_gpt.py and its flags */
    cr_assert(!strncmp(out, "#!/usr/bin/env bash\n", 20), "%s", out);
    cr_assert(strstr(out, "\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n"), "%s", out);
    cr_assert(strstr(out, "pretrain_gpt.py \\\n  --tensor-model-parallel-size 2 "
                          "--pipeline-model-parallel-size 8 "),
              "%s", out);
    cr_assert_eq(pt_run(PPTUNE " export --format pprun " FIX "tiny-local.json", out, sizeof out), 0,
                 "%s", out);
    cr_assert_str_eq(out, "--model tiny --schedule gpipe --ranks 1 --microbatches 1 "
                          "--micro-batch-size 8 --dp 2 --seq 64\n");
    /* a GPU profile: pprun on CUDA in bf16, with the profile's tensor parallelism */
    cr_assert_eq(pt_run(PPTUNE " export --format pprun " FIX "gpt-13b-dgx-h100-x32-v1.1.json", out,
                        sizeof out),
                 0, "%s", out);
    cr_assert(strstr(out, " --dp 16 --tp 2 --seq 2048 --backend cuda --precision bf16\n"), "%s",
              out);
    /* a 1.0 profile lacks the model's shape: the Megatron export says so (exit 2) */
    cr_assert_eq(
        pt_run(PPTUNE " export --format megatron " FIX "gpt-13b-dgx-h100-x32.json", out, sizeof out),
        2, "%s", out);
    cr_assert(strstr(out, "profile version 1.0 does not record"), "%s", out);
    /* --target is the BitPipe fork's only */
    cr_assert_eq(pt_run(PPTUNE " export --format nemo --target bitpipe-fork " FIX
                               "gpt-13b-dgx-h100-x32-v1.1.json",
                        out, sizeof out),
                 2, "%s", out);
    cr_assert(strstr(out, "--target \"bitpipe-fork\": expected bitpipe-fork, with --format "
                          "megatron"),
              "%s", out);
    cr_assert_eq(
        pt_run(PPTUNE " export --format deepspeed " FIX "tiny-local.json", out, sizeof out), 2,
        "%s", out);
    cr_assert(strstr(out, "expected megatron, nemo, nemo2, torchtitan or pprun"), "%s", out);
}

Test(profiles_cli, the_exported_pprun_flags_run)
{
    char cmd[1024], out[16384], flags[512];
    cr_assert_eq(
        pt_run(PPTUNE " export --format pprun " FIX "tiny-local.json", flags, sizeof flags), 0);
    flags[strcspn(flags, "\n")] = '\0';
    snprintf(cmd, sizeof cmd, PP_BINARY_DIR "/runtime/pprun %s --steps 2 --quiet", flags);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s\n%s", cmd, out);
}

/* A profile whose configuration has context parallelism (cp 2 of the 2 CPU devices): its pprun
 * export carries --cp 2, and pprun --profile runs it (2 rank threads sharing each sequence). */
Test(profiles_cli, a_context_parallel_profile_exports_and_runs)
{
    char dir[64], prof[128], cmd[1024], out[8192];
    pt_tmpdir(dir, sizeof dir);
    snprintf(prof, sizeof prof, "%s/cp.json", dir);
    json_error_t e;
    json_t *j = json_load_file(FIX "tiny-local.json", 0, &e);
    cr_assert_not_null(j);
    json_object_set_new(j, "version_minor", json_integer(3)); /* "cp" is a 1.3 key */
    json_t *c = json_object_get(json_object_get(j, "chosen"), "config");
    json_object_set_new(c, "cp", json_integer(2));
    json_object_set_new(c, "d", json_integer(1)); /* d = devices / (p t cp) */
    json_object_set_new(c, "N", json_integer(2)); /* the same global batch: b N d = 16 */
    cr_assert_eq(json_dump_file(j, prof, JSON_INDENT(2)), 0);
    json_decref(j);
    snprintf(cmd, sizeof cmd, PPTUNE " export --format pprun %s", prof);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, " --dp 1 --cp 2 --seq 64\n"), "%s", out);
    snprintf(cmd, sizeof cmd, PP_BINARY_DIR "/runtime/pprun --profile %s --steps 2", prof);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "on 1 ranks x cp 2 x dp 1 (thread transport"), "%s", out);
}

Test(profiles_cli, pprun_refuses_a_launch_that_is_not_the_profiles_layout)
{
    char out[8192];
    /* the README's main job: 256 GPUs on 32 nodes, not 256 CPU rank threads in one process */
    int rc = pt_run("env -u OMPI_COMM_WORLD_SIZE -u SLURM_NTASKS -u SLURM_STEP_NUM_TASKS -u "
                    "PMI_SIZE " PP_BINARY_DIR "/runtime/pprun --profile " FIX
                    "gpt-13b-dgx-h100-x32-v1.1.json --steps 1",
                    out, sizeof out);
    cr_assert_eq(rc, 2, "%s", out);
    cr_assert(strstr(out, "needs 256 processes, one per GPU (32 nodes x 8 GPUs of dgx-h100, "
                          "p=8 t=2 d=16"),
              "%s", out);
    cr_assert(strstr(out, "found 1 process"), "%s", out);
    cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "one line: %s", out);
    /* a launcher with the wrong number of processes (Slurm's variables, no MPI call yet) */
    rc = pt_run("env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK SLURM_PROCID=0 "
                "SLURM_NTASKS=16 SLURM_STEP_NUM_TASKS=16 SLURM_LOCALID=0 " PP_BINARY_DIR
                "/runtime/pprun --profile " FIX "gpt-13b-dgx-h100-x32-v1.1.json --steps 1",
                out, sizeof out);
    cr_assert_eq(rc, 2, "%s", out);
    cr_assert(strstr(out, "needs 256 processes, one per GPU (p=8 t=2 d=16 on 32 nodes of "
                          "dgx-h100); found 16 processes (launcher slurm)"),
              "%s", out);
    /* the right number of processes, but 4 on a node where the profile planned 8 */
    rc = pt_run("env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK SLURM_PROCID=0 "
                "SLURM_NTASKS=256 SLURM_STEP_NUM_TASKS=256 SLURM_LOCALID=0 "
                "SLURM_NTASKS_PER_NODE=4 " PP_BINARY_DIR "/runtime/pprun --profile " FIX
                "gpt-13b-dgx-h100-x32-v1.1.json --steps 1",
                out, sizeof out);
    cr_assert_eq(rc, 2, "%s", out);
    cr_assert(strstr(out, "needs 8 processes per node, one per GPU of a dgx-h100 node; the "
                          "launcher (slurm) put 4 on a node"),
              "%s", out);
    /* the right processes, but this node shows no GPU (this machine, or a CPU-only build):
     * the GPU profile is refused before any rank starts */
    rc = pt_run("env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK SLURM_PROCID=0 "
                "SLURM_NTASKS=256 SLURM_STEP_NUM_TASKS=256 SLURM_LOCALID=0 "
                "SLURM_NTASKS_PER_NODE=8 CUDA_VISIBLE_DEVICES= " PP_BINARY_DIR
                "/runtime/pprun --profile " FIX "gpt-13b-dgx-h100-x32-v1.1.json --steps 1",
                out, sizeof out);
    cr_assert_eq(rc, 2, "%s", out);
    cr_assert(strstr(out, "needs 8 GPUs on this node, one per rank (dgx-h100 "), "%s", out);
    cr_assert(strstr(out, "found 0"), "%s", out);
    cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "one line: %s", out);
    /* a one-node profile runs as rank threads in one process */
    rc = pt_run(PP_BINARY_DIR "/runtime/pprun --profile " FIX "tiny-local.json --steps 1 --quiet",
                out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
}

Test(profiles_cli, newer_major_version_is_refused_by_every_command)
{
    char dir[64], path[128], cmd[512], out[4096];
    pt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v2.json", dir);
    cr_assert_eq(pp_file_write_atomic(path, "{\"schema\": \"pptune-profile\", \"version\": 2}", 42),
                 PP_OK);
    snprintf(cmd, sizeof cmd, PPTUNE " export --format megatron %s", path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, "profile version 2.0 is newer than this pptune reads (1.x)"), "%s", out);
    snprintf(cmd, sizeof cmd, PPTUNE " diff " FIX "tiny-local.json %s", path);
    cr_assert_neq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "newer than this pptune reads"), "%s", out);
}

#define SECRET "tok-9f3b2c71e0d4-secret"
/* the CI job script, from the source tree */
#define TUNE_CLUSTER PP_FIXTURES_DIR "/../../scripts/tune-cluster.sh"

Test(profiles_cli, publish_and_fetch_with_a_token_that_is_never_printed)
{
    char dir[64], root[128], local[128], log[128], cmd[2048], out[16384];
    pt_tmpdir(dir, sizeof dir);
    snprintf(root, sizeof root, "%s/root", dir);
    snprintf(local, sizeof local, "%s/local", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    mkdir(root, 0755);
    pt_server s;
    pt_server_start(&s, root, "auth", "--token", SECRET, "--log", log, NULL);
    /* right token: publish; a wrong one: fetch refused (exit 2), nothing printed of either */
    snprintf(cmd, sizeof cmd,
             "PPTUNE_STORE_TOKEN=" SECRET " " PPTUNE " publish -v " FIX "tiny-local.json "
             "--store %s --backoff 0.05",
             s.url);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "published"), "%s", out);
    cr_assert_null(strstr(out, SECRET), "token printed: %s", out);
    snprintf(cmd, sizeof cmd,
             "PPTUNE_DEBUG=1 PPTUNE_STORE_TOKEN=wrong-" SECRET " " PPTUNE " fetch -v --store %s "
             "--model tiny --fingerprint fnv1a64:dd91123eca1202b2 --local-store %s",
             s.url, local);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, "HTTP 401"), "%s", out);
    cr_assert_null(strstr(out, SECRET), "token printed: %s", out);
    struct stat st;
    cr_assert_neq(stat(local, &st), 0, "a failed fetch created the local store");
    snprintf(cmd, sizeof cmd,
             "PPTUNE_STORE_TOKEN=" SECRET " " PPTUNE " fetch -v --store %s --model tiny "
             "--fingerprint fnv1a64:dd91123eca1202b2 --local-store %s",
             s.url, local);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    cr_assert_null(strstr(out, SECRET), "token printed: %s", out);
    pt_server_stop(&s);
    char path[256];
    snprintf(path, sizeof path, "%s/fnv1a64-dd91123eca1202b2/tiny.json", local);
    pp_profile *p;
    cr_assert_eq(pp_profile_read(path, &p), PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(p->model.name, "tiny");
    pp_profile_destroy(p);
}

Test(profiles_cli, fetch_by_cluster_file_uses_its_fingerprint)
{
    /* a preset's fingerprint is what `pptune probe --preset` writes: publish the gpt-13b
     * profile made for dgx-h100 x 32 and fetch it back by naming the preset */
    char dir[64], root[128], out_file[128], cmd[2048], out[16384];
    pt_tmpdir(dir, sizeof dir);
    snprintf(root, sizeof root, "%s/root", dir);
    snprintf(out_file, sizeof out_file, "%s/got.json", dir);
    mkdir(root, 0755);
    pt_server s;
    pt_server_start(&s, root, "ok", NULL);
    snprintf(cmd, sizeof cmd, PPTUNE " publish " FIX "gpt-13b-dgx-h100-x32-v1.1.json --store %s",
             s.url);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    snprintf(cmd, sizeof cmd,
             PPTUNE
             " probe --preset dgx-h100 --nodes 32 -o %s/cluster.json >/dev/null 2>&1 && " PPTUNE
             " fetch --store %s --model gpt-13b --cluster %s/cluster.json -o %s",
             dir, s.url, dir, out_file);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    pt_server_stop(&s);
    pp_profile *p;
    cr_assert_eq(pp_profile_read(out_file, &p), PP_OK, "%s", pp_err_msg());
    /* the preset's SHA-256 fingerprint, as the profile's writer recorded it */
    cr_assert_str_eq(p->cluster.fingerprint,
                     "sha256:cbdd9b824c8ce3b1e9439f8ea77ea3554a5ec070310830770f63b06ff632b1e1");
    pp_profile_destroy(p);
}

/* A profile 100 times faster than anything this machine will measure: the next tuning of the
 * cluster must regress against it. */
static void doctor_faster(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    cr_assert_not_null(j, "%s: %s", path, e.text);
    json_t *ch = json_object_get(j, "chosen");
    json_t *pr = json_object_get(ch, "predicted"), *me = json_object_get(ch, "measured");
    json_object_set_new(pr, "tokens_per_s",
                        json_real(100 * json_number_value(json_object_get(pr, "tokens_per_s"))));
    if (me)
        json_object_set_new(me, "step_time_s",
                            json_real(json_number_value(json_object_get(me, "step_time_s")) / 100));
    cr_assert_eq(json_dump_file(j, path, JSON_INDENT(2)), 0);
    json_decref(j);
}

/* scripts/tune-cluster.sh end to end on this machine's CPU cluster against the test store:
 * the first run probes, tunes and publishes (nothing to compare with); a run against a store
 * whose previous profile is much faster exits 3 and leaves the store as it was. */
Test(profiles_cli, ci_job_probes_tunes_diffs_and_publishes, .timeout = 240)
{
    char dir[64], root[128], cmd[4096], out[65536], key_path[512];
    pt_tmpdir(dir, sizeof dir);
    snprintf(root, sizeof root, "%s/root", dir);
    mkdir(root, 0755);
    pt_server s;
    pt_server_start(&s, root, "ok", NULL);
    snprintf(cmd, sizeof cmd,
             "XDG_DATA_HOME=%s/xdg " TUNE_CLUSTER " --model tiny "
             "--store %s --quick --workdir %s/w1 --pptune " PPTUNE " -- --trials 1 --trial-steps 2",
             dir, s.url, dir);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "no previous profile for this cluster and model: first run"), "%s", out);
    cr_assert(strstr(out, "published"), "%s", out);
    /* what was published is the profile the job wrote, under the probed fingerprint */
    char w1[256];
    snprintf(w1, sizeof w1, "%s/w1/profile.json", dir);
    pp_profile *p;
    cr_assert_eq(pp_profile_read(w1, &p), PP_OK, "%s", pp_err_msg());
    char key[256];
    cr_assert_eq(pp_profile_store_key(p->cluster.fingerprint, "tiny", key, sizeof key), PP_OK);
    pp_profile_destroy(p);
    snprintf(key_path, sizeof key_path, "%s/profiles/%s", root, key);
    pt_assert_same_file(key_path, w1);
    snprintf(w1, sizeof w1, "%s/w1/report.html", dir); /* the job's HTML report artifact */
    FILE *rep = fopen(w1, "r");
    cr_assert(rep, "no report.html in the workdir");
    fclose(rep);
    snprintf(w1, sizeof w1, "%s/w1/profile.json", dir);

    /* second run, same cluster file: the store's previous profile is far faster */
    doctor_faster(key_path);
    char before[8192], after[8192];
    pt_tree(root, before, sizeof before);
    snprintf(cmd, sizeof cmd,
             TUNE_CLUSTER " --model tiny --store %s --cluster "
                          "%s/w1/cluster.json --workdir %s/w2 --pptune " PPTUNE
                          " -- --trials 1 --trial-steps 2",
             s.url, dir, dir);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 3, "%s", out);
    pt_server_stop(&s);
    cr_assert(strstr(out, "REGRESSION"), "%s", out);
    cr_assert(strstr(out, "NOT published"), "%s", out);
    pt_tree(root, after, sizeof after);
    cr_assert_str_eq(after, before, "the store changed on a regression");
}

Test(profiles_cli, the_tuners_profiles_read_back)
{
    /* the writer (tuner/profile_write.c) and this reader agree, for each schedule family */
    const char *schedules[] = {"interleaved", "1f1b", "gpipe", "chimera", "bitpipe"};
    char dir[64], cmd[1024], out[32768], path[256];
    pt_tmpdir(dir, sizeof dir);
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s.json", dir, schedules[i]);
        snprintf(cmd, sizeof cmd,
                 PPTUNE " --model gpt-125m --nodes 1 --schedules %s --no-tp -o %s >/dev/null",
                 schedules[i], path);
        cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s: %s", cmd, out);
        pp_profile *p;
        cr_assert_eq(pp_profile_read(path, &p), PP_OK, "%s", pp_err_msg());
        cr_assert(p->has_chosen, "%s", schedules[i]);
        cr_assert_str_eq(p->chosen.config.schedule, schedules[i]);
        cr_assert_eq(p->chosen.config.t, 1);
        pp_profile_destroy(p);
    }
}

Test(profiles_cli, publish_without_a_url_fills_the_local_store)
{
    char dir[64], cmd[1024], out[4096], path[256];
    pt_tmpdir(dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "env -u PPTUNE_STORE_URL XDG_DATA_HOME=%s " PPTUNE " publish " FIX "tiny-local.json",
             dir);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/pptune/profiles/fnv1a64-dd91123eca1202b2/tiny.json", dir);
    cr_assert(strstr(out, path), "%s", out);
    pt_assert_same_file(path, FIX "tiny-local.json");
}

Test(profiles_cli, verbose_fetch_reports_each_retry)
{
    char dir[64], root[128], path[256], cmd[1024], out[8192];
    pt_tmpdir(dir, sizeof dir);
    snprintf(root, sizeof root, "%s/root", dir);
    snprintf(path, sizeof path, "%s/profiles/fnv1a64-dd91123eca1202b2/tiny.json", root);
    cr_assert_eq(pp_profile_store_mkdirs(path), PP_OK);
    pt_copy(FIX "tiny-local.json", path);
    pt_server s;
    pt_server_start(&s, root, "flaky", "--fail-count", "2", NULL);
    snprintf(cmd, sizeof cmd,
             PPTUNE " fetch -v --store %s --model tiny --fingerprint fnv1a64:dd91123eca1202b2 "
                    "-o %s/got.json --backoff 0.05",
             s.url, dir);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    pt_server_stop(&s);
    cr_assert(strstr(out, ": HTTP 500; retry 1/3 in 0.05 s"), "%s", out);
    cr_assert(strstr(out, ": HTTP 500; retry 2/3 in 0.1 s"), "%s", out);
    cr_assert_null(strstr(out, "retry 3/3"), "%s", out);
}
