/* test_tuner_trials.c — trials: a real pprun run is measured and agrees with the memory model;
 * a child that hangs, crashes or runs out of memory is classified and recorded, not an error.
 * The misbehaving children are small shell scripts standing in for pprun. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pp_tune.h"

#define PPRUN PP_BINARY_DIR "/runtime/pprun"

static char *script(const char *body)
{
    char *path = strdup("/tmp/pptune_fake_pprun_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    fprintf(fp, "#!/bin/sh\n%s\n", body);
    fclose(fp);
    chmod(path, 0755);
    return path;
}

static pp_tune_trial_result trial(const char *pprun, double timeout)
{
    static pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    static pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 1, .d = 1, .t = 1, .N = 4};
    pp_tune_trial_params tp = {.model = &m, .cfg = &c, .pprun = pprun, .steps = 3,
                               .timeout_s = timeout};
    pp_tune_trial_result r;
    cr_assert_eq(pp_tune_trial(&tp, &r), PP_OK, "%s", pp_err_msg());
    return r;
}

Test(tuner_trials, real_pprun_is_measured_and_matches_the_memory_model)
{
    pp_tune_trial_result r = trial(PPRUN, 60);
    cr_assert_str_eq(r.status, "ok", "%s: %s", r.status, r.detail);
    cr_assert(r.step_time > 0);
    cr_assert(!strncmp(r.model, "tiny: 4 layers, LayerNorm", 25), "pprun trained %s", r.model);
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 1, .d = 1, .t = 1, .N = 4};
    pp_sched_params sp;
    pp_tune_sched_params(&m, &c, &sp);
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("1f1b", &sp, &s), PP_OK);
    pp_tune_rank_mem mem[2];
    cr_assert_eq(pp_tune_memory_runtime(&m, &c, s, NULL, mem), PP_OK, "%s", pp_err_msg());
    for (int k = 0; k < 2; k++)
        cr_assert(fabs(mem[k].total - r.peak_per_rank[k]) <= 0.03 * r.peak_per_rank[k],
                  "rank %d: predicted %.0f, measured %.0f", k, mem[k].total, r.peak_per_rank[k]);
    pp_sched_destroy(s);
}

/* Runs a stand-in for pprun (a shell script) and checks the recorded status and detail. */
static pp_tune_trial_result scripted(const char *body, double timeout, const char *status,
                                     const char *detail)
{
    char *p = script(body);
    pp_tune_trial_result r = trial(p, timeout);
    cr_assert_str_eq(r.status, status, "%s: %s (%s)", body, r.status, r.detail);
    cr_assert(strstr(r.detail, detail), "%s: detail \"%s\"", body, r.detail);
    unlink(p);
    free(p);
    return r;
}

Test(tuner_trials, a_hanging_child_is_killed_and_recorded_as_timeout)
{
    pp_tune_trial_result r = scripted("sleep 30", 0.5, "timeout", "killed after 0.5 s");
    cr_assert(r.wall_s < 10, "the child was not killed in time: %.1f s", r.wall_s);
}

Test(tuner_trials, a_crashing_child_is_recorded_as_crash_with_its_signal)
{
    scripted("kill -SEGV $$", 10, "crash", "signal 11");
}

Test(tuner_trials, out_of_memory_is_recognised)
{
    scripted("echo 'pprun: backend \"cpu\": cannot allocate 99999999999 bytes' >&2; exit 1", 10,
             "oom", "cannot allocate");
}

Test(tuner_trials, a_failing_child_with_another_error_is_a_crash_with_its_message)
{
    scripted("echo 'pprun: bad things' >&2; exit 2", 10, "crash", "exit 2: pprun: bad things");
}

/* A tensor-parallel candidate runs (pprun --tp 2: 2 pipeline x 2 tensor ranks) and its
 * measured peaks per pipeline rank agree with the runtime memory plan for t = 2. */
