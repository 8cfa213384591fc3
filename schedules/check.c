/* check.c — pp_sched_check: is a schedule a valid, complete, deadlock-free program?
 *
 * Passes, each O(actions) with an O(1) table keyed by (pipe, stage, micro-batch):
 *   1. placement and reduce descriptors are in range;
 *   2. every action is well-formed and on the right rank, an overlapped pair an F and the B
 *      right after it; record where each op of each key sits (duplicates are caught here);
 *   3. completeness: one F per (pipe, stage, mb) of that pipe, and its backward either fused (one
 *      B) or split (one I and one W), never both; every RECV has its SEND and vice versa; every
 *      REDUCE on every participant;
 *   4. program order on each rank: local dependencies, I after its F, W after its I, SEND after
 *      its producer, REDUCE after the last backward (B, or W where split) of the stages it
 *      reduces that the rank holds;
 *   5. deadlock: run the lists with RECV blocking until its SEND ran and REDUCE as a barrier.
 *      Barriers are stricter than the asynchronous collectives the simulator models, so a schedule
 *      that completes here completes there.
 * A SEND/RECV whose peer is -1 (not lowered, or parsed from a format without peers) takes its
 * peer from the placement; a peer that is set must match it.
 * Split backward (the Zero Bubble papers' B-input / B-weight, PyTorch's I / W): I computes the
 * input gradient, so it is what SEND_B ships and what the previous stage's backward waits for
 * (I of stage s before the I or B of stage s-1 of the same micro-batch, across ranks through
 * SEND_B / RECV_B, locally through the hand-over); W computes the weight gradient from what its
 * I left behind and moves no data, so it only has to follow that I on the same rank.
 * The checker reports the first problem it meets; it does not try to list them all. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sim_wait.h"

typedef struct {
    const pp_sched *s;
    int S, N, D, P;
    size_t nk;     /* keys: P * S * N */
    int32_t *pos;  /* [N_SLOTS * nk] action index of each op (slot_of) of each key on its rank,
                      -1 */
    int32_t *rpos; /* [n_reduces * PP_REDUCE_MAX_RANKS] REDUCE index on participant j, -1 */
    int *n_mb;     /* [P] micro-batches that go through each pipe */
    int *b_done;   /* [P * S] backwards met so far in program order */
} checker;

/* The position table has a slot per op kind that is keyed by (pipe, stage, mb): F..RECV_B, then
 * I and W (REDUCE, between them in the enum, is keyed by its id in rpos). */
#define N_SLOTS 8
static inline size_t slot_of(int op)
{
    return op < PP_OP_REDUCE ? (size_t)op : (size_t)op - 1;
}
#define POS(ck, op, key) ((ck)->pos[slot_of(op) * (ck)->nk + (key)])

/* Where the backward of key sits that ships the input gradient: its B, or its I when split; -1
 * when it has neither. */
static int grad_pos(const checker *ck, size_t key)
{
    int b = POS(ck, PP_OP_B, key);
    return b >= 0 ? b : POS(ck, PP_OP_I, key);
}
/* Where the backward of key sits that completes its weight gradient: B, or W when split. */
static int wgrad_pos(const checker *ck, size_t key)
{
    int b = POS(ck, PP_OP_B, key);
    return b >= 0 ? b : POS(ck, PP_OP_W, key);
}

static pp_status fail(const checker *ck, int r, int i, const char *fmt, ...) PP_PRINTF(4, 5);

/* "rank r, action i (ACTION): reason" */
static pp_status fail(const checker *ck, int r, int i, const char *fmt, ...)
{
    char what[128], why[768];
    pp_action_str(ck->s, &ck->s->ops[r][i], what, sizeof what);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return PP_ERR(PP_ERR_CHECK, "rank %d, action %d (%s): %s", r, i, what, why);
}

