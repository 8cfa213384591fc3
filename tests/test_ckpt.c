/* test_ckpt.c — pprun's checkpoints and --profile: a run killed with SIGKILL at several moments
 * and resumed ends with the same parameters, optimizer state, step, data position and loss
 * history, bit for bit, as a run that never stopped; checkpoints of another run, corrupted or
 * truncated ones are refused; --profile trains the profile's configuration. */
#include <jansson.h>
#include <math.h>
#include <time.h>

#include "pp_rt.h"
#include "profiles_test.h"

#define PPRUN PP_BINARY_DIR "/runtime/pprun"
/* interleaved, 2 ranks x 2 chunks, 2 replicas: every kind of state (several stages per rank,
 * data-parallel replicas, AdamW) is in the checkpoint */
#define RUN_ARGS                                                                                   \
    "--model tiny --schedule interleaved --ranks 2 --chunks 2 --microbatches 4 --dp 2 "            \
    "--steps 16 --save-every 1 --quiet"

static void ckpt_info(const char *path, pp_rt_ckpt *ck)
{
    *ck = (pp_rt_ckpt){0};
    cr_assert_eq(pp_rt_checkpoint_load(NULL, path, 0, ck), PP_OK, "%s", pp_err_msg());
}

static json_t *json_of(const char *text)
{
    json_error_t e;
    const char *brace = strchr(text, '{');
    cr_assert_not_null(brace, "no JSON in: %s", text);
    json_t *j = json_loads(brace, JSON_DISABLE_EOF_CHECK, &e);
    cr_assert_not_null(j, "%s: %s", e.text, text);
    return j;
}

/* The uninterrupted run: its final checkpoint and JSON summary. */
static void reference(const char *dir, pp_rt_ckpt *ck, json_t **summary)
{
    char cmd[1024], out[65536], path[256];
    snprintf(path, sizeof path, "%s/ref.ckpt", dir);
    snprintf(cmd, sizeof cmd, PPRUN " " RUN_ARGS " --checkpoint %s --json", path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    ckpt_info(path, ck);
    cr_assert_eq(ck->step, 16);
    *summary = json_of(out);
}

/* Starts the command line (words separated by single spaces, no quoting) as a child process
 * of its own, not through a shell: the pid is pprun's, so SIGKILL reaches pprun itself. */
static pid_t spawn(const char *line)
{
    static char buf[1024];
    char *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *w = strtok(buf, " "); w && argc < 63; w = strtok(NULL, " "))
        argv[argc++] = w;
    argv[argc] = NULL;
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts the run in the background and kills it with SIGKILL `delay_ms` after its checkpoint
 * has reached `at_step` (at_step 0: `delay_ms` after the start), wherever it then is: in a
 * step, or writing the next checkpoint. Fails if the run had already finished. Bounded: gives
 * up after 120 s. */
static void run_and_kill(const char *path, int at_step, int delay_ms)
{
    char args[1024];
    snprintf(args, sizeof args, PPRUN " " RUN_ARGS " --checkpoint %s", path);
    pid_t pid = spawn(args);
    for (int i = 0; at_step > 0 && i < 120000; i++) { /* 120 s in 1 ms polls */
        pp_rt_ckpt ck = {0};
        if (pp_rt_checkpoint_load(NULL, path, 0, &ck) == PP_OK && ck.step >= at_step)
            break;
        cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "the run ended before it was killed");
        sleep_ms(1);
    }
    sleep_ms(delay_ms);
    cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0,
                 "the run finished before the kill (at step %d + %d ms): nothing was tested",
                 at_step, delay_ms);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "pprun was not killed");
}

