/* nccl_emu.cpp — NCCL's point-to-point API over MPI, for the CPU emulation of CUDA (tests only):
 * runtime/cuda/transport_nccl.cu runs unchanged under `mpirun pprun_emu --backend cuda`, one
 * rank per process, as under real NCCL one rank per GPU.
 *
 * What it keeps of NCCL's semantics (the point of it):
 *   - asynchrony on a stream: ncclSend/ncclRecv (alone, or collected between ncclGroupStart and
 *     ncclGroupEnd) become one operation on their stream (pp_emu_async, cuda_emu_impl.h); the
 *     group's MPI requests are posted when everything before it on the stream has completed and
 *     complete when the peers take part; the host never blocks in ncclGroupEnd. Completion is
 *     seen through the stream: cudaStreamSynchronize, an event recorded after it
 *     (cudaEventQuery/Synchronize), cudaStreamWaitEvent, and later kernels and copies on the
 *     stream, which wait for it (stream order);
 *   - sends that complete only when the peer's matching receive is posted (MPI_Issend: NCCL has
 *     no buffering, so a schedule that relies on a send finishing before its receive is posted
 *     hangs on a GPU; here it hangs too, and the stream's wait aborts after PP_CUDA_EMU_WAIT_S
 *     seconds naming the operation), and groups on one stream run one after another;
 *   - messages between two ranks on one communicator delivered in the order sent (one MPI tag);
 *   - sizes: a receive of another size than the send aborts with both sizes (NCCL would hang or
 *     corrupt memory);
 *   - device buffers only: a host pointer, a bad peer or a NULL communicator is
 *     ncclInvalidArgument with a message (ncclGetLastError).
 * Communicators: ncclGetUniqueId puts a magic and a counter into the id; ncclCommInitRank
 * duplicates MPI_COMM_WORLD (collective, so every rank's n-th ncclCommInitRank gets the same
 * MPI communicator) and then checks, with an all-reduce on the new communicator, that every
 * rank passed the same id: ranks that initialise their communicators in different orders get
 * ncclInvalidUsage instead of crossed messages. Two communicators' messages never match.
 * Device memory: MPI never touches it. A send copies the buffer to a host bounce buffer when
 * the group starts (with the emulation's device access granted, pp_emu_device_enter), a
 * receive lands in a bounce buffer that is copied to the device buffer when the receive is seen
 * complete. So MPI progress made by any MPI call (the boot transport's too) cannot fault on the
 * protected device arena. Data is read when NCCL would read it at the latest (the group's
 * start, after the stream's earlier work) and written before anything on the stream after it.
 *
 * Not modelled: collectives (ncclAllReduce etc.: transport_nccl.cu uses none), communicators that
 * are not all of MPI_COMM_WORLD in world rank order, NCCL's own concurrency and timing, sends
 * larger than INT_MAX bytes, more than one thread calling NCCL (pprun's MPI is FUNNELED).
 */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "cuda_emu_impl.h"
#include "nccl.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

namespace
{
const char ID_MAGIC[] = "pptune cuda_emu NCCL id";

struct ncomm {
    MPI_Comm mpi;
    int rank, size;
    unsigned long long serial; /* the id's counter */
};

struct call {
    bool send;
    void *buf; /* device */
    size_t bytes;
    int peer;
    ncomm *comm;
    cudaStream_t stream;
};

thread_local char last_msg[512];
thread_local int group_depth;
thread_local std::vector<call> grouped;

ncclResult_t fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t fail(ncclResult_t r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    return r;
}

size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    }
    return 0;
}

/* One NCCL group's calls on one stream: posted together by start(), done when all completed. */
struct group_op : pp_emu_async {
    std::vector<call> calls;
    std::vector<MPI_Request> reqs;
    std::vector<char *> bounce;
    std::vector<bool> done;

    ~group_op() override
    {
        for (char *b : bounce)
            free(b);
    }

    void start() override
    {
        size_t n = calls.size();
        reqs.assign(n, MPI_REQUEST_NULL);
        bounce.assign(n, nullptr);
        done.assign(n, false);
        for (size_t i = 0; i < n; i++) {
            const call &c = calls[i];
            bounce[i] = (char *)malloc(c.bytes ? c.bytes : 1);
            if (!bounce[i])
                pp_emu_die("NCCL emulation: no host memory for a %zu-byte bounce buffer",
                           c.bytes);
            int rc;
            if (c.send) {
                pp_emu_device_enter(); /* the device buffer as it is now: NCCL reads it now */
                memcpy(bounce[i], c.buf, c.bytes);
                pp_emu_device_leave();
                rc = MPI_Issend(bounce[i], (int)c.bytes, MPI_BYTE, c.peer, 0, c.comm->mpi,
                                &reqs[i]);
            } else {
                rc = MPI_Irecv(bounce[i], (int)c.bytes, MPI_BYTE, c.peer, 0, c.comm->mpi,
                               &reqs[i]);
            }
            if (rc != MPI_SUCCESS)
                pp_emu_die("NCCL emulation: rank %d: posting %s of %zu bytes %s rank %d failed "
                           "(MPI error %d)",
                           c.comm->rank, c.send ? "ncclSend" : "ncclRecv", c.bytes,
                           c.send ? "to" : "from", c.peer, rc);
        }
    }

