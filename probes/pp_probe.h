/* pp_probe.h — what the hardware is: topology, measurements, cluster descriptions, presets.
 *
 * Three ways to get a pp_cluster, the description the tuner plans against:
 *
 *   pp_probe_run(&opts, &c)            probe this machine (and, under mpirun/srun, every node)
 *   pp_cluster_load_preset("hgx-h200", nodes, &c)   public specifications, no hardware needed
 *   pp_cluster_read("cluster.json", &c)             a file written earlier by pp_cluster_write
 *
 * The tuner reads, per device, memory (pp_device.mem_bytes) and GEMM rate (pp_device.gemm_flops),
 * and, per link class, the α-β cost of a transfer (pp_cluster_link / pp_link_time). Every figure
 * says where it came from (pp_source): measured here, or a preset's published specification.
 *
 * Units: bytes, seconds, FLOP/s, bytes/s throughout (1 GB = 1e9 bytes, as nccl-tests reports).
 * Ownership: every *_destroy frees what its create/probe/read returned; destroy(NULL) is a no-op.
 * Library code never prints: progress goes to an optional callback, errors to pp_err_msg().
 */
#ifndef PP_PROBE_H
#define PP_PROBE_H

#include <stdio.h>

#include "pp_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PP_CLUSTER_SCHEMA "pptune-cluster"
#define PP_CLUSTER_SCHEMA_VERSION 1

/* Where a figure came from. */
typedef enum {
    PP_SRC_PROBED = 0, /* measured (or read from hwloc / the driver) on the machine */
    PP_SRC_PRESET = 1, /* taken from a preset's public specification */
} pp_source;
const char *pp_source_name(pp_source s); /* "probed", "preset" */

/* A measured figure: median of `samples` timed runs after a warm-up, with its spread. */
typedef struct {
    double median;
    double min;
    double max;
    int samples; /* 0: not measured (preset or absent) */
} pp_measure;

/* ---- topology (hwloc) ------------------------------------------------------------------- */

/* How a GPU reaches a NIC (or another GPU) over PCIe, in NCCL's words (NCCL_P2P_LEVEL and
 * NCCL_NET_GDR_LEVEL use the same names), from the closest common ancestor of the two PCI
 * devices in the hwloc tree. Ordered from closest to farthest. */
typedef enum {
    PP_PATH_PIX = 0,  /* through at most one PCIe bridge (same switch port)            */
    PP_PATH_PXB = 1,  /* through several PCIe bridges, without the host bridge          */
    PP_PATH_PHB = 2,  /* through a PCIe host bridge (the CPU root complex)              */
    PP_PATH_NODE = 3, /* between host bridges of the same NUMA node                     */
    PP_PATH_SYS = 4,  /* across the inter-socket link (QPI/UPI/X-Bus)                   */
    PP_PATH_UNKNOWN = 5,
} pp_pci_path;
const char *pp_pci_path_name(pp_pci_path p); /* "PIX", "PXB", ... */

typedef struct {
    int os_index;     /* the NUMA node's OS number (numactl -m N) */
    double mem_bytes; /* local memory, bytes */
} pp_topo_numa;

typedef struct {
    char name[16];  /* "cuda0" when the CUDA backend saw it, else "nvml0" */
    char model[64]; /* hwloc's GPUModel ("Tesla P100-SXM2-16GB"), "" when unknown */
    char pci[16];   /* "0000:84:00.0" */
    int numa;       /* OS index of the NUMA node the GPU hangs off, -1 when not a single one */
    int nic;        /* index into pp_topo.nics of the nearest NIC, -1 when there is none */
    pp_pci_path nic_path; /* GPU <-> that NIC, PP_PATH_UNKNOWN when nic < 0 */
    double mem_bytes;     /* CUDAGlobalMemorySize from hwloc, bytes; 0 when unknown */
} pp_topo_gpu;

typedef struct {
    char name[16];    /* OpenFabrics name ("mlx5_0") for an RDMA HCA, else the netdev ("eth0") */
    char netdevs[48]; /* network interfaces of the same PCI function, comma-separated ("ib0") */
    char pci[16];     /* "0000:04:00.0", "" for a virtual interface */
    int numa;         /* as for GPUs */
    int rdma;         /* 1: InfiniBand/RoCE HCA (has an OpenFabrics device), 0: plain Ethernet */
} pp_topo_nic;

