/* cluster_read.c — JSON to pp_cluster, validating every field.
 *
 * Any missing or mistyped field stops the read with PP_ERR_PARSE and
 *     FILE: field "devices[2].mem_bytes": expected a number >= 0, got "80GB"
 * so a hand-edited or truncated cluster file is caught here, not as a strange plan later.
 * Unknown extra fields are ignored (a newer minor writer may add some). The inverse of
 * cluster_json.c.
 */
#include <stdlib.h>
#include <string.h>

#include "pp_json.h"
#include "pp_probe.h"

typedef pp_json_src rd;

#define PATH_MAX_LEN 192
#define INT_MAX_FIELD 1000000000 /* no count or index in a cluster file comes near */

/* For a value made up for the message: released here. */
static pp_status bad_owned(const rd *r, const char *field, const char *expected, json_t *got)
{
    pp_status st = pp_json_bad(r, field, expected, got);
    json_decref(got);
    return st;
}

#define GET_ARR(o, pre, key, null_ok, out) PP_TRY(pp_json_arr(r, o, pre, key, null_ok, out))
#define GET_OBJ(o, pre, key, null_ok, out) PP_TRY(pp_json_obj(r, o, pre, key, null_ok, out))

/* The largest any physical quantity of a cluster file may be (bytes, B/s, FLOP/s, seconds):
 * 1e18 is an exaFLOP/s device, far past any; beyond it a product overflows to inf. */
#define NUM_MAX PP_JSON_HUGE

/* A number in [min, NUM_MAX]. */
static pp_status num(const rd *r, const json_t *o, const char *pre, const char *key, double min,
                     double *out)
{
    return pp_json_range(r, o, pre, key, min, NUM_MAX, 0, out);
}

static pp_status get_elem_obj(const rd *r, json_t *arr, const char *pre, const char *key, size_t i,
                              char *path, json_t **out)
{
    pp_json_path_at(path, PATH_MAX_LEN, pre, key, i);
    *out = json_array_get(arr, i);
    if (!json_is_object(*out))
        return pp_json_bad(r, path, "an object", *out);
    return PP_OK;
}

static pp_status get_source(const rd *r, json_t *o, const char *pre, pp_source *out)
{
    char s[16], f[PATH_MAX_LEN];
    PP_TRY(pp_json_str_copy(r, o, pre, "source", s, sizeof s));
    if (strcmp(s, "probed") && strcmp(s, "preset")) {
        pp_json_path(f, sizeof f, pre, "source");
        return pp_json_bad(r, f, "\"probed\" or \"preset\"", json_object_get(o, "source"));
    }
    *out = strcmp(s, "preset") ? PP_SRC_PROBED : PP_SRC_PRESET;
    return PP_OK;
}

static pp_status get_measure(const rd *r, json_t *o, const char *pre, const char *key,
                             pp_measure *m)
{
    char f[PATH_MAX_LEN];
    json_t *v;
    GET_OBJ(o, pre, key, 0, &v);
    pp_json_path(f, sizeof f, pre, key);
    PP_TRY(num(r, v, f, "median", 0, &m->median));
    PP_TRY(num(r, v, f, "min", 0, &m->min));
    PP_TRY(num(r, v, f, "max", 0, &m->max));
    PP_TRY(pp_json_int(r, v, f, "samples", 0, INT_MAX_FIELD, NULL, &m->samples));
    return PP_OK;
}

/* An (n, n) matrix of numbers >= 0. */
static pp_status get_matrix(const rd *r, json_t *o, const char *pre, const char *key, int n,
                            double **out)
{
    char f[PATH_MAX_LEN], row[PATH_MAX_LEN + 16], exp[64];
    json_t *v;
    GET_ARR(o, pre, key, 0, &v);
    pp_json_path(f, sizeof f, pre, key);
    snprintf(exp, sizeof exp, "an array of %d rows", n);
    if (json_array_size(v) != (size_t)n)
        return pp_json_bad(r, f, exp, v);
    double *m = pp_calloc((size_t)n * (size_t)n + 1, sizeof *m);
    if (!m)
        return PP_ERR_NOMEM;
    for (int a = 0; a < n; a++) {
        json_t *rw = json_array_get(v, (size_t)a);
        snprintf(row, sizeof row, "%s[%d]", f, a);
        snprintf(exp, sizeof exp, "an array of %d numbers >= 0", n);
        int ok = json_is_array(rw) && json_array_size(rw) == (size_t)n;
        for (int b = 0; ok && b < n; b++) {
            json_t *x = json_array_get(rw, (size_t)b);
            ok = json_is_number(x) && json_number_value(x) >= 0 &&
                 json_number_value(x) <= NUM_MAX;
            if (ok)
                m[a * n + b] = json_number_value(x);
        }
        if (!ok) {
            free(m);
            return pp_json_bad(r, row, exp, rw);
        }
    }
    *out = m;
    return PP_OK;
}

