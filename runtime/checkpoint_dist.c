/* checkpoint_dist.c — checkpoints under a process transport (MPI), where each process holds
 * its own rank's stages (executor.h: ex->self) and no filesystem is assumed to be shared.
 *
 * Saving: every process sends process 0 each of its stages as one message (parameters,
 * has_opt, AdamW m | v, downloaded where they lie), as --save-weights gathers its pieces
 * (weights_hf.c); process 0 writes from them the file checkpoint.c writes when every rank is a
 * thread, byte for byte the same: the same stages in the same order. A sharded optimizer's
 * (ZeRO-1/2) stage state lies in pieces on every replica's rank: each names its pieces' places
 * (executor_zero_ckpt.c) and process 0 puts the replicas' pieces together, as the unsharded
 * format holds it, checking that they cover the stage exactly once.
 *
 * Loading: process 0 reads and verifies the whole file (checkpoint.c), then tells every process
 * the verdict (the step and data position, or the refusal and its message, which process 0
 * alone prints), sends each process its stages, and last the verdict of its own stages and the
 * history. A refusal so reaches every process before any stage moves, and no process waits for
 * a message that is not sent: once the file is verified, process 0 sends every stage (a failure
 * to restore one of its own is reported in the last message, after them).
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "checkpoint.h"
#include "stage_impl.h"

static uint32_t stage_count(const pp_rt_executor *ex)
{
    return (uint32_t)((size_t)ex->dp * ex->TP * ex->P * ex->S);
}

/* The global rank whose process holds stage i. */
static int owner(const pp_rt_executor *ex, uint32_t i)
{
    int k, tpr, pipe, st;
    pp_ckpt_stage_at(ex, i, &k, &tpr, &pipe, &st);
    return ex_global(ex, k, ex_rank_of(ex, pipe, st), tpr);
}

static uint64_t tag(int kind, uint32_t index)
{
    return pp_ex_coll_tag(TAG_GATHER, kind, (int)index);
}

/* ---- saving ------------------------------------------------------------------------------ */

/* A stage's message: u64 np, u8 has_opt, 7 zero bytes; f32 params[np]; when has_opt, unsharded:
 * f32 m | v [2 np]; sharded: u64 n_pieces, u64 (at, len)[n_pieces], f32 m | v [2 np] with the
 * rank's pieces in their places (at: in m, the same in v) and zeros elsewhere. */
enum { MSG_HEAD = 16 };

typedef struct {
    unsigned char *buf;
    size_t len, cap;
} msg;

static pp_status msg_put(msg *m, const void *p, size_t n)
{
    if (m->len + n > m->cap) {
        size_t cap = 2 * (m->len + n) + 64;
        unsigned char *b = realloc(m->buf, cap);
        if (!b)
            return PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory for a stage's message");
        m->buf = b, m->cap = cap;
    }
    memcpy(m->buf + m->len, p, n);
    m->len += n;
    return PP_OK;
}

static pp_status mark_piece(void *ctx, size_t at, size_t len)
{
    uint64_t piece[2] = {at, len};
    return msg_put(ctx, piece, sizeof piece);
}

/* The sharded m | v of stage i: this rank's pieces, named, then in their places. */
static pp_status put_pieces(pp_rt_executor *ex, uint32_t i, msg *m, float *host, size_t n)
{
    int k, tpr, pipe, st;
    pp_ckpt_stage_at(ex, i, &k, &tpr, &pipe, &st);
    size_t count_at = m->len;
    uint64_t count = 0;
    PP_TRY(msg_put(m, &count, sizeof count));
    memset(host, 0, 2 * n * sizeof(float));
    PP_TRY(pp_ex_zero_state_local(ex, k, tpr, pipe, st, host, mark_piece, m));
    count = (m->len - count_at - sizeof count) / (2 * sizeof(uint64_t));
    memcpy(m->buf + count_at, &count, sizeof count);
    return msg_put(m, host, 2 * n * sizeof(float));
}

