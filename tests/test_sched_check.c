/* test_sched_check.c — the checker: generated schedules pass; each kind of broken schedule is
 * rejected with a message that names the rank, the action and the reason. Broken schedules are
 * built with the builder API or by editing a generated one. */
#include <criterion/criterion.h>
#include <string.h>

#include "pp_sched.h"
#include "sched_build.h"

static pp_sched *gen(const char *kind, int D, int N, int v)
{
    pp_sched_params p = {.ranks = D, .microbatches = N, .chunks = v};
    pp_sched *s = NULL;
    cr_assert_eq(pp_sched_generate(kind, &p, &s), PP_OK, "%s", pp_err_msg());
    return s;
}

/* Index of the first action (op, pipe, stage, mb) on rank r. */
static int find(const pp_sched *s, int r, int op, int pipe, int stage, int mb)
{
    for (int i = 0; i < s->n_ops[r]; i++) {
        pp_action a = s->ops[r][i];
        if (a.op == op && a.pipe == pipe && a.stage == stage && a.mb == mb)
            return i;
    }
    cr_assert_fail("rank %d has no %s pipe %d stage %d mb %d", r, pp_op_name(op), pipe, stage, mb);
    return -1;
}

static void remove_at(pp_sched *s, int r, int i)
{
    memmove(&s->ops[r][i], &s->ops[r][i + 1], (size_t)(s->n_ops[r] - i - 1) * sizeof(pp_action));
    s->n_ops[r]--;
}

static void swap(pp_sched *s, int r, int i, int j)
{
    pp_action t = s->ops[r][i];
    s->ops[r][i] = s->ops[r][j];
    s->ops[r][j] = t;
}

Test(sched_check, generated_schedules_pass)
{
    const char *kinds[] = {"gpipe", "1f1b"};
    for (int k = 0; k < 2; k++)
        for (int D = 1; D <= 6; D++)
            for (int N = 1; N <= 9; N++) {
                pp_sched *s = gen(kinds[k], D, N, 0);
                cr_assert_eq(pp_sched_check(s), PP_OK, "%s D=%d N=%d: %s", kinds[k], D, N,
                             pp_err_msg());
                pp_sched_destroy(s);
            }
    for (int v = 2; v <= 4; v++)
        for (int D = 2; D <= 8; D *= 2)
            for (int N = D; N <= 3 * D; N += D / 2 > 0 ? D / 2 : 1) {
                pp_sched_params p = {.ranks = D, .microbatches = N, .chunks = v};
                pp_sched *s = NULL;
                if (pp_sched_generate("interleaved", &p, &s) != PP_OK)
                    continue; /* N mod G outside Megatron's rule: the generator refuses */
                cr_assert_eq(pp_sched_check(s), PP_OK, "interleaved D=%d v=%d N=%d: %s", D, v, N,
                             pp_err_msg());
                pp_sched_destroy(s);
            }
}

Test(sched_check, missing_forward)
{
    pp_sched *s = gen("1f1b", 4, 8, 0);
    remove_at(s, 1, find(s, 1, PP_OP_F, 0, 1, 3));
    EXPECT_REJECT(s, PP_ERR_CHECK, "rank 1: F pipe 0 stage 1 mb 3 is missing");
    pp_sched_destroy(s);
}

Test(sched_check, duplicated_backward)
{
    pp_sched *s = gen("1f1b", 4, 8, 0);
    int first = find(s, 3, PP_OP_B, 0, 3, 2);
    cr_assert_eq(pp_sched_push(s, 3, PP_OP_B, 0, 3, 2), PP_OK);
    char want[96];
    snprintf(want, sizeof want, "duplicated: the same B is already at action %d", first);
    char where[96];
    snprintf(where, sizeof where, "rank 3, action %d (B pipe 0 stage 3 mb 2)", s->n_ops[3] - 1);
    EXPECT_REJECT(s, PP_ERR_CHECK, where, want);
    pp_sched_destroy(s);
}

Test(sched_check, compute_on_the_wrong_rank)
{
    pp_sched *s = gen("gpipe", 2, 2, 0);
    cr_assert_eq(pp_sched_push(s, 0, PP_OP_F, 0, 1, 0), PP_OK);
    EXPECT_REJECT(s, PP_ERR_CHECK, "rank 0, action 8 (F pipe 0 stage 1 mb 0)",
                  "wrong rank: stage 1 of pipe 0 is placed on rank 1");
    pp_sched_destroy(s);
}

Test(sched_check, backward_before_its_forward)
{
    pp_sched *s = gen("1f1b", 4, 8, 0);
    /* last stage: RECV_F F B SEND_B -> RECV_F B F SEND_B */
    int f = find(s, 3, PP_OP_F, 0, 3, 0), b = find(s, 3, PP_OP_B, 0, 3, 0);
    swap(s, 3, f, b);
    char where[96];
    snprintf(where, sizeof where, "rank 3, action %d (B pipe 0 stage 3 mb 0)", f);
    EXPECT_REJECT(s, PP_ERR_CHECK, where, "backward before its forward");
    pp_sched_destroy(s);
}

