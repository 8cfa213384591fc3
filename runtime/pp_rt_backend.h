/* pp_rt_backend.h — the runtime's backends: a table of callbacks plus a context (ggml-backend style)
 * that computes the model and counts every byte it allocates; the CPU backend (OpenBLAS + C,
 * the numerical reference) and the CUDA backend (runtime/cuda/). The table itself is private
 * (runtime/backend.h); code outside runtime/ creates, queries and destroys backends.
 * Part of the runtime's public headers (pp_rt.h includes them all); stands alone.
 */
#ifndef PP_RT_BACKEND_PUB_H
#define PP_RT_BACKEND_PUB_H

#include <stddef.h>

#include "pp_common.h"
#include "pp_rt_mem.h"
#include "pp_rt_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A backend is a table of callbacks plus a context (ggml-backend style). Every byte the
 * runtime uses is allocated through it and counted in its pp_mem_stats. The kernels' exact
 * list is private to runtime/ (runtime/backend.h); code outside runtime/ only creates,
 * queries and destroys backends. One backend instance per rank, used from one thread at a
 * time. Lifecycle: *_create -> alloc / kernels / queries -> pp_backend_destroy. */
typedef struct pp_backend pp_backend;

/* ---- creation ---- */

/* Creates a CPU backend (host memory, OpenBLAS + C kernels) into *out, which the caller frees
 * with pp_backend_destroy; its kernels run on the threads pp_backend_cpu_set_threads (or
 * pp_backend_cpu_set_kernel_threads) last set, 1 by default. Returns PP_OK, PP_ERR_NOMEM, or
 * PP_ERR_INVALID when a thread cannot start. */
pp_status pp_backend_cpu_create(pp_backend **out);
/* A CPU backend whose own kernels (norms, attention, activations, cross-entropy, AdamW, ...) run
 * on `threads` threads (1 to PP_CPU_MAX_THREADS; its pool, started here, sleeps between kernels),
 * with results bit-identical for any count. Its GEMMs use OpenBLAS's process-wide count
 * (pp_backend_cpu_set_threads). Returns PP_OK, PP_ERR_INVALID (a count out of range, a thread
 * that cannot start), PP_ERR_NOMEM. */
#define PP_CPU_MAX_THREADS 1024
pp_status pp_backend_cpu_create_threads(int threads, pp_backend **out);
/* Threads of the CPU backends (OpenBLAS's count is process-wide): n >= 1 applies now to
 * OpenBLAS and to every CPU backend created later by pp_backend_cpu_create (its BLAS and its
 * kernel threads); the default is 1, one thread per rank. Returns the count OpenBLAS reports it
 * uses (openblas_get_num_threads), which may be less than asked where OpenBLAS was built for
 * fewer threads. */
int pp_backend_cpu_set_threads(int n);
/* Kernel threads of the CPU backends created later by pp_backend_cpu_create (n >= 1; after
 * pp_backend_cpu_set_threads, which sets both): their own kernels only, not OpenBLAS's. Returns
 * the count now in force. */
int pp_backend_cpu_set_kernel_threads(int n);
/* The count OpenBLAS uses now (openblas_get_num_threads). */
int pp_backend_cpu_threads(void);
/* The count OpenBLAS uses in the CPU backends created later (applied now, as their creation
 * applies it): with the kernel threads, what sizes their kernels' scratch in the memory plan. */
int pp_backend_cpu_blas_threads(void);

/* The CUDA backend (runtime/cuda/): device memory, cuBLAS GEMMs, CUDA kernels, on one device.
 * PP_PREC_FP32 computes in fp32 throughout (no TF32: the numerical twin of the CPU backend);
 * PP_PREC_BF16 keeps every tensor fp32 (master weights, activations, gradients) and runs the
 * GEMMs on bf16 copies of their operands, made at the GEMM boundary in a backend workspace,
 * with fp32 accumulation and fp32 results (what users train with); from the first AdamW step
 * on it also keeps a bf16 copy of every weight it updates (2 bytes per parameter, counted under
 * "weights") so that GEMMs read weights without converting them. Kernels run in order on the
 * backend's compute stream; download and xent_fwd (the loss) wait for them.
 * Use it from one thread whose current device is `device` (create sets it on the calling
 * thread; one process per GPU, as under mpirun, needs nothing more).
 * Creates it into *out (the caller's, freed with pp_backend_destroy); returns PP_OK,
 * PP_ERR_UNSUPPORTED when built without CUDA or when the machine has no CUDA device (the
 * message says which), PP_ERR_INVALID for a bad device index or precision. */
pp_status pp_backend_cuda_create(int device, int precision, pp_backend **out);

/* Creates a backend of `kind` (pp_rt_backend_kind, a row of common/pp_backends.h: CPU and
 * staged CPU give a CPU backend; CUDA one on `device` in `precision`) into *out, freed by the
 * caller with pp_backend_destroy. Returns what the row's maker (runtime/backend.h) returns;
 * PP_ERR_INVALID for a kind without a row. */
pp_status pp_backend_create(int kind, int device, int precision, pp_backend **out);
/* Returns the devices a backend of `kind` can be created on (its maker's count): the CUDA
 * devices the driver reports for PP_RT_BACKEND_CUDA (0 in a build without CUDA or on a
 * machine without one), 0 for the host kinds (they need no device). */
int pp_backend_device_count(int kind);

/* Frees the backend and its context; the caller must have freed what it allocated. NULL is a
 * no-op. */
void pp_backend_destroy(pp_backend *be);
/* Returns a static string: "cpu", "cuda" ("none" for NULL). */
const char *pp_backend_name(const pp_backend *be);

/* ---- memory and its accounting ---- */

