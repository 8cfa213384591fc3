/* cpu_pool.h — private to runtime/cpu/: the CPU backend's parallel-for, a pthread pool owned by
 * one backend instance (one rank: ranks run as threads, each with its own backend and its own
 * share of the cores, the count pprun gives OpenBLAS).
 *
 * A kernel splits [0, n) into contiguous parts, at most one per thread; the caller runs part 0
 * and waits for the others, so a kernel returns only when all its work is done and never runs
 * beside a GEMM of the same rank (the workers sleep on a condition variable meanwhile; they do
 * not spin, so OpenBLAS's threads get the cores during a GEMM). Part bounds are multiples of the
 * kernel's grain (a whole number of PP_VW chunks) so that every element is computed by the same
 * code path whatever the split: kernels only split independent work (rows, columns, (batch,
 * head) units), never a reduction, and their results are bit-identical for any thread count.
 */
#ifndef PP_RT_CPU_POOL_H
#define PP_RT_CPU_POOL_H

#include <stddef.h>

#include "pp_common.h"

typedef struct pp_cpu_pool pp_cpu_pool;

/* Runs items [lo, hi) of a kernel as part `part` (0 on the calling thread). */
typedef void (*pp_cpu_range_fn)(void *arg, size_t lo, size_t hi, int part);

/* A pool of `threads` - 1 workers (none for threads <= 1) into *out, freed with
 * pp_cpu_pool_destroy. Returns PP_OK, PP_ERR_NOMEM, or PP_ERR_INVALID when a thread cannot be
 * started (the message says which). */
pp_status pp_cpu_pool_create(int threads, pp_cpu_pool **out);
/* Stops and joins the workers, frees their scratch. NULL is a no-op. */
void pp_cpu_pool_destroy(pp_cpu_pool *p);
/* Threads that run a kernel (the caller included): 1 for a NULL pool. */
int pp_cpu_pool_threads(const pp_cpu_pool *p);

/* How many parts pp_cpu_par_for splits n items into: one per thread at most, none with fewer
 * than min_part items (a wake-up costs microseconds: small kernels run on the caller alone). */
int pp_cpu_pool_parts(const pp_cpu_pool *p, size_t n, size_t grain, size_t min_part);
/* Runs fn over [0, n) in pp_cpu_pool_parts(p, n, grain, min_part) contiguous parts whose bounds
 * are multiples of grain (the last ends at n); returns when all are done. A NULL pool runs
 * fn(arg, 0, n, 0). One caller at a time (the rank that owns the backend). */
void pp_cpu_par_for(pp_cpu_pool *p, size_t n, size_t grain, size_t min_part, pp_cpu_range_fn fn,
                    void *arg);
/* Scratch of at least `bytes` for each part 1 .. threads - 1 (part 0 uses the caller's), kept
 * and grown by the pool: pp_cpu_pool_scratch(p, part) after a PP_OK reserve. Counted in the
 * owner's PP_MEM_WORKSPACE (all parts' together) while held. Returns PP_OK, PP_ERR_NOMEM, or
 * PP_ERR_CHECK when the scratch is fixed (pp_cpu_pool_fix_scratch) below `bytes`. */
pp_status pp_cpu_pool_reserve(pp_cpu_pool *p, size_t bytes);
/* The backend whose memory accounting counts the pool's scratch (NULL: none). */
struct pp_backend;
void pp_cpu_pool_set_owner(pp_cpu_pool *p, struct pp_backend *be);
/* Reserves `all` bytes of scratch over the threads beyond the first (the memory plan's
 * figure, pp_rt_size_cpu_kernel_scratch) now, and holds the pool to it. PP_ERR_CHECK when
 * `all` is not a whole share per thread (or nonzero on a pool of one thread). */
pp_status pp_cpu_pool_fix_scratch(pp_cpu_pool *p, size_t all);
void *pp_cpu_pool_scratch(pp_cpu_pool *p, int part);

/* Work below which a kernel runs on the caller alone: waking the pool's threads costs a few
 * microseconds, a part of PP_CPU_MIN_PART floats of simple arithmetic about as much. */
#define PP_CPU_MIN_PART 8192
/* Split bounds in floats: a multiple of PP_VW (every element takes the same vector or tail
 * path whatever the split) and of a 64-byte cache line (no line written by two threads). */
#define PP_CPU_GRAIN 16

/* Rows of `cols` floats per part: at least PP_CPU_MIN_PART floats of work each. */
static inline size_t pp_cpu_min_rows(size_t cols)
{
    return cols >= PP_CPU_MIN_PART ? 1 : PP_CPU_MIN_PART / (cols ? cols : 1);
}

#endif
