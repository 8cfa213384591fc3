/* gen_chimera.c — Chimera: two model replicas in opposite directions (Li & Hoefler, SC'21).
 *
 * Placement: one chunk per rank per pipe; down-stage s on rank s, up-stage s on rank D-1-s, so
 * rank d holds the layers of stages d and D-1-d and replica pair (d, D-1-d) reduces them.
 * Micro-batches: in each basic unit of D consecutive ones, the first D/2 go down, the rest up.
 *
 * Basic unit (N = D). The paper builds it by merging the two pipes' 1F1B-like timelines; here
 * it is built by list scheduling all 2D actions of every rank against F = B = 1 (the paper's
 * assumption): the action that can start earliest runs first, ties broken by backward before
 * forward, then the stage further along its pipe, then the lower micro-batch. For D = 4 this is
 * exactly the published order (Li & Hoefler, arXiv:2107.06925, its D = 4 example: makespan
 * 10) and for every even D it reaches the paper's 2N + D - 2 = 3D - 2 units, bubble
 * (D-2)/(2N+D-2), with peak activations D/2+1 .. D stage-units.
 *
 * N > D. The basic units are concatenated: every rank's forwards (and backwards) run in the
 * unit's order, unit after unit, merged by pp_gen_merge_lists against F = 1, B = 2 with at most
 * the unit's peak in flight. The next unit's forwards fill the previous unit's drain, which
 * beats back-to-back concatenation (D = 4, N = 8: 29 units against 32 with B = 2F). The paper's
 * forward doubling / backward halving (which trades memory for bubbles) is not implemented.
 *
 * Gradient sync: one REDUCE per replica pair after each rank's last backward. */
#include <limits.h>
#include <stdlib.h>

#include "gen.h"

typedef struct {
    int D;
    const pp_sched *unit; /* placement: rank of each (pipe, stage) */
    int *pending;        /* [D][2D] packed (op, pipe, stage, mb) indices not yet placed, per rank */
    int *n_pending;      /* [D] */
    long *f_end, *b_end; /* [2][D][D] end time per (pipe, stage, mb) of the unit, -1 = not run */
    long *t;             /* [D] when each rank is free */
    int *best;           /* [D] index into the rank's pending of its best ready action, -1: none */
    long *best_st;       /* [D] that action's start time */
} unit_state;

static size_t unit_index(int D, int pipe, int stage, int mb)
{
    return ((size_t)pipe * (size_t)D + (size_t)stage) * (size_t)D + (size_t)mb;
}

/* An action of the unit packed as an int: ((op * 2 + pipe) * D + stage) * D + mb. */
static pp_action unpack(int D, int code)
{
    pp_action a = {0};
    a.mb = code % D;
    code /= D;
    a.stage = code % D;
    code /= D;
    a.pipe = (uint8_t)(code % 2);
    a.op = (uint8_t)(code / 2);
    return a;
}

static long unit_ready(const unit_state *u, const pp_action *a)
{
    int D = u->D;
    if (a->op == PP_OP_F)
        return a->stage == 0 ? 0 : u->f_end[unit_index(D, a->pipe, pp_action_src_stage(a), a->mb)];
    long f = u->f_end[unit_index(D, a->pipe, a->stage, a->mb)];
    if (f < 0 || a->stage == D - 1)
        return f;
    long g = u->b_end[unit_index(D, a->pipe, pp_action_src_stage(a), a->mb)];
    return g < 0 ? -1 : (f > g ? f : g);
}

/* Priority key: smaller is better. */
static int key_less(long s1, const pp_action *a, int r1, long s2, const pp_action *b, int r2)
{
    if (s1 != s2)
        return s1 < s2;
    if (a->op != b->op)
        return a->op == PP_OP_B;
    if (a->stage != b->stage)
        return a->stage > b->stage;
    if (a->mb != b->mb)
        return a->mb < b->mb;
    return r1 < r2;
}