Test(tuner_trials, tensor_parallel_candidates_run_and_match_the_memory_model)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 1, .d = 1, .t = 2, .N = 4};
    pp_tune_trial_params tp = {.model = &m, .cfg = &c, .pprun = PPRUN, .steps = 3,
                               .timeout_s = 60};
    pp_tune_trial_result r;
    cr_assert_eq(pp_tune_trial(&tp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(r.status, "ok", "%s: %s", r.status, r.detail);
    pp_sched_params sp;
    pp_tune_sched_params(&m, &c, &sp);
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("1f1b", &sp, &s), PP_OK);
    pp_tune_rank_mem mem[2];
    cr_assert_eq(pp_tune_memory_runtime(&m, &c, s, NULL, mem), PP_OK, "%s", pp_err_msg());
    pp_config c1 = c;
    c1.t = 1;
    pp_tune_rank_mem mem1[2];
    cr_assert_eq(pp_tune_memory_runtime(&m, &c1, s, NULL, mem1), PP_OK, "%s", pp_err_msg());
    for (int k = 0; k < 2; k++) {
        cr_assert(fabs(mem[k].total - r.peak_per_rank[k]) <= 0.03 * r.peak_per_rank[k],
                  "rank %d: predicted %.0f, measured %.0f", k, mem[k].total, r.peak_per_rank[k]);
        cr_assert_lt(mem[k].params, mem1[k].params, "rank %d: t = 2 holds fewer parameters", k);
    }
    pp_sched_destroy(s);
}

/* A sequence-parallel candidate runs (pprun --tp 2 --sequence-parallel) and its measured peaks
 * agree with the runtime memory plan for t = 2 with sequence parallelism (the tuner's
 * pp_tune_memory_runtime with o->sequence_parallel), which is below the plan without it. */
Test(tuner_trials, sequence_parallel_candidates_run_and_match_the_memory_model)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 2, .d = 1, .t = 2, .N = 4,
                   .sequence_parallel = 1};
    pp_tune_trial_params tp = {.model = &m, .cfg = &c, .pprun = PPRUN, .steps = 3,
                               .timeout_s = 60};
    pp_tune_trial_result r;
    cr_assert_eq(pp_tune_trial(&tp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(r.status, "ok", "%s: %s", r.status, r.detail);
    pp_sched_params sp;
    pp_tune_sched_params(&m, &c, &sp);
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("1f1b", &sp, &s), PP_OK);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config tp_only = c;
    tp_only.sequence_parallel = 0;
    pp_tune_rank_mem mem[2], mem_tp[2];
    cr_assert_eq(pp_tune_memory_runtime(&m, &c, s, &o, mem), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_tune_memory_runtime(&m, &tp_only, s, NULL, mem_tp), PP_OK, "%s",
                 pp_err_msg());
    for (int k = 0; k < 2; k++) {
        cr_assert(fabs(mem[k].total - r.peak_per_rank[k]) <= 0.03 * r.peak_per_rank[k],
                  "rank %d: predicted %.0f, measured %.0f", k, mem[k].total, r.peak_per_rank[k]);
        cr_assert_lt(mem[k].acts, mem_tp[k].acts, "rank %d: SP saves activations", k);
    }
    pp_sched_destroy(s);
}

Test(tuner_trials, gpu_trials_run_the_cuda_backend_in_bf16)
{
    char out[] = "/tmp/pptune_trial_args_XXXXXX";
    int fd = mkstemp(out);
    cr_assert(fd >= 0);
    close(fd);
    char body[256];
    snprintf(body, sizeof body, "echo \"$@\" > %s; echo 'pprun: stop here' >&2; exit 2", out);
    char *p = script(body);
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-13b", &m), PP_OK);
    pp_config c = {.schedule = "1f1b", .p = 8, .v = 1, .b = 1, .d = 1, .t = 1, .N = 16};
    pp_tune_trial_params tp = {.model = &m, .cfg = &c, .pprun = p, .steps = 2,
                               .timeout_s = 10, .backend = pp_backend_row_of(PP_RT_BACKEND_CUDA)};
    pp_tune_trial_result r;
    cr_assert_eq(pp_tune_trial(&tp, &r), PP_OK, "%s", pp_err_msg());
    cr_expect_str_eq(r.status, "crash");
    FILE *f = fopen(out, "r");
    char args[512] = "";
    cr_assert(f && fgets(args, sizeof args, f));
    fclose(f);
    cr_expect(strstr(args, "--model gpt-13b ") && strstr(args, "--ranks 8 ") &&
                  strstr(args, "--backend cuda --precision bf16") &&
                  strstr(args, "--transport thread"),
              "pprun was started with: %s", args);
    unlink(out);
    unlink(p);
    free(p);
}

