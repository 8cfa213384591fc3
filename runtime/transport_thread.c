/* transport_thread.c — the in-process transport: ranks are threads of one process.
 *
 * Point to point: each rank has a mailbox (mutex + condvar + list). send copies the bytes
 * into a message buffer allocated on the sender's thread (counted as PP_MEM_COMM in the
 * sender's backend when backends are given), appends it to the receiver's mailbox and
 * returns; recv waits for the (from, tag) message, copies it out and marks it consumed. The
 * sender releases consumed buffers itself, on its next send or flush, because a backend's
 * accounting is not thread-safe and must only be touched by its own rank's thread. A held
 * send (send_held) is released only by release_held, which waits for its receipt: its lifetime
 * follows the sender's program order.
 *
 * Collectives: the members of an all-reduce post their buffers; the last to arrive sums them
 * in group order, writes the sum into every member's buffer and wakes the waiters. No member
 * blocks on post, so a REDUCE overlaps the compute that follows, as the schedule IR says.
 * All-gather and reduce-scatter (tensor parallelism) are the same meeting with a source and a
 * destination per member: the last to arrive copies (all-gather) or sums slice by slice in
 * group order (reduce-scatter, the all-reduce's order), and every member then waits for it.
 *
 * Not here: device memory (buffers are host pointers), any network, message size limits.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "transport.h"

typedef struct msg {
    struct msg *next;      /* receiver's mailbox order */
    struct msg *sent_next; /* sender's outbox */
    int from;
    uint64_t tag;
    size_t bytes;
    void *buf;
    int consumed; /* guarded by the sender's outbox lock */
    int held;     /* sent by send_held: released by release_held only */
} msg;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    msg *head, *tail; /* messages to this rank not yet received, in arrival order */
} mailbox;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    msg *sent;   /* messages this rank sent whose buffers it has not released */
    int pending; /* of them, not yet received */
} outbox;

typedef enum { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCE_SCATTER, COLL_ALLTOALL } coll_kind;

struct pp_transport_req {
    struct pp_transport_req *next;
    uint64_t tag;
    coll_kind kind;
    int n_group;
    int *group;        /* [n_group] ascending */
    float **data;      /* [n_group] each member's result buffer, NULL until it posts */
    const float **src; /* [n_group] each member's input (the all-reduce: data itself) */
    size_t n;          /* floats per member's part (all-reduce: of the whole buffer) */
    /* all-to-all (src, data: bytes): each member's block sizes, sent and received */
    const size_t **sb, **rb;
    int bad; /* all-to-all: a sent block's size differs from its receiver's */
    int arrived, left, done;
};

typedef struct {
    int ranks;
    pp_backend **be;     /* [ranks] or NULL */
    mailbox *mbox;       /* [ranks] */
    outbox *obox;        /* [ranks] */
    pthread_mutex_t cmu; /* collectives and barrier */
    pthread_cond_t ccv;
    pp_transport_req *colls;
    int bar_count, bar_gen;
    atomic_int aborted;
} tctx;

static pp_status aborted_error(const char *what, int rank)
{
    return PP_ERR(PP_ERR_DEVICE, "transport aborted (another rank failed) during %s on rank %d",
                  what, rank);
}

/* ---- buffers: counted in the sender's backend, touched only on the sender's thread ---- */
static void *buf_alloc(tctx *c, int rank, size_t bytes)
{
    if (c->be)
        return pp_backend_alloc(c->be[rank], bytes, PP_MEM_COMM);
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        PP_ERR(PP_ERR_NOMEM, "transport: cannot allocate a %zu-byte message", bytes);
    return p;
}

static void msg_free(tctx *c, msg *m)
{
    if (c->be)
        pp_backend_free(c->be[m->from], m->buf, m->bytes, PP_MEM_COMM);
    else
        free(m->buf);
    free(m);
}

/* Releases the buffers of `rank`'s messages that have been received (held: the held ones only,
 * else the others; all: every one). */