static void resume_and_compare(const char *dir, const char *path, const pp_rt_ckpt *ref,
                               json_t *ref_summary)
{
    char cmd[1024], out[65536];
    snprintf(cmd, sizeof cmd, PPRUN " " RUN_ARGS " --checkpoint %s --resume --json", path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    pp_rt_ckpt ck;
    ckpt_info(path, &ck);
    cr_assert_eq(ck.step, 16);
    cr_assert_eq(ck.data_batches, ref->data_batches);
    cr_assert_eq(ck.state_hash, ref->state_hash,
                 "resumed state %016llx, uninterrupted %016llx (parameters, AdamW state, step, "
                 "data position and losses)",
                 (unsigned long long)ck.state_hash, (unsigned long long)ref->state_hash);
    json_t *j = json_of(out);
    cr_assert_str_eq(json_string_value(json_object_get(j, "param_checksum")),
                     json_string_value(json_object_get(ref_summary, "param_checksum")));
    json_t *a = json_object_get(j, "per_step"), *b = json_object_get(ref_summary, "per_step");
    cr_assert_eq(json_array_size(a), 16);
    for (size_t i = 0; i < 16; i++) {
        double la = json_real_value(json_object_get(json_array_get(a, i), "loss"));
        double lb = json_real_value(json_object_get(json_array_get(b, i), "loss"));
        cr_assert(la == lb, "step %zu: loss %.17g resumed, %.17g uninterrupted", i + 1, la, lb);
    }
    json_decref(j);
    (void)dir;
}

Test(ckpt, killed_runs_resume_to_the_same_bits, .timeout = 600)
{
    char dir[64], path[256];
    pt_tmpdir(dir, sizeof dir);
    pp_rt_ckpt ref;
    json_t *ref_summary;
    reference(dir, &ref, &ref_summary);
    /* killed right after the checkpoint of step 3, before the first checkpoint exists, and a
     * few milliseconds after later checkpoints (wherever the run then is: mid-step, or
     * writing the next checkpoint) */
    struct {
        int at_step, delay_ms;
    } kills[] = {{3, 0}, {0, 1}, {5, 3}, {8, 7}, {12, 1}};
    for (size_t k = 0; k < sizeof kills / sizeof kills[0]; k++) {
        snprintf(path, sizeof path, "%s/run%zu.ckpt", dir, k);
        run_and_kill(path, kills[k].at_step, kills[k].delay_ms);
        resume_and_compare(dir, path, &ref, ref_summary);
    }
    json_decref(ref_summary);
}

Test(ckpt, a_run_killed_twice_still_matches, .timeout = 600)
{
    char dir[64], path[256];
    pt_tmpdir(dir, sizeof dir);
    pp_rt_ckpt ref;
    json_t *ref_summary;
    reference(dir, &ref, &ref_summary);
    snprintf(path, sizeof path, "%s/twice.ckpt", dir);
    run_and_kill(path, 2, 0);
    /* the second life is resumed and killed again */
    char args[1024];
    snprintf(args, sizeof args, PPRUN " " RUN_ARGS " --checkpoint %s --resume", path);
    pid_t pid = spawn(args);
    for (int i = 0; i < 120000; i++) {
        pp_rt_ckpt ck = {0};
        if (pp_rt_checkpoint_load(NULL, path, 0, &ck) == PP_OK && ck.step >= 6)
            break;
        cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "the run ended before it was killed");
        sleep_ms(1);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    resume_and_compare(dir, path, &ref, ref_summary);
    json_decref(ref_summary);
}

Test(ckpt, one_run_per_checkpoint_and_stale_temporaries_go)
{
    char dir[64], path[256], cmd[1024], out[16384], stale[300];
    pt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/one.ckpt", dir);
    snprintf(stale, sizeof stale, "%s.tmp.999999", path);
    cr_assert_eq(pp_file_write_atomic(stale, "half a checkpoint", 17), PP_OK);
    char args[1024];
    snprintf(args, sizeof args, PPRUN " " RUN_ARGS " --checkpoint %s", path);
    pid_t pid = spawn(args);
    for (int i = 0; i < 120000; i++) {
        pp_rt_ckpt ck = {0};
        if (pp_rt_checkpoint_load(NULL, path, 0, &ck) == PP_OK && ck.step >= 1)
            break;
        cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "the first run ended early");
        sleep_ms(1);
    }
    /* the first run holds the checkpoint: a second one is refused and changes nothing */
    snprintf(cmd, sizeof cmd, PPRUN " " RUN_ARGS " --checkpoint %s --resume", path);
    int rc = pt_run(cmd, out, sizeof out);
    int still = waitpid(pid, NULL, WNOHANG) == 0;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cr_assert(still, "the first run ended before the second started: nothing was tested");
    cr_assert_eq(rc, 2, "%s", out);
    cr_assert(strstr(out, "another pprun is using checkpoint"), "%s", out);
    struct stat st;
    cr_assert_neq(stat(stale, &st), 0, "the stale temporary file is still there");
    /* once it is gone, resuming works */
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
}

