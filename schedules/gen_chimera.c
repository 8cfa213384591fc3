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

/* The basic unit's list scheduling. An action is ready once its inputs have run; from then on
 * it can start at max(ready time, its rank's free time). Each rank keeps its ready actions in
 * two heaps: `later` (ready after the rank is free, by ready time, then the tie-break) and `now`
 * (ready by the time the rank is free: they all start then, so by the tie-break alone); as the
 * rank's free time grows, actions move from later to now. A rank's best is now's top if any, else
 * later's: exactly the minimum of the priority key over its ready actions. */
typedef struct {
    long at;    /* ready time */
    pp_action a;
} ready_action;

typedef struct {
    ready_action *h;
    int n;
} heap;

typedef struct {
    int D;
    const pp_sched *unit; /* placement: rank of each (pipe, stage) */
    long *f_end, *b_end;  /* [2][D][D] end time per (pipe, stage, mb) of the unit, -1 = not run */
    long *t;              /* [D] when each rank is free */
    heap *now, *later;    /* [D] each (room for the rank's 2D actions) */
    int *pending;         /* [D] actions of each rank not yet placed */
    /* each rank's best ready action as rank_best last found it, and the ranks by it */
    int *has;             /* [D] 1: it has one */
    long *best_st;        /* [D] its start */
    pp_action *best;      /* [D] */
    pp_gen_heap ranks;
} unit_state;

static size_t unit_index(int D, int pipe, int stage, int mb)
{
    return ((size_t)pipe * (size_t)D + (size_t)stage) * (size_t)D + (size_t)mb;
}

/* The tie-break among actions that start together: backward first, then the stage further
 * along its pipe, then the lower micro-batch. */
static int tie_less(const pp_action *a, const pp_action *b)
{
    if (a->op != b->op)
        return a->op == PP_OP_B;
    if (a->stage != b->stage)
        return a->stage > b->stage;
    return a->mb < b->mb;
}

static int later_less(const ready_action *x, const ready_action *y)
{
    return x->at != y->at ? x->at < y->at : tie_less(&x->a, &y->a);
}

static int now_less(const ready_action *x, const ready_action *y)
{
    return tie_less(&x->a, &y->a);
}

static void heap_push(heap *q, ready_action x, int (*less)(const ready_action *, const ready_action *))
{
    int i = q->n++;
    while (i > 0 && less(&x, &q->h[(i - 1) / 2])) {
        q->h[i] = q->h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->h[i] = x;
}

static ready_action heap_pop(heap *q, int (*less)(const ready_action *, const ready_action *))
{
    ready_action top = q->h[0], x = q->h[--q->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= q->n)
            break;
        if (c + 1 < q->n && less(&q->h[c + 1], &q->h[c]))
            c++;
        if (!less(&q->h[c], &x))
            break;
        q->h[i] = q->h[c];
        i = c;
    }
    if (q->n > 0)
        q->h[i] = x;
    return top;
}

/* a is ready at `at`: into its rank's later heap. */
static int make_ready(unit_state *u, int pipe, int stage, int mb, int op, long at)
{
    pp_action a = {.op = (uint8_t)op, .pipe = (uint8_t)pipe, .stage = stage, .mb = mb};
    int r = pp_sched_rank_of(u->unit, pipe, stage);
    heap_push(&u->later[r], (ready_action){at, a}, later_less);
    return r;
}

/* Rank r's best ready action and its start into has/best/best_st (has 0: none is ready). */
static void rank_best(unit_state *u, int r)
{
    heap *now = &u->now[r], *later = &u->later[r];
    while (later->n > 0 && later->h[0].at <= u->t[r])
        heap_push(now, heap_pop(later, later_less), now_less);
    u->has[r] = now->n > 0 || later->n > 0;
    if (now->n > 0)
        u->best[r] = now->h[0].a, u->best_st[r] = u->t[r];
    else if (later->n > 0)
        u->best[r] = later->h[0].a, u->best_st[r] = later->h[0].at;
}

/* Priority key over ranks' bests: earlier start, then the tie-break, then the lower rank; a rank
 * without one last. */
static int rank_less(const void *ctx, int r, int s)
{
    const unit_state *u = ctx;
    if (u->has[r] != u->has[s])
        return u->has[r];
    if (!u->has[r])
        return r < s;
    if (u->best_st[r] != u->best_st[s])
        return u->best_st[r] < u->best_st[s];
    const pp_action *a = &u->best[r], *b = &u->best[s];
    if (a->op != b->op || a->stage != b->stage || a->mb != b->mb)
        return tie_less(a, b);
    return r < s;
}

