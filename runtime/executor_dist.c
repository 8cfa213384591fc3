/* executor_dist.c — what the ranks of one executor share when they are not threads of one
 * process (a process transport such as MPI), and the two whole-job queries built on it:
 *   losses    every micro-batch's loss is computed by one rank; a float all-reduce of the
 *             step's loss vector (zeros where a rank has none) gives every process all of
 *             them exactly (x + 0 = x), so the step's mean is the in-process one, bit for bit;
 *   spans     each rank's timed actions sent to rank 0 (for the trace);
 *   memory    each rank's pp_mem_stats gathered on rank 0;
 *   checksum  FNV-1a of every stage's parameters, stage hashes gathered on rank 0.
 * The gathers are point-to-point messages through the transport, so the transport table needs
 * no gather of its own. Raw structs travel as bytes: every process runs this same binary.
 *
 * Host data goes through pp_ex_*_host (executor_mem.c): a device copy for NCCL.
 * Not here: heterogeneous machines (different struct layouts), the actions themselves.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "executor.h"

static pp_status share_losses(pp_rt_executor *ex, rank_state *rs)
{
    int n = ex->dp * ex->N;
    float *v = malloc(((size_t)n + 1) * sizeof *v);
    int *group = calloc((size_t)ex->G, sizeof *group);
    if (!v || !group) {
        free(v);
        free(group);
        return PP_ERR(PP_ERR_NOMEM, "cannot allocate the loss vector of %d micro-batches", n);
    }
    for (int i = 0; i < n; i++)
        v[i] = isnan(ex->losses[i]) ? 0.0f : (float)ex->losses[i]; /* losses are floats */
    v[n] = rs->aux; /* the ranks' MoE losses, summed in rank order as the threads' are */
    for (int g = 0; g < ex->G; g++)
        group[g] = g;
    pp_status st = pp_ex_allreduce_host(ex, rs->g, group, ex->G, pp_ex_coll_tag(TAG_LOSS, 0, 0), v,
                                        (size_t)n + 1);
    for (int i = 0; st == PP_OK && i < n; i++)
        ex->losses[i] = v[i];
    ex->aux_total = v[n];
    free(v);
    free(group);
    return st;
}

/* One rank's spans as one message: its actions, then sync and optim. */
static size_t spans_count(const pp_rt_executor *ex, int g)
{
    return (size_t)ex->sched->n_ops[ex_pp(ex, g)] + 2;
}

static pp_status gather_spans(pp_rt_executor *ex, rank_state *rs)
{
    size_t most = 0;
    for (int g = 0; g < ex->G; g++)
        most = spans_count(ex, g) > most ? spans_count(ex, g) : most;
    pp_rt_span *buf = malloc(most * sizeof *buf);
    if (!buf)
        return PP_ERR(PP_ERR_NOMEM, "cannot allocate %zu spans", most);
    pp_status st = PP_OK;
    if (rs->g != 0) {
        size_t n = spans_count(ex, rs->g);
        memcpy(buf, ex->spans[rs->g], (n - 2) * sizeof *buf);
        buf[n - 2] = ex->sync[rs->g];
        buf[n - 1] = ex->optim[rs->g];
        st = pp_ex_send_host(ex, rs->g, 0, pp_ex_coll_tag(TAG_SPANS, 0, rs->g), buf,
                             n * sizeof *buf);
    } else {
        for (int g = 1; g < ex->G && st == PP_OK; g++) {
            size_t n = spans_count(ex, g);
            st = pp_ex_recv_host(ex, 0, g, pp_ex_coll_tag(TAG_SPANS, 0, g), buf, n * sizeof *buf);
            if (st != PP_OK)
                break;
            memcpy(ex->spans[g], buf, (n - 2) * sizeof *buf);
            ex->sync[g] = buf[n - 2];
            ex->optim[g] = buf[n - 1];
        }
    }
    free(buf);
    if (st == PP_OK)
        st = pp_transport_flush(ex->tp, rs->g);
    return st;
}

pp_status pp_ex_share_results(pp_rt_executor *ex, rank_state *rs)
{
    PP_TRY(share_losses(ex, rs));
    PP_TRY(gather_spans(ex, rs));
    return PP_OK;
}

