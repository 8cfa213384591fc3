/* hw.c — the flat hardware summary the tuner's models read (pp_tune_hw), from a cluster
 * description (probes/: a preset, a probed machine or a cluster file).
 *
 * What is added here, and why:
 *  - GEMM efficiency: a preset that only knows the vendor peak gets 80 % of it, the ratio
 *    measured on one H200 for an 8192^3 bf16 product (790 of 989 TFLOP/s, cuBLAS, measured
 *    for this project: see probes/presets.c, hgx-h200);
 *    a measured rate is used as it is.
 *  - Memory bandwidth (roofline of small GEMMs and element-wise kernels): not in the cluster
 *    description, so from vendor figures by device name (A100 2.0, H100 3.35, H200 4.8 TB/s)
 *    x PP_TUNE_MEM_BW_EFFICIENCY, what kernels reach of it (0.88: the best read kernels on an
 *    A100 80 GB reach 1.80 of 2.04 TB/s, Nsight Compute agreeing at 88 %, and NVIDIA's GTC
 *    figure of ~90 % for any kernel; NVIDIA developer forum thread 339083);
 *    CPU devices: the node's measured memcpy bandwidth; otherwise 1/100 of the GEMM rate
 *    (an assumption, stated in the note).
 *  - GEMM rate by shape: where the device has a measured sweep (probed machines), the time model
 *    reads the rate at each GEMM's size from it (pp_tune_hw_gemm_rate).
 *  - SM count (the time model's wave quantization) by device name, vendor figures: A100 108,
 *    H100 SXM / H200 132.
 *  - Tensor-parallel all-reduce bandwidth: the cluster's measured all-reduce busbw (pptune
 *    probe) where there is one, else the intra-node link x PP_TUNE_NVLINK_ALLREDUCE_EFFICIENCY
 *    (nccl-tests' published A100 figures). The note says which.
 * The slowest device sets the pace of a synchronous step, so heterogeneous clusters use the
 * minimum memory and GEMM rate over their devices. This file measures nothing.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pp_tune.h"

/* Appends "; part" (no separator first) to note, cut at its size. */
static void note_append(char *note, size_t size, const char *part)
{
    size_t len = strlen(note);
    if (len && len + 2 < size) {
        memcpy(note + len, "; ", 2);
        len += 2;
    }
    size_t n = strlen(part);
    if (len + n >= size)
        n = size - len - 1;
    memcpy(note + len, part, n);
    note[len + n] = '\0';
}

static int known_sms(const char *name)
{
    if (strstr(name, "A100"))
        return 108;
    if (strstr(name, "H100") || strstr(name, "H200"))
        return 132;
    return 0;
}

static double known_mem_bw(const char *name)
{
    if (strstr(name, "A100"))
        return 2.0e12;
    if (strstr(name, "H100"))
        return 3.35e12;
    if (strstr(name, "H200"))
        return 4.8e12;
    return 0.0;
}

/* Keeps the sweep of device d in its own dtype, sorted by m*n*k (insertion: a few points). */
static void copy_sweep(const pp_device *d, pp_tune_hw *out)
{
    out->n_gemm = 0;
    for (int i = 0; i < d->n_gemm && out->n_gemm < PP_TUNE_GEMM_POINTS; i++) {
        const pp_gemm_point *g = &d->gemm[i];
        if (strcmp(g->dtype, d->gemm_dtype) != 0 || g->flops.median <= 0)
            continue;
        double mnk = (double)g->m * g->n * g->k;
        int j = out->n_gemm++;
        while (j > 0 && out->gemm_mnk[j - 1] > mnk) {
            out->gemm_mnk[j] = out->gemm_mnk[j - 1];
            out->gemm_rate[j] = out->gemm_rate[j - 1];
            j--;
        }
        out->gemm_mnk[j] = mnk;
        out->gemm_rate[j] = g->flops.median;
    }
}

