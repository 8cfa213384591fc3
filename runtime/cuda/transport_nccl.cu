/* transport_nccl.cu — GPU ranks over NCCL: the transport table (transport.h) with device
 * buffers, one rank per process and one GPU per rank. No GPU has run it (compile-checked with
 * nvcc); the tests run it under the CPU emulation, whose NCCL is MPI (tests/cuda_emu/nccl_emu.cpp).
 *
 * Bootstrap: rank 0 makes size + 1 NCCL unique ids and sends them to every other rank through
 * the boot transport (the MPI one: its point-to-point send, a broadcast), after every rank's
 * device was checked (all ranks fail together); then every rank calls cudaSetDevice(device) and
 * ncclCommInitRank size + 1 times: one communicator per sending rank for pipeline hops (p2p[q]
 * carries what rank q sends), one for the all-reduces, so a REDUCE's messages never meet a hop.
 *
 * NCCL point-to-point has neither tags nor buffering, the table's send has both; so:
 *   - send copies the buffer on the backend's compute stream (ordered after the kernel that
 *     produced it) into a message of bytes + 8 (the tag as a trailer), PP_MEM_COMM, and issues
 *     it at once as an ncclSend on its own communicator p2p[self] and that communicator's
 *     stream: NCCL runs one communicator's operations in issue order and a send completes only
 *     when the peer receives it, so a send on the communicator of the receives would block every
 *     later receive until the peer took it; two ranks that each send to the other ahead of
 *     their receives (interleaved) deadlocked that way. On p2p[self] a send waits only for
 *     earlier sends of this rank, which their receivers take in the order sent, and the host
 *     never blocks on a send until flush;
 *   - messages between two ranks are received in the order sent (NCCL's rule): recv reads the
 *     next message from the peer on p2p[peer] and checks its trailer; a schedule that receives
 *     out of order gets an error naming both tags, not wrong data. Sizes must match (NCCL
 *     cannot tell the receiver a message's size); the executor's hops always do.
 * All-reduce: every member sends its part to the group's first rank, which adds the parts in
 * group order (d0 + d1 + ..., the CPU transports' order, with the backend's add kernel) and
 * sends the sum back: deterministic, and the order the CPU reference uses. Not NCCL's ring
 * all-reduce: correct before fast (a bucketed ncclAllReduce on split communicators is the
 * faster path, not done here).
 * All-gather and reduce-scatter (tensor parallelism, blocking): the same star on the same
 * communicator; the root places the parts (all-gather) or adds the members' whole buffers in
 * group order and sends slice j to member j (reduce-scatter), so the floats are the CPU
 * transports'. They share the all-reduce's communicator and NCCL's in-order rule: one issued
 * while an all-reduce of the same members is posted and not yet waited for fails with the tag
 * check's error, not wrong data.
 *
 * Not here: host buffers, more than one GPU per process. A rank's sends to different peers
 * still complete in issue order (one communicator per ordered pair of ranks would lift that:
 * a schedule in which a rank's later send must arrive before its earlier one is received
 * would hang here, and runs over the buffered MPI and thread transports).
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_status.h"
#include "pp_rt.h"
extern "C" {
#include "../backend.h"
#include "../transport.h"
}


enum { TRAILER = sizeof(uint64_t) };

typedef struct nmsg {
    struct nmsg *next;
    ncclComm_t comm;
    cudaStream_t stream; /* comm's stream here */
    int to;
    void *buf; /* device, bytes + TRAILER */
    size_t bytes;
    cudaEvent_t done; /* recorded on the comm stream after the send was issued */
    int issued;
} nmsg;

struct pp_transport_req {
    int root, n_group;
    int *group;
    float *data; /* device, n floats */
    size_t n;
    uint64_t tag;
};

typedef struct {
    pp_transport *boot; /* borrowed */
    int rank, size, device;
    /* p2p[q] carries the messages rank q sends, on this rank's stream p2p_s[q] (made here).
     * NCCL runs a communicator's operations in the order issued and a send waits for its
     * receive: on one communicator, a send the peer receives only later blocks every receive
     * issued after it, and two ranks each sending to the other ahead of its receives deadlock
     * (interleaved did, under the emulation). One communicator per sender: a send waits only
     * for the receives of its own messages, which the receiver posts in the order sent. */
    ncclComm_t *p2p;      /* [size] */
    cudaStream_t *p2p_s;  /* [size] */
    ncclComm_t coll;
    pp_backend *be;
    cudaStream_t compute, comm; /* the backend's; comm is coll's stream */
    cudaEvent_t ready; /* compute-stream point the comm stream waits for */
    nmsg *queue;       /* sends in order: not yet issued first-to-last, then in flight */
    double watchdog_s; /* a wait without completion this long fails (await_done); 0: never */
    cudaEvent_t probe; /* recorded on a stream whose work a receive waits for */
} nctx;

