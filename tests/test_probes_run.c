/* test_probes_run.c — probing this machine (CPU probes always; GPU probes where a device
 * exists), and `pptune probe` as a user runs it, including under mpirun. No timed assertions:
 * figures must exist, be positive and carry their spread. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_test_run.h"

#include "pp_probe.h"

#define PPTUNE PP_BINARY_DIR "/tuner/pptune"
#define FIX(name) PP_FIXTURES_DIR "/hwloc/" name

static void check_measure(const char *what, pp_measure m)
{
    cr_assert_gt(m.samples, 0, "%s: no samples", what);
    cr_assert(m.min > 0 && m.min <= m.median && m.median <= m.max, "%s: min %g median %g max %g",
              what, m.min, m.median, m.max);
}

static pp_cluster *probe_quick(void)
{
    pp_probe_opts o = {.quick = 1, .no_gpu = 1};
    pp_cluster *c = NULL;
    cr_assert_eq(pp_probe_run(&o, &c), PP_OK, "%s", pp_err_msg());
    cr_assert_not_null(c);
    return c;
}

Test(probes_run, cpu_devices_carry_measured_figures, .timeout = 300)
{
    pp_cluster *c = probe_quick();
    cr_assert_eq(c->n_nodes, 1);
    cr_assert_geq(c->n_devices, 1);
    cr_assert_not_null(c->nodes[0].topo);
    cr_assert_leq(c->n_devices, c->nodes[0].topo->cores, "one CPU device per usable core");
    check_measure("memcpy", c->nodes[0].memcpy_Bps);
    for (int i = 0; i < c->n_devices; i++) {
        const pp_device *d = &c->devices[i];
        cr_assert_str_eq(d->kind, "cpu");
        cr_assert_gt(d->mem_bytes, 0);
        cr_assert_eq(d->source, PP_SRC_PROBED);
        cr_assert_geq(d->n_gemm, 2, "a sweep of shapes");
        for (int g = 0; g < d->n_gemm; g++)
            check_measure("sgemm", d->gemm[g].flops);
        cr_assert_eq(d->gemm_flops, d->gemm[d->n_gemm - 1].flops.median);
    }
    if (c->n_devices > 1) {
        const pp_link *l = pp_cluster_link(c, 0, 1);
        cr_assert_not_null(l, "two cores: a thread-to-thread link must be measured");
        cr_assert_gt(l->beta_Bps, 0);
        cr_assert_geq(l->alpha_s, 0);
        cr_assert_geq(l->n_points, 5);
        for (int i = 0; i < l->n_points; i++)
            check_measure("thread transfer", l->points[i].seconds);
        int n = c->n_devices;
        cr_assert_not_null(c->pair_bw_Bps, "pinned core pairs give a pairwise matrix");
        cr_assert_gt(c->pair_bw_Bps[0 * n + 1], 0);
        cr_assert_eq(c->pair_bw_Bps[0 * n + 1], c->pair_bw_Bps[1 * n + 0], "ping-pong: symmetric");
        cr_assert_eq(c->pair_bw_Bps[0], 0, "diagonal");
    }
    cr_assert(strstr(c->note, "no GPU") != NULL, "note: %s", c->note);
    cr_assert_str_eq(c->sw.hwloc, "2.9.0");
    pp_cluster_destroy(c);
}

Test(probes_run, fingerprint_is_stable_across_runs, .timeout = 300)
{
    pp_cluster *a = probe_quick(), *b = probe_quick();
    cr_assert_str_eq(a->fingerprint, b->fingerprint);
    pp_cluster_destroy(a);
    pp_cluster_destroy(b);
}

Test(probes_run, gpu_probes_where_a_device_exists, .timeout = 300)
{
    char why[160];
    if (!pp_probe_gpu_available(why, sizeof why))
        cr_skip_test("GPU probes skipped: %s", why);
    pp_probe_opts o = {.quick = 1};
    pp_cluster *c = NULL;
    cr_assert_eq(pp_probe_run(&o, &c), PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(c->devices[0].kind, "gpu");
    cr_assert_gt(c->devices[0].mem_bytes, 0);
    check_measure("cuBLAS GEMM", c->devices[0].gemm[0].flops);
    cr_assert_neq(c->sw.cuda_runtime[0], '\0');
    pp_cluster_destroy(c);
}

Test(probes_run, cli_preset_json_reads_back)
{
    char *out;
    const char *path = "/tmp/pp_probe_cli_preset.json";
    cr_assert_eq(pp_test_run_merged(
                     PPTUNE " probe --preset hgx-h200 --nodes 4 -o /tmp/pp_probe_cli_preset.json"
                            " --json",
                     &out),
                 0, "%s", out);
    pp_cluster *c = NULL;
    cr_assert_eq(pp_cluster_read(path, &c), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(c->n_devices, 32);
    cr_assert(strstr(out, "\"origin\": \"preset hgx-h200\"") != NULL, "%.300s", out);
    pp_cluster_destroy(c);
    free(out);
    unlink(path);
}

Test(probes_run, cli_unknown_preset_is_a_usage_error)
{
    char *out;
    cr_assert_eq(pp_test_run_merged(PPTUNE " probe --preset dgx-z9", &out), 2, "%s", out);
    cr_assert(strstr(out, "known presets: dgx-a100-80g, dgx-h100, hgx-h200") != NULL, "%s", out);
    free(out);
    cr_assert_eq(pp_test_run_merged(PPTUNE " probe --nodes 4", &out), 2,
                 "--nodes without --preset: %s", out);
    free(out);
}

Test(probes_run, cli_recorded_topology_summary_and_file, .timeout = 300)
{
    char *out;
    cr_assert_eq(pp_test_run_merged(PPTUNE " probe --quick --no-gpu --topology " FIX(
                                        "power8gpudistances.xml") " -o /tmp/pp_probe_cli_p8.json",
                                    &out),
                 0, "%s", out);
    cr_assert(strstr(out, "GPU cuda3") != NULL, "%s", out);
    cr_assert(strstr(out, "NVLink bandwidth") != NULL, "%s", out);
    cr_assert(strstr(out, "describing the CPU cores") != NULL, "no-GPU message missing: %s", out);
    cr_assert(strstr(out, "intra_node") != NULL, "%s", out);
    free(out);
    cr_assert_eq(pp_test_run_merged(PPTUNE " probe --show /tmp/pp_probe_cli_p8.json", &out), 0,
                 "%s", out);
    cr_assert(strstr(out, "topology from") != NULL, "%s", out);
    free(out);
    cr_assert_eq(pp_test_run_merged(
                     "echo '{\"schema\": \"pptune-cluster\"}' > /tmp/pp_probe_bad.json && " PPTUNE
                     " probe --show /tmp/pp_probe_bad.json",
                     &out),
                 2, "%s", out);
    cr_assert(strstr(out, "/tmp/pp_probe_bad.json: field \"schema_version\": expected an integer "
                          ">= 1, got nothing (missing)") != NULL,
              "%s", out);
    free(out);
    unlink("/tmp/pp_probe_cli_p8.json");
    unlink("/tmp/pp_probe_bad.json");
}

Test(probes_run, mpirun_two_ranks_gathers_on_rank_0, .timeout = 600)
{
    char *out;
    if (pp_test_run_merged("command -v mpirun", &out) != 0) {
        free(out);
        cr_skip_test("mpirun not installed");
    }
    free(out);
    /* Open MPI keeps allocations until exit: leak checking would fail the ranks under ASan */
    int rc = pp_test_run_merged(
        "ASAN_OPTIONS=detect_leaks=0 mpirun --oversubscribe --allow-run-as-root -np 2 " PPTUNE
        " probe --quick --no-gpu -o /tmp/pp_probe_mpi.json",
        &out);
    if (rc != 0 && strstr(out, "built without MPI")) {
        free(out);
        cr_skip_test("pptune built without MPI");
    }
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "all 2 ranks on host") != NULL, "the one-host caveat is missing: %s",
              out);
    free(out);
    pp_cluster *c = NULL;
    cr_assert_eq(pp_cluster_read("/tmp/pp_probe_mpi.json", &c), PP_OK, "%s", pp_err_msg());
    cr_assert(strstr(c->origin, "mpi, 2 ranks, 1 node") != NULL, "%s", c->origin);
    cr_assert_eq(c->n_nodes, 1, "both ranks are on one host: one node");
    cr_assert(c->links[PP_LINK_INTER].present, "the MPI ping-pong was not recorded");
    cr_assert_gt(c->links[PP_LINK_INTER].beta_Bps, 0);
    cr_assert_neq(c->sw.mpi[0], '\0');
    pp_cluster_destroy(c);
    unlink("/tmp/pp_probe_mpi.json");
}

