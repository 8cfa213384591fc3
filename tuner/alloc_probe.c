/* alloc_probe.c — what pptune measures across its allocation besides the trials, each as one
 * job step (srun) or mpirun of the pptune program itself:
 *   - every node probed, one rank per node (`pptune probe --json --no-probe-nodes` under the
 *     launcher: the probe gathers the nodes on rank 0 over MPI, probes/mpi_gather.c), read back
 *     as one cluster description;
 *   - the data-parallel gradient all-reduce of a reduced trial at its full size (`pptune probe
 *     --allreduce BYTES --json`), over the largest group the allocation holds, scaled to the
 *     candidate's d with the ring formula where that group is smaller;
 *   - whether the nodes of a probed cluster differ.
 * Not here: the trials (trials.c), running a child (child.c), the probes themselves (probes/).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "child.h"
#include "pp_json.h"
#include "pp_tune.h"

#define WORDS 24

/* Runs the launcher's words (n of them in store/argv) followed by pptune and extra words; the
 * child's output in *ch. A failed run is PP_ERR_DEVICE naming what and the child's last line. */
static pp_status run_probe(const char *what, int n, char **argv, const char *pptune,
                           const char *const *extra, double timeout_s, pp_tune_child *ch)
{
    argv[n++] = (char *)pptune;
    for (int i = 0; extra[i] && n < WORDS; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    PP_TRY(pp_tune_child_run(argv, timeout_s, ch));
    if (!ch->killed && WIFEXITED(ch->wstatus) && WEXITSTATUS(ch->wstatus) == 0 && ch->out)
        return PP_OK;
    char line[200] = "";
    const char *err = ch->err ? ch->err : "";
    /* the last non-empty line says most (pptune's own "pptune probe: ..." or srun's) */
    const char *end = err + strlen(err);
    while (end > err && (end[-1] == '\n' || end[-1] == '\r'))
        end--;
    const char *start = end;
    while (start > err && start[-1] != '\n')
        start--;
    snprintf(line, sizeof line, "%.*s", (int)(end - start), start);
    pp_status st;
    if (ch->killed)
        st = PP_ERR(PP_ERR_DEVICE, "%s (%s): killed after %.0f s", what, argv[0], timeout_s);
    else
        st = PP_ERR(PP_ERR_DEVICE, "%s (%s): exit %d%s%s", what, argv[0],
                    WIFEXITED(ch->wstatus) ? WEXITSTATUS(ch->wstatus) : 128 + WTERMSIG(ch->wstatus),
                    line[0] ? ": " : "", line);
    pp_tune_child_fini(ch);
    return st;
}

pp_status pp_tune_probe_nodes(const pp_tune_alloc *a, const char *pptune, int quick,
                              double timeout_s, pp_cluster **out, char *source, size_t n)
{
    *out = NULL;
    if (!a || !a->launcher[0])
        return PP_ERR(PP_ERR_INVALID, "probing every node needs an allocation (Slurm or a host file)");
    char store[WORDS][PP_PROFILE_PPRUN_ARG_LEN], *argv[WORDS + 1];
    int k = pp_tune_alloc_argv_per_node(a, timeout_s, 12, store, argv);
    const char *extra[] = {"probe", "--json", "--no-probe-nodes", quick ? "--quick" : NULL, NULL};
    pp_tune_child ch;
    /* One more attempt when the step failed (not when it ran out of time): a rank dying in
     * MPI_Init (Open MPI 4.1's TCP transport under load, seen here) should not leave the whole
     * search without a cluster; the first failure is kept in source. */
    char first[200] = "";
    pp_status st = run_probe("the probe of every node", k, argv, pptune, extra, timeout_s, &ch);
    if (st == PP_ERR_DEVICE && !strstr(pp_err_msg(), "killed after")) {
        snprintf(first, sizeof first, "%s", pp_err_text());
        pp_err_clear();
        st = run_probe("the probe of every node", k, argv, pptune, extra, timeout_s, &ch);
    }
    PP_TRY(st);
    st = pp_cluster_from_json(ch.out, "the probe of every node", out);
    pp_tune_child_fini(&ch);
    PP_TRY(st);
    char names[200] = "";
    for (int i = 0; i < (*out)->n_nodes; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
                 (*out)->nodes[i].hostname[0] ? (*out)->nodes[i].hostname : "?");
    }
    snprintf(source, n, "probed: %d node%s of the allocation, one %s rank each%s (%s)%s%s",
             (*out)->n_nodes, (*out)->n_nodes == 1 ? "" : "s", a->launcher, quick ? ", quick" : "",
             names, first[0] ? "; second attempt, the first failed: " : "", first);
    return PP_OK;
}

/* Per node: the slowest device's GEMM rate and the smallest memory. */
static void node_figures(const pp_cluster *c, int node, double *gemm, double *mem)
{
    const pp_node *nd = &c->nodes[node];
    *gemm = *mem = 0;
    for (int i = nd->first_device; i < nd->first_device + nd->n_devices; i++) {
        const pp_device *d = &c->devices[i];
        if (i == nd->first_device || d->gemm_flops < *gemm)
            *gemm = d->gemm_flops;
        if (i == nd->first_device || d->mem_bytes < *mem)
            *mem = d->mem_bytes;
    }
}

