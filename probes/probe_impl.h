/* probe_impl.h — private to probes/: the pieces pp_probe_run puts together.
 * No CUDA, NCCL or MPI types here: gpu_probe.cu, mpi_gather.c and cpu_gemm.c are plugins
 * (plugin.h) loaded on first use by plugin.c, which implements the GPU, MPI and BLAS entry
 * points below and says what is missing where a plugin cannot be loaded. */
#ifndef PP_PROBE_IMPL_H
#define PP_PROBE_IMPL_H

#include "pp_probe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A copy of a size sweep (malloc'd, the caller frees); NULL with PP_ERR_NOMEM recorded. */
pp_xfer_point *pp_xfer_copy(const pp_xfer_point *pts, int n);

/* Progress line through opts->progress (no-op without one). */
void pp_probe_say(const pp_probe_opts *o, const char *fmt, ...) PP_PRINTF(2, 3);

/* ---- CPU (cpu_measure.c) ---- */
/* Memory a process may allocate now: MemAvailable, capped by a cgroup limit, bytes. */
pp_status pp_cpu_usable_memory(double *bytes);
/* cblas_sgemm with one BLAS thread over a sweep of shapes (the BLAS plugin, cpu_gemm.c);
 * *pts is the caller's to free. PP_ERR_UNSUPPORTED, naming the plugin, where it cannot be
 * loaded. */
pp_status pp_cpu_gemm_sweep(const pp_probe_opts *o, pp_gemm_point **pts, int *n);
/* The BLAS library's configuration string ("OpenBLAS 0.3.21 ..."), "" without the plugin. */
const char *pp_cpu_blas_config(void);
/* memcpy bandwidth, bytes copied per second. */
pp_status pp_cpu_memcpy(const pp_probe_opts *o, pp_measure *bw);
/* Thread-to-thread transfers between the cores cpus[0..n) (OS CPU numbers), done as the
 * in-process transport does them, over a size sweep per core pair: fills the pairwise matrices
 * for devices [first, first + n) of c and the intra-node class (median over pairs). */
pp_status pp_cpu_thread_links(const pp_probe_opts *o, const int *cpus, int n, pp_cluster *c,
                              int first);

/* ---- topology (topology.c) ---- */
/* The OS CPU number of the first PU of every core this process may run on (one CPU-backend
 * rank per core); *cpus is the caller's to free. */
pp_status pp_topo_local_cpus(int **cpus, int *n);

/* ---- GPU (gpu_probe.cu, the GPU plugin, through plugin.c) ---- */
/* Appends this node's GPUs to c (node `node`, the last added), fills the intra-node link, the
 * all-reduce figures and the pairwise matrices, and software versions. With no device present
 * it returns PP_ERR_UNSUPPORTED and a message starting "no CUDA device". */
pp_status pp_gpu_probe_node(const pp_probe_opts *o, pp_cluster *c, int node);
/* CUDA runtime / driver / NCCL versions into sw ("" where not built or no driver). */
void pp_gpu_versions(pp_software *sw);

/* ---- MPI (mpi_gather.c, the MPI plugin, through plugin.c) ---- */
/* Probes every node under an MPI launcher and gathers on rank 0 (others: *out = NULL).
 * probe_node is what one node leader runs to describe its node. */
pp_status pp_mpi_probe(const pp_probe_opts *o,
                       pp_status (*probe_node)(const pp_probe_opts *, pp_cluster **),
                       pp_cluster **out);
/* Merges b's nodes and devices after a's (for gathering); b is left intact. */
pp_status pp_cluster_append(pp_cluster *a, const pp_cluster *b);

#ifdef __cplusplus
}
#endif
#endif
