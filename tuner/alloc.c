/* alloc.c — the cluster trials may use when it is more than this process: a Slurm allocation
 * (pptune inside salloc/sbatch: trials are job steps, `srun`) or an Open MPI host file (`mpirun
 * --hostfile`), and the launcher's words that start one trial over the nodes it needs.
 *
 * Slurm's variables are read as Slurm documents them for the job's environment: SLURM_JOB_ID,
 * SLURM_JOB_NODELIST (kept compressed, "n[1-4]", as srun and sinfo print it), SLURM_JOB_NUM_NODES,
 * and the ranks it holds: SLURM_NTASKS when --ntasks was given, else the sum of
 * SLURM_JOB_CPUS_PER_NODE ("2(x4)" or "4,2").
 * Also here: the words for one rank per node (the probes of alloc_probe.c), and a node lost
 * mid-search taken out of the allocation (srun --exclude on the later steps).
 * Not here: running the step and classifying it (trials.c), which candidates run (search_trials.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_tune.h"


/* A count of a Slurm variable at *v (digits only, no sign or space), in 1..ALLOC_MAX_RANKS, its
 * end into *end; -1 past it or when there are no digits. Overflow-checked: digits are added
 * while the value stays within the bound, so no arithmetic can wrap. */
#define ALLOC_MAX_RANKS (1 << 24)
static long count_at(const char *v, const char **end)
{
    long x = 0;
    const char *k = v;
    for (; *k >= '0' && *k <= '9'; k++) {
        x = x * 10 + (*k - '0');
        if (x > ALLOC_MAX_RANKS)
            return -1;
    }
    *end = k;
    return k == v || x < 1 ? -1 : x;
}

/* SLURM_JOB_CPUS_PER_NODE: "2(x4)", "4,2(x3)": the total, or -1 when malformed or past
 * ALLOC_MAX_RANKS (each product and the sum are bounded before they are formed). */
static int cpus_per_node_total(const char *v)
{
    long total = 0;
    while (*v) {
        const char *end;
        long c = count_at(v, &end), times = 1;
        if (c < 0)
            return -1;
        if (!strncmp(end, "(x", 2)) {
            const char *e2;
            times = count_at(end + 2, &e2);
            if (times < 0 || *e2 != ')')
                return -1;
            end = e2 + 1;
        }
        if (c > (ALLOC_MAX_RANKS - total) / times)
            return -1;
        total += c * times;
        if (*end == ',' && end[1])
            end++;
        else if (*end)
            return -1;
        v = end;
    }
    return total > 0 ? (int)total : -1;
}

/* A positive count in a Slurm variable: 1 with *out set, 0 when unset or empty, -1 when it is
 * not digits in 1..ALLOC_MAX_RANKS. */
static int env_pos(const char *name, int *out)
{
    const char *v = getenv(name), *end;
    if (!v || !*v)
        return 0;
    long x = count_at(v, &end);
    if (x < 0 || *end)
        return -1;
    *out = (int)x;
    return 1;
}

static pp_status from_slurm(pp_tune_alloc *a)
{
    const char *job = getenv("SLURM_JOB_ID"), *list = getenv("SLURM_JOB_NODELIST");
    if (!list || !*list)
        return PP_ERR(PP_ERR_INVALID,
                      "SLURM_JOB_ID=%s is set but SLURM_JOB_NODELIST is not: expected the "
                      "allocation's node list (run pptune inside salloc or sbatch)",
                      job);
    int nodes = 0, tasks = 0;
    char shown[80];
    if (env_pos("SLURM_JOB_NUM_NODES", &nodes) <= 0)
        return PP_ERR(PP_ERR_INVALID,
                      "SLURM_JOB_NUM_NODES=\"%s\": expected a positive integer (at most %d)",
                      pp_text_show(getenv("SLURM_JOB_NUM_NODES"), shown, sizeof shown),
                      ALLOC_MAX_RANKS);
    int has = env_pos("SLURM_NTASKS", &tasks);
    if (has < 0)
        return PP_ERR(PP_ERR_INVALID,
                      "SLURM_NTASKS=\"%s\": expected a positive integer (at most %d)",
                      pp_text_show(getenv("SLURM_NTASKS"), shown, sizeof shown), ALLOC_MAX_RANKS);
    if (has == 0) {
        const char *cpn = getenv("SLURM_JOB_CPUS_PER_NODE");
        tasks = cpn ? cpus_per_node_total(cpn) : nodes;
        if (tasks < 1)
            return PP_ERR(PP_ERR_INVALID,
                          "SLURM_JOB_CPUS_PER_NODE=\"%s\": expected counts like 2(x4) or 4,2 "
                          "(at most %d in all)",
                          pp_text_show(cpn, shown, sizeof shown), ALLOC_MAX_RANKS);
    }
    snprintf(a->launcher, sizeof a->launcher, "srun");
    snprintf(a->job, sizeof a->job, "%s", job);
    snprintf(a->nodes, sizeof a->nodes, "%s", list);
    a->n_nodes = nodes;
    a->slots = tasks;
    return PP_OK;
}

