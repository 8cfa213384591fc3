/* trials.c — runs one candidate for a few steps with the bundled runtime (`pprun --json`) in a
 * child process with a time limit, and classifies what happened. On this machine the child is
 * pprun with every rank a thread; in an allocation (tp->alloc, alloc.c) it is the launcher, srun
 * (a job step) or mpirun, starting one pprun process per rank over MPI on the nodes it needs.
 * Killing the launcher's group ends the step on every node (srun cancels its step on SIGTERM,
 * mpirun ends its daemons), and --kill-on-bad-exit ends it when one rank dies.
 *
 * The child runs in its own process group. Its stdout (the JSON summary) and stderr (its error
 * line) are read through pipes into bounded buffers (head and tail kept) while the parent polls
 * and reaps under one deadline; past it the whole group gets SIGTERM, then SIGKILL, and the
 * trial is a "timeout"; whatever the child left running is ended with the group either way.
 * Exit 0 with a parsable summary whose step time is a positive finite number no longer than the
 * trial itself is "ok" (anything else is a "crash" saying why); an error line naming memory
 * (out of memory / cannot allocate) or death by SIGKILL without our kill (the kernel's OOM
 * killer) is "oom"; under a launcher the ranks' and launcher's lines tell oom, node-lost, hang
 * (pprun's watchdog) and mpi apart; any other signal or non-zero exit is "crash". A trial's
 * failure is a result, never an error of this function: only failing to start the child (fork,
 * pipe) is.
 * Also here: the default trial runner of the search (pp_tune_runner_pprun) and where it finds
 * pprun. Not here: which candidates get trials, recalibration and choice (search_trials.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
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

#define LAUNCH_ARGS 12 /* srun's or mpirun's words before pprun (alloc.c) */
#define MAX_ARGS (PP_PROFILE_PPRUN_MAX_ARGS + 10 + LAUNCH_ARGS)

/* The data-parallel replicas a trial runs: all d where the allocation holds d replicas of
 * `replica` ranks (or there is no allocation: threads on this machine), else the largest
 * divisor of d that fits (one pipeline replica at least: the step of one replica is what the
 * other replicas repeat in parallel); 0 when not even one replica fits. */
static int reduced_d(const pp_tune_trial_params *tp, int replica)
{
    int d = tp->cfg->d;
    if (!tp->alloc || !tp->alloc->launcher[0])
        return d;
    for (int k = d; k >= 1; k--)
        if (d % k == 0 && replica * k <= tp->alloc->slots)
            return k;
    return 0;
}

/* pprun's options for the configuration (pp_profile_pprun_argv, the one builder) and the
 * trial's own: steps, every rank a thread, the JSON summary. */
static int build_argv(const pp_tune_trial_params *tp,
                      char store[MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN], char **argv, char *where,
                      size_t where_n, int *d_run)
{
    pp_profile_config pc;
    pp_tune_config_to_profile(tp->cfg, &pc);
    /* on GPUs: the CUDA backend in the precision users train with; rank g on GPU g */
    pp_profile_pprun_line line = {.model = tp->model->runtime_model, .config = &pc,
                                  .seq = tp->model->seq, .cuda = tp->cuda,
                                  .precision = tp->cuda ? PP_PREC_BF16 : PP_PREC_FP32,
                                  .sequence_parallel = tp->sequence_parallel};
    int replica = tp->cfg->p * (tp->cfg->t > 1 ? tp->cfg->t : 1), nodes = 1;
    int full_d = tp->cfg->d;
    pc.d = reduced_d(tp, replica);
    if (pc.d < 1)
        return -1;
    int n = pp_tune_alloc_argv(tp->alloc, replica * pc.d, tp->timeout_s, LAUNCH_ARGS, store,
                               argv, &nodes);
    if (n < 0)
        return -1;
    int launched = n > 0;
    if (d_run)
        *d_run = pc.d;
    argv[n++] = (char *)tp->pprun;
    n += pp_profile_pprun_argv(&line, store + n, argv + n);
#define ARG(...) (snprintf(store[n], sizeof store[n], __VA_ARGS__), argv[n] = store[n], n++)
    ARG("--steps"), ARG("%d", tp->steps > 1 ? tp->steps : 2);
    /* On this machine every rank is a thread of one child, even when pptune itself was started
     * by mpirun/srun (the child would otherwise inherit the launcher's variables and pick MPI);
     * under a launcher one process per rank over MPI, and a rank stuck waiting for a peer fails
     * (the watchdog) within a fifth of the limit, so a hang is told from a slow trial. */
    ARG("--transport"), ARG(launched ? "mpi" : "thread");
    if (launched)
        ARG("--watchdog"), ARG("%g", tp->timeout_s / 5 > 1 ? tp->timeout_s / 5 : 1);
    ARG("--json"), ARG("--quiet");
#undef ARG
    argv[n] = NULL;
    if (where && launched && pc.d < full_d)
        snprintf(where, where_n,
                 "%s on %d node%s of %s, reduced: d=%d of %d (the allocation holds %d ranks; "
                 "the data-parallel all-reduce over %d replicas is not measured)",
                 tp->alloc->launcher, nodes, nodes > 1 ? "s" : "", tp->alloc->nodes, pc.d,
                 full_d, tp->alloc->slots, full_d);
    else if (where && launched)
        snprintf(where, where_n, "%s on %d node%s of %s", tp->alloc->launcher, nodes,
                 nodes > 1 ? "s" : "", tp->alloc->nodes);
    else if (where)
        snprintf(where, where_n, "ranks as threads of one pprun on this machine");
    return n;
}