Test(ckpt, another_runs_or_a_damaged_checkpoint_is_refused)
{
    char dir[64], path[256], cmd[1024], out[16384];
    pt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/c.ckpt", dir);
    snprintf(cmd, sizeof cmd,
             PPRUN " --model tiny --ranks 2 --steps 2 --save-every 2 --quiet --checkpoint %s",
             path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    /* another seed: another run */
    snprintf(cmd, sizeof cmd,
             PPRUN " --model tiny --ranks 2 --steps 4 --seed 2 --resume --quiet --checkpoint %s",
             path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, "was written by a different run: it has seed=1, this run seed=2"), "%s",
              out);
    /* one flipped byte, then a truncated file */
    char *data;
    size_t len;
    cr_assert_eq(pp_file_read(path, &data, &len), PP_OK);
    data[len / 2] ^= 0x40;
    cr_assert_eq(pp_file_write_atomic(path, data, len), PP_OK);
    snprintf(cmd, sizeof cmd,
             PPRUN " --model tiny --ranks 2 --steps 4 --resume --quiet --checkpoint %s", path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, "checksum mismatch (corrupted)"), "%s", out);
    data[len / 2] ^= 0x40;
    cr_assert_eq(pp_file_write_atomic(path, data, len / 3), PP_OK);
    free(data);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, "pprun: --resume: checkpoint"), "%s", out);
}

Test(ckpt, profile_sets_the_configuration)
{
    char out[65536];
    cr_assert_eq(
        pt_run(PPRUN " --profile " FIX "tiny-local.json --steps 2 --quiet --json", out, sizeof out),
        0, "%s", out);
    json_t *j = json_of(out);
    json_t *s = json_object_get(j, "schedule");
    /* tiny-local.json chose gpipe, p = 1, b = 8, N = 1, d = 2, seq 64 */
    cr_assert_str_eq(json_string_value(json_object_get(s, "kind")), "gpipe");
    cr_assert_eq(json_integer_value(json_object_get(s, "ranks")), 1);
    cr_assert_eq(json_integer_value(json_object_get(s, "microbatches")), 1);
    cr_assert_eq(json_integer_value(json_object_get(s, "dp")), 2);
    cr_assert_eq(json_integer_value(json_object_get(j, "micro_batch_size")), 8);
    cr_assert_eq(json_integer_value(json_object_get(j, "seq")), 64);
    json_decref(j);
    cr_assert_eq(pt_run(PPRUN " --profile " FIX "tiny-local.json --schedule 1f1b", out, sizeof out),
                 2);
    cr_assert(strstr(out, "--schedule and --profile"), "%s", out);
    /* a layout flag overrides the profile's layout explicitly, and says so */
    cr_assert_eq(pt_run(PPRUN " --profile " FIX "tiny-local.json --ranks 2 --dp 1 --steps 1 "
                              "--quiet --json",
                        out, sizeof out),
                 0, "%s", out);
    cr_assert(strstr(out, "--ranks given, so the layout is yours"), "%s", out);
    j = json_of(out);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "schedule"), "ranks")), 2);
    json_decref(j);
    /* the README's main job (256 GPUs): refused, not started as 256 CPU rank threads */
    cr_assert_eq(pt_run(PPRUN " --profile " FIX "gpt-13b-dgx-h100-x32.json", out, sizeof out), 2);
    cr_assert(strstr(out, "needs 256 processes, one per GPU"), "%s", out);
}

/* Writes into a fresh directory (path[128]) the tiny-local profile with its choice turned
 * into t = 2, d = 1, b = 16 (the same two devices and batch), with options.sequence_parallel
 * set to sp. */
