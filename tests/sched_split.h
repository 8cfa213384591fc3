/* sched_split.h — split-backward schedules built from a fused one, for the runtime tests (before
 * and beside the zero-bubble generators): every B of a generated schedule becomes an I, with
 * its W right after it or deferred to the end of the rank's program, communication lowered
 * again. Schedules without REDUCE actions only (gpipe, 1f1b, interleaved). Include after
 * <criterion/criterion.h>. */
#ifndef PP_TEST_SCHED_SPLIT_H
#define PP_TEST_SCHED_SPLIT_H

#include "pp_sched.h"

enum { SPLIT_W_AFTER_I, SPLIT_W_AT_END };

/* Returns a new schedule (the caller destroys it): g's compute order with each B split. */
static inline pp_sched *sched_split_of(const pp_sched *g, int where)
{
    pp_sched *s;
    cr_assert_eq(pp_sched_clone(g, &s), PP_OK, "%s", pp_err_msg());
    for (int r = 0; r < g->ranks; r++) {
        s->n_ops[r] = 0;
        for (int pass = 0; pass < (where == SPLIT_W_AT_END ? 2 : 1); pass++)
            for (int i = 0; i < g->n_ops[r]; i++) {
                const pp_action *a = &g->ops[r][i];
                cr_assert_neq(a->op, PP_OP_REDUCE, "sched_split_of: %s has REDUCE actions",
                              g->kind);
                if (pp_op_is_comm(a->op) || (pass == 1 && a->op != PP_OP_B))
                    continue;
                int ops[2] = {a->op, -1}, n = 1;
                if (a->op == PP_OP_B && pass == 0) {
                    ops[0] = PP_OP_I;
                    if (where == SPLIT_W_AFTER_I)
                        ops[n++] = PP_OP_W;
                } else if (pass == 1) {
                    ops[0] = PP_OP_W;
                }
                for (int k = 0; k < n; k++)
                    cr_assert_eq(pp_sched_push(s, r, (pp_op_kind)ops[k], a->pipe, a->stage, a->mb),
                                 PP_OK, "%s", pp_err_msg());
            }
    }
    cr_assert_eq(pp_sched_lower_comms(s), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s split: %s", g->kind, pp_err_msg());
    return s;
}

/* sched_split_of a generated schedule of `kind` (v chunks, 0: natural) over `layers` layers. */
static inline pp_sched *sched_split_gen(const char *kind, int D, int N, int v, int layers,
                                        int where)
{
    pp_sched_params sp = {.ranks = D, .microbatches = N, .chunks = v, .layers = layers};
    pp_sched *g, *s;
    cr_assert_eq(pp_sched_generate(kind, &sp, &g), PP_OK, "%s", pp_err_msg());
    s = sched_split_of(g, where);
    pp_sched_destroy(g);
    return s;
}

#endif
