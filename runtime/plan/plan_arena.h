/* plan_arena.h — private to the plan library: where a rank's step buffers go in its arena
 * (plan_arena.c). The plan's walk (plan.c) tells it every buffer it allocates and frees, in
 * program order; once the walk is done, pp_plan_arena_place gives each buffer its offset,
 * which the executor then carves from the rank's arena (runtime/executor_arena.c).
 */
#ifndef PP_RT_PLAN_ARENA_H
#define PP_RT_PLAN_ARENA_H

#include <stddef.h>

#include "pp_rt_plan.h"

typedef struct {
    pp_rt_plan_buf *recs; /* [n_recs] every buffer, in allocation order */
    int *start, *end;     /* [n_recs] events (allocs and frees, counted) of its lifetime */
    int n_recs;
    size_t cap_recs;      /* allocated records (pp_grow) */
    int n_live; /* allocated and not freed */
    int events;
    size_t high; /* after pp_plan_arena_place: the arena's size */
    int nomem;   /* a table could not grow: the results are void */
} pp_plan_arena;

/* Empties the arena for the next rank (keeps the tables' memory). */
void pp_plan_arena_reset(pp_plan_arena *a);
/* A buffer of bytes of cat allocated now; returns its record, or -1 (and sets nomem) when a
 * table cannot grow. */
int pp_plan_arena_alloc(pp_plan_arena *a, size_t bytes, int cat);
/* Record rec (live) freed now. */
void pp_plan_arena_free(pp_plan_arena *a, int rec);
/* Gives every record (all freed) its offset and sets high. PP_ERR_NOMEM for scratch. */
pp_status pp_plan_arena_place(pp_plan_arena *a);
void pp_plan_arena_fini(pp_plan_arena *a);

#endif
