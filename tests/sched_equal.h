/* sched_equal.h — test helper shared by the format suites: are two schedules equal field by
 * field? Writes the first difference into why (for the assertion message). */
#ifndef PP_TEST_SCHED_EQUAL_H
#define PP_TEST_SCHED_EQUAL_H

#include <stdio.h>
#include <string.h>

#include "pp_sched.h"

static inline int pp_test_sched_equal(const pp_sched *a, const pp_sched *b, char *why, size_t n)
{
#define PP_TEST_FIELD(f)                                                                           \
    if (a->f != b->f) {                                                                            \
        snprintf(why, n, #f ": %d vs %d", (int)a->f, (int)b->f);                                   \
        return 0;                                                                                  \
    }
    if (strcmp(a->kind, b->kind) != 0) {
        snprintf(why, n, "kind: %s vs %s", a->kind, b->kind);
        return 0;
    }
    PP_TEST_FIELD(ranks)
    PP_TEST_FIELD(microbatches)
    PP_TEST_FIELD(chunks)
    PP_TEST_FIELD(group)
    PP_TEST_FIELD(n_pipes)
    PP_TEST_FIELD(stages_per_pipe)
    PP_TEST_FIELD(layers)
    PP_TEST_FIELD(n_reduces)
#undef PP_TEST_FIELD
    for (int i = 0; i < a->n_pipes * a->stages_per_pipe; i++) {
        const pp_stage *x = &a->stages[i], *y = &b->stages[i];
        if (x->rank != y->rank || x->layer_begin != y->layer_begin ||
            x->layer_end != y->layer_end) {
            snprintf(why, n, "stage %d: rank %d [%d,%d) vs rank %d [%d,%d)", i, x->rank,
                     x->layer_begin, x->layer_end, y->rank, y->layer_begin, y->layer_end);
            return 0;
        }
    }
    for (int m = 0; m < a->microbatches; m++)
        if (a->mb_pipe[m] != b->mb_pipe[m]) {
            snprintf(why, n, "mb_pipe[%d]: %d vs %d", m, a->mb_pipe[m], b->mb_pipe[m]);
            return 0;
        }
    for (int k = 0; k < a->n_reduces; k++)
        /* pp_sched_add_reduce zeroes a descriptor before filling it: equal means equal bytes */
        if (memcmp(&a->reduces[k], &b->reduces[k], sizeof a->reduces[k]) != 0) {
            snprintf(why, n, "reduce %d differs", k);
            return 0;
        }
    for (int r = 0; r < a->ranks; r++) {
        if (a->n_ops[r] != b->n_ops[r]) {
            snprintf(why, n, "rank %d: %d vs %d actions", r, a->n_ops[r], b->n_ops[r]);
            return 0;
        }
        for (int i = 0; i < a->n_ops[r]; i++) {
            const pp_action *x = &a->ops[r][i], *y = &b->ops[r][i];
            if (x->op != y->op || x->pipe != y->pipe || x->stage != y->stage || x->mb != y->mb ||
                x->peer != y->peer || x->overlap != y->overlap) {
                char bx[96], by[96];
                snprintf(why, n, "rank %d action %d: %s vs %s", r, i,
                         pp_action_str(a, x, bx, sizeof bx), pp_action_str(b, y, by, sizeof by));
                return 0;
            }
        }
    }
    return 1;
}

#endif