/* The child's output is kept bounded (a child flooding stdout must not take the tuner's
 * memory): the first BUF_HEAD bytes and the last BUF_TAIL bytes, with the count dropped between
 * them. The JSON summary and the error line are small and come first or last. */
#define BUF_HEAD (768 * 1024)
#define BUF_TAIL (256 * 1024)

typedef struct {
    char *data;          /* head, then (buf_finish) the joined text; NUL-terminated */
    size_t len, cap;     /* head bytes held, allocated */
    char *tail;          /* ring of BUF_TAIL bytes once the head is full */
    size_t tail_pos;     /* next write in the ring */
    unsigned long long tail_total, dropped; /* bytes through the ring; bytes lost */
} buf;

static int buf_read(int fd, buf *b)
{
    char chunk[65536];
    ssize_t r = read(fd, chunk, sizeof chunk);
    if (r <= 0)
        return (int)r;
    size_t n = (size_t)r, k = 0;
    if (b->len < BUF_HEAD) { /* the head grows to BUF_HEAD */
        size_t want = b->len + n < BUF_HEAD ? b->len + n : BUF_HEAD;
        if (want + 1 > b->cap) {
            size_t cap = b->cap ? 2 * b->cap : 65536;
            cap = cap < want + 1 ? want + 1 : cap;
            cap = cap > BUF_HEAD + 1 ? BUF_HEAD + 1 : cap;
            char *d = realloc(b->data, cap);
            if (!d)
                return -1;
            b->data = d, b->cap = cap;
        }
        k = want - b->len;
        memcpy(b->data + b->len, chunk, k);
        b->len = want;
        b->data[b->len] = '\0';
    }
    if (k < n && !b->tail && !(b->tail = malloc(BUF_TAIL)))
        return -1;
    for (; k < n; k++) { /* the rest through the ring: what falls out of it is dropped */
        if (b->tail_total >= BUF_TAIL)
            b->dropped++;
        b->tail[b->tail_pos] = chunk[k];
        b->tail_pos = (b->tail_pos + 1) % BUF_TAIL;
        b->tail_total++;
    }
    return (int)r;
}

/* Joins head, a note on what was dropped, and the tail into b->data. */
static void buf_finish(buf *b)
{
    if (!b->tail)
        return;
    size_t held = b->tail_total < BUF_TAIL ? (size_t)b->tail_total : BUF_TAIL;
    char note[96];
    int nl = b->dropped ? snprintf(note, sizeof note, "\n[... %llu bytes dropped ...]\n",
                                   b->dropped)
                        : 0;
    char *d = realloc(b->data, b->len + (size_t)nl + held + 1);
    if (d) {
        memcpy(d + b->len, note, (size_t)nl);
        size_t start = b->tail_total < BUF_TAIL ? 0 : b->tail_pos;
        for (size_t i = 0; i < held; i++)
            d[b->len + (size_t)nl + i] = b->tail[(start + i) % BUF_TAIL];
        b->len += (size_t)nl + held;
        d[b->len] = '\0';
        b->data = d;
    }
    free(b->tail);
    b->tail = NULL;
}

/* How long a child's leftovers (a wrapper's children still holding the pipes) may keep writing
 * after the child itself exited, and how long the group has between SIGTERM and SIGKILL. */
#define AFTER_EXIT_S 1.0
#define KILL_GRACE_S 2.0

