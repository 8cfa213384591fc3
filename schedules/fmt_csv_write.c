/* fmt_csv_write.c — a schedule as PyTorch pipelining's CSV, both of its forms (the reader and
 * the cell grammar are in fmt_csv.c, whose comment describes the format).
 *
 * The grammar is that of torch 2.15 (torch/distributed/pipelining/schedules.py: _Action,
 * _ComputationType, _PipelineScheduleRuntime._load_csv and _prepare_schedule_with_comms):
 *   compute_only   the F / B / I / W cells, and an overlapped pair as one cell
 *                  "(0F3;7B2)OVERLAP_F_B" (pp_action.overlap), which is how ScheduleDualPipeV
 *                  writes it; the runtime lowers the rest itself.
 *   compute_comms  the whole program, which the runtime runs as given and so checks: each
 *                  REDUCE_GRAD followed by its WAIT_REDUCE_GRAD before the next one starts
 *                  ("cannot start REDUCE_GRAD for stage X while stage Y has a pending
 *                  reduction"), and one WAIT_SEND_F / WAIT_SEND_B for every SEND_F / SEND_B
 *                  ("Pipeline sends at rank R have no matching wait"). Written as PyTorch's own
 *                  lowering places them (_add_reduce_grad without defer_reduce_grad_wait,
 *                  _add_wait_send): REDUCE_GRAD s and WAIT_REDUCE_GRAD s right after the last
 *                  backward (B or W) of stage s and the SEND that ships it; WAIT_SEND_F s m
 *                  right after the backward (B or I) of stage s and micro-batch m on this rank,
 *                  whose input gradient proves the next stage consumed the forward activation;
 *                  every other send's wait at the end of the row, in the order of the sends.
 *                  SEND cells are pptune's lowering (pp_sched_lower_comms): each SEND right
 *                  after the compute that produces it. RECV cells only post a receive (the
 *                  compute waits for it), and PyTorch's P2P ops carry no tag (stage.py builds
 *                  P2POp(dist.isend, tensor, peer, group)), so between two ranks a receive
 *                  takes the oldest unmatched send: a rank must post its receives from each
 *                  peer in the order that peer sends, or a forward's input lands in another
 *                  micro-batch's buffer (the run is wrong, not stuck). So each RECV is written
 *                  where pptune's lowering puts it (right before the compute that waits for it,
 *                  both of a pair's before the pair) unless the peer sent something earlier
 *                  that this rank has not received yet: then those RECVs are posted first, in
 *                  the peer's order (recv_in_order).
 * Lines end in "\n" (PyTorch's csv.writer ends them in "\r\n"; its reader takes both).
 * PyTorch's CSV has one pipeline and no gradient sync between replicas, so bidirectional
 * schedules and REDUCE are refused (csv_writable), rather than written with a sync gone. */
#include <stdlib.h>
#include <string.h>

#include "sim_wait.h"

/* Why s has no CSV form, as PP_ERR_INVALID; PP_OK when it has one. */
static pp_status csv_writable(const pp_sched *s)
{
    if (s->n_pipes != 1)
        return PP_ERR(PP_ERR_INVALID,
                      "%s is bidirectional (%d pipes): PyTorch pipelining's CSV holds one "
                      "pipeline, so it has no CSV form; use --format text or json",
                      s->kind, s->n_pipes);
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->n_ops[r]; i++)
            if (s->ops[r][i].op == PP_OP_REDUCE)
                return PP_ERR(PP_ERR_INVALID,
                              "rank %d, action %d (REDUCE #%d): PyTorch's CSV has no gradient "
                              "sync between replicas (its REDUCE_GRAD is one stage's "
                              "data-parallel reduce); use --format text or json",
                              r, i, (int)s->ops[r][i].stage);
    return PP_OK;
}

/* Every cross-rank transfer as the RECV its receiver posts, grouped by receiver (rows of
 * `first`), within a receiver by sender, within a sender in its program order: the order in
 * which PyTorch matches them. */
typedef struct {
    pp_action *recv; /* [n] the RECV matching each SEND */
    int *src;        /* [n] its sender */
    int *first;      /* [D + 1] receiver r's transfers are recv[first[r] .. first[r + 1]) */
    int *where;      /* [2 * keys] index in recv of the RECV of (pipe, stage, mb, direction) */
    int *next;       /* [D] while writing a row: the sender's first transfer not posted yet */
    int n;
} send_order;

/* One rank's row being written. */
typedef struct {
    const pp_sched *s;
    const send_order *so; /* NULL for the compute_only form */
    FILE *fp;
    int first;        /* no cell written yet on this line */
    int *bwd_left;    /* [S] backwards (B, W) of each stage still to come on this rank */
    int pending;      /* stage whose REDUCE_GRAD waits for the SEND after its last backward */
    pp_action *sends; /* [n_ops] this rank's sends without a wait yet, in order (op -1: waited) */
    int n_sends;
} row_writer;