double pp_tune_hw_gemm_rate(const pp_tune_hw *hw, double m, double n, double k)
{
    int np = hw->n_gemm;
    if (np == 0)
        return hw->gemm_flops;
    double x = m * n * k, rate;
    if (x <= hw->gemm_mnk[0]) {
        rate = hw->gemm_rate[0];
    } else if (x >= hw->gemm_mnk[np - 1]) {
        rate = hw->gemm_rate[np - 1];
    } else {
        int i = 1;
        while (hw->gemm_mnk[i] < x)
            i++;
        double f = log(x / hw->gemm_mnk[i - 1]) / log(hw->gemm_mnk[i] / hw->gemm_mnk[i - 1]);
        rate = hw->gemm_rate[i - 1] + f * (hw->gemm_rate[i] - hw->gemm_rate[i - 1]);
    }
    /* a point measured above the stated peak (noise, or a peak that is itself a measurement)
     * must not let MFU pass 100 % */
    return hw->peak_flops > 0 && rate > hw->peak_flops ? hw->peak_flops : rate;
}

static void summarise_devices(const pp_cluster *c, pp_tune_hw *out, double *peak_like)
{
    *peak_like = 0;
    for (int i = 0; i < c->n_devices; i++) {
        const pp_device *d = &c->devices[i];
        double gemm = d->gemm_flops, peak = d->peak_flops > 0 ? d->peak_flops : d->gemm_flops;
        if (i == 0 || d->mem_bytes < out->mem_bytes)
            out->mem_bytes = d->mem_bytes;
        if (i == 0 || gemm < out->gemm_flops) {
            out->gemm_flops = gemm;
            out->peak_flops = peak;
            snprintf(out->device, sizeof out->device, "%s", d->name);
            *peak_like = d->peak_flops > 0 && gemm >= 0.99 * d->peak_flops;
            copy_sweep(d, out);
        }
    }
}