static pp_status check_placement(const checker *ck)
{
    const pp_sched *s = ck->s;
    for (int p = 0; p < ck->P; p++)
        for (int k = 0; k < ck->S; k++) {
            int r = pp_sched_stage(s, p, k)->rank;
            if (r < 0 || r >= ck->D)
                return PP_ERR(PP_ERR_CHECK,
                              "stage %d of pipe %d is placed on rank %d; every stage needs a "
                              "rank in 0..%d",
                              k, p, r, ck->D - 1);
        }
    for (int m = 0; m < ck->N; m++)
        if (s->mb_pipe[m] >= ck->P)
            return PP_ERR(PP_ERR_CHECK,
                          "micro-batch %d goes through pipe %d, but the schedule has %d pipe(s)", m,
                          s->mb_pipe[m], ck->P);
    for (int id = 0; id < s->n_reduces; id++) {
        const pp_reduce *red = &s->reduces[id];
        for (int j = 0; j < red->n_ranks; j++)
            if (red->ranks[j] < 0 || red->ranks[j] >= ck->D)
                return PP_ERR(PP_ERR_CHECK, "REDUCE #%d lists rank %d; ranks are 0..%d", id,
                              red->ranks[j], ck->D - 1);
        for (int t = 0; t < red->n_stages; t++) {
            pp_stage_ref sr = red->stages[t];
            if (sr.pipe < 0 || sr.pipe >= ck->P || sr.stage < 0 || sr.stage >= ck->S)
                return PP_ERR(PP_ERR_CHECK,
                              "REDUCE #%d lists pipe %d stage %d, outside the %d pipe(s) of %d "
                              "stages",
                              id, sr.pipe, sr.stage, ck->P, ck->S);
            int q = pp_sched_stage(s, sr.pipe, sr.stage)->rank;
            if (pp_reduce_participant(red, q) < 0)
                return PP_ERR(PP_ERR_CHECK,
                              "REDUCE #%d lists pipe %d stage %d, which is on rank %d, not one "
                              "of its participants",
                              id, sr.pipe, sr.stage, q);
        }
    }
    return PP_OK;
}

static pp_status record_reduce(checker *ck, int r, int i)
{
    const pp_sched *s = ck->s;
    int id = s->ops[r][i].stage;
    if (id < 0 || id >= s->n_reduces)
        return fail(ck, r, i, "REDUCE #%d does not exist (the schedule has %d reduces)", id,
                    s->n_reduces);
    int j = pp_reduce_participant(&s->reduces[id], r);
    if (j < 0)
        return fail(ck, r, i, "rank %d is not a participant of REDUCE #%d", r, id);
    int32_t *slot = &ck->rpos[(size_t)id * PP_REDUCE_MAX_RANKS + j];
    if (*slot >= 0)
        return fail(ck, r, i, "duplicated: this rank already issues REDUCE #%d at action %d", id,
                    *slot);
    *slot = i;
    return PP_OK;
}

/* An overlapped pair (pp_action.overlap) is an F and the B right after it on the same rank. */
static pp_status check_overlap(const checker *ck, int r, int i)
{
    const pp_sched *s = ck->s;
    const pp_action *a = &s->ops[r][i];
    if (a->op != PP_OP_F)
        return fail(ck, r, i, "only a forward opens an overlapped pair (OVERLAP_F_B), not a %s",
                    pp_op_name((pp_op_kind)a->op));
    if (i + 1 >= s->n_ops[r])
        return fail(ck, r, i,
                    "an overlapped pair needs its B right after the F; the rank ends here");
    if (s->ops[r][i + 1].op != PP_OP_B) {
        char next[128];
        pp_action_str(s, &s->ops[r][i + 1], next, sizeof next);
        return fail(ck, r, i,
                    "an overlapped pair is the F and the B right after it (OVERLAP_F_B), but "
                    "action %d is %s",
                    i + 1, next);
    }
    return PP_OK;
}

