/* executor_sync.c — what happens to gradients after the backward passes, per rank:
 *   REDUCE(id)   replicas of the same layers (two pipes of a bidirectional schedule) sum their
 *                gradients: a packed buffer, posted as a non-blocking all-reduce when the
 *                action runs, unpacked once the rank's action list is done;
 *   tied         "wte" of a pipe's first stage and "wte.head" of its last both get their sum
 *                (Megatron's embedding group; a local add when both stages share a rank);
 *   dp           every gradient summed over the data-parallel pipeline replicas;
 *   norm         the global L2 norm with every layer counted once (pipe 0 of replica 0,
 *                "wte.head" skipped as it equals "wte" by then);
 *   AdamW        on every stage, with the clipping factor min(1, clip / (norm + 1e-6)) as
 *                PyTorch's clip_grad_norm_. Replicas stay identical: they see identical sums.
 * Every sum runs in a fixed order, so replicas get bit-identical gradients.
 *
 * With the optimizer sharded over dp (ZeRO-1) the dp all-reduce, the norm and AdamW are
 * executor_zero.c's; with the gradients sharded too (ZeRO-2) executor_zero2.c's, and the tied
 * sum adds the replicas' shards of the two copies. Not here: bucketing or overlapping the dp all-reduce with backward.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "executor.h"

typedef struct {
    const char *name;
    float *grad;
    size_t n;
    int order; /* position of discovery, for a stable sort */
} gref;

static int cmp_gref(const void *a, const void *b)
{
    const gref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* Gradients of the stages of REDUCE `id` that `r` holds, sorted by name (copies of one name
 * adjacent). *out is malloc'ed (NULL when n = 0). */
static pp_status collect_reduce(pp_rt_executor *ex, int replica, int tpr, int r, int id,
                                gref **out, int *n_out)
{
    const pp_reduce *rd = &ex->sched->reduces[id];
    int n = 0, cap = 0;
    gref *v = NULL;
    for (int i = 0; i < rd->n_stages; i++) {
        int p = rd->stages[i].pipe, s = rd->stages[i].stage;
        if (p < 0 || p >= ex->P || s < 0 || s >= ex->S)
            return PP_ERR(PP_ERR_CHECK, "REDUCE #%d names pipe %d stage %d, which does not exist",
                          id, p, s);
        if (ex_rank_of(ex, p, s) != r)
            continue;
        int nt;
        pp_rt_tensor *t = pp_rt_stage_tensors(ex_stage(ex, replica, tpr, p, s), &nt);
        if (n + nt > cap) {
            cap = 2 * (n + nt);
            gref *nv = pp_realloc_array(v, (size_t)cap, sizeof *nv);
            if (!nv) {
                free(v);
                return PP_ERR_NOMEM;
            }
            v = nv;
        }
        for (int j = 0; j < nt; j++, n++)
            v[n] = (gref){t[j].name, t[j].grad, t[j].n, n};
    }
    if (n)
        qsort(v, (size_t)n, sizeof *v, cmp_gref);
    *out = v;
    *n_out = n;
    return PP_OK;
}

/* Floats of the packed form: one slot per distinct name. */
static size_t packed_size(const gref *v, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || strcmp(v[i].name, v[i - 1].name) != 0)
            total += v[i].n;
    return total;
}

/* Copies of one name on one rank (a rank holding both replicas of a layer) are summed
 * locally first, in discovery order. Gradients and buf are backend memory: copied and added
 * by the backend (the CPU backend's copy and add are memcpy and y[i] += x[i]). */
static pp_status pack(pp_backend *be, const gref *v, int n, float *buf)
{
    size_t off = 0;
    for (int i = 0; i < n;) {
        PP_TRY(be->ops->copy(be->ctx, buf + off, v[i].grad, v[i].n * sizeof(float)));
        int j = i + 1;
        for (; j < n && strcmp(v[j].name, v[i].name) == 0; j++)
            PP_TRY(be->ops->add(be->ctx, buf + off, v[j].grad, v[i].n));
        off += v[i].n;
        i = j;
    }
    return PP_OK;
}

static pp_status unpack(pp_backend *be, const gref *v, int n, const float *buf)
{
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && strcmp(v[i].name, v[i - 1].name) != 0)
            off += v[i - 1].n;
        PP_TRY(be->ops->copy(be->ctx, v[i].grad, buf + off, v[i].n * sizeof(float)));
    }
    return PP_OK;
}