typedef struct {
    char hostname[64];
    char arch[16];      /* "x86_64", "ppc64le" */
    char cpu_model[96]; /* first Package's CPUModel, "" when hwloc does not say */
    int sockets, cores, pus;
    double mem_bytes; /* total of the NUMA nodes, bytes */
    int n_numa;
    pp_topo_numa *numa; /* (n_numa) in logical order */
    int n_gpus;
    pp_topo_gpu *gpus; /* (n_gpus) in CUDA/NVML index order */
    int n_nics;
    pp_topo_nic *nics; /* (n_nics) */
    /* hwloc's "NVLinkBandwidth" matrix restricted to the GPUs, MB/s as hwloc reports it
     * (row = source GPU, diagonal = hwloc's own value, the GPU memory bandwidth); (n_gpus,
     * n_gpus), NULL when the topology has none (no NVML backend, or no NVLink). */
    double *nvlink_MBps;
} pp_topo;

/* Loads a topology: the machine's own (xml_path NULL, honouring HWLOC_XMLFILE like every hwloc
 * program) or a recorded one (xml_path, as exported by `lstopo file.xml`), with I/O devices kept.
 * *out is the caller's to free with pp_topo_destroy. */
pp_status pp_probe_topology(const char *xml_path, pp_topo **out);
void pp_topo_destroy(pp_topo *t);
pp_status pp_topo_copy(const pp_topo *t, pp_topo **out);
/* The tree as a few lines ("Package 0: NUMA 0 (64.0 GB), 4 cores", "  GPU cuda0 ..."). */
void pp_topo_print(const pp_topo *t, FILE *fp);

/* ---- the cluster description ------------------------------------------------------------ */

typedef struct {
    char dtype[8];    /* "bf16", "fp16", "fp32" */
    int m, n, k;      /* C(m,n) = A(m,k) B(k,n) */
    pp_measure flops; /* FLOP/s, 2·m·n·k / time */
} pp_gemm_point;

typedef struct {
    char kind[8];          /* "gpu" or "cpu" (one CPU core: what one CPU-backend rank gets) */
    char name[64];         /* "NVIDIA H200", "AMD EPYC core" */
    int node;              /* index into pp_cluster.nodes */
    int local_index;       /* CUDA device index on its node; core slot for CPU devices */
    char pci[16];          /* GPUs: "0000:84:00.0"; "" otherwise */
    double mem_bytes;      /* memory one rank on this device may use, bytes (GPU: total) */
    double mem_free_bytes; /* free when probed, bytes (presets: = mem_bytes) */
    double peak_flops;     /* vendor dense peak in gemm_dtype, FLOP/s; 0 unknown */
    double gemm_flops;     /* GEMM rate the tuner uses, FLOP/s, in gemm_dtype: median at the
                            * largest shape swept (presets: a published measurement) */
    char gemm_dtype[8];    /* "bf16" for GPUs, "fp32" for CPU cores */
    int n_gemm;
    pp_gemm_point *gemm; /* (n_gemm) the whole sweep, NULL for presets */
    /* Copy within the device's own memory, bytes copied per second (the memory traffic is twice
     * this: read + write). GPUs: cudaMemcpyAsync device to device; CPU cores: one thread's
     * memcpy. samples 0 when not measured (presets). */
    pp_measure copy_Bps;
    pp_source source;
} pp_device;

typedef struct {
    double bytes;       /* message size */
    pp_measure seconds; /* one transfer of that size */
} pp_xfer_point;

/* Link classes the tuner's cost model distinguishes. */
typedef enum { PP_LINK_INTRA = 0, PP_LINK_INTER = 1 } pp_link_class;
#define PP_LINK_NCLASS 2
const char *pp_link_class_name(pp_link_class c); /* "intra_node", "inter_node" */

/* A point-to-point link: time(bytes) = alpha_s + bytes / beta_Bps (Hockney's α-β model), fitted
 * to a size sweep (α from the smallest message, β from the largest: pp_fit_alpha_beta), or
 * taken from a preset. */
