/* trials.c — runs one candidate for a few steps with the bundled runtime (`pprun --json`) in a
 * child process with a time limit, and classifies what happened.
 *
 * The child's stdout (the JSON summary) and stderr (its error line) are read through pipes
 * while the parent polls with a deadline; past it the child gets SIGKILL and the trial is a
 * "timeout". Exit 0 with a parsable summary is "ok"; an error line naming memory
 * (out of memory / cannot allocate) or death by SIGKILL without our kill (the kernel's OOM
 * killer) is "oom"; any other signal or non-zero exit is "crash". A trial's failure is a result,
 * never an error of this function: only failing to start the child (fork, pipe) is.
 * Also here: the default trial runner of the search (pp_tune_runner_pprun) and where it finds
 * pprun. Not here: which candidates get trials, recalibration and choice (search_trials.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pp_profile.h"
#include "pp_tune.h"

#define MAX_ARGS (PP_PROFILE_PPRUN_MAX_ARGS + 8)

/* pprun's options for the configuration (pp_profile_pprun_argv, the one builder) and the
 * trial's own: steps, every rank a thread, the JSON summary. */
static int build_argv(const pp_tune_trial_params *tp,
                      char store[MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN], char **argv)
{
    pp_profile_config pc;
    pp_tune_config_to_profile(tp->cfg, &pc);
    /* on GPUs: the CUDA backend in the precision users train with; rank g on GPU g */
    pp_profile_pprun_line line = {.model = tp->model->runtime_model, .config = &pc,
                                  .seq = tp->model->seq, .cuda = tp->cuda,
                                  .precision = tp->cuda ? PP_PREC_BF16 : PP_PREC_FP32};
    int n = 0;
    argv[n++] = (char *)tp->pprun;
    n += pp_profile_pprun_argv(&line, store + n, argv + n);
#define ARG(...) (snprintf(store[n], sizeof store[n], __VA_ARGS__), argv[n] = store[n], n++)
    ARG("--steps"), ARG("%d", tp->steps > 1 ? tp->steps : 2);
    /* Trials run every rank as a thread of one child, even when pptune itself was started by
     * mpirun/srun (the child would otherwise inherit the launcher's variables and pick MPI). */
    ARG("--transport"), ARG("thread");
    ARG("--json"), ARG("--quiet");
#undef ARG
    argv[n] = NULL;
    return n;
}

typedef struct {
    char *data;
    size_t len, cap;
} buf;

static int buf_read(int fd, buf *b)
{
    if (b->cap - b->len < 4096) {
        size_t cap = b->cap ? 2 * b->cap : 65536;
        char *d = realloc(b->data, cap + 1);
        if (!d)
            return -1;
        b->data = d, b->cap = cap;
    }
    ssize_t r = read(fd, b->data + b->len, b->cap - b->len);
    if (r > 0)
        b->len += (size_t)r;
    b->data[b->len] = '\0';
    return (int)r;
}

/* Collects the child's output until both pipes close or the deadline passes. */
static int collect(int out_fd, int err_fd, double deadline, buf *out, buf *err)
{
    struct pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        double left = deadline - pp_now();
        if (left <= 0)
            return 1; /* timed out */
        int rc = poll(fds, 2, (int)(left * 1000) + 1);
        if (rc < 0 && errno == EINTR)
            continue;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (buf_read(fds[i].fd, i == 0 ? out : err) <= 0) {
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    return 0;
}

static void parse_summary(const char *json, const pp_tune_config *c, pp_tune_trial_result *r)
{
    json_error_t e;
    json_t *root = json_loads(json, 0, &e);
    json_t *med = root ? json_object_get(root, "median_step_seconds") : NULL;
    json_t *ranks = root ? json_object_get(root, "ranks") : NULL;
    if (!json_is_number(med) || !json_is_array(ranks)) {
        snprintf(r->status, sizeof r->status, "crash");
        snprintf(r->detail, sizeof r->detail, "pprun exited 0 but its JSON summary is unreadable");
        json_decref(root);
        return;
    }
    r->step_time = json_number_value(med);
    for (size_t i = 0; i < json_array_size(ranks); i++) {
        json_t *rk = json_array_get(ranks, i);
        int g = (int)json_integer_value(json_object_get(rk, "rank"));
        double total = (double)json_integer_value(
            json_object_get(json_object_get(rk, "peak_bytes"), "total"));
        if (g < c->p && g < PP_TUNE_TRIAL_MAX_RANKS)
            r->peak_per_rank[g] = total;
        if (total > r->peak)
            r->peak = total;
    }
    snprintf(r->status, sizeof r->status, "ok");
    json_decref(root);
}

static void classify(int wstatus, int killed, const buf *out, const buf *err,
                     const pp_tune_trial_params *tp, pp_tune_trial_result *r)
{
    const char *msg = err->data ? err->data : "";
    char line[160];
    snprintf(line, sizeof line, "%s", msg);
    line[strcspn(line, "\n")] = '\0';
    if (killed) {
        snprintf(r->status, sizeof r->status, "timeout");
        snprintf(r->detail, sizeof r->detail, "killed after %.1f s", tp->timeout_s);
    } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
        parse_summary(out->data ? out->data : "", tp->cfg, r);
    } else if (strstr(msg, "out of memory") || strstr(msg, "cannot allocate") ||
               (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)) {
        snprintf(r->status, sizeof r->status, "oom");
        snprintf(r->detail, sizeof r->detail, "%s", line[0] ? line : "killed (SIGKILL)");
    } else {
        snprintf(r->status, sizeof r->status, "crash");
        if (WIFSIGNALED(wstatus))
            snprintf(r->detail, sizeof r->detail, "signal %d (%s)", WTERMSIG(wstatus),
                     strsignal(WTERMSIG(wstatus)));
        else
            snprintf(r->detail, sizeof r->detail, "exit %d: %s", WEXITSTATUS(wstatus), line);
    }
}

