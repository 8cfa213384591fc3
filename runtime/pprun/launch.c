/* launch.c — pprun under a launcher: which transport to use (threads, or one MPI process per
 * pipeline rank), the world-size checks that turn a bad launch into one clear line, and the
 * agreement after setup so that one process's failure does not leave the others waiting.
 *
 * Not here: launching processes (mpirun / srun do; examples/pprun.sbatch shows how).
 */
#include <stdio.h>
#include <string.h>

#include "pprun.h"

/* World size against --ranks / --dp (/ --tp, --cp). Every process computes the same answer;
 * rank 0 says it. */
static int check_world(pprun_opts *o, int world, int rank)
{
    if (o->cfg.t > 1 || o->cfg.cp > 1) {
        /* one process per (tensor rank, pipeline rank, cp rank, replica) */
        int per = o->cfg.p * o->cfg.t * o->cfg.cp;
        if (world % per != 0 || (o->dp_set && o->cfg.d * per != world)) {
            if (rank == 0)
                fprintf(stderr,
                        "pprun: --ranks %d x --tp %d x --cp %d%s needs %d processes%s, but %d "
                        "were launched\n",
                        o->cfg.p, o->cfg.t, o->cfg.cp, o->dp_set ? " x --dp" : "",
                        o->dp_set ? per * o->cfg.d : per, o->dp_set ? "" : " (or a multiple)",
                        world);
            return 2;
        }
        o->cfg.d = world / per;
        return -1;
    }
    if (world % o->cfg.p != 0) {
        if (rank == 0)
            fprintf(stderr,
                    "pprun: %d processes were launched, which is not a multiple of --ranks %d: "
                    "launch ranks x dp processes (e.g. mpirun -np %d)\n",
                    world, o->cfg.p, o->cfg.p);
        return 2;
    }
    if (o->dp_set && o->cfg.d * o->cfg.p != world) {
        if (rank == 0)
            fprintf(stderr,
                    "pprun: --ranks %d x --dp %d = %d pipeline ranks, but %d processes were "
                    "launched: launch %d (mpirun -np %d), or leave --dp out (it is then %d)\n",
                    o->cfg.p, o->cfg.d, o->cfg.p * o->cfg.d, world, o->cfg.p * o->cfg.d, o->cfg.p * o->cfg.d,
                    world / o->cfg.p);
        return 2;
    }
    o->cfg.d = world / o->cfg.p;
    return -1;
}

int pprun_open_transport(pprun_opts *o, pp_transport **tp, int *rank)
{
    *tp = NULL;
    *rank = 0;
    /* --transport thread runs the whole job in this process even under a launcher: a tuner
     * started by mpirun runs its trials that way (its children inherit the launcher's
     * variables). */
    if (!strcmp(o->transport, "thread"))
        return -1;
    pp_launch_info li;
    pp_status st = pp_launch_detect(&li);
    if (st != PP_OK) {
        fprintf(stderr, "pprun: bad launcher environment: %s\n", pp_err_text());
        return 2;
    }
    if (!strcmp(o->transport, "auto") && li.size == 1)
        return -1;
    /* The world-size checks come after MPI_Init although the launcher's variables would do:
     * rank 0 says what is wrong, and no process exits before the agreement that follows (a
     * process that exits first makes mpirun kill the others, rank 0's message with them). */
    if ((st = pp_transport_mpi_create(tp)) != PP_OK) {
        if (li.rank == 0 || st != PP_ERR_UNSUPPORTED) /* "built without MPI": once */
            fprintf(stderr, "pprun: --transport mpi: %s\n", pp_err_text());
        return 2;
    }
    *rank = pp_transport_self(*tp);
    pp_transport_set_watchdog(*tp, o->watchdog_s);
    int world = pp_transport_ranks(*tp);
    if (li.size > 1 && world != li.size) {
        if (*rank == 0)
            fprintf(stderr,
                    "pprun: %s says the job has %d processes but MPI_COMM_WORLD has %d: was pprun "
                    "started by srun without MPI support (try srun --mpi=pmix)?\n",
                    li.launcher, li.size, world);
        return 2;
    }
    return check_world(o, world, *rank);
}

/* Every process's v[0 .. n) summed over the processes (MPI all-reduce); 0 on success. */
static int sum_all(pp_transport *tp, int rank, float *v, int n)
{
    int ranks = pp_transport_ranks(tp);
    int group[1024];
    if (ranks > (int)(sizeof group / sizeof group[0]))
        return -1; /* larger jobs skip the agreement (the executor allows 1024 ranks) */
    for (int g = 0; g < ranks; g++)
        group[g] = g;
    uint64_t tag = (1ull << 63) | 1; /* kind 0: a tag the executor never uses */
    if (pp_transport_allreduce_sum(tp, rank, group, ranks, tag, v, (size_t)n) != PP_OK) {
        fprintf(stderr, "pprun: rank %d: %s\n", rank, pp_err_msg());
        return 1;
    }
    return 0;
}

int pprun_agree(pp_transport *tp, int rank, int rc)
{
    if (!tp)
        return rc;
    /* processes that failed (each printed why, or rank 0 did for an input error all share) */
    float failed = rc >= 0 ? 1.0f : 0.0f;
    int e = sum_all(tp, rank, &failed, 1);
    if (e)
        return e < 0 ? rc : e;
    return failed > 0 && rc < 0 ? 1 : rc;
}

int pprun_agree_code(pp_transport *tp, int rank, int rc)
{
    if (!tp)
        return rc;
    float codes[2] = {rc == 2 ? 1.0f : 0.0f, rc >= 0 && rc != 2 ? 1.0f : 0.0f};
    int e = sum_all(tp, rank, codes, 2);
    if (e)
        return e < 0 ? rc : e;
    return codes[0] > 0 ? 2 : codes[1] > 0 ? 1 : -1;
}
