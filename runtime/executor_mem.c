/* executor_mem.c — where the executor meets backend memory: the choice of backend (CPU, or
 * CUDA on a device picked from the rank), and every transfer of stage memory through the
 * transport. With a CPU backend everything here is a direct call on host pointers (the code
 * path and the floats of the CPU executor are unchanged). With a CUDA backend the tensors are
 * in device memory: a transport that takes host memory (in-process threads, MPI) gets them
 * staged through a host copy (download, send / all-reduce, upload); the NCCL transport takes
 * device pointers directly.
 *
 * With a device backend the rank's spans are device time: the backend's timing marks around
 * every action (pp_ex_marks_*, pp_backend_marks_*: CUDA events in runtime/cuda/marks_cuda.cu),
 * read back at the end of the rank's step. Nothing here names CUDA: it asks the backend's
 * optional ops (runtime/backend.h).
 *
 * Staging copies go through host memory the backend gives (page-locked for CUDA): one buffer
 * per rank for point-to-point messages, kept and grown to the largest; one per all-reduce in
 * flight. Not here: overlapping the staging copies with compute (they are synchronous
 * downloads / uploads), CUDA-aware MPI.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "executor.h"

pp_status pp_ex_backend_create(const pp_rt_executor *ex, int g, pp_backend **out)
{
    int device = ex->device;
    if (ex->self < 0) {
        /* ranks as threads of this process: spread them over the devices it sees (with one
         * device every rank shares it, each on its own streams) */
        int count = pp_backend_device_count(ex->backend);
        device = count > 1 ? g % count : 0;
    }
    return pp_backend_create(ex->backend, device, ex->precision, out);
}

pp_status pp_ex_rank_enter(pp_rt_executor *ex, rank_state *rs)
{
    /* A step's rank threads are new threads: a device backend's device is made current on
     * this one (pp_backend_sync does so, and waits for nothing queued yet); a host backend
     * returns at once. */
    (void)ex;
    return pp_backend_sync(rs->be);
}

/* Host memory for staging a backend's memory: the backend's own (page-locked for CUDA) where
 * it has some, else malloc. PP_ERR_NOMEM names the size. */
static pp_status host_alloc(pp_backend *be, size_t bytes, void **out)
{
    bytes = bytes ? bytes : 1;
    *out = be->ops->host_alloc ? be->ops->host_alloc(be->ctx, bytes) : malloc(bytes);
    if (!*out)
        return PP_ERR(PP_ERR_NOMEM, "cannot allocate a %zu-byte host staging buffer", bytes);
    return PP_OK;
}

void pp_ex_host_free(pp_backend *be, void *p)
{
    if (be->ops->host_free)
        be->ops->host_free(be->ctx, p);
    else
        free(p);
}

/* The rank's staging buffer of point-to-point messages: grown to the largest one and kept
 * (a message is staged, sent or received, and done with before the next one: the thread
 * transport copies a send into its own message, MPI's send has completed when it returns). */
static pp_status stage_buf(rank_state *rs, size_t bytes, void **out)
{
    if (bytes > rs->stage_cap || !rs->stage_host) {
        pp_ex_host_free(rs->be, rs->stage_host);
        rs->stage_host = NULL;
        rs->stage_cap = 0;
        PP_TRY(host_alloc(rs->be, bytes, &rs->stage_host));
        rs->stage_cap = bytes;
    }
    *out = rs->stage_host;
    return PP_OK;
}

pp_status pp_ex_send(pp_rt_executor *ex, rank_state *rs, int to, uint64_t tag, const void *buf,
                     size_t bytes)
{
    if (!ex->staged)
        return pp_transport_send(ex->tp, rs->g, to, tag, buf, bytes);
    void *h = NULL;
    PP_TRY(stage_buf(rs, bytes, &h));
    PP_TRY(rs->be->ops->download(rs->be->ctx, h, buf, bytes));
    return pp_transport_send(ex->tp, rs->g, to, tag, h, bytes);
}

pp_status pp_ex_recv(pp_rt_executor *ex, rank_state *rs, int from, uint64_t tag, void *buf,
                     size_t bytes)
{
    if (!ex->staged)
        return pp_transport_recv(ex->tp, rs->g, from, tag, buf, bytes);
    void *h = NULL;
    PP_TRY(stage_buf(rs, bytes, &h));
    PP_TRY(pp_transport_recv(ex->tp, rs->g, from, tag, h, bytes));
    return rs->be->ops->upload(rs->be->ctx, buf, h, bytes);
}

