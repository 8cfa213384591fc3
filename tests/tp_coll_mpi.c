/* tp_coll_mpi.c — the MPI side of tests/tp_coll_check.h: run under `mpirun -np W`, every rank
 * runs the check on the MPI transport and prints one line "rank R H0 H1 H2 H3" (hex hashes);
 * test_runtime_mpi.c compares them with the thread transport's. Exit 1 with the error on
 * stderr when a collective fails. A test helper, not installed. */
#include <stdio.h>

#include "tp_coll_check.h"

int main(void)
{
    pp_transport *t;
    pp_status st = pp_transport_mpi_create(&t);
    if (st != PP_OK) {
        fprintf(stderr, "tp_coll_mpi: %s\n", pp_err_msg());
        return 1;
    }
    int rank = pp_transport_self(t), world = pp_transport_ranks(t);
    uint64_t h[TP_COLL_HASHES] = {0};
    st = world % 2 || world > 32 ? PP_ERR(PP_ERR_INVALID, "an even world of at most 32 ranks, got %d", world)
                                 : tp_coll_check_rank(t, rank, world, h);
    if (st != PP_OK) {
        fprintf(stderr, "tp_coll_mpi: rank %d: %s\n", rank, pp_err_msg());
        pp_transport_abort(t);
        return 1;
    }
    printf("rank %d %016llx %016llx %016llx %016llx\n", rank, (unsigned long long)h[0],
           (unsigned long long)h[1], (unsigned long long)h[2], (unsigned long long)h[3]);
    fflush(stdout);
    pp_transport_barrier(t, rank);
    pp_transport_destroy(t);
    return 0;
}
