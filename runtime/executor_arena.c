/* executor_arena.c — the executor allocates from its memory plan (plan/pp_rt_plan.h's buffer
 * assignment). Each local rank reserves one arena of its plan's arena_bytes through its
 * backend when the executor is created (device memory on CUDA); every buffer of a step — a
 * received or produced tensor, a saved-activation slot, a backward's workspace, a REDUCE
 * pack, the data-parallel buffer — takes the plan's next record: the same bytes and category
 * or the step fails with PP_ERR_CHECK naming both, and the buffer is the arena at the record's
 * offset. Nothing falls back to the backend's allocator. The backend's accounting counts each
 * buffer under its category while it is live (pp_backend_count), so the measured peaks are the
 * plan's by construction; a step that ends without taking every record, or holding one, fails.
 *
 * A live buffer's planned range is checked against the others live, so a plan whose lifetimes
 * were not the step's would be an error, not two tensors in one place. Frees are checked
 * too (a pointer the arena did not hand out, or other bytes): the first such misuse is kept
 * and reported at the step's end, since the free calls return nothing.
 *
 * In an AddressSanitizer build on host memory, what no live buffer holds is poisoned (and each
 * buffer is followed by a redzone: pp_rt_plan_buf_len), so reading a buffer after it was given
 * back, or past its end, is reported as it would be with a malloc of its own.
 *
 * Not here: the persistent state (weights, grads, optimizer state, bf16 copies, tokens: the
 * stages and backends allocate it once, sized as the plan says), the CUDA backend's kernel
 * scratch (reserved at the plan's size by executor.c) and cuBLAS workspace, and the
 * transports' message copies (transport_thread.c: their reclamation depends on timing; the
 * plan counts them beside the arena), and the NCCL transport's device copies of host data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "executor.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* Host memory only: a device's addresses are not the host's to poison. */
#define ARENA_POISON(rs, p, n)                                                                     \
    do {                                                                                           \
        if (!pp_backend_is_device((rs)->be))                                                       \
            ASAN_POISON_MEMORY_REGION(p, n);                                                       \
    } while (0)
#define ARENA_UNPOISON(rs, p, n)                                                                   \
    do {                                                                                           \
        if (!pp_backend_is_device((rs)->be))                                                       \
            ASAN_UNPOISON_MEMORY_REGION(p, n);                                                     \
    } while (0)
#else
#define ARENA_POISON(rs, p, n) ((void)(rs), (void)(p), (void)(n))
#define ARENA_UNPOISON(rs, p, n) ((void)(rs), (void)(p), (void)(n))
#endif

static size_t buf_len(const pp_rt_plan_buf *b)
{
    return pp_rt_plan_buf_len(b->bytes);
}

static const char *cat_name(int c)
{
    return pp_mem_category_name((pp_mem_category)c);
}

pp_status pp_ex_arena_create(pp_rt_executor *ex, rank_state *rs)
{
    pp_ex_arena *a = &rs->arena;
    a->plan = &ex->asg[rs->r];
    a->bytes = a->plan->arena_bytes;
    if (!(a->live = pp_calloc(a->plan->n ? (size_t)a->plan->n : 1, sizeof *a->live)))
        return PP_ERR_NOMEM;
    if (!(a->base = pp_backend_reserve(rs->be, a->bytes)))
        return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
    ARENA_POISON(rs, a->base, a->bytes); /* nothing is live yet */
    return PP_OK;
}

void pp_ex_arena_destroy(rank_state *rs)
{
    pp_ex_arena *a = &rs->arena;
    if (rs->be && a->base) {
        ARENA_UNPOISON(rs, a->base, a->bytes);
        pp_backend_unreserve(rs->be, a->base, a->bytes);
    }
    free(a->live);
    memset(a, 0, sizeof *a);
}

void pp_ex_arena_begin(rank_state *rs)
{
    rs->arena.next = 0;
    rs->arena.bad = PP_OK;
    rs->arena.why[0] = '\0';
}

