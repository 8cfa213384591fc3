/* transport_mpi.c — ranks as processes: the transport table over MPI (Open MPI from Debian),
 * one pipeline rank per process, on one machine or many.
 *
 * Point to point on a duplicate of MPI_COMM_WORLD of its own: send copies the bytes into a
 * buffer (PP_MEM_COMM in the rank's backend once the executor binds it), posts MPI_Isend and
 * returns; the buffer lives until MPI_Test / MPI_Wait says the send completed (checked on
 * every later send, waited for in flush); a held send's (send_held) until release_held waits
 * for it. recv is a blocking MPI_Recv into the caller's buffer.
 *
 * All-reduce on a second duplicate communicator, so its messages never match a pipeline hop:
 * every member sends its part to the group's first rank (the root), which sums the parts in
 * group order — d0 + d1 + d2 ..., element by element, the order of the in-process transport —
 * and sends the sum back. Bit-identical floats on every member and with the thread transport,
 * whatever MPI's own reduction algorithms would do. Posting never blocks: the root posts its
 * receives, a member its send; wait finishes the exchange.
 *
 * All-gather and reduce-scatter (tensor parallelism, blocking) use the same star on the same
 * communicator: parts (all-gather) or whole buffers (reduce-scatter) to the root, which copies
 * them into place or sums slice j over the members in group order (the all-reduce's order, so
 * again bit-identical to the thread transport), and sends the whole (all-gather) or slice j to
 * member j. A member's send completes before its receive is posted: its part may be a slice
 * of its own receive buffer (in place).
 *
 * Watchdog: every wait polls (MPI_Test*, MPI_Iprobe; a spin for the first milliseconds, then
 * short sleeps) instead of blocking inside MPI, so a peer that stops making progress (SIGSTOP,
 * a frozen node, a hung kernel) turns into PP_ERR_TIMEOUT naming the rank waited for after
 * watchdog_s, and pprun then aborts the job, rather than every other rank hanging forever.
 *
 * Tags: MPI tags are ints (at least 2^30 - 1 in Open MPI and MPICH), ours 64 bits; they are
 * packed exactly (transport.h documents the layout) and a value that does not fit is an error,
 * never a silent collision.
 *
 * Not here: MPI's own collectives (their summation order is the library's), device buffers
 * (CUDA-aware MPI), more than one rank per process, threads calling MPI other than the one
 * that created the transport. Without MPI at build time only the fallback at the bottom is
 * compiled: it answers PP_ERR_UNSUPPORTED, so code above has no #ifdef.
 */
#include "transport.h"

#ifdef PP_HAVE_MPI

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"

typedef struct pending_send {
    struct pending_send *next;
    int to;
    MPI_Request req;
    void *buf;
    size_t bytes;
    int held; /* sent by send_held: released by release_held (or flush) only */
} pending_send;

struct pp_transport_req {
    int root, n_members; /* n_members = n_group - 1 parts the root receives */
    int *members;        /* [n_members] world ranks (root only) */
    MPI_Request *reqs;   /* [n_members] receives (root), or [1] the member's send */
    float **parts;       /* [n_members] received parts (root only) */
    float *data;
    size_t n;
    int tag;
};

typedef struct {
    MPI_Comm p2p, coll;
    MPI_Comm ask; /* the watchdog's questions "whom are you waiting for?" and their answers */
    int waiting_on; /* the rank this one waits for now (-1: the others, -2: not waiting) */
    int rank, size;
    int own_init; /* we called MPI_Init_thread: finalise in destroy */
    pp_backend *be;
    pending_send *sends;
    double watchdog_s; /* a wait without progress this long fails; 0: never */
} mctx;

static pp_status mpi_fail(int rc, const char *what, const char *file, int line)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return pp_err_set(PP_ERR_DEVICE, file, line, "%s failed: %s", what, msg);
}
#define MPI_CHECK(call)                                                                            \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS)                                                                    \
            return mpi_fail(rc_, #call, __FILE__, __LINE__);                                       \
    } while (0)

/* ---- tags ---- */
enum { TAG_STAGE_BITS = 11, TAG_MB_BITS = 16, TAG_COLL_BIT = 1 << 29 };

/* Point to point, pp_transport_tag's layout: stage(11) pipe(1) dir(1) mb(16) in 29 bits;
 * the executor's gathers (bit 63): bit 29, kind(3) replica(6) index(20). */
/* ---- who stopped making progress --------------------------------------------------------------
 * A rank whose wait ran past the watchdog names the rank it waited for, but that rank may itself
 * be waiting (for the frozen one further along the pipeline: rank 3 waits for 2, which waits for
 * 1). So before it names one, it asks along the chain: every rank in a wait answers, on a
 * communicator of its own (ask), which rank it waits for; the first rank that does not answer
 * within ASK_S is the one that stopped. Answers are given only from inside a wait (where every
 * rank that is not making progress sits); a rank computing for longer than ASK_S is named as
 * before. */