/* Waits for output on fds (n of them; 0: just sleeps) for at most s seconds, and no more than
 * 50 ms so that the child's exit is noticed (a poll error or EINTR is retried by the caller
 * against the same deadline). */
static void poll_for(struct pollfd *fds, nfds_t n, double s)
{
    int ms = s <= 0 ? 0 : s > 0.05 ? 50 : (int)(s * 1000) + 1;
    (void)poll(fds, n, ms);
}

/* One deadline over reading and reaping: collects the child's output and reaps it, until the
 * child has exited and both pipes closed (or AFTER_EXIT_S passed since its exit), or the
 * deadline passes. Returns 1 on timeout, 0 when *wstatus holds the child's status. */
static int collect(pid_t pid, int out_fd, int err_fd, double deadline, buf *out, buf *err,
                   int *wstatus)
{
    struct pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    int open_fds = 2, reaped = 0;
    double exited_at = 0;
    for (;;) {
        if (!reaped && waitpid(pid, wstatus, WNOHANG) == pid)
            reaped = 1, exited_at = pp_now();
        if (reaped && (open_fds == 0 || pp_now() - exited_at > AFTER_EXIT_S))
            return 0;
        double left = deadline - pp_now();
        if (left <= 0 && !reaped)
            return 1; /* timed out */
        if (left <= 0)
            return 0; /* exited in time; only its leftovers still write */
        for (int i = 0; i < 2; i++)
            fds[i].revents = 0;
        poll_for(fds, 2, left);
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (buf_read(fds[i].fd, i == 0 ? out : err) <= 0) {
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
}

/* Ends the child's process group (the child and whatever it started): SIGTERM, KILL_GRACE_S to
 * exit, then SIGKILL; reaps the child unless reaped is set. */
static void end_group(pid_t pid, int reaped, int *wstatus)
{
    kill(-pid, SIGTERM);
    double until = pp_now() + KILL_GRACE_S;
    while (!reaped && pp_now() < until) {
        if (waitpid(pid, wstatus, WNOHANG) == pid)
            reaped = 1;
        else
            poll_for(NULL, 0, until - pp_now());
    }
    kill(-pid, SIGKILL);
    while (!reaped && waitpid(pid, wstatus, 0) < 0 && errno == EINTR)
        ;
}

static void parse_summary(const char *json, const pp_tune_config *c, double wall_s,
                          pp_tune_trial_result *r)
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
    double t = json_number_value(med);
    if (!(isfinite(t) && t > 0 && t <= wall_s)) {
        snprintf(r->status, sizeof r->status, "crash");
        snprintf(r->detail, sizeof r->detail,
                 "pprun reported a median step time of %g s (expected a positive time within "
                 "the trial's %.1f s)",
                 t, wall_s);
        json_decref(root);
        return;
    }
    r->step_time = t;
    for (size_t i = 0; i < json_array_size(ranks); i++) {
        json_t *rk = json_array_get(ranks, i);
        /* per pipeline rank of replica 0: the fullest of its tensor-parallel ranks */
        int pr = (int)json_integer_value(json_object_get(rk, "pipeline_rank"));
        int k = (int)json_integer_value(json_object_get(rk, "replica"));
        double total = (double)json_integer_value(
            json_object_get(json_object_get(rk, "peak_bytes"), "total"));
        if (k == 0 && pr >= 0 && pr < c->p && pr < PP_TUNE_TRIAL_MAX_RANKS &&
            total > r->peak_per_rank[pr])
            r->peak_per_rank[pr] = total;
        if (total > r->peak)
            r->peak = total;
    }
    snprintf(r->status, sizeof r->status, "ok");
    json_decref(root);
}

/* The line of msg that says most: pprun's own error line (a rank's), else the first naming an
 * error (a launcher's: "srun: error: n2: task 1: Killed"), else the first line. */
static void detail_line(const char *msg, char *line, size_t n)
{
    const char *pick = NULL, *any = NULL;
    for (const char *k = msg; *k && !pick;) {
        const char *eol = strchr(k, '\n');
        size_t len = eol ? (size_t)(eol - k) : strlen(k);
        char l[512];
        snprintf(l, sizeof l, "%.*s", (int)(len < sizeof l - 1 ? len : sizeof l - 1), k);
        if (!strncmp(l, "pprun", 5))
            pick = k;
        else if (!any && strstr(l, "error"))
            any = k;
        k += len + (eol != NULL);
    }
    snprintf(line, n, "%s", pick ? pick : any ? any : msg);
    line[strcspn(line, "\n")] = '\0';
}

/* Failures across ranks, from what pprun's ranks and the launcher wrote (the first match
 * wins): memory on any rank; a node the launcher lost; a rank that waited for a peer past
 * pprun's watchdog (a hang); an MPI error; else a crash. */
static const char *failure_kind(const char *msg, int launched)
{
    if (strstr(msg, "out of memory") || strstr(msg, "cannot allocate") || strstr(msg, "oom-kill") ||
        strstr(msg, "OUT_OF_MEMORY"))
        return "oom";
    if (launched && (strstr(msg, "Node failure") || strstr(msg, "NODE_FAIL") ||
                     strstr(msg, "lost") || strstr(msg, "not responding")))
        return "node-lost";
    if (strstr(msg, "stopped, frozen or gone"))
        return "hang";
    if (launched && (strstr(msg, "MPI_ABORT") || strstr(msg, "MPI_ERR") ||
                     strstr(msg, "PMIX_ERROR") || strstr(msg, "ORTE")))
        return "mpi";
    return "crash";
}

static void classify(int wstatus, int killed, const buf *out, const buf *err,
                     const pp_tune_trial_params *tp, pp_tune_trial_result *r)
{
    const char *msg = err->data ? err->data : "";
    int launched = tp->alloc && tp->alloc->launcher[0];
    char line[160];
    detail_line(msg, line, sizeof line);
    if (killed) {
        snprintf(r->status, sizeof r->status, "%s",
                 strstr(msg, "stopped, frozen or gone") ? "hang" : "timeout");
        snprintf(r->detail, sizeof r->detail, "killed after %.1f s%s%s%s", tp->timeout_s,
                 launched ? " on every node" : "", launched && line[0] ? ": " : "",
                 launched ? line : "");
    } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
        parse_summary(out->data ? out->data : "", tp->cfg, r->wall_s, r);
    } else if (!launched && WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL) {
        /* one process on this machine killed without our kill: the kernel's OOM killer */
        snprintf(r->status, sizeof r->status, "oom");
        snprintf(r->detail, sizeof r->detail, "%s", line[0] ? line : "killed (SIGKILL)");
    } else {
        snprintf(r->status, sizeof r->status, "%s", failure_kind(msg, launched));
        if (WIFSIGNALED(wstatus))
            snprintf(r->detail, sizeof r->detail, "signal %d (%s)", WTERMSIG(wstatus),
                     strsignal(WTERMSIG(wstatus)));
        else if (!strcmp(r->status, "oom"))
            snprintf(r->detail, sizeof r->detail, "%s", line);
        else
            snprintf(r->detail, sizeof r->detail, "exit %d: %s", WEXITSTATUS(wstatus), line);
    }
}