/* ---- hostile children (issue 18, findings 3 and 12) ---- */

/* 1 when the process is gone (or a zombie nobody has reaped yet). Waits for it up to 10 s: what
 * ends a trial's stray children is the tuner's watchdog, SIGKILL after its 2 s grace
 * (tuner/child.c, KILL_GRACE_S), and under the sanitizers on a loaded machine the watchdog has
 * been seen to take past the 4 s this once allowed; no timing is asserted. */
static int process_gone(pid_t pid)
{
    for (int i = 0; i < 500; i++) {
        if (kill(pid, 0) != 0)
            return 1;
        char path[64], st[256] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f)
            return 1;
        size_t n = fread(st, 1, sizeof st - 1, f);
        fclose(f);
        st[n] = '\0';
        char *paren = strrchr(st, ')');
        if (paren && paren[1] == ' ' && paren[2] == 'Z')
            return 1;
        usleep(20000);
    }
    return 0;
}

static pid_t read_pid(const char *path)
{
    FILE *f = fopen(path, "r");
    int pid = 0;
    cr_assert(f && fscanf(f, "%d", &pid) == 1, "no pid in %s", path);
    fclose(f);
    return (pid_t)pid;
}

Test(tuner_trials, a_child_that_closes_its_pipes_and_hangs_is_still_timed_out, .timeout = 25)
{
    /* before: the deadline held only while the pipes were open; waitpid then blocked */
    scripted("exec >&- 2>&-; sleep 60", 0.5, "timeout", "killed after 0.5 s");
}

/* Runs body (which starts `sleep 60 &` and writes its pid to %s) as the trial and checks the
 * status, and that the sleep did not outlive the trial. */
static void leaves_no_child(const char *body_fmt, double timeout, const char *status,
                            const char *detail)
{
    char pidf[] = "/tmp/pptune_trial_pid_XXXXXX";
    close(mkstemp(pidf));
    char body[256];
    snprintf(body, sizeof body, body_fmt, pidf);
    scripted(body, timeout, status, detail);
    pid_t g = read_pid(pidf);
    int gone = process_gone(g);
    if (!gone)
        kill(g, SIGKILL);
    cr_expect(gone, "%s: its child %d outlived the trial", body, (int)g);
    unlink(pidf);
}

Test(tuner_trials, a_wrappers_children_are_killed_with_it_on_timeout, .timeout = 25)
{
    leaves_no_child("sleep 60 & echo $! > %s; wait", 0.5, "timeout", "killed after 0.5 s");
}

Test(tuner_trials, what_a_child_leaves_running_when_it_exits_is_ended, .timeout = 25)
{
    leaves_no_child("sleep 60 & echo $! > %s; exit 3", 20, "crash", "exit 3");
}

Test(tuner_trials, a_child_flooding_stdout_does_not_take_memory, .timeout = 60)
{
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    /* 300 MB of output, then a hang: held in full, this took 300 MB or more */
    pp_tune_trial_result r = scripted("yes flood | head -c 300000000; sleep 60", 10,
                                      "timeout", "killed after");
    (void)r;
    getrusage(RUSAGE_SELF, &after);
    cr_expect_lt(after.ru_maxrss, before.ru_maxrss + 64 * 1024, "max RSS grew from %ld to %ld KiB",
                 before.ru_maxrss, after.ru_maxrss);
}

Test(tuner_trials, a_flooded_error_stream_keeps_its_head_and_tail)
{
    scripted("echo 'pprun: first line' >&2; yes spam | head -c 5000000 >&2; "
             "echo 'pprun: cannot allocate 1 bytes' >&2; exit 1",
             20, "oom", "pprun: first line");
}