static void write_tp2_profile(int sp, char *path)
{
    char dir[64];
    pt_tmpdir(dir, sizeof dir);
    snprintf(path, 128, "%s/tiny-tp2.json", dir);
    json_error_t e;
    json_t *prof = json_load_file(FIX "tiny-local.json", 0, &e);
    cr_assert(prof, "%s", e.text);
    json_t *cfg = json_object_get(json_object_get(prof, "chosen"), "config");
    json_object_set_new(cfg, "t", json_integer(2));
    json_object_set_new(cfg, "d", json_integer(1));
    json_object_set_new(cfg, "b", json_integer(16)); /* the same global batch: b N d = 16 */
    json_object_set_new(json_object_get(prof, "options"), "sequence_parallel", json_boolean(sp));
    cr_assert_eq(json_dump_file(prof, path, 0), 0);
    json_decref(prof);
}

/* A profile that chose t = 2 trains, run by pprun --profile as 2 tensor ranks. */
Test(ckpt, a_tensor_parallel_profile_trains)
{
    char path[128], out[65536];
    write_tp2_profile(0, path);
    char cmd[512];
    snprintf(cmd, sizeof cmd, PPRUN " --profile %s --steps 2 --quiet --json", path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    json_t *j = json_of(out);
    cr_assert_eq(json_integer_value(json_object_get(j, "tp")), 2);
    cr_assert_eq(json_array_size(json_object_get(j, "ranks")), 2);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "schedule"), "dp")), 1);
    json_decref(j);
    /* --tp overrides the profile's layout explicitly (and says so) */
    snprintf(cmd, sizeof cmd, PPRUN " --profile %s --tp 1 --steps 1 --quiet --json", path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "--tp given, so the layout is yours"), "%s", out);
    j = json_of(out);
    cr_assert_eq(json_integer_value(json_object_get(j, "tp")), 1);
    json_decref(j);
}

/* A profile that chose sequence parallelism trains with it (pprun --profile of a t = 2 SP
 * profile): the summary says so, the losses equal the same profile's without it (fp32
 * tolerance of test_runtime_tp.c), and its tensor-parallel traffic holds the all-gathers and
 * reduce-scatters besides the LayerNorm gradients' all-reduce. */