enum { TAG_ASK = 1, TAG_ANSWER = 2 };
#define ASK_S 2.0

/* Answers the questions waiting for this rank (from inside its waits). */
static void answer_asks(mctx *c)
{
    if (c->ask == MPI_COMM_NULL)
        return;
    for (;;) {
        int flag = 0, q;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_ASK, c->ask, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        if (MPI_Recv(&q, 1, MPI_INT, st.MPI_SOURCE, TAG_ASK, c->ask, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            return;
        int a = c->waiting_on; /* one int: sent eagerly, so this returns at once */
        MPI_Send(&a, 1, MPI_INT, st.MPI_SOURCE, TAG_ANSWER, c->ask);
    }
}

/* A wait on all the others (a barrier): every rank is asked at once, and the first that does not
 * answer within ASK_S is named; -1 when all answer (or a question cannot be sent). */
static int none_answers(mctx *c)
{
    enum { MAX_ASKED = 4096 };
    int n = c->size < MAX_ASKED ? c->size : MAX_ASKED, q = c->rank, left = 0;
    MPI_Request *rq = pp_calloc((size_t)n, sizeof *rq);
    int *a = pp_calloc((size_t)n, sizeof *a);
    for (int r = 0; rq && a && r < n; r++) {
        rq[r] = MPI_REQUEST_NULL;
        if (r == c->rank || MPI_Send(&q, 1, MPI_INT, r, TAG_ASK, c->ask) != MPI_SUCCESS ||
            MPI_Irecv(&a[r], 1, MPI_INT, r, TAG_ANSWER, c->ask, &rq[r]) != MPI_SUCCESS)
            continue;
        left++;
    }
    double until = pp_now() + ASK_S;
    while (rq && a && left > 0 && pp_now() < until) {
        answer_asks(c);
        int done = 0;
        MPI_Testall(n, rq, &done, MPI_STATUSES_IGNORE);
        if (done)
            left = 0;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    int stopped = -1;
    for (int r = 0; rq && a && r < n; r++) {
        int complete = 1;
        if (rq[r] != MPI_REQUEST_NULL)
            MPI_Request_get_status(rq[r], &complete, MPI_STATUS_IGNORE);
        if (!complete && stopped < 0)
            stopped = r;
        if (!complete) {
            MPI_Cancel(&rq[r]);
            MPI_Request_free(&rq[r]);
        }
    }
    free(rq);
    free(a);
    return stopped;
}

/* The rank to name for a wait on `peer` that made no progress: along the chain of ranks each
 * waiting for the next, the first that does not answer (peer itself when it does not; peer too
 * for a chain that comes back to a rank already asked, or ends at a rank not waiting). */
static int who_stopped(mctx *c, int peer)
{
    if (c->ask == MPI_COMM_NULL)
        return peer;
    if (peer < 0)
        return none_answers(c);
    int cur = peer, asked = 0;
    while (asked++ < c->size) {
        int q = c->rank, a = -2, flag = 0;
        MPI_Request rq;
        if (MPI_Send(&q, 1, MPI_INT, cur, TAG_ASK, c->ask) != MPI_SUCCESS ||
            MPI_Irecv(&a, 1, MPI_INT, cur, TAG_ANSWER, c->ask, &rq) != MPI_SUCCESS)
            return peer;
        double until = pp_now() + ASK_S;
        while (!flag && pp_now() < until) {
            answer_asks(c); /* others ask this rank while it asks */
            MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
            if (!flag) {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
            }
        }
        if (!flag) {
            MPI_Cancel(&rq);
            MPI_Request_free(&rq);
            return cur; /* no answer: this one stopped */
        }
        if (a < 0 || a == c->rank || a == peer || a >= c->size)
            return peer; /* not waiting, or a cycle back here: name the one waited for */
        cur = a;
    }
    return peer;
}

/* who_stopped, and then this rank stays to answer ASK_S x 2 longer, naming the stopped rank as
 * the one it waits for: ranks whose waits began later ask it after it has made up its mind, and
 * would otherwise name it for not answering. */
static int blame(mctx *c, int peer)
{
    int stopped = who_stopped(c, peer);
    c->waiting_on = stopped;
    double until = pp_now() + 2 * ASK_S;
    while (stopped >= 0 && pp_now() < until) {
        answer_asks(c);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    c->waiting_on = -2;
    return stopped;
}

/* Waits for all n requests (statuses may be NULL) like MPI_Waitall, polling so that a wait
 * with no progress for c->watchdog_s fails, naming peers[i] of the first request still open
 * (peers NULL: `peer`). */
static pp_status await_all(mctx *c, int n, MPI_Request *reqs, MPI_Status *sts, const int *peers,
                           int peer, const char *what)
{
    double t0 = pp_now(), spin_until = t0 + 0.005;
    for (int polls = 0;; polls++) {
        int done = 0;
        int rc = MPI_Testall(n, reqs, &done, sts ? sts : MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, what, __FILE__, __LINE__);
        if (done) {
            c->waiting_on = -2;
            return PP_OK;
        }
        double now = pp_now();
        int who = peer;
        for (int i = 0; peers && i < n && (polls % 64 == 0 || c->watchdog_s > 0); i++) {
            int complete = 0; /* the first request still open names whom this rank waits for */
            MPI_Request_get_status(reqs[i], &complete, MPI_STATUS_IGNORE);
            if (!complete) {
                who = peers[i];
                break;
            }
        }
        c->waiting_on = who;
        if (polls % 64 == 0)
            answer_asks(c);
        if (c->watchdog_s > 0 && now - t0 > c->watchdog_s) {
            int stopped = blame(c, who);
            return pp_transport_stalled(c->rank, now - t0, stopped, what);
        }
        if (now > spin_until) {
            struct timespec ts = {0, 200000}; /* 0.2 ms: idle ranks leave the core to others */
            nanosleep(&ts, NULL);
        }
    }
}

static pp_status await_one(mctx *c, MPI_Request *req, MPI_Status *st, int peer, const char *what)
{
    return await_all(c, 1, req, st, NULL, peer, what);
}

static void m_set_watchdog(void *ctx, double seconds)
{
    ((mctx *)ctx)->watchdog_s = seconds > 0 ? seconds : 0;
}

static pp_status mpi_tag(uint64_t tag, int *out)
{
    if (tag >> 63) {
        uint64_t kind = (tag >> 48) & 0xff, replica = (tag >> 32) & 0xffff, a = tag & 0xffffffffu;
        if (kind >= 8 || replica >= 64 || a >= (1u << 20))
            return PP_ERR(PP_ERR_UNSUPPORTED,
                          "MPI transport: collective tag %#llx (kind %llu, replica %llu, index "
                          "%llu) does not fit an MPI tag (kind < 8, replica < 64, index < 2^20)",
                          (unsigned long long)tag, (unsigned long long)kind,
                          (unsigned long long)replica, (unsigned long long)a);
        *out = TAG_COLL_BIT | (int)(kind << 26 | replica << 20 | a);
        return PP_OK;
    }
    uint64_t pipe = (tag >> 62) & 1, dir = (tag >> 61) & 1, stage = (tag >> 32) & 0x1fffffff,
             mb = tag & 0xffffffffu;
    if (stage >= (1u << TAG_STAGE_BITS) || mb >= (1u << TAG_MB_BITS))
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "MPI transport: stage %llu / micro-batch %llu do not fit an MPI tag (at "
                      "most %d stages and %d micro-batches)",
                      (unsigned long long)stage, (unsigned long long)mb, 1 << TAG_STAGE_BITS,
                      1 << TAG_MB_BITS);
    *out = (int)(stage << 18 | pipe << 17 | dir << 16 | mb);
    return PP_OK;
}

static pp_status check_count(size_t elems, const char *what)
{
    if (elems > INT_MAX)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "MPI transport: a %s of %zu elements exceeds MPI's int "
                      "count (split the model into more stages)",
                      what, elems);
    return PP_OK;
}

/* ---- buffers: the bound backend's PP_MEM_COMM, or malloc before binding ---- */
static void *buf_alloc(mctx *c, size_t bytes)
{
    if (c->be)
        return pp_backend_alloc(c->be, bytes, PP_MEM_COMM);
    return malloc(bytes ? bytes : 1);
}

static void buf_free(mctx *c, void *p, size_t bytes)
{
    if (c->be)
        pp_backend_free(c->be, p, bytes, PP_MEM_COMM);
    else
        free(p);
}

/* Releases the sends that completed (wait = 1: all of them, waiting), of those `which` names. */
enum { RECLAIM_PLAIN, RECLAIM_HELD, RECLAIM_ALL };
static pp_status reclaim_which(mctx *c, int wait, int which)
{
    pp_status st = PP_OK;
    for (pending_send **pp = &c->sends; *pp;) {
        pending_send *s = *pp;
        int done = 0, rc;
        if (which != RECLAIM_ALL && s->held != (which == RECLAIM_HELD)) {
            pp = &s->next;
            continue;
        }
        if (wait) {
            pp_status w = await_one(c, &s->req, NULL, s->to, "the completion of a send");
            if (w != PP_OK)
                return w;
            rc = MPI_SUCCESS;
            done = 1;
        } else {
            rc = MPI_Test(&s->req, &done, MPI_STATUS_IGNORE);
        }
        if (rc != MPI_SUCCESS && st == PP_OK)
            st = mpi_fail(rc, wait ? "MPI_Wait (send)" : "MPI_Test (send)", __FILE__, __LINE__);
        if (!done) {
            pp = &s->next;
            continue;
        }
        *pp = s->next;
        buf_free(c, s->buf, s->bytes);
        free(s);
    }
    return st;
}

static pp_status reclaim(mctx *c, int wait)
{
    return reclaim_which(c, wait, wait ? RECLAIM_ALL : RECLAIM_PLAIN);
}

static pp_status send_msg(mctx *c, int to, uint64_t tag, const void *buf, size_t bytes, int held)
{
    int mt = 0;
    PP_TRY(mpi_tag(tag, &mt));
    PP_TRY(check_count(bytes, "message"));
    if (!held)
        PP_TRY(reclaim(c, 0));
    pending_send *s = calloc(1, sizeof *s);
    if (!s)
        return PP_ERR(PP_ERR_NOMEM, "MPI transport: cannot allocate a send descriptor");
    if (!(s->buf = buf_alloc(c, bytes))) {
        free(s);
        return PP_ERR(PP_ERR_OOM, "MPI transport: cannot allocate a %zu-byte send buffer", bytes);
    }
    if (bytes)
        memcpy(s->buf, buf, bytes);
    s->bytes = bytes;
    s->to = to;
    s->held = held;
    int rc = MPI_Isend(s->buf, (int)bytes, MPI_BYTE, to, mt, c->p2p, &s->req);
    if (rc != MPI_SUCCESS) {
        buf_free(c, s->buf, bytes);
        free(s);
        return mpi_fail(rc, "MPI_Isend", __FILE__, __LINE__);
    }
    s->next = c->sends;
    c->sends = s;
    return PP_OK;
}

static pp_status m_send(void *ctx, int from, int to, uint64_t tag, const void *buf, size_t bytes)
{
    (void)from;
    return send_msg(ctx, to, tag, buf, bytes, 0);
}

static pp_status m_send_held(void *ctx, int from, int to, uint64_t tag, const void *buf,
                             size_t bytes)
{
    (void)from;
    return send_msg(ctx, to, tag, buf, bytes, 1);
}

static pp_status m_release_held(void *ctx, int rank)
{
    (void)rank;
    return reclaim_which(ctx, 1, RECLAIM_HELD);
}

static pp_status m_recv(void *ctx, int to, int from, uint64_t tag, void *buf, size_t bytes)
{
    mctx *c = ctx;
    int mt = 0, got = 0;
    PP_TRY(mpi_tag(tag, &mt));
    PP_TRY(check_count(bytes, "message"));
    /* Probe first: a message of another size is reported as such (MPI would truncate). */
    MPI_Status stt;
    double t0 = pp_now();
    c->waiting_on = from;
    for (int flag = 0, polls = 0; !flag; polls++) {
        MPI_CHECK(MPI_Iprobe(from, mt, c->p2p, &flag, &stt));
        if (flag)
            break;
        if (polls % 64 == 0)
            answer_asks(c);
        if (c->watchdog_s > 0 && pp_now() - t0 > c->watchdog_s) {
            double waited = pp_now() - t0;
            return pp_transport_stalled(to, waited, blame(c, from), "a message");
        }
        if (polls > 1000) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    MPI_CHECK(MPI_Get_count(&stt, MPI_BYTE, &got));
    if ((size_t)got != bytes)
        return PP_ERR(PP_ERR_INVALID,
                      "transport recv on rank %d: the message from rank %d (tag %#llx) has %d "
                      "bytes, the receive expects %zu",
                      to, from, (unsigned long long)tag, got, bytes);
    MPI_Request rq;
    MPI_CHECK(MPI_Irecv(buf, (int)bytes, MPI_BYTE, from, mt, c->p2p, &rq));
    PP_TRY(await_one(c, &rq, NULL, from, "the rest of a message"));
    return PP_OK;
}

static pp_status m_flush(void *ctx, int rank)
{
    (void)rank;
    return reclaim(ctx, 1);
}

/* ---- all-reduce: parts to the root, summed in group order, the sum back ---- */
static void req_free(mctx *c, pp_transport_req *q)
{
    if (!q)
        return;
    for (int i = 0; q->parts && i < q->n_members; i++)
        buf_free(c, q->parts[i], q->n * sizeof(float));
    free(q->parts);
    free(q->members);
    free(q->reqs);
    free(q);
}

static pp_status post_root(mctx *c, pp_transport_req *q, const int *group, int n_group)
{
    q->n_members = n_group - 1;
    q->members = calloc((size_t)n_group, sizeof *q->members);
    q->reqs = calloc((size_t)n_group, sizeof *q->reqs);
    q->parts = calloc((size_t)n_group, sizeof *q->parts);
    if (!q->members || !q->reqs || !q->parts)
        return PP_ERR(PP_ERR_NOMEM, "MPI transport: cannot allocate an all-reduce of %d ranks",
                      n_group);
    for (int i = 0; i < q->n_members; i++) {
        q->reqs[i] = MPI_REQUEST_NULL;
        q->members[i] = group[i + 1];
    }
    for (int i = 0; i < q->n_members; i++) {
        if (!(q->parts[i] = buf_alloc(c, q->n * sizeof(float))))
            return PP_ERR(PP_ERR_OOM, "MPI transport: cannot allocate a %zu-float receive buffer",
                          q->n);
        MPI_CHECK(MPI_Irecv(q->parts[i], (int)q->n, MPI_FLOAT, q->members[i], q->tag, c->coll,
                            &q->reqs[i]));
    }
    return PP_OK;
}

static pp_status m_iallreduce(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                              float *data, size_t n, pp_transport_req **req)
{
    mctx *c = ctx;
    int mt = 0;
    PP_TRY(mpi_tag(tag | 1ull << 63, &mt));
    PP_TRY(check_count(n, "all-reduce"));
    pp_transport_req *q = calloc(1, sizeof *q);
    if (!q)
        return PP_ERR(PP_ERR_NOMEM, "MPI transport: cannot allocate an all-reduce request");
    q->root = group[0];
    q->data = data;
    q->n = n;
    q->tag = mt;
    pp_status st;
    if (rank == q->root) {
        st = post_root(c, q, group, n_group);
    } else {
        q->reqs = calloc(1, sizeof *q->reqs);
        st = q->reqs ? PP_OK : PP_ERR_NOMEM;
        if (st == PP_OK) {
            int rc = MPI_Isend(data, (int)n, MPI_FLOAT, q->root, mt, c->coll, &q->reqs[0]);
            if (rc != MPI_SUCCESS)
                st = mpi_fail(rc, "MPI_Isend (all-reduce)", __FILE__, __LINE__);
        }
    }
    if (st != PP_OK) {
        req_free(c, q);
        return st;
    }
    *req = q;
    return PP_OK;
}

static pp_status wait_root(mctx *c, pp_transport_req *q)
{
    if (q->n_members == 0)
        return PP_OK;
    MPI_Status stt[64];
    MPI_Status *sts = q->n_members <= (int)(sizeof stt / sizeof stt[0])
                          ? stt
                          : malloc((size_t)q->n_members * sizeof *sts);
    if (!sts)
        return PP_ERR(PP_ERR_NOMEM, "MPI transport: cannot allocate %d statuses", q->n_members);
    /* a shorter part would leave stale floats in the sum: say so instead */
    pp_status st =
        await_all(c, q->n_members, q->reqs, sts, q->members, -1, "its part of an all-reduce");
    for (int j = 0; j < q->n_members && st == PP_OK; j++) {
        int got = 0;
        MPI_Get_count(&sts[j], MPI_FLOAT, &got);
        if ((size_t)got != q->n)
            st = PP_ERR(PP_ERR_INVALID,
                        "transport all-reduce: rank %d contributes %d floats, rank %d (the "
                        "group's first) %zu",
                        q->members[j], got, q->root, q->n);
    }
    if (sts != stt)
        free(sts);
    PP_TRY(st);
    /* d0 + d1 + d2 ...: the in-process transport's order, element by element */
    for (int j = 0; j < q->n_members; j++) {
        const float *d = q->parts[j];
        for (size_t i = 0; i < q->n; i++)
            q->data[i] += d[i];
    }
    for (int j = 0; j < q->n_members; j++)
        MPI_CHECK(
            MPI_Isend(q->data, (int)q->n, MPI_FLOAT, q->members[j], q->tag, c->coll, &q->reqs[j]));
    PP_TRY(
        await_all(c, q->n_members, q->reqs, NULL, q->members, -1, "taking the all-reduce's sum"));
    return PP_OK;
}

static pp_status wait_member(mctx *c, pp_transport_req *q)
{
    PP_TRY(await_one(c, &q->reqs[0], NULL, q->root, "taking this rank's all-reduce part"));
    MPI_CHECK(MPI_Irecv(q->data, (int)q->n, MPI_FLOAT, q->root, q->tag, c->coll, &q->reqs[0]));
    PP_TRY(await_one(c, &q->reqs[0], NULL, q->root, "the all-reduce's sum"));
    return PP_OK;
}

static pp_status m_wait(void *ctx, int rank, pp_transport_req *q)
{
    mctx *c = ctx;
    pp_status st = rank == q->root ? wait_root(c, q) : wait_member(c, q);
    req_free(c, q);
    return st;
}

/* ---- all-gather / reduce-scatter: the all-reduce's star, blocking ---- */
typedef struct {
    int gather;       /* 1: all-gather, 0: reduce-scatter */
    const float *src; /* gather: this rank's part (n); scatter: its whole buffer (n_group * n) */
    float *dst;       /* gather: the whole buffer; scatter: this rank's part */
    size_t n;         /* floats per part */
} star_op;

/* Root's receives (gather: into dst's slices; scatter: into `in`, one whole buffer per member)
 * and their size check. */
static pp_status star_recv(mctx *c, const star_op *op, const int *group, int n_group, int mt,
                           float *in, MPI_Request *reqs, MPI_Status *sts)
{
    size_t per = op->gather ? op->n : op->n * (size_t)n_group;
    for (int i = 1; i < n_group; i++) {
        float *to = op->gather ? op->dst + (size_t)i * op->n : in + (size_t)(i - 1) * per;
        MPI_CHECK(MPI_Irecv(to, (int)per, MPI_FLOAT, group[i], mt, c->coll, &reqs[i - 1]));
    }
    const char *what = op->gather ? "its part of an all-gather" : "its part of a reduce-scatter";
    PP_TRY(await_all(c, n_group - 1, reqs, sts, group + 1, -1, what));
    for (int i = 1; i < n_group; i++) {
        int got = 0;
        MPI_Get_count(&sts[i - 1], MPI_FLOAT, &got);
        if ((size_t)got != per)
            return PP_ERR(PP_ERR_INVALID,
                          "transport %s: rank %d contributes %d floats, rank %d (the group's "
                          "first) %zu",
                          op->gather ? "all-gather" : "reduce-scatter", group[i], got, group[0],
                          per);
    }
    return PP_OK;
}

/* Reduce-scatter's sum at the root: sum[j*n + k] = src0 + in_1 + in_2 ... in group order. */
static void star_sum(const star_op *op, int n_group, const float *in, float *sum)
{
    size_t all = op->n * (size_t)n_group;
    memcpy(sum, op->src, all * sizeof *sum);
    for (int m = 0; m < n_group - 1; m++) {
        const float *d = in + (size_t)m * all;
        for (size_t i = 0; i < all; i++)
            sum[i] += d[i];
    }
}

static pp_status star_root(mctx *c, const star_op *op, const int *group, int n_group, int mt)
{
    size_t all = op->n * (size_t)n_group;
    size_t in_floats = op->gather ? 0 : all * (size_t)(n_group - 1) + all;
    MPI_Request *reqs = calloc((size_t)n_group, sizeof *reqs);
    MPI_Status *sts = calloc((size_t)n_group, sizeof *sts);
    float *in = in_floats ? buf_alloc(c, in_floats * sizeof(float)) : NULL;
    pp_status st = PP_OK;
    if (!reqs || !sts || (in_floats && !in))
        st = PP_ERR(PP_ERR_NOMEM, "MPI transport: cannot allocate a collective of %d ranks",
                    n_group);
    if (st == PP_OK && op->gather)
        memmove(op->dst, op->src, op->n * sizeof(float));
    if (st == PP_OK)
        st = star_recv(c, op, group, n_group, mt, in, reqs, sts);
    float *sum = in ? in + all * (size_t)(n_group - 1) : NULL;
    if (st == PP_OK && !op->gather)
        star_sum(op, n_group, in, sum);
    for (int i = 1; i < n_group && st == PP_OK; i++) {
        const float *from = op->gather ? op->dst : sum + (size_t)i * op->n;
        int rc = MPI_Isend(from, (int)(op->gather ? all : op->n), MPI_FLOAT, group[i], mt, c->coll,
                           &reqs[i - 1]);
        if (rc != MPI_SUCCESS)
            st = mpi_fail(rc, "MPI_Isend (all-gather / reduce-scatter)", __FILE__, __LINE__);
    }
    if (st == PP_OK)
        st = await_all(c, n_group - 1, reqs, NULL, group + 1, -1, "taking the collective's result");
    if (st == PP_OK && !op->gather)
        memcpy(op->dst, sum, op->n * sizeof(float));
    if (in)
        buf_free(c, in, in_floats * sizeof(float));
    free(reqs);
    free(sts);
    return st;
}

static pp_status star_member(mctx *c, const star_op *op, int root, int n_group, int mt)
{
    size_t all = op->n * (size_t)n_group;
    MPI_Request rq;
    MPI_CHECK(
        MPI_Isend(op->src, (int)(op->gather ? op->n : all), MPI_FLOAT, root, mt, c->coll, &rq));
    PP_TRY(await_one(c, &rq, NULL, root, "taking this rank's part"));
    MPI_CHECK(
        MPI_Irecv(op->dst, (int)(op->gather ? all : op->n), MPI_FLOAT, root, mt, c->coll, &rq));
    PP_TRY(await_one(c, &rq, NULL, root, "the collective's result"));
    return PP_OK;
}

static pp_status m_star(mctx *c, int rank, const int *group, int n_group, uint64_t tag,
                        const star_op *op)
{
    int mt = 0;
    PP_TRY(mpi_tag(tag | 1ull << 63, &mt));
    PP_TRY(check_count(op->n * (size_t)n_group, op->gather ? "all-gather" : "reduce-scatter"));
    if (rank == group[0])
        return star_root(c, op, group, n_group, mt);
    return star_member(c, op, group[0], n_group, mt);
}

static pp_status m_allgather(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                             const float *part, float *full, size_t n)
{
    star_op op = {.gather = 1, .src = part, .dst = full, .n = n};
    return m_star(ctx, rank, group, n_group, tag, &op);
}

static pp_status m_reduce_scatter(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                                  const float *full, float *part, size_t n)
{
    star_op op = {.gather = 0, .src = full, .dst = part, .n = n};
    return m_star(ctx, rank, group, n_group, tag, &op);
}

/* All-to-all: a receive from and a send to every other member on the collectives'
 * communicator (no buffer of the transport's: the caller's blocks go out and come in as
 * they are), the block to itself a copy. The receives' sizes are checked. */
static pp_status m_alltoallv(void *ctx, int rank, const int *group, int n_group, uint64_t tag,
                             const void *send, const size_t *send_bytes, void *recv,
                             const size_t *recv_bytes)
{
    mctx *c = ctx;
    int mt = 0;
    PP_TRY(mpi_tag(tag | 1ull << 63, &mt));
    MPI_Request *reqs = calloc((size_t)n_group * 2, sizeof *reqs);
    MPI_Status *sts = calloc((size_t)n_group * 2, sizeof *sts);
    int *peers = calloc((size_t)n_group * 2, sizeof *peers);
    pp_status st = reqs && sts && peers ? PP_OK
                                        : PP_ERR(PP_ERR_NOMEM, "MPI transport: cannot allocate "
                                                               "an all-to-all of %d ranks",
                                                 n_group);
    size_t so = 0, ro = 0, self_so = 0, self_ro = 0;
    int me = -1, nr = 0;
    for (int j = 0; j < n_group && st == PP_OK; j++) {
        if (group[j] == rank) {
            me = j, self_so = so, self_ro = ro;
        } else {
            st = check_count(recv_bytes[j], "all-to-all");
            if (st == PP_OK && MPI_Irecv((char *)recv + ro, (int)recv_bytes[j], MPI_BYTE, group[j],
                                         mt, c->coll, &reqs[nr]) != MPI_SUCCESS)
                st = PP_ERR(PP_ERR_DEVICE, "MPI_Irecv (all-to-all) failed");
            peers[nr++] = group[j];
        }
        so += send_bytes[j], ro += recv_bytes[j];
    }
    int n_recv = nr;
    so = 0;
    for (int j = 0; j < n_group && st == PP_OK; j++) {
        if (group[j] != rank) {
            st = check_count(send_bytes[j], "all-to-all");
            if (st == PP_OK && MPI_Isend((const char *)send + so, (int)send_bytes[j], MPI_BYTE,
                                         group[j], mt, c->coll, &reqs[nr]) != MPI_SUCCESS)
                st = PP_ERR(PP_ERR_DEVICE, "MPI_Isend (all-to-all) failed");
            peers[nr++] = group[j];
        }
        so += send_bytes[j];
    }
    if (st == PP_OK && me >= 0 && send_bytes[me] != recv_bytes[me])
        st = PP_ERR(PP_ERR_INVALID, "transport all-to-all: rank %d sends itself %zu bytes but "
                                    "receives %zu", rank, send_bytes[me], recv_bytes[me]);
    if (st == PP_OK && me >= 0 && recv_bytes[me])
        memcpy((char *)recv + self_ro, (const char *)send + self_so, recv_bytes[me]);
    if (st == PP_OK)
        st = await_all(c, nr, reqs, sts, peers, -1, "an all-to-all");
    for (int i = 0, j = 0; st == PP_OK && i < n_recv; i++, j++) {
        if (group[j] == rank)
            j++;
        int got = 0;
        MPI_Get_count(&sts[i], MPI_BYTE, &got);
        if ((size_t)got != recv_bytes[j])
            st = PP_ERR(PP_ERR_INVALID,
                        "transport all-to-all: rank %d sent rank %d %d bytes, %zu expected",
                        group[j], rank, got, recv_bytes[j]);
    }
    free(reqs);
    free(sts);
    free(peers);
    return st;
}

static pp_status m_barrier(void *ctx, int rank)
{
    (void)rank;
    mctx *c = ctx;
    MPI_Request rq;
    MPI_CHECK(MPI_Ibarrier(c->p2p, &rq));
    PP_TRY(await_one(c, &rq, NULL, -1, "a barrier"));
    return PP_OK;
}

static void m_abort(void *ctx)
{
    (void)ctx;
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Sends still in flight go back to the backend they came from before it is destroyed: a send
 * that has not completed (its receiver failed) is cancelled first. */
static void m_bind(void *ctx, int rank, pp_backend *be)
{
    mctx *c = ctx;
    (void)rank;
    if (c->be != be) {
        for (pending_send *s = c->sends; s; s = s->next) {
            int done = 0;
            MPI_Test(&s->req, &done, MPI_STATUS_IGNORE);
            if (!done) {
                MPI_Cancel(&s->req);
                MPI_Wait(&s->req, MPI_STATUS_IGNORE);
            }
        }
        reclaim(c, 1);
    }
    c->be = be;
}

static void m_destroy(void *ctx)
{
    mctx *c = ctx;
    if (!c)
        return;
    m_bind(c, c->rank, NULL);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        if (c->p2p != MPI_COMM_NULL)
            MPI_Comm_free(&c->p2p);
        if (c->coll != MPI_COMM_NULL)
            MPI_Comm_free(&c->coll);
        if (c->ask != MPI_COMM_NULL)
            MPI_Comm_free(&c->ask);
        if (c->own_init)
            MPI_Finalize();
    }
    free(c);
}

static const pp_transport_ops mpi_ops = {
    .send = m_send,
    .recv = m_recv,
    .iallreduce_sum = m_iallreduce,
    .wait = m_wait,
    .barrier = m_barrier,
    .flush = m_flush,
    .abort = m_abort,
    .destroy = m_destroy,
    .bind = m_bind,
    .set_watchdog = m_set_watchdog,
    .allgather = m_allgather,
    .reduce_scatter_sum = m_reduce_scatter,
    .alltoallv = m_alltoallv,
    .send_held = m_send_held,
    .release_held = m_release_held,
};

static pp_status init_mpi(mctx *c)
{
    int inited = 0, provided = 0;
    MPI_CHECK(MPI_Initialized(&inited));
    if (!inited) {
        MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
        c->own_init = 1;
    }
    /* errors come back as codes (turned into pp_status) instead of killing the job */
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c->p2p));
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c->coll));
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c->ask));
    c->waiting_on = -2;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &c->rank));
    c->watchdog_s = PP_TRANSPORT_WATCHDOG_S;
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &c->size));
    void *ub = NULL;
    int flag = 0;
    MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
    if (flag && *(int *)ub < (1 << 30) - 1)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "this MPI allows tags up to %d; the MPI transport needs 2^30 - 1",
                      *(int *)ub);
    return PP_OK;
}