Test(tuner_trials, absurd_step_times_are_not_ok)
{
    const char *times[] = {"-1", "0", "1e308", "NaN", "Infinity"};
    for (size_t i = 0; i < sizeof times / sizeof *times; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "echo '{\"median_step_seconds\": %s, \"ranks\": []}'; exit 0", times[i]);
        char *p = script(body);
        pp_tune_trial_result r = trial(p, 10);
        cr_expect_str_neq(r.status, "ok", "step time %s accepted: %s", times[i], r.detail);
        unlink(p);
        free(p);
    }
}

/* The tuner SIGKILLed while its trial runs (issue 30): before, the trial and what it started
 * kept running with no deadline (5 of 8 kills). The tuner here is a forked copy of this process
 * running the trial of a stand-in pprun that writes its own pid and its child's; with
 * also_watchdog, the tuner's other child (the watchdog) is SIGKILLed with it, as `kill -9` of
 * every process named pptune would. Returns whether the leader and its child are gone (the child:
 * -1, not looked at, when the watchdog was killed too). */
static void sigkill_tuner_mid_trial(int also_watchdog, int *gone_leader, int *gone_sleeper)
{
    char pidf[] = "/tmp/pptune_trial_pid_XXXXXX";
    close(mkstemp(pidf));
    char body[256];
    snprintf(body, sizeof body, "echo $$ > %s.tmp; sleep 60 & echo $! >> %s.tmp; mv %s.tmp %s; wait",
             pidf, pidf, pidf, pidf);
    char *p = script(body);
    unlink(pidf);
    pid_t tuner = fork();
    cr_assert(tuner >= 0);
    if (tuner == 0) {
        static pp_tune_model m;
        if (pp_tune_model_preset("tiny", &m) != PP_OK)
            _exit(3);
        static pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 1, .d = 1, .t = 1, .N = 4};
        pp_tune_trial_params tp = {.model = &m, .cfg = &c, .pprun = p, .steps = 3,
                                   .timeout_s = 120};
        pp_tune_trial_result r;
        (void)pp_tune_trial(&tp, &r);
        _exit(0);
    }
    for (int i = 0; i < 500 && access(pidf, F_OK) != 0; i++)
        usleep(10000);
    cr_assert_eq(access(pidf, F_OK), 0, "the trial never started");
    FILE *f = fopen(pidf, "r");
    int leader = 0, sleeper = 0;
    cr_assert(f && fscanf(f, "%d %d", &leader, &sleeper) == 2);
    fclose(f);
    if (also_watchdog) { /* the tuner's children but the trial: its watchdog */
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)tuner, (int)tuner);
        FILE *cf = fopen(path, "r");
        int k, n_dogs = 0;
        while (cf && fscanf(cf, "%d", &k) == 1)
            if (k != leader)
                kill(k, SIGKILL), n_dogs++;
        if (cf)
            fclose(cf);
        cr_assert_eq(n_dogs, 1, "expected the tuner's watchdog beside its trial");
    }
    kill(tuner, SIGKILL);
    waitpid(tuner, NULL, 0);
    *gone_leader = process_gone(leader);
    /* with the watchdog killed nothing ends the shell's background sleep: not waited for */
    *gone_sleeper = also_watchdog ? -1 : process_gone(sleeper);
    kill(leader, SIGKILL);
    kill(sleeper, SIGKILL);
    unlink(pidf);
    unlink(p);
    free(p);
}

Test(tuner_trials, a_trial_dies_with_a_sigkilled_tuner, .timeout = 30)
{
    int leader, sleeper;
    sigkill_tuner_mid_trial(0, &leader, &sleeper);
    cr_assert(leader, "the trial outlived the SIGKILLed tuner");
    cr_assert(sleeper, "the trial's child outlived the SIGKILLed tuner");
}

/* The watchdog killed too: the trial's leader still gets SIGTERM from the kernel
 * (PR_SET_PDEATHSIG), which is what makes srun and mpirun end their step and job; what it
 * started itself is then its own to end (here a shell's background sleep is not). */
Test(tuner_trials, a_trial_leader_dies_with_the_tuner_and_its_watchdog, .timeout = 30)
{
    int leader, sleeper;
    sigkill_tuner_mid_trial(1, &leader, &sleeper);
    cr_assert(leader, "the trial outlived the SIGKILLed tuner and watchdog");
}

