/* cmd_probe.c — `pptune probe`: describe the cluster (probe this machine, every node under
 * mpirun/srun, or a preset) as a summary, a JSON document on stdout, and/or a cluster file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "pp_probe.h"

static void usage(void)
{
    printf(
        "usage: pptune probe [-o FILE] [--quick] [--topology FILE.xml] [--json] [--no-gpu]\n"
        "       pptune probe --preset NAME [--nodes N] [-o FILE] [--json]\n"
        "       pptune probe --show FILE [--json]\n\n"
        "Probes this machine (topology through hwloc; GPUs through CUDA/cuBLAS/NCCL where built\n"
        "and present, else the CPU cores the CPU backend uses) and prints a summary; progress\n"
        "goes to stderr. Under mpirun/srun every node is probed and rank 0 prints the whole\n"
        "cluster.\n\n"
        "  -o FILE            write the cluster description (JSON) to FILE, atomically\n"
        "  --json             print the JSON on stdout instead of the summary\n"
        "  --quick            fewer shapes, sizes and repeats (under 30 s on a laptop)\n"
        "  --topology FILE    describe a recorded hwloc topology (lstopo FILE.xml) instead\n"
        "                     of this machine's; measurements still run here\n"
        "  --no-gpu           skip the GPU probes\n"
        "  --require-gpu      fail (exit 1, \"no CUDA device: ...\") instead of describing CPUs\n"
        "  --preset NAME      describe a cluster from public specifications instead:\n"
        "                     ");
    for (const char *const *n = pp_preset_names(); *n; n++)
        printf("%s%s", *n, n[1] ? ", " : "\n");
    printf("  --nodes N          nodes of the preset (default 1)\n"
           "  --show FILE        read a cluster file (validating it) and print it\n");
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
    int json, nodes, require_gpu;
    pp_probe_opts opts;
} probe_args;

static int parse(int argc, char **argv, probe_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = !strcmp(o, "-o") || !strcmp(o, "--topology") || !strcmp(o, "--preset") ||
                    !strcmp(o, "--show");
        if (takes && !v)
            return pp_cmd_usage_error("probe", "%s needs a value", o);
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage();
            return -1;
        } else if (!strcmp(o, "-o")) {
            a->out = v;
        } else if (!strcmp(o, "--topology")) {
            a->opts.topology_xml = v;
        } else if (!strcmp(o, "--preset")) {
            a->preset = v;
        } else if (!strcmp(o, "--show")) {
            a->show = v;
        } else if (!strcmp(o, "--nodes")) {
            if (!pp_cmd_parse_int("probe", o, v, 1, &a->nodes))
                return 2;
        } else if (!strcmp(o, "--quick")) {
            a->opts.quick = 1;
        } else if (!strcmp(o, "--json")) {
            a->json = 1;
        } else if (!strcmp(o, "--no-gpu")) {
            a->opts.no_gpu = 1;
        } else if (!strcmp(o, "--require-gpu")) {
            a->require_gpu = 1;
        } else {
            return pp_cmd_usage_error("probe", "unknown option \"%s\"", o);
        }
        i += takes || !strcmp(o, "--nodes");
    }
    if (a->nodes != 1 && !a->preset)
        return pp_cmd_usage_error("probe",
                                  "--nodes %d needs --preset (a probe counts the nodes "
                                  "mpirun/srun started)",
                                  a->nodes);
    if (a->require_gpu && (a->opts.no_gpu || a->preset || a->show))
        return pp_cmd_usage_error("probe", "--require-gpu probes this machine's GPUs: it cannot "
                                           "be combined with --no-gpu, --preset or --show");
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

int pp_cmd_probe(int argc, char **argv)
{
    probe_args a = {.nodes = 1};
    int rc = parse(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
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
