/* cluster_json.c — pp_cluster to JSON (jansson), written atomically.
 *
 * The layout (schema "pptune-cluster", version PP_CLUSTER_SCHEMA_VERSION) mirrors pp_probe.h
 * field for field, with units in the key names (_bytes, _Bps, _s). cluster_read.c is its exact
 * inverse; a change here needs one there and a schema_version bump.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "pp_probe.h"

static json_t *measure_json(const pp_measure *m)
{
    return json_pack("{s:f, s:f, s:f, s:i}", "median", m->median, "min", m->min, "max", m->max,
                     "samples", m->samples);
}

static json_t *matrix_json(const double *m, int n)
{
    json_t *rows = json_array();
    for (int a = 0; a < n; a++) {
        json_t *row = json_array();
        for (int b = 0; b < n; b++)
            json_array_append_new(row, json_real(m[a * n + b]));
        json_array_append_new(rows, row);
    }
    return rows;
}

static json_t *sweep_json(const pp_xfer_point *p, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:f, s:o}", "bytes", p[i].bytes, "seconds",
                                           measure_json(&p[i].seconds)));
    return a;
}

static json_t *topo_json(const pp_topo *t)
{
    json_t *numa = json_array(), *gpus = json_array(), *nics = json_array();
    for (int i = 0; i < t->n_numa; i++)
        json_array_append_new(numa, json_pack("{s:i, s:f}", "os_index", t->numa[i].os_index,
                                              "mem_bytes", t->numa[i].mem_bytes));
    for (int i = 0; i < t->n_gpus; i++) {
        const pp_topo_gpu *g = &t->gpus[i];
        json_array_append_new(
            gpus, json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:f}", "name", g->name, "model",
                            g->model, "pci", g->pci, "numa", g->numa, "nic", g->nic, "nic_path",
                            pp_pci_path_name(g->nic_path), "mem_bytes", g->mem_bytes));
    }
    for (int i = 0; i < t->n_nics; i++) {
        const pp_topo_nic *n = &t->nics[i];
        json_array_append_new(nics, json_pack("{s:s, s:s, s:s, s:i, s:b}", "name", n->name,
                                              "netdevs", n->netdevs, "pci", n->pci, "numa", n->numa,
                                              "rdma", n->rdma));
    }
    return json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:f, s:o, s:o, s:o, s:o}", "hostname",
                     t->hostname, "arch", t->arch, "cpu_model", t->cpu_model, "sockets", t->sockets,
                     "cores", t->cores, "pus", t->pus, "mem_bytes", t->mem_bytes, "numa", numa,
                     "gpus", gpus, "nics", nics, "nvlink_MBps",
                     t->nvlink_MBps ? matrix_json(t->nvlink_MBps, t->n_gpus) : json_null());
}

static json_t *device_json(const pp_device *d)
{
    json_t *gemm = json_array();
    for (int i = 0; i < d->n_gemm; i++) {
        const pp_gemm_point *g = &d->gemm[i];
        json_array_append_new(gemm,
                              json_pack("{s:s, s:i, s:i, s:i, s:o}", "dtype", g->dtype, "m", g->m,
                                        "n", g->n, "k", g->k, "flops", measure_json(&g->flops)));
    }
    return json_pack("{s:s, s:s, s:i, s:i, s:s, s:f, s:f, s:f, s:f, s:s, s:s, s:o, s:o}", "kind",
                     d->kind, "name", d->name, "node", d->node, "local_index", d->local_index,
                     "pci", d->pci, "mem_bytes", d->mem_bytes, "mem_free_bytes", d->mem_free_bytes,
                     "peak_flops", d->peak_flops, "gemm_flops", d->gemm_flops, "gemm_dtype",
                     d->gemm_dtype, "source", pp_source_name(d->source), "gemm", gemm, "copy_Bps",
                     measure_json(&d->copy_Bps));
}

static json_t *link_json(const pp_link *l)
{
    if (!l->present)
        return json_null();
    return json_pack("{s:f, s:f, s:s, s:s, s:o}", "alpha_s", l->alpha_s, "beta_Bps", l->beta_Bps,
                     "method", l->method, "source", pp_source_name(l->source), "sweep",
                     sweep_json(l->points, l->n_points));
}

static json_t *allreduce_json(const pp_collective *a)
{
    if (!a->present)
        return json_null();
    return json_pack("{s:i, s:f, s:f, s:f, s:s, s:o}", "ranks", a->ranks, "busbw_Bps", a->busbw_Bps,
                     "alpha_s", a->alpha_s, "beta_Bps", a->beta_Bps, "source",
                     pp_source_name(a->source), "sweep", sweep_json(a->points, a->n_points));
}

static json_t *software_json(const pp_software *s)
{
    json_t *env = json_object();
    for (int i = 0; i < s->n_env; i++)
        json_object_set_new(env, s->env[i].name, json_string(s->env[i].value));
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o}", "pptune", s->pptune, "hwloc",
                     s->hwloc, "blas", s->blas, "cuda_runtime", s->cuda_runtime, "cuda_driver",
                     s->cuda_driver, "nccl", s->nccl, "mpi", s->mpi, "env", env);
}

static json_t *cluster_json(const pp_cluster *c)
{
    json_t *nodes = json_array(), *devices = json_array();
    for (int i = 0; i < c->n_nodes; i++) {
        const pp_node *n = &c->nodes[i];
        json_array_append_new(nodes,
                              json_pack("{s:s, s:i, s:i, s:o, s:o}", "hostname", n->hostname,
                                        "first_device", n->first_device, "n_devices", n->n_devices,
                                        "memcpy_Bps", measure_json(&n->memcpy_Bps), "topology",
                                        n->topo ? topo_json(n->topo) : json_null()));
    }
    for (int i = 0; i < c->n_devices; i++)
        json_array_append_new(devices, device_json(&c->devices[i]));
    json_t *pair = json_null();
    if (c->pair_bw_Bps && c->pair_alpha_s)
        pair = json_pack("{s:s, s:o, s:o}", "method", c->pair_method, "bandwidth_Bps",
                         matrix_json(c->pair_bw_Bps, c->n_devices), "latency_s",
                         matrix_json(c->pair_alpha_s, c->n_devices));
    return json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:{s:o, s:o}, s:o, s:o}",
                     "schema", PP_CLUSTER_SCHEMA, "schema_version", c->schema_version, "created",
                     c->created, "origin", c->origin, "fingerprint", c->fingerprint, "note",
                     c->note, "software", software_json(&c->sw), "nodes", nodes, "devices", devices,
                     "links", "intra_node", link_json(&c->links[PP_LINK_INTRA]), "inter_node",
                     link_json(&c->links[PP_LINK_INTER]), "allreduce",
                     allreduce_json(&c->allreduce), "pairwise", pair);
}

pp_status pp_cluster_to_json(const pp_cluster *c, char **text)
{
    json_t *j = cluster_json(c);
    if (!j)
        return PP_ERR(PP_ERR_NOMEM, "could not build the cluster JSON (out of memory or a "
                                    "string that is not UTF-8)");
    /* full precision: a figure read back must equal the one written (the fingerprint and the
     * tuner's costs depend on them) */
    *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!*text)
        return PP_ERR(PP_ERR_NOMEM, "could not serialise the cluster JSON");
    return PP_OK;
}

pp_status pp_cluster_write(const pp_cluster *c, const char *path)
{
    char *text;
    PP_TRY(pp_cluster_to_json(c, &text));
    pp_afile af;
    pp_status st = pp_afile_open(&af, path);
    if (st == PP_OK) {
        if (fputs(text, af.fp) < 0 || fputc('\n', af.fp) < 0) {
            pp_afile_abort(&af);
            st = PP_ERR(PP_ERR_IO, "%s: write failed", path);
        } else {
            st = pp_afile_commit(&af);
        }
    }
    free(text);
    if (st != PP_OK)
        return pp_err_trace(st, __FILE__, __LINE__);
    return PP_OK;
}
