/* executor_zero.c — the optimizer state sharded over the data-parallel replicas (ZeRO stage 1:
 * Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
 * SC'20, sec. 5.1; Megatron-LM's --use-distributed-optimizer), replacing executor_sync.c's
 * dp all-reduce, norm and AdamW when pp_rt_exec_params.shard is PP_RT_SHARD_OPTIMIZER and
 * dp > 1.
 *
 * A rank's gradients, packed in (pipe, stage, tensor) order into n floats, are cut into dp
 * equal shards of c = ceil(n / dp) floats (the pack padded to dp c); replica k owns shard k:
 *   reduce-scatter  replica k receives the sum over the replicas of shard k (the transport sums
 *                   in group order: the same floats as that slice of the all-reduce);
 *   norm            each replica adds the squares of the counted elements of its shard (each
 *                   layer once: pipe 0, without "wte.head", a tensor rank's shards and rank
 *                   0's whole tensors, as executor_sync.c counts), all-reduced over every rank;
 *   AdamW           replica k steps the parameters of shard k with its m and v (2 c floats,
 *                   PP_MEM_OPTIM, held from the first step: 1/dp of the unsharded state);
 *   all-gather      the parameters, packed the same way, so every replica holds them all;
 *                   then a backend's low-precision copies of them (CUDA's bf16 weights) are
 *                   rewritten from the gathered fp32 (pp_backend_weights_written).
 * Each element steps as the unsharded AdamW steps it; the norm's sum runs in another order
 * (shards, not replica 0's tensors), so the clipping factor, and with it the parameters, may
 * differ from the unsharded run's in the last bits of fp32 (tests/test_runtime_shard.c).
 * update = 0 all-gathers the summed gradients instead (reduce-scatter + all-gather = the
 * all-reduce), so the stages hold what the unsharded run's do.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "executor_zero.h"

pp_status pp_ex_zgroup_add(pp_zgroup *g, rank_state *rs, pp_rt_stage *st, int pipe, int j)
{
    int nt;
    pp_rt_tensor *t = pp_rt_stage_tensors(st, &nt);
    pp_zseg *nv = pp_realloc_array(g->v, (size_t)g->n + 1, sizeof *nv);
    if (!nv)
        return PP_ERR_NOMEM;
    g->v = nv;
    int counted = pipe == 0 && strcmp(t[j].name, "wte.head") != 0 && (rs->tpr == 0 || t[j].sharded);
    g->v[g->n++] = (pp_zseg){st, j, counted, &t[j], g->total};
    g->total += t[j].n;
    return PP_OK;
}

/* The rank's tensors in copy order (executor_sync.c's copy_grads: pipe, stage, tensor). */
static pp_status segments(pp_rt_executor *ex, rank_state *rs, pp_zgroup *g)
{
    for (int p = 0; p < ex->P; p++)
        for (int s = 0; s < ex->S; s++) {
            if (ex_rank_of(ex, p, s) != rs->r)
                continue;
            pp_rt_stage *st = ex_stage(ex, rs->replica, rs->tpr, p, s);
            int nt;
            pp_rt_stage_tensors(st, &nt);
            for (int j = 0; j < nt; j++)
                PP_TRY(pp_ex_zgroup_add(g, rs, st, p, j));
        }
    return PP_OK;
}

pp_status pp_ex_zcopy(pp_backend *be, const pp_zgroup *g, float *buf, int what, int pack)
{
    for (int i = 0; i < g->n; i++) {
        const pp_zseg *v = &g->v[i];
        float *x = what == Z_GRADS ? v->t->grad : v->t->data;
        size_t bytes = v->t->n * sizeof(float);
        PP_TRY(pack ? be->ops->copy(be->ctx, buf + v->off, x, bytes)
                    : be->ops->copy(be->ctx, x, buf + v->off, bytes));
    }
    return PP_OK;
}

pp_status pp_ex_zwritten(pp_backend *be, const pp_zgroup *g)
{
    for (int i = 0; i < g->n; i++)
        PP_TRY(pp_backend_weights_written(be, g->v[i].t->data, g->v[i].t->n));
    return PP_OK;
}

/* The pieces of shard [lo, hi) of the pack: fn(segment, its first element in the shard, the
 * piece's first element in the tensor, length) for each tensor that overlaps it. */
pp_status pp_ex_zero_pieces(const pp_zgroup *g, size_t lo, size_t hi, pp_zpiece_fn fn, void *ctx)
{
    for (int i = 0; i < g->n; i++) {
        size_t a = g->v[i].off, b = g->v[i].off + g->v[i].t->n;
        size_t from = a > lo ? a : lo, to = b < hi ? b : hi;
        if (from < to)
            PP_TRY(fn(ctx, &g->v[i], from - lo, from - a, to - from));
    }
    return PP_OK;
}

typedef struct {
    rank_state *rs;
    const float *g; /* the shard's summed gradients */
    float *m, *v;   /* its AdamW state */
    double sq;
    pp_rt_executor *ex;
    float scale;
    int step;
} zctx;

static pp_status piece_sq(void *c, const pp_zseg *s, size_t in_shard, size_t in_tensor,
                          size_t len)
{
    (void)in_tensor;
    zctx *z = c;
    return s->counted ? pp_ex_sum_sq(z->rs, z->g + in_shard, len, &z->sq) : PP_OK;
}

