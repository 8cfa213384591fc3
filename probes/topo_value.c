/* topo_value.c — the pp_topo value without hwloc: freeing, copying, naming PCI paths, printing.
 * Apart from topology.c so that the plugins (plugin.h), which copy and serialise clusters, link
 * no hwloc. Not here: reading a topology (topology.c).
 */
#include <stdlib.h>
#include <string.h>

#include "pp_probe.h"

void pp_topo_destroy(pp_topo *t)
{
    if (!t)
        return;
    free(t->numa);
    free(t->gpus);
    free(t->nics);
    free(t->nvlink_MBps);
    free(t);
}

static void *dup_array(const void *src, size_t n, size_t size, int *ok)
{
    void *p = pp_calloc(n + 1, size);
    if (!p)
        *ok = 0;
    else if (src && n)
        memcpy(p, src, n * size);
    return p;
}

pp_status pp_topo_copy(const pp_topo *t, pp_topo **out)
{
    int ok = 1;
    pp_topo *c = pp_calloc(1, sizeof *c);
    if (!c)
        return PP_ERR_NOMEM;
    *c = *t;
    c->numa = dup_array(t->numa, (size_t)t->n_numa, sizeof *t->numa, &ok);
    c->gpus = dup_array(t->gpus, (size_t)t->n_gpus, sizeof *t->gpus, &ok);
    c->nics = dup_array(t->nics, (size_t)t->n_nics, sizeof *t->nics, &ok);
    c->nvlink_MBps =
        t->nvlink_MBps
            ? dup_array(t->nvlink_MBps, (size_t)t->n_gpus * (size_t)t->n_gpus, sizeof(double), &ok)
            : NULL;
    if (!ok) {
        pp_topo_destroy(c);
        return PP_ERR_NOMEM;
    }
    *out = c;
    return PP_OK;
}

const char *pp_pci_path_name(pp_pci_path p)
{
    static const char *names[] = {"PIX", "PXB", "PHB", "NODE", "SYS", "unknown"};
    return (unsigned)p <= PP_PATH_UNKNOWN ? names[p] : "unknown";
}

void pp_topo_print(const pp_topo *t, FILE *fp)
{
    fprintf(fp, "machine %s (%s%s%s): %d socket%s, %d cores, %d PUs, %.1f GB\n",
            t->hostname[0] ? t->hostname : "?", t->arch[0] ? t->arch : "?",
            t->cpu_model[0] ? ", " : "", t->cpu_model, t->sockets, t->sockets == 1 ? "" : "s",
            t->cores, t->pus, t->mem_bytes / 1e9);
    for (int i = 0; i < t->n_numa; i++) {
        fprintf(fp, "  NUMA %d: %.1f GB\n", t->numa[i].os_index, t->numa[i].mem_bytes / 1e9);
        for (int g = 0; g < t->n_gpus; g++) {
            const pp_topo_gpu *x = &t->gpus[g];
            if (x->numa != t->numa[i].os_index)
                continue;
            fprintf(fp, "    GPU %-6s %s  %s", x->name, x->pci, x->model[0] ? x->model : "?");
            if (x->mem_bytes > 0)
                fprintf(fp, ", %.1f GB", x->mem_bytes / 1e9);
            if (x->nic >= 0)
                fprintf(fp, "  nearest NIC %s (%s)", t->nics[x->nic].name,
                        pp_pci_path_name(x->nic_path));
            fprintf(fp, "\n");
        }
        for (int n = 0; n < t->n_nics; n++)
            if (t->nics[n].numa == t->numa[i].os_index)
                fprintf(fp, "    NIC %-8s %s  %s%s%s\n", t->nics[n].name, t->nics[n].pci,
                        t->nics[n].rdma ? "RDMA" : "Ethernet", t->nics[n].netdevs[0] ? ", " : "",
                        t->nics[n].netdevs);
    }
    for (int g = 0; g < t->n_gpus; g++)
        if (t->gpus[g].numa < 0)
            fprintf(fp, "  GPU %-6s %s (no single NUMA node)\n", t->gpus[g].name, t->gpus[g].pci);
    for (int n = 0; n < t->n_nics; n++)
        if (t->nics[n].numa < 0)
            fprintf(fp, "  NIC %-8s %s (no single NUMA node)\n", t->nics[n].name, t->nics[n].pci);
    if (t->nvlink_MBps) {
        fprintf(fp, "  NVLink bandwidth (GB/s, hwloc NVLinkBandwidth):\n      ");
        for (int b = 0; b < t->n_gpus; b++)
            fprintf(fp, " %7s", t->gpus[b].name);
        fprintf(fp, "\n");
        for (int a = 0; a < t->n_gpus; a++) {
            fprintf(fp, "    %-6s", t->gpus[a].name);
            for (int b = 0; b < t->n_gpus; b++)
                fprintf(fp, " %7.1f", t->nvlink_MBps[a * t->n_gpus + b] / 1e3);
            fprintf(fp, "\n");
        }
    }
}
