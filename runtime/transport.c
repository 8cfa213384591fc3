/* transport.c — the public pp_transport_* entry points: argument checks, then dispatch to the
 * implementation's table (transport.h). Implementations live in transport_<kind>.c; this file
 * moves no bytes itself. */
#include <stdlib.h>

#include "transport.h"

void pp_transport_destroy(pp_transport *t)
{
    if (!t)
        return;
    t->ops->destroy(t->ctx);
    free(t);
}

const char *pp_transport_name(const pp_transport *t)
{
    return t ? t->name : "none";
}

void pp_transport_set_watchdog(pp_transport *t, double seconds)
{
    if (t && t->ops->set_watchdog)
        t->ops->set_watchdog(t->ctx, seconds);
}

pp_status pp_transport_stalled(int rank, double waited, int peer, const char *what)
{
    if (peer < 0)
        return PP_ERR(PP_ERR_TIMEOUT,
                      "rank %d waited %.0f s for the other ranks (%s) without progress: one is "
                      "stopped, frozen or gone (pprun --watchdog S sets the limit, 0 none)",
                      rank, waited, what);
    return PP_ERR(PP_ERR_TIMEOUT,
                  "rank %d waited %.0f s for rank %d (%s) without progress: rank %d is stopped, "
                  "frozen or gone (pprun --watchdog S sets the limit, 0 none)",
                  rank, waited, peer, what, peer);
}

unsigned pp_transport_caps(const pp_transport *t)
{
    return t ? t->caps : 0;
}

int pp_transport_ranks(const pp_transport *t)
{
    return t ? t->ranks : 0;
}

/* Layout, most significant first: 1 bit reserved for collectives' tags (0 here), 1 bit pipe,
 * 1 bit direction, 29 bits stage, 32 bits micro-batch. */
uint64_t pp_transport_tag(int pipe, int stage, int mb, int dir)
{
    return ((uint64_t)(pipe & 1) << 62) | ((uint64_t)(dir & 1) << 61) |
           ((uint64_t)((uint32_t)stage & 0x1fffffffu) << 32) | (uint64_t)(uint32_t)mb;
}

static pp_status check_rank(const pp_transport *t, const char *what, int rank)
{
    if (rank < 0 || rank >= t->ranks)
        return PP_ERR(PP_ERR_INVALID, "transport %s: rank %d is outside 0..%d", what, rank,
                      t->ranks - 1);
    return PP_OK;
}

/* A send's checks: both ranks in the transport, a buffer where there are bytes. */
static pp_status check_send(pp_transport *t, int from, int to, const void *buf, size_t bytes)
{
    PP_TRY(check_rank(t, "send", from));
    PP_TRY(check_rank(t, "send", to));
    if (!buf && bytes)
        return PP_ERR(PP_ERR_INVALID, "transport send %d -> %d: NULL buffer of %zu bytes", from, to,
                      bytes);
    return PP_OK;
}

pp_status pp_transport_send(pp_transport *t, int from, int to, uint64_t tag, const void *buf,
                            size_t bytes)
{
    PP_TRY(check_send(t, from, to, buf, bytes));
    PP_TRY(t->ops->send(t->ctx, from, to, tag, buf, bytes));
    return PP_OK;
}

pp_status pp_transport_send_held(pp_transport *t, int from, int to, uint64_t tag, const void *buf,
                                 size_t bytes)
{
    if (!t->ops->send_held)
        return pp_transport_send(t, from, to, tag, buf, bytes);
    PP_TRY(check_send(t, from, to, buf, bytes));
    PP_TRY(t->ops->send_held(t->ctx, from, to, tag, buf, bytes));
    return PP_OK;
}

pp_status pp_transport_release_held(pp_transport *t, int rank)
{
    PP_TRY(check_rank(t, "release", rank));
    if (t->ops->release_held)
        PP_TRY(t->ops->release_held(t->ctx, rank));
    return PP_OK;
}

pp_status pp_transport_recv(pp_transport *t, int to, int from, uint64_t tag, void *buf,
                            size_t bytes)
{
    PP_TRY(check_rank(t, "recv", from));
    PP_TRY(check_rank(t, "recv", to));
    if (!buf && bytes)
        return PP_ERR(PP_ERR_INVALID, "transport recv %d <- %d: NULL buffer of %zu bytes", to, from,
                      bytes);
    PP_TRY(t->ops->recv(t->ctx, to, from, tag, buf, bytes));
    return PP_OK;
}

/* A group must list distinct ranks in ascending order and contain the caller: every member
 * then derives the same summation order from it. */
static pp_status check_group_of(const pp_transport *t, const char *what, int rank, const int *group,
                                int n_group)
{
    PP_TRY(check_rank(t, what, rank));
    if (!group || n_group < 1 || n_group > t->ranks)
        return PP_ERR(PP_ERR_INVALID, "transport %s: a group of %d ranks (1..%d expected)", what,
                      n_group, t->ranks);
    int member = 0;
    for (int i = 0; i < n_group; i++) {
        PP_TRY(check_rank(t, what, group[i]));
        if (i > 0 && group[i] <= group[i - 1])
            return PP_ERR(PP_ERR_INVALID, "transport %s: group ranks must ascend, got %d after %d",
                          what, group[i], group[i - 1]);
        member |= group[i] == rank;
    }
    if (!member)
        return PP_ERR(PP_ERR_INVALID, "transport %s: rank %d is not in its own group", what, rank);
    return PP_OK;
}

