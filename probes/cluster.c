/* cluster.c — the pp_cluster value: lifecycle, growing it, the fingerprint, link look-ups,
 * merging two (for the MPI gather).
 *
 * Not here: JSON (cluster_json.c, cluster_read.c), printing (summary.c), probing (probe.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_impl.h"

const char *pp_source_name(pp_source s)
{
    return s == PP_SRC_PRESET ? "preset" : "probed";
}

const char *pp_link_class_name(pp_link_class c)
{
    return c == PP_LINK_INTER ? "inter_node" : "intra_node";
}

pp_status pp_cluster_create(pp_cluster **out)
{
    pp_cluster *c = pp_calloc(1, sizeof *c);
    if (!c)
        return PP_ERR_NOMEM;
    c->schema_version = PP_CLUSTER_SCHEMA_VERSION;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(c->created, sizeof c->created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(c->sw.pptune, sizeof c->sw.pptune, "%s", "0.1.0");
    *out = c;
    return PP_OK;
}

void pp_cluster_destroy(pp_cluster *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_nodes; i++)
        pp_topo_destroy(c->nodes[i].topo);
    for (int i = 0; i < c->n_devices; i++)
        free(c->devices[i].gemm);
    for (int i = 0; i < PP_LINK_NCLASS; i++)
        free(c->links[i].points);
    free(c->allreduce.points);
    free(c->nodes);
    free(c->devices);
    free(c->pair_bw_Bps);
    free(c->pair_alpha_s);
    free(c);
}

pp_status pp_cluster_add_node(pp_cluster *c, const char *hostname, int *index)
{
    pp_node *n = pp_realloc_array(c->nodes, (size_t)c->n_nodes + 1, sizeof *n);
    if (!n)
        return PP_ERR_NOMEM;
    c->nodes = n;
    n = &c->nodes[c->n_nodes];
    memset(n, 0, sizeof *n);
    snprintf(n->hostname, sizeof n->hostname, "%s", hostname ? hostname : "");
    n->first_device = c->n_devices;
    if (index)
        *index = c->n_nodes;
    c->n_nodes++;
    return PP_OK;
}

/* The device is copied (its gemm array too); it must belong to the last node added. */
pp_status pp_cluster_add_device(pp_cluster *c, const pp_device *d, int *index)
{
    if (d->node < 0 || d->node >= c->n_nodes || d->node != c->n_nodes - 1)
        return PP_ERR(PP_ERR_INVALID,
                      "device \"%s\" names node %d; devices must be added to the "
                      "last node added (%d)",
                      d->name, d->node, c->n_nodes - 1);
    pp_device *v = pp_realloc_array(c->devices, (size_t)c->n_devices + 1, sizeof *v);
    if (!v)
        return PP_ERR_NOMEM;
    c->devices = v;
    pp_device *nd = &c->devices[c->n_devices];
    *nd = *d;
    nd->gemm = NULL;
    if (d->n_gemm > 0) {
        nd->gemm = pp_calloc((size_t)d->n_gemm, sizeof *nd->gemm);
        if (!nd->gemm)
            return PP_ERR_NOMEM;
        memcpy(nd->gemm, d->gemm, (size_t)d->n_gemm * sizeof *nd->gemm);
    }
    if (index)
        *index = c->n_devices;
    c->n_devices++;
    c->nodes[d->node].n_devices++;
    return PP_OK;
}

/* The fingerprint hashes the identity fields with SHA-256 (pp_common.h), each field followed
 * by a separator so "ab"+"c" differs from "a"+"bc". Before, it was a 64-bit FNV-1a
 * ("fnv1a64:<16 hex>"): profiles and cluster files keyed so still read, under their old key. */
typedef struct {
    FILE *fp; /* the identity text, hashed at the end */
} ident;

static void id_str(ident *f, const char *s)
{
    fprintf(f->fp, "%s%c", s, 0x1f);
}

static void id_num(ident *f, double x)
{
    fprintf(f->fp, "%.0f%c", x, 0x1f);
}

static void id_topo(ident *f, const pp_topo *t)
{
    id_str(f, t->arch);
    id_str(f, t->cpu_model);
    id_num(f, t->sockets);
    id_num(f, t->cores);
    id_num(f, t->pus);
    /* the NUMA count, not the memory: a VM's balloon driver moves a node's MemTotal between
     * runs (seen here: 4.7 then 5.5 GB on the same machine) */
    id_num(f, t->n_numa);
    for (int i = 0; i < t->n_gpus; i++) {
        id_str(f, t->gpus[i].model);
        id_str(f, t->gpus[i].pci);
    }
    for (int i = 0; i < t->n_nics; i++) {
        id_str(f, t->nics[i].name);
        id_str(f, t->nics[i].pci);
    }
}