/* "STAGE TYPE [MICROBATCH]" into buf (PyTorch's _Action.__repr__). */
static void action_cell(char *buf, size_t n, int stage, const char *type, int mb)
{
    if (mb >= 0)
        snprintf(buf, n, "%d%s%d", stage, type, mb);
    else
        snprintf(buf, n, "%d%s", stage, type);
}

static void put(row_writer *w, const char *cell)
{
    fprintf(w->fp, "%s%s", w->first ? "" : ",", cell);
    w->first = 0;
}

static void put_action(row_writer *w, int stage, const char *type, int mb)
{
    char c[48];
    action_cell(c, sizeof c, stage, type, mb);
    put(w, c);
}

static void put_compute(row_writer *w, const pp_action *a)
{
    put_action(w, a->stage, pp_op_name((pp_op_kind)a->op), a->mb);
}

/* An overlapped pair: "(0F3;7B2)OVERLAP_F_B". */
static void put_pair(row_writer *w, const pp_action *f, const pp_action *b)
{
    char cf[48], cb[48], c[112];
    action_cell(cf, sizeof cf, f->stage, pp_op_name((pp_op_kind)f->op), f->mb);
    action_cell(cb, sizeof cb, b->stage, pp_op_name((pp_op_kind)b->op), b->mb);
    snprintf(c, sizeof c, "(%s;%s)OVERLAP_F_B", cf, cb);
    put(w, c);
}

static void flush_reduce(row_writer *w)
{
    if (w->pending < 0)
        return;
    put_action(w, w->pending, "REDUCE_GRAD", -1);
    put_action(w, w->pending, "WAIT_REDUCE_GRAD", -1);
    w->pending = -1;
}

static const char *wait_type(int send_op)
{
    return send_op == PP_OP_SEND_F ? "WAIT_SEND_F" : "WAIT_SEND_B";
}

/* After a compute part of the row (an action, or half of a pair): the wait of this stage's
 * forward send of that micro-batch once its backward ran; a stage's last backward arms its
 * REDUCE_GRAD (PyTorch's _add_reduce_grad counts B and W per stage). */
static void after_compute(row_writer *w, const pp_action *a)
{
    if (a->op == PP_OP_B || a->op == PP_OP_I)
        for (int k = 0; k < w->n_sends; k++) {
            pp_action *q = &w->sends[k];
            if (q->op == PP_OP_SEND_F && q->stage == a->stage && q->mb == a->mb) {
                put_action(w, q->stage, wait_type(q->op), q->mb);
                q->op = 0xff;
            }
        }
    if ((a->op == PP_OP_B || a->op == PP_OP_W) && --w->bwd_left[a->stage] == 0)
        w->pending = a->stage;
}

static size_t recv_slot(const pp_sched *s, const pp_action *recv)
{
    return pp_sched_key(s, recv->pipe, recv->stage, recv->mb) * 2 + (recv->op == PP_OP_RECV_B);
}

static void send_order_fini(send_order *so)
{
    free(so->recv);
    free(so->src);
    free(so->first);
    free(so->where);
    free(so->next);
}

/* Fills so from s's SEND actions (pp_sched_check: each has its RECV on the peer). */
static pp_status send_order_init(send_order *so, const pp_sched *s)
{
    size_t D = (size_t)s->ranks, keys = (size_t)s->n_pipes * s->stages_per_pipe * s->microbatches;
    memset(so, 0, sizeof *so);
    for (int q = 0; q < s->ranks; q++)
        for (int i = 0; i < s->n_ops[q]; i++)
            so->n += pp_op_is_send(s->ops[q][i].op);
    so->recv = pp_calloc((size_t)so->n + 1, sizeof *so->recv);
    so->src = pp_calloc((size_t)so->n + 1, sizeof *so->src);
    so->first = pp_calloc(D + 1, sizeof *so->first);
    so->where = pp_calloc(2 * keys, sizeof *so->where);
    so->next = pp_calloc(D, sizeof *so->next);
    if (!so->recv || !so->src || !so->first || !so->where || !so->next) {
        send_order_fini(so);
        return PP_ERR_NOMEM;
    }
    for (int q = 0; q < s->ranks; q++) /* counting sort by receiver, stable */
        for (int i = 0; i < s->n_ops[q]; i++)
            if (pp_op_is_send(s->ops[q][i].op))
                so->first[pp_sched_implied_peer(s, &s->ops[q][i]) + 1]++;
    for (size_t r = 0; r < D; r++)
        so->first[r + 1] += so->first[r];
    for (size_t r = 0; r < D; r++)
        so->next[r] = so->first[r];
    memset(so->where, 0xff, 2 * keys * sizeof *so->where); /* -1: no SEND brings it */
    for (int q = 0; q < s->ranks; q++)
        for (int i = 0; i < s->n_ops[q]; i++) {
            const pp_action *a = &s->ops[q][i];
            if (!pp_op_is_send(a->op))
                continue;
            int dst = pp_sched_implied_peer(s, a), k = so->next[dst]++;
            so->recv[k] = (pp_action){.op = (uint8_t)pp_op_mate(a->op),
                                      .pipe = a->pipe,
                                      .stage = pp_action_peer_stage(a),
                                      .mb = a->mb,
                                      .peer = q};
            so->src[k] = q;
            so->where[recv_slot(s, &so->recv[k])] = k;
        }
    return PP_OK;
}

