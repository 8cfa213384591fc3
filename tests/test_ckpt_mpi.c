/* test_ckpt_mpi.c — pprun's checkpoints under the MPI transport (runtime/checkpoint_dist.c):
 * process 0 gathers every process's stages and writes the file the thread transport writes
 * for the same run (the same bytes up to the step times, which follow the state hash); a run
 * stopped after 2 steps and resumed to 4 under mpirun ends with the uninterrupted run's losses,
 * gradient norms and parameters bit for bit; a checkpoint crosses between the transports both
 * ways; a refused checkpoint stops every process with exit code 2 and one message.
 * Skipped, with one line saying why, where mpirun is missing or pprun was built without MPI. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"
#include "pp_test_dir.h"
#include "pprun_json.h"

#define PPRUN PP_BINARY_DIR "/runtime/pprun"
/* 1f1b on 2 pipeline ranks, the tiny model: every process holds its own stages */
#define PIPE2 "--model tiny --schedule 1f1b --ranks 2 --microbatches 4 --seq 16 --seed 5"

PP_TEST_DIR(pp_ckmpi)
TestSuite(ckpt_mpi, .init = pp_ckmpi_dir_make, .fini = pp_ckmpi_dir_remove, .timeout = 300);

/* pprun ARGS --steps STEPS --save-every 2 --checkpoint PATH [--resume] --json: under mpirun -np
 * NP (np > 0) or with threads (np 0). Returns the summary; the run must exit 0. */
static json_t *run(int np, const char *args, int steps, const char *path, int resume)
{
    char launch[64] = "";
    if (np > 0)
        snprintf(launch, sizeof launch, MPIRUN " -np %d", np);
    pp_test_run_result r = pp_test_run(
        "%s " PPRUN " %s%s --steps %d --save-every 2 --checkpoint %s%s --json --quiet", launch,
        args, np > 0 ? " --transport mpi" : "", steps, path, resume ? " --resume" : "");
    cr_assert_eq(r.code, 0, "pprun %s (%d processes, %d steps%s): exit %d: %s", args, np, steps,
                 resume ? ", resumed" : "", r.code, r.err);
    json_t *j = pp_test_parse_json(r.out, args);
    pp_test_run_done(&r);
    return j;
}

/* The two checkpoints hold the same state: the same state hash and the same bytes up to it
 * (the step times after it differ between any two runs). */