Test(ckpt, a_sequence_parallel_profile_trains_with_it)
{
    char path[128], path0[128], out[65536];
    write_tp2_profile(1, path);
    write_tp2_profile(0, path0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, PPRUN " --profile %s --steps 2 --quiet --json", path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    json_t *j = json_of(out);
    snprintf(cmd, sizeof cmd, PPRUN " --profile %s --steps 2 --quiet --json", path0);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    json_t *j0 = json_of(out);
    cr_assert(json_is_true(json_object_get(j, "sequence_parallel")));
    cr_assert(json_is_false(json_object_get(j0, "sequence_parallel")));
    cr_assert_eq(json_integer_value(json_object_get(j, "tp")), 2);
    for (size_t i = 0; i < 2; i++) {
        double a = json_real_value(json_object_get(
                   json_array_get(json_object_get(j, "per_step"), i), "loss")),
               b = json_real_value(json_object_get(
                   json_array_get(json_object_get(j0, "per_step"), i), "loss"));
        cr_assert(fabs(a - b) <= 1e-5 * fabs(b), "step %zu: loss %.9g with SP, %.9g without",
                  i + 1, a, b);
    }
    for (size_t g = 0; g < 2; g++) {
        double sp = json_real_value(json_object_get(
                   json_object_get(json_array_get(json_object_get(j, "ranks"), g), "tp_comm"),
                   "bytes")),
               tp = json_real_value(json_object_get(
                   json_object_get(json_array_get(json_object_get(j0, "ranks"), g), "tp_comm"),
                   "bytes"));
        cr_assert_gt(sp, tp, "rank %zu: %g tensor-parallel bytes with SP, %g without", g, sp, tp);
    }
    json_decref(j);
    json_decref(j0);
}

Test(ckpt, a_checkpoint_path_is_a_name_not_a_pattern)
{
    /* `--checkpoint '*'` once globbed "*.tmp.*" and removed other programs' files */
    char dir[64], keep[300], cmd[1024], out[16384];
    pt_tmpdir(dir, sizeof dir);
    snprintf(keep, sizeof keep, "%s/other.json.tmp.1", dir);
    cr_assert_eq(pp_file_write_atomic(keep, "someone else's", 14), PP_OK);
    snprintf(cmd, sizeof cmd,
             "cd %s && " PPRUN " --model tiny --schedule 1f1b --ranks 2 --microbatches 2 "
             "--steps 1 --save-every 1 --quiet --checkpoint '*'",
             dir);
    int rc = pt_run(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert_eq(access(keep, F_OK), 0, "pprun removed a file the checkpoint name only matched");
}

/* ---- the Llama block (tiny-llama) ---- */

#define LLAMA_ARGS "--model tiny-llama --schedule zb-h1 --ranks 2 --microbatches 4 --dp 2 --quiet"

/* Stopped after 2 steps and resumed to 4, the run ends with the uninterrupted run's bits; a
 * GPT run refuses its checkpoint (the block is part of the run's identity). */
/* pprun ARGS for 4 steps, and for 2 steps then resumed to 4 from its checkpoint in dir: the same
 * parameters, bit for bit. */
static void resumes_to_the_same_bits(const char *args, const char *dir)
{
    char cmd[1024], out[65536];
    snprintf(cmd, sizeof cmd, PPRUN " %s --steps 4 --json --checkpoint %s/ref.ckpt", args, dir);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    json_t *ref = json_of(out);
    snprintf(cmd, sizeof cmd, PPRUN " %s --steps 2 --save-every 2 --checkpoint %s/half.ckpt", args,
             dir);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    snprintf(cmd, sizeof cmd, PPRUN " %s --steps 4 --resume --json --checkpoint %s/half.ckpt",
             args, dir);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    json_t *j = json_of(out);
    cr_assert_str_eq(json_string_value(json_object_get(j, "param_checksum")),
                     json_string_value(json_object_get(ref, "param_checksum")), "%s", args);
    json_decref(j);
    json_decref(ref);
}

Test(ckpt, a_llama_run_resumes_to_the_same_bits)
{
    char dir[64], cmd[1024], out[65536];
    pt_tmpdir(dir, sizeof dir);
    resumes_to_the_same_bits(LLAMA_ARGS, dir);
    snprintf(cmd, sizeof cmd,
             PPRUN " --model tiny --schedule zb-h1 --ranks 2 --microbatches 4 --dp 2 --quiet "
                   "--steps 4 --resume --checkpoint %s/half.ckpt",
             dir);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s", out);
}

/* With --tp 2 (the embedding and the untied head split over the vocabulary, each tensor rank's
 * rows and AdamW state in the checkpoint): stopped after 2 steps and resumed to 4, the run
 * ends with the uninterrupted run's bits. */
Test(ckpt, a_tensor_parallel_llama_run_resumes_to_the_same_bits)
{
    char dir[64];
    pt_tmpdir(dir, sizeof dir);
    resumes_to_the_same_bits(LLAMA_ARGS " --tp 2", dir);
}

/* Qwen3's block (tests/fixtures/hf/tiny-qwen3.json, the q/k norms' weights and AdamW state in
 * the checkpoint) with --tp 2: resumed to the uninterrupted run's bits; tiny-llama's run
 * refuses its checkpoint (the q/k norm is part of the block's identity). */
Test(ckpt, a_tensor_parallel_qwen3_run_resumes_to_the_same_bits)
{
    char dir[64], cmd[1024], out[65536];
    pt_tmpdir(dir, sizeof dir);
    const char *qwen3 = "--model-config " PP_FIXTURES_DIR "/hf/tiny-qwen3.json --schedule zb-h1 "
                        "--ranks 2 --microbatches 4 --dp 2 --quiet --tp 2";
    resumes_to_the_same_bits(qwen3, dir);
    char cfg[128]; /* the same block without the q/k norm: Llama's with head_dim 16 */
    snprintf(cfg, sizeof cfg, "%s/noqk.json", dir);
    FILE *f = fopen(cfg, "w");
    cr_assert_not_null(f);
    fputs("{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, "
          "\"head_dim\": 16, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
          "\"num_key_value_heads\": 2, \"vocab_size\": 256, \"max_position_embeddings\": 64, "
          "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000, \"tie_word_embeddings\": false, "
          "\"attention_bias\": false, \"mlp_bias\": false}",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             PPRUN " --model-config %s --schedule zb-h1 --ranks 2 --microbatches 4 --dp 2 "
                   "--quiet --tp 2 --steps 4 --resume --checkpoint %s/half.ckpt",
             cfg, dir);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s", out);
}

/* Mixture-of-experts runs under expert parallelism (tests/fixtures/hf: Mixtral's block and
 * Qwen3-MoE's; ep 2 of dp 2, each replica's experts and their AdamW state in the file):
 * stopped after 2 steps and resumed to 4, the run ends with the uninterrupted run's bits; the
 * run without --ep refuses the ep 2 checkpoint, naming ep. */
Test(ckpt, expert_parallel_moe_runs_resume_to_the_same_bits)
{
    static const char *const models[] = {"tiny-mixtral.json", "tiny-qwen3-moe.json"};
    for (int i = 0; i < 2; i++) {
        char dir[64], args[512], cmd[1024], out[65536];
        pt_tmpdir(dir, sizeof dir);
        snprintf(args, sizeof args,
                 "--model-config " PP_FIXTURES_DIR "/hf/%s --seq 16 --schedule zbv --ranks 2 "
                 "--microbatches 4 --dp 2 --quiet",
                 models[i]);
        char ep2[600];
        snprintf(ep2, sizeof ep2, "%s --ep 2", args);
        resumes_to_the_same_bits(ep2, dir);
        snprintf(cmd, sizeof cmd, PPRUN " %s --steps 4 --resume --checkpoint %s/half.ckpt", args,
                 dir);
        cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s", out);
        cr_assert(strstr(out, "ep=2"), "%s", out);
    }
}

/* A sharded AdamW state (ZeRO-1 and ZeRO-2 over dp 2, the tied embedding's shards included):
 * written gathered, each replica given back its slice; stopped after 2 steps and resumed to
 * 4, the run ends with the uninterrupted run's bits. The gathered file is the unsharded run's
 * format: the unsharded run resumes from the ZeRO-2 checkpoint (its first 2 steps were the
 * sharded ones, so only within fp32 rounding of the unsharded uninterrupted run: not compared
 * here). */
#define SHARD_ARGS "--model tiny --schedule 1f1b --ranks 2 --microbatches 4 --dp 2 --quiet"
Test(ckpt, sharded_runs_resume_to_the_same_bits)
{
    char dir[64], cmd[1024], out[65536];
    pt_tmpdir(dir, sizeof dir);
    resumes_to_the_same_bits(SHARD_ARGS " --shard optimizer", dir);
    resumes_to_the_same_bits(SHARD_ARGS " --shard gradients", dir);
    snprintf(cmd, sizeof cmd, PPRUN " " SHARD_ARGS " --steps 3 --resume --checkpoint %s/half.ckpt",
             dir);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    resumes_to_the_same_bits("--model tiny --schedule zb-h1 --ranks 2 --microbatches 4 --dp 2 "
                             "--tp 2 --quiet --shard gradients",
                             dir);
    snprintf(cmd, sizeof cmd, PPRUN " " SHARD_ARGS " --steps 4 --resume --checkpoint %s/half.ckpt",
             dir); /* zb-h1's file: another run */
    cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s", out);
}

/* A profile records the model's shape (1.1): pprun trains that shape, not the preset of its
 * name: the tiny-local profile turned into tiny-llama's block trains as --model tiny-llama
 * does (the same losses, bit for bit), and with its layers changed trains those layers. */
static void write_llama_profile(const char *path, int layers)
{
    json_error_t e;
    json_t *prof = json_load_file(FIX "tiny-local.json", 0, &e);
    cr_assert(prof, "%s", e.text);
    json_object_set_new(prof, "version_minor", json_integer(1));
    json_t *m = json_object_get(prof, "model");
    json_object_set_new(m, "name", json_string("tiny-llama"));
    json_object_set_new(m, "layers", json_integer(layers));
    json_object_set_new(m, "kv_heads", json_integer(2));
    json_object_set_new(m, "ffn", json_integer(96));
    json_object_set_new(m, "gated_mlp", json_true());
    json_object_set_new(m, "tied_embeddings", json_false());
    json_object_set_new(m, "norm", json_string("rmsnorm"));
    json_object_set_new(m, "position", json_string("rope"));
    json_object_set_new(m, "head_dim", json_integer(8));
    json_object_set_new(m, "linear_bias", json_false());
    json_object_set_new(m, "qkv_bias", json_false());
    json_object_set_new(m, "rope_theta", json_real(500000));
    json_object_set_new(m, "rope_scaling", json_string("llama3"));
    cr_assert_eq(json_dump_file(prof, path, 0), 0);
    json_decref(prof);
}

Test(ckpt, a_profile_trains_its_model_shape)
{
    char dir[64], path[128], cmd[512], out[65536], direct[65536];
    pt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/llama.json", dir);
    write_llama_profile(path, 4);
    snprintf(cmd, sizeof cmd, PPRUN " --profile %s --steps 2 --quiet --json", path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    cr_assert_eq(pt_run(PPRUN " --model tiny-llama --schedule gpipe --ranks 1 --microbatches 1 "
                              "--micro-batch-size 8 --dp 2 --seq 64 --steps 2 --quiet --json",
                        direct, sizeof direct),
                 0, "%s", direct);
    json_t *a = json_of(out), *b = json_of(direct);
    cr_assert_str_eq(json_string_value(json_object_get(a, "param_checksum")),
                     json_string_value(json_object_get(b, "param_checksum")),
                     "the profile's model is not tiny-llama's block");
    json_decref(a);
    json_decref(b);
    write_llama_profile(path, 2);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    a = json_of(out);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(a, "model"), "layers")), 2);
    json_decref(a);
}

