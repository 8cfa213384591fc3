/* pp_backends.h — the runtime's backends as data: one row per backend, its name, the devices it
 * runs on and its capabilities, which the memory plan, the executor, pprun and the tuner ask
 * instead of comparing a backend's name or kind (STYLE: registries over switches).
 *
 * The rows are data only (common/backends.c): what a backend *does* is its table of functions in
 * runtime/ (runtime/backend.h), created through the row's kind (runtime/backend_device.c). In
 * common/ because every module reads them: the tuner and profiles, which link no runtime, as
 * much as the runtime itself. Adding a backend: its folder under runtime/, one row here, its
 * create function beside the others in backend_device.c, its CMake lines.
 */
#ifndef PP_BACKENDS_H
#define PP_BACKENDS_H

#include "pp_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backends of an executor's ranks, the rows' order. PP_RT_BACKEND_CPU_STAGED: CPU backends
 * whose tensors the executor nevertheless moves through host staging copies exactly as it does
 * a device backend's (for tests: the staging path runs, and must give the CPU run's floats bit
 * for bit, on a machine without a GPU). */
typedef enum {
    PP_RT_BACKEND_CPU = 0,
    PP_RT_BACKEND_CUDA = 1,
    PP_RT_BACKEND_CPU_STAGED = 2
} pp_rt_backend_kind;
#define PP_RT_BACKEND__COUNT 3

typedef struct {
    int kind;                /* pp_rt_backend_kind, = the row's index */
    const char *name;        /* pprun --backend NAME, messages: "cpu", "cuda" */
    const char *device_kind; /* the pp_device.kind it runs one rank per: "cpu" (a core), "gpu" */
    const char *help;        /* one line for pprun --help */
    int choice;              /* 1: a pprun --backend value (rows with it come first) */
    int pprun_default;       /* 1: what pprun runs without --backend (the line omits it) */
    int device_memory;       /* tensors in a device's memory, reached from the host only by
                              * copies; 0: host memory (the step's tokens sit beside them) */
    int staged;              /* the executor moves its tensors through host staging copies
                              * when the transport takes host memory only */
    unsigned precisions;     /* 1u << pp_precision for each precision it computes in */
    int kernel_scratch;      /* holds its kernels' scratch (attention, the GEMM library's
                              * workspace) in PP_MEM_WORKSPACE, sized by the plan
                              * (pp_rt_size_attn_scratch_cuda, PP_RT_CUBLAS_WS_BYTES) */
    int host_threads;        /* runs its kernels on host threads: pprun --threads applies */
    int device_collectives;  /* tensor-parallel collectives in device memory, one process per
                              * device (NCCL) */
    int context_parallel;    /* has the context-parallel attention kernels (attention_cp_fwd /
                              * _bwd in runtime/backend.h): pprun --cp > 1 runs on it */
} pp_backend_row;

/* The row of kind, NULL for a kind with no row. */
const pp_backend_row *pp_backend_row_of(int kind);
/* The row named name, NULL when none is. */
const pp_backend_row *pp_backend_row_named(const char *name);
/* The row pprun runs on a device_kind ("gpu", "cpu") by default: the first --backend choice
 * for it; NULL when none runs there. */
const pp_backend_row *pp_backend_row_for_device(const char *device_kind);
/* The --backend choices, NULL-terminated, in kind order (the index of a name is its kind): the
 * names of the rows with `choice`, which come first (an array, for static option tables). */
extern const char *const pp_backend_choices[];
/* Whether the row computes in precision (pp_precision). */
int pp_backend_row_has_precision(const pp_backend_row *r, int precision);
/* The name a pprun line writes after --backend, NULL for pprun's default (no flag). */
const char *pp_backend_row_flag(const pp_backend_row *r);

#ifdef __cplusplus
}
#endif
#endif
