/* cmd_probe.c — `pptune probe`: describe the cluster (probe this machine, every node under
 * mpirun/srun, or a preset) as a summary, a JSON document on stdout, and/or a cluster file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"
#include "pp_probe.h"
#include "pp_tune.h"

static void usage(void)
{
    printf(
        "usage: pptune probe [-o FILE] [--quick] [--topology FILE.xml] [--json] [--no-gpu]\n"
        "       pptune probe --preset NAME [--nodes N] [-o FILE] [--json]\n"
        "       pptune probe --show FILE [--json]\n"
        "       pptune probe --allreduce BYTES [--quick] [--json]   (under mpirun/srun)\n\n"
        "Probes this machine (topology through hwloc; GPUs through CUDA/cuBLAS/NCCL where built\n"
        "and present, else the CPU cores the CPU backend uses) and prints a summary; progress\n"
        "goes to stderr. Under mpirun/srun every node is probed and rank 0 prints the whole\n"
        "cluster. Inside a Slurm allocation (salloc, sbatch; not in a job step) pptune probe\n"
        "starts that itself: one rank on every node of the allocation (srun), gathered.\n\n"
        "  -o FILE            write the cluster description (JSON) to FILE, atomically\n"
        "                     (-o -: to stdout, as --json)\n"
        "  --json             print the JSON on stdout instead of the summary\n"
        "  --quick            fewer shapes, sizes and repeats (under 30 s on a laptop)\n"
        "  --topology FILE    describe a recorded hwloc topology (lstopo FILE.xml) instead\n"
        "                     of this machine's; measurements still run here\n"
        "  --no-gpu           skip the GPU probes\n"
        "  --no-probe-nodes   inside an allocation, probe this node only\n"
        "  --allreduce BYTES  time an MPI all-reduce of BYTES per rank over the launcher's\n"
        "                     ranks (the data-parallel gradient sync); rank 0 prints it\n"
        "  --require-gpu      fail (exit 1, \"no CUDA device: ...\") instead of describing CPUs\n"
        "  --preset NAME      describe a cluster from public specifications instead:\n"
        "                     ");
    for (const char *const *n = pp_preset_names(); *n; n++)
        printf("%s%s", *n, n[1] ? ", " : "\n");
    printf("  --nodes N          nodes of the preset (default 1)\n"
           "  --show FILE        read a cluster file (validating it) and print it\n\n"
           "CUDA/NCCL, MPI and OpenBLAS are loaded when needed, as plugins pptune-gpu.so,\n"
           "pptune-mpi.so and pptune-blas.so from $PPTUNE_PLUGIN_DIR (alone, when set), else\n"
           "<folder of pptune>/../lib/pptune. One that cannot be loaded is named with the\n"
           "folders searched: without the GPU plugin (or its CUDA libraries) the probe describes\n"
           "the CPU cores; without pptune-blas.so it cannot measure them and exits 1.\n");
}

static void progress(void *ctx, const char *msg)
{
    const char *rank = ctx;
    if (rank)
        fprintf(stderr, "[rank %s] %s\n", rank, msg);
    else
        fprintf(stderr, "probe: %s\n", msg);
}

typedef struct {
    const char *out, *preset, *show;
    int json, nodes, require_gpu, no_probe_nodes;
    double allreduce; /* bytes; 0: not asked */
    pp_probe_opts opts;
} probe_args;