static pp_status get_sweep(const rd *r, json_t *o, const char *pre, pp_xfer_point **pts, int *n)
{
    char f[PATH_MAX_LEN];
    json_t *v, *e;
    GET_ARR(o, pre, "sweep", 0, &v);
    *n = (int)json_array_size(v);
    *pts = pp_calloc((size_t)*n + 1, sizeof **pts);
    if (!*pts)
        return PP_ERR_NOMEM;
    for (int i = 0; i < *n; i++) {
        PP_TRY(get_elem_obj(r, v, pre, "sweep", (size_t)i, f, &e));
        PP_TRY(num(r, e, f, "bytes", 0, &(*pts)[i].bytes));
        PP_TRY(get_measure(r, e, f, "seconds", &(*pts)[i].seconds));
    }
    return PP_OK;
}

static pp_status read_link(const rd *r, json_t *links, const char *key, pp_link *l)
{
    char f[PATH_MAX_LEN];
    json_t *v;
    GET_OBJ(links, "links", key, 1, &v);
    if (!v)
        return PP_OK;
    pp_json_path(f, sizeof f, "links", key);
    l->present = 1;
    PP_TRY(pp_json_range(r, v, f, "alpha_s", 0, 10, 0, &l->alpha_s));  /* latency, s */
    PP_TRY(pp_json_range(r, v, f, "beta_Bps", 1, 1e15, 0, &l->beta_Bps)); /* 1 PB/s */
    PP_TRY(pp_json_str_copy(r, v, f, "method", l->method, sizeof l->method));
    PP_TRY(get_source(r, v, f, &l->source));
    PP_TRY(get_sweep(r, v, f, &l->points, &l->n_points));
    return PP_OK;
}

static pp_status read_allreduce(const rd *r, json_t *root, pp_collective *a)
{
    json_t *v;
    GET_OBJ(root, "", "allreduce", 1, &v);
    if (!v)
        return PP_OK;
    a->present = 1;
    PP_TRY(pp_json_int(r, v, "allreduce", "ranks", 1, INT_MAX_FIELD, NULL, &a->ranks));
    PP_TRY(pp_json_range(r, v, "allreduce", "busbw_Bps", 0, 1e15, 0, &a->busbw_Bps));
    PP_TRY(pp_json_range(r, v, "allreduce", "alpha_s", 0, 10, 0, &a->alpha_s));
    PP_TRY(pp_json_range(r, v, "allreduce", "beta_Bps", 0, 1e15, 0, &a->beta_Bps));
    PP_TRY(get_source(r, v, "allreduce", &a->source));
    PP_TRY(get_sweep(r, v, "allreduce", &a->points, &a->n_points));
    return PP_OK;
}

