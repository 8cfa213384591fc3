/* weights_bf16.cu — the bf16 mode's copies of the weights (see cuda_impl.h for why and when they
 * are valid) and the table of live allocations that keeps them from outliving their tensors.
 * Host bookkeeping only: the copies are written by the AdamW kernel (kernels_cuda.cu) and read
 * by the GEMMs (backend_cuda.cu). Tables are small (one entry per tensor, one per allocation)
 * and searched linearly. If growing a table ever fails, copies are switched off for the rest of
 * the backend's life (every GEMM converts again): slower, never wrong.
 */
#include <stdlib.h>

#include "cuda_impl.h"

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 1;
    size_t c = *cap ? 2 * *cap : 64;
    void *a = pp_realloc_array(*arr, c, elem);
    if (!a)
        return 0;
    *arr = a;
    *cap = c;
    return 1;
}

static void shadows_drop_all(pp_cuda_ctx *cx)
{
    while (cx->n_shadows > 0) {
        pp_cuda_shadow s = cx->shadows[--cx->n_shadows];
        pp_backend_free(cx->be, s.w16, s.n * sizeof(__nv_bfloat16), PP_MEM_WEIGHTS);
    }
}

static void switch_off(pp_cuda_ctx *cx)
{
    cx->shadows_off = 1;
    shadows_drop_all(cx);
}

void pp_cuda_track_alloc(pp_cuda_ctx *cx, void *p, size_t bytes)
{
    if (cx->shadows_off || cx->precision != PP_PREC_BF16)
        return;
    if (!grow((void **)&cx->allocs, &cx->cap_allocs, cx->n_allocs + 1, sizeof *cx->allocs)) {
        switch_off(cx); /* an untracked block could later hide a stale copy */
        return;
    }
    cx->allocs[cx->n_allocs++] = (pp_cuda_alloc_rec){p, bytes};
}

void pp_cuda_track_free(pp_cuda_ctx *cx, void *p)
{
    if (cx->shadows_off || cx->precision != PP_PREC_BF16)
        return;
    size_t bytes = 0;
    for (size_t i = 0; i < cx->n_allocs; i++)
        if (cx->allocs[i].p == p) {
            bytes = cx->allocs[i].bytes;
            cx->allocs[i] = cx->allocs[--cx->n_allocs];
            break;
        }
    const char *lo = (const char *)p, *hi = lo + bytes;
    /* Downwards: removal swaps the last entry in, and the nested free of a copy (which re-enters
     * here for the copy's own block) never removes a shadow, since no fp32 weight lies there. */
    for (size_t i = cx->n_shadows; i-- > 0;) {
        const char *w = (const char *)cx->shadows[i].w;
        if (w >= lo && w < hi) {
            pp_cuda_shadow s = cx->shadows[i];
            cx->shadows[i] = cx->shadows[--cx->n_shadows];
            pp_backend_free(cx->be, s.w16, s.n * sizeof(__nv_bfloat16), PP_MEM_WEIGHTS);
        }
    }
}

void pp_cuda_shadow_invalidate(pp_cuda_ctx *cx, const void *dst, size_t bytes)
{
    const char *lo = (const char *)dst, *hi = lo + bytes;
    for (size_t i = 0; i < cx->n_shadows; i++) {
        const char *w = (const char *)cx->shadows[i].w;
        if (w < hi && lo < w + cx->shadows[i].n * sizeof(float))
            cx->shadows[i].valid = 0;
    }
}

pp_status pp_cuda_shadow_for_update(pp_cuda_ctx *cx, const float *w, size_t n, __nv_bfloat16 **w16)
{
    *w16 = NULL;
    if (cx->shadows_off || cx->precision != PP_PREC_BF16 || n == 0)
        return PP_OK;
    for (size_t i = 0; i < cx->n_shadows; i++)
        if (cx->shadows[i].w == w && cx->shadows[i].n == n) {
            cx->shadows[i].valid = 1; /* the kernel about to run rewrites all of it */
            *w16 = cx->shadows[i].w16;
            return PP_OK;
        }
    if (!grow((void **)&cx->shadows, &cx->cap_shadows, cx->n_shadows + 1, sizeof *cx->shadows)) {
        switch_off(cx);
        return PP_OK;
    }
    void *p = pp_backend_alloc(cx->be, n * sizeof(__nv_bfloat16), PP_MEM_WEIGHTS);
    if (!p)
        return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
    /* Overlapping entries (the same memory passed as another tensor) go stale: only one
     * description of a byte may be valid. */
    pp_cuda_shadow_invalidate(cx, w, n * sizeof(float));
    cx->shadows[cx->n_shadows++] = (pp_cuda_shadow){w, n, (__nv_bfloat16 *)p, 1};
    *w16 = (__nv_bfloat16 *)p;
    return PP_OK;
}

const __nv_bfloat16 *pp_cuda_shadow_find(const pp_cuda_ctx *cx, const float *x, size_t span)
{
    for (size_t i = 0; i < cx->n_shadows; i++) {
        const pp_cuda_shadow *s = &cx->shadows[i];
        if (s->valid && x >= s->w && span <= s->n && (size_t)(x - s->w) <= s->n - span)
            return s->w16 + (x - s->w);
    }
    return NULL;
}

void pp_cuda_shadows_fini(pp_cuda_ctx *cx)
{
    for (size_t i = 0; i < cx->n_shadows; i++)
        (void)cudaFreeAsync(cx->shadows[i].w16, cx->stream); /* the backend is going away */
    free(cx->shadows);
    free(cx->allocs);
    cx->shadows = NULL;
    cx->allocs = NULL;
    cx->n_shadows = cx->n_allocs = 0;
}
