/* summary.c — a readable summary of a pp_cluster: nodes (a short lstopo-like tree), devices,
 * link classes with their α-β fits and size sweeps, and the pairwise bandwidth table.
 *
 * Only writes to the FILE* it is given; big clusters are abbreviated (first node's tree, the
 * first devices, no matrix above 16 devices).
 */
#include <string.h>

#include "pp_probe.h"

#define MAX_DEVICE_ROWS 32
#define MAX_MATRIX 16

static const char *human_bytes(double b, char *buf, size_t n)
{
    if (b >= 1e9)
        snprintf(buf, n, "%.1f GB", b / 1e9);
    else if (b >= 1e6)
        snprintf(buf, n, "%.1f MB", b / 1e6);
    else if (b >= 1e3)
        snprintf(buf, n, "%.1f kB", b / 1e3);
    else
        snprintf(buf, n, "%.0f B", b);
    return buf;
}

static void print_devices(const pp_cluster *c, FILE *fp)
{
    char mem[32];
    fprintf(fp, "\ndevices:\n  %3s %4s %-4s %-28s %10s %14s %-6s %s\n", "#", "node", "kind", "name",
            "memory", "GEMM rate", "dtype", "spread (min..max)  source");
    for (int i = 0; i < c->n_devices && i < MAX_DEVICE_ROWS; i++) {
        const pp_device *d = &c->devices[i];
        int tera = d->gemm_flops >= 1e12;
        fprintf(fp, "  %3d %4d %-4s %-28.28s %10s %9.1f %s %-6s", i, d->node, d->kind, d->name,
                human_bytes(d->mem_bytes, mem, sizeof mem), d->gemm_flops / (tera ? 1e12 : 1e9),
                tera ? "TF/s" : "GF/s", d->gemm_dtype);
        const pp_gemm_point *last = d->n_gemm ? &d->gemm[d->n_gemm - 1] : NULL;
        if (last)
            fprintf(fp, " %.3g..%.3g GF/s  ", last->flops.min / 1e9, last->flops.max / 1e9);
        else
            fprintf(fp, " %-18s", "-");
        fprintf(fp, "%s\n", pp_source_name(d->source));
    }
    if (c->n_devices > MAX_DEVICE_ROWS)
        fprintf(fp, "  ... %d more devices\n", c->n_devices - MAX_DEVICE_ROWS);
}

static void print_gemm_sweep(const pp_cluster *c, FILE *fp)
{
    if (c->n_devices == 0 || c->devices[0].n_gemm == 0)
        return;
    const pp_device *d = &c->devices[0];
    fprintf(fp, "\nGEMM sweep on device 0 (%s):\n", d->name);
    for (int i = 0; i < d->n_gemm; i++) {
        const pp_gemm_point *g = &d->gemm[i];
        fprintf(fp, "  %-5s %5d x %5d x %5d  %10.2f GFLOP/s  (%.2f..%.2f, %d runs)\n", g->dtype,
                g->m, g->n, g->k, g->flops.median / 1e9, g->flops.min / 1e9, g->flops.max / 1e9,
                g->flops.samples);
    }
}

static void print_sweep(const pp_xfer_point *p, int n, int busbw_ranks, FILE *fp)
{
    char sz[32];
    for (int i = 0; i < n; i++) {
        double t = p[i].seconds.median, bw = t > 0 ? p[i].bytes / t : 0;
        fprintf(fp, "    %10s  %10.2f us  (%.2f..%.2f)  %9.3f GB/s",
                human_bytes(p[i].bytes, sz, sizeof sz), t * 1e6, p[i].seconds.min * 1e6,
                p[i].seconds.max * 1e6, bw / 1e9);
        if (busbw_ranks > 1) /* nccl-tests: busbw = algbw * 2(n-1)/n for all-reduce */
            fprintf(fp, "  busbw %.3f GB/s", bw * 2.0 * (busbw_ranks - 1) / busbw_ranks / 1e9);
        fprintf(fp, "\n");
    }
}

