/* executor_zero2.c — the gradients sharded over the data-parallel replicas with the optimizer
 * state (ZeRO stage 2: Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
 * Trillion Parameter Models", SC'20, sec. 5.2: "as each gradient is computed it is reduced
 * into the owning replica's partition"), pp_rt_exec_params.shard = PP_RT_SHARD_GRADIENTS.
 *
 * A rank holds, from step to step, only its replica's shard of each group's fp32 gradient
 * (executor_zero.h: one group per stage, and one for a tied embedding's copy so that both
 * ends' shards hold the same elements and are summed as executor_sync.c's sync_tied sums
 * them): rs->z2->acc, PP_MEM_GRADS. A stage's whole gradient is a buffer of the memory plan
 * (PP_MEM_GRADS: its groups each padded to dp c floats) that a backward opens (allocated,
 * zeroed, the stage's tensors pointed into it) and that is closed after the backward once no
 * I of the stage waits for its W (a split backward's I writes the norms' and the embedding's
 * gradients, its W the linears'): closing reduce-scatters each group over the replicas, adds
 * the replica's slice into its shard and frees the buffer. So with B (and with I W pairs that
 * follow each other) every micro-batch's gradient is reduce-scattered on its own, as the
 * tuner's model of ZeRO-2 (tuner/timemodel.c: pp_tune_grad_shard_time, once per micro-batch)
 * assumes, and the whole gradient of a stage lives only during its backwards.
 * At the step's end: the tied shards summed (executor_sync.c), the global norm over the
 * shards, AdamW on them and the parameters all-gathered group by group (executor_zero.c).
 *
 * The sums run in another order than the unsharded run's (over the replicas per micro-batch,
 * then over the micro-batches), so the results agree with it within fp32 rounding, not bit
 * for bit (tests/test_runtime_shard.c). A schedule with REDUCE actions (two pipes holding one
 * layer) is refused: their packed sum takes whole gradients at the step's end.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "executor_zero.h"

typedef struct {
    int pipe, stage;
    pp_rt_stage *st;
    int g0, ng;     /* its groups: z2->g[g0 .. g0 + ng) */
    size_t whole;   /* floats of its whole gradient buffer (each group padded to dp c) */
    float *buf;     /* open: the buffer, else NULL */
    int pending_i;  /* I actions whose W has not run */
} zstage;

struct pp_ex_z2 {
    pp_zgroup *g;
    size_t *woff; /* [ng] each group's first float in its stage's buffer */
    int ng;
    zstage *s;
    int ns;
    float *acc;   /* the replica's gradient shards, rs->zero_c floats, PP_MEM_GRADS */
    int seq;      /* reduce-scatters so far this step (their tags) */
};

/* The tensor of stage (pipe, stage) that is its tied embedding's copy, or -1. */
static int tied_tensor(const pp_rt_executor *ex, pp_rt_stage *st, int stage)
{
    if (ex->S == 1 || ex->model.untied || (stage != 0 && stage != ex->S - 1))
        return -1;
    pp_rt_tensor *t = pp_rt_stage_tensor(st, stage == 0 ? "wte" : "wte.head");
    int n;
    return t ? (int)(t - pp_rt_stage_tensors(st, &n)) : -1;
}

static pp_status new_group(struct pp_ex_z2 *z, int *out)
{
    pp_zgroup *ng = pp_realloc_array(z->g, (size_t)z->ng + 1, sizeof *ng);
    if (!ng)
        return PP_ERR_NOMEM;
    z->g = ng;
    z->g[z->ng] = (pp_zgroup){0};
    *out = z->ng++;
    return PP_OK;
}

/* The stage's groups in tensor order: its tied copy alone, the other tensors together. */
static pp_status stage_groups(pp_rt_executor *ex, rank_state *rs, struct pp_ex_z2 *z, zstage *zs)
{
    int nt, tied = tied_tensor(ex, zs->st, zs->stage), body = -1;
    pp_rt_stage_tensors(zs->st, &nt);
    zs->g0 = z->ng;
    for (int j = 0; j < nt; j++) {
        int gi = body;
        if (j == tied || body < 0)
            PP_TRY(new_group(z, &gi));
        if (j != tied)
            body = gi;
        PP_TRY(pp_ex_zgroup_add(&z->g[gi], rs, zs->st, zs->pipe, j));
    }
    zs->ng = z->ng - zs->g0;
    return PP_OK;
}

