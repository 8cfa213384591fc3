/* presets.c — clusters described from public specifications, for planning without hardware.
 *
 * Figures from NVIDIA's data sheets and system guides (the A100 Tensor Core GPU data sheet; the
 * H100 Tensor Core GPU data sheet, resources.nvidia.com/en-us-tensor-core; the H200 page,
 * nvidia.com/en-us/data-center/h200; the DGX A100 and DGX H100/H200 user guides,
 * docs.nvidia.com/dgx), except the H200 GEMM rate, measured for this project:
 *   A100 SXM 80 GB: 312 TFLOP/s dense bf16, 80 GB, NVLink 3 600 GB/s per GPU (both directions);
 *                   DGX A100: 8 GPUs, 8 x 200 Gb/s InfiniBand HDR for compute.
 *   H100 SXM:       989 TFLOP/s dense bf16, 80 GB, NVLink 4 900 GB/s per GPU (both directions);
 *                   DGX H100: 8 GPUs, 8 x 400 Gb/s InfiniBand NDR (ConnectX-7).
 *   H200 SXM:       989 TFLOP/s dense bf16, 141 GB, NVLink 4 900 GB/s; 8 x 400 Gb/s NDR;
 *                   one H200 measured at about 790 TFLOP/s on an 8192^3 bf16 GEMM (cuBLAS;
 *                   the only figure here that no vendor publishes).
 * Memory is in vendor GB (1e9 bytes). The intra-node link is one GPU's NVLink bandwidth in one
 * direction (half the bidirectional figure); the inter-node link is one GPU's own NIC, as with
 * one HCA per GPU (rail-optimised). Vendors publish no latencies: α is 0 and the method says
 * so; pipeline transfers (megabytes) are bandwidth-bound, so the tuner loses little by it.
 *
 * Not here: anything measured. Every figure carries provenance "preset".
 */
#include <stdlib.h>
#include <string.h>

#include "pp_probe.h"

typedef struct {
    const char *name;
    const char *gpu;
    double mem_bytes;
    double peak_bf16; /* FLOP/s */
    double gemm_bf16; /* FLOP/s the tuner uses: a published measurement, else the peak */
    const char *gemm_note;
    double nvlink_bidir_Bps;
    const char *nvlink;
    double nic_bits; /* per GPU, bits/s */
    const char *ib;
} preset;

static const preset presets[] = {
    {"dgx-a100-80g", "NVIDIA A100-SXM4-80GB", 80e9, 312e12, 312e12, "vendor peak, not measured",
     600e9, "NVLink3", 200e9, "HDR"},
    {"dgx-h100", "NVIDIA H100 80GB HBM3", 80e9, 989e12, 989e12, "vendor peak, not measured",
     900e9, "NVLink4", 400e9, "NDR"},
    {"hgx-h200", "NVIDIA H200", 141e9, 989e12, 790e12, "measured 8192^3 bf16 on one H200", 900e9,
     "NVLink4", 400e9, "NDR"},
};
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))
#define GPUS_PER_NODE 8
#define MAX_NODES 4096

const char *const *pp_preset_names(void)
{
    static const char *names[N_PRESETS + 1];
    for (int i = 0; i < N_PRESETS; i++)
        names[i] = presets[i].name;
    names[N_PRESETS] = NULL;
    return names;
}

static pp_status fill(const preset *p, int nodes, pp_cluster *c)
{
    snprintf(c->origin, sizeof c->origin, "preset %s", p->name);
    snprintf(c->note, sizeof c->note,
             "preset from public specifications; GEMM rate: %s; "
             "link latencies unpublished (alpha = 0)",
             p->gemm_note);
    for (int n = 0; n < nodes; n++) {
        int idx;
        PP_TRY(pp_cluster_add_node(c, "", &idx));
        for (int g = 0; g < GPUS_PER_NODE; g++) {
            pp_device d = {.kind = "gpu",
                           .node = idx,
                           .local_index = g,
                           .mem_bytes = p->mem_bytes,
                           .mem_free_bytes = p->mem_bytes,
                           .peak_flops = p->peak_bf16,
                           .gemm_flops = p->gemm_bf16,
                           .gemm_dtype = "bf16",
                           .source = PP_SRC_PRESET};
            snprintf(d.name, sizeof d.name, "%s", p->gpu);
            PP_TRY(pp_cluster_add_device(c, &d, NULL));
        }
    }
    pp_link *in = &c->links[PP_LINK_INTRA];
    *in = (pp_link){.present = 1, .beta_Bps = p->nvlink_bidir_Bps / 2, .source = PP_SRC_PRESET};
    snprintf(in->method, sizeof in->method,
             "preset: %s %.0f GB/s per GPU both directions, "
             "alpha unpublished",
             p->nvlink, p->nvlink_bidir_Bps / 1e9);
    if (nodes > 1) {
        pp_link *out = &c->links[PP_LINK_INTER];
        *out = (pp_link){.present = 1, .beta_Bps = p->nic_bits / 8, .source = PP_SRC_PRESET};
        snprintf(out->method, sizeof out->method,
                 "preset: InfiniBand %s %.0f Gb/s per GPU, "
                 "alpha unpublished",
                 p->ib, p->nic_bits / 1e9);
    }
    pp_cluster_fingerprint(c);
    return PP_OK;
}

pp_status pp_cluster_load_preset(const char *name, int nodes, pp_cluster **out)
{
    *out = NULL;
    const preset *p = NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (name && !strcmp(name, presets[i].name))
            p = &presets[i];
    if (!p) {
        char known[128] = "";
        for (int i = 0; i < N_PRESETS; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                     presets[i].name);
        return PP_ERR(PP_ERR_NOTFOUND, "unknown cluster preset \"%s\"; known presets: %s",
                      name ? name : "(null)", known);
    }
    if (nodes < 1 || nodes > MAX_NODES)
        return PP_ERR(PP_ERR_INVALID, "preset %s: --nodes must be between 1 and %d, got %d", name,
                      MAX_NODES, nodes);
    pp_cluster *c;
    PP_TRY(pp_cluster_create(&c));
    pp_status st = fill(p, nodes, c);
    if (st != PP_OK) {
        pp_cluster_destroy(c);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    *out = c;
    return PP_OK;
}