Test(sched_check, forward_before_its_receive)
{
    pp_sched *s = gen("1f1b", 4, 8, 0);
    int rv = find(s, 2, PP_OP_RECV_F, 0, 2, 5), f = find(s, 2, PP_OP_F, 0, 2, 5);
    swap(s, 2, rv, f);
    char where[96];
    snprintf(where, sizeof where, "rank 2, action %d (F pipe 0 stage 2 mb 5)", rv);
    EXPECT_REJECT(s, PP_ERR_CHECK, where, "forward before the RECV_F of its input");
    pp_sched_destroy(s);
}

Test(sched_check, local_hand_over_out_of_order)
{
    /* one rank holding stages 0 and 1: F of stage 1 before F of stage 0 */
    pp_sched *s;
    cr_assert_eq(pp_sched_create("custom", 1, 1, 2, 1, 0, 0, &s), PP_OK);
    pp_sched_stage(s, 0, 0)->rank = 0;
    pp_sched_stage(s, 0, 1)->rank = 0;
    const test_act r0[] = {
        {PP_OP_F, 0, 1, 0}, {PP_OP_F, 0, 0, 0}, {PP_OP_B, 0, 1, 0}, {PP_OP_B, 0, 0, 0}};
    push_acts(s, 0, r0, N_ACTS(r0));
    EXPECT_REJECT(s, PP_ERR_CHECK, "rank 0, action 0 (F pipe 0 stage 1 mb 0)",
                  "forward before the forward of stage 0 (action 1) that feeds it");
    /* and a SEND for that local hop is refused */
    swap(s, 0, 0, 1);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_sched_push(s, 0, PP_OP_SEND_F, 0, 0, 0), PP_OK);
    EXPECT_REJECT(s, PP_ERR_CHECK, "rank 0, action 4 (SEND_F", "local hand-over");
    pp_sched_destroy(s);
}

Test(sched_check, recv_without_its_send)
{
    pp_sched *s = gen("1f1b", 4, 8, 0);
    remove_at(s, 0, find(s, 0, PP_OP_SEND_F, 0, 0, 4));
    int rv = find(s, 1, PP_OP_RECV_F, 0, 1, 4);
    char where[96];
    snprintf(where, sizeof where, "rank 1, action %d (RECV_F pipe 0 stage 1 mb 4 peer 0)", rv);
    EXPECT_REJECT(s, PP_ERR_CHECK, where,
                  "RECV without its SEND: rank 0 never posts SEND_F pipe 0 stage 0 mb 4");
    pp_sched_destroy(s);
}

Test(sched_check, send_without_its_recv)
{
    pp_sched *s = gen("1f1b", 4, 8, 0);
    remove_at(s, 1, find(s, 1, PP_OP_RECV_B, 0, 1, 6));
    int sd = find(s, 2, PP_OP_SEND_B, 0, 2, 6);
    char where[96];
    snprintf(where, sizeof where, "rank 2, action %d (SEND_B pipe 0 stage 2 mb 6 peer 1)", sd);
    EXPECT_REJECT(s, PP_ERR_CHECK, where,
                  "SEND without its RECV: rank 1 never posts RECV_B pipe 0 stage 1 mb 6");
    pp_sched_destroy(s);
}

Test(sched_check, wrong_peer)
{
    pp_sched *s = gen("1f1b", 4, 8, 0);
    int sd = find(s, 1, PP_OP_SEND_F, 0, 1, 0);
    s->ops[1][sd].peer = 3;
    EXPECT_REJECT(s, PP_ERR_CHECK, "rank 1, action",
                  "wrong peer: stage 2 of pipe 0 is on rank 2, "
                  "not rank 3");
    pp_sched_destroy(s);
}

Test(sched_check, send_before_its_compute)
{
    pp_sched *s = gen("1f1b", 4, 8, 0);
    int f = find(s, 0, PP_OP_F, 0, 0, 1), sd = find(s, 0, PP_OP_SEND_F, 0, 0, 1);
    swap(s, 0, f, sd);
    char where[96];
    snprintf(where, sizeof where, "rank 0, action %d (SEND_F pipe 0 stage 0 mb 1 peer 1)", f);
    EXPECT_REJECT(s, PP_ERR_CHECK, where, "send before the forward that produces it");
    pp_sched_destroy(s);
}

Test(sched_check, micro_batch_of_the_other_pipe)
{
    pp_sched *s = two_pipes_two_ranks(); /* micro-batch 0 goes down (pipe 0) */
    const test_act r0[] = {{PP_OP_F, 0, 0, 0}, {PP_OP_F, 1, 1, 0}};
    push_acts(s, 0, r0, N_ACTS(r0));
    EXPECT_REJECT(s, PP_ERR_CHECK, "rank 0, action 1 (F pipe 1 stage 1 mb 0)",
                  "micro-batch 0 goes through pipe 0, not pipe 1");
    pp_sched_destroy(s);
}