/* Issue 30, finding 11: a summary of a 1e-300 s step, or of ranks the configuration does not
 * have, was recorded as an ok measurement. */
Test(tuner_trials, a_summary_that_is_no_measurement_is_a_crash)
{
    static const char *const bodies[] = {
        "echo '{\"median_step_seconds\": 1e-300, \"ranks\": []}'",
        "echo '{\"median_step_seconds\": 1e-5, \"ranks\": [{\"pipeline_rank\": 7, "
        "\"replica\": 0, \"peak_bytes\": {\"total\": 100}}]}'",
        "echo '{\"median_step_seconds\": 1e-5, \"ranks\": [{\"pipeline_rank\": 0, "
        "\"replica\": -1, \"peak_bytes\": {\"total\": 100}}]}'",
        "echo '{\"median_step_seconds\": 1e-5, \"ranks\": [{\"pipeline_rank\": 0, "
        "\"replica\": 0, \"peak_bytes\": {\"total\": -5}}]}'",
        /* issue 26: a run of another model (2 layers of tiny's 4) measures nothing of tiny */
        "echo '{\"median_step_seconds\": 1e-5, \"ranks\": [{\"pipeline_rank\": 0, "
        "\"replica\": 0, \"peak_bytes\": {\"total\": 100}}], \"model\": {\"name\": "
        "\"tiny\", \"layers\": 2, \"hidden\": 32, \"heads\": 4, \"kv_heads\": 4, "
        "\"ffn\": 128, \"vocab\": 256}}'",
    };
    static const char *const details[] = {"median step time", "outside the configuration",
                                          "outside the configuration",
                                          "outside the configuration",
                                          "another model than tiny (model.layers: expected 4, "
                                          "got 2)"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        scripted(bodies[i], 20, "crash", details[i]);
}

/* A context-parallel candidate's trial (pprun --cp 2, the default unstaged CPU backend, whose
 * transport copies count) on one pipeline rank, so no pipeline message's timing enters: its
 * measured peak equals the tuner's model of the trial (the runtime's plan, the ring's held
 * message copies included) to the byte, with and without recomputation; and cp 1, whose one
 * rank takes every core as kernel threads (2 here), each beyond the first with its attention
 * scratch (the model takes pprun's default kernel threads, pp_launch_threads_per_rank). */
Test(tuner_trials, context_parallel_candidates_match_the_memory_model_to_the_byte)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    for (int rc = PP_RECOMPUTE_NONE; rc <= PP_RECOMPUTE_FULL + 1; rc++) {
        int cp = rc <= PP_RECOMPUTE_FULL ? 2 : 1;
        pp_config c = {.schedule = "gpipe", .p = 1, .v = 1, .b = 2, .d = 1, .t = 1, .N = 2,
                       .cp = cp,
                       .recompute = rc <= PP_RECOMPUTE_FULL ? (pp_recompute)rc
                                                            : PP_RECOMPUTE_NONE};
        pp_tune_trial_params tp = {.model = &m, .cfg = &c, .pprun = PPRUN, .steps = 3,
                                   .timeout_s = 60};
        pp_tune_trial_result r;
        cr_assert_eq(pp_tune_trial(&tp, &r), PP_OK, "%s", pp_err_msg());
        cr_assert_str_eq(r.status, "ok", "%s: %s", r.status, r.detail);
        pp_sched_params sp;
        pp_tune_sched_params(&m, &c, &sp);
        pp_sched *s;
        cr_assert_eq(pp_sched_generate("gpipe", &sp, &s), PP_OK);
        pp_tune_rank_mem mem[1];
        cr_assert_eq(pp_tune_memory_runtime(&m, &c, s, NULL, mem), PP_OK, "%s", pp_err_msg());
        cr_assert_eq(mem[0].total, r.peak_per_rank[0],
                     "cp %d recompute %d: predicted %.0f, measured %.0f", cp, (int)c.recompute,
                     mem[0].total, r.peak_per_rank[0]);
        pp_sched_destroy(s);
    }
}