static pp_status setup(pp_rt_executor *ex, rank_state *rs)
{
    struct pp_ex_z2 *z = pp_calloc(1, sizeof *z);
    if (!z)
        return PP_ERR_NOMEM;
    rs->z2 = z;
    z->s = pp_calloc((size_t)ex->P * ex->S, sizeof *z->s);
    if (!z->s)
        return PP_ERR_NOMEM;
    for (int p = 0; p < ex->P; p++)
        for (int s = 0; s < ex->S; s++)
            if (ex_rank_of(ex, p, s) == rs->r) {
                zstage *zs = &z->s[z->ns++];
                *zs = (zstage){.pipe = p, .stage = s,
                               .st = ex_stage(ex, rs->replica, rs->tpr, p, s)};
                PP_TRY(stage_groups(ex, rs, z, zs));
            }
    z->woff = pp_calloc((size_t)z->ng + 1, sizeof *z->woff);
    if (!z->woff)
        return PP_ERR_NOMEM;
    size_t at = 0;
    for (int i = 0; i < z->ns; i++) {
        zstage *zs = &z->s[i];
        for (int k = zs->g0; k < zs->g0 + zs->ng; k++) {
            pp_zgroup *g = &z->g[k];
            g->c = pp_ex_shard_len(g->total, ex->dp);
            g->at = at;
            at += g->c;
            z->woff[k] = zs->whole;
            zs->whole += (size_t)ex->dp * g->c;
        }
    }
    rs->zero_c = at;
    z->acc = at ? pp_backend_alloc(rs->be, at * sizeof(float), PP_MEM_GRADS) : NULL;
    return z->acc || !at ? PP_OK : pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
}

pp_status pp_ex_z2_groups(pp_rt_executor *ex, rank_state *rs, const pp_zgroup **g, int *n)
{
    if (!rs->z2)
        PP_TRY(setup(ex, rs));
    *g = rs->z2->g, *n = rs->z2->ng;
    return PP_OK;
}

pp_status pp_ex_z2_begin(pp_rt_executor *ex, rank_state *rs)
{
    if (ex->shard != PP_RT_SHARD_GRADIENTS)
        return PP_OK;
    if (!ex->update)
        return PP_ERR(PP_ERR_UNSUPPORTED, "a step without the update under gradient sharding: "
                                          "no whole gradient is left to inspect after it");
    if (!rs->z2)
        PP_TRY(setup(ex, rs));
    struct pp_ex_z2 *z = rs->z2;
    z->seq = 0;
    return rs->zero_c ? rs->be->ops->zero(rs->be->ctx, z->acc, rs->zero_c * sizeof(float))
                      : PP_OK;
}

static zstage *stage_of(struct pp_ex_z2 *z, const pp_action *a)
{
    for (int i = 0; i < z->ns; i++)
        if (z->s[i].pipe == a->pipe && z->s[i].stage == a->stage)
            return &z->s[i];
    return NULL;
}

static int writes_grads(const pp_rt_executor *ex, const pp_action *a)
{
    return ex->shard == PP_RT_SHARD_GRADIENTS &&
           (a->op == PP_OP_B || a->op == PP_OP_I || a->op == PP_OP_W);
}

/* Points the stage's tensors into buf (or at NULL). */
static void bind(struct pp_ex_z2 *z, zstage *zs, float *buf)
{
    for (int k = zs->g0; k < zs->g0 + zs->ng; k++)
        for (int i = 0; i < z->g[k].n; i++) {
            const pp_zseg *v = &z->g[k].v[i];
            pp_rt_stage_set_grad(v->st, v->tensor, buf ? buf + z->woff[k] + v->off : NULL);
        }
}

pp_status pp_ex_z2_open(pp_rt_executor *ex, rank_state *rs, const pp_action *a)
{
    if (!writes_grads(ex, a))
        return PP_OK;
    zstage *zs = stage_of(rs->z2, a);
    if (!zs)
        return PP_ERR(PP_ERR_CHECK, "rank %d: a backward of pipe %d stage %d, not on this rank",
                      rs->r, a->pipe, (int)a->stage);
    if (zs->buf)
        return PP_OK;
    void *mem;
    PP_TRY(pp_ex_alloc(rs, zs->whole * sizeof(float), PP_MEM_GRADS, &mem));
    zs->buf = mem;
    bind(rs->z2, zs, zs->buf);
    return rs->be->ops->zero(rs->be->ctx, zs->buf, zs->whole * sizeof(float)); /* + padding */
}

