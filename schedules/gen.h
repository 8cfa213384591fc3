/* gen.h — private to schedules/: the generator entry points the registry lists, and helpers
 * every generator shares. A generator runs after the registry has checked its parameters against
 * the schedule's row (pp_sched_desc_check) and resolved chunks and group to the values it runs
 * with, so generators hold no rules of their own. */
#ifndef PP_SCHED_GEN_H
#define PP_SCHED_GEN_H

#include "pp_sched.h"

pp_status pp_gen_gpipe(const pp_sched_params *p, pp_sched **out);
pp_status pp_gen_1f1b(const pp_sched_params *p, pp_sched **out);
pp_status pp_gen_interleaved(const pp_sched_params *p, pp_sched **out);
pp_status pp_gen_chimera(const pp_sched_params *p, pp_sched **out);
pp_status pp_gen_bitpipe(const pp_sched_params *p, pp_sched **out);
pp_status pp_gen_zbh1(const pp_sched_params *p, pp_sched **out);
pp_status pp_gen_zbv(const pp_sched_params *p, pp_sched **out);
pp_status pp_gen_dualpipev(const pp_sched_params *p, pp_sched **out);

/* The V-shaped schedules' start (zbv, dualpipev): an empty schedule of p's ranks, micro-batches
 * and layer split with 2D stages, rank d holding stage d (chunk 0, on the way down) and stage
 * 2D-1-d (chunk 1, on the way back), then rank_ops(s, D, N, d) for every rank in turn, then
 * pp_gen_finish. gen_place.c. */
pp_status pp_gen_v_shape(const char *kind, const pp_sched_params *p,
                         pp_status (*rank_ops)(pp_sched *s, int D, int N, int d), pp_sched **out);
/* The same with one stage per rank (gpipe, 1f1b, zb-h1): D stages, stage d on rank d. */
pp_status pp_gen_linear(const char *kind, const pp_sched_params *p,
                        pp_status (*rank_ops)(pp_sched *s, int D, int N, int d), pp_sched **out);

/* A generator's last step: hands the schedule it built to *out when st (the build's status) is
 * PP_OK, else destroys it, so that a failed generation leaves nothing behind. Returns st. */
static inline pp_status pp_gen_finish(pp_sched *s, pp_status st, pp_sched **out)
{
    if (st != PP_OK) {
        pp_sched_destroy(s);
        return st;
    }
    *out = s;
    return PP_OK;
}

/* ---- gen_list.c: merging per-rank forward and backward lists (chimera, bitpipe) ------------ */
typedef struct {
    int ranks;        /* D */
    int per_rank;     /* capacity of each list */
    pp_action **fw;   /* [D][n_fw[r]] forwards of rank r in the order they must run */
    pp_action **bw;   /* [D][n_bw[r]] backwards and REDUCE markers (stage = reduce id), in order */
    int *n_fw, *n_bw; /* [D] */
    int *cap;         /* [D] most forwards in flight (run, backward not yet run); INT_MAX = none */
    int cost_f, cost_b; /* integer durations the merge runs against (communication free) */
    int overflow;       /* set when an add did not fit; the merge reports it */
} pp_gen_lists;

/* Empty lists with room for per_rank entries each, caps unbounded. Free with pp_gen_lists_fini. */
pp_status pp_gen_lists_init(pp_gen_lists *l, int ranks, int per_rank);
void pp_gen_lists_fini(pp_gen_lists *l);
/* Appends F to rank's forward list; B or REDUCE (stage = id, mb = -1) to its backward list. */
void pp_gen_lists_add(pp_gen_lists *l, int rank, int op, int pipe, int stage, int mb);
/* Pushes onto s (placement set, no actions yet) the merged per-rank order: list scheduling
 * against l->cost_f / l->cost_b, the earliest-startable action first, a ready backward before a
 * forward, forwards held back at the in-flight cap. REDUCE markers follow the backward before
 * them. Deadlock-free by construction; PP_ERR_DEADLOCK if the lists themselves cannot run. */
pp_status pp_gen_merge_lists(pp_sched *s, const pp_gen_lists *l);

/* The list schedulers' choice among ranks: the ranks 0..D-1 in a binary heap by a strict total
 * order less(ctx, r, s) on their current candidates, the best at h[0]; O(log D) per change
 * instead of a scan of every rank. h and pos have room for D entries each; n starts at 0. */
typedef struct {
    int (*less)(const void *ctx, int r, int s);
    const void *ctx;
    int *h, *pos; /* [D] ranks in heap order; [D] each rank's index in h */
    int n;
} pp_gen_heap;
/* Adds rank r (its candidate set). */
void pp_gen_heap_add(pp_gen_heap *q, int r);
/* Restores the order after rank r's candidate changed. */
void pp_gen_heap_fix(pp_gen_heap *q, int r);

/* pp_gen_heap_fix with q->less given as less: a caller passing its own static comparator lets
 * the compiler inline it (a call through the pointer per comparison was a tenth of a large
 * search's time); the same comparisons in the same order. */
static inline void pp_gen_heap_set(pp_gen_heap *q, int i, int r)
{
    q->h[i] = r;
    q->pos[r] = i;
}

static inline void pp_gen_heap_fix_by(pp_gen_heap *q, int r,
                                      int (*less)(const void *ctx, int r, int s))
{
    int i = q->pos[r];
    while (i > 0 && less(q->ctx, r, q->h[(i - 1) / 2])) {
        pp_gen_heap_set(q, i, q->h[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        int c = 2 * i + 1;
        if (c >= q->n)
            break;
        if (c + 1 < q->n && less(q->ctx, q->h[c + 1], q->h[c]))
            c++;
        if (!less(q->ctx, q->h[c], r))
            break;
        pp_gen_heap_set(q, i, q->h[c]);
        i = c;
    }
    pp_gen_heap_set(q, i, r);
}

#endif