/* Returns a buffer of `bytes` in the backend's memory (host for CPU, device for CUDA), counted
 * under `cat`, owned by the caller who frees it with pp_backend_free; NULL when out of memory
 * (PP_ERR_OOM's message names the size and category) or for a bad category. */
void *pp_backend_alloc(pp_backend *be, size_t bytes, pp_mem_category cat);
/* Frees p, taken from pp_backend_alloc with the same bytes and cat. NULL p is a no-op. */
void pp_backend_free(pp_backend *be, void *p, size_t bytes, pp_mem_category cat);
/* Copies the backend's counters into *out (caller-owned). */
void pp_backend_mem_stats(const pp_backend *be, pp_mem_stats *out);
/* Lowers every peak to what is held now, so later peaks are those of what follows. */
void pp_backend_mem_reset_peak(pp_backend *be);
/* Returns 1 when the backend's memory is a device's (reached from the host only by copies:
 * host transports get its tensors staged), 0 for host memory. */
int pp_backend_is_device(const pp_backend *be);

/* ---- device ops, for any backend (a host backend answers at once) ---- */

/* Makes the backend's device current on the calling thread and waits for the work queued on
 * it. Returns PP_OK at once on a host backend; PP_ERR_DEVICE when the device fails. */
pp_status pp_backend_sync(pp_backend *be);
/* Allocates the kernels' scratch (PP_MEM_WORKSPACE) at `bytes`, the memory plan's figure,
 * and holds the backend to it: a kernel that would need more fails with PP_ERR_CHECK naming
 * both. Returns PP_OK (at once on a backend without kernel scratch: the CPU's with one kernel
 * thread), PP_ERR_OOM, PP_ERR_CHECK. */
pp_status pp_backend_scratch_reserve(pp_backend *be, size_t bytes);
/* Fills the device's free and total bytes as its driver sees them (next to the backend's own
 * accounting, pp_backend_mem_stats). Returns PP_OK, or PP_ERR_UNSUPPORTED on a host backend
 * (both set to 0). */
pp_status pp_backend_mem_info(pp_backend *be, size_t *free_bytes, size_t *total_bytes);

/* Device-side timing marks: n points on the backend's compute stream. record(i) marks the
 * point the stream has reached once the work queued so far is done; read waits for the stream
 * and gives seconds[i] = time from mark 0 to mark i (-1 for a mark not recorded since the last
 * read), then forgets the records. The executor marks every action with them where the
 * backend has them, so its spans on a device are device time, not launch time. */
typedef struct pp_backend_marks pp_backend_marks;
/* Returns 1 when the backend has device timing marks (CUDA), 0 when host clocks time it. */
int pp_backend_has_marks(const pp_backend *be);
/* Creates n marks on be into *out (the caller frees them with pp_backend_marks_destroy,
 * before the backend). Returns PP_OK; PP_ERR_UNSUPPORTED when the backend has none;
 * PP_ERR_INVALID for n < 1. */
pp_status pp_backend_marks_create(pp_backend *be, int n, pp_backend_marks **out);
/* Records mark i. Returns PP_OK, or PP_ERR_INVALID for i outside 0..n-1. */
pp_status pp_backend_marks_record(pp_backend_marks *mk, int i);
/* Waits for the stream and fills seconds[n]. Returns PP_OK; PP_ERR_INVALID when mark 0 was
 * not recorded since the last read. */
pp_status pp_backend_marks_read(pp_backend_marks *mk, double *seconds);
/* Frees the marks. NULL is a no-op. */
void pp_backend_marks_destroy(pp_backend_marks *mk);

/* ---- CUDA-only queries (tools and tests of the CUDA backend; the executor uses the ops
 * above). Each returns PP_ERR_UNSUPPORTED for any other backend (or a build without CUDA). */

/* Waits for the compute and communication streams (the device made current). Returns PP_OK. */
pp_status pp_backend_cuda_sync(pp_backend *be);
/* Records the timer's start event on the compute stream. Returns PP_OK. */
pp_status pp_backend_cuda_timer_start(pp_backend *be);
/* Records the stop event, waits for it and sets *ms to the milliseconds since the start event.
 * Returns PP_OK. */
pp_status pp_backend_cuda_timer_stop(pp_backend *be, double *ms);
/* The device's free and total bytes (cudaMemGetInfo). Returns PP_OK. */
pp_status pp_backend_cuda_mem_info(pp_backend *be, size_t *free_bytes, size_t *total_bytes);
/* Fills the backend's device index and its two streams as opaque handles (cudaStream_t values,
 * owned by the backend: for a CUDA-aware transport such as NCCL, which enqueues on `comm` and
 * orders itself against `compute` with events; no CUDA type crosses this header). Returns
 * PP_OK. */
pp_status pp_backend_cuda_streams(pp_backend *be, int *device, void **compute, void **comm);
/* The CUDA backend's own timing marks (runtime/cuda/marks_cuda.cu), the implementation of the
 * pp_backend_marks_* above on a CUDA backend, with the same meaning. create returns PP_OK and
 * the marks in *out (freed with pp_cuda_marks_destroy, NULL a no-op); PP_ERR_INVALID for n < 1
 * or a bad index; record and read return PP_OK otherwise. */
typedef struct pp_cuda_marks pp_cuda_marks;
pp_status pp_cuda_marks_create(pp_backend *be, int n, pp_cuda_marks **out);
pp_status pp_cuda_marks_record(pp_cuda_marks *mk, int i);
pp_status pp_cuda_marks_read(pp_cuda_marks *mk, double *seconds); /* seconds[n] */
void pp_cuda_marks_destroy(pp_cuda_marks *mk);
/* Returns the CUDA devices the driver reports: 0 in a build without CUDA or on a machine
 * without one. */
int pp_cuda_device_count(void);

#ifdef __cplusplus
}
#endif
#endif
