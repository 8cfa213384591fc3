/* trials.c — runs one candidate for a few steps with the bundled runtime (`pprun --json`) in a
 * child process with a time limit, and classifies what happened. On this machine the child is
 * pprun with every rank a thread; in an allocation (tp->alloc, alloc.c) it is the launcher, srun
 * (a job step) or mpirun, starting one pprun process per rank over MPI on the nodes it needs.
 * Killing the launcher's group ends the step on every node (srun cancels its step on SIGTERM,
 * mpirun ends its daemons), and --kill-on-bad-exit ends it when one rank dies.
 *
 * The child runs in its own process group (child.c: stdout, the JSON summary, and stderr, its
 * error line, read into bounded buffers under one deadline); past the deadline the whole group
 * is ended and the trial is a "timeout". Exit 0 with a parsable summary whose step time is a positive finite number no longer than the
 * trial itself is "ok" (anything else is a "crash" saying why); an error line naming memory
 * (out of memory / cannot allocate) or death by SIGKILL without our kill (the kernel's OOM
 * killer) is "oom"; under a launcher the ranks' and launcher's lines tell oom, node-lost (srun's
 * "Node failure on nX": the node is named for the search to leave out), hang (pprun's watchdog)
 * and mpi apart; any other signal or non-zero exit is "crash". A trial's
 * failure is a result, never an error of this function: only failing to start the child (fork,
 * pipe) is.
 * Also here: the default trial runner of the search (pp_tune_runner_pprun), where it finds
 * pprun, and the program's own path (for the probes over an allocation, alloc_probe.c). Not here: which candidates get trials, recalibration and choice (search_trials.c).
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pp_profile.h"
#include "child.h"
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

/* pprun's options for the configuration (pp_profile_pprun_argv, the one builder) with the
 * model as pp_tune_pprun_model gives it, and the trial's own: steps, every rank a thread, the
 * JSON summary. */
static int build_argv(const pp_tune_trial_params *tp, const pp_profile_pprun_line *model,
                      char store[MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN], char **argv, char *where,
                      size_t where_n, int *d_run)
{
    pp_config pc = *tp->cfg; /* with the replicas the allocation holds */
    /* on GPUs: their backend in the precision users train with (bf16); rank g on GPU g */
    int bf16 = pp_backend_row_has_precision(tp->backend, PP_PREC_BF16);
    pp_profile_pprun_line line = {.config = &pc, .seq = tp->model->seq,
                                  .backend = pp_backend_row_flag(tp->backend),
                                  .precision = bf16 ? PP_PREC_BF16 : PP_PREC_FP32};
    line.model = model->model, line.model_config = model->model_config;
    line.layers = model->layers;
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
                 "%s on %d node%s of %s, reduced: d=%d of %d (the allocation holds %d ranks)",
                 tp->alloc->launcher, nodes, nodes > 1 ? "s" : "", tp->alloc->nodes, pc.d,
                 full_d, tp->alloc->slots);
    else if (where && launched)
        snprintf(where, where_n, "%s on %d node%s of %s", tp->alloc->launcher, nodes,
                 nodes > 1 ? "s" : "", tp->alloc->nodes);
    else if (where)
        snprintf(where, where_n, "ranks as threads of one pprun on this machine");
    return n;
}

/* No step of any model runs in under a microsecond: a smaller median is not a measurement. */
#define MIN_STEP_S 1e-6

/* The model pprun's summary says it trained ("model": its sizes and block) is the trial's: a
 * measurement of another model is none. Fills r->model ("NAME: L layers, BLOCK"); 0 with
 * r->detail when it is not the trial's model. */
static int same_model(json_t *root, const pp_tune_model *m, pp_tune_trial_result *r)
{
    json_t *jm = json_object_get(root, "model");
    const struct {
        const char *key;
        int want;
    } sizes[] = {{"layers", m->layers}, {"hidden", m->hidden}, {"heads", m->heads},
                 {"kv_heads", m->kv_heads}, {"ffn", m->ffn},     {"vocab", m->vocab}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        json_t *v = json_object_get(jm, sizes[i].key);
        if (!json_is_integer(v) || json_integer_value(v) != sizes[i].want) {
            snprintf(r->detail, sizeof r->detail,
                     "pprun's JSON summary names another model than %s (model.%s: expected "
                     "%d, got %lld)",
                     m->name, sizes[i].key, sizes[i].want,
                     json_is_integer(v) ? (long long)json_integer_value(v) : -1LL);
            return 0;
        }
    }
    const char *name = json_string_value(json_object_get(jm, "name"));
    const char *block = json_string_value(json_object_get(jm, "block"));
    snprintf(r->model, sizeof r->model, "%s: %d layer%s, %s", name ? name : "?", m->layers,
             m->layers == 1 ? "" : "s", block ? block : "?");
    return 1;
}

