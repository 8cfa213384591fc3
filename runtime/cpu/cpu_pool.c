/* cpu_pool.c — the CPU backend's parallel-for (cpu_pool.h): threads - 1 pthread workers that
 * sleep on a condition variable between kernels; a kernel is a generation number bumped under
 * the mutex, each worker runs its part of it and the caller waits for the count of parts left to
 * reach zero. Sleeping workers (not spinning ones, as OpenMP runtimes do by default) leave the
 * cores to OpenBLAS's threads during the GEMMs that alternate with the kernels.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../backend.h" /* pp_backend_count: the scratch in the owner's accounting */
#include "cpu_pool.h"

struct pp_cpu_pool {
    int threads;
    pthread_t *tid; /* threads - 1 workers; worker w runs part w */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned long gen; /* bumped for each kernel */
    int stop, left;    /* left: parts not yet finished */
    /* the kernel in flight */
    pp_cpu_range_fn fn;
    void *arg;
    size_t n, grain;
    int parts;
    /* per-part scratch (index 0 unused), counted in owner's PP_MEM_WORKSPACE; fixed: held to
     * scratch_bytes (the memory plan's figure) */
    void **scratch;
    size_t scratch_bytes;
    pp_backend *owner;
    int fixed;
};

typedef struct {
    pp_cpu_pool *p;
    int part;
} worker_arg;

/* Items [lo, hi) of part i of `parts`: whole grains, spread so parts differ by at most one. */
static void part_range(size_t n, size_t grain, int parts, int i, size_t *lo, size_t *hi)
{
    size_t units = (n + grain - 1) / grain;
    size_t a = units * (size_t)i / (size_t)parts, b = units * (size_t)(i + 1) / (size_t)parts;
    *lo = a * grain < n ? a * grain : n;
    *hi = b * grain < n ? b * grain : n;
}

static void run_part(pp_cpu_pool *p, int part)
{
    size_t lo, hi;
    part_range(p->n, p->grain, p->parts, part, &lo, &hi);
    if (lo < hi)
        p->fn(p->arg, lo, hi, part);
}

static void *worker(void *v)
{
    worker_arg *wa = v;
    pp_cpu_pool *p = wa->p;
    int part = wa->part;
    free(wa);
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->stop)
            break;
        seen = p->gen;
        if (part >= p->parts)
            continue; /* not needed for this kernel (it was not counted in `left`) */
        pthread_mutex_unlock(&p->mu);
        run_part(p, part);
        pthread_mutex_lock(&p->mu);
        if (--p->left == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

pp_status pp_cpu_pool_create(int threads, pp_cpu_pool **out)
{
    *out = NULL;
    pp_cpu_pool *p = pp_calloc(1, sizeof *p);
    if (!p)
        return PP_ERR(PP_ERR_NOMEM, "cpu backend: cannot allocate its thread pool");
    p->threads = threads > 1 ? threads : 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->scratch = pp_calloc((size_t)p->threads, sizeof *p->scratch);
    p->tid = pp_calloc((size_t)p->threads, sizeof *p->tid);
    if (!p->scratch || !p->tid) {
        pp_cpu_pool_destroy(p);
        return PP_ERR(PP_ERR_NOMEM, "cpu backend: cannot allocate a pool of %d threads", threads);
    }
    int want = p->threads;
    p->threads = 1; /* counts the workers started, for destroy */
    for (int w = 1; w < want; w++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa)
            *wa = (worker_arg){p, w};
        int rc = wa ? pthread_create(&p->tid[w], NULL, worker, wa) : -1;
        if (rc != 0) {
            free(wa);
            pp_cpu_pool_destroy(p);
            return PP_ERR(PP_ERR_INVALID, "cpu backend: cannot start kernel thread %d of %d (%s)",
                          w + 1, want, rc > 0 ? strerror(rc) : "out of memory");
        }
        p->threads = w + 1;
    }
    *out = p;
    return PP_OK;
}

void pp_cpu_pool_destroy(pp_cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int w = 1; w < p->threads; w++)
        pthread_join(p->tid[w], NULL);
    for (int w = 1; p->scratch && w < p->threads; w++)
        free(p->scratch[w]);
    free(p->scratch);
    free(p->tid);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->go);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int pp_cpu_pool_threads(const pp_cpu_pool *p)
{
    return p ? p->threads : 1;
}

int pp_cpu_pool_parts(const pp_cpu_pool *p, size_t n, size_t grain, size_t min_part)
{
    if (grain < 1)
        grain = 1;
    size_t per = min_part > grain ? min_part : grain;
    size_t most = n / per; /* parts of at least `per` items */
    int t = pp_cpu_pool_threads(p);
    return most >= (size_t)t ? t : most > 1 ? (int)most : 1;
}

void pp_cpu_par_for(pp_cpu_pool *p, size_t n, size_t grain, size_t min_part, pp_cpu_range_fn fn,
                    void *arg)
{
    if (grain < 1)
        grain = 1;
    int parts = pp_cpu_pool_parts(p, n, grain, min_part);
    if (parts == 1) {
        if (n)
            fn(arg, 0, n, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn, p->arg = arg, p->n = n, p->grain = grain, p->parts = parts;
    p->left = parts - 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    run_part(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->left > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void pp_cpu_pool_set_owner(pp_cpu_pool *p, pp_backend *be)
{
    if (p)
        p->owner = be;
}

/* Each part's scratch as the owner counts it: all of them together. */
static void count_scratch(pp_cpu_pool *p, int add)
{
    size_t all = (size_t)(p->threads - 1) * p->scratch_bytes;
    if (p->owner && all)
        (add ? pp_backend_count : pp_backend_uncount)(p->owner, all, PP_MEM_WORKSPACE);
}

pp_status pp_cpu_pool_reserve(pp_cpu_pool *p, size_t bytes)
{
    if (!p || bytes <= p->scratch_bytes)
        return PP_OK;
    if (p->fixed)
        return PP_ERR(PP_ERR_CHECK,
                      "cpu backend: a kernel needs %zu bytes of scratch for each of %d kernel "
                      "threads, the memory plan reserved %zu (runtime/plan/pp_rt_sizes.h's "
                      "pp_rt_size_cpu_kernel_scratch and the kernels disagree)",
                      bytes, p->threads - 1, p->scratch_bytes);
    count_scratch(p, 0);
    for (int w = 1; w < p->threads; w++) {
        free(p->scratch[w]);
        p->scratch[w] = malloc(bytes);
        if (!p->scratch[w]) {
            p->scratch_bytes = 0;
            return PP_ERR(PP_ERR_NOMEM,
                          "cpu backend: cannot allocate %zu bytes of scratch for "
                          "kernel thread %d",
                          bytes, w + 1);
        }
    }
    p->scratch_bytes = bytes;
    count_scratch(p, 1);
    return PP_OK;
}

pp_status pp_cpu_pool_fix_scratch(pp_cpu_pool *p, size_t all)
{
    int extra = pp_cpu_pool_threads(p) - 1;
    if (extra == 0 || all % (size_t)extra != 0)
        return all == 0 ? PP_OK
                        : PP_ERR(PP_ERR_CHECK,
                                 "cpu backend: the memory plan reserves %zu bytes of kernel "
                                 "scratch for %d kernel threads beyond the first",
                                 all, extra);
    p->fixed = 0;
    PP_TRY(pp_cpu_pool_reserve(p, all / (size_t)extra));
    p->fixed = 1;
    return PP_OK;
}

void *pp_cpu_pool_scratch(pp_cpu_pool *p, int part)
{
    return p && part > 0 && part < p->threads ? p->scratch[part] : NULL;
}