/* Stage i of this process as a message. */
static pp_status stage_msg(pp_rt_executor *ex, uint32_t i, msg *m)
{
    const pp_rt_stage *s = ex->stages[i];
    pp_backend *be = s->be;
    size_t n = s->nparams, bytes = n * sizeof(float);
    unsigned char head[MSG_HEAD] = {0};
    uint64_t np = n;
    memcpy(head, &np, sizeof np);
    head[8] = ex->shard == PP_RT_SHARD_NONE ? s->opt != NULL : pp_ex_zero_has_state(ex);
    float *host = malloc(2 * bytes + sizeof(float));
    if (!host)
        return PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory for stage %u", i);
    pp_status st = msg_put(m, head, sizeof head);
    if (st == PP_OK)
        st = be->ops->download(be->ctx, host, s->params, bytes);
    if (st == PP_OK)
        st = msg_put(m, host, bytes);
    if (st == PP_OK && head[8] && ex->shard == PP_RT_SHARD_NONE) {
        st = be->ops->download(be->ctx, host, s->opt, 2 * bytes);
        if (st == PP_OK)
            st = msg_put(m, host, 2 * bytes);
    } else if (st == PP_OK && head[8]) {
        st = put_pieces(ex, i, m, host, n);
    }
    free(host);
    return st;
}

/* A process other than 0: its stages to process 0, a length then the bytes (UINT64_MAX: it
 * could not read one, and says why itself). */
static pp_status send_stages(pp_rt_executor *ex)
{
    pp_status st = PP_OK;
    for (uint32_t i = 0; i < stage_count(ex) && st == PP_OK; i++) {
        if (owner(ex, i) != ex->self)
            continue;
        msg m = {0};
        pp_status built = stage_msg(ex, i, &m);
        uint64_t len = built == PP_OK ? m.len : UINT64_MAX;
        st = pp_ex_send_host(ex, ex->self, 0, tag(GATHER_CKPT_LEN, i), &len, sizeof len);
        if (st == PP_OK && built == PP_OK)
            st = pp_ex_send_host(ex, ex->self, 0, tag(GATHER_CKPT, i), m.buf, m.len);
        free(m.buf);
        if (built != PP_OK)
            return built;
    }
    PP_TRY(st);
    return pp_transport_flush(ex->tp, ex->self);
}

typedef struct {
    pp_rt_executor *ex;
    msg *msgs;   /* [stage_count] */
    float *host; /* 2 * the largest stage's floats: a sharded stage's m | v put together */
} gathered;

/* Stage i's message read: its header, parameters, has_opt and m | v (or its pieces). */
static pp_status parse(const gathered *c, uint32_t i, pp_ckpt_stage *v, uint64_t *n_pieces,
                       const unsigned char **pieces)
{
    const msg *m = &c->msgs[i];
    int sharded = c->ex->shard != PP_RT_SHARD_NONE;
    uint64_t np = 0;
    *n_pieces = 0;
    if (m->len >= MSG_HEAD)
        memcpy(&np, m->buf, sizeof np);
    size_t want = MSG_HEAD + np * sizeof(float);
    int has_opt = m->len >= MSG_HEAD && m->buf[8];
    if (has_opt && sharded && m->len >= want + sizeof *n_pieces) {
        memcpy(n_pieces, m->buf + want, sizeof *n_pieces);
        *pieces = m->buf + want + sizeof *n_pieces;
        want += sizeof *n_pieces + *n_pieces * 2 * sizeof(uint64_t);
    }
    size_t opt_at = want;
    if (has_opt)
        want += 2 * np * sizeof(float);
    if (m->len < MSG_HEAD || np > m->len || *n_pieces > m->len || m->len != want)
        return PP_ERR(PP_ERR_CHECK,
                      "checkpoint: the message of stage %u from rank %d has %zu bytes, not the "
                      "%zu its header describes",
                      i, owner(c->ex, i), m->len, want);
    *v = (pp_ckpt_stage){.np = np,
                         .params = m->buf + MSG_HEAD,
                         .has_opt = (unsigned char)has_opt,
                         .opt = m->buf + opt_at};
    return PP_OK;
}