    /* A completed receive: its size checked, its bytes delivered to the device buffer. */
    void finish_recv(size_t i, const MPI_Status &s, int rc)
    {
        const call &c = calls[i];
        int got = -1;
        if (rc == MPI_SUCCESS)
            MPI_Get_count(&s, MPI_BYTE, &got);
        if (rc != MPI_SUCCESS || got != (int)c.bytes) {
            int cls = 0;
            MPI_Error_class(rc != MPI_SUCCESS ? rc : s.MPI_ERROR, &cls);
            pp_emu_die("NCCL emulation: rank %d posted ncclRecv of %zu bytes from rank %d, whose "
                       "matching ncclSend has %s bytes (%s): NCCL requires equal sizes, a GPU "
                       "would hang or corrupt memory here",
                       c.comm->rank, c.bytes, c.peer,
                       rc == MPI_SUCCESS ? std::to_string(got).c_str() : "more",
                       cls == MPI_ERR_TRUNCATE ? "truncated" : "size mismatch");
        }
        pp_emu_device_enter();
        memcpy(c.buf, bounce[i], c.bytes);
        pp_emu_device_leave();
    }

    bool test() override
    {
        bool all = true;
        for (size_t i = 0; i < calls.size(); i++) {
            if (done[i])
                continue;
            int flag = 0;
            MPI_Status s;
            memset(&s, 0, sizeof s);
            int rc = MPI_Test(&reqs[i], &flag, &s);
            if (rc != MPI_SUCCESS && !calls[i].send)
                flag = 1; /* an error completes it: finish_recv reports it */
            else if (rc != MPI_SUCCESS)
                pp_emu_die("NCCL emulation: rank %d: ncclSend of %zu bytes to rank %d failed "
                           "(MPI error %d)",
                           calls[i].comm->rank, calls[i].bytes, calls[i].peer, rc);
            if (!flag) {
                all = false;
                continue;
            }
            if (!calls[i].send)
                finish_recv(i, s, rc);
            done[i] = true;
            free(bounce[i]);
            bounce[i] = nullptr;
        }
        return all;
    }

    void describe(char *buf, size_t n) const override
    {
        size_t len = 0;
        len += (size_t)snprintf(buf, n, "an NCCL group of %zu call(s) on rank %d:", calls.size(),
                                calls.empty() ? -1 : calls[0].comm->rank);
        for (size_t i = 0; i < calls.size() && len < n; i++)
            if (done.empty() || !done[i])
                len += (size_t)snprintf(buf + len, n - len, " %s %zu bytes %s rank %d (comm %llu)",
                                        calls[i].send ? "ncclSend" : "ncclRecv", calls[i].bytes,
                                        calls[i].send ? "to" : "from", calls[i].peer,
                                        calls[i].comm->serial);
    }
};

/* Issues calls (one group) as one operation per stream, in call order within each. */
void issue(std::vector<call> &calls)
{
    while (!calls.empty()) {
        group_op *op = new group_op;
        cudaStream_t s = calls[0].stream;
        std::vector<call> rest;
        for (const call &c : calls)
            (c.stream == s ? op->calls : rest).push_back(c);
        pp_emu_stream_enqueue(s, op);
        calls.swap(rest);
    }
}

ncclResult_t p2p(bool send, void *buf, size_t count, ncclDataType_t type, int peer,
                 ncclComm_t comm_, cudaStream_t stream)
{
    ncomm *comm = (ncomm *)comm_;
    const char *name = send ? "ncclSend" : "ncclRecv";
    size_t tsize = type_size(type);
    if (!comm)
        return fail(ncclInvalidArgument, "%s: comm is NULL", name);
    if (!tsize)
        return fail(ncclInvalidArgument, "%s: invalid datatype %d", name, (int)type);
    if (peer < 0 || peer >= comm->size)
        return fail(ncclInvalidArgument, "%s: peer %d is not a rank of a %d-rank communicator",
                    name, peer, comm->size);
    if (!pp_emu_stream_ok(stream))
        return fail(ncclInvalidArgument, "%s: invalid stream", name);
    size_t bytes = count * tsize;
    if (count && bytes / count != tsize)
        return fail(ncclInvalidArgument, "%s: %zu elements overflow", name, count);
    if (bytes > (size_t)INT_MAX)
        return fail(ncclInvalidArgument, "%s: %zu bytes: the emulation sends at most INT_MAX",
                    name, bytes);
    if (bytes && (!buf || !pp_emu_in_device_memory(buf, bytes)))
        return fail(ncclInvalidArgument,
                    "%s: buffer %p (%zu bytes) is not device memory (NCCL takes device buffers)",
                    name, buf, bytes);
    grouped.push_back(call{send, buf, bytes, peer, comm, stream});
    if (!group_depth)
        issue(grouped);
    return ncclSuccess;
}
} // namespace