static pp_status check_group(const pp_transport *t, int rank, const int *group, int n_group)
{
    return check_group_of(t, "all-reduce", rank, group, n_group);
}

pp_status pp_transport_iallreduce_sum(pp_transport *t, int rank, const int *group, int n_group,
                                      uint64_t tag, float *data, size_t n, pp_transport_req **req)
{
    *req = NULL;
    PP_TRY(check_group(t, rank, group, n_group));
    if (!data && n)
        return PP_ERR(PP_ERR_INVALID, "transport all-reduce: NULL data of %zu floats", n);
    PP_TRY(t->ops->iallreduce_sum(t->ctx, rank, group, n_group, tag, data, n, req));
    return PP_OK;
}

pp_status pp_transport_wait(pp_transport *t, int rank, pp_transport_req *req)
{
    PP_TRY(check_rank(t, "wait", rank));
    if (!req)
        return PP_ERR(PP_ERR_INVALID, "transport wait: NULL request");
    PP_TRY(t->ops->wait(t->ctx, rank, req));
    return PP_OK;
}

pp_status pp_transport_allreduce_sum(pp_transport *t, int rank, const int *group, int n_group,
                                     uint64_t tag, float *data, size_t n)
{
    pp_transport_req *req;
    PP_TRY(pp_transport_iallreduce_sum(t, rank, group, n_group, tag, data, n, &req));
    PP_TRY(pp_transport_wait(t, rank, req));
    return PP_OK;
}

/* The all-gather's and reduce-scatter's common checks (present: the transport has the op). */
static pp_status check_tp_coll(const pp_transport *t, const char *what, int present, int rank,
                               const int *group, int n_group, const void *a, const void *b,
                               size_t n)
{
    PP_TRY(check_group_of(t, what, rank, group, n_group));
    if ((!a || !b) && n)
        return PP_ERR(PP_ERR_INVALID, "transport %s: NULL buffer of %zu floats", what, n);
    if (!present)
        return PP_ERR(PP_ERR_UNSUPPORTED, "the %s transport has no %s", t->name, what);
    return PP_OK;
}

pp_status pp_transport_allgather(pp_transport *t, int rank, const int *group, int n_group,
                                 uint64_t tag, const float *part, float *full, size_t n)
{
    PP_TRY(check_tp_coll(t, "all-gather", t->ops->allgather != NULL, rank, group, n_group, part,
                         full, n));
    PP_TRY(t->ops->allgather(t->ctx, rank, group, n_group, tag, part, full, n));
    return PP_OK;
}

pp_status pp_transport_reduce_scatter_sum(pp_transport *t, int rank, const int *group, int n_group,
                                          uint64_t tag, const float *full, float *part, size_t n)
{
    PP_TRY(check_tp_coll(t, "reduce-scatter", t->ops->reduce_scatter_sum != NULL, rank, group,
                         n_group, full, part, n));
    PP_TRY(t->ops->reduce_scatter_sum(t->ctx, rank, group, n_group, tag, full, part, n));
    return PP_OK;
}

pp_status pp_transport_alltoallv(pp_transport *t, int rank, const int *group, int n_group,
                                 uint64_t tag, const void *send, const size_t *send_bytes,
                                 void *recv, const size_t *recv_bytes)
{
    PP_TRY(check_tp_coll(t, "all-to-all", t->ops->alltoallv != NULL, rank, group, n_group,
                         send_bytes, recv_bytes, 1));
    size_t out = 0, in = 0;
    for (int i = 0; i < n_group; i++)
        out += send_bytes[i], in += recv_bytes[i];
    if ((out && !send) || (in && !recv))
        return PP_ERR(PP_ERR_INVALID, "transport all-to-all: NULL buffer of %zu bytes",
                      out && !send ? out : in);
    PP_TRY(t->ops->alltoallv(t->ctx, rank, group, n_group, tag, send, send_bytes, recv,
                             recv_bytes));
    return PP_OK;
}

pp_status pp_transport_barrier(pp_transport *t, int rank)
{
    PP_TRY(check_rank(t, "barrier", rank));
    PP_TRY(t->ops->barrier(t->ctx, rank));
    return PP_OK;
}

pp_status pp_transport_flush(pp_transport *t, int rank)
{
    PP_TRY(check_rank(t, "flush", rank));
    PP_TRY(t->ops->flush(t->ctx, rank));
    return PP_OK;
}

void pp_transport_abort(pp_transport *t)
{
    if (t)
        t->ops->abort(t->ctx);
}

int pp_transport_self(const pp_transport *t)
{
    return t ? t->self : -1;
}

void pp_transport_bind(pp_transport *t, int rank, pp_backend *be)
{
    if (t && t->ops->bind && rank >= 0 && rank < t->ranks)
        t->ops->bind(t->ctx, rank, be);
}