/* Rank r's best ready action by the priority above, into u->best[r] / u->best_st[r]. */
static void rank_best(unit_state *u, int r)
{
    int D = u->D, bi = -1;
    long bs = 0;
    pp_action ba = {0};
    for (int i = 0; i < u->n_pending[r]; i++) {
        pp_action c = unpack(D, u->pending[r * 2 * D + i]);
        long at = unit_ready(u, &c);
        if (at < 0)
            continue;
        long st = at > u->t[r] ? at : u->t[r];
        if (bi < 0 || key_less(st, &c, r, bs, &ba, r)) {
            bi = i, bs = st, ba = c;
        }
    }
    u->best[r] = bi;
    u->best_st[r] = bs;
}

/* Picks the next action of the unit by the priority above, marks it run and stores it in
 * *a / *rank; returns 0 when nothing is ready (cannot happen for a complete unit). The key is
 * a total order, so the best over all ranks is the best of the ranks' bests; running an action
 * changes only its own rank's free time and the readiness of the actions that depend on it
 * (the next stage's F, this stage's B, the previous stage's B), so only those ranks' bests are
 * recomputed: O(D) per action instead of a scan of every rank's pending actions. */
static int unit_step(unit_state *u, pp_action *a, int *rank)
{
    int D = u->D, br = -1;
    pp_action ba = {0};
    for (int r = 0; r < D; r++) {
        if (u->best[r] < 0)
            continue;
        pp_action c = unpack(D, u->pending[r * 2 * D + u->best[r]]);
        if (br < 0 || key_less(u->best_st[r], &c, r, u->best_st[br], &ba, br)) {
            br = r, ba = c;
        }
    }
    if (br < 0)
        return 0;
    long bs = u->best_st[br];
    u->t[br] = bs + 1;
    (ba.op == PP_OP_F ? u->f_end : u->b_end)[unit_index(D, ba.pipe, ba.stage, ba.mb)] = bs + 1;
    u->pending[br * 2 * D + u->best[br]] = u->pending[br * 2 * D + --u->n_pending[br]];
    rank_best(u, br);
    int dep = pp_action_dst_stage(&ba); /* F: the next stage's F; B: the previous stage's B */
    int dr = pp_sched_rank_of(u->unit, ba.pipe, dep);
    if (dr >= 0 && dr != br)
        rank_best(u, dr);
    *a = ba;
    *rank = br;
    return 1;
}

static pp_status run_unit(unit_state *u, pp_sched *unit)
{
    int D = u->D;
    for (int m = 0; m < D; m++) {
        int p = unit->mb_pipe[m];
        for (int k = 0; k < D; k++) {
            int r = pp_sched_stage(unit, p, k)->rank;
            for (int op = PP_OP_F; op <= PP_OP_B; op++)
                u->pending[r * 2 * D + u->n_pending[r]++] = ((op * 2 + p) * D + k) * D + m;
        }
    }
    for (int r = 0; r < D; r++)
        rank_best(u, r);
    pp_action a;
    int r, placed = 0;
    for (; unit_step(u, &a, &r); placed++)
        PP_TRY(pp_sched_push(unit, r, (pp_op_kind)a.op, a.pipe, a.stage, a.mb));
    if (placed != 2 * D * D)
        return PP_ERR(PP_ERR_DEADLOCK,
                      "chimera: basic unit for D = %d stuck after %d of %d actions (generator bug)",
                      D, placed, 2 * D * D);
    return PP_OK;
}

/* Fills unit (a schedule with placement set, N = D) with the basic unit's compute order. */
static pp_status build_unit(pp_sched *unit)
{
    int D = unit->ranks;
    size_t n = 2 * (size_t)D * (size_t)D;
    unit_state u = {D,
                    unit,
                    pp_calloc(n, sizeof(int)),
                    pp_calloc((size_t)D, sizeof(int)),
                    pp_calloc(n, sizeof(long)),
                    pp_calloc(n, sizeof(long)),
                    pp_calloc((size_t)D, sizeof(long)),
                    pp_calloc((size_t)D, sizeof(int)),
                    pp_calloc((size_t)D, sizeof(long))};
    pp_status st = PP_ERR_NOMEM;
    if (u.pending && u.n_pending && u.f_end && u.b_end && u.t && u.best && u.best_st) {
        for (size_t i = 0; i < n; i++)
            u.f_end[i] = u.b_end[i] = -1;
        st = run_unit(&u, unit);
    }
    free(u.pending);
    free(u.n_pending);
    free(u.f_end);
    free(u.b_end);
    free(u.t);
    free(u.best);
    free(u.best_st);
    return st;
}