static void node_name(const pp_cluster *c, int i, char *buf, size_t n)
{
    if (c->nodes[i].hostname[0])
        snprintf(buf, n, "%s", c->nodes[i].hostname);
    else
        snprintf(buf, n, "node %d", i);
}

int pp_tune_nodes_differ(const pp_cluster *c, double tolerance, char *msg, size_t n)
{
    msg[0] = '\0';
    if (c->n_nodes < 2)
        return 0;
    int lo_g = 0, hi_g = 0, lo_m = 0, hi_m = 0;
    double g[2] = {0, 0}, m[2] = {0, 0}; /* min, max */
    for (int i = 0; i < c->n_nodes; i++) {
        double gi, mi;
        node_figures(c, i, &gi, &mi);
        if (i == 0 || gi < g[0])
            g[0] = gi, lo_g = i;
        if (i == 0 || gi > g[1])
            g[1] = gi, hi_g = i;
        if (i == 0 || mi < m[0])
            m[0] = mi, lo_m = i;
        if (i == 0 || mi > m[1])
            m[1] = mi, hi_m = i;
    }
    char a[64], b[64];
    int differ = 0;
    if (g[0] > 0 && g[1] > g[0] * (1 + tolerance)) {
        node_name(c, lo_g, a, sizeof a), node_name(c, hi_g, b, sizeof b);
        snprintf(msg, n, "GEMM %.3g GFLOP/s per device on %s, %.3g on %s", g[0] / 1e9, a,
                 g[1] / 1e9, b);
        differ = 1;
    }
    if (m[0] > 0 && m[1] > m[0] * (1 + tolerance)) {
        node_name(c, lo_m, a, sizeof a), node_name(c, hi_m, b, sizeof b);
        size_t len = strlen(msg);
        snprintf(msg + len, n - len, "%smemory %.1f GiB per device on %s, %.1f GiB on %s",
                 len ? "; " : "", m[0] / 1073741824.0, a, m[1] / 1073741824.0, b);
        differ = 1;
    }
    return differ;
}

double pp_tune_ring_factor(int n)
{
    return n > 1 ? 2.0 * (n - 1) / n : 0.0;
}

static pp_status read_allreduce(const char *text, pp_tune_dp_probe *o)
{
    json_t *root;
    const char *name = "the all-reduce probe's output";
    PP_TRY(pp_json_load(text, strlen(text), name, 0, &root));
    pp_json_src src = {.file = name};
    double secs = 0, bytes = 0;
    pp_status st = pp_json_int(&src, root, "", "ranks", 1, 1 << 24, NULL, &o->ranks);
    if (st == PP_OK)
        st = pp_json_int(&src, root, "", "nodes", 1, 1 << 24, NULL, &o->nodes);
    if (st == PP_OK)
        st = pp_json_range(&src, root, "", "bytes", 4, PP_JSON_HUGE, 0, &bytes);
    if (st == PP_OK)
        st = pp_json_range(&src, root, "", "seconds", 1e-12, 3600, 0, &secs);
    json_decref(root);
    PP_TRY(st);
    o->probed_s = secs;
    return PP_OK;
}

pp_status pp_tune_dp_allreduce_probe(const pp_tune_alloc *a, const char *pptune, double bytes,
                                     int d, int d_run, double timeout_s, pp_tune_dp_probe *out)
{
    memset(out, 0, sizeof *out);
    out->bytes = bytes;
    int ranks = a && d < a->slots ? d : a ? a->slots : 0;
    if (!a || !a->launcher[0] || ranks < 2)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "no all-reduce to time: the allocation holds %d rank%s", ranks,
                      ranks == 1 ? "" : "s");
    char store[WORDS][PP_PROFILE_PPRUN_ARG_LEN], *argv[WORDS + 1];
    int nodes = 1;
    int k = pp_tune_alloc_argv(a, ranks, timeout_s, 12, store, argv, &nodes);
    if (k < 0)
        return PP_ERR(PP_ERR_UNSUPPORTED, "%d ranks do not fit the allocation", ranks);
    char size[32];
    snprintf(size, sizeof size, "%.0f", bytes);
    const char *extra[] = {"probe", "--allreduce", size, "--json", "--quick", NULL};
    pp_tune_child ch;
    PP_TRY(run_probe("the data-parallel all-reduce probe", k, argv, pptune, extra, timeout_s,
                     &ch));
    pp_status st = read_allreduce(ch.out, out);
    pp_tune_child_fini(&ch);
    PP_TRY(st);
    /* Ring all-reduce: each rank moves 2(n-1)/n of the message (Patarasuk & Yuan), so the
     * bandwidth-bound time over n ranks scales with that factor; a group of the allocation's
     * size stands for the candidate's d. */
    double f = pp_tune_ring_factor(out->ranks);
    out->full_s = out->probed_s * pp_tune_ring_factor(d) / f;
    out->run_s = d_run > 1 ? out->probed_s * pp_tune_ring_factor(d_run) / f : 0;
    return PP_OK;
}