enum { RECLAIM_PLAIN, RECLAIM_HELD, RECLAIM_ALL };
static void reclaim_which(tctx *c, int rank, int which)
{
    outbox *o = &c->obox[rank];
    msg *done = NULL;
    pthread_mutex_lock(&o->mu);
    for (msg **pp = &o->sent; *pp;) {
        msg *m = *pp;
        if (m->consumed && (which == RECLAIM_ALL || m->held == (which == RECLAIM_HELD))) {
            *pp = m->sent_next;
            m->sent_next = done;
            done = m;
        } else {
            pp = &m->sent_next;
        }
    }
    pthread_mutex_unlock(&o->mu);
    while (done) {
        msg *n = done->sent_next;
        msg_free(c, done);
        done = n;
    }
}

static void reclaim(tctx *c, int rank)
{
    reclaim_which(c, rank, RECLAIM_PLAIN);
}

static pp_status send_msg(tctx *c, int from, int to, uint64_t tag, const void *buf, size_t bytes,
                          int held)
{
    if (atomic_load(&c->aborted))
        return aborted_error("send", from);
    if (!held)
        reclaim(c, from);
    msg *m = calloc(1, sizeof *m);
    if (!m)
        return PP_ERR(PP_ERR_NOMEM, "transport: cannot allocate a message descriptor");
    m->buf = buf_alloc(c, from, bytes);
    if (!m->buf) {
        free(m);
        return pp_err_trace(PP_ERR_NOMEM, __FILE__, __LINE__);
    }
    if (bytes)
        memcpy(m->buf, buf, bytes);
    m->from = from;
    m->tag = tag;
    m->bytes = bytes;
    m->held = held;

    outbox *o = &c->obox[from];
    pthread_mutex_lock(&o->mu);
    m->sent_next = o->sent;
    o->sent = m;
    o->pending++;
    pthread_mutex_unlock(&o->mu);

    mailbox *b = &c->mbox[to];
    pthread_mutex_lock(&b->mu);
    if (b->tail)
        b->tail->next = m;
    else
        b->head = m;
    b->tail = m;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return PP_OK;
}

static pp_status t_send(void *ctx, int from, int to, uint64_t tag, const void *buf, size_t bytes)
{
    return send_msg(ctx, from, to, tag, buf, bytes, 0);
}

static pp_status t_send_held(void *ctx, int from, int to, uint64_t tag, const void *buf,
                             size_t bytes)
{
    return send_msg(ctx, from, to, tag, buf, bytes, 1);
}

/* Waits until every held message of `rank` is received, then frees them. */
static pp_status t_release_held(void *ctx, int rank)
{
    tctx *c = ctx;
    outbox *o = &c->obox[rank];
    pthread_mutex_lock(&o->mu);
    for (;;) {
        int open = 0;
        for (msg *m = o->sent; m; m = m->sent_next)
            open |= m->held && !m->consumed;
        if (!open || atomic_load(&c->aborted))
            break;
        pthread_cond_wait(&o->cv, &o->mu);
    }
    pthread_mutex_unlock(&o->mu);
    if (atomic_load(&c->aborted))
        return aborted_error("release", rank);
    reclaim_which(c, rank, RECLAIM_HELD);
    return PP_OK;
}

/* Unlinks the first (from, tag) message of the mailbox, or returns NULL. Caller holds b->mu. */
static msg *take(mailbox *b, int from, uint64_t tag)
{
    msg *prev = NULL;
    for (msg *m = b->head; m; prev = m, m = m->next) {
        if (m->from != from || m->tag != tag)
            continue;
        if (prev)
            prev->next = m->next;
        else
            b->head = m->next;
        if (b->tail == m)
            b->tail = prev;
        m->next = NULL;
        return m;
    }
    return NULL;
}

static pp_status t_recv(void *ctx, int to, int from, uint64_t tag, void *buf, size_t bytes)
{
    tctx *c = ctx;
    mailbox *b = &c->mbox[to];
    pthread_mutex_lock(&b->mu);
    msg *m;
    while (!(m = take(b, from, tag)) && !atomic_load(&c->aborted))
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    if (!m)
        return aborted_error("recv", to);
    pp_status st = PP_OK;
    if (m->bytes != bytes)
        st = PP_ERR(PP_ERR_INVALID,
                    "transport recv on rank %d: the message from rank %d (tag %#llx) has %zu "
                    "bytes, the receive expects %zu",
                    to, from, (unsigned long long)tag, m->bytes, bytes);
    else if (bytes)
        memcpy(buf, m->buf, bytes);
    outbox *o = &c->obox[from];
    pthread_mutex_lock(&o->mu);
    m->consumed = 1;
    o->pending--;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    return st;
}