pp_status pp_ex_post_reduce(pp_rt_executor *ex, rank_state *rs, int id)
{
    if (id < 0 || id >= ex->sched->n_reduces)
        return PP_ERR(PP_ERR_CHECK, "REDUCE #%d: the schedule has %d reduces", id,
                      ex->sched->n_reduces);
    if (rs->n_red >= rs->n_red_cap)
        return PP_ERR(PP_ERR_CHECK, "more REDUCE actions than counted on rank %d", rs->r);
    gref *v;
    int n;
    PP_TRY(collect_reduce(ex, rs->replica, rs->tpr, rs->r, id, &v, &n));
    size_t total = packed_size(v, n);
    void *mem;
    pp_status st = pp_ex_alloc(rs, total * sizeof(float), PP_MEM_COMM, &mem);
    if (st != PP_OK) {
        free(v);
        return st;
    }
    float *buf = mem;
    st = pack(rs->be, v, n, buf);
    free(v);
    if (st != PP_OK) {
        pp_ex_free(rs, buf, total * sizeof(float), PP_MEM_COMM);
        return st;
    }
    const pp_reduce *rd = &ex->sched->reduces[id];
    int group[PP_REDUCE_MAX_RANKS];
    for (int i = 0; i < rd->n_ranks; i++)
        group[i] = ex_global(ex, rs->replica, rd->ranks[i], rs->tpr);
    pending_reduce *pr = &rs->red[rs->n_red++];
    *pr = (pending_reduce){.id = id, .buf = buf, .n = total};
    PP_TRY(pp_ex_iallreduce(ex, rs, group, rd->n_ranks, pp_ex_coll_tag(TAG_REDUCE, rs->replica, id),
                            buf, total, &pr->host, &pr->req));
    return PP_OK;
}

static pp_status finish_reduces(pp_rt_executor *ex, rank_state *rs)
{
    pp_status st = PP_OK;
    for (int i = 0; i < rs->n_red; i++) {
        pending_reduce *pr = &rs->red[i];
        if (st == PP_OK && pr->req)
            st = pp_ex_wait(ex, rs, pr->req, pr->buf, pr->host, pr->n);
        else if (pr->host) /* not waited for: the failed transport holds it no more */
            pp_ex_host_free(rs->be, pr->host);
        pr->req = NULL;
        pr->host = NULL;
        gref *v = NULL;
        int n = 0;
        if (st == PP_OK)
            st = collect_reduce(ex, rs->replica, rs->tpr, rs->r, pr->id, &v, &n);
        if (st == PP_OK)
            st = unpack(rs->be, v, n, pr->buf);
        free(v);
        pp_ex_free(rs, pr->buf, pr->n * sizeof(float), PP_MEM_COMM);
        pr->buf = NULL;
    }
    rs->n_red = 0;
    return st;
}

/* The tied copy `name` of stage (pipe, stage) on this rank: the tensor's gradient, or under
 * gradient sharding the replica's shard of it (the same elements on both ends). */
static pp_status tied_grad(pp_rt_executor *ex, rank_state *rs, int pipe, int stage,
                           const char *name, float **data, size_t *n)
{
    pp_rt_tensor *t = pp_rt_stage_tensor(ex_stage(ex, rs->replica, rs->tpr, pipe, stage), name);
    if (!t)
        return PP_ERR(PP_ERR_INVALID, "pipe %d: the %s stage has no \"%s\" tensor", pipe,
                      stage == 0 ? "first" : "last", name);
    if (ex->shard == PP_RT_SHARD_GRADIENTS)
        return pp_ex_z2_tied(rs, pipe, stage, data, n);
    *data = t->grad, *n = t->n;
    return PP_OK;
}

/* Megatron's embedding group: the first stage's "wte" and the last stage's "wte.head" each
 * receive the sum of both gradients. */