pp_status pp_transport_mpi_create(pp_transport **out)
{
    *out = NULL;
    mctx *c = pp_calloc(1, sizeof *c);
    pp_transport *t = pp_calloc(1, sizeof *t);
    if (!c || !t) {
        free(c);
        free(t);
        return PP_ERR_NOMEM;
    }
    c->p2p = c->coll = c->ask = MPI_COMM_NULL;
    pp_status st = init_mpi(c);
    if (st != PP_OK) {
        m_destroy(c);
        free(t);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    t->name = "mpi";
    t->ops = &mpi_ops;
    t->ctx = c;
    t->ranks = c->size;
    t->self = c->rank;
    *out = t;
    return PP_OK;
}

/* The launch's local-rank fallback (launch.c): host names of all ranks, this rank's position
 * among those on its host. Needs MPI initialised. */
pp_status pp_mpi_host_local_rank(int *local_rank)
{
    return pp_mpi_host_local(local_rank, NULL);
}

pp_status pp_mpi_host_local(int *local_rank, int *local_size)
{
    enum { HOST = 256 };
    int inited = 0, rank, size;
    MPI_CHECK(MPI_Initialized(&inited));
    if (!inited)
        return PP_ERR(PP_ERR_INVALID, "the local rank over MPI needs MPI initialised first "
                                      "(create the MPI transport before asking)");
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    char me[HOST] = "";
    gethostname(me, HOST - 1);
    char *all = pp_calloc((size_t)size, HOST);
    if (!all)
        return PP_ERR_NOMEM;
    int rc = MPI_Allgather(me, HOST, MPI_CHAR, all, HOST, MPI_CHAR, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(rc, "MPI_Allgather (host names)", __FILE__, __LINE__);
    }
    int *local = pp_calloc((size_t)size, sizeof *local);
    if (local) {
        pp_launch_hosts(all, HOST, size, NULL, local);
        if (local_rank)
            *local_rank = local[rank];
        if (local_size) /* the processes on this host: those named as this one is */
            for (int r = *local_size = 0; r < size; r++)
                *local_size += !strncmp(all + (size_t)r * HOST, me, HOST);
    }
    free(local);
    free(all);
    return local ? PP_OK : PP_ERR_NOMEM;
}

#else /* built without MPI */

pp_status pp_transport_mpi_create(pp_transport **out)
{
    *out = NULL;
    return PP_ERR(PP_ERR_UNSUPPORTED, "the MPI transport: pptune was built without MPI "
                                      "(install Open MPI and reconfigure)");
}

pp_status pp_mpi_host_local_rank(int *local_rank)
{
    return pp_mpi_host_local(local_rank, NULL);
}

pp_status pp_mpi_host_local(int *local_rank, int *local_size)
{
    if (local_rank)
        *local_rank = -1;
    if (local_size)
        *local_size = 1;
    return PP_ERR(PP_ERR_UNSUPPORTED, "the local rank over MPI: pptune was built without MPI "
                                      "(set the launcher's local-rank variable)");
}

#endif
