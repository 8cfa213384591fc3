/* gen_list.c — the list scheduler the bidirectional generators (chimera, bitpipe) share.
 *
 * Input: for every rank, the order of its forwards and the order of its backwards (with REDUCE
 * markers among the backwards), and a limit on forwards in flight per rank. Output: one merged
 * per-rank order, chosen by running the ranks against integer unit costs (communication free):
 * whenever a rank is free it runs the next backward of its list if that is ready, else the next
 * forward if it is ready and the rank is under its in-flight limit; globally the action that can
 * start earliest goes first (ties: backward before forward, then the lower rank). A REDUCE
 * marker is emitted right after the backward that precedes it in the list.
 *
 * Because the merged order is an execution that actually completed, it is free of deadlock by
 * construction. With the limit set to a 1F1B warm-up plus one, this is 1F1B whose switch points
 * are decided by readiness instead of fixed counts.
 *
 * It deliberately does not model real costs, links or memory: the costs only pick an order;
 * pp_sim_run predicts its time. Nothing here allocates beyond the generator's call. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "gen.h"

typedef struct {
    const pp_sched *s;
    long *f_end; /* [n_pipes * S * N] end time of F(p,s,m), -1 while not run */
    long *b_end; /* [n_pipes * S * N] end time of B(p,s,m), -1 while not run */
} list_state;

static size_t op_index(const pp_sched *s, int pipe, int stage, int mb)
{
    return ((size_t)pipe * (size_t)s->stages_per_pipe + (size_t)stage) * (size_t)s->microbatches +
           (size_t)mb;
}

/* Time from which compute action a may start (its inputs have arrived), or -1 if an input is
 * still missing. */
static long ready_at(const list_state *st, const pp_action *a)
{
    const pp_sched *s = st->s;
    if (a->op == PP_OP_F)
        return a->stage == 0 ? 0 : st->f_end[op_index(s, a->pipe, pp_action_src_stage(a), a->mb)];
    long f = st->f_end[op_index(s, a->pipe, a->stage, a->mb)];
    if (f < 0 || a->stage == s->stages_per_pipe - 1)
        return f;
    long g = st->b_end[op_index(s, a->pipe, pp_action_src_stage(a), a->mb)];
    return g < 0 ? -1 : (f > g ? f : g);
}

/* Pushes the REDUCE markers at the head of rank r's backward list. */
static pp_status flush_reduces(pp_sched *s, const pp_gen_lists *l, int r, int *bi)
{
    while (bi[r] < l->n_bw[r] && l->bw[r][bi[r]].op == PP_OP_REDUCE) {
        PP_TRY(pp_sched_push(s, r, PP_OP_REDUCE, 0, l->bw[r][bi[r]].stage, -1));
        bi[r]++;
    }
    return PP_OK;
}

typedef struct {
    long start;
    int backward; /* 1 = backward, 0 = forward */
    int rank;
} pick;

/* The merge's order of candidates (p, rank r's) as one integer, lower first: a rank with a
 * candidate before one without; among those with one the earlier start, then backward before
 * forward, then the lower rank; among those without, the lower rank. Exact: ranks < 2^17
 * (PP_SCHED_MAX_RANKS) and starts < 2^45 (at most cost_b per action of at most 2^21 stage
 * visits x 2 pipes). Comparing these is most of the merge's time. */
static uint64_t pick_key(pick p, int r)
{
    if (p.rank < 0)
        return UINT64_C(1) << 63 | (uint64_t)r;
    return (uint64_t)p.start << 18 | (uint64_t)!p.backward << 17 | (uint64_t)r;
}

/* Rank r's candidate: its next backward if ready, else (or if later) its next forward if ready
 * and under the in-flight limit, the lower pick_key; rank -1 when neither can run. */