static pp_status t_flush(void *ctx, int rank)
{
    tctx *c = ctx;
    outbox *o = &c->obox[rank];
    pthread_mutex_lock(&o->mu);
    while (o->pending > 0 && !atomic_load(&c->aborted))
        pthread_cond_wait(&o->cv, &o->mu);
    int left = o->pending;
    pthread_mutex_unlock(&o->mu);
    reclaim_which(c, rank, RECLAIM_ALL);
    if (left > 0)
        return aborted_error("flush", rank);
    return PP_OK;
}

/* ---- collectives ---- */
static int group_index(const pp_transport_req *q, int rank)
{
    for (int i = 0; i < q->n_group; i++)
        if (q->group[i] == rank)
            return i;
    return -1;
}

/* The open collective with this tag and group that `rank` has not joined yet, or NULL. */
static pp_transport_req *find_coll(tctx *c, const int *group, int n_group, uint64_t tag, int rank)
{
    for (pp_transport_req *q = c->colls; q; q = q->next) {
        if (q->tag != tag || q->n_group != n_group ||
            memcmp(q->group, group, (size_t)n_group * sizeof *group) != 0)
            continue;
        if (!q->data[group_index(q, rank)])
            return q;
    }
    return NULL;
}

static pp_transport_req *new_coll(tctx *c, const int *group, int n_group, uint64_t tag,
                                  coll_kind kind, size_t n)
{
    pp_transport_req *q = calloc(1, sizeof *q);
    if (q) {
        q->group = malloc((size_t)n_group * sizeof *q->group);
        q->data = calloc((size_t)n_group, sizeof *q->data);
        q->src = calloc((size_t)n_group, sizeof *q->src);
        q->sb = calloc((size_t)n_group, sizeof *q->sb);
        q->rb = calloc((size_t)n_group, sizeof *q->rb);
    }
    if (!q || !q->group || !q->data || !q->src || !q->sb || !q->rb) {
        if (q) {
            free(q->group);
            free(q->data);
            free(q->src);
            free(q->sb);
            free(q->rb);
        }
        free(q);
        PP_ERR(PP_ERR_NOMEM, "transport: cannot allocate an all-reduce of %d ranks", n_group);
        return NULL;
    }
    memcpy(q->group, group, (size_t)n_group * sizeof *group);
    q->n_group = n_group;
    q->tag = tag;
    q->kind = kind;
    q->n = n;
    q->next = c->colls;
    c->colls = q;
    return q;
}

/* Sums the members' buffers in group order (a fixed order: every member gets the same
 * floats) and writes the sum back into each. Blocked so the arrays stay in cache. */
static void sum_into_all(pp_transport_req *q)
{
    enum { BLK = 1024 };
    float acc[BLK];
    for (size_t i0 = 0; i0 < q->n; i0 += BLK) {
        size_t len = q->n - i0 < BLK ? q->n - i0 : BLK;
        memcpy(acc, q->data[0] + i0, len * sizeof *acc);
        for (int j = 1; j < q->n_group; j++) {
            const float *d = q->data[j] + i0;
            for (size_t i = 0; i < len; i++)
                acc[i] += d[i];
        }
        for (int j = 0; j < q->n_group; j++)
            memcpy(q->data[j] + i0, acc, len * sizeof *acc);
    }
}

/* All-gather: member i's part to slice i of every member's full buffer (memmove: a part may
 * be its own slice). */
static void gather_into_all(pp_transport_req *q)
{
    for (int j = 0; j < q->n_group; j++)
        for (int i = 0; i < q->n_group; i++)
            memmove(q->data[j] + (size_t)i * q->n, q->src[i], q->n * sizeof(float));
}

