/* backend.c — what every backend shares: the byte accounting per category and the public
 * pp_backend_* entry points that dispatch to the table in backend.h.
 *
 * Accounting is exact: it counts the bytes callers ask for (not what the allocator rounds to),
 * so "peak" means the largest sum of live requests. It is not thread-safe: one backend per rank,
 * used from that rank's thread. Kernels live in the backends (runtime/cpu/, runtime/cuda/).
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

pp_status pp_backend_wrap(const char *name, const pp_backend_ops *ops, void *ctx, pp_backend **out)
{
    *out = NULL;
    pp_backend *be = pp_calloc(1, sizeof *be);
    if (!be) {
        ops->destroy(ctx);
        return PP_ERR(PP_ERR_NOMEM, "backend \"%s\": cannot allocate its descriptor", name);
    }
    be->name = name;
    be->ops = ops;
    be->ctx = ctx;
    *out = be;
    return PP_OK;
}

void pp_backend_destroy(pp_backend *be)
{
    if (!be)
        return;
    be->ops->destroy(be->ctx);
    free(be);
}

const char *pp_backend_name(const pp_backend *be)
{
    return be ? be->name : "none";
}

void pp_backend_mem_stats(const pp_backend *be, pp_mem_stats *out)
{
    *out = be->mem;
}

void pp_backend_mem_reset_peak(pp_backend *be)
{
    for (int c = 0; c < PP_MEM__COUNT; c++)
        be->mem.peak[c] = be->mem.current[c];
    be->mem.peak_total = be->mem.current_total;
}

static int category_ok(pp_mem_category cat)
{
    if ((int)cat < 0 || cat >= PP_MEM__COUNT) {
        PP_ERR(PP_ERR_INVALID, "memory category %d is not one of the %d categories", (int)cat,
               PP_MEM__COUNT);
        return 0;
    }
    return 1;
}

void pp_backend_count(pp_backend *be, size_t bytes, pp_mem_category cat)
{
    pp_mem_stats *m = &be->mem;
    m->current[cat] += bytes;
    m->current_total += bytes;
    if (m->current[cat] > m->peak[cat])
        m->peak[cat] = m->current[cat];
    if (m->current_total > m->peak_total)
        m->peak_total = m->current_total;
}

void pp_backend_uncount(pp_backend *be, size_t bytes, pp_mem_category cat)
{
    /* Saturate rather than wrap: a mismatched size is a caller bug, not a reason to report
     * 2^64 bytes held. */
    pp_mem_stats *m = &be->mem;
    m->current[cat] -= bytes <= m->current[cat] ? bytes : m->current[cat];
    m->current_total -= bytes <= m->current_total ? bytes : m->current_total;
}

void *pp_backend_alloc(pp_backend *be, size_t bytes, pp_mem_category cat)
{
    if (!category_ok(cat))
        return NULL;
    void *p = be->ops->alloc(be->ctx, bytes ? bytes : 1);
    if (!p) {
        PP_ERR(PP_ERR_OOM, "backend \"%s\": cannot allocate %zu bytes of %s (%zu bytes held)",
               be->name, bytes, pp_mem_category_name(cat), be->mem.current_total);
        return NULL;
    }
    pp_backend_count(be, bytes, cat);
    return p;
}

void pp_backend_free(pp_backend *be, void *p, size_t bytes, pp_mem_category cat)
{
    if (!p || !be)
        return;
    be->ops->free(be->ctx, p);
    if ((int)cat < 0 || cat >= PP_MEM__COUNT)
        return;
    pp_backend_uncount(be, bytes, cat);
}

void *pp_backend_reserve(pp_backend *be, size_t bytes)
{
    void *p = be->ops->alloc(be->ctx, bytes ? bytes : 1);
    if (!p) {
        PP_ERR(PP_ERR_OOM, "backend \"%s\": cannot allocate a %zu-byte arena (%zu bytes held)",
               be->name, bytes, be->mem.current_total + be->mem.reserved);
        return NULL;
    }
    be->mem.reserved += bytes;
    return p;
}

void pp_backend_unreserve(pp_backend *be, void *p, size_t bytes)
{
    if (!p || !be)
        return;
    be->ops->free(be->ctx, p);
    be->mem.reserved -= bytes <= be->mem.reserved ? bytes : be->mem.reserved;
}
