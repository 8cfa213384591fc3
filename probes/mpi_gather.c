/* mpi_gather.c — probing every node of an MPI job (mpirun / srun) and gathering on rank 0: the
 * MPI plugin (pptune-mpi.so, plugin.h), loaded by plugin.c, so that pptune links no MPI.
 *
 * 1. ranks exchange host names; the lowest rank of each host is its node's leader;
 * 2. leaders probe their node (the others wait), serialise it to JSON, rank 0 gathers and merges;
 * 3. leaders of each node pair run an MPI ping-pong over a size sweep (8 B up, factor 8) and
 *    fit α-β: the slowest pair is the inter-node link class. With every rank on one host, ranks
 *    0 and 1 still ping-pong (so the path is exercised) and the cluster's note says it was
 *    shared memory.
 * Also here: a timed all-reduce over the job's ranks (pp_probe_allreduce), the data-parallel
 * gradient sync of a reduced trial (tuner/alloc_probe.c).
 * Initialises and finalises MPI itself unless the caller already did. Not here: NCCL across
 * nodes (GPU inter-node figures come from MPI too, host to host: noted in the method).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin.h"

#define HOST_LEN 64
#define MAX_PAIRS_ALL 8 /* up to this many nodes every pair is measured; above, pairs (0, j) */

typedef struct {
    int rank, size, n_nodes;
    char *hosts;  /* (size, HOST_LEN) */
    int *node_of; /* (size) node index of each rank */
    int *leader;  /* (n_nodes) the rank leading each node */
} layout;

static pp_status mpi_fail(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return PP_ERR(PP_ERR_DEVICE, "%s failed: %s", what, msg);
}
#define MPI_TRY(call)                                                                              \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS)                                                                    \
            return mpi_fail(rc_, #call);                                                           \
    } while (0)

static pp_status make_layout(layout *L)
{
    char me[HOST_LEN] = "";
    pp_launch_node_name(me, HOST_LEN);
    MPI_TRY(MPI_Comm_rank(MPI_COMM_WORLD, &L->rank));
    MPI_TRY(MPI_Comm_size(MPI_COMM_WORLD, &L->size));
    L->hosts = pp_calloc((size_t)L->size, HOST_LEN);
    L->node_of = pp_calloc((size_t)L->size, sizeof *L->node_of);
    L->leader = pp_calloc((size_t)L->size, sizeof *L->leader);
    if (!L->hosts || !L->node_of || !L->leader)
        return PP_ERR_NOMEM;
    MPI_TRY(MPI_Allgather(me, HOST_LEN, MPI_CHAR, L->hosts, HOST_LEN, MPI_CHAR, MPI_COMM_WORLD));
    L->n_nodes = pp_launch_hosts(L->hosts, HOST_LEN, L->size, L->node_of, NULL);
    for (int r = 0, k = 0; r < L->size; r++) /* a node's leader: its first rank */
        if (L->node_of[r] == k)
            L->leader[k++] = r;
    return PP_OK;
}

/* Each leader's node as JSON (or its error message), gathered on rank 0 in rank order. */
static pp_status gather_nodes(const pp_probe_opts *o, const layout *L,
                              pp_status (*probe_node)(const pp_probe_opts *, pp_cluster **),
                              char ***texts, int **status)
{
    char *mine = NULL;
    int me[2] = {PP_OK, 0}; /* status, length including NUL */
    if (L->leader[L->node_of[L->rank]] == L->rank) {
        pp_cluster *c = NULL;
        me[0] = probe_node(o, &c);
        if (me[0] == PP_OK)
            me[0] = pp_cluster_to_json(c, &mine);
        pp_cluster_destroy(c);
        if (me[0] != PP_OK)
            mine = strdup(pp_err_msg());
        me[1] = mine ? (int)strlen(mine) + 1 : 0;
    }
    int *all = L->rank == 0 ? pp_calloc((size_t)L->size * 2, sizeof *all) : NULL;
    int *displ = L->rank == 0 ? pp_calloc((size_t)L->size, sizeof *displ) : NULL;
    int *lens = L->rank == 0 ? pp_calloc((size_t)L->size, sizeof *lens) : NULL;
    MPI_TRY(MPI_Gather(me, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD));
    char *buf = NULL;
    if (L->rank == 0) {
        int total = 0;
        for (int r = 0; r < L->size; r++) {
            lens[r] = all[2 * r + 1];
            displ[r] = total;
            total += lens[r];
        }
        buf = pp_calloc((size_t)total + 1, 1);
    }
    MPI_TRY(MPI_Gatherv(mine ? mine : "", me[1], MPI_CHAR, buf, lens, displ, MPI_CHAR, 0,
                        MPI_COMM_WORLD));
    free(mine);
    if (L->rank == 0) {
        *texts = pp_calloc((size_t)L->size, sizeof **texts);
        *status = pp_calloc((size_t)L->size, sizeof **status);
        for (int r = 0; r < L->size; r++) {
            (*status)[r] = all[2 * r];
            (*texts)[r] = lens[r] ? strdup(buf + displ[r]) : NULL;
        }
    }
    free(all);
    free(displ);
    free(lens);
    free(buf);
    return PP_OK;
}