/* Pass 2: one action is well-formed, on the rank of its stage, and not a duplicate. */
static pp_status record_action(checker *ck, int r, int i)
{
    const pp_sched *s = ck->s;
    const pp_action *a = &s->ops[r][i];
    if (a->op >= PP_OP__COUNT)
        return fail(ck, r, i, "unknown action kind %d", a->op);
    if (a->overlap)
        PP_TRY(check_overlap(ck, r, i));
    if (a->op == PP_OP_REDUCE)
        return record_reduce(ck, r, i);
    if (a->pipe >= ck->P)
        return fail(ck, r, i, "pipe %d does not exist (the schedule has %d pipe(s))", a->pipe,
                    ck->P);
    if (a->stage < 0 || a->stage >= ck->S)
        return fail(ck, r, i, "stage %d does not exist (stages are 0..%d)", a->stage, ck->S - 1);
    if (a->mb < 0 || a->mb >= ck->N)
        return fail(ck, r, i, "micro-batch %d does not exist (micro-batches are 0..%d)", a->mb,
                    ck->N - 1);
    if (s->mb_pipe[a->mb] != a->pipe)
        return fail(ck, r, i, "micro-batch %d goes through pipe %d, not pipe %d", a->mb,
                    s->mb_pipe[a->mb], a->pipe);
    int home = pp_sched_stage(s, a->pipe, a->stage)->rank;
    if (home != r)
        return fail(ck, r, i, "wrong rank: stage %d of pipe %d is placed on rank %d", a->stage,
                    a->pipe, home);
    if (pp_op_is_comm(a->op)) {
        int ps = pp_action_peer_stage(a);
        if (ps < 0 || ps >= ck->S)
            return fail(ck, r, i,
                        "stage %d is at the end of pipe %d: there is no stage %d to "
                        "exchange with",
                        a->stage, a->pipe, ps);
        int q = pp_sched_stage(s, a->pipe, ps)->rank;
        if (q == r)
            return fail(ck, r, i,
                        "stages %d and %d are both on rank %d: a local hand-over "
                        "needs no SEND/RECV",
                        a->stage, ps, r);
        if (a->peer != -1 && a->peer != q)
            return fail(ck, r, i, "wrong peer: stage %d of pipe %d is on rank %d, not rank %d", ps,
                        a->pipe, q, a->peer);
    }
    int32_t *slot = &POS(ck, a->op, pp_sched_key(s, a->pipe, a->stage, a->mb));
    if (*slot >= 0)
        return fail(ck, r, i, "duplicated: the same %s is already at action %d", pp_op_name(a->op),
                    *slot);
    *slot = i;
    return PP_OK;
}

/* Pass 3a: one F of every (pipe, stage, mb) whose micro-batch takes that pipe, and one backward:
 * a fused B, or a split I and W, not both. */
static pp_status check_complete(const checker *ck)
{
    const pp_sched *s = ck->s;
    for (int p = 0; p < ck->P; p++)
        for (int k = 0; k < ck->S; k++)
            for (int m = 0; m < ck->N; m++) {
                if (s->mb_pipe[m] != p)
                    continue;
                size_t key = pp_sched_key(s, p, k, m);
                int r = pp_sched_stage(s, p, k)->rank;
                int b = POS(ck, PP_OP_B, key), in = POS(ck, PP_OP_I, key);
                int w = POS(ck, PP_OP_W, key);
                if (b >= 0 && (in >= 0 || w >= 0))
                    return fail(ck, r, in >= 0 ? in : w,
                                "pipe %d stage %d mb %d has both a fused backward (B at action "
                                "%d) and a split one (I/W): a backward is one or the other",
                                p, k, m, b);
                if (in >= 0 && w < 0)
                    return fail(ck, r, in,
                                "its weight-gradient backward (W pipe %d stage %d mb %d) is "
                                "missing: a split backward needs both I and W",
                                p, k, m);
                if (w >= 0 && in < 0)
                    return fail(ck, r, w,
                                "its input-gradient backward (I pipe %d stage %d mb %d) is "
                                "missing: a split backward needs both I and W",
                                p, k, m);
                if (POS(ck, PP_OP_F, key) < 0 || (b < 0 && in < 0))
                    return PP_ERR(PP_ERR_CHECK,
                                  "rank %d: %s pipe %d stage %d mb %d is missing (every "
                                  "micro-batch of pipe %d needs one forward and one "
                                  "backward, B or I and W, on each of its stages)",
                                  r, POS(ck, PP_OP_F, key) < 0 ? "F" : "B", p, k, m, p);
            }
    return PP_OK;
}