static void same_state(const char *a, const char *b, const char *what)
{
    pp_rt_ckpt ca = {0}, cb = {0};
    cr_assert_eq(pp_rt_checkpoint_load(NULL, a, 0, &ca), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_rt_checkpoint_load(NULL, b, 0, &cb), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(ca.step, cb.step, "%s: step %d and %d", what, ca.step, cb.step);
    cr_assert_eq(ca.state_hash, cb.state_hash, "%s: state %016llx (threads) and %016llx (MPI)",
                 what, (unsigned long long)ca.state_hash, (unsigned long long)cb.state_hash);
    char *da = pp_test_slurp(a), *db = pp_test_slurp(b);
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    cr_assert(fa && fb);
    fseek(fa, 0, SEEK_END), fseek(fb, 0, SEEK_END);
    long la = ftell(fa), lb = ftell(fb);
    fclose(fa), fclose(fb);
    cr_assert_eq(la, lb, "%s: %ld and %ld bytes", what, la, lb);
    long state_end = la - 8 - 8 * (long)ca.step; /* before the step times and the file hash */
    cr_assert(memcmp(da, db, (size_t)state_end) == 0, "%s: the files differ before the step times",
              what);
    free(da), free(db);
}

/* ARGS under mpirun -np NP against threads: the uninterrupted runs' checkpoints hold the same
 * state; a 2-step MPI run resumed to 4 steps trains as the uninterrupted threads run did. */
static void resumes_as_threads(const char *args, int np)
{
    pp_test_need_mpi();
    char *t = pp_test_path_in(g_dir, "threads.ckpt"), *m = pp_test_path_in(g_dir, "mpi.ckpt");
    char *r = pp_test_path_in(g_dir, "resumed.ckpt");
    json_t *ref = run(0, args, 4, t, 0);
    json_decref(run(np, args, 4, m, 0));
    same_state(t, m, args);
    json_decref(run(np, args, 2, r, 0));
    json_t *resumed = run(np, args, 4, r, 1);
    pp_test_expect_same_training(ref, resumed, args, "MPI, resumed at step 2");
    same_state(t, r, args);
    json_decref(ref);
    json_decref(resumed);
}

Test(ckpt_mpi, pipeline_1f1b_resumes_as_threads)
{
    resumes_as_threads(PIPE2, 2);
}

/* ZeRO-1: each replica's rank holds a shard of the stage's m and v; the file holds them whole */
Test(ckpt_mpi, sharded_optimizer_dp2_resumes_as_threads)
{
    resumes_as_threads(PIPE2 " --dp 2 --shard optimizer", 4);
}

/* expert parallelism: each replica's stages hold its experts */
Test(ckpt_mpi, moe_ep2_resumes_as_threads)
{
    resumes_as_threads("--model-config " PP_FIXTURES_DIR "/hf/tiny-mixtral.json --microbatches 4 "
                       "--seq 16 --seed 5 --schedule 1f1b --ranks 2 --dp 2 --ep 2",
                       4);
}

/* A checkpoint names no transport: written by threads, it resumes under MPI, and the reverse. */
Test(ckpt_mpi, checkpoints_cross_transports)
{
    pp_test_need_mpi();
    char *t = pp_test_path_in(g_dir, "t.ckpt"), *a = pp_test_path_in(g_dir, "a.ckpt");
    char *b = pp_test_path_in(g_dir, "b.ckpt");
    json_t *ref = run(0, PIPE2, 4, t, 0);
    json_decref(run(0, PIPE2, 2, a, 0));
    json_t *ta = run(2, PIPE2, 4, a, 1);
    pp_test_expect_same_training(ref, ta, PIPE2, "MPI resumed from a threads checkpoint");
    json_decref(run(2, PIPE2, 2, b, 0));
    json_t *tb = run(0, PIPE2, 4, b, 1);
    pp_test_expect_same_training(ref, tb, PIPE2, "threads resumed from an MPI checkpoint");
    json_decref(ref);
    json_decref(ta);
    json_decref(tb);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* --resume from a checkpoint that must be refused (launched after `before`: a command that
 * runs the rest): every process exits 2 (each says its exit code through a shell around it)
 * and the reason is printed once. */
static void refused_everywhere(const char *before, const char *args, const char *path,
                               const char *says)
{
    pp_test_run_result r = pp_test_run("%s " MPIRUN " -np 2 sh -c '\"$0\" \"$@\"; echo \"pprun "
                                       "exit $?\" >&2' " PPRUN " " PIPE2
                                       " %s --transport mpi --steps 4 --resume --save-every 2 "
                                       "--checkpoint %s --quiet",
                                       before, args, path);
    cr_assert_eq(count(r.err, "pprun exit 2"), 2, "not every process exited 2:\n%s", r.err);
    cr_assert_eq(count(r.err, says), 1, "\"%s\" not said exactly once in:\n%s", says, r.err);
    pp_test_run_done(&r);
}

Test(ckpt_mpi, a_refused_checkpoint_stops_every_process)
{
    pp_test_need_mpi();
    char *t = pp_test_path_in(g_dir, "t.ckpt"), *c = pp_test_path_in(g_dir, "c.ckpt");
    json_decref(run(2, PIPE2, 2, t, 0));
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cp %s %s && printf '\\001' | dd of=%s bs=1 seek=4000 conv=notrunc 2>/dev/null", t, c,
             c);
    cr_assert_eq(system(cmd), 0);
    refused_everywhere("", "", c, "checksum mismatch (corrupted)");
    refused_everywhere("", "--lr 0.5", t, "was written by a different run: it has lr=");
    /* another run holds the lock (flock(1) keeps it while its command runs): process 0 takes
     * it, and every process learns that it could not */
    snprintf(cmd, sizeof cmd, "flock %s.lock", t);
    refused_everywhere(cmd, "", t, "another pprun is using checkpoint");
}