/* A sharded stage's m | v from its copies on every replica: each one's pieces in place. */
static pp_status assemble(const gathered *c, uint32_t i, pp_ckpt_stage *v)
{
    const pp_rt_executor *ex = c->ex;
    int k, tpr, pipe, st;
    pp_ckpt_stage_at(ex, i, &k, &tpr, &pipe, &st);
    size_t covered = 0, n = v->np;
    for (int r = 0; r < ex->dp; r++) {
        uint32_t j = (uint32_t)((((size_t)r * ex->TP + tpr) * ex->P + pipe) * ex->S + st);
        pp_ckpt_stage u;
        uint64_t n_pieces;
        const unsigned char *pieces;
        PP_TRY(parse(c, j, &u, &n_pieces, &pieces));
        if (!u.has_opt || u.np != n)
            return PP_ERR(PP_ERR_CHECK, "checkpoint: stage %u's copy on replica %d holds %s", i,
                          r, u.np != n ? "another parameter count" : "no optimizer state");
        const unsigned char *opt = u.opt;
        for (uint64_t p = 0; p < n_pieces; p++) {
            uint64_t piece[2];
            memcpy(piece, pieces + p * sizeof piece, sizeof piece);
            if (piece[0] > n || piece[1] > n - piece[0])
                return PP_ERR(PP_ERR_CHECK, "checkpoint: a piece [%llu, +%llu) past stage %u's "
                                            "%zu parameters",
                              (unsigned long long)piece[0], (unsigned long long)piece[1], i, n);
            for (size_t half = 0; half < 2; half++) /* m, then v */
                memcpy(c->host + half * n + piece[0], opt + (half * n + piece[0]) * sizeof(float),
                       piece[1] * sizeof(float));
            covered += piece[1];
        }
    }
    if (covered != n)
        return PP_ERR(PP_ERR_CHECK,
                      "checkpoint: the replicas' optimizer shards of stage %u cover %zu of its "
                      "%zu parameters",
                      i, covered, n);
    v->opt = c->host;
    return PP_OK;
}

static pp_status gathered_stage(void *ctx, uint32_t i, pp_ckpt_stage *v)
{
    const gathered *c = ctx;
    uint64_t n_pieces;
    const unsigned char *pieces;
    PP_TRY(parse(c, i, v, &n_pieces, &pieces));
    if (v->has_opt && c->ex->shard != PP_RT_SHARD_NONE)
        PP_TRY(assemble(c, i, v));
    return PP_OK;
}

/* Process 0: every stage's message, its own stages' read here. */
static pp_status gather(gathered *c)
{
    pp_rt_executor *ex = c->ex;
    size_t big = 1;
    for (uint32_t i = 0; i < stage_count(ex); i++) {
        msg *m = &c->msgs[i];
        int g = owner(ex, i);
        if (g == 0) {
            PP_TRY(stage_msg(ex, i, m));
        } else {
            uint64_t len = 0;
            PP_TRY(pp_ex_recv_host(ex, 0, g, tag(GATHER_CKPT_LEN, i), &len, sizeof len));
            if (len == UINT64_MAX || len > SIZE_MAX / 2)
                return PP_ERR(PP_ERR_CHECK, "checkpoint: rank %d could not read stage %u (its "
                                            "message says why)",
                              g, i);
            if (!(m->buf = malloc(len ? len : 1)))
                return PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory for stage %u", i);
            m->len = m->cap = len;
            PP_TRY(pp_ex_recv_host(ex, 0, g, tag(GATHER_CKPT, i), m->buf, len));
        }
        uint64_t np = 0;
        if (m->len >= MSG_HEAD)
            memcpy(&np, m->buf, sizeof np);
        if (np > big && np <= m->len)
            big = np;
    }
    c->host = malloc(2 * big * sizeof(float));
    return c->host ? PP_OK : PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory for a stage");
}

pp_status pp_ckpt_save_dist(pp_rt_executor *ex, const char *path, pp_rt_ckpt *ck)
{
    if (ex->self > 0)
        return send_stages(ex);
    gathered c = {ex, pp_calloc(stage_count(ex), sizeof(msg)), NULL};
    pp_status st = c.msgs ? gather(&c) : PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory");
    if (st == PP_OK)
        st = pp_ckpt_write(ex, path, ck, gathered_stage, &c);
    for (uint32_t i = 0; c.msgs && i < stage_count(ex); i++)
        free(c.msgs[i].buf);
    free(c.msgs);
    free(c.host);
    return st;
}