/* Ping-pong between ranks a and b over a size sweep; fills pts on both. */
static pp_status pingpong(const pp_probe_opts *o, int me, int a, int b, pp_xfer_point *pts, int *n)
{
    size_t hi = (size_t)(o->quick ? 4 : 64) << 20;
    int samples = o->quick ? 5 : 9, peer = me == a ? b : a;
    char *buf = pp_calloc(hi, 1);
    if (!buf)
        return PP_ERR_NOMEM;
    *n = 0;
    for (size_t bytes = 8; bytes <= hi; bytes *= 8) {
        int iters = (int)((64u << 20) / bytes);
        iters = iters < 4 ? 4 : iters > 200 ? 200 : iters;
        double t[16];
        for (int s = -1; s < samples; s++) { /* s = -1: warm-up */
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++) {
                if (me == a) {
                    MPI_Send(buf, (int)bytes, MPI_CHAR, peer, 7, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)bytes, MPI_CHAR, peer, 7, MPI_COMM_WORLD);
                }
            }
            if (s >= 0)
                t[s] = (MPI_Wtime() - t0) / (2.0 * iters);
        }
        pts[*n] = (pp_xfer_point){.bytes = (double)bytes, .seconds = pp_measure_of(t, samples)};
        (*n)++;
    }
    free(buf);
    return PP_OK;
}

typedef struct {
    int na, nb;         /* node indexes */
    double alpha, beta; /* fit */
} pair_fit;

