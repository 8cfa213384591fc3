/* transport.h — private to runtime/: the table of callbacks a transport fills.
 *
 * The public entry points (pp_transport_* in pp_rt.h) check ranks and arguments in
 * transport.c and dispatch here, so an implementation sees only valid ranks. The in-process
 * transport is transport_thread.c; MPI and NCCL transports fill the same table later.
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
} pp_transport_ops;

struct pp_transport {
    const char *name; /* "thread", "mpi", "nccl" */
    const pp_transport_ops *ops;
    void *ctx;
    int ranks;
};

#endif