Test(probes_run, mpirun_times_the_data_parallel_all_reduce_on_rank_0, .timeout = 600)
{
    char *out;
    if (pp_test_run_merged("command -v mpirun", &out) != 0) {
        free(out);
        cr_skip_test("mpirun not installed");
    }
    free(out);
    cr_assert_eq(pp_test_run_merged(PPTUNE " probe --allreduce 2", &out), 2, "%s", out);
    cr_assert(strstr(out, "--allreduce") && strstr(out, "expects a number >= 4"), "%s", out);
    free(out);
    cr_assert_eq(pp_test_run_merged(PPTUNE " probe --allreduce 4096 -o /tmp/x.json", &out), 2,
                 "%s", out);
    free(out);
    /* 100 000 B is not a whole number of floats: the probe times 25 000 of them */
    int rc = pp_test_run_merged("ASAN_OPTIONS=detect_leaks=0 mpirun --oversubscribe "
                                "--allow-run-as-root -np 2 " PPTUNE
                                " probe --allreduce 100002 --json --quick 2>/dev/null",
                                &out);
    if (rc != 0 && strstr(out, "built without MPI")) {
        free(out);
        cr_skip_test("pptune built without MPI");
    }
    cr_assert_eq(rc, 0, "%s", out);
    /* one line, from rank 0 only */
    cr_assert(strstr(out, "{\"ranks\": 2, \"nodes\": 1, \"bytes\": 100000, \"seconds\": ") == out,
              "%s", out);
    cr_assert_null(strstr(out + 1, "{\"ranks\""), "printed by more than rank 0: %s", out);
    double s = atof(strstr(out, "\"seconds\": ") + 11);
    cr_assert(s > 0 && s < 60, "%s", out);
    free(out);
}
