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
 *   all-gather      the parameters, packed the same way, so every replica holds them all.
 * Each element steps as the unsharded AdamW steps it; the norm's sum runs in another order
 * (shards, not replica 0's tensors), so the clipping factor, and with it the parameters, may
 * differ from the unsharded run's in the last bits of fp32 (tests/test_runtime_shard.c).
 * update = 0 all-gathers the summed gradients instead (reduce-scatter + all-gather = the
 * all-reduce), so the stages hold what the unsharded run's do.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "executor.h"

/* One tensor of the rank's packed order: where it starts in the pack. */
typedef struct {
    pp_rt_stage *st;
    int tensor, counted;
    pp_rt_tensor *t;
    size_t off;
} zseg;

/* The rank's tensors in copy order (executor_sync.c's copy_grads: pipe, stage, tensor), *n of
 * them, their floats in *total. *out is malloc'ed. */
static pp_status segments(pp_rt_executor *ex, rank_state *rs, zseg **out, int *n, size_t *total)
{
    int cap = 0, k = 0;
    size_t off = 0;
    zseg *v = NULL;
    for (int p = 0; p < ex->P; p++)
        for (int s = 0; s < ex->S; s++) {
            if (ex_rank_of(ex, p, s) != rs->r)
                continue;
            pp_rt_stage *st = ex_stage(ex, rs->replica, rs->tpr, p, s);
            int nt;
            pp_rt_tensor *t = pp_rt_stage_tensors(st, &nt);
            if (k + nt > cap) {
                cap = 2 * (k + nt);
                zseg *nv = pp_realloc_array(v, (size_t)cap, sizeof *nv);
                if (!nv) {
                    free(v);
                    return PP_ERR_NOMEM;
                }
                v = nv;
            }
            for (int j = 0; j < nt; j++) {
                int counted = p == 0 && strcmp(t[j].name, "wte.head") != 0 &&
                              (rs->tpr == 0 || t[j].sharded);
                v[k++] = (zseg){st, j, counted, &t[j], off};
                off += t[j].n;
            }
        }
    *out = v, *n = k, *total = off;
    return PP_OK;
}

/* Floats of one shard of n over dp replicas. */
static size_t shard_len(size_t n, int dp)
{
    return (n + (size_t)dp - 1) / (size_t)dp;
}

enum { Z_GRADS, Z_PARAMS };

/* Copies every segment's gradients or parameters into buf (pack) or back (!pack). */
static pp_status zcopy(pp_backend *be, const zseg *v, int n, float *buf, int what, int pack)
{
    for (int i = 0; i < n; i++) {
        float *x = what == Z_GRADS ? v[i].t->grad : v[i].t->data;
        size_t bytes = v[i].t->n * sizeof(float);
        PP_TRY(pack ? be->ops->copy(be->ctx, buf + v[i].off, x, bytes)
                    : be->ops->copy(be->ctx, x, buf + v[i].off, bytes));
    }
    return PP_OK;
}

/* The pieces of shard [lo, hi) of the pack: fn(segment, its first element in the shard, the
 * piece's first element in the tensor, length) for each tensor that overlaps it. */
typedef pp_status (*piece_fn)(void *ctx, const zseg *s, size_t in_shard, size_t in_tensor,
                              size_t len);
static pp_status for_pieces(const zseg *v, int n, size_t lo, size_t hi, piece_fn fn, void *ctx)
{
    for (int i = 0; i < n; i++) {
        size_t a = v[i].off, b = v[i].off + v[i].t->n;
        size_t from = a > lo ? a : lo, to = b < hi ? b : hi;
        if (from < to)
            PP_TRY(fn(ctx, &v[i], from - lo, from - a, to - from));
    }
    return PP_OK;
}

typedef struct {
    rank_state *rs;
    const float *g; /* the shard's summed gradients */
    double sq;
    pp_rt_executor *ex;
    float scale;
    int step;
} zctx;

static pp_status piece_sq(void *c, const zseg *s, size_t in_shard, size_t in_tensor, size_t len)
{
    (void)in_tensor;
    zctx *z = c;
    return s->counted ? pp_ex_sum_sq(z->rs, z->g + in_shard, len, &z->sq) : PP_OK;
}

static pp_status piece_adamw(void *c, const zseg *s, size_t in_shard, size_t in_tensor,
                             size_t len)
{
    zctx *z = c;
    size_t cl = shard_len(z->rs->zero_n, z->ex->dp);
    return pp_rt_stage_adamw_slice(s->st, s->tensor, in_tensor, len, z->g + in_shard,
                                   z->rs->zero_opt + in_shard, z->rs->zero_opt + cl + in_shard,
                                   &z->ex->adamw, z->step, z->scale);
}

/* The global norm from every replica's shard (every rank takes part in the all-reduce). */
static pp_status shard_norm(pp_rt_executor *ex, rank_state *rs, zctx *z, const zseg *v, int n,
                            size_t lo, size_t hi)
{
    PP_TRY(for_pieces(v, n, lo, hi, piece_sq, z));
    rs->grad_sq = z->sq;
    return pp_ex_norm_allreduce(ex, rs);
}

/* The step's AdamW on the shard, with the state made on the first step (zeroed). */
static pp_status shard_step(pp_rt_executor *ex, rank_state *rs, zctx *z, const zseg *v, int n,
                            size_t lo, size_t hi)
{
    size_t cl = shard_len(rs->zero_n, ex->dp);
    if (!rs->zero_opt) {
        rs->zero_opt = pp_backend_alloc(rs->be, 2 * cl * sizeof(float), PP_MEM_OPTIM);
        if (!rs->zero_opt)
            return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
        PP_TRY(rs->be->ops->zero(rs->be->ctx, rs->zero_opt, 2 * cl * sizeof(float)));
    }
    z->scale = pp_ex_clip_scale(ex, rs);
    z->step = ex->steps_done + 1;
    return for_pieces(v, n, lo, hi, piece_adamw, z);
}

static pp_status sync_in(pp_rt_executor *ex, rank_state *rs, const zseg *v, int n, float *buf)
{
    size_t cl = shard_len(rs->zero_n, ex->dp), lo = (size_t)rs->replica * cl;
    size_t hi = lo + cl < rs->zero_n ? lo + cl : rs->zero_n;
    int group[64]; /* dp <= 64, checked at creation */
    for (int k = 0; k < ex->dp; k++)
        group[k] = ex_global(ex, k, rs->r, rs->tpr);
    float *mine = buf + lo;
    PP_TRY(rs->be->ops->zero(rs->be->ctx, buf, ex->dp * cl * sizeof(float))); /* the padding */
    PP_TRY(zcopy(rs->be, v, n, buf, Z_GRADS, 1));
    PP_TRY(pp_ex_reduce_scatter(ex, rs, group, ex->dp, pp_ex_coll_tag(TAG_DP, 0, rs->r), buf,
                                mine, cl));
    zctx z = {.rs = rs, .g = mine, .ex = ex};
    PP_TRY(shard_norm(ex, rs, &z, v, n, lo, hi));
    int what = Z_GRADS;
    if (ex->update) {
        PP_TRY(shard_step(ex, rs, &z, v, n, lo, hi));
        PP_TRY(zcopy(rs->be, v, n, buf, Z_PARAMS, 1)); /* this replica's shard stepped */
        what = Z_PARAMS;
    }
    PP_TRY(pp_ex_allgather(ex, rs, group, ex->dp, pp_ex_coll_tag(TAG_DP, 0, ex->D + rs->r), mine,
                           buf, cl));
    return zcopy(rs->be, v, n, buf, what, 0);
}

pp_status pp_ex_sync_sharded(pp_rt_executor *ex, rank_state *rs)
{
    zseg *v;
    int n;
    size_t total;
    PP_TRY(segments(ex, rs, &v, &n, &total));
    rs->zero_n = total;
    size_t bytes = (size_t)ex->dp * shard_len(total, ex->dp) * sizeof(float);
    void *mem;
    pp_status st = pp_ex_alloc(rs, bytes, PP_MEM_COMM, &mem);
    if (st == PP_OK) {
        st = sync_in(ex, rs, v, n, mem);
        pp_ex_free(rs, mem, bytes, PP_MEM_COMM);
    }
    free(v);
    return st;
}

void pp_ex_zero_free(rank_state *rs, int dp)
{
    if (rs->zero_opt)
        pp_backend_free(rs->be, rs->zero_opt, 2 * shard_len(rs->zero_n, dp) * sizeof(float),
                        PP_MEM_OPTIM);
    rs->zero_opt = NULL;
}