/* Rank r's state changed: its best again, and its place among the ranks. */
static void rank_changed(unit_state *u, int r)
{
    rank_best(u, r);
    pp_gen_heap_fix_by(&u->ranks, r, rank_less);
}

/* Runs a (started at st on rank r) and readies what only waited for it: after F the next
 * stage's F (the last stage: its own B); after B the previous stage's B, whose F ran before.
 * Returns the rank of the action readied, -1 none. */
static int run_action(unit_state *u, int r, pp_action a, long st)
{
    int D = u->D;
    long end = st + 1;
    u->t[r] = end;
    u->pending[r]--;
    if (a.op == PP_OP_F) {
        u->f_end[unit_index(D, a.pipe, a.stage, a.mb)] = end;
        if (a.stage + 1 < D)
            return make_ready(u, a.pipe, a.stage + 1, a.mb, PP_OP_F, end);
        return make_ready(u, a.pipe, a.stage, a.mb, PP_OP_B, end);
    }
    u->b_end[unit_index(D, a.pipe, a.stage, a.mb)] = end;
    if (a.stage == 0)
        return -1;
    long f = u->f_end[unit_index(D, a.pipe, a.stage - 1, a.mb)];
    return make_ready(u, a.pipe, a.stage - 1, a.mb, PP_OP_B, f > end ? f : end);
}

/* Picks the next action of the unit by the priority above, runs it and stores it in *a /
 * *rank; returns 0 when nothing is ready (cannot happen for a complete unit). The key is a
 * total order, so the best over all ranks is the best of the ranks' bests: the heap's top.
 * Running an action changes its own rank and the one of the action it readies, only. */
static int unit_step(unit_state *u, pp_action *a, int *rank)
{
    int br = u->ranks.h[0];
    if (!u->has[br])
        return 0;
    heap *q = u->now[br].n > 0 ? &u->now[br] : &u->later[br];
    ready_action x = heap_pop(q, q == &u->now[br] ? now_less : later_less);
    int dr = run_action(u, br, x.a, u->best_st[br]);
    rank_changed(u, br);
    if (dr >= 0 && dr != br)
        rank_changed(u, dr);
    *a = x.a;
    *rank = br;
    return 1;
}

static pp_status run_unit(unit_state *u, pp_sched *unit)
{
    int D = u->D;
    for (int m = 0; m < D; m++) {
        int p = unit->mb_pipe[m];
        for (int k = 0; k < D; k++)
            u->pending[pp_sched_stage(unit, p, k)->rank] += 2; /* its F and B */
        make_ready(u, p, 0, m, PP_OP_F, 0);
    }
    for (int r = 0; r < D; r++) {
        rank_best(u, r);
        pp_gen_heap_add(&u->ranks, r);
    }
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
                    pp_calloc(n, sizeof(long)),
                    pp_calloc(n, sizeof(long)),
                    pp_calloc((size_t)D, sizeof(long)),
                    pp_calloc((size_t)D, sizeof(heap)),
                    pp_calloc((size_t)D, sizeof(heap)),
                    pp_calloc((size_t)D, sizeof(int)),
                    pp_calloc((size_t)D, sizeof(int)),
                    pp_calloc((size_t)D, sizeof(long)),
                    pp_calloc((size_t)D, sizeof(pp_action)),
                    {rank_less, NULL, pp_calloc(2 * (size_t)D, sizeof(int)), NULL, 0}};
    u.ranks.ctx = &u;
    ready_action *room = pp_calloc(2 * n, sizeof *room); /* each rank: 2D now, 2D later */
    pp_status st = PP_ERR_NOMEM;
    if (u.f_end && u.b_end && u.t && u.now && u.later && u.pending && u.has && u.best_st &&
        u.best && u.ranks.h && room) {
        u.ranks.pos = u.ranks.h + D;
        for (size_t i = 0; i < n; i++)
            u.f_end[i] = u.b_end[i] = -1;
        for (int r = 0; r < D; r++) {
            u.now[r].h = room + (size_t)r * 4 * D;
            u.later[r].h = u.now[r].h + 2 * D;
        }
        st = run_unit(&u, unit);
    }
    free(room);
    free(u.f_end);
    free(u.b_end);
    free(u.t);
    free(u.now);
    free(u.later);
    free(u.pending);
    free(u.has);
    free(u.best_st);
    free(u.best);
    free(u.ranks.h);
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