pp_status pp_ex_arena_end(rank_state *rs)
{
    pp_ex_arena *a = &rs->arena;
    if (a->bad != PP_OK)
        return PP_ERR(a->bad, "%s", a->why);
    if (a->next != a->plan->n)
        return PP_ERR(PP_ERR_CHECK,
                      "rank %d: the step made %d of the memory plan's %d allocations "
                      "(runtime/plan/plan.c and the executor disagree)",
                      rs->g, a->next, a->plan->n);
    if (a->n_live)
        return PP_ERR(PP_ERR_CHECK,
                      "rank %d: %d of the step's buffers are still held at its end (the first is "
                      "the memory plan's buffer #%d)",
                      rs->g, a->n_live, a->live[0]);
    return PP_OK;
}

pp_status pp_ex_alloc(rank_state *rs, size_t bytes, pp_mem_category cat, void **out)
{
    pp_ex_arena *a = &rs->arena;
    const pp_rt_plan_assignment *pl = a->plan;
    *out = NULL;
    int k = a->next;
    if (k >= pl->n)
        return PP_ERR(PP_ERR_CHECK,
                      "rank %d: the step's allocation #%d (%zu bytes of %s) is beyond the memory "
                      "plan's %d buffers",
                      rs->g, k, bytes, pp_mem_category_name(cat), pl->n);
    const pp_rt_plan_buf *b = &pl->bufs[k];
    if (b->bytes != bytes || b->cat != (int)cat)
        return PP_ERR(PP_ERR_CHECK,
                      "rank %d: the step's allocation #%d asks %zu bytes of %s; the memory plan's "
                      "buffer #%d is %zu bytes of %s",
                      rs->g, k, bytes, pp_mem_category_name(cat), k, b->bytes, cat_name(b->cat));
    size_t len = buf_len(b);
    if (b->offset % PP_RT_ARENA_ALIGN || b->offset + len > a->bytes)
        return PP_ERR(PP_ERR_CHECK,
                      "rank %d: the memory plan's buffer #%d at offset %zu (%zu bytes) is not an "
                      "aligned range of its %zu-byte arena",
                      rs->g, k, b->offset, len, a->bytes);
    for (int i = 0; i < a->n_live; i++) {
        const pp_rt_plan_buf *o = &pl->bufs[a->live[i]];
        if (b->offset < o->offset + buf_len(o) && o->offset < b->offset + len)
            return PP_ERR(PP_ERR_CHECK,
                          "rank %d: the memory plan's buffer #%d (offset %zu, %zu bytes) overlaps "
                          "buffer #%d (offset %zu), which the step still holds",
                          rs->g, k, b->offset, len, a->live[i], o->offset);
    }
    a->live[a->n_live++] = k;
    a->next++;
    pp_backend_count(rs->be, bytes, cat);
    *out = (char *)a->base + b->offset;
    ARENA_UNPOISON(rs, *out, bytes);
    return PP_OK;
}

static void misuse(pp_ex_arena *a, int g, size_t bytes, pp_mem_category cat, const char *how)
{
    if (a->bad != PP_OK)
        return;
    a->bad = PP_ERR_CHECK;
    snprintf(a->why, sizeof a->why, "rank %d: %zu bytes of %s given back %s", g, bytes,
             pp_mem_category_name(cat), how);
}

void pp_ex_free(rank_state *rs, void *p, size_t bytes, pp_mem_category cat)
{
    if (!p)
        return;
    pp_ex_arena *a = &rs->arena;
    for (int i = 0; i < a->n_live; i++) {
        const pp_rt_plan_buf *b = &a->plan->bufs[a->live[i]];
        if ((char *)a->base + b->offset != p)
            continue;
        if (b->bytes != bytes || b->cat != (int)cat)
            misuse(a, rs->g, bytes, cat, "for a buffer of the memory plan planned otherwise");
        pp_backend_uncount(rs->be, b->bytes, (pp_mem_category)b->cat);
        ARENA_POISON(rs, p, b->bytes);
        a->live[i] = a->live[--a->n_live];
        return;
    }
    misuse(a, rs->g, bytes, cat, "that the memory plan's arena did not hand out");
}

/* The stages' allocator (pp_rt_stage_params.mem_*): ctx is the rank's state. */
pp_status pp_ex_stage_alloc(void *ctx, size_t bytes, pp_mem_category cat, void **out)
{
    return pp_ex_alloc(ctx, bytes, cat, out);
}

void pp_ex_stage_free(void *ctx, void *p, size_t bytes, pp_mem_category cat)
{
    pp_ex_free(ctx, p, bytes, cat);
}
