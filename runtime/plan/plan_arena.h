/* plan_arena.h — private to the plan library: the first-fit placement of a rank's step buffers
 * in one arena (plan_arena.c). The plan's walk (plan.c) calls it for every buffer it allocates
 * and frees, in program order, so the offsets it gives are the ones the executor then carves
 * from the rank's arena (runtime/executor_arena.c).
 */
#ifndef PP_RT_PLAN_ARENA_H
#define PP_RT_PLAN_ARENA_H

#include <stddef.h>

#include "pp_rt_plan.h"

typedef struct {
    size_t off, len; /* len: the record's bytes rounded up to PP_RT_ARENA_ALIGN */
    int rec;         /* index in recs */
} pp_plan_block;

typedef struct {
    pp_plan_block *live; /* [n_live] sorted by offset, disjoint */
    int n_live, cap_live;
    pp_rt_plan_buf *recs; /* [n_recs] every buffer placed, in allocation order */
    int n_recs, cap_recs;
    size_t high; /* high-water mark: the arena's size */
    int nomem;   /* a table could not grow: the results are void */
} pp_plan_arena;

/* Empties the arena for the next rank (keeps the tables' memory). */
void pp_plan_arena_reset(pp_plan_arena *a);
/* Places bytes of cat at the lowest offset where they fit; returns the record's index, or -1
 * (and sets nomem) when a table cannot grow. */
int pp_plan_arena_alloc(pp_plan_arena *a, size_t bytes, int cat);
/* Frees record rec (live). */
void pp_plan_arena_free(pp_plan_arena *a, int rec);
void pp_plan_arena_fini(pp_plan_arena *a);

/* A buffer's length in the arena. */
static inline size_t pp_plan_arena_len(size_t bytes)
{
    size_t b = bytes ? bytes : 1;
    return (b + PP_RT_ARENA_ALIGN - 1) / PP_RT_ARENA_ALIGN * PP_RT_ARENA_ALIGN;
}

#endif