static pp_status read_software(const rd *r, json_t *root, pp_software *s)
{
    json_t *v, *env;
    GET_OBJ(root, "", "software", 0, &v);
    PP_TRY(pp_json_str_copy(r, v, "software", "pptune", s->pptune, sizeof s->pptune));
    PP_TRY(pp_json_str_copy(r, v, "software", "hwloc", s->hwloc, sizeof s->hwloc));
    PP_TRY(pp_json_str_copy(r, v, "software", "blas", s->blas, sizeof s->blas));
    PP_TRY(pp_json_str_copy(r, v, "software", "cuda_runtime", s->cuda_runtime,
                            sizeof s->cuda_runtime));
    PP_TRY(
        pp_json_str_copy(r, v, "software", "cuda_driver", s->cuda_driver, sizeof s->cuda_driver));
    PP_TRY(pp_json_str_copy(r, v, "software", "nccl", s->nccl, sizeof s->nccl));
    PP_TRY(pp_json_str_copy(r, v, "software", "mpi", s->mpi, sizeof s->mpi));
    GET_OBJ(v, "software", "env", 0, &env);
    const char *k;
    json_t *val;
    json_object_foreach(env, k, val)
    {
        char f[PATH_MAX_LEN];
        pp_json_path(f, sizeof f, "software.env", k);
        if (s->n_env >= PP_MAX_ENV || strlen(k) >= sizeof s->env[0].name)
            return pp_json_bad(r, f, "at most 16 variables with names under 32 characters", val);
        snprintf(s->env[s->n_env].name, sizeof s->env[0].name, "%s", k);
        PP_TRY(pp_json_str_copy(r, env, "software.env", k, s->env[s->n_env].value,
                                sizeof s->env[0].value));
        s->n_env++;
    }
    return PP_OK;
}

static pp_status read_topo_gpus(const rd *r, json_t *v, const char *pre, pp_topo *t)
{
    char f[PATH_MAX_LEN], path[16];
    json_t *a, *e;
    GET_ARR(v, pre, "gpus", 0, &a);
    t->n_gpus = (int)json_array_size(a);
    if (!(t->gpus = pp_calloc((size_t)t->n_gpus + 1, sizeof *t->gpus)))
        return PP_ERR_NOMEM;
    for (int i = 0; i < t->n_gpus; i++) {
        pp_topo_gpu *g = &t->gpus[i];
        PP_TRY(get_elem_obj(r, a, pre, "gpus", (size_t)i, f, &e));
        PP_TRY(pp_json_str_copy(r, e, f, "name", g->name, sizeof g->name));
        PP_TRY(pp_json_str_copy(r, e, f, "model", g->model, sizeof g->model));
        PP_TRY(pp_json_str_copy(r, e, f, "pci", g->pci, sizeof g->pci));
        PP_TRY(pp_json_int(r, e, f, "numa", -1, INT_MAX_FIELD, NULL, &g->numa));
        PP_TRY(pp_json_int(r, e, f, "nic", -1, INT_MAX_FIELD, NULL, &g->nic));
        PP_TRY(num(r, e, f, "mem_bytes", 0, &g->mem_bytes));
        PP_TRY(pp_json_str_copy(r, e, f, "nic_path", path, sizeof path));
        g->nic_path = PP_PATH_UNKNOWN;
        for (int p = 0; p < PP_PATH_UNKNOWN; p++)
            if (!strcmp(path, pp_pci_path_name((pp_pci_path)p)))
                g->nic_path = (pp_pci_path)p;
    }
    return PP_OK;
}

static pp_status read_topo_io(const rd *r, json_t *v, const char *pre, pp_topo *t)
{
    char f[PATH_MAX_LEN];
    json_t *a, *e;
    PP_TRY(read_topo_gpus(r, v, pre, t));
    GET_ARR(v, pre, "nics", 0, &a);
    t->n_nics = (int)json_array_size(a);
    if (!(t->nics = pp_calloc((size_t)t->n_nics + 1, sizeof *t->nics)))
        return PP_ERR_NOMEM;
    for (int i = 0; i < t->n_nics; i++) {
        pp_topo_nic *n = &t->nics[i];
        PP_TRY(get_elem_obj(r, a, pre, "nics", (size_t)i, f, &e));
        PP_TRY(pp_json_str_copy(r, e, f, "name", n->name, sizeof n->name));
        PP_TRY(pp_json_str_copy(r, e, f, "netdevs", n->netdevs, sizeof n->netdevs));
        PP_TRY(pp_json_str_copy(r, e, f, "pci", n->pci, sizeof n->pci));
        PP_TRY(pp_json_int(r, e, f, "numa", -1, INT_MAX_FIELD, NULL, &n->numa));
        PP_TRY(pp_json_bool(r, e, f, "rdma", &n->rdma));
    }
    for (int i = 0; i < t->n_gpus; i++)
        if (t->gpus[i].nic >= t->n_nics) {
            if (snprintf(f, sizeof f, "%s.gpus[%d].nic", pre, i) >= (int)sizeof f)
                f[sizeof f - 1] = '\0';
            return bad_owned(r, f, "an index into nics, or -1", json_integer(t->gpus[i].nic));
        }
    json_t *nv = json_object_get(v, "nvlink_MBps");
    if (nv && !json_is_null(nv))
        PP_TRY(get_matrix(r, v, pre, "nvlink_MBps", t->n_gpus, &t->nvlink_MBps));
    else if (!nv)
        return pp_json_bad(r, pre, "a \"nvlink_MBps\" matrix or null", NULL);
    return PP_OK;
}