/* ---- loading ----------------------------------------------------------------------------- */

/* Process 0's verdict, to every other process: first on the file, then on its own stages. */
typedef struct {
    int32_t st; /* pp_status */
    int32_t step;
    uint64_t data_batches, state_hash;
    char text[480]; /* the refusal's message (process 0 prints it) */
} verdict;

/* A stage's header on its way to the process holding it. */
typedef struct {
    uint64_t np, has_opt;
} stage_head;

typedef struct {
    pp_rt_executor *ex;
    pp_status own; /* the first of process 0's own stages that failed to load */
    char why[480];
} scatter;

static pp_status tell_all(pp_rt_executor *ex, int kind, const verdict *v)
{
    for (int g = 1; g < ex->G; g++)
        PP_TRY(pp_ex_send_host(ex, 0, g, tag(kind, (uint32_t)g), v, sizeof *v));
    return PP_OK;
}

static void verdict_of(pp_status st, verdict *v)
{
    v->st = st;
    if (st != PP_OK)
        snprintf(v->text, sizeof v->text, "%s", pp_err_text());
}

static pp_status on_verified(void *ctx, pp_status st, const pp_rt_ckpt *head)
{
    scatter *c = ctx;
    verdict v = {.step = head->step,
                 .data_batches = head->data_batches,
                 .state_hash = head->state_hash};
    verdict_of(st, &v);
    pp_status sent = tell_all(c->ex, GATHER_CKPT_HEAD, &v);
    return st != PP_OK ? st : sent;
}

static pp_status scatter_stage(void *ctx, uint32_t i, const pp_ckpt_stage *v)
{
    scatter *c = ctx;
    pp_rt_executor *ex = c->ex;
    int g = owner(ex, i);
    if (g == 0) { /* its failure is told after every stage is sent, so no process waits */
        pp_status st = pp_ckpt_apply(ex, i, v);
        if (st != PP_OK && c->own == PP_OK) {
            c->own = st;
            snprintf(c->why, sizeof c->why, "%s", pp_err_text());
        }
        return PP_OK;
    }
    stage_head h = {v->np, v->has_opt};
    size_t bytes = (size_t)v->np * sizeof(float);
    PP_TRY(pp_ex_send_host(ex, 0, g, tag(GATHER_CKPT_STAGE_HEAD, i), &h, sizeof h));
    PP_TRY(pp_ex_send_host(ex, 0, g, tag(GATHER_CKPT_STAGE, i), v->params, bytes));
    if (v->has_opt)
        PP_TRY(pp_ex_send_host(ex, 0, g, tag(GATHER_CKPT_STAGE_OPT, i), v->opt, 2 * bytes));
    return PP_OK;
}

/* The history's three arrays in one message of 3 * step doubles. */
static pp_status send_history(pp_rt_executor *ex, const pp_rt_ckpt *ck)
{
    size_t n = (size_t)ck->step;
    double *h = malloc(3 * n * sizeof(double));
    if (!h)
        return PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory for the history");
    memcpy(h, ck->loss, n * sizeof(double));
    memcpy(h + n, ck->grad_norm, n * sizeof(double));
    memcpy(h + 2 * n, ck->seconds, n * sizeof(double));
    pp_status st = PP_OK;
    for (int g = 1; g < ex->G && st == PP_OK; g++)
        st = pp_ex_send_host(ex, 0, g, tag(GATHER_CKPT_HISTORY, (uint32_t)g), h,
                             3 * n * sizeof(double));
    free(h);
    return st;
}

static pp_status load_zero(pp_rt_executor *ex, const char *path, int cap, pp_rt_ckpt *ck)
{
    scatter c = {.ex = ex};
    pp_ckpt_reader how = {.verified = on_verified, .sink = scatter_stage, .ctx = &c};
    pp_status st = pp_ckpt_read(ex, path, cap, ck, &how);
    if (st != PP_OK) /* refused, and every process was told (on_verified) */
        return pp_err_trace(st, __FILE__, __LINE__);
    verdict v = {.st = c.own, .step = ck->step};
    snprintf(v.text, sizeof v.text, "%s", c.why);
    PP_TRY(tell_all(ex, GATHER_CKPT_TAIL, &v));
    if (c.own != PP_OK)
        return PP_ERR(c.own, "%s", c.why);
    if (cap > 0 && ck->step > 0)
        PP_TRY(send_history(ex, ck));
    return PP_OK;
}

