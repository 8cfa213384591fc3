/* gen_dualpipev.c — DualPipeV: DeepSeek's DualPipe (DeepSeek-V3 technical report, 2024) cut in
 * half into a V (deepseek-ai/DualPipe, dualpipev.py), in the order PyTorch pipelining's
 * ScheduleDualPipeV builds (torch/distributed/pipelining/schedules.py).
 *
 * Placement as ZB-V (gen_zbv.c): rank d holds stage d (chunk 0, down) and stage 2D-1-d (chunk 1,
 * back up). Needs N >= 2D (the registry's n_min_stages; PyTorch refuses fewer). Rank d's list:
 *   1  2(D-d-1) forwards of chunk 0;
 *   2  d+1 pairs F(chunk 0), F(chunk 1);
 *   3  D-d-1 times: I(chunk 1), the oldest pending W, F(chunk 1);
 *   4  N-2D+d+1 times: the pair F(chunk 0) & B(chunk 1), then the pair F(chunk 1) & B(chunk 0):
 *      DualPipe's overlapped forward and backward of two micro-batches (OVERLAP_F_B), except
 *      that the last rank's first F(chunk 0), B(chunk 1) are two actions (as PyTorch has it);
 *   5  D-d-1 times: B(chunk 1), then the pair F(chunk 1) & B(chunk 0);
 *   6  d+1 times: a backward of chunk 1 then one of chunk 0, fused (B) in the first half and
 *      split (I, with its W queued) from the middle on (from chunk 1 on odd ranks, from chunk 0
 *      of that middle step on even ones);
 *   7  D-d-1 times: the oldest pending W, then I(chunk 0);
 *   8  the pending W's.
 * A backward is fused (B) or split (I + W) per (stage, micro-batch); W's run oldest first.
 * An overlapped pair is one action of the grammar (pp_action.overlap on its F; the CSV cell
 * "(0F3;7B2)OVERLAP_F_B"), timed as PyTorch's simulator times it (torch/distributed/pipelining/
 * _schedule_visualizer.py, add_schedule_op_spacing): it starts when the inputs of both halves
 * are there and costs F + B on the rank's one compute stream. So for N >= 2D the unit-cost
 * makespan is 3N + D - 1 (tests/test_sched_zb.c derives D = 2, N = 4 by hand),
 * PyTorch's figure, not the fill bound 3N + (D-1)/2 that ZB-V reaches. DualPipe's gain from the
 * overlap, hiding one micro-batch's communication (MoE all-to-all, pipeline sends) behind the
 * other's compute on a GPU's streams, is the part this model does not have beyond what the
 * simulator already overlaps (transfers beside compute); pprun runs the pair as F then B. */
#include "gen.h"

#include <stdlib.h>

typedef struct {
    pp_sched *s;
    int d;
    int stage[2];           /* this rank's chunk 0 and chunk 1 stages */
    int f[2], b[2];         /* next micro-batch of F and of the backward (B or I) per chunk */
    int *wq, wq_head, wq_n; /* FIFO of pending W's: c * N + mb */
    int N;
    pp_status st;
} dpv;

static void push(dpv *x, int op, int c, int mb)
{
    if (x->st == PP_OK)
        x->st = pp_sched_push(x->s, x->d, (pp_op_kind)op, 0, x->stage[c], mb);
}

static void fwd(dpv *x, int c)
{
    push(x, PP_OP_F, c, x->f[c]++);
}

/* A backward of chunk c: fused, or split (I now, W queued). */
static void bwd(dpv *x, int c, int split)
{
    int mb = x->b[c]++;
    push(x, split ? PP_OP_I : PP_OP_B, c, mb);
    if (split)
        x->wq[x->wq_head + x->wq_n++] = c * x->N + mb;
}

static void pending_w(dpv *x)
{
    if (x->wq_n == 0)
        return;
    int k = x->wq[x->wq_head++];
    x->wq_n--;
    push(x, PP_OP_W, k / x->N, k % x->N);
}

/* DualPipe's overlapped pair: forward of chunk cf, full backward of chunk cb, one action
 * (pp_action.overlap on the F); paired 0 writes the two as separate actions. */
static void overlap(dpv *x, int cf, int cb, int paired)
{
    fwd(x, cf);
    if (x->st == PP_OK && paired)
        x->s->ops[x->d][x->s->n_ops[x->d] - 1].overlap = 1;
    bwd(x, cb, 0);
}

static pp_status rank_ops(pp_sched *s, int D, int N, int d)
{
    dpv x = {.s = s, .d = d, .stage = {d, 2 * D - 1 - d}, .N = N, .st = PP_OK};
    x.wq = pp_calloc((size_t)2 * N + 1, sizeof *x.wq);
    if (!x.wq)
        return PP_ERR_NOMEM;
    for (int k = 0; k < 2 * (D - d - 1); k++)
        fwd(&x, 0);
    for (int k = 0; k < d + 1; k++) {
        fwd(&x, 0);
        fwd(&x, 1);
    }
    for (int k = 0; k < D - d - 1; k++) {
        bwd(&x, 1, 1);
        pending_w(&x);
        fwd(&x, 1);
    }
    for (int k = 0; k < N - 2 * D + d + 1; k++) {
        overlap(&x, 0, 1, k > 0 || d < D - 1); /* PyTorch: not at k = 0 on the last rank */
        overlap(&x, 1, 0, 1);
    }
    for (int k = 0; k < D - d - 1; k++) {
        bwd(&x, 1, 0);
        overlap(&x, 1, 0, 1);
    }
    int split = 0, half = (d + 1) / 2;
    for (int k = 0; k < d + 1; k++) {
        if (k == half && d % 2 == 1)
            split = 1;
        bwd(&x, 1, split);
        if (k == half && d % 2 == 0)
            split = 1;
        bwd(&x, 0, split);
    }
    for (int k = 0; k < D - d - 1; k++) {
        pending_w(&x);
        bwd(&x, 0, split);
    }
    while (x.wq_n > 0)
        pending_w(&x);
    free(x.wq);
    if (x.st == PP_OK && (x.f[0] != N || x.f[1] != N || x.b[0] != N || x.b[1] != N))
        return PP_ERR(PP_ERR_CHECK,
                      "dualpipev: rank %d ran %d/%d forwards and %d/%d backwards of %d", d, x.f[0],
                      x.f[1], x.b[0], x.b[1], N);
    return x.st;
}

pp_status pp_gen_dualpipev(const pp_sched_params *p, pp_sched **out)
{
    return pp_gen_v_shape("dualpipev", p, rank_ops, out);
}
