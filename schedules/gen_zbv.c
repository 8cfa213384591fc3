/* gen_zbv.c — ZB-V, the V-shaped zero-bubble schedule (Qi et al., "Zero Bubble Pipeline
 * Parallelism", ICLR 2024, Section 6), in the order PyTorch pipelining's ScheduleZBVZeroBubble
 * builds (torch/distributed/pipelining/schedules.py, _calculate_single_rank_operations).
 *
 * Placement: 2D stages in a V, rank d holding chunk 0 = stage d (the way down) and chunk 1 =
 * stage 2D-1-d (the way back up); the last rank holds stages D-1 and D, a local hand-over, so
 * a micro-batch's forward and its backward both start and end on rank 0. Rank d's list, with
 * M = max(N, 2D-1) micro-batches and every action of a micro-batch >= N dropped afterwards (as
 * PyTorch does, so that small N keeps the same relative order):
 *   warm-up   2(D-d)-1 forwards of chunk 0; then d pairs F(chunk 1), F(chunk 0); then D-d
 *             triples F, I, W of chunk 1;
 *   steady    while chunk 0 has forwards left or chunk 1 lags: F(0) if any left, I(0), W(0),
 *             F(1), I(1), W(1);
 *   cool-down d pairs I(0), I(1); D-d pairs I(0), W(0) of the oldest pending; then the pending
 *             W's of chunk 1, then those of chunk 0.
 * Unit costs (F = I = W for a chunk): chunk 0 of micro-batch 0 reaches the turn at D, so the
 * warm-up is where the bubble is; PyTorch's docstring notes the schedule is zero-bubble only
 * when F = I = W. Memory: activations held until W; the figures for D in {4, 8} are in
 * test_sched_zb.c, measured with the simulator. Deviation: none in the order. */
#include "gen.h"

typedef struct {
    pp_sched *s;
    int d, N;
    int stage[2];         /* this rank's chunk 0 and chunk 1 stages */
    int f[2], i[2], w[2]; /* next micro-batch of each op per chunk */
    pp_status st;
} zbv;

/* Appends op of chunk c for its next micro-batch; micro-batches >= N are dropped. */
static void add(zbv *z, int op, int c)
{
    int *next = op == PP_OP_F ? z->f : op == PP_OP_I ? z->i : z->w;
    int mb = next[c]++;
    if (z->st == PP_OK && mb < z->N)
        z->st = pp_sched_push(z->s, z->d, (pp_op_kind)op, 0, z->stage[c], mb);
}

static void triple(zbv *z, int c)
{
    add(z, PP_OP_F, c);
    add(z, PP_OP_I, c);
    add(z, PP_OP_W, c);
}

static pp_status rank_ops(pp_sched *s, int D, int N, int d)
{
    int M = N > 2 * D - 1 ? N : 2 * D - 1;
    zbv z = {.s = s, .d = d, .N = N, .stage = {d, 2 * D - 1 - d}, .st = PP_OK};
    for (int k = 0; k < 2 * (D - d) - 1; k++)
        add(&z, PP_OP_F, 0);
    for (int k = 0; k < d; k++) {
        add(&z, PP_OP_F, 1);
        add(&z, PP_OP_F, 0);
    }
    for (int k = 0; k < D - d; k++)
        triple(&z, 1);
    while (z.f[1] < z.f[0] || z.f[0] < M) {
        if (z.f[0] < M)
            add(&z, PP_OP_F, 0);
        add(&z, PP_OP_I, 0);
        add(&z, PP_OP_W, 0);
        triple(&z, 1);
    }
    for (int k = 0; k < d; k++) {
        add(&z, PP_OP_I, 0);
        add(&z, PP_OP_I, 1);
    }
    for (int k = 0; k < D - d; k++) {
        add(&z, PP_OP_I, 0);
        add(&z, PP_OP_W, 0);
    }
    while (z.w[1] < z.i[1])
        add(&z, PP_OP_W, 1);
    while (z.w[0] < z.i[0])
        add(&z, PP_OP_W, 0);
    if (z.st == PP_OK && (z.f[0] != M || z.f[1] != M || z.i[0] != M || z.w[1] != M))
        return PP_ERR(PP_ERR_CHECK, "zbv: rank %d ran %d/%d forwards and %d/%d backwards of %d", d,
                      z.f[0], z.f[1], z.i[0], z.i[1], M);
    return z.st;
}

pp_status pp_gen_zbv(const pp_sched_params *p, pp_sched **out)
{
    return pp_gen_v_shape("zbv", p, rank_ops, out);
}