void pp_cluster_fingerprint(pp_cluster *c)
{
    char *text = NULL;
    size_t len = 0;
    ident f = {open_memstream(&text, &len)};
    if (!f.fp) { /* out of memory: a key no real cluster has, so nothing is found under it */
        snprintf(c->fingerprint, sizeof c->fingerprint, "sha256:unavailable");
        return;
    }
    id_str(&f, PP_CLUSTER_SCHEMA);
    /* the origin minus any run detail: "preset hgx-h200" vs "probed" */
    id_str(&f, strncmp(c->origin, "preset", 6) == 0 ? c->origin : "probed");
    id_num(&f, c->n_nodes);
    for (int i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].topo)
            id_topo(&f, c->nodes[i].topo);
    for (int i = 0; i < c->n_devices; i++) {
        const pp_device *d = &c->devices[i];
        id_str(&f, d->kind);
        id_str(&f, d->name);
        id_num(&f, d->node);
        /* a GPU's total memory is a hardware fact; a CPU rank's share of free RAM is not */
        if (!strcmp(d->kind, "gpu"))
            id_num(&f, d->mem_bytes);
    }
    const pp_software *s = &c->sw;
    const char *ids[] = {s->pptune, s->hwloc, s->blas, s->cuda_runtime, s->cuda_driver, s->nccl};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        id_str(&f, ids[i]);
    fclose(f.fp);
    char hex[65];
    pp_sha256_hex(text, len, hex);
    free(text);
    snprintf(c->fingerprint, sizeof c->fingerprint, "sha256:%s", hex);
}

const pp_link *pp_cluster_link(const pp_cluster *c, int a, int b)
{
    if (a < 0 || b < 0 || a >= c->n_devices || b >= c->n_devices)
        return NULL;
    const pp_link *l =
        &c->links[c->devices[a].node == c->devices[b].node ? PP_LINK_INTRA : PP_LINK_INTER];
    return l->present ? l : NULL;
}

double pp_link_time(const pp_link *l, double bytes)
{
    return l->alpha_s + bytes / l->beta_Bps;
}

/* ---- merging (for the MPI gather) ---- */

static pp_status append_pairs(pp_cluster *a, const pp_cluster *b, int na)
{
    int n = na + b->n_devices;
    if (!a->pair_bw_Bps && !b->pair_bw_Bps)
        return PP_OK;
    double *bw = pp_calloc((size_t)n * (size_t)n + 1, sizeof *bw);
    double *al = pp_calloc((size_t)n * (size_t)n + 1, sizeof *al);
    if (!bw || !al) {
        free(bw);
        free(al);
        return PP_ERR_NOMEM;
    }
    /* block diagonal; entries between the two parts stay 0 (not measured: use the class) */
    for (int i = 0; i < na && a->pair_bw_Bps; i++)
        for (int j = 0; j < na; j++) {
            bw[i * n + j] = a->pair_bw_Bps[i * na + j];
            al[i * n + j] = a->pair_alpha_s[i * na + j];
        }
    for (int i = 0; i < b->n_devices && b->pair_bw_Bps; i++)
        for (int j = 0; j < b->n_devices; j++) {
            bw[(na + i) * n + na + j] = b->pair_bw_Bps[i * b->n_devices + j];
            al[(na + i) * n + na + j] = b->pair_alpha_s[i * b->n_devices + j];
        }
    free(a->pair_bw_Bps);
    free(a->pair_alpha_s);
    a->pair_bw_Bps = bw;
    a->pair_alpha_s = al;
    return PP_OK;
}

pp_status pp_cluster_append(pp_cluster *a, const pp_cluster *b)
{
    int na = a->n_devices;
    for (int i = 0; i < b->n_nodes; i++) {
        int node;
        const pp_node *bn = &b->nodes[i];
        PP_TRY(pp_cluster_add_node(a, bn->hostname, &node));
        a->nodes[node].memcpy_Bps = bn->memcpy_Bps;
        if (bn->topo)
            PP_TRY(pp_topo_copy(bn->topo, &a->nodes[node].topo));
        for (int d = bn->first_device; d < bn->first_device + bn->n_devices; d++) {
            pp_device dev = b->devices[d];
            dev.node = node;
            PP_TRY(pp_cluster_add_device(a, &dev, NULL));
        }
    }
    return append_pairs(a, b, na);
}