/* Pass 3b: SEND_F(p,s,m) <-> RECV_F(p,s+1,m) and SEND_B(p,s,m) <-> RECV_B(p,s-1,m). */
static pp_status check_pairs(const checker *ck)
{
    const pp_sched *s = ck->s;
    static const int comm[4] = {PP_OP_SEND_F, PP_OP_RECV_F, PP_OP_SEND_B, PP_OP_RECV_B};
    for (int p = 0; p < ck->P; p++)
        for (int k = 0; k < ck->S; k++)
            for (int m = 0; m < ck->N; m++) {
                size_t key = pp_sched_key(s, p, k, m);
                for (int c = 0; c < 4; c++) {
                    int i = POS(ck, comm[c], key);
                    if (i < 0)
                        continue;
                    int r = pp_sched_stage(s, p, k)->rank;
                    const pp_action *a = &s->ops[r][i];
                    int ps = pp_action_peer_stage(a), mate = pp_op_mate(a->op);
                    if (POS(ck, mate, pp_sched_key(s, p, ps, m)) >= 0)
                        continue;
                    int q = pp_sched_stage(s, p, ps)->rank;
                    return fail(ck, r, i, "%s: rank %d never posts %s pipe %d stage %d mb %d",
                                pp_op_is_recv(a->op) ? "RECV without its SEND"
                                                     : "SEND without its RECV",
                                q, pp_op_name(mate), p, ps, m);
                }
            }
    return PP_OK;
}

/* Pass 3c: every participant issues every REDUCE it takes part in. */
static pp_status check_reduce_presence(const checker *ck)
{
    const pp_sched *s = ck->s;
    for (int id = 0; id < s->n_reduces; id++)
        for (int j = 0; j < s->reduces[id].n_ranks; j++)
            if (ck->rpos[(size_t)id * PP_REDUCE_MAX_RANKS + j] < 0)
                return PP_ERR(PP_ERR_CHECK,
                              "rank %d: REDUCE #%d is missing (it lists rank %d as a "
                              "participant, and every participant must issue it once)",
                              s->reduces[id].ranks[j], id, s->reduces[id].ranks[j]);
    return PP_OK;
}

/* The local input of a compute (F, B or I): the same pass's op on the neighbour stage when it is
 * on this rank (for a backward, that stage's B or I: whichever ships its input gradient), else
 * this stage's RECV. */
static pp_status check_input(const checker *ck, int r, int i, const pp_action *a)
{
    const pp_sched *s = ck->s;
    int fwd = a->op == PP_OP_F;
    const char *what = fwd                ? "forward"
                       : a->op == PP_OP_I ? "input-gradient backward (I)"
                                          : "backward";
    int ns = pp_action_src_stage(a);
    if (ns < 0 || ns >= ck->S)
        return PP_OK; /* first stage's forward, last stage's backward: no input to wait for */
    int q = pp_sched_stage(s, a->pipe, ns)->rank;
    if (q == r) {
        size_t nkey = pp_sched_key(s, a->pipe, ns, a->mb);
        int j = fwd ? POS(ck, PP_OP_F, nkey) : grad_pos(ck, nkey);
        if (j > i)
            return fail(ck, r, i, "%s before the %s of stage %d (action %d) that feeds it", what,
                        fwd ? "forward" : s->ops[r][j].op == PP_OP_B ? "backward" : "I", ns, j);
        return PP_OK;
    }
    int rop = pp_op_recv_of(a->op);
    int j = POS(ck, rop, pp_sched_key(s, a->pipe, a->stage, a->mb));
    if (j < 0)
        return fail(ck, r, i, "its input from stage %d on rank %d is never received (no %s)", ns, q,
                    pp_op_name(rop));
    if (j > i)
        return fail(ck, r, i, "%s before the %s of its input (action %d)", what, pp_op_name(rop),
                    j);
    return PP_OK;
}

static pp_status check_reduce_order(checker *ck, int r, int i, int id)
{
    const pp_sched *s = ck->s;
    const pp_reduce *red = &s->reduces[id];
    for (int t = 0; t < red->n_stages; t++) {
        pp_stage_ref sr = red->stages[t];
        if (pp_sched_stage(s, sr.pipe, sr.stage)->rank != r)
            continue;
        int done = ck->b_done[sr.pipe * ck->S + sr.stage];
        if (done == ck->n_mb[sr.pipe])
            continue;
        int last = -1;
        for (int m = 0; m < ck->N; m++)
            if (s->mb_pipe[m] == sr.pipe) {
                int j = wgrad_pos(ck, pp_sched_key(s, sr.pipe, sr.stage, m));
                last = j > last ? j : last;
            }
        return fail(ck, r, i,
                    "REDUCE before the last backward of pipe %d stage %d (%d of %d backwards "
                    "done; the last is at action %d)",
                    sr.pipe, sr.stage, done, ck->n_mb[sr.pipe], last);
    }
    return PP_OK;
}