typedef struct {
    int present;     /* 0: nothing known for this class (e.g. one node: no inter-node link) */
    double alpha_s;  /* latency, seconds */
    double beta_Bps; /* bandwidth, bytes/second, one direction */
    char method[96]; /* "thread-copy", "cuda-peer-copy", "nccl-sendrecv", "mpi-pingpong",
                      * "preset: NVLink4 900 GB/s per GPU", ... */
    pp_source source;
    int n_points;
    pp_xfer_point *points; /* (n_points) the sweep the fit came from; NULL for presets */
} pp_link;

/* All-reduce within a node, nccl-tests conventions: algbw = bytes / time, busbw = algbw·2(n−1)/n.
 */
typedef struct {
    int present;
    int ranks;                /* n */
    double busbw_Bps;         /* at the largest size swept */
    double alpha_s, beta_Bps; /* α-β fit of time(bytes) */
    pp_source source;
    int n_points;
    pp_xfer_point *points;
} pp_collective;

typedef struct {
    char hostname[64]; /* "" for preset nodes */
    int first_device;  /* devices [first_device, first_device + n_devices) are on this node */
    int n_devices;
    pp_measure memcpy_Bps; /* host memcpy bandwidth (bytes copied / s), samples 0 for presets */
    pp_topo *topo;         /* owned; NULL for presets (no recorded tree) */
} pp_node;

#define PP_MAX_ENV 16
typedef struct {
    char pptune[16];
    char hwloc[16];        /* library the probe was built with, "" for presets */
    char blas[64];         /* OpenBLAS configuration string */
    char cuda_runtime[16]; /* "13.0", "" when not built with CUDA */
    char cuda_driver[16];  /* highest CUDA version the driver supports, "" when no driver */
    char nccl[16];         /* "2.27.3", "" when not built with NCCL */
    char mpi[64];          /* MPI library version, "" when not run under MPI */
    int n_env;
    struct {
        char name[32];
        char value[128];
    } env[PP_MAX_ENV]; /* NCCL_* variables set when probing: they change what was measured */
} pp_software;

typedef struct {
    int schema_version;   /* PP_CLUSTER_SCHEMA_VERSION */
    char created[32];     /* ISO 8601 UTC, "2026-11-29T12:44:10Z" */
    char origin[64];      /* "probed", "probed (mpi, 2 ranks)", "preset hgx-h200" */
    char fingerprint[80]; /* "sha256:<64 hex>" of hardware and software identity (older
                           * files: "fnv1a64:<16 hex>", still read): see
                           * pp_cluster_fingerprint */
    char note[160];       /* caveat shown with the figures, "" when none */
    int n_nodes;
    pp_node *nodes; /* (n_nodes) */
    int n_devices;
    pp_device *devices; /* (n_devices), grouped by node */
    pp_link links[PP_LINK_NCLASS];
    pp_collective allreduce;
    /* Measured pairwise matrices, (n_devices, n_devices), row = source device; diagonal 0.
     * NULL when not measured (presets, CPU devices of one node); an off-diagonal 0 means that
     * pair was not measured. Either way pp_cluster_link gives the class figure. */
    double *pair_bw_Bps;
    double *pair_alpha_s;
    char pair_method[96]; /* what the matrices measured ("cuda-peer-copy", ...), "" when NULL */
    pp_software sw;
} pp_cluster;

/* An empty cluster (schema version, timestamp set). */
pp_status pp_cluster_create(pp_cluster **out);
void pp_cluster_destroy(pp_cluster *c);
/* Appends a node / a device (copied, its gemm array too; it must belong to the last node added).
 * Pointers into c->nodes / c->devices move, indexes stay. */
pp_status pp_cluster_add_node(pp_cluster *c, const char *hostname, int *index);
pp_status pp_cluster_add_device(pp_cluster *c, const pp_device *d, int *index);

/* Computes c->fingerprint: a hash of what identifies the hardware and software (per node: CPU
 * model, sockets, cores, NUMA node count, GPU models and PCI addresses, NICs; per device: kind,
 * name, GPU total memory; software versions; the preset's name) and of nothing measured, timed
 * or host-named, so probing the same machine twice gives the same fingerprint. */
void pp_cluster_fingerprint(pp_cluster *c);

