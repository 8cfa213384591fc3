/* test_probes_cluster.c — cluster descriptions: presets, JSON round trips, the validating
 * reader's messages, the fingerprint, and the statistics behind every figure. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_probe.h"

static pp_cluster *preset(const char *name, int nodes)
{
    pp_cluster *c = NULL;
    cr_assert_eq(pp_cluster_load_preset(name, nodes, &c), PP_OK, "%s", pp_err_msg());
    return c;
}

Test(probes_cluster, hgx_h200_preset_scales_with_nodes)
{
    pp_cluster *c = preset("hgx-h200", 2);
    cr_assert_eq(c->n_nodes, 2);
    cr_assert_eq(c->n_devices, 16);
    cr_assert_eq(c->nodes[1].first_device, 8);
    for (int i = 0; i < 16; i++) {
        cr_assert_eq(c->devices[i].mem_bytes, 141e9);
        cr_assert_eq(c->devices[i].peak_flops, 989e12);
        cr_assert_eq(c->devices[i].gemm_flops, 790e12);
        cr_assert_eq(c->devices[i].source, PP_SRC_PRESET);
        cr_assert_eq(c->devices[i].node, i / 8);
    }
    const pp_link *in = pp_cluster_link(c, 0, 7), *out = pp_cluster_link(c, 0, 8);
    cr_assert_not_null(in);
    cr_assert_not_null(out);
    cr_assert_eq(in->beta_Bps, 450e9, "NVLink4: 900 GB/s both directions = 450 per direction");
    cr_assert_eq(out->beta_Bps, 50e9, "400 Gb/s NDR per GPU = 50 GB/s");
    cr_assert_eq(in->source, PP_SRC_PRESET);
    cr_assert_float_eq(pp_link_time(out, 50e9), 1.0, 1e-12);
    pp_cluster_destroy(c);
}

Test(probes_cluster, one_node_preset_has_no_inter_node_link)
{
    pp_cluster *c = preset("dgx-a100-80g", 1);
    cr_assert_eq(c->n_devices, 8);
    cr_assert_null(pp_cluster_link(c, 0, 100));
    cr_assert_eq(pp_cluster_link(c, 0, 1)->beta_Bps, 300e9);
    cr_assert_eq(c->devices[0].peak_flops, 312e12);
    pp_cluster_destroy(c);
}

Test(probes_cluster, unknown_preset_lists_the_known_ones)
{
    pp_cluster *c = NULL;
    cr_assert_eq(pp_cluster_load_preset("dgx-b200", 1, &c), PP_ERR_NOTFOUND);
    cr_assert_null(c);
    cr_assert_str_eq(pp_err_text(), "unknown cluster preset \"dgx-b200\"; known presets: "
                                    "dgx-a100-80g, dgx-h100, hgx-h200");
    cr_assert_eq(pp_cluster_load_preset("dgx-h100", 0, &c), PP_ERR_INVALID);
}

Test(probes_cluster, fingerprint_ignores_time_and_tracks_hardware)
{
    pp_cluster *a = preset("dgx-h100", 4), *b = preset("dgx-h100", 4);
    snprintf(b->created, sizeof b->created, "1999-01-01T00:00:00Z");
    b->links[PP_LINK_INTRA].beta_Bps = 1; /* a measured number: not part of the identity */
    pp_cluster_fingerprint(b);
    cr_assert_str_eq(a->fingerprint, b->fingerprint);
    pp_cluster *c = preset("dgx-h100", 2), *d = preset("hgx-h200", 4);
    cr_assert_str_neq(a->fingerprint, c->fingerprint);
    cr_assert_str_neq(a->fingerprint, d->fingerprint);
    /* SHA-256 of the identity: "sha256:" and 64 lowercase hex digits */
    cr_assert_eq(strncmp(a->fingerprint, "sha256:", 7), 0, "%s", a->fingerprint);
    cr_assert_eq(strlen(a->fingerprint), 7 + 64, "%s", a->fingerprint);
    cr_assert_eq(strspn(a->fingerprint + 7, "0123456789abcdef"), 64, "%s", a->fingerprint);
    pp_cluster_destroy(a);
    pp_cluster_destroy(b);
    pp_cluster_destroy(c);
    pp_cluster_destroy(d);
}