/* Reduce-scatter: member j's part is the sum over members, in group order, of their slice j:
 * the all-reduce's order element by element. Slice j is read whole (block by block) before
 * part j is written, so a part that is its own slice is safe. */
static void sum_slices(pp_transport_req *q)
{
    enum { BLK = 1024 };
    float acc[BLK];
    for (int j = 0; j < q->n_group; j++) {
        size_t off = (size_t)j * q->n;
        for (size_t i0 = 0; i0 < q->n; i0 += BLK) {
            size_t len = q->n - i0 < BLK ? q->n - i0 : BLK;
            memcpy(acc, q->src[0] + off + i0, len * sizeof *acc);
            for (int m = 1; m < q->n_group; m++) {
                const float *d = q->src[m] + off + i0;
                for (size_t i = 0; i < len; i++)
                    acc[i] += d[i];
            }
            memcpy(q->data[j] + i0, acc, len * sizeof *acc);
        }
    }
}

/* All-to-all: member i's block j (sb[i][j] bytes, the blocks back to back) to member j's
 * block i (rb[j][i] bytes); a size that disagrees copies nothing and fails every member. */
static void exchange_blocks(pp_transport_req *q)
{
    int n = q->n_group;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            q->bad |= q->sb[i][j] != q->rb[j][i];
    for (int j = 0; j < n && !q->bad; j++) {
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            size_t from = 0;
            for (int m = 0; m < j; m++)
                from += q->sb[i][m];
            if (q->rb[j][i])
                memcpy((char *)q->data[j] + at, (const char *)q->src[i] + from, q->rb[j][i]);
            at += q->rb[j][i];
        }
    }
}

static const char *coll_name(coll_kind k)
{
    return k == COLL_ALLREDUCE   ? "all-reduce"
           : k == COLL_ALLGATHER ? "all-gather"
           : k == COLL_ALLTOALL  ? "all-to-all"
                                 : "reduce-scatter";
}

/* Posts rank's buffers to the open collective (tag, group), creating it; the last member to
 * arrive does the arithmetic. Never blocks on the others. */
static pp_status post_blocks(tctx *c, int rank, const int *group, int n_group, uint64_t tag,
                             coll_kind kind, const float *src, float *dst, size_t n,
                             const size_t *sb, const size_t *rb, pp_transport_req **req);

static pp_status post(tctx *c, int rank, const int *group, int n_group, uint64_t tag,
                      coll_kind kind, const float *src, float *dst, size_t n,
                      pp_transport_req **req)
{
    return post_blocks(c, rank, group, n_group, tag, kind, src, dst, n, NULL, NULL, req);
}

static pp_status post_blocks(tctx *c, int rank, const int *group, int n_group, uint64_t tag,
                             coll_kind kind, const float *src, float *dst, size_t n,
                             const size_t *sb, const size_t *rb, pp_transport_req **req)
{
    if (atomic_load(&c->aborted))
        return aborted_error(coll_name(kind), rank);
    pthread_mutex_lock(&c->cmu);
    pp_transport_req *q = find_coll(c, group, n_group, tag, rank);
    if (!q)
        q = new_coll(c, group, n_group, tag, kind, n);
    if (!q) {
        pthread_mutex_unlock(&c->cmu);
        return pp_err_trace(PP_ERR_NOMEM, __FILE__, __LINE__);
    }
    if (q->n != n || q->kind != kind) {
        size_t other = q->n;
        coll_kind ok = q->kind;
        pthread_mutex_unlock(&c->cmu);
        return PP_ERR(PP_ERR_INVALID,
                      "transport %s (tag %#llx): rank %d contributes %zu floats, another "
                      "member %zu to a%s %s",
                      coll_name(kind), (unsigned long long)tag, rank, n, other,
                      ok == COLL_ALLREDUCE ? "n" : "", coll_name(ok));
    }
    int me = group_index(q, rank);
    q->data[me] = dst;
    q->src[me] = src;
    q->sb[me] = sb;
    q->rb[me] = rb;
    int last = ++q->arrived == n_group;
    pthread_mutex_unlock(&c->cmu);
    if (last) { /* every member has posted and waits: the buffers are ours */
        if (kind == COLL_ALLREDUCE)
            sum_into_all(q);
        else if (kind == COLL_ALLGATHER)
            gather_into_all(q);
        else if (kind == COLL_ALLTOALL)
            exchange_blocks(q);
        else
            sum_slices(q);
        pthread_mutex_lock(&c->cmu);
        q->done = 1;
        pthread_cond_broadcast(&c->ccv);
        pthread_mutex_unlock(&c->cmu);
    }
    *req = q;
    return PP_OK;
}