static pp_status read_topo(const rd *r, json_t *v, const char *pre, pp_topo *t)
{
    char f[PATH_MAX_LEN];
    json_t *a, *e;
    PP_TRY(pp_json_str_copy(r, v, pre, "hostname", t->hostname, sizeof t->hostname));
    PP_TRY(pp_json_str_copy(r, v, pre, "arch", t->arch, sizeof t->arch));
    PP_TRY(pp_json_str_copy(r, v, pre, "cpu_model", t->cpu_model, sizeof t->cpu_model));
    PP_TRY(pp_json_int(r, v, pre, "sockets", 0, INT_MAX_FIELD, NULL, &t->sockets));
    PP_TRY(pp_json_int(r, v, pre, "cores", 0, INT_MAX_FIELD, NULL, &t->cores));
    PP_TRY(pp_json_int(r, v, pre, "pus", 0, INT_MAX_FIELD, NULL, &t->pus));
    PP_TRY(num(r, v, pre, "mem_bytes", 0, &t->mem_bytes));
    GET_ARR(v, pre, "numa", 0, &a);
    t->n_numa = (int)json_array_size(a);
    if (!(t->numa = pp_calloc((size_t)t->n_numa + 1, sizeof *t->numa)))
        return PP_ERR_NOMEM;
    for (int i = 0; i < t->n_numa; i++) {
        PP_TRY(get_elem_obj(r, a, pre, "numa", (size_t)i, f, &e));
        PP_TRY(pp_json_int(r, e, f, "os_index", 0, INT_MAX_FIELD, NULL, &t->numa[i].os_index));
        PP_TRY(num(r, e, f, "mem_bytes", 0, &t->numa[i].mem_bytes));
    }
    return read_topo_io(r, v, pre, t);
}

static pp_status read_node(const rd *r, json_t *e, const char *f, pp_cluster *c, int i)
{
    pp_node *n = &c->nodes[i];
    json_t *tv;
    char tf[PATH_MAX_LEN], exp[64];
    PP_TRY(pp_json_str_copy(r, e, f, "hostname", n->hostname, sizeof n->hostname));
    PP_TRY(pp_json_int(r, e, f, "first_device", 0, INT_MAX_FIELD, NULL, &n->first_device));
    PP_TRY(pp_json_int(r, e, f, "n_devices", 0, INT_MAX_FIELD, NULL, &n->n_devices));
    int expect = i ? c->nodes[i - 1].first_device + c->nodes[i - 1].n_devices : 0;
    if (n->first_device != expect) {
        pp_json_path(tf, sizeof tf, f, "first_device");
        snprintf(exp, sizeof exp, "%d (devices are grouped by node, in order)", expect);
        return pp_json_bad(r, tf, exp, json_object_get(e, "first_device"));
    }
    PP_TRY(get_measure(r, e, f, "memcpy_Bps", &n->memcpy_Bps));
    GET_OBJ(e, f, "topology", 1, &tv);
    if (tv) {
        if (!(n->topo = pp_calloc(1, sizeof *n->topo)))
            return PP_ERR_NOMEM;
        pp_json_path(tf, sizeof tf, f, "topology");
        PP_TRY(read_topo(r, tv, tf, n->topo));
    }
    return PP_OK;
}