static void place(pp_sched *s)
{
    int D = s->ranks;
    for (int k = 0; k < D; k++) {
        pp_sched_stage(s, 0, k)->rank = k;
        pp_sched_stage(s, 1, k)->rank = D - 1 - k;
    }
    for (int m = 0; m < s->microbatches; m++)
        s->mb_pipe[m] = (uint8_t)(m % D >= D / 2);
}

/* reduce[j] is replica pair (j, D-1-j): both hold stages j and D-1-j of both pipes. */
static pp_status add_reduces(pp_sched *s)
{
    int D = s->ranks;
    for (int j = 0; j < D / 2; j++) {
        int ranks[2] = {j, D - 1 - j};
        pp_stage_ref st[4] = {{0, j}, {1, j}, {0, D - 1 - j}, {1, D - 1 - j}};
        PP_TRY(pp_sched_add_reduce(s, ranks, 2, st, 4, NULL));
    }
    return PP_OK;
}

/* Most forwards in flight on rank r in the unit's order. */
static int unit_peak(const pp_sched *unit, int r)
{
    int x = 0, peak = 0;
    for (int i = 0; i < unit->n_ops[r]; i++) {
        x += unit->ops[r][i].op == PP_OP_F ? 1 : -1;
        peak = x > peak ? x : peak;
    }
    return peak;
}

/* N > D: the unit's per-rank forward and backward orders repeated N / D times, merged. */
static pp_status build_units(pp_sched *s, const pp_sched *unit)
{
    int D = s->ranks, N = s->microbatches;
    pp_gen_lists l;
    PP_TRY(pp_gen_lists_init(&l, D, N + 1));
    l.cost_f = 1;
    l.cost_b = 2;
    for (int r = 0; r < D; r++) {
        for (int g = 0; g < N / D; g++)
            for (int i = 0; i < unit->n_ops[r]; i++) {
                pp_action a = unit->ops[r][i];
                pp_gen_lists_add(&l, r, a.op, a.pipe, a.stage, a.mb + g * D);
            }
        pp_gen_lists_add(&l, r, PP_OP_REDUCE, 0, r < D - 1 - r ? r : D - 1 - r, -1);
        l.cap[r] = unit_peak(unit, r);
    }
    pp_status st = pp_gen_merge_lists(s, &l);
    pp_gen_lists_fini(&l);
    return st;
}

static pp_status build(pp_sched *s)
{
    int D = s->ranks;
    if (s->microbatches > D) {
        pp_sched *unit;
        PP_TRY(pp_sched_create("chimera", D, D, 1, 2, 0, 0, &unit)); /* order only */
        place(unit);
        pp_status st = build_unit(unit);
        if (st == PP_OK)
            st = build_units(s, unit);
        pp_sched_destroy(unit);
        return st;
    }
    PP_TRY(build_unit(s));
    for (int r = 0; r < D; r++)
        PP_TRY(pp_sched_push(s, r, PP_OP_REDUCE, 0, r < D - 1 - r ? r : D - 1 - r, -1));
    return PP_OK;
}

pp_status pp_gen_chimera(const pp_sched_params *p, pp_sched **out)
{
    *out = NULL;
    pp_sched *s;
    pp_sched_split sp = pp_sched_params_split(p);
    PP_TRY(pp_sched_create("chimera", p->ranks, p->microbatches, 1, 2, p->layers, &sp, &s));
    place(s);
    pp_status st = add_reduces(s);
    if (st == PP_OK)
        st = build(s);
    PP_TRY(pp_gen_finish(s, st, out));
    return PP_OK;
}