static pick rank_pick(const pp_gen_lists *l, const list_state *st, const long *t, const int *fi,
                      const int *bi, const int *inflight, int r)
{
    pick best = {0, 0, -1};
    if (bi[r] < l->n_bw[r]) {
        long at = ready_at(st, &l->bw[r][bi[r]]);
        pick c = {at > t[r] ? at : t[r], 1, r};
        if (at >= 0 && pick_key(c, r) < pick_key(best, r))
            best = c;
    }
    if (fi[r] < l->n_fw[r] && (!l->cap || inflight[r] < l->cap[r])) {
        long at = ready_at(st, &l->fw[r][fi[r]]);
        pick c = {at > t[r] ? at : t[r], 0, r};
        if (at >= 0 && pick_key(c, r) < pick_key(best, r))
            best = c;
    }
    return best;
}

/* ---- the ranks in a heap by their candidates (gen.h) ---------------------------------------- */
void pp_gen_heap_fix(pp_gen_heap *q, int r)
{
    pp_gen_heap_fix_by(q, r, q->less);
}

void pp_gen_heap_add(pp_gen_heap *q, int r)
{
    pp_gen_heap_set(q, q->n++, r); /* a leaf: the fix sifts it up */
    pp_gen_heap_fix(q, r);
}

static int rank_less(const void *ctx, int r, int s)
{
    const uint64_t *key = ctx;
    return key[r] < key[s];
}

/* pick_key is a total order, so the global choice is the best of the ranks' candidates (the
 * heap's top). Running an action changes its own rank's state and the readiness of the actions
 * that consume its output (the next stage's F or the previous stage's B, on one other rank; this
 * stage's B is on the same rank), so only those two candidates are recomputed after each step. */
static pp_status run_lists(pp_sched *s, const pp_gen_lists *l, list_state *st, long *t, int *fi,
                           int *bi, int *inflight, pick *cand, uint64_t *key, pp_gen_heap *q)
{
    int D = s->ranks;
    long left = 0;
    for (int r = 0; r < D; r++) {
        PP_TRY(flush_reduces(s, l, r, bi));
        left += (l->n_bw[r] - bi[r]) + (l->n_fw[r] - fi[r]);
        cand[r] = rank_pick(l, st, t, fi, bi, inflight, r);
        key[r] = pick_key(cand[r], r);
        pp_gen_heap_add(q, r);
    }
    while (left > 0) {
        pick best = cand[q->h[0]];
        if (best.rank < 0)
            return PP_ERR(PP_ERR_DEADLOCK,
                          "%s: the per-rank forward/backward lists cannot be merged: every rank "
                          "waits (generator bug for D = %d, N = %d)",
                          s->kind, s->ranks, s->microbatches);
        int r = best.rank, before = bi[r];
        const pp_action *a = best.backward ? &l->bw[r][bi[r]++] : &l->fw[r][fi[r]++];
        long end = best.start + (best.backward ? l->cost_b : l->cost_f);
        size_t k = op_index(s, a->pipe, a->stage, a->mb);
        (best.backward ? st->b_end : st->f_end)[k] = end;
        t[r] = end;
        inflight[r] += best.backward ? -1 : 1;
        PP_TRY(pp_sched_push(s, r, (pp_op_kind)a->op, a->pipe, a->stage, a->mb));
        if (best.backward)
            PP_TRY(flush_reduces(s, l, r, bi));
        left -= best.backward ? bi[r] - before : 1;
        cand[r] = rank_pick(l, st, t, fi, bi, inflight, r);
        key[r] = pick_key(cand[r], r);
        pp_gen_heap_fix_by(q, r, rank_less);
        int dr = pp_sched_rank_of(s, a->pipe, pp_action_dst_stage(a));
        if (dr >= 0 && dr != r) {
            cand[dr] = rank_pick(l, st, t, fi, bi, inflight, dr);
            key[dr] = pick_key(cand[dr], dr);
            pp_gen_heap_fix_by(q, dr, rank_less);
        }
    }
    return PP_OK;
}