static pp_status t_iallreduce(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                              float *data, size_t n, pp_transport_req **req)
{
    return post(ctx, rank, group, n_group, tag, COLL_ALLREDUCE, data, data, n, req);
}

static void unlink_coll(tctx *c, pp_transport_req *q)
{
    for (pp_transport_req **pp = &c->colls; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            break;
        }
    free(q->group);
    free(q->data);
    free(q->src);
    free(q->sb);
    free(q->rb);
    free(q);
}

/* Waits for the collective to be done, then leaves it (the last to leave frees it); *bad
 * (NULL: not wanted) receives its all-to-all size mismatch flag. */
static pp_status leave(void *ctx, int rank, pp_transport_req *q, int *bad)
{
    tctx *c = ctx;
    pthread_mutex_lock(&c->cmu);
    /* Once every member has posted, the last one is summing into all the buffers: wait for it
     * even after an abort, so no caller frees a buffer that is still being written. */
    while (!q->done && (!atomic_load(&c->aborted) || q->arrived == q->n_group))
        pthread_cond_wait(&c->ccv, &c->cmu);
    int done = q->done;
    if (bad)
        *bad = q->bad;
    if (++q->left == q->n_group)
        unlink_coll(c, q);
    pthread_mutex_unlock(&c->cmu);
    return done ? PP_OK : aborted_error("all-reduce wait", rank);
}

static pp_status t_wait(void *ctx, int rank, pp_transport_req *q)
{
    return leave(ctx, rank, q, NULL);
}

static pp_status t_allgather(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                             const float *part, float *full, size_t n)
{
    pp_transport_req *q;
    PP_TRY(post(ctx, rank, group, n_group, tag, COLL_ALLGATHER, part, full, n, &q));
    return t_wait(ctx, rank, q);
}

static pp_status t_reduce_scatter(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                                  const float *full, float *part, size_t n)
{
    pp_transport_req *q;
    PP_TRY(post(ctx, rank, group, n_group, tag, COLL_REDUCE_SCATTER, full, part, n, &q));
    return t_wait(ctx, rank, q);
}

/* The blocks' buffers are passed as floats through the meeting (bytes, never read as floats);
 * a member's data pointer must not be NULL (find_coll's "not joined yet"), so an empty
 * receive buffer is replaced by a dummy. */
static pp_status t_alltoallv(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                             const void *send, const size_t *send_bytes, void *recv,
                             const size_t *recv_bytes)
{
    static float none;
    pp_transport_req *q;
    PP_TRY(post_blocks(ctx, rank, group, n_group, tag, COLL_ALLTOALL, send,
                       recv ? recv : &none, (size_t)n_group, send_bytes, recv_bytes, &q));
    int bad = 0;
    PP_TRY(leave(ctx, rank, q, &bad));
    if (bad)
        return PP_ERR(PP_ERR_INVALID,
                      "transport all-to-all (tag %#llx): a block's size differs between its "
                      "sender and its receiver",
                      (unsigned long long)tag);
    return PP_OK;
}

static pp_status t_barrier(void *ctx, int rank)
{
    tctx *c = ctx;
    pthread_mutex_lock(&c->cmu);
    int gen = c->bar_gen;
    if (++c->bar_count == c->ranks) {
        c->bar_count = 0;
        c->bar_gen++;
        pthread_cond_broadcast(&c->ccv);
    } else {
        while (gen == c->bar_gen && !atomic_load(&c->aborted))
            pthread_cond_wait(&c->ccv, &c->cmu);
    }
    int ok = gen != c->bar_gen;
    pthread_mutex_unlock(&c->cmu);
    return ok ? PP_OK : aborted_error("barrier", rank);
}