pp_status pp_ex_iallreduce(pp_rt_executor *ex, rank_state *rs, const int *group, int n_group,
                           uint64_t tag, float *data, size_t n, float **host,
                           pp_transport_req **req)
{
    *host = NULL;
    *req = NULL;
    if (!ex->staged)
        return pp_transport_iallreduce_sum(ex->tp, rs->g, group, n_group, tag, data, n, req);
    void *h;
    PP_TRY(host_alloc(rs->be, n * sizeof(float), &h));
    pp_status st = rs->be->ops->download(rs->be->ctx, h, data, n * sizeof(float));
    if (st == PP_OK)
        st = pp_transport_iallreduce_sum(ex->tp, rs->g, group, n_group, tag, h, n, req);
    if (st != PP_OK) {
        /* the transport keeps nothing of a post that failed */
        pp_ex_host_free(rs->be, h);
        return st;
    }
    *host = h;
    return PP_OK;
}

pp_status pp_ex_wait(pp_rt_executor *ex, rank_state *rs, pp_transport_req *req, float *data,
                     float *host, size_t n)
{
    pp_status st = pp_transport_wait(ex->tp, rs->g, req);
    if (st == PP_OK && host)
        st = rs->be->ops->upload(rs->be->ctx, data, host, n * sizeof(float));
    if (host)
        pp_ex_host_free(rs->be, host);
    return st;
}

/* The tensor-parallel all-gather / reduce-scatter (sequence parallelism) on backend memory:
 * straight through the transport, or staged through host copies of the input and the result
 * (freed before they return). n: floats of one rank's part. */
static pp_status staged_coll(pp_rt_executor *ex, rank_state *rs, const int *group, int n_group,
                             uint64_t tag, const float *src, float *dst, size_t n, int gather)
{
    size_t all = n * (size_t)n_group, in = gather ? n : all, out = gather ? all : n;
    void *h;
    PP_TRY(host_alloc(rs->be, (in + out) * sizeof(float), &h));
    float *hin = h, *hout = hin + in;
    pp_status st = rs->be->ops->download(rs->be->ctx, hin, src, in * sizeof(float));
    if (st == PP_OK)
        st = gather ? pp_transport_allgather(ex->tp, rs->g, group, n_group, tag, hin, hout, n)
                    : pp_transport_reduce_scatter_sum(ex->tp, rs->g, group, n_group, tag, hin,
                                                      hout, n);
    if (st == PP_OK)
        st = rs->be->ops->upload(rs->be->ctx, dst, hout, out * sizeof(float));
    pp_ex_host_free(rs->be, h);
    return st;
}

pp_status pp_ex_allgather(pp_rt_executor *ex, rank_state *rs, const int *group, int n_group,
                          uint64_t tag, const float *part, float *full, size_t n)
{
    if (!ex->staged)
        return pp_transport_allgather(ex->tp, rs->g, group, n_group, tag, part, full, n);
    return staged_coll(ex, rs, group, n_group, tag, part, full, n, 1);
}

pp_status pp_ex_reduce_scatter(pp_rt_executor *ex, rank_state *rs, const int *group, int n_group,
                               uint64_t tag, const float *full, float *part, size_t n)
{
    if (!ex->staged)
        return pp_transport_reduce_scatter_sum(ex->tp, rs->g, group, n_group, tag, full, part, n);
    return staged_coll(ex, rs, group, n_group, tag, full, part, n, 0);
}

enum { SQ_CHUNK = 4096 }; /* floats downloaded at a time */

pp_status pp_ex_sum_sq(rank_state *rs, const float *x, size_t n, double *acc)
{
    if (rs->be->ops->sum_sq) /* on the device: no copy of the tensor (CUDA) */
        return rs->be->ops->sum_sq(rs->be->ctx, x, n, acc);
    float chunk[SQ_CHUNK];
    double sq = *acc;
    for (size_t off = 0; off < n; off += SQ_CHUNK) {
        size_t len = n - off < SQ_CHUNK ? n - off : SQ_CHUNK;
        PP_TRY(rs->be->ops->download(rs->be->ctx, chunk, x + off, len * sizeof(float)));
        for (size_t e = 0; e < len; e++)
            sq += (double)chunk[e] * chunk[e];
    }
    *acc = sq;
    return PP_OK;
}

/* ---- host buffers of the executor's own exchanges (executor_dist.c) ----
 * Losses, spans, memory statistics and checksums are host data. A transport of host memory
 * takes them as they are; a transport of device memory (NCCL) gets a copy in a buffer of the
 * rank's backend, counted as PP_MEM_COMM while it exists. */

static int device_transport(const pp_rt_executor *ex)
{
    return ex->device_mem && !ex->staged;
}

static pp_status dev_copy_of(pp_backend *be, const void *host, size_t bytes, void **out)
{
    *out = pp_backend_alloc(be, bytes ? bytes : 1, PP_MEM_COMM);
    if (!*out)
        return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
    pp_status st = host ? be->ops->upload(be->ctx, *out, host, bytes) : PP_OK;
    if (st != PP_OK) {
        pp_backend_free(be, *out, bytes ? bytes : 1, PP_MEM_COMM);
        *out = NULL;
    }
    return st;
}