/* The link class between two devices (same node: intra), NULL when the class is not present. */
const pp_link *pp_cluster_link(const pp_cluster *c, int dev_a, int dev_b);
/* α-β time of one transfer of `bytes`, seconds. */
double pp_link_time(const pp_link *l, double bytes);

/* JSON. Writing is atomic (temp file + rename). Reading validates every field; a missing or
 * mistyped one fails with PP_ERR_PARSE and `FILE: field "devices[2].mem_bytes": expected a
 * number >= 0, got "80GB"`. */
pp_status pp_cluster_write(const pp_cluster *c, const char *path);
/* The JSON text; the caller frees it with free(). */
pp_status pp_cluster_to_json(const pp_cluster *c, char **text);
pp_status pp_cluster_read(const char *path, pp_cluster **out);
/* Parses text; `name` is the file name used in messages. */
pp_status pp_cluster_from_json(const char *text, const char *name, pp_cluster **out);

/* A readable summary: nodes, the topology tree, devices, link classes and a bandwidth table. */
void pp_cluster_print(const pp_cluster *c, FILE *fp);

/* ---- presets (public specifications: NVIDIA's data sheets, sources in presets.c) --------- */

/* Names of the presets, NULL-terminated. */
const char *const *pp_preset_names(void);
/* A cluster of `nodes` nodes of the named preset. Unknown name: PP_ERR_NOTFOUND with a message
 * listing the known ones. */
pp_status pp_cluster_load_preset(const char *name, int nodes, pp_cluster **out);

/* ---- probing ---------------------------------------------------------------------------- */

typedef struct {
    int quick;                /* fewer shapes, sizes and samples: well under 30 s on a laptop */
    const char *topology_xml; /* recorded topology to describe instead of this machine's; the
                               * measurements still run here */
    int no_gpu;               /* skip the GPU probes even where CUDA devices exist */
    /* Progress ("cpu: sgemm 512x512x512 ... 45.1 GFLOP/s"), may be NULL. */
    void (*progress)(void *ctx, const char *msg);
    void *progress_ctx;
} pp_probe_opts;

/* Probes this machine: topology, CPU devices, and GPUs where built with CUDA and a device exists.
 * Under an MPI launcher with more than one rank (and MPI built in), every node is probed and
 * the result is gathered on rank 0; other ranks get *out = NULL and PP_OK. */
pp_status pp_probe_run(const pp_probe_opts *opts, pp_cluster **out);

/* One timed MPI all-reduce (float sum, MPI_COMM_WORLD) of `bytes` under a launcher, as a
 * data-parallel gradient sync does it: a warm-up, then samples of a few iterations each; valid
 * on rank 0 (is_root). nccl-tests' definitions: algbw = bytes / time, busbw = algbw 2(n-1)/n.
 * PP_ERR_UNSUPPORTED where pptune was built without MPI; PP_ERR_INVALID for bytes < 4. */
typedef struct {
    int ranks, nodes;   /* MPI ranks, distinct nodes (pp_launch_node_name) among them */
    double bytes;       /* message size per rank */
    pp_measure seconds; /* one all-reduce */
    int is_root;        /* 1 on rank 0, where the figures are gathered */
    char mpi[64];       /* MPI library version */
} pp_allreduce_timing;
pp_status pp_probe_allreduce(double bytes, int quick, pp_allreduce_timing *out);

/* Whether GPUs can be probed: 1 yes; 0 no, with the reason in why ("built without CUDA",
 * "no CUDA device: <driver's message>"). */
int pp_probe_gpu_available(char *why, size_t why_len);

/* Statistics helpers shared by the probes (exposed for tests). */
/* Sorts x (n values) in place and returns median, min, max. */
pp_measure pp_measure_of(double *x, int n);
/* Fit of t = alpha + bytes/beta to a size sweep: alpha from the smallest size, beta from the
 * largest (robust to cache effects in between; see stats.c). PP_ERR_INVALID with fewer than 2
 * distinct sizes, a time <= 0, or a largest message no slower than alpha. */
pp_status pp_fit_alpha_beta(const pp_xfer_point *pts, int n, double *alpha_s, double *beta_Bps);

#ifdef __cplusplus
}
#endif
#endif
