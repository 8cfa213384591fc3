/* plan_arena.c — first-fit placement of a rank's step buffers (plan_arena.h). A buffer goes
 * at the lowest offset whose gap between live buffers holds it; the arena's size is the
 * highest end ever reached. Live buffers are few (the in-flight micro-batches' slots and
 * messages), so the sorted table is scanned linearly. What this does not do: allocate the
 * arena itself (the executor does, through the rank's backend).
 */
#include <stdlib.h>
#include <string.h>

#include "plan_arena.h"

void pp_plan_arena_reset(pp_plan_arena *a)
{
    a->n_live = 0;
    a->n_recs = 0;
    a->high = 0;
}

static int grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 1;
    int c = *cap ? 2 * *cap : 64;
    while (c < need)
        c *= 2;
    void *q = pp_realloc_array(*p, (size_t)c, elem);
    if (!q)
        return 0;
    *p = q;
    *cap = c;
    return 1;
}

int pp_plan_arena_alloc(pp_plan_arena *a, size_t bytes, int cat)
{
    if (!grow((void **)&a->live, &a->cap_live, a->n_live + 1, sizeof *a->live) ||
        !grow((void **)&a->recs, &a->cap_recs, a->n_recs + 1, sizeof *a->recs)) {
        a->nomem = 1;
        return -1;
    }
    size_t len = pp_plan_arena_len(bytes), off = 0;
    int at = 0;
    for (; at < a->n_live; at++) {
        if (a->live[at].off - off >= len)
            break; /* the gap before block `at` holds it */
        off = a->live[at].off + a->live[at].len;
    }
    memmove(&a->live[at + 1], &a->live[at], (size_t)(a->n_live - at) * sizeof *a->live);
    int rec = a->n_recs++;
    a->live[at] = (pp_plan_block){off, len, rec};
    a->n_live++;
    a->recs[rec] = (pp_rt_plan_buf){.offset = off, .bytes = bytes, .cat = cat};
    if (off + len > a->high)
        a->high = off + len;
    return rec;
}

void pp_plan_arena_free(pp_plan_arena *a, int rec)
{
    for (int i = 0; i < a->n_live; i++)
        if (a->live[i].rec == rec) {
            memmove(&a->live[i], &a->live[i + 1], (size_t)(a->n_live - i - 1) * sizeof *a->live);
            a->n_live--;
            return;
        }
}

void pp_plan_arena_fini(pp_plan_arena *a)
{
    free(a->live);
    free(a->recs);
    memset(a, 0, sizeof *a);
}
