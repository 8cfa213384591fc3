/* gen_bitpipe.c — BitPipe: bidirectional, interleaved, V-shaped, with eager gradient sync
 * (Wu et al., "BitPipe", arXiv 2410.19367; order as in the authors' Megatron-LM fork).
 *
 * Placement. Each pipe has S = 2D stages of L/(2D) layers. Rank d holds down-stages d and
 * 2D-1-d and up-stages D-1-d and D+d (the V: the down pipe runs 0 -> D-1 -> 0, the up pipe
 * D-1 -> 0 -> D-1, and the turn between stage D-1 and D stays on one rank). Down-stage s and
 * up-stage s hold the same layers, so ranks j and D-1-j hold replicas of the same four chunks.
 * Micro-batches: in each group of D consecutive ones, the first D/2 go down, the rest up.
 *
 * Order. For every rank this file writes down the authors' forward order and backward order,
 * group by group (h = D/2; rank d "owns" the down pipe if d < h, else the up pipe; it starts
 * with n0 = h-d, resp. d-h+1, micro-batches of its own pipe's first-half chunk):
 *   forwards:  own-first x n0, (other-first, own-first) x (h-n0), (other-first, other-second)
 *              x n0, (own-second, other-second) x (h-n0), own-second x n0;
 *   backwards: the same pattern with first and second halves swapped.
 * The two lists are merged by pp_gen_merge_lists (F = 1, B = 2 per chunk) with at most
 * w + 1 forwards in flight, w = D + h + min(d, D-1-d) being the authors' warm-up. For N = D this
 * reproduces the authors' warm-up / 1F1B / cool-down order exactly (D = 4, N = 4, read from
 * github.com/wuhouming/BitPipe's schedule code, a Megatron-LM 23.08 fork: makespan 28 chunk
 * units; the test vector is in tests/test_sched_bidir.c). For N > D the groups' lists are
 * concatenated and the merge lets a group's forwards fill the next group's cool-down bubbles, so
 * it is never worse than concatenating the N = D order: D = 4, N = 8 gives 53 chunk units where
 * plain concatenation gives 56 and the authors' overlapped loop 54 (tests hold it to <= the
 * concatenation over D = 2..8, N = D..4D). The paper's own D = 4, N = 8 figure is not matched.
 *
 * Eager sync: replica pair (j, D-1-j) reduces the second-half chunks (AR2) before the first-half
 * ones (AR1). On every rank but the two middle ones AR2 is issued one backward early, before the
 * rank's last backward (which is a first-half chunk); AR1 follows the last backward.
 *
 * Not done here: the data-parallel allreduce (a tuner concern), split backward. */
#include "gen.h"

typedef struct {
    int D, h, d;
    int own, n0; /* own pipe (0 down, 1 up) and its initial run length */
    int group;   /* index of the group of D micro-batches */
} rank_ctx;

/* Stage of rank d's chunk on pipe p, first half (second = 0) or second half. */
static int chunk_stage(int D, int d, int p, int second)
{
    if (p == 0)
        return second ? 2 * D - 1 - d : d;
    return second ? D + d : D - 1 - d;
}

/* Global id of the k-th micro-batch of pipe p (groups of D: first D/2 down, rest up). */
static int pipe_mb(int D, int p, int k)
{
    int h = D / 2;
    return (k / h) * D + p * h + k % h;
}

/* Appends op on (pipe p, half `second`) for the group's i-th micro-batch of that pipe. */
static void add(pp_gen_lists *l, const rank_ctx *c, int op, int p, int second, int i)
{
    pp_gen_lists_add(l, c->d, op, p, chunk_stage(c->D, c->d, p, second),
                     pipe_mb(c->D, p, c->group * c->h + i));
}

/* One group of the authors' pattern. For forwards `a` is the first half and `b` the second; the
 * backward pattern is the same with the halves swapped. */
static void add_group(pp_gen_lists *l, const rank_ctx *c, int op)
{
    int own = c->own, oth = 1 - c->own, n0 = c->n0, n1 = c->h - c->n0;
    int a = op == PP_OP_F ? 0 : 1, b = 1 - a;
    for (int i = 0; i < n0; i++)
        add(l, c, op, own, a, i);
    for (int i = 0; i < n1; i++) {
        add(l, c, op, oth, a, i);
        add(l, c, op, own, a, n0 + i);
    }
    for (int i = 0; i < n0; i++) {
        add(l, c, op, oth, a, n1 + i);
        add(l, c, op, oth, b, i);
    }
    for (int i = 0; i < n1; i++) {
        add(l, c, op, own, b, i);
        add(l, c, op, oth, b, n0 + i);
    }
    for (int i = 0; i < n0; i++)
        add(l, c, op, own, b, n1 + i);
}

