/* pp_tune_hw.h — the hardware the tuner plans for: a flat summary of a cluster description (hw.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_HW_H
#define PP_TUNE_HW_H

#include "pp_backends.h"
#include "pp_common.h"
#include "pp_probe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The hardware the tuner plans for --------------------------------------------------- */
#define PP_TUNE_GEMM_POINTS 16
#define PP_TUNE_RANK_PEAKS 64

/* A flat summary of a cluster description (probes/), what the time and memory models read. */
typedef struct {
    char name[64];          /* "dgx-h100", or the probed machine's name */
    char source[256];       /* "preset dgx-h100", or the cluster file */
    char fingerprint[80];   /* the cluster description's fingerprint */
    char note[400];         /* how the figures were derived (efficiency factors, sources) */
    char device[64];        /* "H100 SXM 80GB" */
    int nodes;
    int gpus_per_node;      /* devices per node */
    int is_local;           /* 1: this machine (trials possible) */
    int cpu_devices;        /* 1: the devices are CPU cores (the runtime's CPU backend, fp32) */
    double mem_bytes;       /* per device */
    double peak_flops;      /* dense 16-bit peak per device, FLOP/s (MFU denominator) */
    double gemm_flops;      /* achievable large-GEMM rate per device, FLOP/s */
    double mem_bw;          /* device memory bandwidth, B/s */
    double intra_bw;        /* one direction between two devices of a node, B/s */
    double intra_lat;       /* s */
    double inter_bw;        /* one direction per device across nodes, B/s */
    double inter_lat;       /* s */
    int inter_measured;     /* 1: inter_bw is a probed point-to-point figure, not a preset's */
    double tp_busbw;        /* all-reduce bus bandwidth inside a node, B/s (nccl-tests busbw):
                               measured where the cluster has one, else intra_bw x the preset
                               efficiency PP_TUNE_NVLINK_ALLREDUCE_EFFICIENCY */
    int tp_busbw_measured;  /* 1: tp_busbw is the cluster's measured all-reduce */
    int sms;                /* streaming multiprocessors per device (vendor figure); 0: unknown */
    int n_gemm;             /* points of a measured GEMM sweep; 0: gemm_flops for every shape */
    double gemm_mnk[PP_TUNE_GEMM_POINTS];  /* m*n*k of each point, ascending */
    double gemm_rate[PP_TUNE_GEMM_POINTS]; /* FLOP/s measured there (median) */
} pp_tune_hw;

/* The runtime backend that runs one rank per device of hw (its row: pprun --backend, the
 * precisions, device memory): the first pprun backend for hw's device kind. NULL hw: the CPU's. */
const pp_backend_row *pp_tune_hw_backend(const pp_tune_hw *hw);

/* Achievable GEMM rate for an m x n x k product: log-linear interpolation in m*n*k over the
 * measured sweep, clamped to its ends; gemm_flops where nothing was measured. FLOP/s. */
double pp_tune_hw_gemm_rate(const pp_tune_hw *hw, double m, double n, double k);

/* Summarises a cluster description (probes/): the slowest device's memory and GEMM rate, the
 * link classes' alpha-beta. A GEMM rate equal to the vendor peak (presets without a
 * measurement) is scaled by PP_TUNE_PEAK_GEMM_EFFICIENCY; memory bandwidth, which the cluster
 * description does not carry, comes from a table of known devices (see hw.c). */
#define PP_TUNE_PEAK_GEMM_EFFICIENCY 0.8
/* NCCL all-reduce bus bandwidth over NVLink/NVSwitch as a fraction of one GPU's one-direction
 * NVLink figure: nccl-tests all_reduce_perf on 8 x A100-SXM4-80GB reports ~200-208 GB/s busbw
 * of NVLink3's 300 GB/s (NVIDIA/nccl-tests issues #149 and #178). Used where the cluster has no
 * measured all-reduce. */
#define PP_TUNE_NVLINK_ALLREDUCE_EFFICIENCY 0.7
/* Fraction of a device's vendor memory bandwidth kernels reach (hw.c gives the source). */
#define PP_TUNE_MEM_BW_EFFICIENCY 0.88
pp_status pp_tune_hw_from_cluster(const pp_cluster *c, const char *source, pp_tune_hw *out);
/* Loads preset `name` scaled to `nodes` through probes/ and summarises it. */
pp_status pp_tune_hw_preset(const char *name, int nodes, pp_tune_hw *out);

#ifdef __cplusplus
}
#endif
#endif