static pp_status piece_adamw(void *c, const pp_zseg *s, size_t in_shard, size_t in_tensor,
                             size_t len)
{
    zctx *z = c;
    return pp_rt_stage_adamw_slice(s->st, s->tensor, in_tensor, len, z->g + in_shard,
                                   z->m + in_shard, z->v + in_shard, &z->ex->adamw, z->step,
                                   z->scale);
}

void pp_ex_zero_range(const rank_state *rs, const pp_zgroup *g, size_t *lo, size_t *hi)
{
    *lo = (size_t)rs->replica * g->c;
    *hi = *lo + g->c < g->total ? *lo + g->c : g->total;
    if (*lo > *hi)
        *lo = *hi;
}

pp_status pp_ex_zero_norm_step(pp_rt_executor *ex, rank_state *rs, const pp_zgroup *g, int n,
                               const float *shards)
{
    zctx z = {.rs = rs, .ex = ex};
    size_t lo, hi;
    for (int i = 0; i < n; i++) {
        pp_ex_zero_range(rs, &g[i], &lo, &hi);
        z.g = shards + g[i].at;
        PP_TRY(pp_ex_zero_pieces(&g[i], lo, hi, piece_sq, &z));
    }
    rs->grad_sq = z.sq;
    PP_TRY(pp_ex_norm_allreduce(ex, rs));
    if (!ex->update)
        return PP_OK;
    if (!rs->zero_opt) { /* the state, zeroed, on the first step */
        rs->zero_opt = pp_backend_alloc(rs->be, 2 * rs->zero_c * sizeof(float), PP_MEM_OPTIM);
        if (!rs->zero_opt)
            return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
        PP_TRY(rs->be->ops->zero(rs->be->ctx, rs->zero_opt, 2 * rs->zero_c * sizeof(float)));
    }
    z.scale = pp_ex_clip_scale(ex, rs);
    z.step = ex->steps_done + 1;
    for (int i = 0; i < n; i++) {
        pp_ex_zero_range(rs, &g[i], &lo, &hi);
        z.g = shards + g[i].at;
        z.m = rs->zero_opt + g[i].at, z.v = rs->zero_opt + rs->zero_c + g[i].at;
        PP_TRY(pp_ex_zero_pieces(&g[i], lo, hi, piece_adamw, &z));
    }
    return PP_OK;
}

static pp_status sync_in(pp_rt_executor *ex, rank_state *rs, const pp_zgroup *g, float *buf)
{
    size_t cl = g->c, lo = (size_t)rs->replica * cl;
    int group[64]; /* dp <= 64, checked at creation */
    for (int k = 0; k < ex->dp; k++)
        group[k] = ex_global(ex, k, rs->r, rs->tpr);
    float *mine = buf + lo;
    PP_TRY(rs->be->ops->zero(rs->be->ctx, buf, ex->dp * cl * sizeof(float))); /* the padding */
    PP_TRY(pp_ex_zcopy(rs->be, g, buf, Z_GRADS, 1));
    PP_TRY(pp_ex_reduce_scatter(ex, rs, group, ex->dp, pp_ex_coll_tag(TAG_DP, 0, rs->r), buf,
                                mine, cl));
    PP_TRY(pp_ex_zero_norm_step(ex, rs, g, 1, mine));
    int what = Z_GRADS;
    if (ex->update) {
        PP_TRY(pp_ex_zcopy(rs->be, g, buf, Z_PARAMS, 1)); /* this replica's shard stepped */
        what = Z_PARAMS;
    }
    PP_TRY(pp_ex_allgather(ex, rs, group, ex->dp, pp_ex_coll_tag(TAG_DP, 0, ex->D + rs->r), mine,
                           buf, cl));
    return pp_ex_zcopy(rs->be, g, buf, what, 0);
}

pp_status pp_ex_zero1_group(pp_rt_executor *ex, rank_state *rs, pp_zgroup *g)
{
    *g = (pp_zgroup){0};
    pp_status st = segments(ex, rs, g);
    g->c = pp_ex_shard_len(g->total, ex->dp);
    rs->zero_c = g->c;
    return st;
}

pp_status pp_ex_sync_sharded(pp_rt_executor *ex, rank_state *rs)
{
    pp_zgroup g;
    pp_status st = pp_ex_zero1_group(ex, rs, &g);
    size_t bytes = (size_t)ex->dp * g.c * sizeof(float);
    void *mem;
    if (st == PP_OK)
        st = pp_ex_alloc(rs, bytes, PP_MEM_COMM, &mem);
    if (st == PP_OK) {
        st = sync_in(ex, rs, &g, mem);
        pp_ex_free(rs, mem, bytes, PP_MEM_COMM);
    }
    /* the copies after the pack is freed: where the unsharded AdamW makes them (the plan) */
    if (st == PP_OK && ex->update)
        st = pp_ex_zwritten(rs->be, &g);
    free(g.v);
    return st;
}

void pp_ex_zero_free(rank_state *rs, int dp)
{
    (void)dp;
    if (rs->zero_opt)
        pp_backend_free(rs->be, rs->zero_opt, 2 * rs->zero_c * sizeof(float), PP_MEM_OPTIM);
    rs->zero_opt = NULL;
    pp_ex_z2_free(rs);
}