/* The two eager syncs of rank d: ar2 (second-half chunks) one backward early except on the two
 * middle ranks, ar1 (first-half chunks) last. */
static void add_syncs(pp_gen_lists *l, int D, int d, int ar2, int ar1)
{
    int n = l->n_bw[d];
    if (d == D / 2 - 1 || d == D / 2 || n < 1) {
        pp_gen_lists_add(l, d, PP_OP_REDUCE, 0, ar2, -1);
    } else {
        pp_action last = l->bw[d][n - 1];
        l->n_bw[d] = n - 1;
        pp_gen_lists_add(l, d, PP_OP_REDUCE, 0, ar2, -1);
        pp_gen_lists_add(l, d, last.op, last.pipe, last.stage, last.mb);
    }
    pp_gen_lists_add(l, d, PP_OP_REDUCE, 0, ar1, -1);
}

/* Reduce ids: reduce[2j] = AR2 and reduce[2j+1] = AR1 of pair (j, D-1-j). Down-stage s and
 * up-stage s hold the same layers; rank j holds down 2D-1-j / up D+j (second half) and rank
 * D-1-j holds down D+j / up 2D-1-j. */
static pp_status add_reduces(pp_sched *s, int D)
{
    for (int j = 0; j < D / 2; j++) {
        int ranks[2] = {j, D - 1 - j};
        pp_stage_ref ar2[4] = {{0, 2 * D - 1 - j}, {1, D + j}, {0, D + j}, {1, 2 * D - 1 - j}};
        pp_stage_ref ar1[4] = {{0, j}, {1, D - 1 - j}, {0, D - 1 - j}, {1, j}};
        PP_TRY(pp_sched_add_reduce(s, ranks, 2, ar2, 4, NULL));
        PP_TRY(pp_sched_add_reduce(s, ranks, 2, ar1, 4, NULL));
    }
    return PP_OK;
}

static void place(pp_sched *s, int D)
{
    for (int k = 0; k < 2 * D; k++) {
        pp_sched_stage(s, 0, k)->rank = k < D ? k : 2 * D - 1 - k;
        pp_sched_stage(s, 1, k)->rank = k < D ? D - 1 - k : k - D;
    }
    for (int m = 0; m < s->microbatches; m++)
        s->mb_pipe[m] = (uint8_t)(m % D >= D / 2);
}

static pp_status build(pp_sched *s, int D, int N)
{
    pp_gen_lists l;
    PP_TRY(pp_gen_lists_init(&l, D, 2 * N + 2));
    l.cost_f = 1;
    l.cost_b = 2;
    int h = D / 2;
    for (int d = 0; d < D; d++) {
        rank_ctx c = {D, h, d, d < h ? 0 : 1, d < h ? h - d : d - h + 1, 0};
        for (c.group = 0; c.group < N / D; c.group++) {
            add_group(&l, &c, PP_OP_F);
            add_group(&l, &c, PP_OP_B);
        }
        int pair = d < h ? d : D - 1 - d;
        add_syncs(&l, D, d, 2 * pair, 2 * pair + 1);
        l.cap[d] = D + h + (d < D - 1 - d ? d : D - 1 - d) + 1;
    }
    pp_status st = pp_gen_merge_lists(s, &l);
    pp_gen_lists_fini(&l);
    return st;
}

pp_status pp_gen_bitpipe(const pp_sched_params *p, pp_sched **out)
{
    *out = NULL;
    int D = p->ranks, N = p->microbatches;
    pp_sched *s;
    pp_sched_split sp = pp_sched_params_split(p);
    PP_TRY(pp_sched_create("bitpipe", D, N, 2, 2, p->layers, &sp, &s));
    place(s, D);
    pp_status st = add_reduces(s, D);
    if (st == PP_OK)
        st = build(s, D, N);
    PP_TRY(pp_gen_finish(s, st, out));
    return PP_OK;
}