/* A profile that chose recomputation and the sharded optimizer (the tiny-local profile, d = 2,
 * with them set) trains with them under pprun --profile: the summary says so, and the losses
 * equal the same profile's without them (recomputation: bit for bit; the shard: fp32 rounding
 * of the norm, test_runtime_shard.c). */
Test(ckpt, a_profile_with_recomputation_and_sharding_trains_with_them)
{
    char dir[64], path[128], out[65536];
    pt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tiny-rc.json", dir);
    json_error_t e;
    json_t *prof = json_load_file(FIX "tiny-local.json", 0, &e);
    cr_assert(prof, "%s", e.text);
    json_t *cfg = json_object_get(json_object_get(prof, "chosen"), "config");
    json_object_set_new(cfg, "recompute", json_string("full"));
    json_object_set_new(cfg, "shard", json_string("optimizer"));
    cr_assert_eq(json_dump_file(prof, path, 0), 0);
    json_decref(prof);
    char cmd[512];
    snprintf(cmd, sizeof cmd, PPRUN " --profile %s --steps 2 --quiet --json", path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "%s", out);
    json_t *j = json_of(out);
    cr_assert_eq(pt_run(PPRUN " --profile " FIX "tiny-local.json --steps 2 --quiet --json", out,
                        sizeof out),
                 0, "%s", out);
    json_t *j0 = json_of(out);
    cr_assert_str_eq(json_string_value(json_object_get(j, "recompute")), "full");
    cr_assert_str_eq(json_string_value(json_object_get(j, "shard")), "optimizer");
    cr_assert_str_eq(json_string_value(json_object_get(j0, "recompute")), "none");
    for (size_t i = 0; i < 2; i++) {
        double a = json_real_value(
                   json_object_get(json_array_get(json_object_get(j, "per_step"), i), "loss")),
               b = json_real_value(
                   json_object_get(json_array_get(json_object_get(j0, "per_step"), i), "loss"));
        cr_assert(fabs(a - b) <= 1e-5 * fabs(b), "step %zu: loss %.17g, without %.17g", i + 1, a,
                  b);
    }
    json_decref(j0);
    json_decref(j);
}