static pp_status sync_tied(pp_rt_executor *ex, rank_state *rs)
{
    if (ex->S == 1 || ex->model.untied)
        return PP_OK; /* one stage holds the only copy, or the head is its own matrix */
    pp_transport_req *req[2] = {NULL, NULL};
    float *host[2] = {NULL, NULL}, *data[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    pp_status st = PP_OK;
    for (int p = 0; p < ex->P && st == PP_OK; p++) {
        int a = ex_rank_of(ex, p, 0), b = ex_rank_of(ex, p, ex->S - 1);
        if (rs->r != a && rs->r != b)
            continue;
        float *wte = NULL, *head = NULL;
        size_t n = 0;
        if (rs->r == a)
            PP_TRY(tied_grad(ex, rs, p, 0, "wte", &wte, &n));
        if (rs->r == b)
            PP_TRY(tied_grad(ex, rs, p, ex->S - 1, "wte.head", &head, &n));
        if (a == b) { /* wte += head; head = wte */
            st = rs->be->ops->add(rs->be->ctx, wte, head, n);
            if (st == PP_OK)
                st = rs->be->ops->copy(rs->be->ctx, head, wte, n * sizeof(float));
            continue;
        }
        int ga = ex_global(ex, rs->replica, a, rs->tpr), gb = ex_global(ex, rs->replica, b, rs->tpr);
        int group[2] = {ga < gb ? ga : gb, ga < gb ? gb : ga};
        data[p] = rs->r == a ? wte : head;
        len[p] = n;
        st = pp_ex_iallreduce(ex, rs, group, 2, pp_ex_coll_tag(TAG_TIED, rs->replica, p), data[p],
                              n, &host[p], &req[p]);
    }
    for (int p = 0; p < 2; p++)
        if (req[p]) {
            pp_status w = pp_ex_wait(ex, rs, req[p], data[p], host[p], len[p]);
            if (st == PP_OK)
                st = w;
        }
    return st;
}

enum { GRADS_PACK, GRADS_UNPACK };
/* Which gradients copy_grads moves: all, the dense ones, the routed experts' (which expert
 * parallelism splits over the ep ranks of a dp group: pp_rt_tensor_is_expert). */
enum { GRADS_ALL, GRADS_DENSE, GRADS_EXPERT };

/* Copies the `which` gradients of the rank's stages, in (pipe, stage, tensor) order, into buf
 * (PACK) or back out of it (UNPACK) through the backend; with buf NULL only counts into *n. */
static pp_status copy_grads_of(pp_rt_executor *ex, rank_state *rs, float *buf, int dir,
                               int which, size_t *n)
{
    pp_backend *be = rs->be;
    size_t off = 0;
    for (int p = 0; p < ex->P; p++)
        for (int s = 0; s < ex->S; s++) {
            if (ex_rank_of(ex, p, s) != rs->r)
                continue;
            int nt;
            pp_rt_tensor *t = pp_rt_stage_tensors(ex_stage(ex, rs->replica, rs->tpr, p, s), &nt);
            for (int j = 0; j < nt; j++) {
                if (which != GRADS_ALL &&
                    pp_rt_tensor_is_expert(t[j].name) != (which == GRADS_EXPERT))
                    continue;
                size_t bytes = t[j].n * sizeof(float);
                if (buf && dir == GRADS_PACK)
                    PP_TRY(be->ops->copy(be->ctx, buf + off, t[j].grad, bytes));
                else if (buf)
                    PP_TRY(be->ops->copy(be->ctx, t[j].grad, buf + off, bytes));
                off += t[j].n;
            }
        }
    *n = off;
    return PP_OK;
}

/* The dense gradients then the experts' (all of them without expert parallelism). */
static pp_status copy_grads(pp_rt_executor *ex, rank_state *rs, float *buf, int dir, size_t *n)
{
    if (ex->EP == 1)
        return copy_grads_of(ex, rs, buf, dir, GRADS_ALL, n);
    size_t nd, ne;
    PP_TRY(copy_grads_of(ex, rs, buf, dir, GRADS_DENSE, &nd));
    PP_TRY(copy_grads_of(ex, rs, buf ? buf + nd : NULL, dir, GRADS_EXPERT, &ne));
    *n = nd + ne;
    return PP_OK;
}

/* Data parallelism: every gradient summed over the dp replicas of this pipeline rank, as one
 * packed all-reduce (the bucket is the rank's whole gradient). Under expert parallelism the
 * pack is the dense gradients, summed over all dp replicas, then the experts', summed over the
 * dp / ep replicas holding the same experts (Megatron-Core's expert-data-parallel group): two
 * all-reduces on the two parts of the one buffer. */
static pp_status sync_dp(pp_rt_executor *ex, rank_state *rs)
{
    if (ex->dp == 1)
        return PP_OK;
    size_t n, nd = 0;
    PP_TRY(copy_grads(ex, rs, NULL, GRADS_PACK, &n));
    if (ex->EP > 1)
        PP_TRY(copy_grads_of(ex, rs, NULL, GRADS_PACK, GRADS_DENSE, &nd));
    void *mem;
    PP_TRY(pp_ex_alloc(rs, n * sizeof(float), PP_MEM_COMM, &mem));
    float *buf = mem;
    int group[64], edp[64], n_edp = 0; /* dp <= 64, checked at creation */
    for (int k = 0; k < ex->dp; k++) {
        group[k] = ex_global(ex, k, rs->r, rs->tpr);
        if (k % ex->EP == rs->replica % ex->EP)
            edp[n_edp++] = group[k];
    }
    float *host = NULL, *host_e = NULL;
    pp_transport_req *req = NULL, *req_e = NULL;
    size_t na = ex->EP > 1 ? nd : n; /* what all dp replicas sum */
    pp_status st = copy_grads(ex, rs, buf, GRADS_PACK, &n);
    if (st == PP_OK && na)
        st = pp_ex_iallreduce(ex, rs, group, ex->dp, pp_ex_coll_tag(TAG_DP, 0, rs->r), buf, na,
                              &host, &req);
    if (st == PP_OK && n > na && n_edp > 1)
        st = pp_ex_iallreduce(ex, rs, edp, n_edp, pp_ex_coll_tag(TAG_DP, 1, rs->r), buf + na,
                              n - na, &host_e, &req_e);
    if (req) {
        pp_status w = pp_ex_wait(ex, rs, req, buf, host, na);
        st = st == PP_OK ? w : st;
    }
    if (req_e) {
        pp_status w = pp_ex_wait(ex, rs, req_e, buf + na, host_e, n - na);
        st = st == PP_OK ? w : st;
    }
    if (st == PP_OK)
        st = copy_grads(ex, rs, buf, GRADS_UNPACK, &n);
    pp_ex_free(rs, buf, n * sizeof(float), PP_MEM_COMM);
    return st;
}

/* The model's gradient counted once: replica 0, pipe 0 (every layer once), without the
 * head's copy of the tied embedding; of a tensor-parallel group, every rank's shards and the
 * first rank's whole tensors (the same on every rank of the group). */
static pp_status owned_grad_sq(pp_rt_executor *ex, rank_state *rs, double *out)
{
    double sq = 0;
    *out = 0;
    /* under expert parallelism replicas 1 .. ep-1 add the experts replica 0 lacks */
    if (rs->replica >= ex->EP)
        return PP_OK;
    for (int s = 0; s < ex->S; s++) {
        if (ex_rank_of(ex, 0, s) != rs->r)
            continue;
        int nt;
        pp_rt_tensor *t = pp_rt_stage_tensors(ex_stage(ex, rs->replica, rs->tpr, 0, s), &nt);
        for (int j = 0; j < nt; j++) {
            if (strcmp(t[j].name, "wte.head") == 0 || (rs->tpr > 0 && !t[j].sharded) ||
                (rs->replica > 0 && !pp_rt_tensor_is_expert(t[j].name)))
                continue;
            PP_TRY(pp_ex_sum_sq(rs, t[j].grad, t[j].n, &sq));
        }
    }
    *out = sq;
    return PP_OK;
}

pp_status pp_ex_norm_allreduce(pp_rt_executor *ex, rank_state *rs)
{
    int *group = malloc((size_t)ex->G * sizeof *group);
    if (!group)
        return PP_ERR(PP_ERR_NOMEM, "cannot allocate a group of %d ranks", ex->G);
    for (int g = 0; g < ex->G; g++)
        group[g] = g;
    float v = (float)rs->grad_sq;
    pp_status st =
        pp_ex_allreduce_host(ex, rs->g, group, ex->G, pp_ex_coll_tag(TAG_NORM, 0, 0), &v, 1);
    free(group);
    rs->norm = sqrt((double)v);
    return st;
}

static pp_status global_norm(pp_rt_executor *ex, rank_state *rs)
{
    PP_TRY(owned_grad_sq(ex, rs, &rs->grad_sq));
    return pp_ex_norm_allreduce(ex, rs);
}

float pp_ex_clip_scale(const pp_rt_executor *ex, const rank_state *rs)
{
    return ex->clip > 0 && rs->norm > ex->clip ? (float)(ex->clip / (rs->norm + 1e-6)) : 1.0f;
}

static pp_status update(pp_rt_executor *ex, rank_state *rs)
{
    float scale = pp_ex_clip_scale(ex, rs);
    int step = ex->steps_done + 1;
    for (int p = 0; p < ex->P; p++)
        for (int s = 0; s < ex->S; s++)
            if (ex_rank_of(ex, p, s) == rs->r)
                PP_TRY(pp_rt_stage_adamw(ex_stage(ex, rs->replica, rs->tpr, p, s), &ex->adamw, step, scale));
    return PP_OK;
}

pp_status pp_ex_sync_and_update(pp_rt_executor *ex, rank_state *rs)
{
    pp_rt_span *sy = &ex->sync[rs->g], *op = &ex->optim[rs->g];
    int n_ops = ex->sched->n_ops[rs->r];
    sy->start = pp_now() - ex->t0;
    PP_TRY(pp_ex_mark(rs, ex_mark_after(n_ops, EX_MARK_SYNC_START)));
    PP_TRY(finish_reduces(ex, rs));
    PP_TRY(sync_tied(ex, rs));
    if (ex->shard != PP_RT_SHARD_NONE) { /* (reduce-scatter,) norm, AdamW, all-gather */
        PP_TRY(ex->shard == PP_RT_SHARD_OPTIMIZER ? pp_ex_sync_sharded(ex, rs)
                                                  : pp_ex_z2_sync(ex, rs));
        PP_TRY(pp_ex_mark(rs, ex_mark_after(n_ops, EX_MARK_SYNC_END)));
        PP_TRY(pp_ex_mark(rs, ex_mark_after(n_ops, EX_MARK_OPTIM_END)));
        sy->end = op->start = op->end = pp_now() - ex->t0;
        return PP_OK;
    }
    PP_TRY(sync_dp(ex, rs));
    PP_TRY(global_norm(ex, rs));
    PP_TRY(pp_ex_mark(rs, ex_mark_after(n_ops, EX_MARK_SYNC_END)));
    sy->end = op->start = op->end = pp_now() - ex->t0;
    if (ex->update) {
        PP_TRY(update(ex, rs));
        PP_TRY(pp_ex_mark(rs, ex_mark_after(n_ops, EX_MARK_OPTIM_END)));
        op->end = pp_now() - ex->t0;
    }
    return PP_OK;
}

/* Distinct (name, size) pairs of rank r's part of REDUCE id, compared across participants. */
pp_status pp_ex_check_reduces(pp_rt_executor *ex)
{
    for (int id = 0; id < ex->sched->n_reduces; id++) {
        const pp_reduce *rd = &ex->sched->reduces[id];
        gref *first = NULL;
        int n_first = 0;
        pp_status st = PP_OK;
        for (int i = 0; i < rd->n_ranks && st == PP_OK; i++) {
            gref *v = NULL;
            int n = 0;
            st = collect_reduce(ex, 0, 0, rd->ranks[i], id, &v, &n);
            if (st != PP_OK)
                break;
            if (i == 0) {
                first = v;
                n_first = n;
                continue;
            }
            /* compare the distinct names in order */
            int a = 0, b = 0;
            while (st == PP_OK && (a < n_first || b < n)) {
                if (a >= n_first || b >= n || strcmp(first[a].name, v[b].name) != 0 ||
                    first[a].n != v[b].n)
                    st = PP_ERR(PP_ERR_CHECK,
                                "REDUCE #%d: rank %d and rank %d hold different tensors (\"%s\" "
                                "vs \"%s\"); replicas must hold the same layers",
                                id, rd->ranks[0], rd->ranks[i], a < n_first ? first[a].name : "-",
                                b < n ? v[b].name : "-");
                for (int a0 = a; a < n_first && strcmp(first[a].name, first[a0].name) == 0;)
                    a++;
                for (int b0 = b; b < n && strcmp(v[b].name, v[b0].name) == 0;)
                    b++;
            }
            free(v);
        }
        free(first);
        if (st != PP_OK)
            return st;
    }
    return PP_OK;
}
