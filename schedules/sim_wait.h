/* sim_wait.h — private to schedules/: what the checker (check.c) and the simulator (sim.c) share
 * about executing per-rank action lists: the (pipe, stage, micro-batch) key of the O(1) lookup
 * tables, and the deadlock report that names the cycle of waits. */
#ifndef PP_SIM_WAIT_H
#define PP_SIM_WAIT_H

#include <stddef.h>

#include "pp_sched.h"

/* Index of (pipe, stage, mb) in a table of n_pipes * S * N entries. */
static inline size_t pp_sched_key(const pp_sched *s, int pipe, int stage, int mb)
{
    return ((size_t)pipe * (size_t)s->stages_per_pipe + (size_t)stage) * (size_t)s->microbatches +
           (size_t)mb;
}

/* Index of rank r among the participants of a REDUCE, or -1. */
static inline int pp_reduce_participant(const pp_reduce *red, int r)
{
    for (int j = 0; j < red->n_ranks; j++)
        if (red->ranks[j] == r)
            return j;
    return -1;
}

/* Records PP_ERR_DEADLOCK naming a cycle of waits, e.g. "deadlock: rank 0 waits at action 5
 * (RECV_B ...) for rank 1, which waits at action 9 (...) for rank 0". pc[r] is the action rank r
 * is stuck at (pc[r] == n_ops[r] when it finished); waits_for[r] is the rank it waits for, or -1
 * when it is not waiting. Where a chain of waits ends at a finished rank instead of closing a
 * cycle, the message says so (a RECV whose SEND was never posted). */
pp_status pp_sched_deadlock_error(const pp_sched *s, const int *pc, const int *waits_for);

#endif