static int parse(int argc, char **argv, probe_args *a)
{
    enum { TOPOLOGY = PP_CLI_LOCAL, PRESET, SHOW, NODES, QUICK, JSON, NO_GPU, REQUIRE_GPU,
           NO_PROBE_NODES, ALLREDUCE };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"topology", required_argument, NULL, TOPOLOGY},
        {"preset", required_argument, NULL, PRESET},
        {"show", required_argument, NULL, SHOW},
        {"nodes", required_argument, NULL, NODES},
        {"quick", no_argument, NULL, QUICK},
        {"json", no_argument, NULL, JSON},
        {"no-gpu", no_argument, NULL, NO_GPU},
        {"require-gpu", no_argument, NULL, REQUIRE_GPU},
        {"no-probe-nodes", no_argument, NULL, NO_PROBE_NODES},
        {"allreduce", required_argument, NULL, ALLREDUCE},
        {0},
    };
    pp_cli p;
    pp_cli_init(&p, "probe", argc, argv, "ho:", longopts);
    for (int c; (c = pp_cli_next(&p)) != -1;) {
        const char *v = p.arg;
        switch (c) {
        case PP_CLI_BAD: return 2;
        case 'h': usage(); return -1;
        case 'o': a->out = pp_cli_output_path(v), a->json |= !a->out; break; /* -: --json */
        case TOPOLOGY: a->opts.topology_xml = v; break;
        case PRESET: a->preset = v; break;
        case SHOW: a->show = v; break;
        case NODES:
            if (!pp_cmd_parse_int("probe", p.name, v, 1, &a->nodes))
                return 2;
            break;
        case QUICK: a->opts.quick = 1; break;
        case JSON: a->json = 1; break;
        case NO_GPU: a->opts.no_gpu = 1; break;
        case REQUIRE_GPU: a->require_gpu = 1; break;
        case NO_PROBE_NODES: a->no_probe_nodes = 1; break;
        case ALLREDUCE:
            if (!pp_cmd_parse_double("probe", p.name, v, 4, &a->allreduce))
                return 2;
            break;
        }
    }
    int rc = pp_cli_no_words(&p);
    if (rc >= 0)
        return rc;
    if (a->nodes != 1 && !a->preset)
        return pp_cmd_usage_error("probe",
                                  "--nodes %d needs --preset (a probe counts the nodes "
                                  "mpirun/srun started)",
                                  a->nodes);
    if (a->require_gpu && (a->opts.no_gpu || a->preset || a->show))
        return pp_cmd_usage_error("probe", "--require-gpu probes this machine's GPUs: it cannot "
                                           "be combined with --no-gpu, --preset or --show");
    if (a->allreduce > 0 && (a->preset || a->show || a->out || a->opts.topology_xml))
        return pp_cmd_usage_error("probe", "--allreduce times MPI across the launcher's ranks: "
                                           "it cannot be combined with --preset, --show, -o or "
                                           "--topology");
    if (a->preset && (a->opts.topology_xml || a->opts.quick || a->show))
        return pp_cmd_usage_error("probe", "--preset cannot be combined with --topology, "
                                           "--quick or --show");
    return 0;
}

static int emit(const probe_args *a, const pp_cluster *c)
{
    if (a->out) {
        pp_status st = pp_cluster_write(c, a->out);
        if (st != PP_OK)
            return pp_cmd_fail("probe", st);
        fprintf(stderr, "probe: wrote %s (fingerprint %s)\n", a->out, c->fingerprint);
    }
    if (a->json) {
        char *text;
        pp_status st = pp_cluster_to_json(c, &text);
        if (st != PP_OK)
            return pp_cmd_fail("probe", st);
        printf("%s\n", text);
        free(text);
    } else {
        pp_cluster_print(c, stdout);
    }
    return 0;
}