/* One host-file line: "host [slots=N] [max_slots=M]"; returns the slots (1 by default), 0 for a
 * blank or comment line, -1 when malformed (a host name longer than n - 1 included). */
static int hostfile_line(char *line, char *host, size_t n)
{
    line[strcspn(line, "#\r")] = '\0';
    char *save = NULL, *tok = strtok_r(line, " \t", &save);
    if (!tok)
        return 0;
    if (strlen(tok) >= n || !pp_text_ok(tok, strlen(tok)))
        return -1;
    snprintf(host, n, "%s", tok);
    int slots = 1;
    while ((tok = strtok_r(NULL, " \t", &save))) {
        if (!strncmp(tok, "slots=", 6)) {
            const char *end;
            long s = count_at(tok + 6, &end);
            if (s < 0 || *end)
                return -1;
            slots = (int)s;
        } else if (strncmp(tok, "max_slots=", 10) != 0) {
            return -1;
        }
    }
    return slots;
}

/* Bounds of a host file: its size, a line, its hosts (the node list must fit a->nodes). */
#define HOSTFILE_MAX_BYTES (1 << 20)
#define HOSTFILE_MAX_LINE 4096

static pp_status from_hostfile(const char *path, pp_tune_alloc *a)
{
    if (strlen(path) >= PP_PROFILE_PPRUN_ARG_LEN)
        return PP_ERR(PP_ERR_INVALID, "--hostfile %s: expected a path shorter than %d characters",
                      path, PP_PROFILE_PPRUN_ARG_LEN);
    /* a regular file only (a FIFO or /dev/zero would never end), read whole within a bound */
    int fd;
    uint64_t size;
    PP_TRY(pp_file_open_regular(path, &fd, &size));
    close(fd);
    char *text = NULL;
    PP_TRY(pp_file_read_max(path, HOSTFILE_MAX_BYTES, &text, NULL));
    char host[256];
    int lineno = 0;
    pp_status st = PP_OK;
    for (char *line = text, *next; line && *line && st == PP_OK; line = next) {
        lineno++;
        next = strchr(line, '\n');
        size_t len = next ? (size_t)(next - line) : strlen(line);
        if (next)
            *next++ = '\0';
        if (len > HOSTFILE_MAX_LINE) {
            st = PP_ERR(PP_ERR_INVALID, "%s:%d: a line of %zu bytes: expected at most %d", path,
                        lineno, len, HOSTFILE_MAX_LINE);
            break;
        }
        int s = hostfile_line(line, host, sizeof host);
        if (s < 0) {
            st = PP_ERR(PP_ERR_INVALID,
                        "%s:%d: expected \"HOST [slots=N]\" (Open MPI host file format; a host "
                        "name of printable text under %zu bytes, N in 1..%d)",
                        path, lineno, sizeof host, ALLOC_MAX_RANKS);
            break;
        }
        if (s == 0)
            continue;
        size_t used = strlen(a->nodes);
        if (used + strlen(host) + 2 > sizeof a->nodes)
            st = PP_ERR(PP_ERR_INVALID, "%s:%d: more hosts than fit %zu bytes of node list", path,
                        lineno, sizeof a->nodes - 1);
        else if (s > ALLOC_MAX_RANKS - a->slots)
            st = PP_ERR(PP_ERR_INVALID, "%s:%d: more than %d slots in all", path, lineno,
                        ALLOC_MAX_RANKS);
        else {
            snprintf(a->nodes + used, sizeof a->nodes - used, "%s%s", used ? "," : "", host);
            a->n_nodes++;
            a->slots += s;
        }
    }
    free(text);
    PP_TRY(st);
    if (a->n_nodes == 0)
        return PP_ERR(PP_ERR_INVALID, "%s: expected at least one \"HOST [slots=N]\" line", path);
    snprintf(a->launcher, sizeof a->launcher, "mpirun");
    snprintf(a->hostfile, sizeof a->hostfile, "%s", path);
    return PP_OK;
}

pp_status pp_tune_alloc_detect(const char *hostfile, pp_tune_alloc *out)
{
    memset(out, 0, sizeof *out);
    if (hostfile)
        return from_hostfile(hostfile, out);
    if (getenv("SLURM_JOB_ID"))
        return from_slurm(out);
    return PP_OK;
}