/* Stage i of this process from process 0 (after every stage is received, the first failure). */
static pp_status recv_stage(pp_rt_executor *ex, uint32_t i, pp_status *own)
{
    stage_head h;
    PP_TRY(pp_ex_recv_host(ex, ex->self, 0, tag(GATHER_CKPT_STAGE_HEAD, i), &h, sizeof h));
    if (h.np != ex->stages[i]->nparams) /* the same model (the identity): a bug if not */
        return PP_ERR(PP_ERR_CHECK, "checkpoint: stage %u comes with %llu parameters, this "
                                    "process holds %zu",
                      i, (unsigned long long)h.np, ex->stages[i]->nparams);
    size_t bytes = (size_t)h.np * sizeof(float);
    float *buf = malloc(3 * bytes + sizeof(float));
    if (!buf)
        return PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory for stage %u", i);
    pp_status st = pp_ex_recv_host(ex, ex->self, 0, tag(GATHER_CKPT_STAGE, i), buf, bytes);
    if (st == PP_OK && h.has_opt)
        st = pp_ex_recv_host(ex, ex->self, 0, tag(GATHER_CKPT_STAGE_OPT, i), buf + h.np,
                             2 * bytes);
    pp_ckpt_stage v = {h.np, buf, (unsigned char)(h.has_opt != 0), buf + h.np};
    if (st == PP_OK && *own == PP_OK)
        *own = pp_ckpt_apply(ex, i, &v);
    free(buf);
    return st;
}

static pp_status refused(const verdict *v, const char *path)
{
    return PP_ERR((pp_status)v->st, "%s", v->text[0] ? v->text : path);
}

static pp_status load_other(pp_rt_executor *ex, int cap, pp_rt_ckpt *ck, const char *path)
{
    verdict v;
    PP_TRY(pp_ex_recv_host(ex, ex->self, 0, tag(GATHER_CKPT_HEAD, (uint32_t)ex->self), &v,
                           sizeof v));
    if (v.st != PP_OK)
        return refused(&v, path);
    pp_status own = PP_OK;
    char why[480] = "";
    for (uint32_t i = 0; i < stage_count(ex); i++)
        if (owner(ex, i) == ex->self) {
            pp_status before = own;
            PP_TRY(recv_stage(ex, i, &own));
            if (before == PP_OK && own != PP_OK)
                snprintf(why, sizeof why, "%s", pp_err_text());
        }
    verdict tail;
    PP_TRY(pp_ex_recv_host(ex, ex->self, 0, tag(GATHER_CKPT_TAIL, (uint32_t)ex->self), &tail,
                           sizeof tail));
    if (tail.st != PP_OK)
        return refused(&tail, path);
    if (own != PP_OK)
        return PP_ERR(own, "%s", why);
    size_t n = (size_t)v.step;
    if (cap > 0 && n > 0) {
        double *h = malloc(3 * n * sizeof(double));
        if (!h)
            return PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory for the history");
        pp_status st = pp_ex_recv_host(ex, ex->self, 0,
                                       tag(GATHER_CKPT_HISTORY, (uint32_t)ex->self), h,
                                       3 * n * sizeof(double));
        if (st == PP_OK) {
            memcpy(ck->loss, h, n * sizeof(double));
            memcpy(ck->grad_norm, h + n, n * sizeof(double));
            memcpy(ck->seconds, h + 2 * n, n * sizeof(double));
        }
        free(h);
        PP_TRY(st);
    }
    ck->step = v.step;
    ck->data_batches = v.data_batches;
    ck->state_hash = v.state_hash;
    ex->steps_done = v.step;
    return PP_OK;
}

pp_status pp_ckpt_load_dist(pp_rt_executor *ex, const char *path, int cap, pp_rt_ckpt *ck)
{
    return ex->self == 0 ? load_zero(ex, path, cap, ck) : load_other(ex, cap, ck, path);
}