/* Aborts every communicator (ncclCommAbort), leaving NULLs: what a failed wait does. */
static void n_abort_comms(nctx *c)
{
    for (int q = 0; c->p2p && q < c->size; q++) {
        if (c->p2p[q])
            ncclCommAbort(c->p2p[q]);
        c->p2p[q] = NULL;
    }
    if (c->coll)
        ncclCommAbort(c->coll);
    c->coll = NULL;
}

static pp_status need_backend(nctx *c)
{
    if (!c->be)
        return PP_ERR(PP_ERR_INVALID, "NCCL transport: rank %d has no CUDA backend bound", c->rank);
    return PP_OK;
}

static void msg_free(nctx *c, nmsg *m)
{
    if (m->done)
        cudaEventDestroy(m->done);
    if (m->buf)
        pp_backend_free(c->be, m->buf, m->bytes + TRAILER, PP_MEM_COMM);
    free(m);
}

/* The watchdog: waits until `ev` (recorded on the stream of comm's operations) has completed,
 * polling (cudaEventQuery; a spin for the first milliseconds, then 0.2 ms naps) instead of
 * blocking in cudaEventSynchronize, so that a peer that stopped (SIGSTOP, a hung process, a
 * dead node NCCL has not noticed) cannot hang this rank forever: past c->watchdog_s seconds
 * without completion, or on an asynchronous NCCL error of comm (ncclCommGetAsyncError), the
 * communicators are aborted (ncclCommAbort: the only way to reclaim an NCCL operation that
 * will never complete) and the wait fails with PP_ERR_TIMEOUT naming this rank and the peer
 * (pp_transport_stalled). */
static pp_status await_done(nctx *c, cudaEvent_t ev, ncclComm_t comm, int peer, const char *what)
{
    double t0 = pp_now(), spin_until = t0 + 0.005;
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess)
            return PP_OK;
        if (e != cudaErrorNotReady)
            return pp_cuda_status(e, "cudaEventQuery", __FILE__, __LINE__);
        ncclResult_t async = ncclSuccess;
        if (comm && ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess &&
            async != ncclInProgress) {
            n_abort_comms(c);
            return PP_ERR(PP_ERR_DEVICE, "NCCL transport: rank %d, %s: NCCL reports %s",
                          c->rank, what, ncclGetErrorString(async));
        }
        double now = pp_now();
        if (c->watchdog_s > 0 && now - t0 > c->watchdog_s) {
            n_abort_comms(c);
            return pp_transport_stalled(c->rank, now - t0, peer, what);
        }
        if (now > spin_until) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
}

/* Frees sends that completed (all of them, waiting, when wait is set). */
static pp_status reclaim(nctx *c, int wait)
{
    for (nmsg **pp = &c->queue; *pp;) {
        nmsg *m = *pp;
        if (!m->issued) {
            pp = &m->next;
            continue;
        }
        if (wait)
            PP_TRY(await_done(c, m->done, m->comm, m->to, "an NCCL send"));
        else if (cudaEventQuery(m->done) != cudaSuccess) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        msg_free(c, m);
    }
    return PP_OK;
}

/* Issues every queued send (and the receive, when recv_buf is given) in one NCCL group on the
 * communication stream, after the compute stream's work so far. */
