/* plan_arena.c — offsets of a rank's step buffers in one arena (plan_arena.h). The walk gives
 * each buffer's lifetime (the events between its allocation and its free); the placement is
 * offline, greedy by size: buffers in decreasing size, each at the lowest offset free of every
 * already placed buffer whose lifetime overlaps its own (the "greedy by size" offset
 * calculation of Pisarchyk and Lee, "Efficient Memory Management for Deep Neural Net
 * Inference", 2020, which TensorFlow Lite's arena planner uses). Placing in allocation order
 * instead (first fit) wastes up to a quarter of the arena when slots of different sizes
 * interleave (the interleaved schedule's first and last virtual stages). The arena is never
 * smaller than the buffers' peak sum and can be larger (no placement reaches the peak for some
 * lifetimes; tests/test_runtime_exec_arena.c prints both: within 0.2 % on gpipe, 1f1b,
 * chimera, bitpipe, 22 % above on one rank of a 2-rank interleaved schedule). Cost: quadratic in the buffers of a rank (a few per action). What this does not do:
 * allocate the arena itself (the executor does, through the rank's backend).
 */
#include <stdlib.h>
#include <string.h>

#include "plan_arena.h"

void pp_plan_arena_reset(pp_plan_arena *a)
{
    a->n_recs = 0;
    a->n_live = 0;
    a->events = 0;
    a->high = 0;
}

/* Room for one more record in each of the three parallel tables (the same capacity: a table
 * that grew while a later one could not is merely larger than cap_recs says). */
static int grow(pp_plan_arena *a)
{
    size_t n = (size_t)a->n_recs, cap = a->cap_recs;
    size_t c = pp_grow(&a->recs, n, cap, sizeof *a->recs, 64);
    c = c ? pp_grow(&a->start, n, cap, sizeof *a->start, 64) : 0;
    c = c ? pp_grow(&a->end, n, cap, sizeof *a->end, 64) : 0;
    if (c)
        a->cap_recs = c;
    return c != 0;
}

int pp_plan_arena_alloc(pp_plan_arena *a, size_t bytes, int cat)
{
    if (!grow(a)) {
        a->nomem = 1;
        return -1;
    }
    int rec = a->n_recs++;
    a->recs[rec] = (pp_rt_plan_buf){.offset = 0, .bytes = bytes, .cat = cat};
    a->start[rec] = a->events++;
    a->end[rec] = -1;
    a->n_live++;
    return rec;
}

void pp_plan_arena_free(pp_plan_arena *a, int rec)
{
    a->end[rec] = a->events++;
    a->n_live--;
}

typedef struct {
    size_t len, off;
    int rec;
} block;

static int by_size(const void *x, const void *y)
{
    const block *a = x, *b = y;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return (a->rec > b->rec) - (a->rec < b->rec); /* then allocation order: deterministic */
}

static int by_offset(const void *x, const void *y)
{
    const block *a = x, *b = y;
    return (a->off > b->off) - (a->off < b->off);
}

/* The lowest offset where len fits between the blocks of used (sorted by offset). */
static size_t lowest_fit(const block *used, int n, size_t len)
{
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if (used[i].off >= off + len)
            break;
        if (used[i].off + used[i].len > off)
            off = used[i].off + used[i].len;
    }
    return off;
}

pp_status pp_plan_arena_place(pp_plan_arena *a)
{
    int n = a->n_recs;
    block *order = pp_calloc(n ? (size_t)n : 1, sizeof *order);
    block *used = pp_calloc(n ? (size_t)n : 1, sizeof *used);
    if (!order || !used) {
        free(order);
        free(used);
        return PP_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++)
        order[i] = (block){pp_rt_plan_buf_len(a->recs[i].bytes), 0, i};
    qsort(order, (size_t)n, sizeof *order, by_size);
    a->high = 0;
    for (int i = 0; i < n; i++) {
        int r = order[i].rec, k = 0;
        for (int j = 0; j < i; j++) { /* placed before: larger, and alive at the same time */
            int q = order[j].rec;
            if (a->start[q] < a->end[r] && a->start[r] < a->end[q])
                used[k++] = order[j];
        }
        qsort(used, (size_t)k, sizeof *used, by_offset);
        order[i].off = lowest_fit(used, k, order[i].len);
        a->recs[r].offset = order[i].off;
        if (order[i].off + order[i].len > a->high)
            a->high = order[i].off + order[i].len;
    }
    free(order);
    free(used);
    return PP_OK;
}

void pp_plan_arena_fini(pp_plan_arena *a)
{
    free(a->recs);
    free(a->start);
    free(a->end);
    memset(a, 0, sizeof *a);
}
