/* sched_build.h — helpers for the checker and simulator tests that build schedules by hand: one
 * rank's action list written as a table, and the two-rank, two-pipe (Chimera-like) placement
 * several cases use. Include after <criterion/criterion.h>. */
#ifndef PP_TEST_SCHED_BUILD_H
#define PP_TEST_SCHED_BUILD_H

#include "pp_sched.h"

typedef struct {
    int op, pipe, stage, mb; /* for REDUCE: stage = reduce id, mb = -1 */
} test_act;

#define N_ACTS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Asserts the checker fails with `want` and that its message contains every fragment. */
#define EXPECT_REJECT(s, want, ...)                                                                \
    do {                                                                                           \
        cr_assert_eq(pp_sched_check(s), (want), "accepted or wrong status: %s", pp_err_msg());     \
        const char *frags_[] = {__VA_ARGS__};                                                      \
        for (size_t k_ = 0; k_ < sizeof frags_ / sizeof frags_[0]; k_++)                           \
            cr_assert(strstr(pp_err_text(), frags_[k_]), "message \"%s\" lacks \"%s\"",            \
                      pp_err_text(), frags_[k_]);                                                  \
    } while (0)

/* How many actions of kind op the schedule has, over all ranks. */
static inline int count_ops(const pp_sched *s, int op)
{
    int n = 0;
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->n_ops[r]; i++)
            n += s->ops[r][i].op == op;
    return n;
}

/* Appends n actions to rank r. */
static inline void push_acts(pp_sched *s, int r, const test_act *a, int n)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(pp_sched_push(s, r, (pp_op_kind)a[i].op, a[i].pipe, a[i].stage, a[i].mb),
                     PP_OK, "%s", pp_err_msg());
}

/* Two ranks, two pipes of two stages, no actions yet. Pipe 0 (down): stage 0 on rank 0, stage 1
 * on rank 1; pipe 1 (up): stage 0 on rank 1, stage 1 on rank 0. Micro-batch 0 goes down, 1 up. */
static inline pp_sched *two_pipes_two_ranks(void)
{
    pp_sched *s;
    cr_assert_eq(pp_sched_create("custom", 2, 2, 1, 2, 0, 0, &s), PP_OK, "%s", pp_err_msg());
    pp_sched_stage(s, 0, 0)->rank = 0;
    pp_sched_stage(s, 0, 1)->rank = 1;
    pp_sched_stage(s, 1, 0)->rank = 1;
    pp_sched_stage(s, 1, 1)->rank = 0;
    s->mb_pipe[0] = 0;
    s->mb_pipe[1] = 1;
    return s;
}

/* two_pipes_two_ranks with each rank receiving before it sends, lowered: rank 0 runs micro-batch
 * 1's last stage first (waiting for rank 1's forward), rank 1 micro-batch 0's (waiting for rank
 * 0's): a deadlock. */
static inline pp_sched *two_ranks_receiving_first(void)
{
    pp_sched *s = two_pipes_two_ranks();
    const test_act r0[] = {
        {PP_OP_F, 1, 1, 1}, {PP_OP_B, 1, 1, 1}, {PP_OP_F, 0, 0, 0}, {PP_OP_B, 0, 0, 0}};
    const test_act r1[] = {
        {PP_OP_F, 0, 1, 0}, {PP_OP_B, 0, 1, 0}, {PP_OP_F, 1, 0, 1}, {PP_OP_B, 1, 0, 1}};
    push_acts(s, 0, r0, N_ACTS(r0));
    push_acts(s, 1, r1, N_ACTS(r1));
    cr_assert_eq(pp_sched_lower_comms(s), PP_OK);
    return s;
}

/* two_pipes_two_ranks with REDUCE #0 of the stage-1 replicas and #1 of the stage-0 replicas,
 * each issued right after the rank's last backward of them (reduce_early: rank 0 issues #1
 * before its backward of stage 0 instead), lowered:
 *   rank 0: F(0,0,0) F(1,1,1) B(1,1,1) R0 B(0,0,0) R1
 *   rank 1: F(1,0,1) F(0,1,0) B(0,1,0) R0 B(1,0,1) R1 */
static inline pp_sched *two_ranks_with_reduces(int reduce_early)
{
    pp_sched *s = two_pipes_two_ranks();
    int ranks[2] = {0, 1};
    pp_stage_ref second[2] = {{0, 1}, {1, 1}}, first[2] = {{0, 0}, {1, 0}};
    cr_assert_eq(pp_sched_add_reduce(s, ranks, 2, second, 2, NULL), PP_OK);
    cr_assert_eq(pp_sched_add_reduce(s, ranks, 2, first, 2, NULL), PP_OK);
    const test_act r0[] = {{PP_OP_F, 0, 0, 0},       {PP_OP_F, 1, 1, 1}, {PP_OP_B, 1, 1, 1},
                           {PP_OP_REDUCE, 0, 0, -1}, {PP_OP_B, 0, 0, 0}, {PP_OP_REDUCE, 0, 1, -1}};
    const test_act r0_early[] = {{PP_OP_F, 0, 0, 0},       {PP_OP_F, 1, 1, 1},
                                 {PP_OP_B, 1, 1, 1},       {PP_OP_REDUCE, 0, 0, -1},
                                 {PP_OP_REDUCE, 0, 1, -1}, {PP_OP_B, 0, 0, 0}};
    const test_act r1[] = {{PP_OP_F, 1, 0, 1},       {PP_OP_F, 0, 1, 0}, {PP_OP_B, 0, 1, 0},
                           {PP_OP_REDUCE, 0, 0, -1}, {PP_OP_B, 1, 0, 1}, {PP_OP_REDUCE, 0, 1, -1}};
    push_acts(s, 0, reduce_early ? r0_early : r0, N_ACTS(r0));
    push_acts(s, 1, r1, N_ACTS(r1));
    cr_assert_eq(pp_sched_lower_comms(s), PP_OK);
    return s;
}

#endif