static void t_abort(void *ctx)
{
    tctx *c = ctx;
    atomic_store(&c->aborted, 1);
    for (int r = 0; r < c->ranks; r++) {
        pthread_mutex_lock(&c->mbox[r].mu);
        pthread_cond_broadcast(&c->mbox[r].cv);
        pthread_mutex_unlock(&c->mbox[r].mu);
        pthread_mutex_lock(&c->obox[r].mu);
        pthread_cond_broadcast(&c->obox[r].cv);
        pthread_mutex_unlock(&c->obox[r].mu);
    }
    pthread_mutex_lock(&c->cmu);
    pthread_cond_broadcast(&c->ccv);
    pthread_mutex_unlock(&c->cmu);
}

/* Called when no rank thread runs any more: frees what aborted steps left behind. Every
 * message is on its sender's outbox until released, so walking the outboxes frees each once. */
static void t_destroy(void *ctx)
{
    tctx *c = ctx;
    if (!c)
        return;
    for (int r = 0; r < c->ranks && c->obox; r++) {
        for (msg *m = c->obox[r].sent; m;) {
            msg *n = m->sent_next;
            msg_free(c, m);
            m = n;
        }
        pthread_mutex_destroy(&c->obox[r].mu);
        pthread_cond_destroy(&c->obox[r].cv);
        pthread_mutex_destroy(&c->mbox[r].mu);
        pthread_cond_destroy(&c->mbox[r].cv);
    }
    while (c->colls)
        unlink_coll(c, c->colls);
    pthread_mutex_destroy(&c->cmu);
    pthread_cond_destroy(&c->ccv);
    free(c->mbox);
    free(c->obox);
    free(c->be);
    free(c);
}

static const pp_transport_ops thread_ops = {
    .send = t_send,
    .recv = t_recv,
    .iallreduce_sum = t_iallreduce,
    .wait = t_wait,
    .barrier = t_barrier,
    .flush = t_flush,
    .abort = t_abort,
    .destroy = t_destroy,
    .allgather = t_allgather,
    .reduce_scatter_sum = t_reduce_scatter,
    .alltoallv = t_alltoallv,
    .send_held = t_send_held,
    .release_held = t_release_held,
};

pp_status pp_transport_thread_create(int ranks, pp_backend *const *backends, pp_transport **out)
{
    *out = NULL;
    if (ranks < 1)
        return PP_ERR(PP_ERR_INVALID, "the thread transport needs at least 1 rank, got %d", ranks);
    tctx *c = pp_calloc(1, sizeof *c);
    pp_transport *t = pp_calloc(1, sizeof *t);
    if (c) {
        c->mbox = pp_calloc((size_t)ranks, sizeof *c->mbox);
        c->obox = pp_calloc((size_t)ranks, sizeof *c->obox);
        if (backends)
            c->be = pp_calloc((size_t)ranks, sizeof *c->be);
    }
    if (!c || !t || !c->mbox || !c->obox || (backends && !c->be)) {
        if (c) {
            free(c->mbox);
            free(c->obox);
            free(c->be);
        }
        free(c);
        free(t);
        return PP_ERR_NOMEM;
    }
    c->ranks = ranks;
    for (int r = 0; r < ranks; r++) {
        pthread_mutex_init(&c->mbox[r].mu, NULL);
        pthread_cond_init(&c->mbox[r].cv, NULL);
        pthread_mutex_init(&c->obox[r].mu, NULL);
        pthread_cond_init(&c->obox[r].cv, NULL);
        if (backends)
            c->be[r] = backends[r];
    }
    pthread_mutex_init(&c->cmu, NULL);
    pthread_cond_init(&c->ccv, NULL);
    atomic_init(&c->aborted, 0);
    t->name = "thread";
    t->ops = &thread_ops;
    t->ctx = c;
    t->ranks = ranks;
    t->self = -1;
    *out = t;
    return PP_OK;
}