/* Pass 4: program order on rank r. */
static pp_status check_order(checker *ck, int r)
{
    const pp_sched *s = ck->s;
    for (int i = 0; i < s->n_ops[r]; i++) {
        const pp_action *a = &s->ops[r][i];
        if (a->op == PP_OP_REDUCE) {
            PP_TRY(check_reduce_order(ck, r, i, a->stage));
            continue;
        }
        size_t key = pp_sched_key(s, a->pipe, a->stage, a->mb);
        if (a->op == PP_OP_B && POS(ck, PP_OP_F, key) > i)
            return fail(ck, r, i, "backward before its forward (F at action %d)",
                        POS(ck, PP_OP_F, key));
        if (a->op == PP_OP_I && POS(ck, PP_OP_F, key) > i)
            return fail(ck, r, i, "input-gradient backward before its forward (F at action %d)",
                        POS(ck, PP_OP_F, key));
        if (a->op == PP_OP_W && POS(ck, PP_OP_I, key) > i)
            return fail(ck, r, i,
                        "weight-gradient backward before its input-gradient backward (I at "
                        "action %d): W uses what I leaves behind",
                        POS(ck, PP_OP_I, key));
        if (a->op == PP_OP_F || a->op == PP_OP_B || a->op == PP_OP_I)
            PP_TRY(check_input(ck, r, i, a));
        if (a->op == PP_OP_B || a->op == PP_OP_W)
            ck->b_done[a->pipe * ck->S + a->stage]++;
        if (pp_op_is_send(a->op)) {
            int fwd = a->op == PP_OP_SEND_F;
            int j = fwd ? POS(ck, PP_OP_F, key) : grad_pos(ck, key);
            if (j > i)
                return fail(ck, r, i, "send before the %s that produces it (action %d)",
                            fwd ? "forward" : s->ops[r][j].op == PP_OP_B ? "backward" : "I", j);
        }
    }
    return PP_OK;
}

/* ---- pass 5: deadlock ------------------------------------------------------------------------ */

typedef struct {
    int *pc;         /* [D] next action of each rank */
    int *queue;      /* [D] ring of runnable ranks */
    uint8_t *queued; /* [D] */
    int head, count;
    uint8_t *arrived; /* [n_reduces * MAX] participant j reached REDUCE id */
    int *n_arrived;   /* [n_reduces] */
} runner;

static void wake(const checker *ck, runner *x, int q)
{
    if (q < 0 || x->queued[q] || x->pc[q] >= ck->s->n_ops[q])
        return;
    x->queued[q] = 1;
    x->queue[(x->head + x->count) % ck->D] = q;
    x->count++;
}

/* Rank r waits for another rank at its current action: returns that rank, or -1 if it can go. */
static int blocker(const checker *ck, runner *x, int r)
{
    const pp_sched *s = ck->s;
    const pp_action *a = &s->ops[r][x->pc[r]];
    if (pp_op_is_recv(a->op)) {
        int sop = pp_op_mate(a->op);
        int ps = pp_action_peer_stage(a);
        int q = pp_sched_stage(s, a->pipe, ps)->rank;
        return x->pc[q] > POS(ck, sop, pp_sched_key(s, a->pipe, ps, a->mb)) ? -1 : q;
    }
    if (a->op == PP_OP_REDUCE) {
        const pp_reduce *red = &s->reduces[a->stage];
        if (x->n_arrived[a->stage] == red->n_ranks)
            return -1;
        for (int j = 0; j < red->n_ranks; j++)
            if (!x->arrived[(size_t)a->stage * PP_REDUCE_MAX_RANKS + j])
                return red->ranks[j];
    }
    return -1;
}

