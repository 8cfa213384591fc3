/* executor_zero_ckpt.c — a sharded AdamW state (ZeRO-1 and 2: executor_zero.c,
 * executor_zero2.c) in a checkpoint (checkpoint.c). The checkpoint holds each stage's whole m
 * and v, as an unsharded run's does: saving gathers the replicas' shards of the stage (every
 * replica's entry the same floats), loading gives each replica the slice it owns of its own
 * entry. So the file does not depend on how the state was cut (the shards' padding and group
 * boundaries). With every rank a thread of this process each replica's shard is read where it
 * lies, with no collective; under MPI (checkpoint_dist.c) each process reads its own rank's
 * pieces and names where they lie in the stage (pp_ex_zero_state_local), and process 0 puts
 * the replicas' pieces together.
 */
#include <stdlib.h>

#include "backend.h"
#include "executor_zero.h"
#include "stage_impl.h"

typedef struct {
    rank_state *rs;
    const pp_zgroup *g;
    pp_rt_stage *st; /* the stage whose state moves */
    float *host;     /* its m | v, 2 nparams floats */
    int put;         /* 1: host -> shard, 0: shard -> host */
    pp_ex_zero_mark_fn mark; /* told each piece moved (at, len in the stage's m), or NULL */
    void *mark_ctx;
} ioctx;

static pp_status piece_io(void *c, const pp_zseg *s, size_t in_shard, size_t in_tensor,
                          size_t len)
{
    ioctx *x = c;
    if (s->st != x->st)
        return PP_OK;
    pp_backend *be = x->rs->be;
    size_t at = (size_t)(s->t->data - x->st->params) + in_tensor, bytes = len * sizeof(float);
    for (int k = 0; k < 2; k++) { /* m, then v */
        float *h = x->host + (size_t)k * x->st->nparams + at;
        float *d = x->rs->zero_opt + (size_t)k * x->rs->zero_c + x->g->at + in_shard;
        PP_TRY(x->put ? be->ops->upload(be->ctx, d, h, bytes)
                      : be->ops->download(be->ctx, h, d, bytes));
    }
    return x->mark ? x->mark(x->mark_ctx, at, len) : PP_OK;
}

/* Moves the part of stage (tpr, pipe, stage)'s state that replica k's rank holds. */
static pp_status replica_io(pp_rt_executor *ex, int k, int tpr, int pipe, int stage, float *host,
                            int put, pp_ex_zero_mark_fn mark, void *mark_ctx)
{
    rank_state *rs = &ex->rk[ex_global(ex, k, ex_rank_of(ex, pipe, stage), tpr)];
    pp_zgroup one;
    const pp_zgroup *g = &one;
    int n = 1;
    if (ex->shard == PP_RT_SHARD_OPTIMIZER)
        PP_TRY(pp_ex_zero1_group(ex, rs, &one));
    else
        PP_TRY(pp_ex_z2_groups(ex, rs, &g, &n));
    pp_status st = PP_OK;
    if (put && !rs->zero_opt) { /* as AdamW's first step makes it (executor_zero.c) */
        rs->zero_opt = pp_backend_alloc(rs->be, 2 * rs->zero_c * sizeof(float), PP_MEM_OPTIM);
        st = rs->zero_opt ? rs->be->ops->zero(rs->be->ctx, rs->zero_opt,
                                              2 * rs->zero_c * sizeof(float))
                          : pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
    }
    ioctx x = {.rs = rs,
               .st = ex_stage(ex, k, tpr, pipe, stage),
               .host = host,
               .put = put,
               .mark = mark,
               .mark_ctx = mark_ctx};
    for (int i = 0; i < n && st == PP_OK; i++) {
        size_t lo, hi;
        pp_ex_zero_range(rs, &g[i], &lo, &hi);
        x.g = &g[i];
        st = pp_ex_zero_pieces(&g[i], lo, hi, piece_io, &x);
    }
    if (ex->shard == PP_RT_SHARD_OPTIMIZER)
        free(one.v);
    return st;
}

int pp_ex_zero_has_state(const pp_rt_executor *ex)
{
    return ex->rk[ex->self > 0 ? ex->self : 0].zero_opt != NULL; /* a rank of this process */
}

pp_status pp_ex_zero_state_get(pp_rt_executor *ex, int tpr, int pipe, int stage, float *host)
{
    for (int k = 0; k < ex->dp; k++)
        PP_TRY(replica_io(ex, k, tpr, pipe, stage, host, 0, NULL, NULL));
    return PP_OK;
}

pp_status pp_ex_zero_state_local(pp_rt_executor *ex, int replica, int tpr, int pipe, int stage,
                                 float *host, pp_ex_zero_mark_fn mark, void *ctx)
{
    return replica_io(ex, replica, tpr, pipe, stage, host, 0, mark, ctx);
}

pp_status pp_ex_zero_state_put(pp_rt_executor *ex, int replica, int tpr, int pipe, int stage,
                               const float *host)
{
    return replica_io(ex, replica, tpr, pipe, stage, (float *)host, 1, NULL, NULL);
}