static pp_status read_nodes(const rd *r, json_t *root, pp_cluster *c)
{
    char f[PATH_MAX_LEN];
    json_t *a, *e;
    GET_ARR(root, "", "nodes", 0, &a);
    if (json_array_size(a) < 1)
        return pp_json_bad(r, "nodes", "at least one node", a);
    if (!(c->nodes = pp_calloc(json_array_size(a), sizeof *c->nodes)))
        return PP_ERR_NOMEM;
    c->n_nodes = (int)json_array_size(a);
    for (int i = 0; i < c->n_nodes; i++) {
        PP_TRY(get_elem_obj(r, a, "", "nodes", (size_t)i, f, &e));
        PP_TRY(read_node(r, e, f, c, i));
    }
    return PP_OK;
}

static pp_status read_gemm(const rd *r, json_t *e, const char *f, pp_device *d)
{
    char g[PATH_MAX_LEN];
    json_t *a, *x;
    GET_ARR(e, f, "gemm", 0, &a);
    d->n_gemm = (int)json_array_size(a);
    if (!(d->gemm = pp_calloc((size_t)d->n_gemm + 1, sizeof *d->gemm)))
        return PP_ERR_NOMEM;
    for (int i = 0; i < d->n_gemm; i++) {
        pp_gemm_point *p = &d->gemm[i];
        PP_TRY(get_elem_obj(r, a, f, "gemm", (size_t)i, g, &x));
        PP_TRY(pp_json_str_copy(r, x, g, "dtype", p->dtype, sizeof p->dtype));
        PP_TRY(pp_json_int(r, x, g, "m", 1, INT_MAX_FIELD, NULL, &p->m));
        PP_TRY(pp_json_int(r, x, g, "n", 1, INT_MAX_FIELD, NULL, &p->n));
        PP_TRY(pp_json_int(r, x, g, "k", 1, INT_MAX_FIELD, NULL, &p->k));
        PP_TRY(get_measure(r, x, g, "flops", &p->flops));
    }
    return PP_OK;
}

static pp_status read_device(const rd *r, json_t *e, const char *f, const pp_cluster *c,
                             pp_device *d)
{
    char tf[PATH_MAX_LEN], exp[64];
    PP_TRY(pp_json_str_copy(r, e, f, "kind", d->kind, sizeof d->kind));
    if (strcmp(d->kind, "gpu") && strcmp(d->kind, "cpu")) {
        pp_json_path(tf, sizeof tf, f, "kind");
        return pp_json_bad(r, tf, "\"gpu\" or \"cpu\"", json_object_get(e, "kind"));
    }
    PP_TRY(pp_json_str_copy(r, e, f, "name", d->name, sizeof d->name));
    PP_TRY(pp_json_int(r, e, f, "node", 0, INT_MAX_FIELD, NULL, &d->node));
    int idx = (int)(d - c->devices), want = 0;
    while (want + 1 < c->n_nodes && idx >= c->nodes[want + 1].first_device)
        want++;
    if (d->node != want) {
        pp_json_path(tf, sizeof tf, f, "node");
        snprintf(exp, sizeof exp, "%d (the node whose device range holds it)", want);
        return pp_json_bad(r, tf, exp, json_object_get(e, "node"));
    }
    PP_TRY(pp_json_int(r, e, f, "local_index", 0, INT_MAX_FIELD, NULL, &d->local_index));
    PP_TRY(pp_json_str_copy(r, e, f, "pci", d->pci, sizeof d->pci));
    PP_TRY(num(r, e, f, "mem_bytes", 0, &d->mem_bytes));
    PP_TRY(num(r, e, f, "mem_free_bytes", 0, &d->mem_free_bytes));
    PP_TRY(pp_json_range(r, e, f, "peak_flops", 1e3, NUM_MAX, 1, &d->peak_flops));
    PP_TRY(pp_json_range(r, e, f, "gemm_flops", 1e3, NUM_MAX, 1, &d->gemm_flops));
    PP_TRY(pp_json_str_copy(r, e, f, "gemm_dtype", d->gemm_dtype, sizeof d->gemm_dtype));
    PP_TRY(get_source(r, e, f, &d->source));
    PP_TRY(get_measure(r, e, f, "copy_Bps", &d->copy_Bps));
    return read_gemm(r, e, f, d);
}