/* Each group's sum over the replicas, this replica's slice added into its shard. */
static pp_status scatter(pp_rt_executor *ex, rank_state *rs, zstage *zs)
{
    struct pp_ex_z2 *z = rs->z2;
    int group[64]; /* dp <= 64, checked at creation */
    for (int k = 0; k < ex->dp; k++)
        group[k] = ex_global(ex, k, rs->r, rs->tpr);
    for (int k = zs->g0; k < zs->g0 + zs->ng; k++) {
        const pp_zgroup *g = &z->g[k];
        float *full = zs->buf + z->woff[k], *mine = full + (size_t)rs->replica * g->c;
        /* indices past ZeRO-1's two per rank (executor_zero.c) */
        int idx = (2 + z->seq++) * ex->D + rs->r;
        PP_TRY(pp_ex_reduce_scatter(ex, rs, group, ex->dp, pp_ex_coll_tag(TAG_DP, 0, idx), full,
                                    mine, g->c));
        PP_TRY(rs->be->ops->add(rs->be->ctx, z->acc + g->at, mine, g->c));
    }
    return PP_OK;
}

pp_status pp_ex_z2_close(pp_rt_executor *ex, rank_state *rs, const pp_action *a)
{
    if (!writes_grads(ex, a))
        return PP_OK;
    zstage *zs = stage_of(rs->z2, a);
    if (a->op == PP_OP_I || (a->op == PP_OP_W && --zs->pending_i > 0)) {
        zs->pending_i += a->op == PP_OP_I;
        return PP_OK;
    }
    pp_status st = scatter(ex, rs, zs);
    bind(rs->z2, zs, NULL);
    pp_ex_free(rs, zs->buf, zs->whole * sizeof(float), PP_MEM_GRADS);
    zs->buf = NULL;
    return st;
}

pp_status pp_ex_z2_tied(rank_state *rs, int pipe, int stage, float **data, size_t *n)
{
    struct pp_ex_z2 *z = rs->z2;
    zstage *zs = stage_of(z, &(pp_action){.pipe = pipe, .stage = stage});
    int want = zs ? tied_tensor(rs->ex, zs->st, stage) : -1;
    for (int k = zs ? zs->g0 : 0; zs && k < zs->g0 + zs->ng; k++)
        if (z->g[k].n == 1 && z->g[k].v[0].tensor == want) {
            *data = z->acc + z->g[k].at, *n = z->g[k].c;
            return PP_OK;
        }
    return PP_ERR(PP_ERR_CHECK, "rank %d: pipe %d stage %d holds no shard of its tied embedding",
                  rs->r, pipe, stage);
}

pp_status pp_ex_z2_sync(pp_rt_executor *ex, rank_state *rs)
{
    struct pp_ex_z2 *z = rs->z2;
    for (int i = 0; i < z->ns; i++)
        if (z->s[i].buf)
            return PP_ERR(PP_ERR_CHECK, "rank %d: pipe %d stage %d: an I without its W",
                          rs->r, z->s[i].pipe, z->s[i].stage);
    PP_TRY(pp_ex_zero_norm_step(ex, rs, z->g, z->ng, z->acc));
    size_t cmax = 0;
    for (int k = 0; k < z->ng; k++)
        cmax = z->g[k].c > cmax ? z->g[k].c : cmax;
    size_t bytes = (size_t)ex->dp * cmax * sizeof(float);
    void *mem;
    PP_TRY(pp_ex_alloc(rs, bytes, PP_MEM_COMM, &mem));
    float *buf = mem;
    int group[64];
    for (int k = 0; k < ex->dp; k++)
        group[k] = ex_global(ex, k, rs->r, rs->tpr);
    pp_status st = PP_OK;
    for (int k = 0; k < z->ng && st == PP_OK; k++) { /* the parameters, group by group */
        const pp_zgroup *g = &z->g[k];
        st = pp_ex_zcopy(rs->be, g, buf, Z_PARAMS, 1);
        if (st == PP_OK)
            st = pp_ex_allgather(ex, rs, group, ex->dp,
                                 pp_ex_coll_tag(TAG_DP, 0, (2 + z->seq++) * ex->D + rs->r),
                                 buf + (size_t)rs->replica * g->c, buf, g->c);
        if (st == PP_OK)
            st = pp_ex_zcopy(rs->be, g, buf, Z_PARAMS, 0);
    }
    pp_ex_free(rs, mem, bytes, PP_MEM_COMM);
    for (int k = 0; k < z->ng && st == PP_OK && ex->update; k++) /* executor_zero.c: the copies */
        st = pp_ex_zwritten(rs->be, &z->g[k]);
    return st;
}

void pp_ex_z2_free(rank_state *rs)
{
    struct pp_ex_z2 *z = rs->z2;
    if (!z)
        return;
    if (z->acc)
        pp_backend_free(rs->be, z->acc, rs->zero_c * sizeof(float), PP_MEM_GRADS);
    for (int k = 0; k < z->ng; k++)
        free(z->g[k].v);
    free(z->g);
    free(z->woff);
    free(z->s);
    free(z);
    rs->z2 = NULL;
}