pp_status pp_tune_trial(const pp_tune_trial_params *tp, pp_tune_trial_result *r)
{
    memset(r, 0, sizeof *r);
    if (!tp->model->runtime_model[0])
        return PP_ERR(PP_ERR_UNSUPPORTED, "the runtime cannot run %s", tp->model->name);
    char store[MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN], *argv[MAX_ARGS + 1];
    if (build_argv(tp, store, argv, r->where, sizeof r->where, &r->d_run) < 0)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "one pipeline replica needs %d ranks; the allocation (%s) holds %d",
                      tp->cfg->p * (tp->cfg->t > 1 ? tp->cfg->t : 1), tp->alloc->nodes,
                      tp->alloc->slots);
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
        setpgid(0, 0); /* its own process group, ended as a group (end_group) */
        dup2(out_p[1], 1);
        dup2(err_p[1], 2);
        close(out_p[0]), close(out_p[1]), close(err_p[0]), close(err_p[1]);
        execvp(argv[0], argv); /* pprun itself, or srun / mpirun from PATH */
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no race with the child's own call */
    close(out_p[1]), close(err_p[1]);
    buf out = {0}, err = {0};
    int wstatus = 0;
    int killed = collect(pid, out_p[0], err_p[0], t0 + tp->timeout_s, &out, &err, &wstatus);
    end_group(pid, !killed, &wstatus);
    close(out_p[0]), close(err_p[0]);
    buf_finish(&out);
    buf_finish(&err);
    r->wall_s = pp_now() - t0;
    classify(wstatus, killed, &out, &err, tp, r);
    free(out.data);
    free(err.data);
    free(out.tail);
    free(err.tail);
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