static pp_status read_devices(const rd *r, json_t *root, pp_cluster *c)
{
    char f[PATH_MAX_LEN], exp[64];
    json_t *a, *e;
    GET_ARR(root, "", "devices", 0, &a);
    const pp_node *last = &c->nodes[c->n_nodes - 1];
    int expect = last->first_device + last->n_devices;
    snprintf(exp, sizeof exp, "%d devices (the nodes' n_devices added up)", expect);
    if (json_array_size(a) != (size_t)expect)
        return bad_owned(r, "devices", exp, json_integer((json_int_t)json_array_size(a)));
    if (!(c->devices = pp_calloc((size_t)expect + 1, sizeof *c->devices)))
        return PP_ERR_NOMEM;
    c->n_devices = expect;
    for (int i = 0; i < c->n_devices; i++) {
        PP_TRY(get_elem_obj(r, a, "", "devices", (size_t)i, f, &e));
        PP_TRY(read_device(r, e, f, c, &c->devices[i]));
    }
    return PP_OK;
}

static pp_status read_header(const rd *r, json_t *root, pp_cluster *c)
{
    char schema[32];
    if (!json_is_object(root))
        return pp_json_bad(r, "(top level)", "an object", root);
    PP_TRY(pp_json_str_copy(r, root, "", "schema", schema, sizeof schema));
    if (strcmp(schema, PP_CLUSTER_SCHEMA))
        return pp_json_bad(r, "schema", "\"" PP_CLUSTER_SCHEMA "\"",
                           json_object_get(root, "schema"));
    PP_TRY(pp_json_int(r, root, "", "schema_version", 1, INT_MAX_FIELD, NULL, &c->schema_version));
    if (c->schema_version != PP_CLUSTER_SCHEMA_VERSION)
        return pp_json_bad(r, "schema_version", "1 (this pptune reads version 1 only)",
                           json_object_get(root, "schema_version"));
    PP_TRY(pp_json_str_copy(r, root, "", "created", c->created, sizeof c->created));
    PP_TRY(pp_json_str_copy(r, root, "", "origin", c->origin, sizeof c->origin));
    PP_TRY(pp_json_str_copy(r, root, "", "fingerprint", c->fingerprint, sizeof c->fingerprint));
    PP_TRY(pp_json_str_copy(r, root, "", "note", c->note, sizeof c->note));
    return read_software(r, root, &c->sw);
}

static pp_status read_all(const rd *r, json_t *root, pp_cluster *c)
{
    json_t *links, *pair;
    PP_TRY(read_header(r, root, c));
    PP_TRY(read_nodes(r, root, c));
    PP_TRY(read_devices(r, root, c));
    GET_OBJ(root, "", "links", 0, &links);
    PP_TRY(read_link(r, links, "intra_node", &c->links[PP_LINK_INTRA]));
    PP_TRY(read_link(r, links, "inter_node", &c->links[PP_LINK_INTER]));
    PP_TRY(read_allreduce(r, root, &c->allreduce));
    GET_OBJ(root, "", "pairwise", 1, &pair);
    if (pair) {
        PP_TRY(
            pp_json_str_copy(r, pair, "pairwise", "method", c->pair_method, sizeof c->pair_method));
        PP_TRY(get_matrix(r, pair, "pairwise", "bandwidth_Bps", c->n_devices, &c->pair_bw_Bps));
        PP_TRY(get_matrix(r, pair, "pairwise", "latency_s", c->n_devices, &c->pair_alpha_s));
    }
    return PP_OK;
}

pp_status pp_cluster_from_json(const char *text, const char *name, pp_cluster **out)
{
    *out = NULL;
    json_t *root;
    PP_TRY(pp_json_load(text, strlen(text), name, 0, &root));
    pp_cluster *c = pp_calloc(1, sizeof *c);
    rd r = {.file = name};
    pp_status st = c ? read_all(&r, root, c) : PP_ERR_NOMEM;
    json_decref(root);
    if (st != PP_OK) {
        pp_cluster_destroy(c);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    *out = c;
    return PP_OK;
}

pp_status pp_cluster_read(const char *path, pp_cluster **out)
{
    char *text;
    size_t len;
    PP_TRY(pp_file_read(path, &text, &len));
    pp_status st = pp_cluster_from_json(text, path, out);
    free(text);
    if (st != PP_OK)
        return pp_err_trace(st, __FILE__, __LINE__);
    return PP_OK;
}