pp_status pp_tune_hw_from_cluster(const pp_cluster *c, const char *source, pp_tune_hw *out)
{
    memset(out, 0, sizeof *out);
    if (c->n_devices < 1 || c->n_nodes < 1)
        return PP_ERR(PP_ERR_INVALID, "%s: the cluster description has no devices", source);
    snprintf(out->name, sizeof out->name, "%s", c->origin);
    snprintf(out->source, sizeof out->source, "%s", source);
    snprintf(out->fingerprint, sizeof out->fingerprint, "%s", c->fingerprint);
    /* The plan assumes nodes alike (d, t and the placement count devices per node): a cluster
     * of 8- and 1-device nodes was planned as 2 x 8. Refused, naming the first that differs. */
    for (int i = 1; i < c->n_nodes; i++)
        if (c->nodes[i].n_devices != c->nodes[0].n_devices)
            return PP_ERR(PP_ERR_INVALID,
                          "%s: nodes differ: node 0 has %d devices, node %d has %d; pptune plans "
                          "clusters of identical nodes (describe the nodes alike, or a subset)",
                          source, c->nodes[0].n_devices, i, c->nodes[i].n_devices);
    out->nodes = c->n_nodes;
    out->gpus_per_node = c->nodes[0].n_devices;
    out->is_local = strncmp(c->origin, "probed", 6) == 0;
    out->cpu_devices = strcmp(c->devices[0].kind, "cpu") == 0;
    double peak_like;
    summarise_devices(c, out, &peak_like);
    const char *gemm_note = out->n_gemm > 1 ? "GEMM rate by shape from the measured sweep"
                                            : "measured GEMM rate";
    if (peak_like) {
        out->gemm_flops *= PP_TUNE_PEAK_GEMM_EFFICIENCY;
        gemm_note = "the cluster gives a vendor peak, so layers are planned at 0.8 x it "
                    "(the ratio one H200 measured: 790 of 989 TFLOP/s)";
    }
    out->mem_bw = known_mem_bw(out->device) * PP_TUNE_MEM_BW_EFFICIENCY;
    const char *bw_note = "memory bandwidth 0.88 x vendor figures";
    if (out->mem_bw <= 0 && c->nodes[0].memcpy_Bps.samples > 0) {
        out->mem_bw = c->nodes[0].memcpy_Bps.median; /* the slowest node's, like the GEMM rate */
        for (int i = 1; i < c->n_nodes; i++)
            if (c->nodes[i].memcpy_Bps.samples > 0 && c->nodes[i].memcpy_Bps.median < out->mem_bw)
                out->mem_bw = c->nodes[i].memcpy_Bps.median;
        bw_note = "memory bandwidth = measured memcpy";
    }
    if (out->mem_bw <= 0) {
        out->mem_bw = out->gemm_flops / 100.0;
        bw_note = "memory bandwidth assumed GEMM rate / 100";
    }
    const pp_link *in = &c->links[PP_LINK_INTRA], *ex = &c->links[PP_LINK_INTER];
    if (!in->present && out->gpus_per_node > 1)
        return PP_ERR(PP_ERR_INVALID, "%s: no intra-node link class for %d devices per node",
                      source, out->gpus_per_node);
    out->intra_bw = in->present ? in->beta_Bps : 1e30;
    out->intra_lat = in->present ? in->alpha_s : 0.0;
    /* One node: no inter-node hop ever happens; keep the intra figures so nothing divides by 0. */
    out->inter_bw = ex->present ? ex->beta_Bps : out->intra_bw;
    out->inter_lat = ex->present ? ex->alpha_s : out->intra_lat;
    out->inter_measured = ex->present && ex->source == PP_SRC_PROBED;
    out->sms = out->cpu_devices ? 0 : known_sms(out->device);
    const pp_collective *ar = &c->allreduce;
    out->tp_busbw_measured = ar->present && ar->busbw_Bps > 0;
    /* the NVLink efficiency is a GPU figure: CPU devices keep their measured copy bandwidth */
    double eff = out->cpu_devices ? 1.0 : PP_TUNE_NVLINK_ALLREDUCE_EFFICIENCY;
    out->tp_busbw = out->tp_busbw_measured ? ar->busbw_Bps : out->intra_bw * eff;
    char ar_note[96];
    if (out->tp_busbw_measured)
        snprintf(ar_note, sizeof ar_note, "TP all-reduce at the measured busbw %.0f GB/s",
                 out->tp_busbw / 1e9);
    else if (out->cpu_devices)
        snprintf(ar_note, sizeof ar_note, "TP all-reduce at the intra-node copy bandwidth");
    else
        snprintf(ar_note, sizeof ar_note, "TP all-reduce at %.0f %% of the link (preset, nccl-tests)",
                 100 * PP_TUNE_NVLINK_ALLREDUCE_EFFICIENCY);
    if (out->gemm_flops <= 0 || out->mem_bytes <= 0 || out->intra_bw <= 0 || out->inter_bw <= 0)
        return PP_ERR(PP_ERR_INVALID,
                      "%s: the cluster needs positive GEMM rate, memory and link bandwidths",
                      source);
    const char *parts[] = {gemm_note, bw_note, ar_note, c->note[0] ? c->note : "no caveat recorded"};
    out->note[0] = '\0';
    for (int i = 0; i < 4; i++)
        note_append(out->note, sizeof out->note, parts[i]);
    return PP_OK;
}

pp_status pp_tune_hw_preset(const char *name, int nodes, pp_tune_hw *out)
{
    pp_cluster *c = NULL;
    PP_TRY(pp_cluster_load_preset(name, nodes, &c));
    char src[96];
    snprintf(src, sizeof src, "preset %s x %d nodes", name, nodes);
    pp_status st = pp_tune_hw_from_cluster(c, src, out);
    if (st == PP_OK)
        snprintf(out->name, sizeof out->name, "%s", name);
    pp_cluster_destroy(c);
    return st == PP_OK ? PP_OK : pp_err_trace(st, __FILE__, __LINE__);
}

const pp_backend_row *pp_tune_hw_backend(const pp_tune_hw *hw)
{
    const pp_backend_row *be = pp_backend_row_for_device(hw && !hw->cpu_devices ? "gpu" : "cpu");
    return be ? be : pp_backend_row_of(PP_RT_BACKEND_CPU);
}