static pp_status issue(nctx *c, ncclComm_t comm, cudaStream_t stream, int from, void *recv_buf,
                       size_t recv_bytes)
{
    PP_CUDA_TRY(cudaEventRecord(c->ready, c->compute));
    PP_CUDA_TRY(cudaStreamWaitEvent(stream, c->ready, 0));
    PP_NCCL_TRY(ncclGroupStart());
    ncclResult_t r = ncclSuccess;
    for (nmsg *m = c->queue; m && r == ncclSuccess; m = m->next)
        if (!m->issued && m->comm == comm)
            r = ncclSend(m->buf, m->bytes + TRAILER, ncclUint8, m->to, m->comm, stream);
    if (r == ncclSuccess && recv_buf)
        r = ncclRecv(recv_buf, recv_bytes, ncclUint8, from, comm, stream);
    ncclResult_t e = ncclGroupEnd();
    PP_NCCL_TRY(r != ncclSuccess ? r : e);
    for (nmsg *m = c->queue; m; m = m->next)
        if (!m->issued && m->comm == comm) {
            m->issued = 1;
            PP_CUDA_TRY(cudaEventRecord(m->done, stream));
        }
    return PP_OK;
}

static pp_status queue_send(nctx *c, ncclComm_t comm, cudaStream_t stream, int to, uint64_t tag,
                            const void *buf, size_t bytes)
{
    PP_TRY(need_backend(c));
    PP_TRY(reclaim(c, 0));
    nmsg *m = (nmsg *)calloc(1, sizeof *m);
    if (!m)
        return PP_ERR(PP_ERR_NOMEM, "NCCL transport: cannot allocate a send descriptor");
    m->comm = comm;
    m->stream = stream;
    m->to = to;
    m->bytes = bytes;
    m->buf = pp_backend_alloc(c->be, bytes + TRAILER, PP_MEM_COMM);
    pp_status st = m->buf ? PP_OK
                          : PP_ERR(PP_ERR_OOM,
                                   "NCCL transport: no device memory for a %zu-byte "
                                   "message",
                                   bytes);
    if (st == PP_OK)
        st = pp_cuda_status(cudaEventCreateWithFlags(&m->done, cudaEventDisableTiming),
                            "cudaEventCreateWithFlags", __FILE__, __LINE__);
    if (st == PP_OK && bytes)
        st = c->be->ops->copy(c->be->ctx, m->buf, buf, bytes); /* compute stream */
    if (st == PP_OK)
        st = c->be->ops->upload(c->be->ctx, (char *)m->buf + bytes, &tag, TRAILER);
    if (st != PP_OK) {
        msg_free(c, m);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    nmsg **tail = &c->queue; /* issue order is queue order */
    while (*tail)
        tail = &(*tail)->next;
    *tail = m;
    return PP_OK;
}

/* The next message from `from` on comm into buf (device), checked against tag. */
static pp_status recv_msg(nctx *c, ncclComm_t comm, cudaStream_t stream, int from, uint64_t tag,
                          void *buf, size_t bytes)
{
    PP_TRY(need_backend(c));
    void *stage = pp_backend_alloc(c->be, bytes + TRAILER, PP_MEM_COMM);
    if (!stage)
        return PP_ERR(PP_ERR_OOM, "NCCL transport: no device memory for a %zu-byte receive", bytes);
    uint64_t got = 0;
    pp_status st = issue(c, comm, stream, from, stage, bytes + TRAILER);
    if (st == PP_OK)
        st = pp_cuda_status(cudaEventRecord(c->probe, stream), "cudaEventRecord(comm)", __FILE__,
                            __LINE__);
    if (st == PP_OK)
        st = await_done(c, c->probe, comm, from, "an NCCL receive");
    if (st == PP_OK)
        st = c->be->ops->download(c->be->ctx, &got, (char *)stage + bytes, TRAILER);
    if (st == PP_OK && got != tag)
        st = PP_ERR(PP_ERR_CHECK,
                    "NCCL transport: rank %d expected tag %#llx from rank %d but its next message "
                    "is tag %#llx: NCCL delivers messages between two ranks in the order sent, "
                    "and this schedule receives them in another",
                    c->rank, (unsigned long long)tag, from, (unsigned long long)got);
    if (st == PP_OK && bytes)
        st = c->be->ops->copy(c->be->ctx, buf, stage, bytes);
    pp_backend_free(c->be, stage, bytes + TRAILER, PP_MEM_COMM);
    return st;
}

static pp_status n_send(void *ctx, int from, int to, uint64_t tag, const void *buf, size_t bytes)
{
    nctx *c = (nctx *)ctx;
    (void)from;
    int me = c->rank; /* issued at once: on its own communicator it waits for nothing else */
    PP_TRY(queue_send(c, c->p2p[me], c->p2p_s[me], to, tag, buf, bytes));
    return issue(c, c->p2p[me], c->p2p_s[me], -1, NULL, 0);
}

static pp_status n_recv(void *ctx, int to, int from, uint64_t tag, void *buf, size_t bytes)
{
    nctx *c = (nctx *)ctx;
    (void)to;
    return recv_msg(c, c->p2p[from], c->p2p_s[from], from, tag, buf, bytes);
}

static pp_status n_flush(void *ctx, int rank)
{
    nctx *c = (nctx *)ctx;
    (void)rank;
    if (!c->be)
        return PP_OK;
    PP_TRY(issue(c, c->coll, c->comm, -1, NULL, 0)); /* point-to-point sends are issued */
    return reclaim(c, 1);
}

static pp_status n_iallreduce(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                              float *data, size_t n, pp_transport_req **req)
{
    nctx *c = (nctx *)ctx;
    pp_transport_req *q = (pp_transport_req *)calloc(1, sizeof *q);
    int *g = (int *)malloc((size_t)n_group * sizeof *g);
    if (!q || !g) {
        free(q);
        free(g);
        return PP_ERR(PP_ERR_NOMEM, "NCCL transport: cannot allocate an all-reduce");
    }
    memcpy(g, group, (size_t)n_group * sizeof *g);
    *q = (pp_transport_req){group[0], n_group, g, data, n, tag};
    if (rank != q->root) {
        pp_status st = queue_send(c, c->coll, c->comm, q->root, tag, data, n * sizeof(float));
        if (st != PP_OK) {
            free(g);
            free(q);
            return st;
        }
    }
    *req = q;
    return PP_OK;
}

/* Root: parts in group order added into data (compute stream), the sum sent to each member. */
static pp_status wait_root(nctx *c, pp_transport_req *q)
{
    if (q->n_group == 1)
        return PP_OK;
    size_t bytes = q->n * sizeof(float);
    float *part = (float *)pp_backend_alloc(c->be, bytes, PP_MEM_COMM);
    if (!part)
        return PP_ERR(PP_ERR_OOM, "NCCL transport: no device memory for a %zu-float part", q->n);
    pp_status st = PP_OK;
    for (int j = 1; j < q->n_group && st == PP_OK; j++) {
        st = recv_msg(c, c->coll, c->comm, q->group[j], q->tag, part, bytes);
        if (st == PP_OK)
            st = c->be->ops->add(c->be->ctx, q->data, part, q->n);
    }
    pp_backend_free(c->be, part, bytes, PP_MEM_COMM);
    for (int j = 1; j < q->n_group && st == PP_OK; j++)
        st = queue_send(c, c->coll, c->comm, q->group[j], q->tag, q->data, bytes);
    if (st == PP_OK)
        st = issue(c, c->coll, c->comm, -1, NULL, 0);
    return st;
}

static pp_status n_wait(void *ctx, int rank, pp_transport_req *q)
{
    nctx *c = (nctx *)ctx;
    pp_status st = need_backend(c);
    if (st == PP_OK)
        st = rank == q->root ? wait_root(c, q)
                             : recv_msg(c, c->coll, c->comm, q->root, q->tag, q->data,
                                        q->n * sizeof(float));
    free(q->group);
    free(q);
    return st;
}

/* Root of an all-gather (gather = 1: parts into full's slices, full to every member) or a
 * reduce-scatter (members' whole buffers added in group order, slice j to member j). */
static pp_status star_root(nctx *c, const int *group, int n_group, uint64_t tag, int gather,
                           const float *src, float *dst, size_t n)
{
    size_t all = n * (size_t)n_group, part_b = n * sizeof(float), all_b = all * sizeof(float);
    float *sum = NULL, *in = NULL;
    if (!gather) {
        sum = (float *)pp_backend_alloc(c->be, all_b, PP_MEM_COMM);
        in = sum ? (float *)pp_backend_alloc(c->be, all_b, PP_MEM_COMM) : NULL;
        if (!in) {
            if (sum)
                pp_backend_free(c->be, sum, all_b, PP_MEM_COMM);
            return PP_ERR(PP_ERR_OOM, "NCCL transport: no device memory for a %zu-float "
                                      "reduce-scatter", all);
        }
    }
    pp_status st = gather ? (src == dst ? PP_OK : c->be->ops->copy(c->be->ctx, dst, src, part_b))
                          : c->be->ops->copy(c->be->ctx, sum, src, all_b);
    for (int j = 1; j < n_group && st == PP_OK; j++) {
        if (gather) {
            st = recv_msg(c, c->coll, c->comm, group[j], tag, dst + (size_t)j * n, part_b);
        } else {
            st = recv_msg(c, c->coll, c->comm, group[j], tag, in, all_b);
            if (st == PP_OK)
                st = c->be->ops->add(c->be->ctx, sum, in, all);
        }
    }
    for (int j = 1; j < n_group && st == PP_OK; j++)
        st = gather ? queue_send(c, c->coll, c->comm, group[j], tag, dst, all_b)
                    : queue_send(c, c->coll, c->comm, group[j], tag, sum + (size_t)j * n, part_b);
    if (st == PP_OK)
        st = issue(c, c->coll, c->comm, -1, NULL, 0);
    if (st == PP_OK && !gather)
        st = c->be->ops->copy(c->be->ctx, dst, sum, part_b);
    if (!gather) {
        pp_backend_free(c->be, in, all_b, PP_MEM_COMM);
        pp_backend_free(c->be, sum, all_b, PP_MEM_COMM);
    }
    return st;
}

static pp_status n_star(nctx *c, int rank, const int *group, int n_group, uint64_t tag,
                        int gather, const float *src, float *dst, size_t n)
{
    PP_TRY(need_backend(c));
    if (rank == group[0])
        return star_root(c, group, n_group, tag, gather, src, dst, n);
    size_t all_b = n * (size_t)n_group * sizeof(float), part_b = n * sizeof(float);
    PP_TRY(queue_send(c, c->coll, c->comm, group[0], tag, src, gather ? part_b : all_b));
    PP_TRY(issue(c, c->coll, c->comm, -1, NULL, 0));
    return recv_msg(c, c->coll, c->comm, group[0], tag, dst, gather ? all_b : part_b);
}

static pp_status n_allgather(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                             const float *part, float *full, size_t n)
{
    return n_star((nctx *)ctx, rank, group, n_group, tag, 1, part, full, n);
}

static pp_status n_reduce_scatter(void *ctx, int rank, const int *group, int n_group,
                                  uint64_t tag, const float *full, float *part, size_t n)
{
    return n_star((nctx *)ctx, rank, group, n_group, tag, 0, full, part, n);
}

/* All-to-all (expert parallelism): one NCCL group of an ncclRecv from and an ncclSend to
 * every other member, on the collectives' communicator and stream after the compute stream's
 * work, straight from and into the caller's device blocks (no trailer: the sizes were
 * exchanged by the caller, as NCCL's rule needs); the block to itself a device copy. Not run
 * on a GPU (MoE blocks run on the CPU backend only); compiled, and under the emulation. */
static pp_status n_alltoallv(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                             const void *send, const size_t *send_bytes, void *recv,
                             const size_t *recv_bytes)
{
    nctx *c = (nctx *)ctx;
    (void)tag;
    PP_TRY(need_backend(c));
    size_t so = 0, ro = 0;
    for (int j = 0; j < n_group; j++) { /* the block to itself first, on the compute stream */
        if (group[j] == rank && recv_bytes[j])
            PP_TRY(c->be->ops->copy(c->be->ctx, (char *)recv + ro, (const char *)send + so,
                                    recv_bytes[j]));
        so += send_bytes[j], ro += recv_bytes[j];
    }
    PP_CUDA_TRY(cudaEventRecord(c->ready, c->compute));
    PP_CUDA_TRY(cudaStreamWaitEvent(c->comm, c->ready, 0));
    PP_NCCL_TRY(ncclGroupStart());
    ncclResult_t r = ncclSuccess;
    so = ro = 0;
    for (int j = 0; j < n_group && r == ncclSuccess; j++) {
        if (group[j] != rank && recv_bytes[j])
            r = ncclRecv((char *)recv + ro, recv_bytes[j], ncclUint8, group[j], c->coll, c->comm);
        if (r == ncclSuccess && group[j] != rank && send_bytes[j])
            r = ncclSend((const char *)send + so, send_bytes[j], ncclUint8, group[j], c->coll,
                         c->comm);
        so += send_bytes[j], ro += recv_bytes[j];
    }
    ncclResult_t e = ncclGroupEnd();
    PP_NCCL_TRY(r != ncclSuccess ? r : e);
    PP_CUDA_TRY(cudaEventRecord(c->probe, c->comm));
    return await_done(c, c->probe, c->coll, -1, "an NCCL all-to-all");
}

static pp_status n_barrier(void *ctx, int rank)
{
    nctx *c = (nctx *)ctx;
    return pp_transport_barrier(c->boot, rank);
}

static void n_abort(void *ctx)
{
    nctx *c = (nctx *)ctx;
    n_abort_comms(c);
    pp_transport_abort(c->boot);
}

static void n_set_watchdog(void *ctx, double seconds)
{
    ((nctx *)ctx)->watchdog_s = seconds > 0 ? seconds : 0;
}

static void n_bind(void *ctx, int rank, pp_backend *be)
{
    nctx *c = (nctx *)ctx;
    (void)rank;
    if (c->be && c->be != be) {
        cudaStreamSynchronize(c->comm);
        for (int q = 0; c->p2p_s && q < c->size; q++)
            if (c->p2p_s[q])
                cudaStreamSynchronize(c->p2p_s[q]);
        for (nmsg *m = c->queue; m;) {
            nmsg *next = m->next;
            msg_free(c, m);
            m = next;
        }
        c->queue = NULL;
    }
    c->be = NULL;
    int dev;
    void *compute, *comm;
    if (be && pp_backend_cuda_streams(be, &dev, &compute, &comm) == PP_OK && dev == c->device) {
        c->be = be;
        c->compute = (cudaStream_t)compute;
        c->comm = (cudaStream_t)comm;
    }
}

static void n_destroy(void *ctx)
{
    nctx *c = (nctx *)ctx;
    if (!c)
        return;
    n_bind(c, c->rank, NULL);
    for (int q = 0; c->p2p && q < c->size; q++)
        if (c->p2p[q])
            ncclCommDestroy(c->p2p[q]);
    for (int q = 0; c->p2p_s && q < c->size; q++)
        if (c->p2p_s[q])
            cudaStreamDestroy(c->p2p_s[q]);
    free(c->p2p);
    free(c->p2p_s);
    if (c->coll)
        ncclCommDestroy(c->coll);
    if (c->ready)
        cudaEventDestroy(c->ready);
    if (c->probe)
        cudaEventDestroy(c->probe);
    free(c);
}

static const pp_transport_ops nccl_ops = {
    n_send, n_recv, n_iallreduce, n_wait, n_barrier, n_flush, n_abort, n_destroy, n_bind,
    n_set_watchdog, n_allgather, n_reduce_scatter, n_alltoallv,
    NULL, NULL, /* send_held, release_held: plain sends (holding is for the host transports'
                   in-process message copies, which the memory plan counts) */
};

/* Rank 0's n unique ids to every rank, over the boot transport. */
static pp_status share_ids(nctx *c, ncclUniqueId *id, int n)
{
    const uint64_t tag = (1ull << 63) | 3; /* kind 0: no executor tag */
    if (c->rank == 0) {
        for (int i = 0; i < n; i++)
            PP_NCCL_TRY(ncclGetUniqueId(&id[i]));
        for (int r = 1; r < c->size; r++)
            PP_TRY(pp_transport_send(c->boot, 0, r, tag, id, (size_t)n * sizeof id[0]));
        PP_TRY(pp_transport_flush(c->boot, 0));
    } else {
        PP_TRY(pp_transport_recv(c->boot, c->rank, 0, tag, id, (size_t)n * sizeof id[0]));
    }
    return PP_OK;
}

/* Every rank's device check, agreed over the boot transport before any rank waits for another:
 * a rank that returned alone would leave the others blocked in the id exchange (and only rank
 * 0 prints an input error, so nothing would say why). bad[r] = device + 1 where rank r has none. */
static pp_status agree_devices(nctx *c, int n_dev)
{
    const uint64_t tag = (1ull << 63) | 4; /* kind 0: no executor tag */
    int ok = c->device >= 0 && c->device < n_dev;
    float *bad = (float *)calloc((size_t)c->size, sizeof *bad);
    int *group = (int *)malloc((size_t)c->size * sizeof *group);
    if (!bad || !group) {
        free(bad);
        free(group);
        return PP_ERR(PP_ERR_NOMEM, "NCCL transport: out of host memory");
    }
    for (int r = 0; r < c->size; r++)
        group[r] = r;
    bad[c->rank] = ok ? 0.0f : (float)(c->device + 1);
    pp_transport_req *req = NULL;
    pp_status st = pp_transport_iallreduce_sum(c->boot, c->rank, group, c->size, tag, bad,
                                               (size_t)c->size, &req);
    if (st == PP_OK)
        st = pp_transport_wait(c->boot, c->rank, req);
    int first = -1;
    for (int r = 0; st == PP_OK && r < c->size && first < 0; r++)
        if (bad[r] != 0.0f)
            first = r;
    if (first == c->rank)
        st = PP_ERR(PP_ERR_INVALID,
                    "NCCL transport: device %d (the local rank) does not exist: this node has %d "
                    "GPUs; start at most that many processes per node",
                    c->device, n_dev);
    else if (first >= 0)
        st = PP_ERR(PP_ERR_INVALID,
                    "NCCL transport: rank %d's device %d (its local rank) does not exist on its "
                    "node; start at most as many processes per node as the node has GPUs",
                    first, (int)bad[first] - 1);
    free(bad);
    free(group);
    return st;
}

static pp_status init_comms(nctx *c)
{
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess && e != cudaErrorNoDevice)
        return pp_cuda_status(e, "cudaGetDeviceCount", __FILE__, __LINE__);
    PP_TRY(agree_devices(c, e == cudaSuccess ? n_dev : 0));
    PP_CUDA_TRY(cudaSetDevice(c->device));
    PP_CUDA_TRY(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
    PP_CUDA_TRY(cudaEventCreateWithFlags(&c->probe, cudaEventDisableTiming));
    c->p2p = (ncclComm_t *)calloc((size_t)c->size, sizeof *c->p2p);
    c->p2p_s = (cudaStream_t *)calloc((size_t)c->size, sizeof *c->p2p_s);
    ncclUniqueId *id = (ncclUniqueId *)calloc((size_t)c->size + 1, sizeof *id);
    if (!c->p2p || !c->p2p_s || !id) {
        free(id);
        return PP_ERR(PP_ERR_NOMEM, "NCCL transport: out of host memory");
    }
    pp_status st = share_ids(c, id, c->size + 1); /* [0, size): p2p[q], [size]: coll */
    for (int q = 0; q < c->size && st == PP_OK; q++) {
        st = pp_cuda_status(cudaStreamCreateWithFlags(&c->p2p_s[q], cudaStreamNonBlocking),
                            "cudaStreamCreateWithFlags", __FILE__, __LINE__);
        if (st == PP_OK)
            st = pp_nccl_status(ncclCommInitRank(&c->p2p[q], c->size, id[q], c->rank),
                                "ncclCommInitRank(p2p)", __FILE__, __LINE__);
    }
    if (st == PP_OK)
        st = pp_nccl_status(ncclCommInitRank(&c->coll, c->size, id[c->size], c->rank),
                            "ncclCommInitRank(coll)", __FILE__, __LINE__);
    free(id);
    return st;
}

extern "C" pp_status pp_transport_nccl_create(pp_transport *boot, int device, pp_transport **out)
{
    *out = NULL;
    if (!boot || pp_transport_self(boot) < 0)
        return PP_ERR(PP_ERR_INVALID,
                      "the NCCL transport bootstraps over a process transport "
                      "(MPI: one rank per process), not %s",
                      pp_transport_name(boot));
    nctx *c = (nctx *)calloc(1, sizeof *c);
    pp_transport *t = (pp_transport *)calloc(1, sizeof *t);
    if (!c || !t) {
        free(c);
        free(t);
        return PP_ERR(PP_ERR_NOMEM, "NCCL transport: out of host memory");
    }
    c->boot = boot;
    c->rank = pp_transport_self(boot);
    c->size = pp_transport_ranks(boot);
    c->device = device;
    c->watchdog_s = PP_TRANSPORT_WATCHDOG_S;
    pp_status st = init_comms(c);
    if (st != PP_OK) {
        n_destroy(c);
        free(t);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    t->name = "nccl";
    t->caps = PP_TRANSPORT_CAP_DEVICE_MEM; /* device buffers of the bound CUDA backend */
    t->ops = &nccl_ops;
    t->ctx = c;
    t->ranks = c->size;
    t->self = c->rank;
    *out = t;
    return PP_OK;
}