static void print_links(const pp_cluster *c, FILE *fp)
{
    fprintf(fp, "\nlinks (time = alpha + bytes / beta):\n");
    for (int k = 0; k < PP_LINK_NCLASS; k++) {
        const pp_link *l = &c->links[k];
        if (!l->present) {
            fprintf(fp, "  %-10s none (%s)\n", pp_link_class_name((pp_link_class)k),
                    k == PP_LINK_INTER ? "one node" : "one device");
            continue;
        }
        fprintf(fp, "  %-10s alpha %8.2f us  beta %9.3f GB/s  [%s, %s]\n",
                pp_link_class_name((pp_link_class)k), l->alpha_s * 1e6, l->beta_Bps / 1e9,
                l->method, pp_source_name(l->source));
        print_sweep(l->points, l->n_points, 0, fp);
    }
    if (c->allreduce.present) {
        fprintf(fp, "  all-reduce over %d ranks: busbw %.3f GB/s, alpha %.2f us [%s]\n",
                c->allreduce.ranks, c->allreduce.busbw_Bps / 1e9, c->allreduce.alpha_s * 1e6,
                pp_source_name(c->allreduce.source));
        print_sweep(c->allreduce.points, c->allreduce.n_points, c->allreduce.ranks, fp);
    }
}

static void print_matrix(const pp_cluster *c, FILE *fp)
{
    if (!c->pair_bw_Bps || c->n_devices > MAX_MATRIX || c->n_devices < 2)
        return;
    fprintf(fp, "\npairwise bandwidth (GB/s, row = source; %s):\n      ", c->pair_method);
    for (int b = 0; b < c->n_devices; b++)
        fprintf(fp, " %7d", b);
    fprintf(fp, "\n");
    for (int a = 0; a < c->n_devices; a++) {
        fprintf(fp, "  %3d ", a);
        for (int b = 0; b < c->n_devices; b++) {
            if (a == b)
                fprintf(fp, " %7s", "-");
            else
                fprintf(fp, " %7.2f", c->pair_bw_Bps[a * c->n_devices + b] / 1e9);
        }
        fprintf(fp, "\n");
    }
}

void pp_cluster_print(const pp_cluster *c, FILE *fp)
{
    int gpus = 0;
    for (int i = 0; i < c->n_devices; i++)
        gpus += !strcmp(c->devices[i].kind, "gpu");
    fprintf(fp, "cluster: %s, %d node%s, %d device%s (%d GPU%s)\n", c->origin, c->n_nodes,
            c->n_nodes == 1 ? "" : "s", c->n_devices, c->n_devices == 1 ? "" : "s", gpus,
            gpus == 1 ? "" : "s");
    fprintf(fp, "fingerprint %s, created %s, schema %s v%d\n", c->fingerprint, c->created,
            PP_CLUSTER_SCHEMA, c->schema_version);
    if (c->note[0])
        fprintf(fp, "note: %s\n", c->note);
    const pp_software *s = &c->sw;
    fprintf(fp,
            "software: pptune %s, hwloc %s, BLAS %s, CUDA runtime %s, driver %s, NCCL %s, "
            "MPI %s\n",
            s->pptune, s->hwloc[0] ? s->hwloc : "-", s->blas[0] ? s->blas : "-",
            s->cuda_runtime[0] ? s->cuda_runtime : "-", s->cuda_driver[0] ? s->cuda_driver : "-",
            s->nccl[0] ? s->nccl : "-", s->mpi[0] ? s->mpi : "-");
    for (int i = 0; i < s->n_env; i++)
        fprintf(fp, "  %s=%s\n", s->env[i].name, s->env[i].value);
    for (int i = 0; i < c->n_nodes && i < 2; i++) {
        const pp_node *n = &c->nodes[i];
        fprintf(fp, "\nnode %d%s%s: devices %d..%d", i, n->hostname[0] ? " " : "", n->hostname,
                n->first_device, n->first_device + n->n_devices - 1);
        if (n->memcpy_Bps.samples)
            fprintf(fp, ", memcpy %.2f GB/s (%.2f..%.2f)", n->memcpy_Bps.median / 1e9,
                    n->memcpy_Bps.min / 1e9, n->memcpy_Bps.max / 1e9);
        fprintf(fp, "\n");
        if (n->topo)
            pp_topo_print(n->topo, fp);
    }
    if (c->n_nodes > 2)
        fprintf(fp, "... %d more nodes\n", c->n_nodes - 2);
    print_devices(c, fp);
    print_gemm_sweep(c, fp);
    print_links(c, fp);
    print_matrix(c, fp);
}