/* --allreduce: rank 0 prints the timing (JSON with --json, which alloc_probe.c reads). */
static int allreduce(const probe_args *a)
{
    pp_allreduce_timing t;
    pp_status st = pp_probe_allreduce(a->allreduce, a->opts.quick, &t);
    if (st != PP_OK)
        return pp_cmd_fail("probe", st);
    if (!t.is_root)
        return 0;
    double med = t.seconds.median, busbw = t.bytes / med * 2.0 * (t.ranks - 1) / t.ranks;
    if (a->json)
        printf("{\"ranks\": %d, \"nodes\": %d, \"bytes\": %.0f, \"seconds\": %.9g, "
               "\"seconds_min\": %.9g, \"seconds_max\": %.9g, \"busbw_Bps\": %.6g, "
               "\"mpi\": \"%s\"}\n",
               t.ranks, t.nodes, t.bytes, med, t.seconds.min, t.seconds.max, busbw, t.mpi);
    else
        printf("all-reduce of %.0f B over %d ranks on %d node%s: %.3g ms (median of %d; "
               "min %.3g, max %.3g), busbw %.3g GB/s (%s)\n",
               t.bytes, t.ranks, t.nodes, t.nodes == 1 ? "" : "s", med * 1e3, t.seconds.samples,
               t.seconds.min * 1e3, t.seconds.max * 1e3, busbw / 1e9, t.mpi);
    return 0;
}

/* Inside a Slurm allocation but not in one of its job steps (salloc's shell, a batch script):
 * the nodes are the allocation's, and a probe of them all is one srun step away. */
static int in_allocation_not_step(void)
{
    return getenv("SLURM_JOB_ID") && !getenv("SLURM_STEP_ID") && !getenv("SLURM_STEPID") &&
           !getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE");
}

static pp_status probe_allocation(const probe_args *a, pp_cluster **c)
{
    pp_tune_alloc al;
    PP_TRY(pp_tune_alloc_detect(NULL, &al));
    char self[4096], source[300];
    PP_TRY(pp_tune_self_path(self, sizeof self));
    fprintf(stderr, "probe: every node of the allocation (%s), one %s rank each...\n", al.nodes,
            al.launcher);
    PP_TRY(pp_tune_probe_nodes(&al, self, a->opts.quick, PP_TUNE_PROBE_NODES_TIMEOUT_S, c, source,
                               sizeof source));
    fprintf(stderr, "probe: %s\n", source);
    char why[300];
    if (pp_tune_nodes_differ(*c, PP_TUNE_NODES_TOLERANCE, why, sizeof why))
        fprintf(stderr, "probe: warning: the nodes differ: %s (the search plans with the "
                        "slowest and smallest)\n",
                why);
    return PP_OK;
}

int pp_cmd_probe(int argc, char **argv)
{
    probe_args a = {.nodes = 1};
    int rc = parse(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (a.allreduce > 0)
        return allreduce(&a);
    pp_cluster *c = NULL;
    pp_status st;
    if (a.preset) {
        st = pp_cluster_load_preset(a.preset, a.nodes, &c);
    } else if (a.show) {
        st = pp_cluster_read(a.show, &c);
    } else {
        char why[160];
        if (a.require_gpu && !pp_probe_gpu_available(why, sizeof why)) {
            fprintf(stderr, "pptune probe: %s (--require-gpu)\n", why);
            return 1;
        }
        if (!a.no_probe_nodes && !a.opts.topology_xml && in_allocation_not_step()) {
            double t0 = pp_now();
            st = probe_allocation(&a, &c);
            if (st == PP_OK)
                fprintf(stderr, "probe: done in %.1f s\n", pp_now() - t0);
            if (st != PP_OK)
                return pp_cmd_fail("probe", st);
            rc = emit(&a, c);
            pp_cluster_destroy(c);
            return rc;
        }
        a.opts.progress = progress;
        pp_launch_info li;
        char rank[16];
        if (pp_launch_detect(&li) == PP_OK && li.size > 1) { /* else pp_probe_run says why */
            snprintf(rank, sizeof rank, "%d", li.rank);
            a.opts.progress_ctx = rank;
        }
        double t0 = pp_now();
        st = pp_probe_run(&a.opts, &c);
        if (st == PP_OK && c)
            fprintf(stderr, "probe: done in %.1f s\n", pp_now() - t0);
    }
    if (st != PP_OK)
        return pp_cmd_fail("probe", st);
    if (!c) /* an MPI rank other than 0: rank 0 reports */
        return 0;
    rc = emit(&a, c);
    pp_cluster_destroy(c);
    return rc;
}