pp_status pp_tune_trial(const pp_tune_trial_params *tp, pp_tune_trial_result *r)
{
    memset(r, 0, sizeof *r);
    if (!tp->model->runtime_model[0] || tp->cfg->t != 1)
        return PP_ERR(PP_ERR_UNSUPPORTED, "the runtime cannot run %s with t = %d",
                      tp->model->name, tp->cfg->t);
    char store[MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN], *argv[MAX_ARGS + 1];
    build_argv(tp, store, argv);
    int out_p[2], err_p[2];
    if (pipe(out_p) != 0)
        return PP_ERR(PP_ERR_IO, "trial: pipe: %s", strerror(errno));
    if (pipe(err_p) != 0) {
        close(out_p[0]), close(out_p[1]);
        return PP_ERR(PP_ERR_IO, "trial: pipe: %s", strerror(errno));
    }
    double t0 = pp_now();
    pid_t pid = fork();
    if (pid < 0) {
        close(out_p[0]), close(out_p[1]), close(err_p[0]), close(err_p[1]);
        return PP_ERR(PP_ERR_IO, "trial: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        dup2(out_p[1], 1);
        dup2(err_p[1], 2);
        close(out_p[0]), close(out_p[1]), close(err_p[0]), close(err_p[1]);
        execv(tp->pprun, argv);
        fprintf(stderr, "cannot run %s: %s\n", tp->pprun, strerror(errno));
        _exit(127);
    }
    close(out_p[1]), close(err_p[1]);
    buf out = {0}, err = {0};
    int killed = collect(out_p[0], err_p[0], t0 + tp->timeout_s, &out, &err);
    if (killed)
        kill(pid, SIGKILL);
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
        ;
    close(out_p[0]), close(err_p[0]);
    r->wall_s = pp_now() - t0;
    classify(wstatus, killed, &out, &err, tp, r);
    free(out.data);
    free(err.data);
    return PP_OK;
}

pp_status pp_tune_runner_pprun(void *ctx, const pp_tune_trial_params *tp, pp_tune_trial_result *r)
{
    pp_tune_trial_params q = *tp;
    q.pprun = (const char *)ctx;
    return pp_tune_trial(&q, r);
}

pp_status pp_tune_pprun_find(char *path, size_t n)
{
    const char *env = getenv("PPTUNE_PPRUN");
    if (env && *env) {
        snprintf(path, n, "%s", env);
        if (access(path, X_OK) == 0)
            return PP_OK;
        return PP_ERR(PP_ERR_NOTFOUND, "PPTUNE_PPRUN=%s is not an executable program", env);
    }
    char exe[PATH_MAX - 32]; /* room for the suffixes below */
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = NULL;
    if (len > 0) {
        exe[len] = '\0';
        slash = strrchr(exe, '/');
    }
    if (slash) {
        *slash = '\0';
        snprintf(path, n, "%s/../runtime/pprun", exe);
        if (access(path, X_OK) == 0)
            return PP_OK;
        snprintf(path, n, "%s/pprun", exe);
        if (access(path, X_OK) == 0)
            return PP_OK;
    }
    return PP_ERR(PP_ERR_NOTFOUND, "cannot find pprun for trials (set PPTUNE_PPRUN)");
}
