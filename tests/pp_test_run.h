/* pp_test_run.h — runs a program from a test the way a user does (one shell command line) and
 * hands back its exit status and what it wrote to stdout and stderr, for the suites that check
 * pptune and pprun as programs.
 *
 * The command line runs as `{ LINE\n} >OUT 2>ERR` under /bin/sh, so redirections cover every
 * command of a list (`a && b`), and the output goes to files in a fresh /tmp directory (no pipe
 * that could fill up and block the child). A child that does not exit normally (killed by a
 * signal) fails the test. Does not time anything or stop hangs: ctest's TIMEOUT does that.
 * Header-only (static inline) so each suite picks it up by including it. */
#ifndef PP_TEST_RUN_H
#define PP_TEST_RUN_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int code;  /* exit status */
    char *out; /* all of stdout, NUL-terminated ("" when it wrote nothing) */
    char *err; /* all of stderr, NUL-terminated */
} pp_test_run_result;

/* Reads a whole file into a NUL-terminated heap string; "" where it cannot be read. */
static inline char *pp_test_slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    cr_assert(buf);
    while (fp && (got = fread(buf + len, 1, cap - len - 1, fp)) > 0) {
        len += got;
        if (cap - len < 1024) {
            buf = realloc(buf, cap *= 2);
            cr_assert(buf);
        }
    }
    buf[len] = '\0';
    if (fp)
        fclose(fp);
    return buf;
}

/* Runs the printf-formatted shell command line; free the result with pp_test_run_done. */
__attribute__((format(printf, 1, 2))) static inline pp_test_run_result pp_test_run(const char *fmt,
                                                                                   ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    cr_assert(n >= 0, "bad command format \"%s\"", fmt);
    char *line = malloc((size_t)n + 1);
    cr_assert(line);
    va_start(ap, fmt);
    vsnprintf(line, (size_t)n + 1, fmt, ap);
    va_end(ap);

    char dir[] = "/tmp/pp_test_run_XXXXXX";
    cr_assert(mkdtemp(dir), "cannot make a directory for the output of %s", line);
    char out[64], err[64];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    size_t cap = strlen(line) + 2 * sizeof out + 32;
    char *cmd = malloc(cap);
    cr_assert(cmd);
    snprintf(cmd, cap, "{ %s\n} >%s 2>%s", line, out, err);
    int st = system(cmd);
    cr_assert(st != -1 && WIFEXITED(st), "%s did not exit normally (status %d)", line, st);

    pp_test_run_result r = {WEXITSTATUS(st), pp_test_slurp(out), pp_test_slurp(err)};
    remove(out);
    remove(err);
    rmdir(dir);
    free(cmd);
    free(line);
    return r;
}

static inline void pp_test_run_done(pp_test_run_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

/* Runs cmd with stderr joined to stdout: returns the exit status, the text in *out (caller
 * frees). For checks that only look for a message, wherever the program put it. */
static inline int pp_test_run_merged(const char *cmd, char **out)
{
    pp_test_run_result r = pp_test_run("{ %s\n} 2>&1", cmd);
    free(r.err);
    *out = r.out;
    return r.code;
}

/* Runs `job` (an mpirun command line of two ranks; stderr is captured here) in the background,
 * waits until its first step is reported, SIGSTOPs rank 1 (found by `marker`, a pgrep -f pattern
 * that matches the job's processes but not this shell, e.g. 'see[d] 4242421 --watchdog' for a
 * job given --seed $((4242420 + 1))), waits for the job, and hands back: in out "exit RC" (and
 * "NO VICTIM" when training never started, "LEFT RUNNING: ..." for a process that outlived the
 * job), in err the job's stderr without its step lines. Kills whatever of the job is left. For
 * the watchdog tests of the process transports (MPI, NCCL). */
static inline pp_test_run_result pp_test_run_stopping_rank1(const char *job, const char *marker)
{
    char log[] = "/tmp/pp_watchdog_XXXXXX";
    int fd = mkstemp(log);
    cr_assert(fd >= 0);
    close(fd);
    pp_test_run_result r = pp_test_run(
        "timeout -s KILL 150 %s 2> %s & job=$!; "
        "for i in $(seq 1 1200); do grep -q 'step 1/' %s && break; sleep 0.1; done; "
        "for p in $(pgrep -f '%s'); do "
        "  if tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | "
        "     grep -qx OMPI_COMM_WORLD_RANK=1; then victim=$p; fi; "
        "done; "
        "[ -n \"$victim\" ] || { echo NO VICTIM; kill $job; }; "
        "kill -STOP $victim; wait $job; rc=$?; "
        "kill -CONT $victim 2>/dev/null; kill -9 $victim 2>/dev/null; "
        "echo \"exit $rc\"; grep -v '^pprun: step ' %s >&2; "
        "sleep 1; pgrep -af '%s' | sed 's/^/LEFT RUNNING: /'; "
        "pkill -9 -f '%s'; true", /* nothing outlives the test */
        job, log, log, marker, log, marker, marker);
    unlink(log);
    return r;
}

/* job_fmt: the job's command line with one %ld, the seed (written as $((%ld + 1)) so the
 * shell's own command line does not match the marker); the seed is unique to this test process
 * (base + its pid), so two suites running the same test at once (ctest -j) never find, stop or
 * kill each other's ranks. */
static inline pp_test_run_result pp_test_run_stopping_rank1_seeded(const char *job_fmt, long base)
{
    long seed = base + (long)getpid() % 1000000;
    char job[1024], marker[64];
    snprintf(job, sizeof job, job_fmt, seed);
    snprintf(marker, sizeof marker, "see[d] %ld --watchdog", seed + 1);
    return pp_test_run_stopping_rank1(job, marker);
}

#endif
