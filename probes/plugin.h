/* plugin.h — private to probes/: the table a probe plugin fills, and the loader that finds it.
 *
 * pptune links no CUDA, NCCL, MPI or BLAS library: what needs one is a plugin, a shared object
 * loaded with dlopen the first time a probe needs it (ARCHITECTURE: "the tuner loads the GPU
 * libraries only when it probes or trials GPUs"):
 *
 *   pptune-gpu.so   gpu_probe.cu   CUDA runtime, cuBLAS, NCCL    (built where nvcc exists)
 *   pptune-mpi.so   mpi_gather.c   MPI                           (built where MPI is found)
 *   pptune-blas.so  cpu_gemm.c     OpenBLAS (the CPU backend's)  (always built)
 *
 * A plugin exports one function, pp_probe_plugin_<name>, returning its table (nccl-tests'
 * shape: one struct of function pointers per plug-in). It links its own copy of the probes'
 * value code and of common/ (hidden, -Wl,--exclude-libs,ALL), so the error message of a failed
 * call sits in the plugin's copy: err_msg/err_text read it, err_restore writes it, and the
 * loader moves it across (pp_err_restore).
 *
 * Search order for pptune-<name>.so: $PPTUNE_PLUGIN_DIR alone when it is set (a colon-separated
 * list of folders); else <folder of the executable>/../lib/pptune (the installed layout, and the
 * build tree's: build/tuner/pptune next to build/lib/pptune), then the build tree's folder as
 * configured (PP_PLUGIN_BUILD_DIR).
 */
#ifndef PP_PROBE_PLUGIN_H
#define PP_PROBE_PLUGIN_H

#include "probe_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PP_PROBE_PLUGIN_ABI 1

#if defined(__GNUC__)
#define PP_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define PP_PLUGIN_EXPORT
#endif

typedef struct {
    int abi;          /* PP_PROBE_PLUGIN_ABI: a plugin of another build is refused */
    const char *name; /* "gpu", "mpi", "blas" */
    /* the plugin's copy of the error message (common/common.c) */
    const char *(*err_msg)(void);
    const char *(*err_text)(void);
    pp_status (*err_restore)(pp_status st, const char *msg, size_t text_len);

    /* gpu (NULL elsewhere): probe_impl.h's pp_probe_gpu_available, pp_gpu_probe_node,
     * pp_gpu_versions */
    int (*gpu_available)(char *why, size_t why_len);
    pp_status (*gpu_probe_node)(const pp_probe_opts *o, pp_cluster *c, int node);
    void (*gpu_versions)(pp_software *sw);

    /* mpi (NULL elsewhere): pp_mpi_probe, pp_probe_allreduce */
    pp_status (*mpi_probe)(const pp_probe_opts *o,
                           pp_status (*probe_node)(const pp_probe_opts *, pp_cluster **),
                           pp_cluster **out);
    pp_status (*allreduce)(double bytes, int quick, pp_allreduce_timing *out);

    /* blas (NULL elsewhere): pp_cpu_gemm_sweep, and the library's configuration string */
    pp_status (*gemm_sweep)(const pp_probe_opts *o, pp_gemm_point **pts, int *n);
    const char *(*blas_config)(void);
} pp_probe_plugin;

/* The table of plugin `name` ("gpu", "mpi", "blas"), loaded on the first call and kept for the
 * process's life. NULL when it cannot be loaded: then why holds a sentence naming the file,
 * where it was looked for and what failed (dlerror names a missing libcudart.so.13 itself), or,
 * where the plugin was not built, "pptune was built without ...". */
const pp_probe_plugin *pp_probe_plugin_get(const char *name, char *why, size_t why_len);

/* The table's fields for a plugin's own file: its copy of common/'s error functions. */
#define PP_PROBE_PLUGIN_ERR_FIELDS                                                                 \
    .abi = PP_PROBE_PLUGIN_ABI, .err_msg = pp_err_msg, .err_text = pp_err_text,                    \
    .err_restore = pp_err_restore

#ifdef __cplusplus
}
#endif
#endif
