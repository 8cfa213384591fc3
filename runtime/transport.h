/* transport.h — private to runtime/: the table of callbacks a transport fills.
 *
 * The public entry points (pp_transport_* in pp_rt.h) check ranks and arguments in
 * transport.c and dispatch here, so an implementation sees only valid ranks. The in-process
 * transport is transport_thread.c, the MPI one transport_mpi.c; NCCL fills the same table.
 */
#ifndef PP_RT_TRANSPORT_H
#define PP_RT_TRANSPORT_H

#include "pp_rt.h"

typedef struct {
    pp_status (*send)(void *ctx, int from, int to, uint64_t tag, const void *buf, size_t bytes);
    pp_status (*recv)(void *ctx, int to, int from, uint64_t tag, void *buf, size_t bytes);
    pp_status (*iallreduce_sum)(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                                float *data, size_t n, pp_transport_req **req);
    pp_status (*wait)(void *ctx, int rank, pp_transport_req *req);
    pp_status (*barrier)(void *ctx, int rank);
    pp_status (*flush)(void *ctx, int rank);
    void (*abort)(void *ctx);
    void (*destroy)(void *ctx);
    /* Optional (NULL: buffers are the transport's own): rank's transfer buffers are counted
     * as PP_MEM_COMM in `be` from now on; be NULL releases every buffer still held for the
     * rank (the executor calls it before it destroys the backend). */
    void (*bind)(void *ctx, int rank, pp_backend *be);
    /* Optional (NULL: waits cannot stall, as between threads of one process): a blocking wait
     * that sees no progress for `seconds` fails with PP_ERR_TIMEOUT naming the peer; 0: never. */
    void (*set_watchdog)(void *ctx, double seconds);
    /* Optional (NULL: pp_transport_allgather / reduce_scatter_sum answer PP_ERR_UNSUPPORTED):
     * the blocking tensor-parallel collectives, arguments checked as pp_rt_transport.h says. */
    pp_status (*allgather)(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                           const float *part, float *full, size_t n);
    pp_status (*reduce_scatter_sum)(void *ctx, int rank, const int *group, int n_group,
                                    uint64_t tag, const float *full, float *part, size_t n);
    /* Optional (NULL: pp_transport_alltoallv answers PP_ERR_UNSUPPORTED): the blocking
     * all-to-all of expert parallelism, arguments as pp_rt_transport.h says. */
    pp_status (*alltoallv)(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                           const void *send, const size_t *send_bytes, void *recv,
                           const size_t *recv_bytes);
    /* Optional (NULL: send, and release is a no-op): a send whose copy is held apart from the
     * rank's other messages (no other buffer is released by it, nor it by them) until
     * release_held, which waits until the rank's held messages are received and frees them. */
    pp_status (*send_held)(void *ctx, int from, int to, uint64_t tag, const void *buf,
                           size_t bytes);
    pp_status (*release_held)(void *ctx, int rank);
} pp_transport_ops;

struct pp_transport {
    const char *name; /* "thread", "mpi", "nccl" */
    const pp_transport_ops *ops;
    void *ctx;
    int ranks;
    int self;      /* the one rank of this process, or -1 when all ranks are (threads) */
    unsigned caps; /* PP_TRANSPORT_CAP_* (plan/pp_rt_plan.h); 0: host memory only */
};

void pp_transport_bind(pp_transport *t, int rank, pp_backend *be);

/* The watchdog's failure, one wording for every process transport (MPI, NCCL): rank `rank`
 * waited `waited` seconds for rank `peer` (< 0: for the other ranks) in `what` ("a receive")
 * without progress. Records the message and returns PP_ERR_TIMEOUT. */
pp_status pp_transport_stalled(int rank, double waited, int peer, const char *what);

/* transport_mpi.c: this rank's position among the world ranks on its host (host names over
 * MPI_Allgather); PP_ERR_UNSUPPORTED without MPI. For pp_launch_local_rank. */
pp_status pp_mpi_host_local_rank(int *local_rank);
/* Like it, and *local_size (where not NULL) = the processes on this host. */
pp_status pp_mpi_host_local(int *local_rank, int *local_size);

/* Tags. Point to point (bit 63 clear): pp_transport_tag's layout (transport.c). Collectives
 * and the executor's own point-to-point gathers (bit 63 set): kind in bits 48..55, replica
 * in bits 32..47, an index in bits 0..31 (executor.h, pp_ex_coll_tag). A process transport
 * that must squeeze tags into fewer bits (MPI's are ints) relies on this layout. */

#endif