static void parse_summary(const char *json, const pp_tune_model *m, const pp_config *c,
                          double wall_s, pp_tune_trial_result *r)
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
    if (!(isfinite(t) && t >= MIN_STEP_S && t <= wall_s)) {
        snprintf(r->status, sizeof r->status, "crash");
        snprintf(r->detail, sizeof r->detail,
                 "pprun reported a median step time of %g s (expected %g s or more, within "
                 "the trial's %.1f s)",
                 t, MIN_STEP_S, wall_s);
        json_decref(root);
        return;
    }
    r->step_time = t;
    /* every rank's entry names a rank of this configuration (pipeline rank < p, replica < d)
     * with a peak in bytes; a summary that does not is no measurement */
    for (size_t i = 0; i < json_array_size(ranks); i++) {
        json_t *rk = json_array_get(ranks, i);
        json_t *jp = json_object_get(rk, "pipeline_rank"), *jk = json_object_get(rk, "replica");
        json_t *jt = json_object_get(json_object_get(rk, "peak_bytes"), "total");
        if (!json_is_integer(jp) || json_integer_value(jp) < 0 ||
            json_integer_value(jp) >= c->p || !json_is_integer(jk) ||
            json_integer_value(jk) < 0 || json_integer_value(jk) >= c->d ||
            !json_is_integer(jt) || json_integer_value(jt) < 0) {
            snprintf(r->status, sizeof r->status, "crash");
            snprintf(r->detail, sizeof r->detail,
                     "pprun's JSON summary names a rank outside the configuration (ranks[%zu]: "
                     "expected pipeline_rank 0..%d, replica 0..%d, peak_bytes.total >= 0)",
                     i, c->p - 1, c->d - 1);
            r->step_time = 0;
            json_decref(root);
            return;
        }
    }
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
    if (!same_model(root, m, r)) {
        snprintf(r->status, sizeof r->status, "crash");
        r->step_time = r->peak = 0;
        memset(r->peak_per_rank, 0, sizeof r->peak_per_rank);
        json_decref(root);
        return;
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

static void classify(const pp_tune_child *ch, const pp_tune_trial_params *tp,
                     pp_tune_trial_result *r)
{
    const char *msg = ch->err ? ch->err : "";
    int wstatus = ch->wstatus, killed = ch->killed;
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
        parse_summary(ch->out ? ch->out : "", tp->model, tp->cfg, r->wall_s, r);
    } else if (!launched && WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL) {
        /* one process on this machine killed without our kill: the kernel's OOM killer */
        snprintf(r->status, sizeof r->status, "oom");
        snprintf(r->detail, sizeof r->detail, "%s", line[0] ? line : "killed (SIGKILL)");
    } else {
        snprintf(r->status, sizeof r->status, "%s", failure_kind(msg, launched));
        const char *nf = strstr(msg, "Node failure");
        if (!strcmp(r->status, "node-lost") && nf) {
            /* the launcher's line naming the node says most (not a rank's timeout after it) */
            while (nf > msg && nf[-1] != '\n')
                nf--;
            detail_line(nf, line, sizeof line);
            pp_tune_alloc_lost_node(msg, r->lost_node, sizeof r->lost_node);
        }
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
    char store[MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN], *argv[MAX_ARGS + 1];
    pp_profile_pprun_line model = {0};
    PP_TRY(pp_tune_pprun_model(tp->model, &model)); /* what the search read, or no trial */
    if (build_argv(tp, &model, store, argv, r->where, sizeof r->where, &r->d_run) < 0)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "one pipeline replica needs %d ranks; the allocation (%s) holds %d",
                      tp->cfg->p * (tp->cfg->t > 1 ? tp->cfg->t : 1), tp->alloc->nodes,
                      tp->alloc->slots);
    pp_tune_child ch;
    PP_TRY(pp_tune_child_run(argv, tp->timeout_s, &ch));
    r->wall_s = ch.wall_s;
    classify(&ch, tp, r);
    pp_tune_child_fini(&ch);
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

pp_status pp_tune_self_path(char *path, size_t n)
{
    if (n < 2)
        return PP_ERR(PP_ERR_INVALID, "self path: no room");
    ssize_t len = readlink("/proc/self/exe", path, n - 1);
    if (len <= 0 || (size_t)len >= n - 1)
        return PP_ERR(PP_ERR_NOTFOUND, "cannot read /proc/self/exe: %s",
                      len < 0 ? strerror(errno) : "path too long");
    path[len] = '\0';
    return PP_OK;
}