/* A RECV of rank r: first every receive from the same sender that the sender sends before it
 * and r has not posted yet, then it (unless it went out with an earlier one); see the file
 * comment. */
static void recv_in_order(row_writer *w, int r, const pp_action *a)
{
    const send_order *so = w->so;
    int k = so->where[recv_slot(w->s, a)];
    if (k < so->first[r] || k >= so->first[r + 1]) { /* no SEND of it: as it is */
        put_action(w, a->stage, pp_op_name((pp_op_kind)a->op), a->mb);
        return;
    }
    int q = so->src[k];
    if (so->next[q] < 0) { /* the sender's first transfer to r */
        int j = so->first[r];
        while (so->src[j] != q)
            j++;
        so->next[q] = j;
    }
    for (; so->next[q] <= k; so->next[q]++) {
        const pp_action *x = &so->recv[so->next[q]];
        put_action(w, x->stage, pp_op_name((pp_op_kind)x->op), x->mb);
    }
}

static void write_row(row_writer *w, int r, int comms)
{
    const pp_sched *s = w->s;
    w->first = 1;
    w->pending = -1;
    w->n_sends = 0;
    if (comms)
        for (int q = 0; q < s->ranks; q++)
            w->so->next[q] = -1;
    for (int i = 0; i < s->n_ops[r]; i++) {
        const pp_action *a = &s->ops[r][i];
        if (comms && !pp_op_is_send(a->op))
            flush_reduce(w);
        if (!comms && !pp_op_is_compute(a->op))
            continue;
        if (a->overlap && i + 1 < s->n_ops[r]) { /* pp_sched_check: the B follows its F */
            put_pair(w, a, &a[1]);
            if (comms) {
                after_compute(w, a);
                after_compute(w, &a[1]);
            }
            i++;
            continue;
        }
        if (pp_op_is_compute(a->op)) {
            put_compute(w, a);
            if (comms)
                after_compute(w, a);
            continue;
        }
        if (pp_op_is_recv(a->op)) {
            recv_in_order(w, r, a);
            continue;
        }
        put_action(w, a->stage, pp_op_name((pp_op_kind)a->op), a->mb);
        if (pp_op_is_send(a->op))
            w->sends[w->n_sends++] = *a;
    }
    if (comms) {
        flush_reduce(w);
        for (int k = 0; k < w->n_sends; k++)
            if (w->sends[k].op != 0xff)
                put_action(w, w->sends[k].stage, wait_type(w->sends[k].op), w->sends[k].mb);
    }
    fputc('\n', w->fp);
}

static pp_status write_csv(const pp_sched *s, int comms, FILE *fp)
{
    PP_TRY(csv_writable(s));
    int most = 1;
    for (int r = 0; r < s->ranks; r++)
        most = s->n_ops[r] > most ? s->n_ops[r] : most;
    send_order so = {0};
    if (comms)
        PP_TRY(send_order_init(&so, s));
    row_writer w = {.s = s, .so = comms ? &so : NULL, .fp = fp};
    w.bwd_left = pp_calloc((size_t)s->stages_per_pipe, sizeof *w.bwd_left);
    w.sends = pp_calloc((size_t)most, sizeof *w.sends);
    pp_status st = w.bwd_left && w.sends ? PP_OK : PP_ERR_NOMEM;
    for (int r = 0; r < s->ranks && st == PP_OK; r++) {
        for (int k = 0; k < s->stages_per_pipe; k++)
            w.bwd_left[k] = s->microbatches;
        write_row(&w, r, comms);
    }
    free(w.bwd_left);
    free(w.sends);
    send_order_fini(&so);
    if (st == PP_OK && ferror(fp))
        return PP_ERR(PP_ERR_IO, "writing the CSV form of the schedule failed");
    return st;
}

pp_status pp_sched_write_csv(const pp_sched *s, FILE *fp)
{
    return write_csv(s, 1, fp);
}

pp_status pp_sched_write_csv_compute(const pp_sched *s, FILE *fp)
{
    return write_csv(s, 0, fp);
}
