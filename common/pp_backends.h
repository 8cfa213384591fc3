/* pp_backends.h — the runtime's backends as data: one row per backend, its name, the devices it
 * runs on, its capabilities and the sizes of its kernels' memory, which the memory plan, the
 * executor, pprun and the tuner ask instead of comparing a backend's name or kind (STYLE:
 * registries over switches).
 *
 * Each backend's folder under runtime/ holds its rows, one file per row, runtime/<folder>/
 * row_<id>.c defining `const pp_backend_row pp_backend_row_<id>` (data and pure size
 * arithmetic: library pp_backends, which the tuner and profiles link without the runtime), and
 * its code defines `pp_backend_maker_<id>` (runtime/backend.h: how the runtime creates it).
 * CMake lists the row files in pp_backend_list.h (generated: one PP_BACKEND(ID, id) line per
 * row, the CPU backend first, then by path), from which the kinds below, the table
 * (common/backends.c) and the makers (runtime/backend_device.c) are all drawn. Adding a backend:
 * its folder (its code, its row file) and its CMake lines in runtime/CMakeLists.txt.
 */
#ifndef PP_BACKENDS_H
#define PP_BACKENDS_H

#include <stddef.h>

#include "pp_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backends of an executor's ranks, PP_RT_BACKEND_<ID> = the row's index in the generated
 * list; PP_RT_BACKEND_CPU = 0, so that zeroed parameters run the reference backend.
 * PP_RT_BACKEND_CPU_STAGED: CPU backends whose tensors the executor nevertheless moves through
 * host staging copies exactly as it does a device backend's (for tests: the staging path runs,
 * and must give the CPU run's floats bit for bit, on a machine without a GPU). */
typedef enum {
#define PP_BACKEND(ID, id) PP_RT_BACKEND_##ID,
#include "pp_backend_list.h"
#undef PP_BACKEND
    PP_RT_BACKEND__COUNT
} pp_rt_backend_kind;

/* One stage on one rank as its backend's kernels see it (the memory plan fills it; the widths
 * are runtime/plan/pp_rt_sizes.h's, which the row files include). */
struct pp_rt_dims;
typedef struct {
    const struct pp_rt_dims *d; /* the block's widths on this tensor-parallel rank */
    size_t B, T, N;             /* micro-batch rows, sequence, B T */
    size_t layers;              /* the stage's blocks */
    int last;                   /* it holds the head and the loss */
    int bf16;                   /* the backend computes in bf16 (it has the precision) */
    int kernel_threads;         /* a host-threads backend's kernel threads per rank (0: 1) */
    int blas_threads;           /* and its GEMM library's threads per call (0: 1) */
} pp_backend_stage;

typedef struct {
    const char *name;        /* pprun --backend NAME, messages: "cpu", "cuda" */
    const char *device_kind; /* the pp_device.kind it runs one rank per: "cpu" (a core), "gpu" */
    const char *help;        /* pprun --help: what it computes with ("NAME: help" in at most
                              * 52 columns, the help column's width) */
    int choice;              /* 1: a pprun --backend value */
    int pprun_default;       /* 1: what pprun runs without --backend (the line omits it) */
    int device_memory;       /* tensors in a device's memory, reached from the host only by
                              * copies; 0: host memory (the step's tokens sit beside them) */
    int staged;              /* the executor moves its tensors through host staging copies
                              * when the transport takes host memory only */
    unsigned precisions;     /* 1u << pp_precision for each precision it computes in */
    int host_threads;        /* runs its kernels on host threads: pprun --threads applies */
    int device_collectives;  /* tensor-parallel collectives in device memory, one process per
                              * device (NCCL) */
    /* Its kernels' memory, for the memory plan (runtime/plan/plan.c): the attention backward's
     * scratch (in the backward's PP_MEM_WORKSPACE; required), and the kernel scratch it holds
     * all step (PP_MEM_WORKSPACE, reserved at the largest stage's need, which the backend then
     * keeps to; NULL: none) beside its GEMM library's own workspace (bytes, 0: none). */
    size_t (*attn_scratch)(const pp_backend_stage *s);
    size_t (*kernel_scratch)(const pp_backend_stage *s);
    size_t library_workspace;
    int context_parallel;    /* has the context-parallel attention kernels (attention_cp_fwd /
                              * _bwd in runtime/backend.h): pprun --cp > 1 runs on it */
} pp_backend_row;

/* The row of kind, NULL for a kind with no row. */
const pp_backend_row *pp_backend_row_of(int kind);
/* The kind (pp_rt_backend_kind) of a row of the table; -1 for NULL or another pointer. */
int pp_backend_kind(const pp_backend_row *r);
/* The row named name, NULL when none is. */
const pp_backend_row *pp_backend_row_named(const char *name);
/* The row pprun runs on a device_kind ("gpu", "cpu") by default: the first --backend choice
 * for it; NULL when none runs there. */
const pp_backend_row *pp_backend_row_for_device(const char *device_kind);
/* The row pprun runs without --backend (the one with pprun_default). */
const pp_backend_row *pp_backend_row_default(void);
/* The --backend choices: the names of the rows with `choice`, in kind order, NULL-terminated
 * (a static array, for option tables). */
const char *const *pp_backend_choices(void);
/* Whether the row computes in precision (pp_precision). */
int pp_backend_row_has_precision(const pp_backend_row *r, int precision);
/* The name a pprun line writes after --backend, NULL for pprun's default (no flag). */
const char *pp_backend_row_flag(const pp_backend_row *r);

#ifdef __cplusplus
}
#endif
#endif