/* Measures node pairs (leaders only, one pair at a time); results valid on rank 0. */
static pp_status measure_pairs(const pp_probe_opts *o, const layout *L, pp_link *cls,
                               pair_fit *fits, int *n_fits)
{
    *n_fits = 0;
    int single_host = L->n_nodes == 1;
    int nn = single_host ? 2 : L->n_nodes;
    for (int i = 0; i < nn; i++)
        for (int j = i + 1; j < nn; j++) {
            if (!single_host && L->n_nodes > MAX_PAIRS_ALL && i > 0)
                continue;
            int a = single_host ? 0 : L->leader[i], b = single_host ? 1 : L->leader[j];
            pp_xfer_point pts[16];
            int n = 0;
            if (L->rank == a || L->rank == b) {
                PP_TRY(pingpong(o, L->rank, a, b, pts, &n));
                if (L->rank == a)
                    pp_probe_say(o, "mpi: ping-pong rank %d <-> %d done (%d sizes)", a, b, n);
            }
            /* rank a reports to rank 0 (which may be a itself) */
            double fit[2] = {0, 0};
            if (L->rank == a)
                PP_TRY(pp_fit_alpha_beta(pts, n, &fit[0], &fit[1]));
            if (a != 0 && L->rank == a) {
                MPI_TRY(MPI_Send(fit, 2, MPI_DOUBLE, 0, 8, MPI_COMM_WORLD));
                MPI_TRY(MPI_Send(pts, (int)(n * sizeof *pts), MPI_BYTE, 0, 9, MPI_COMM_WORLD));
            }
            if (a != 0 && L->rank == 0) {
                MPI_TRY(MPI_Recv(fit, 2, MPI_DOUBLE, a, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                MPI_Status stt;
                MPI_TRY(MPI_Recv(pts, (int)sizeof pts, MPI_BYTE, a, 9, MPI_COMM_WORLD, &stt));
                int got = 0;
                MPI_Get_count(&stt, MPI_BYTE, &got);
                n = got / (int)sizeof *pts;
            }
            if (L->rank == 0) {
                fits[*n_fits] = (pair_fit){i, j, fit[0], fit[1]};
                if (*n_fits == 0) { /* the class keeps the first pair's sweep */
                    if (!(cls->points = pp_xfer_copy(pts, n)))
                        return PP_ERR_NOMEM;
                    cls->n_points = n;
                }
                (*n_fits)++;
            }
            MPI_TRY(MPI_Barrier(MPI_COMM_WORLD));
        }
    return PP_OK;
}

/* Rank 0: the inter-node class and the cross-node pair entries. The class is the slowest pair
 * (lowest bandwidth, highest latency): a synchronous step waits for its slowest link, and the
 * tuner plans the inter-node hop with this one figure (every pair stays in the matrix). */
static pp_status apply_pairs(pp_cluster *c, const layout *L, pp_link *cls, const pair_fit *f,
                             int nf)
{
    double al[64 * 64], be[64 * 64];
    int k = nf < 64 * 64 ? nf : 64 * 64;
    for (int i = 0; i < k; i++) {
        al[i] = f[i].alpha;
        be[i] = f[i].beta;
    }
    cls->present = 1;
    cls->source = PP_SRC_PROBED;
    cls->alpha_s = pp_measure_of(al, k).max;
    cls->beta_Bps = pp_measure_of(be, k).min;
    snprintf(cls->method, sizeof cls->method,
             "mpi-pingpong between node leaders, host memory (slowest of %d pair%s)%s", nf,
             nf == 1 ? "" : "s", L->n_nodes == 1 ? " - same host: shared memory" : "");
    if (L->n_nodes == 1)
        return PP_OK;
    int n = c->n_devices;
    size_t len = strlen(c->pair_method);
    snprintf(c->pair_method + len, sizeof c->pair_method - len, "%smpi-pingpong across nodes",
             len ? " within nodes; " : "");
    if (!c->pair_bw_Bps) {
        c->pair_bw_Bps = pp_calloc((size_t)n * (size_t)n + 1, sizeof(double));
        c->pair_alpha_s = pp_calloc((size_t)n * (size_t)n + 1, sizeof(double));
        if (!c->pair_bw_Bps || !c->pair_alpha_s)
            return PP_ERR_NOMEM;
    }
    for (int p = 0; p < nf; p++)
        for (int x = 0; x < 2; x++) { /* both directions: ping-pong is symmetric */
            const pp_node *A = &c->nodes[x ? f[p].nb : f[p].na],
                          *B = &c->nodes[x ? f[p].na : f[p].nb];
            for (int i = A->first_device; i < A->first_device + A->n_devices; i++)
                for (int j = B->first_device; j < B->first_device + B->n_devices; j++) {
                    c->pair_bw_Bps[i * n + j] = f[p].beta;
                    c->pair_alpha_s[i * n + j] = f[p].alpha;
                }
        }
    return PP_OK;
}

/* Rank 0: parse and merge the leaders' descriptions in node order. */
static pp_status merge(const layout *L, char **texts, const int *status, pp_cluster **out)
{
    pp_cluster *all;
    PP_TRY(pp_cluster_create(&all));
    *out = all;
    for (int k = 0; k < L->n_nodes; k++) {
        int r = L->leader[k];
        if (status[r] != PP_OK)
            return PP_ERR((pp_status)status[r], "rank %d on %s could not probe its node: %s", r,
                          L->hosts + (size_t)r * HOST_LEN, texts[r] ? texts[r] : "?");
        pp_cluster *one;
        char name[96];
        snprintf(name, sizeof name, "rank %d's description", r);
        PP_TRY(pp_cluster_from_json(texts[r], name, &one));
        pp_status st = pp_cluster_append(all, one);
        if (k == 0) {
            all->sw = one->sw;
            all->links[PP_LINK_INTRA] = one->links[PP_LINK_INTRA];
            all->allreduce = one->allreduce;
            snprintf(all->pair_method, sizeof all->pair_method, "%s", one->pair_method);
            one->links[PP_LINK_INTRA].points = NULL; /* moved */
            one->allreduce.points = NULL;
            snprintf(all->note, sizeof all->note, "%s", one->note);
        }
        pp_cluster_destroy(one);
        PP_TRY(st);
    }
    return PP_OK;
}

/* The MPI library's version, its first clause ("Open MPI v4.1.4"), into buf (n <= 64 used). */
static void mpi_version(char *buf, size_t n)
{
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    ver[strcspn(ver, ",\n")] = '\0';
    snprintf(buf, n, "%.63s", ver);
}

static void layout_free(layout *L)
{
    free(L->hosts);
    free(L->node_of);
    free(L->leader);
}

static void describe(pp_cluster *c, const layout *L)
{
    mpi_version(c->sw.mpi, sizeof c->sw.mpi);
    snprintf(c->origin, sizeof c->origin, "probed (mpi, %d ranks, %d node%s)", L->size, L->n_nodes,
             L->n_nodes == 1 ? "" : "s");
    if (L->n_nodes == 1) {
        size_t n = strlen(c->note);
        snprintf(c->note + n, sizeof c->note - n,
                 "%sall %d ranks on host %.20s: inter-node link = "
                 "MPI over shared memory",
                 n ? "; " : "", L->size, L->hosts);
    }
    pp_cluster_fingerprint(c);
}

static pp_status run(const pp_probe_opts *o, const layout *L,
                     pp_status (*probe_node)(const pp_probe_opts *, pp_cluster **),
                     pp_cluster **out)
{
    char **texts = NULL;
    int *status = NULL, nf = 0;
    pp_link cls = {0};
    pair_fit *fits = pp_calloc((size_t)L->n_nodes * (size_t)L->n_nodes + 2, sizeof *fits);
    if (!fits)
        return PP_ERR_NOMEM;
    pp_status st = gather_nodes(o, L, probe_node, &texts, &status);
    if (st == PP_OK)
        st = measure_pairs(o, L, &cls, fits, &nf);
    if (st == PP_OK && L->rank == 0) {
        st = merge(L, texts, status, out);
        if (st == PP_OK)
            st = apply_pairs(*out, L, &cls, fits, nf);
        if (st == PP_OK) {
            (*out)->links[PP_LINK_INTER] = cls;
            cls.points = NULL;
            describe(*out, L);
        }
    }
    for (int r = 0; texts && r < L->size; r++)
        free(texts[r]);
    free(texts);
    free(status);
    free(fits);
    free(cls.points);
    return st;
}

/* The end of a probe entry point: the layout freed, MPI finalized when the entry point
 * initialized it (inited = 0), st returned with its trace. */
static pp_status mpi_end(layout *L, int inited, pp_status st)
{
    layout_free(L);
    if (!inited)
        MPI_Finalize();
    return st == PP_OK ? PP_OK : pp_err_trace(st, __FILE__, __LINE__);
}

static pp_status mpi_probe(const pp_probe_opts *o,
                           pp_status (*probe_node)(const pp_probe_opts *, pp_cluster **),
                       pp_cluster **out)
{
    int inited = 0;
    *out = NULL;
    MPI_Initialized(&inited);
    if (!inited)
        MPI_TRY(MPI_Init(NULL, NULL));
    layout L = {0};
    pp_status st = make_layout(&L);
    if (st == PP_OK)
        st = run(o, &L, probe_node, out);
    if (st != PP_OK && *out) {
        pp_cluster_destroy(*out);
        *out = NULL;
    }
    return mpi_end(&L, inited, st);
}

/* ---- the data-parallel all-reduce, timed (pp_probe_allreduce) ---- */

static pp_status allreduce_samples(float *buf, int count, int samples, int iters, double *t)
{
    for (int s = -1; s < samples; s++) { /* s = -1: warm-up */
        MPI_TRY(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        double mine = (MPI_Wtime() - t0) / iters, slowest = 0;
        /* the step waits for the slowest rank's all-reduce */
        MPI_TRY(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        if (s >= 0)
            t[s] = slowest;
    }
    return PP_OK;
}

static pp_status allreduce(double bytes, int quick, pp_allreduce_timing *out)
{
    memset(out, 0, sizeof *out);
    if (!(bytes >= 4) || bytes > 2147483647.0 * 4)
        return PP_ERR(PP_ERR_INVALID,
                      "all-reduce probe: expected a message of 4 B to 8 GiB, got %.0f B", bytes);
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited)
        MPI_TRY(MPI_Init(NULL, NULL));
    layout L = {0};
    pp_status st = make_layout(&L);
    int count = (int)(bytes / 4), samples = quick ? 3 : 7;
    /* a few iterations per sample, fewer for large messages: about 256 MiB moved per sample */
    int iters = (int)((256.0 * 1048576) / (bytes + 1));
    iters = iters < 1 ? 1 : iters > 50 ? 50 : iters;
    float *buf = st == PP_OK ? pp_calloc((size_t)count, sizeof *buf) : NULL;
    double t[16];
    if (st == PP_OK && !buf)
        st = PP_ERR_NOMEM;
    if (st == PP_OK)
        st = allreduce_samples(buf, count, samples, iters, t);
    if (st == PP_OK) {
        out->ranks = L.size;
        out->nodes = L.n_nodes;
        out->bytes = (double)count * 4;
        out->seconds = pp_measure_of(t, samples);
        out->is_root = L.rank == 0;
        mpi_version(out->mpi, sizeof out->mpi);
    }
    free(buf);
    return mpi_end(&L, inited, st);
}

PP_PLUGIN_EXPORT const pp_probe_plugin *pp_probe_plugin_mpi(void)
{
    static const pp_probe_plugin table = {
        PP_PROBE_PLUGIN_ERR_FIELDS,
        .name = "mpi",
        .mpi_probe = mpi_probe,
        .allreduce = allreduce,
    };
    return &table;
}