/* A REDUCE reached: count the arrival once, release everyone when the last one comes. */
static void arrive(const checker *ck, runner *x, int r, int id)
{
    const pp_reduce *red = &ck->s->reduces[id];
    uint8_t *flag = &x->arrived[(size_t)id * PP_REDUCE_MAX_RANKS + pp_reduce_participant(red, r)];
    if (*flag)
        return;
    *flag = 1;
    if (++x->n_arrived[id] == red->n_ranks)
        for (int j = 0; j < red->n_ranks; j++)
            wake(ck, x, red->ranks[j]);
}

static void run_rank(const checker *ck, runner *x, int r)
{
    const pp_sched *s = ck->s;
    while (x->pc[r] < s->n_ops[r]) {
        const pp_action *a = &s->ops[r][x->pc[r]];
        if (a->op == PP_OP_REDUCE)
            arrive(ck, x, r, a->stage);
        if (blocker(ck, x, r) >= 0)
            return;
        x->pc[r]++;
        if (pp_op_is_send(a->op))
            wake(ck, x, pp_sched_stage(s, a->pipe, pp_action_peer_stage(a))->rank);
    }
}

static pp_status check_deadlock(const checker *ck)
{
    const pp_sched *s = ck->s;
    int D = ck->D;
    runner x = {0};
    size_t nr = (size_t)s->n_reduces;
    x.pc = pp_calloc((size_t)D, sizeof *x.pc);
    x.queue = pp_calloc((size_t)D, sizeof *x.queue);
    x.queued = pp_calloc((size_t)D, 1);
    x.arrived = pp_calloc(nr * PP_REDUCE_MAX_RANKS + 1, 1);
    x.n_arrived = pp_calloc(nr + 1, sizeof *x.n_arrived);
    int *waits = pp_calloc((size_t)D, sizeof *waits);
    pp_status st = PP_ERR_NOMEM;
    if (x.pc && x.queue && x.queued && x.arrived && x.n_arrived && waits) {
        for (int r = 0; r < D; r++)
            wake(ck, &x, r);
        while (x.count > 0) {
            int r = x.queue[x.head];
            x.head = (x.head + 1) % D;
            x.count--;
            x.queued[r] = 0;
            run_rank(ck, &x, r);
        }
        st = PP_OK;
        for (int r = 0; r < D; r++) {
            waits[r] = x.pc[r] < s->n_ops[r] ? blocker(ck, &x, r) : -1;
            if (x.pc[r] < s->n_ops[r])
                st = PP_ERR_DEADLOCK;
        }
        if (st != PP_OK)
            st = pp_sched_deadlock_error(s, x.pc, waits);
    }
    free(x.pc);
    free(x.queue);
    free(x.queued);
    free(x.arrived);
    free(x.n_arrived);
    free(waits);
    return st;
}

/* Appends one hop of the wait chain to msg. */
static size_t append_hop(const pp_sched *s, char *msg, size_t cap, size_t len, int first, int r,
                         int pc, int q)
{
    char what[128];
    pp_action_str(s, &s->ops[r][pc], what, sizeof what);
    int n = first ? snprintf(msg + len, cap - len, "rank %d waits at action %d (%s) for rank %d", r,
                             pc, what, q)
                  : snprintf(msg + len, cap - len, ", which waits at action %d (%s) for rank %d",
                             pc, what, q);
    if (n > 0)
        len += (size_t)n;
    return len < cap ? len : cap - 1;
}

pp_status pp_sched_deadlock_error(const pp_sched *s, const int *pc, const int *waits_for)
{
    int D = s->ranks, start = -1;
    for (int r = 0; r < D && start < 0; r++)
        if (pc[r] < s->n_ops[r] && waits_for[r] >= 0)
            start = r;
    if (start < 0)
        return PP_ERR(PP_ERR_DEADLOCK, "deadlock: ranks stopped before the end of their "
                                       "actions, but none waits for another");
    int *seen = pp_calloc((size_t)D, sizeof *seen);
    if (!seen)
        return PP_ERR_NOMEM;
    int r = start, step = 1;
    while (r >= 0 && r < D && !seen[r] && pc[r] < s->n_ops[r] && waits_for[r] >= 0) {
        seen[r] = step++;
        r = waits_for[r];
    }
    int cycle = r >= 0 && r < D && seen[r];
    int cur = cycle ? r : start, hops = 0;
    free(seen);
    char msg[1536];
    size_t len = (size_t)snprintf(msg, sizeof msg, "deadlock: ");
    do {
        if (hops == 8) {
            snprintf(msg + len, sizeof msg - len, ", which waits in turn (the chain goes on)");
            return PP_ERR(PP_ERR_DEADLOCK, "%s", msg);
        }
        len = append_hop(s, msg, sizeof msg, len, hops == 0, cur, pc[cur], waits_for[cur]);
        cur = waits_for[cur];
        hops++;
    } while (cur >= 0 && cur < D && pc[cur] < s->n_ops[cur] && waits_for[cur] >= 0 &&
             (!cycle || cur != r));
    if (!cycle)
        snprintf(msg + len, sizeof msg - len, ", which %s without posting what it waits for",
                 cur >= 0 && cur < D && pc[cur] >= s->n_ops[cur] ? "finished" : "stopped");
    return PP_ERR(PP_ERR_DEADLOCK, "%s", msg);
}