struct pp_emu_nccl_comm : ncomm {};

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    }
    return "unknown result code";
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return last_msg;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static unsigned long long counter;
    if (!id)
        return fail(ncclInvalidArgument, "ncclGetUniqueId: id is NULL");
    memset(id, 0, sizeof *id);
    memcpy(id->internal, ID_MAGIC, sizeof ID_MAGIC);
    unsigned long long n = ++counter;
    memcpy(id->internal + sizeof ID_MAGIC, &n, sizeof n);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
    if (!out)
        return fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
    *out = NULL;
    int inited = 0, world = 0, me = -1;
    MPI_Initialized(&inited);
    if (!inited)
        return fail(ncclInvalidUsage, "ncclCommInitRank: the NCCL emulation runs over MPI, and "
                                      "MPI is not initialised (start the ranks with mpirun)");
    if (memcmp(id.internal, ID_MAGIC, sizeof ID_MAGIC) != 0)
        return fail(ncclInvalidArgument, "ncclCommInitRank: the id is not from ncclGetUniqueId");
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (nranks != world || rank != me)
        return fail(ncclInvalidArgument,
                    "ncclCommInitRank(nranks %d, rank %d): the emulation's communicators span "
                    "MPI_COMM_WORLD (%d ranks) with the world ranks (this is %d)",
                    nranks, rank, world, me);
    unsigned long long serial;
    memcpy(&serial, id.internal + sizeof ID_MAGIC, sizeof serial);
    MPI_Comm mpi;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &mpi) != MPI_SUCCESS)
        return fail(ncclSystemError, "ncclCommInitRank: MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN); /* sizes are checked, not fatal in MPI */
    /* every rank's id must be the same: min and max of the counter agree */
    long long mm[2] = {(long long)serial, -(long long)serial}, r[2];
    if (MPI_Allreduce(mm, r, 2, MPI_LONG_LONG, MPI_MAX, mpi) != MPI_SUCCESS) {
        MPI_Comm_free(&mpi);
        return fail(ncclSystemError, "ncclCommInitRank: MPI_Allreduce failed");
    }
    if (r[0] != -r[1]) {
        MPI_Comm_free(&mpi);
        return fail(ncclInvalidUsage,
                    "ncclCommInitRank: the ranks passed different ids (id counters %lld to %lld): "
                    "they initialise their communicators in different orders",
                    -r[1], r[0]);
    }
    pp_emu_nccl_comm *c = new pp_emu_nccl_comm;
    c->mpi = mpi;
    c->rank = rank;
    c->size = nranks;
    c->serial = serial;
    *out = c;
    return ncclSuccess;
}

/* Pending operations keep the MPI communicator's handle: MPI_Comm_free lets them finish. */
ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    MPI_Comm_free(&comm->mpi);
    delete comm;
    return ncclSuccess;
}

/* The process is about to abort (pprun's failure path, the NCCL transport's watchdog): the MPI
 * communicator is left alone, as an unmatched send on it cannot be cancelled, and so is the
 * object: operations still queued on a stream hold it (they never complete, as an aborted
 * NCCL operation does not), so it stays reachable here instead of being freed under them. */
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    static std::vector<ncclComm_t> aborted;
    if (comm)
        aborted.push_back(comm);
    return ncclSuccess;
}

/* The emulation's operations fail synchronously (ncclGroupEnd, the stream's wait): there is
 * never an asynchronous error to report. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
    if (!comm || !async_error)
        return fail(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
    *async_error = ncclSuccess;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm || !count)
        return fail(ncclInvalidArgument, "ncclCommCount: NULL argument");
    *count = comm->size;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm || !rank)
        return fail(ncclInvalidArgument, "ncclCommUserRank: NULL argument");
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return p2p(true, (void *)buf, count, type, peer, comm, stream);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return p2p(false, buf, count, type, peer, comm, stream);
}

ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0)
        return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--group_depth == 0)
        issue(grouped);
    return ncclSuccess;
}