Test(sched_check, placement_incomplete)
{
    pp_sched *s = gen("1f1b", 4, 4, 0);
    pp_sched_stage(s, 0, 2)->rank = -1;
    EXPECT_REJECT(s, PP_ERR_CHECK, "stage 2 of pipe 0 is placed on rank -1",
                  "every stage needs a rank in 0..3");
    pp_sched_destroy(s);
}

Test(sched_check, two_pipes_with_reduces_pass)
{
    pp_sched *s = two_ranks_with_reduces(0);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    pp_sched_destroy(s);
}

Test(sched_check, reduce_before_the_last_backward)
{
    pp_sched *s = two_ranks_with_reduces(1);
    int i = find(s, 0, PP_OP_REDUCE, 0, 1, -1);
    char where[96];
    snprintf(where, sizeof where, "rank 0, action %d (REDUCE #1)", i);
    EXPECT_REJECT(s, PP_ERR_CHECK, where,
                  "REDUCE before the last backward of pipe 0 stage 0 (0 of 1 backwards done");
    pp_sched_destroy(s);
}

Test(sched_check, reduce_missing_duplicated_or_foreign)
{
    pp_sched *s = two_ranks_with_reduces(0);
    remove_at(s, 1, find(s, 1, PP_OP_REDUCE, 0, 1, -1));
    EXPECT_REJECT(s, PP_ERR_CHECK, "rank 1: REDUCE #1 is missing");
    cr_assert_eq(pp_sched_push(s, 1, PP_OP_REDUCE, 0, 1, -1), PP_OK);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_sched_push(s, 1, PP_OP_REDUCE, 0, 1, -1), PP_OK);
    EXPECT_REJECT(s, PP_ERR_CHECK, "REDUCE #1)", "duplicated: this rank already issues REDUCE #1");
    s->n_ops[1]--;
    /* a REDUCE of rank 0 alone, issued by rank 1 too */
    int only0[1] = {0}, id;
    pp_stage_ref st0[1] = {{0, 0}};
    cr_assert_eq(pp_sched_add_reduce(s, only0, 1, st0, 1, &id), PP_OK);
    cr_assert_eq(pp_sched_push(s, 0, PP_OP_REDUCE, 0, id, -1), PP_OK);
    cr_assert_eq(pp_sched_push(s, 1, PP_OP_REDUCE, 0, id, -1), PP_OK);
    EXPECT_REJECT(s, PP_ERR_CHECK, "rank 1, action", "rank 1 is not a participant of REDUCE #2");
    pp_sched_destroy(s);
}

Test(sched_check, deadlock_each_rank_receives_before_it_sends)
{
    pp_sched *s = two_ranks_receiving_first();
    EXPECT_REJECT(s, PP_ERR_DEADLOCK,
                  "deadlock: rank 0 waits at action 0 (RECV_F pipe 1 stage 1 mb 1 peer 1) for "
                  "rank 1, which waits at action 0 (RECV_F pipe 0 stage 1 mb 0 peer 0) for rank 0");
    pp_sched_destroy(s);
}

Test(sched_check, deadlock_on_reduces_in_conflicting_order)
{
    pp_sched *s = two_ranks_with_reduces(0);
    /* rank 1 issues REDUCE #1 before #0: move its #0 to the end */
    int i0 = find(s, 1, PP_OP_REDUCE, 0, 0, -1);
    pp_action r0 = s->ops[1][i0];
    remove_at(s, 1, i0);
    cr_assert_eq(pp_sched_push(s, 1, r0.op, 0, r0.stage, -1), PP_OK);
    int w0 = find(s, 0, PP_OP_REDUCE, 0, 0, -1), w1 = find(s, 1, PP_OP_REDUCE, 0, 1, -1);
    char want[256];
    snprintf(want, sizeof want,
             "rank 0 waits at action %d (REDUCE #0) for rank 1, which waits at action %d "
             "(REDUCE #1) for rank 0",
             w0, w1);
    EXPECT_REJECT(s, PP_ERR_DEADLOCK, want);
    pp_sched_destroy(s);
}

Test(sched_check, three_rank_cycle_is_named_in_full)
{
    /* GPipe on 3 ranks, one micro-batch, where the middle rank waits for the gradient before it
     * receives and sends the forward: it waits on rank 2, which waits on rank 1, and rank 0 waits
     * on rank 1 outside the cycle */
    pp_sched *s = gen("gpipe", 3, 1, 0);
    /* rank 1: RECV_F F SEND_F RECV_B B SEND_B -> move RECV_B to the front */
    int rb = find(s, 1, PP_OP_RECV_B, 0, 1, 0);
    pp_action a = s->ops[1][rb];
    memmove(&s->ops[1][1], &s->ops[1][0], (size_t)rb * sizeof(pp_action));
    s->ops[1][0] = a;
    EXPECT_REJECT(s, PP_ERR_DEADLOCK, "deadlock: rank 1 waits at action 0 (RECV_B", "for rank 2",
                  "which waits at action 0 (RECV_F pipe 0 stage 2 mb 0 peer 1) for rank 1");
    pp_sched_destroy(s);
}