static char *tmp_path(const char *name)
{
    static char dir[] = "/tmp/pp_probes_XXXXXX";
    if (dir[strlen(dir) - 1] == 'X')
        cr_assert_not_null(mkdtemp(dir));
    char *p = malloc(256);
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

/* A probed-looking cluster: the power8 topology, two GPUs with a GEMM sweep, a measured link
 * with a sweep, an all-reduce and a pairwise matrix, NCCL env recorded. */
static pp_cluster *synthetic(void)
{
    pp_cluster *c;
    cr_assert_eq(pp_cluster_create(&c), PP_OK);
    snprintf(c->origin, sizeof c->origin, "probed");
    int node;
    cr_assert_eq(pp_cluster_add_node(c, "host-a", &node), PP_OK);
    cr_assert_eq(
        pp_probe_topology(PP_FIXTURES_DIR "/hwloc/power8gpudistances.xml", &c->nodes[node].topo),
        PP_OK);
    c->nodes[node].memcpy_Bps = (pp_measure){1e10, 9e9, 1.1e10, 5};
    pp_gemm_point g[2] = {{"bf16", 1024, 1024, 1024, {1e14, 9e13, 1.1e14, 5}},
                          {"fp32", 4096, 4096, 4096, {2e13, 1.9e13, 2.1e13, 5}}};
    for (int i = 0; i < 2; i++) {
        pp_device d = {.kind = "gpu",
                       .name = "Tesla P100-SXM2-16GB",
                       .node = node,
                       .local_index = i,
                       .mem_bytes = 17071734784.0,
                       .mem_free_bytes = 1.6e10,
                       .gemm_flops = 1e14,
                       .gemm_dtype = "bf16",
                       .n_gemm = 2,
                       .gemm = g};
        cr_assert_eq(pp_cluster_add_device(c, &d, NULL), PP_OK);
    }
    pp_link *l = &c->links[PP_LINK_INTRA];
    l->present = 1;
    l->alpha_s = 5e-6;
    l->beta_Bps = 3.7e10;
    snprintf(l->method, sizeof l->method, "cuda-peer-copy");
    l->n_points = 2;
    l->points = calloc(2, sizeof *l->points);
    l->points[0] = (pp_xfer_point){8, {5e-6, 4e-6, 6e-6, 5}};
    l->points[1] = (pp_xfer_point){1 << 20, {3.3e-5, 3e-5, 3.5e-5, 5}};
    c->allreduce = (pp_collective){.present = 1,
                                   .ranks = 2,
                                   .busbw_Bps = 3e10,
                                   .alpha_s = 1e-5,
                                   .beta_Bps = 3e10,
                                   .n_points = 1,
                                   .points = calloc(1, sizeof(pp_xfer_point))};
    c->allreduce.points[0] = (pp_xfer_point){1 << 20, {4e-5, 3e-5, 5e-5, 5}};
    c->pair_bw_Bps = calloc(4, sizeof(double));
    c->pair_alpha_s = calloc(4, sizeof(double));
    c->pair_bw_Bps[1] = 3.6e10;
    c->pair_bw_Bps[2] = 3.8e10;
    c->pair_alpha_s[1] = c->pair_alpha_s[2] = 5e-6;
    c->sw.n_env = 1;
    snprintf(c->sw.env[0].name, sizeof c->sw.env[0].name, "NCCL_P2P_LEVEL");
    snprintf(c->sw.env[0].value, sizeof c->sw.env[0].value, "NVL");
    snprintf(c->sw.nccl, sizeof c->sw.nccl, "2.27.3");
    snprintf(c->pair_method, sizeof c->pair_method, "cuda-peer-copy");
    c->devices[1].copy_Bps = (pp_measure){2e12, 1.9e12, 2.1e12, 5};
    pp_cluster_fingerprint(c);
    return c;
}

Test(probes_cluster, write_then_read_keeps_every_field)
{
    pp_cluster *c = synthetic();
    char *path = tmp_path("cluster.json");
    cr_assert_eq(pp_cluster_write(c, path), PP_OK, "%s", pp_err_msg());
    pp_cluster *r = NULL;
    cr_assert_eq(pp_cluster_read(path, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(r->fingerprint, c->fingerprint);
    cr_assert_str_eq(r->created, c->created);
    cr_assert_eq(r->n_devices, 2);
    cr_assert_eq(r->devices[1].mem_bytes, 17071734784.0);
    cr_assert_eq(r->devices[1].n_gemm, 2);
    cr_assert_str_eq(r->devices[1].gemm[1].dtype, "fp32");
    cr_assert_eq(r->devices[1].gemm[1].flops.max, 2.1e13);
    cr_assert_eq(r->links[PP_LINK_INTRA].points[1].seconds.median, 3.3e-5);
    cr_assert_eq(r->links[PP_LINK_INTER].present, 0);
    cr_assert_eq(r->allreduce.ranks, 2);
    cr_assert_eq(r->pair_bw_Bps[2], 3.8e10);
    cr_assert_str_eq(r->pair_method, "cuda-peer-copy");
    cr_assert_eq(r->devices[1].copy_Bps.min, 1.9e12);
    cr_assert_str_eq(r->sw.env[0].name, "NCCL_P2P_LEVEL");
    cr_assert_str_eq(r->sw.env[0].value, "NVL");
    const pp_topo *t = r->nodes[0].topo;
    cr_assert_not_null(t);
    cr_assert_eq(t->n_gpus, 4);
    cr_assert_eq(t->gpus[3].numa, 1);
    cr_assert_eq(t->nvlink_MBps[2 * 4 + 3], 40000);
    cr_assert_eq(r->nodes[0].memcpy_Bps.samples, 5);
    /* the fingerprint recomputed from what was read is the one written */
    pp_cluster_fingerprint(r);
    cr_assert_str_eq(r->fingerprint, c->fingerprint);
    pp_cluster_destroy(r);
    pp_cluster_destroy(c);
    free(path);
}

/* Serialises the synthetic cluster, edits one field with `edit`, and returns the read error. */
static const char *read_error_after(void (*edit)(json_t *root))
{
    pp_cluster *c = synthetic(), *r = NULL;
    char *text;
    cr_assert_eq(pp_cluster_to_json(c, &text), PP_OK);
    json_t *root = json_loads(text, 0, NULL);
    cr_assert_not_null(root);
    edit(root);
    char *bad = json_dumps(root, 0);
    cr_assert_eq(pp_cluster_from_json(bad, "c.json", &r), PP_ERR_PARSE, "accepted the edit");
    cr_assert_null(r);
    free(bad);
    free(text);
    json_decref(root);
    pp_cluster_destroy(c);
    return pp_err_text();
}

static void mem_as_string(json_t *root)
{
    json_object_set_new(json_array_get(json_object_get(root, "devices"), 1), "mem_bytes",
                        json_string("80GB"));
}
static void no_fingerprint(json_t *root)
{
    json_object_del(root, "fingerprint");
}
static void future_version(json_t *root)
{
    json_object_set_new(root, "schema_version", json_integer(7));
}
static void bad_matrix(json_t *root)
{
    json_array_remove(json_object_get(json_object_get(root, "pairwise"), "bandwidth_Bps"), 1);
}
static void bad_sweep_time(json_t *root)
{
    json_t *l = json_object_get(json_object_get(root, "links"), "intra_node");
    json_t *p = json_array_get(json_object_get(l, "sweep"), 1);
    json_object_set_new(json_object_get(p, "seconds"), "median", json_real(-1));
}
static void bad_source(json_t *root)
{
    json_object_set_new(json_array_get(json_object_get(root, "devices"), 0), "source",
                        json_string("guessed"));
}
static void bad_numa(json_t *root)
{
    json_t *topo = json_object_get(json_array_get(json_object_get(root, "nodes"), 0), "topology");
    json_object_set_new(json_array_get(json_object_get(topo, "gpus"), 2), "numa", json_true());
}

/* issue 18, finding 13: accepted, then "predicted step time inf" */
static void huge_alpha(json_t *root)
{
    json_object_set_new(json_object_get(json_object_get(root, "links"), "intra_node"), "alpha_s",
                        json_real(1e308));
}
static void tiny_gemm(json_t *root)
{
    json_object_set_new(json_array_get(json_object_get(root, "devices"), 0), "gemm_flops",
                        json_real(1e-286));
}
static void huge_bandwidth(json_t *root)
{
    json_object_set_new(json_object_get(json_object_get(root, "links"), "intra_node"), "beta_Bps",
                        json_real(1e300));
}

Test(probes_cluster, physical_quantities_out_of_any_sane_range_are_refused)
{
    cr_expect(strstr(read_error_after(huge_alpha),
                     "c.json: field \"links.intra_node.alpha_s\": expected a number in 0..10, "
                     "got 1e308"),
              "%s", pp_err_text());
    cr_expect(strstr(read_error_after(tiny_gemm), "c.json: field \"devices[0].gemm_flops\": "
                                                  "expected 0 or a number >= 1000, got 1"),
              "%s", pp_err_text());
    cr_expect(strstr(read_error_after(huge_bandwidth), "links.intra_node.beta_Bps"), "%s",
              pp_err_text());
}

Test(probes_cluster, reader_names_file_field_expectation_and_value)
{
    cr_assert_str_eq(
        read_error_after(mem_as_string),
        "c.json: field \"devices[1].mem_bytes\": expected a number >= 0, got \"80GB\"");
    cr_assert_str_eq(read_error_after(no_fingerprint),
                     "c.json: field \"fingerprint\": expected a string of at most 79 characters, "
                     "got nothing (missing)");
    cr_assert_str_eq(read_error_after(future_version),
                     "c.json: field \"schema_version\": expected 1 (this pptune reads version 1 "
                     "only), got 7");
    cr_assert_str_eq(read_error_after(bad_matrix),
                     "c.json: field \"pairwise.bandwidth_Bps\": expected an array of 2 rows, got "
                     "[[0.0,36000000000.0]]");
    cr_assert_str_eq(read_error_after(bad_sweep_time),
                     "c.json: field \"links.intra_node.sweep[1].seconds.median\": expected a "
                     "number >= 0, got -1.0");
    cr_assert_str_eq(read_error_after(bad_source),
                     "c.json: field \"devices[0].source\": expected \"probed\" or \"preset\", got "
                     "\"guessed\"");
    cr_assert_str_eq(read_error_after(bad_numa),
                     "c.json: field \"nodes[0].topology.gpus[2].numa\": expected an integer >= "
                     "-1, got true");
}

Test(probes_cluster, reader_rejects_non_json_with_position)
{
    pp_cluster *r = NULL;
    cr_assert_eq(pp_cluster_from_json("{\"schema\": ", "x.json", &r), PP_ERR_PARSE);
    cr_assert_eq(strncmp(pp_err_text(), "x.json:1:", 9), 0, "%s", pp_err_text());
    cr_assert_eq(pp_cluster_read("/nonexistent/c.json", &r), PP_ERR_NOTFOUND);
}

Test(probes_cluster, preset_round_trips_through_a_file)
{
    pp_cluster *c = preset("dgx-h100", 3), *r = NULL;
    char *path = tmp_path("preset.json");
    cr_assert_eq(pp_cluster_write(c, path), PP_OK);
    cr_assert_eq(pp_cluster_read(path, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(r->n_devices, 24);
    cr_assert_null(r->pair_bw_Bps);
    cr_assert_null(r->nodes[2].topo);
    cr_assert_str_eq(r->links[PP_LINK_INTER].method, c->links[PP_LINK_INTER].method);
    pp_cluster_fingerprint(r);
    cr_assert_str_eq(r->fingerprint, c->fingerprint);
    pp_cluster_destroy(r);
    pp_cluster_destroy(c);
    free(path);
}

Test(probes_cluster, median_and_spread)
{
    double odd[] = {5, 1, 3}, even[] = {4, 1, 3, 2};
    pp_measure m = pp_measure_of(odd, 3);
    cr_assert_eq(m.median, 3);
    cr_assert_eq(m.min, 1);
    cr_assert_eq(m.max, 5);
    cr_assert_eq(m.samples, 3);
    cr_assert_eq(pp_measure_of(even, 4).median, 2.5);
}

Test(probes_cluster, alpha_beta_fit_recovers_latency_and_bandwidth)
{
    pp_xfer_point p[12];
    double alpha = 2e-6, beta = 1.2e10;
    for (int i = 0; i < 12; i++) {
        p[i].bytes = 8.0 * pow(4, i);
        p[i].seconds = (pp_measure){alpha + p[i].bytes / beta, 0, 0, 1};
    }
    double a, b;
    cr_assert_eq(pp_fit_alpha_beta(p, 12, &a, &b), PP_OK, "%s", pp_err_msg());
    cr_assert_float_eq(a, alpha, 1e-12);
    cr_assert_float_eq(b / beta, 1.0, 1e-9);
    cr_assert_eq(pp_fit_alpha_beta(p, 1, &a, &b), PP_ERR_INVALID);
    p[1].seconds.median = 0;
    cr_assert_eq(pp_fit_alpha_beta(p, 12, &a, &b), PP_ERR_INVALID);
}

Test(probes_cluster, alpha_beta_fit_follows_the_largest_message_not_the_cache)
{
    /* as measured between threads on a small VM: 2 MiB fits in cache, 16 MiB does not */
    pp_xfer_point p[3] = {
        {8, {7e-6, 0, 0, 1}}, {2 << 20, {77e-6, 0, 0, 1}}, {16 << 20, {10.5e-3, 0, 0, 1}}};
    double a, b;
    cr_assert_eq(pp_fit_alpha_beta(p, 3, &a, &b), PP_OK);
    cr_assert_float_eq(pp_link_time(&(pp_link){.alpha_s = a, .beta_Bps = b}, 16 << 20), 10.5e-3,
                       1e-9, "the largest transfer must be predicted as measured");
    cr_assert_float_eq(a, 7e-6, 1e-8);
}