/* Every process sends `bytes` of item[self] to rank 0, which receives item[g] from each g.
 * what: one tag per kind of gather (executor.h's GATHER_*). */
static pp_status gather_on_zero(pp_rt_executor *ex, int what, void *items, size_t bytes)
{
    char *base = items;
    if (ex->self > 0) {
        PP_TRY(pp_ex_send_host(ex, ex->self, 0, pp_ex_coll_tag(TAG_GATHER, what, ex->self),
                               base + (size_t)ex->self * bytes, bytes));
        PP_TRY(pp_transport_flush(ex->tp, ex->self));
        return PP_OK;
    }
    for (int g = 1; g < ex->G; g++)
        PP_TRY(pp_ex_recv_host(ex, 0, g, pp_ex_coll_tag(TAG_GATHER, what, g),
                               base + (size_t)g * bytes, bytes));
    return PP_OK;
}

pp_status pp_rt_executor_mem_stats(pp_rt_executor *ex, pp_mem_stats *out)
{
    memset(out, 0, (size_t)ex->G * sizeof *out);
    for (int g = 0; g < ex->G; g++)
        if (ex_local(ex, g) && ex->be[g])
            pp_backend_mem_stats(ex->be[g], &out[g]);
    if (ex->self >= 0)
        PP_TRY(gather_on_zero(ex, GATHER_MEM, out, sizeof *out));
    return PP_OK;
}

/* FNV-1a, 64 bit (pp_common.h), over chunks of FNV_CHUNK floats. */
enum { FNV_CHUNK = 4096 };

/* The stage's parameters, tensor by tensor in the stage's order, downloaded in chunks (the
 * backend's memory may be a device's). */
static pp_status stage_hash(pp_backend *be, pp_rt_stage *st, uint64_t *out)
{
    float chunk[FNV_CHUNK];
    uint64_t h = PP_FNV1A_BASIS;
    int nt;
    pp_rt_tensor *t = pp_rt_stage_tensors(st, &nt);
    for (int j = 0; j < nt; j++)
        for (size_t off = 0; off < t[j].n; off += FNV_CHUNK) {
            size_t len = t[j].n - off < FNV_CHUNK ? t[j].n - off : FNV_CHUNK;
            PP_TRY(be->ops->download(be->ctx, chunk, t[j].data + off, len * sizeof(float)));
            h = pp_fnv1a(h, chunk, len * sizeof(float));
        }
    *out = h;
    return PP_OK;
}

pp_status pp_rt_executor_param_checksum(pp_rt_executor *ex, uint64_t *out)
{
    *out = 0;
    size_t n = (size_t)ex->dp * ex->TP * ex->P * ex->S;
    /* hashes[g][stage index]: each process fills the stages of its ranks */
    uint64_t *h = pp_calloc((size_t)ex->G * n, sizeof *h);
    if (!h)
        return PP_ERR_NOMEM;
    pp_status st = PP_OK;
    for (size_t i = 0; i < n && st == PP_OK; i++) {
        int kt = (int)(i / ((size_t)ex->P * ex->S)), ps = (int)(i % ((size_t)ex->P * ex->S));
        int g = ex_global(ex, kt / ex->TP, ex_rank_of(ex, ps / ex->S, ps % ex->S), kt % ex->TP);
        if (ex_local(ex, g))
            st = stage_hash(ex->be[g], ex->stages[i], &h[(size_t)g * n + i]);
    }
    if (st == PP_OK && ex->self >= 0)
        st = gather_on_zero(ex, GATHER_CHECKSUM, h, n * sizeof *h);
    if (st == PP_OK && ex->self <= 0) {
        uint64_t all = PP_FNV1A_BASIS;
        for (size_t i = 0; i < n; i++) {
            int kt = (int)(i / ((size_t)ex->P * ex->S)),
                ps = (int)(i % ((size_t)ex->P * ex->S));
            int g =
                ex_global(ex, kt / ex->TP, ex_rank_of(ex, ps / ex->S, ps % ex->S), kt % ex->TP);
            all = pp_fnv1a(all, &h[(size_t)g * n + i], sizeof h[0]);
        }
        *out = all;
    }
    free(h);
    return st;
}