pp_status pp_gen_merge_lists(pp_sched *s, const pp_gen_lists *l)
{
    if (l->overflow)
        return PP_ERR(PP_ERR_INVALID, "%s: a per-rank list outgrew its %d entries (generator bug)",
                      s->kind, l->per_rank);
    size_t n = (size_t)s->n_pipes * (size_t)s->stages_per_pipe * (size_t)s->microbatches;
    list_state st = {s, pp_calloc(n, sizeof(long)), pp_calloc(n, sizeof(long))};
    long *t = pp_calloc((size_t)s->ranks, sizeof *t);
    int *fi = pp_calloc((size_t)s->ranks, sizeof *fi);
    int *bi = pp_calloc((size_t)s->ranks, sizeof *bi);
    int *inflight = pp_calloc((size_t)s->ranks, sizeof *inflight);
    pick *cand = pp_calloc((size_t)s->ranks, sizeof *cand);
    uint64_t *key = pp_calloc((size_t)s->ranks, sizeof *key);
    pp_gen_heap q = {rank_less, key, pp_calloc(2 * (size_t)s->ranks, sizeof(int)), NULL, 0};
    pp_status rc = PP_ERR_NOMEM;
    if (st.f_end && st.b_end && t && fi && bi && inflight && cand && key && q.h) {
        rc = PP_OK;
        for (int r = 0; r < s->ranks && rc == PP_OK; r++) /* every list, merged */
            rc = pp_sched_reserve(s, r, s->n_ops[r] + l->n_fw[r] + l->n_bw[r]);
    }
    if (rc == PP_OK) {
        for (size_t i = 0; i < n; i++)
            st.f_end[i] = st.b_end[i] = -1;
        q.pos = q.h + s->ranks;
        rc = run_lists(s, l, &st, t, fi, bi, inflight, cand, key, &q);
    }
    free(q.h);
    free(st.f_end);
    free(st.b_end);
    free(t);
    free(fi);
    free(bi);
    free(inflight);
    free(cand);
    free(key);
    return rc;
}

/* ---- parameters ------------------------------------------------------------------------- */

/* ---- per-rank lists ------------------------------------------------------------------------ */

pp_status pp_gen_lists_init(pp_gen_lists *l, int ranks, int per_rank)
{
    *l = (pp_gen_lists){0};
    l->ranks = ranks;
    l->fw = pp_calloc((size_t)ranks, sizeof *l->fw);
    l->bw = pp_calloc((size_t)ranks, sizeof *l->bw);
    l->n_fw = pp_calloc((size_t)ranks, sizeof *l->n_fw);
    l->n_bw = pp_calloc((size_t)ranks, sizeof *l->n_bw);
    l->cap = pp_calloc((size_t)ranks, sizeof *l->cap);
    if (!l->fw || !l->bw || !l->n_fw || !l->n_bw || !l->cap) {
        pp_gen_lists_fini(l);
        return PP_ERR_NOMEM;
    }
    for (int r = 0; r < ranks; r++) {
        l->fw[r] = pp_calloc((size_t)per_rank, sizeof(pp_action));
        l->bw[r] = pp_calloc((size_t)per_rank, sizeof(pp_action));
        if (!l->fw[r] || !l->bw[r]) {
            pp_gen_lists_fini(l);
            return PP_ERR_NOMEM;
        }
        l->cap[r] = INT_MAX;
    }
    l->per_rank = per_rank;
    return PP_OK;
}

void pp_gen_lists_fini(pp_gen_lists *l)
{
    if (l->fw)
        for (int r = 0; r < l->ranks; r++)
            free(l->fw[r]);
    if (l->bw)
        for (int r = 0; r < l->ranks; r++)
            free(l->bw[r]);
    free(l->fw);
    free(l->bw);
    free(l->n_fw);
    free(l->n_bw);
    free(l->cap);
    *l = (pp_gen_lists){0};
}

void pp_gen_lists_add(pp_gen_lists *l, int rank, int op, int pipe, int stage, int mb)
{
    pp_action a = {.op = (uint8_t)op, .pipe = (uint8_t)pipe, .stage = stage, .mb = mb, .peer = -1};
    int *n = op == PP_OP_F ? &l->n_fw[rank] : &l->n_bw[rank];
    if (*n >= l->per_rank) {
        l->overflow = 1; /* reported by pp_gen_merge_lists */
        return;
    }
    (op == PP_OP_F ? l->fw : l->bw)[rank][(*n)++] = a;
}