pp_status pp_ex_send_host(pp_rt_executor *ex, int g, int to, uint64_t tag, const void *buf,
                          size_t bytes)
{
    if (!device_transport(ex))
        return pp_transport_send(ex->tp, g, to, tag, buf, bytes);
    pp_backend *be = ex->be[g];
    void *d;
    PP_TRY(dev_copy_of(be, buf, bytes, &d));
    pp_status st = pp_transport_send(ex->tp, g, to, tag, d, bytes); /* NCCL copies it */
    pp_backend_free(be, d, bytes ? bytes : 1, PP_MEM_COMM);
    return st;
}

pp_status pp_ex_recv_host(pp_rt_executor *ex, int g, int from, uint64_t tag, void *buf,
                          size_t bytes)
{
    if (!device_transport(ex))
        return pp_transport_recv(ex->tp, g, from, tag, buf, bytes);
    pp_backend *be = ex->be[g];
    void *d;
    PP_TRY(dev_copy_of(be, NULL, bytes, &d));
    pp_status st = pp_transport_recv(ex->tp, g, from, tag, d, bytes);
    if (st == PP_OK)
        st = be->ops->download(be->ctx, buf, d, bytes);
    pp_backend_free(be, d, bytes ? bytes : 1, PP_MEM_COMM);
    return st;
}

pp_status pp_ex_allreduce_host(pp_rt_executor *ex, int g, const int *group, int n_group,
                               uint64_t tag, float *data, size_t n)
{
    if (!device_transport(ex))
        return pp_transport_allreduce_sum(ex->tp, g, group, n_group, tag, data, n);
    pp_backend *be = ex->be[g];
    size_t bytes = n * sizeof(float);
    void *d;
    PP_TRY(dev_copy_of(be, data, bytes, &d));
    pp_status st = pp_transport_allreduce_sum(ex->tp, g, group, n_group, tag, d, n);
    if (st == PP_OK)
        st = be->ops->download(be->ctx, data, d, bytes);
    pp_backend_free(be, d, bytes ? bytes : 1, PP_MEM_COMM);
    return st;
}

/* ---- device-timed spans (see executor.h) ---- */

static int marks_of(const pp_rt_executor *ex, const rank_state *rs)
{
    return 2 * ex->sched->n_ops[rs->r] + 4;
}

pp_status pp_ex_marks_create(pp_rt_executor *ex, rank_state *rs)
{
    if (!pp_backend_has_marks(rs->be)) /* host backends: their work is done when a call returns */
        return PP_OK;
    int n = marks_of(ex, rs);
    if (!(rs->mark_s = pp_calloc((size_t)n, sizeof *rs->mark_s)))
        return PP_ERR(PP_ERR_NOMEM, "cannot allocate %d mark times", n);
    return pp_backend_marks_create(rs->be, n, &rs->marks);
}

void pp_ex_marks_destroy(rank_state *rs)
{
    pp_backend_marks_destroy(rs->marks);
    free(rs->mark_s);
    rs->marks = NULL;
    rs->mark_s = NULL;
}

pp_status pp_ex_marks_begin(pp_rt_executor *ex, rank_state *rs)
{
    if (!rs->marks)
        return PP_OK;
    /* pp_ex_rank_enter has just waited for the streams: the device reaches mark 0 now */
    rs->mark_base = pp_now() - ex->t0;
    return pp_backend_marks_record(rs->marks, 0);
}

pp_status pp_ex_mark(rank_state *rs, int k)
{
    return rs->marks ? pp_backend_marks_record(rs->marks, k) : PP_OK;
}

/* span = [mark a, mark b] on the device's clock, kept as the host measured it where a mark is
 * missing (an action that failed before its end mark leaves no device span). */
static void device_span(const rank_state *rs, int a, int b, pp_rt_span *span)
{
    if (rs->mark_s[a] < 0 || rs->mark_s[b] < 0)
        return;
    span->start = rs->mark_base + rs->mark_s[a];
    span->end = rs->mark_base + rs->mark_s[b];
}

pp_status pp_ex_marks_apply(pp_rt_executor *ex, rank_state *rs)
{
    if (!rs->marks)
        return PP_OK;
    PP_TRY(pp_backend_marks_read(rs->marks, rs->mark_s));
    int n = ex->sched->n_ops[rs->r];
    for (int i = 0; i < n; i++)
        device_span(rs, ex_mark_action(i, 0), ex_mark_action(i, 1), &ex->spans[rs->g][i]);
    int s0 = ex_mark_after(n, EX_MARK_SYNC_START), s1 = ex_mark_after(n, EX_MARK_SYNC_END);
    device_span(rs, s0, s1, &ex->sync[rs->g]);
    pp_rt_span *op = &ex->optim[rs->g];
    if (ex->update)
        device_span(rs, s1, ex_mark_after(n, EX_MARK_OPTIM_END), op);
    else
        op->start = op->end = ex->sync[rs->g].end;
    return PP_OK;
}
