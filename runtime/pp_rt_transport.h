/* pp_rt_transport.h — transports: tables of callbacks that move tensors between ranks (threads
 * in-process, processes over MPI, GPUs over NCCL in runtime/cuda/). The table is private
 * (runtime/transport.h).
 * Part of the runtime's public headers (pp_rt.h includes them all); stands alone.
 */
#ifndef PP_RT_TRANSPORT_PUB_H
#define PP_RT_TRANSPORT_PUB_H

#include <stddef.h>
#include <stdint.h>

#include "pp_common.h"
#include "pp_rt_backend.h"
#include "pp_rt_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A transport moves bytes between ranks and sums float vectors over groups of ranks. It is a
 * table of callbacks plus a context (runtime/transport.h, private), like the backend; three
 * fill it: the in-process one (ranks are threads of one process, transport_thread.c), MPI
 * (transport_mpi.c) and NCCL (cuda/transport_nccl.cu, device memory). Rank r's calls are made by rank r's thread only; every call names
 * the calling rank. Buffers are host memory for the in-process transport.
 *
 * Point to point: send is buffered and never blocks (the schedule IR's SEND); recv blocks
 * until a message from `from` with `tag` has arrived and been copied out (its size must
 * match). Messages between one pair with different tags may be received in any order.
 * Collectives: iallreduce_sum posts this rank's part and returns at once; the sum over the
 * group (summed in the group's order, so every member gets bit-identical floats) is in `data`
 * once pp_transport_wait returns. Members must pass the same group (ascending ranks) and tag;
 * `data` must not be touched between post and wait. A hop that stays on a rank never reaches
 * the transport: the executor hands the buffer over directly. */
typedef struct pp_transport pp_transport;
typedef struct pp_transport_req pp_transport_req;

/* The in-process transport for `ranks` threads. backends: NULL, or [ranks] backends in which
 * each rank's send buffers are counted as PP_MEM_COMM (allocated and freed on the sender's
 * thread only, as the backends are not thread-safe; borrowed: destroy them after the
 * transport). Creates it into *out, freed with pp_transport_destroy. Returns PP_OK,
 * PP_ERR_INVALID for ranks < 1, PP_ERR_NOMEM. Capabilities: 0 (host memory). */
pp_status pp_transport_thread_create(int ranks, pp_backend *const *backends, pp_transport **out);
/* Frees the transport, returning the buffers it still holds to their backends. NULL is a
 * no-op. */
void pp_transport_destroy(pp_transport *t);
/* Returns a static string: "thread", "mpi", "nccl" ("none" for NULL). For messages only:
 * what a transport can do is pp_transport_caps. */
const char *pp_transport_name(const pp_transport *t);
/* Returns the number of ranks (0 for NULL). */
int pp_transport_ranks(const pp_transport *t);
/* Returns the transport's PP_TRANSPORT_CAP_* flags (plan/pp_rt_plan.h); 0 for NULL. */
unsigned pp_transport_caps(const pp_transport *t);
/* A process transport (MPI) fails a blocking wait (receive, send completion, all-reduce,
 * barrier) that sees no progress for `seconds` with PP_ERR_TIMEOUT, naming the rank it waited
 * for, instead of hanging behind a stopped or frozen peer; 0 disables it. Default
 * PP_TRANSPORT_WATCHDOG_S. A no-op for transports whose ranks cannot stall apart (threads). */
#define PP_TRANSPORT_WATCHDOG_S 600.0
void pp_transport_set_watchdog(pp_transport *t, double seconds);

/* Returns the point-to-point tag of the activation (dir 0) or gradient (dir 1) hop of micro-batch
 * mb into / out of `stage` of `pipe`: the executor tags a hop with the stage that receives it. */
uint64_t pp_transport_tag(int pipe, int stage, int mb, int dir);

/* Sends bytes of buf (copied before it returns: buf is the caller's again) from rank `from`.
 * Returns PP_OK; PP_ERR_INVALID for a rank outside the transport; PP_ERR_DEVICE once aborted. */
pp_status pp_transport_send(pp_transport *t, int from, int to, uint64_t tag, const void *buf,
                            size_t bytes);
/* As pp_transport_send, but the copy is held apart: this send releases none of the rank's
 * other messages and they do not release it, until pp_transport_release_held waits for the
 * rank's held messages to be received and frees them. The copies' lifetimes then follow the
 * sender's program order, not the receiver's timing (the context-parallel ring's messages,
 * runtime/stage_cp.c, which the memory plan counts: plan/plan.c). A transport without it
 * sends plainly and release does nothing. */
pp_status pp_transport_send_held(pp_transport *t, int from, int to, uint64_t tag, const void *buf,
                                 size_t bytes);
pp_status pp_transport_release_held(pp_transport *t, int rank);
/* Receives the message from `from` with `tag` into buf (the caller's). Returns PP_OK;
 * PP_ERR_INVALID for a bad rank or a size that differs from the message's; PP_ERR_DEVICE once
 * aborted. */
pp_status pp_transport_recv(pp_transport *t, int to, int from, uint64_t tag, void *buf,
                            size_t bytes);
/* Posts rank's part; *req (the transport's) is released by pp_transport_wait (also when it
 * fails). Returns PP_OK, or PP_ERR_INVALID for a group that is not ascending ranks of the
 * transport containing `rank`. */
pp_status pp_transport_iallreduce_sum(pp_transport *t, int rank, const int *group, int n_group,
                                      uint64_t tag, float *data, size_t n, pp_transport_req **req);
/* Waits for the sum of req into its data and releases req. Returns PP_OK; PP_ERR_DEVICE once
 * aborted. */
pp_status pp_transport_wait(pp_transport *t, int rank, pp_transport_req *req);
/* iallreduce_sum + wait; returns what they return. */
pp_status pp_transport_allreduce_sum(pp_transport *t, int rank, const int *group, int n_group,
                                     uint64_t tag, float *data, size_t n);
/* The tensor-parallel collectives (Megatron's sequence parallelism: all-gather before a
 * column-parallel region, reduce-scatter after a row-parallel one). Blocking: each returns
 * once this rank's result is in place. Members pass the same group (ascending ranks, as for
 * the all-reduce), tag and n; a tag must not be in use by another collective of the same group
 * still open (an all-reduce posted and not yet waited for).
 * All-gather: member i's n floats `part` land at full + i*n on every member (full: n_group * n
 * floats, the caller's). part may be full's own slice i (in place).
 * Reduce-scatter: every member passes n_group * n floats `full`; member i receives in `part`
 * (n floats) the sum over the members of their slice i, summed in group order — bit-identical
 * to slice i of pp_transport_allreduce_sum over the same buffers, on every transport. part may
 * be full's own slice i (in place); full is left as it was apart from that slice.
 * Return PP_OK; PP_ERR_INVALID for a bad group or NULL buffers (or, from the transport, members
 * that disagree on n); PP_ERR_UNSUPPORTED where the transport lacks them; PP_ERR_DEVICE once
 * aborted. */
pp_status pp_transport_allgather(pp_transport *t, int rank, const int *group, int n_group,
                                 uint64_t tag, const float *part, float *full, size_t n);
pp_status pp_transport_reduce_scatter_sum(pp_transport *t, int rank, const int *group, int n_group,
                                          uint64_t tag, const float *full, float *part, size_t n);
/* The all-to-all of expert parallelism (the MoE block's dispatch and combine, Megatron-Core's
 * alltoall token dispatcher), blocking: member i's send holds n_group blocks back to back,
 * block j (send_bytes[j] bytes) for member j; its recv receives them, block j from member j
 * (recv_bytes[j] bytes, back to back). Sizes must agree pairwise (send_bytes[j] of member i
 * equals recv_bytes[i] of member j: exchange them first with a fixed-size call); a block may
 * be empty; member i's block i is a copy. Members pass the same group (ascending) and tag.
 * Returns PP_OK; PP_ERR_INVALID for a bad group or sizes that disagree; PP_ERR_UNSUPPORTED
 * where the transport lacks it; PP_ERR_DEVICE once aborted. */
pp_status pp_transport_alltoallv(pp_transport *t, int rank, const int *group, int n_group,
                                 uint64_t tag, const void *send, const size_t *send_bytes,
                                 void *recv, const size_t *recv_bytes);
/* Returns once every rank of the transport has called it (PP_OK), or PP_ERR_DEVICE once
 * aborted. */
pp_status pp_transport_barrier(pp_transport *t, int rank);
/* Waits until every message `rank` sent has been received, and releases their buffers.
 * Returns PP_OK, or PP_ERR_DEVICE once aborted. */
pp_status pp_transport_flush(pp_transport *t, int rank);
/* Wakes every blocked call, which then fails (PP_ERR_DEVICE, "aborted"), as do later calls:
 * a rank that failed calls this so its peers do not wait forever. Any thread may call it. */
void pp_transport_abort(pp_transport *t);

/* Ranks as processes (runtime/transport_mpi.c): one rank per process of MPI_COMM_WORLD, the
 * process's rank there. Initialises MPI (MPI_Init_thread, FUNNELED: call every pp_transport_*
 * of this transport from the thread that created it) unless the caller already did, and then
 * finalises it in pp_transport_destroy. Point to point: send copies into a buffer posted with
 * MPI_Isend and kept until it completes (counted as PP_MEM_COMM in the backend the executor
 * binds to the rank), recv is MPI_Recv. All-reduce: every member sends its part to the
 * group's first rank, which sums them in group order and sends the sum back, so the floats
 * are bit-identical to the in-process transport's. abort calls MPI_Abort (the only way to
 * wake peers blocked in another process): print what went wrong first.
 * Creates it into *out, freed with pp_transport_destroy. Returns PP_OK; PP_ERR_UNSUPPORTED
 * when built without MPI; PP_ERR_DEVICE when MPI fails (its text). Capabilities: 0. */
pp_status pp_transport_mpi_create(pp_transport **out);
/* Returns the one rank this process is (process transports such as MPI), or -1 when every rank is a
 * thread of this process (the in-process transport). */
int pp_transport_self(const pp_transport *t);
/* GPU ranks over NCCL (runtime/cuda/transport_nccl.cu; compile-checked, not yet run on a
 * GPU): one rank per process on `device` (the launch's local rank: pp_launch_local_rank),
 * bootstrapped over `boot` (the MPI transport, borrowed: destroy it after this one), which
 * carries rank 0's NCCL unique ids to the others before ncclCommInitRank. Buffers are device
 * memory of the CUDA backend bound to the rank; sends are queued and issued as one NCCL group
 * with the next receive on the backend's communication stream; messages between two ranks
 * must be received in the order sent (checked: an error names both tags). All-reduce sums in
 * group order at the group's first rank, like the CPU transports. Creates it into *out,
 * freed with pp_transport_destroy. Returns PP_OK; PP_ERR_UNSUPPORTED when built without CUDA;
 * PP_ERR_INVALID for a device this node does not have. Capabilities:
 * PP_TRANSPORT_CAP_DEVICE_MEM (the executor hands it device pointers, no staging). */
pp_status pp_transport_nccl_create(pp_transport *boot, int device, pp_transport **out);

#ifdef __cplusplus
}
#endif
#endif