/* The launcher's words for `ranks` processes on `nodes` nodes (nodes dividing ranks: that many
 * per node). */
static int launch_words(const pp_tune_alloc *a, int ranks, int nodes, double timeout_s, int max,
                        char store[][PP_PROFILE_PPRUN_ARG_LEN], char **argv)
{
    int n = 0;
#define ARG(...)                                                                                   \
    do {                                                                                           \
        if (n < max)                                                                               \
            snprintf(store[n], sizeof store[n], __VA_ARGS__), argv[n] = store[n], n++;             \
    } while (0)
    if (!strcmp(a->launcher, "srun")) {
        /* --time is whole minutes: the step's own limit, a backstop to ours (the child is
         * killed at timeout_s, and srun then ends the step on every node) */
        int minutes = (int)(timeout_s / 60.0) + 1;
        ARG("srun");
        ARG("--nodes=%d", nodes);
        ARG("--ntasks=%d", ranks);
        if (ranks % nodes == 0)
            ARG("--ntasks-per-node=%d", ranks / nodes);
        ARG("--kill-on-bad-exit=1");
        ARG("--time=%d", minutes);
        if (a->lost[0]) /* nodes lost earlier in the search (pp_tune_alloc_lose) */
            ARG("--exclude=%s", a->lost);
        ARG("--mpi=pmix");
        ARG("--quiet");
    } else {
        ARG("mpirun");
        ARG("--hostfile");
        ARG("%.*s", PP_PROFILE_PPRUN_ARG_LEN - 1, a->hostfile);
        ARG("-np");
        ARG("%d", ranks);
        if (ranks % nodes == 0) {
            ARG("--map-by");
            ARG("ppr:%d:node", ranks / nodes);
        }
    }
#undef ARG
    return n;
}

int pp_tune_alloc_argv(const pp_tune_alloc *a, int ranks, double timeout_s, int max,
                       char store[][PP_PROFILE_PPRUN_ARG_LEN], char **argv, int *nodes_used)
{
    *nodes_used = 1;
    if (!a || !a->launcher[0])
        return 0;
    if (ranks > a->slots)
        return -1;
    /* Spread over as many nodes as hold the ranks evenly (ceil(R / slots per node) at least):
     * the point of a trial here is the inter-node traffic the candidate will see. */
    int per = a->slots / a->n_nodes > 0 ? a->slots / a->n_nodes : 1;
    int nodes = (ranks + per - 1) / per;
    nodes = nodes > a->n_nodes ? a->n_nodes : nodes;
    while (nodes < a->n_nodes && nodes < ranks && ranks % nodes)
        nodes++;
    *nodes_used = nodes;
    return launch_words(a, ranks, nodes, timeout_s, max, store, argv);
}

int pp_tune_alloc_argv_per_node(const pp_tune_alloc *a, double timeout_s, int max,
                                char store[][PP_PROFILE_PPRUN_ARG_LEN], char **argv)
{
    if (!a || !a->launcher[0])
        return 0;
    return launch_words(a, a->n_nodes, a->n_nodes, timeout_s, max, store, argv);
}

int pp_tune_alloc_lose(pp_tune_alloc *a, const char *node)
{
    if (!a || strcmp(a->launcher, "srun") != 0 || !node[0] || a->n_nodes <= 1 ||
        strlen(a->lost) + strlen(node) + 2 > sizeof a->lost)
        return 0;
    /* already excluded? (a comma list of plain names) */
    for (const char *k = a->lost; *k;) {
        size_t len = strcspn(k, ",");
        if (len == strlen(node) && !strncmp(k, node, len))
            return 0;
        k += len + (k[len] == ',');
    }
    int per = a->slots / a->n_nodes;
    size_t len = strlen(a->lost);
    snprintf(a->lost + len, sizeof a->lost - len, "%s%s", len ? "," : "", node);
    a->n_nodes--;
    a->slots -= per;
    return 1;
}

int pp_tune_alloc_lost_node(const char *msg, char *node, size_t n)
{
    /* srun: "srun: error: Node failure on n2" (what srun prints when slurmctld declares a node
     * of the step DOWN: SlurmdTimeout without an answer from its slurmd) */
    const char *k = strstr(msg, "Node failure on ");
    node[0] = '\0';
    if (!k || n == 0)
        return 0;
    k += strlen("Node failure on ");
    size_t len = strcspn(k, " \t\r\n,;:");
    if (len == 0 || len >= n)
        return 0;
    memcpy(node, k, len);
    node[len] = '\0';
    return 1;
}