/* ---- the entry point ------------------------------------------------------------------------ */

static pp_status check_all(checker *ck)
{
    const pp_sched *s = ck->s;
    PP_TRY(check_placement(ck));
    for (int r = 0; r < ck->D; r++)
        for (int i = 0; i < s->n_ops[r]; i++)
            PP_TRY(record_action(ck, r, i));
    PP_TRY(check_complete(ck));
    PP_TRY(check_pairs(ck));
    PP_TRY(check_reduce_presence(ck));
    for (int r = 0; r < ck->D; r++)
        PP_TRY(check_order(ck, r));
    PP_TRY(check_deadlock(ck));
    return PP_OK;
}

pp_status pp_sched_check(const pp_sched *s)
{
    if (!s)
        return PP_ERR(PP_ERR_INVALID, "no schedule to check (NULL)");
    if (s->ranks < 1 || s->microbatches < 1 || s->stages_per_pipe < 1 || s->n_pipes < 1 ||
        s->n_pipes > 2)
        return PP_ERR(PP_ERR_CHECK,
                      "schedule shape is invalid: %d ranks, %d micro-batches, %d stages per "
                      "pipe, %d pipes (expected at least 1 of each and at most 2 pipes)",
                      s->ranks, s->microbatches, s->stages_per_pipe, s->n_pipes);
    if ((long long)s->stages_per_pipe * s->microbatches > PP_SCHED_MAX_VISITS)
        return PP_ERR(PP_ERR_CHECK,
                      "schedule of %d stages x %d micro-batches is more than a schedule may have "
                      "(%d stage visits)",
                      s->stages_per_pipe, s->microbatches, PP_SCHED_MAX_VISITS);
    checker ck = {
        .s = s, .S = s->stages_per_pipe, .N = s->microbatches, .D = s->ranks, .P = s->n_pipes};
    ck.nk = (size_t)ck.P * (size_t)ck.S * (size_t)ck.N;
    ck.pos = malloc(N_SLOTS * ck.nk * sizeof *ck.pos);
    ck.rpos = malloc(((size_t)s->n_reduces * PP_REDUCE_MAX_RANKS + 1) * sizeof *ck.rpos);
    ck.n_mb = pp_calloc((size_t)ck.P, sizeof *ck.n_mb);
    ck.b_done = pp_calloc((size_t)ck.P * ck.S, sizeof *ck.b_done);
    pp_status st = PP_ERR_NOMEM;
    if (!ck.pos || !ck.rpos) {
        PP_ERR(PP_ERR_NOMEM, "out of memory checking a schedule of %zu (pipe, stage, mb) keys",
               ck.nk);
    } else if (ck.n_mb && ck.b_done) {
        memset(ck.pos, 0xff, N_SLOTS * ck.nk * sizeof *ck.pos); /* all -1 */
        memset(ck.rpos, 0xff, ((size_t)s->n_reduces * PP_REDUCE_MAX_RANKS + 1) * sizeof *ck.rpos);
        for (int m = 0; m < ck.N; m++)
            if (s->mb_pipe[m] < ck.P)
                ck.n_mb[s->mb_pipe[m]]++;
        st = check_all(&ck);
    }
    free(ck.pos);
    free(ck.rpos);
    free(ck.n_mb);
    free(ck.b_done);
    return st;
}
