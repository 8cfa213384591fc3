/* probe.c — pp_probe_run: describe this node (topology, GPUs or else CPU cores, links), or,
 * under an MPI launcher, every node through mpi_gather.c.
 *
 * Without a GPU the devices are the CPU cores the CPU backend would run ranks on (one rank per
 * core, one BLAS thread each): each gets an equal share of usable memory and the GEMM rate
 * measured on one core (the cores are alike; measuring each would only add time).
 * Not here: the measurements themselves (cpu_measure.c, gpu_probe.cu), JSON, printing.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe_impl.h"

extern char **environ;

/* Versions, and the NCCL_* knobs that change what NCCL measures (NCCL_P2P_LEVEL,
 * NCCL_NET_GDR_LEVEL, NCCL_BUFFSIZE, ...: NCCL's user guide, "Environment Variables",
 * docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html). */
static void software(pp_software *sw)
{
    snprintf(sw->hwloc, sizeof sw->hwloc, "%s", PP_HWLOC_VERSION);
    snprintf(sw->blas, sizeof sw->blas, "%s", pp_cpu_blas_config());
    pp_gpu_versions(sw);
    for (char **e = environ; *e && sw->n_env < PP_MAX_ENV; e++) {
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : 0;
        if (strncmp(*e, "NCCL_", 5) || !eq || len >= sizeof sw->env[0].name)
            continue;
        snprintf(sw->env[sw->n_env].name, sizeof sw->env[0].name, "%.*s", (int)len, *e);
        snprintf(sw->env[sw->n_env].value, sizeof sw->env[0].value, "%s", eq + 1);
        sw->n_env++;
    }
}

static pp_status add_cpu_devices(const pp_probe_opts *o, pp_cluster *c, int node,
                                 const pp_topo *local)
{
    double mem;
    pp_gemm_point *gemm = NULL;
    int n_gemm = 0, cores = 0, first = c->n_devices, *cpus = NULL;
    PP_TRY(pp_cpu_usable_memory(&mem));
    PP_TRY(pp_topo_local_cpus(&cpus, &cores));
    pp_status st = pp_cpu_gemm_sweep(o, &gemm, &n_gemm);
    if (st == PP_OK && cores < 1)
        st = PP_ERR(PP_ERR_DEVICE, "hwloc finds no core this process may run on");
    for (int i = 0; i < cores && st == PP_OK; i++) {
        pp_device d = {.kind = "cpu",
                       .node = node,
                       .local_index = i,
                       .mem_bytes = mem / cores,
                       .mem_free_bytes = mem / cores,
                       .gemm_flops = gemm[n_gemm - 1].flops.median,
                       .gemm_dtype = "fp32",
                       .n_gemm = n_gemm,
                       .gemm = gemm,
                       .copy_Bps = c->nodes[node].memcpy_Bps,
                       .source = PP_SRC_PROBED};
        snprintf(d.name, sizeof d.name, "%.58s core",
                 local->cpu_model[0] ? local->cpu_model : "CPU");
        st = pp_cluster_add_device(c, &d, NULL);
    }
    free(gemm);
    if (st == PP_OK && cores > 1)
        st = pp_cpu_thread_links(o, cpus, cores, c, first);
    free(cpus);
    return st == PP_OK ? PP_OK : pp_err_trace(st, __FILE__, __LINE__);
}

static pp_status describe_node(const pp_probe_opts *o, pp_cluster *c, const pp_topo *local)
{
    char host[64] = "";
    pp_launch_node_name(host, sizeof host);
    int node;
    PP_TRY(pp_cluster_add_node(c, host, &node));
    PP_TRY(o->topology_xml ? pp_probe_topology(o->topology_xml, &c->nodes[node].topo)
                           : pp_topo_copy(local, &c->nodes[node].topo));
    software(&c->sw);
    PP_TRY(pp_cpu_memcpy(o, &c->nodes[node].memcpy_Bps));
    char why[160] = "GPU probes not run: --no-gpu";
    if (!o->no_gpu && pp_probe_gpu_available(why, sizeof why)) {
        PP_TRY(pp_gpu_probe_node(o, c, node));
    } else {
        pp_probe_say(o, "%s: describing the CPU cores instead", why);
        snprintf(c->note, sizeof c->note, "no GPU (%.60s): devices are CPU cores", why);
        PP_TRY(add_cpu_devices(o, c, node, local));
    }
    if (o->topology_xml) {
        size_t len = strlen(c->note);
        snprintf(c->note + len, sizeof c->note - len, "%stopology from %s; figures measured here",
                 len ? "; " : "", o->topology_xml);
    }
    return PP_OK;
}

/* What one node leader runs: a one-node cluster describing this machine. */
static pp_status probe_this_node(const pp_probe_opts *o, pp_cluster **out)
{
    pp_topo *local = NULL;
    pp_cluster *c = NULL;
    pp_status st = pp_probe_topology(NULL, &local);
    if (st == PP_OK)
        st = pp_cluster_create(&c);
    if (st == PP_OK) {
        snprintf(c->origin, sizeof c->origin, "probed");
        st = describe_node(o, c, local);
    }
    pp_topo_destroy(local);
    if (st != PP_OK) {
        pp_cluster_destroy(c);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    pp_cluster_fingerprint(c);
    *out = c;
    return PP_OK;
}

pp_status pp_probe_run(const pp_probe_opts *opts, pp_cluster **out)
{
    static const pp_probe_opts none = {0};
    const pp_probe_opts *o = opts ? opts : &none;
    *out = NULL;
    pp_launch_info li;
    PP_TRY(pp_launch_detect(&li));
    if (li.size > 1)
        PP_TRY(pp_mpi_probe(o, probe_this_node, out));
    else
        PP_TRY(probe_this_node(o, out));
    return PP_OK;
}
