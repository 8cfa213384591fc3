/* executor_run.c — one rank's step, on its own thread: load the micro-batches' tokens, walk
 * the rank's action list, then synchronise gradients and step the optimizer
 * (executor_sync.c). Every action is timed.
 *
 * Buffers between actions live in the rank's slot table, keyed by (pipe, stage, mb, kind):
 *   X_IN  input activation of F(p,s,m): from RECV_F, or handed over by F(p,s-1,m) on this rank
 *   X_OUT output of F(p,s,m) waiting for SEND_F
 *   DY    gradient of the output of B(p,s,m): from RECV_B, or handed over by B(p,s+1,m)
 *   DX    input gradient of B(p,s,m) waiting for SEND_B
 * Each is io_bytes of PP_MEM_COMM, the memory plan's next buffer in the rank's arena
 * (executor_arena.c), given back as soon as it is consumed.
 * A split backward's I takes and gives the same buffers as B; its W touches none (what it
 * needs stays in the stage between them: pp_rt_stage_backward_input).
 * A hop between two stages of one rank is such a hand-over and never reaches the transport.
 *
 * Not here: the meaning of the actions beyond this wiring (pp_sched.h), the numerics (stage).
 */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "executor.h"

static void **slot_at(pp_rt_executor *ex, rank_state *rs, int pipe, int stage, int mb, int kind)
{
    size_t i = (((size_t)pipe * ex->S + stage) * ex->N + mb) * SLOT__COUNT + kind;
    return &rs->slot[i];
}

static const char *const slot_names[SLOT__COUNT] = {"input activation", "output activation",
                                                    "output gradient", "input gradient"};

static pp_status slot_put(pp_rt_executor *ex, rank_state *rs, const pp_action *a, int stage,
                          int kind, void *buf)
{
    void **s = slot_at(ex, rs, a->pipe, stage, a->mb, kind);
    if (*s)
        return PP_ERR(PP_ERR_CHECK, "%s of pipe %d stage %d mb %d produced twice", slot_names[kind],
                      a->pipe, stage, (int)a->mb);
    *s = buf;
    return PP_OK;
}

static pp_status slot_take(pp_rt_executor *ex, rank_state *rs, const pp_action *a, int kind,
                           void **buf)
{
    void **s = slot_at(ex, rs, a->pipe, a->stage, a->mb, kind);
    if (!*s)
        return PP_ERR(PP_ERR_CHECK, "%s %s pipe %d stage %d mb %d: its %s is not on this rank",
                      pp_op_name((pp_op_kind)a->op),
                      pp_op_is_compute(a->op) ? "of" : "for", a->pipe, (int)a->stage,
                      (int)a->mb, slot_names[kind]);
    *buf = *s;
    *s = NULL;
    return PP_OK;
}

/* A tensor between stages: the memory plan's next buffer (executor_arena.c). */
static pp_status comm_alloc(pp_rt_executor *ex, rank_state *rs, void **out)
{
    return pp_ex_alloc(rs, ex->io_bytes, PP_MEM_COMM, out);
}

static void comm_free(pp_rt_executor *ex, rank_state *rs, void *p)
{
    pp_ex_free(rs, p, ex->io_bytes, PP_MEM_COMM);
}

/* The tokens of a sequence this rank holds, Tl of them at `at`: the whole row, or under
 * context parallelism its two chunks (stage_cp.c: chunks c and 2 CP - 1 - c of cp rank c). */
static void copy_local(const pp_rt_executor *ex, int c, int32_t *at, const int32_t *row)
{
    size_t L = (size_t)ex->Tl / 2;
    if (ex->CP == 1) {
        memcpy(at, row, (size_t)ex->T * sizeof(int32_t));
        return;
    }
    memcpy(at, row + (size_t)c * L, L * sizeof(int32_t));
    memcpy(at + L, row + (size_t)(2 * ex->CP - 1 - c) * L, L * sizeof(int32_t));
}

/* The step's rows for this rank's first / last stages: micro-batch m of data replica k
 * (replica / CP) is rows (k*N + m)*B .. +B of the batch; inputs are a row's first T tokens,
 * targets its last T, of which the rank keeps its own (copy_local). */
static pp_status load_tokens(pp_rt_executor *ex, rank_state *rs)
{
    size_t w = (size_t)ex->T + 1;
    int k = rs->replica / ex->CP, c = rs->replica % ex->CP;
    for (int m = 0; m < ex->N; m++)
        for (int b = 0; b < ex->B; b++) {
            const int32_t *row = ex->batch + ((size_t)(k * ex->N + m) * ex->B + b) * w;
            size_t at = ((size_t)m * ex->B + b) * ex->Tl;
            if (rs->tok) /* host memory (executor.c: tokens_alloc) */
                copy_local(ex, c, rs->tok + at, row);
            if (rs->tgt)
                copy_local(ex, c, rs->tgt + at, row + 1);
        }
    return PP_OK;
}

static pp_status do_forward(pp_rt_executor *ex, rank_state *rs, const pp_action *a)
{
    int s = a->stage, m = a->mb, first = s == 0, last = s == ex->S - 1;
    pp_rt_stage *st = ex_stage(ex, rs->replica, rs->tpr, a->pipe, s);
    size_t tok_at = (size_t)m * ex->B * ex->Tl;
    void *x_in = NULL, *x_out = NULL;
    if (!first)
        PP_TRY(slot_take(ex, rs, a, SLOT_X_IN, &x_in));
    pp_status e = last ? PP_OK : comm_alloc(ex, rs, &x_out);
    if (e != PP_OK) {
        comm_free(ex, rs, x_in);
        return e;
    }
    float loss = 0;
    e = pp_rt_stage_forward(st, m, first ? rs->tok + tok_at : NULL, x_in,
                                      last ? rs->tgt + tok_at : NULL, x_out, last ? &loss : NULL);
    comm_free(ex, rs, x_in);
    if (e != PP_OK) {
        comm_free(ex, rs, x_out);
        return pp_err_trace(e, __FILE__, __LINE__);
    }
    rs->aux += (float)pp_rt_stage_take_aux_loss(st);
    if (last) {
        if (rs->tpr == 0) /* every tensor rank has the same loss (all-reduced) */
            ex->losses[(size_t)rs->replica * ex->N + m] = loss;
        return PP_OK;
    }
    int next = pp_action_dst_stage(a);
    if (ex_rank_of(ex, a->pipe, next) == rs->r) /* local hop: hand the buffer over */
        e = slot_put(ex, rs, a, next, SLOT_X_IN, x_out);
    else
        e = slot_put(ex, rs, a, s, SLOT_X_OUT, x_out);
    if (e != PP_OK)
        comm_free(ex, rs, x_out);
    return e;
}

/* B, or a split backward's I (the same wiring: it sends the input gradient like B; the
 * stage keeps what the weight gradients need until the W of the same stage and mb). */
static pp_status do_backward(pp_rt_executor *ex, rank_state *rs, const pp_action *a)
{
    int s = a->stage, first = s == 0, last = s == ex->S - 1;
    pp_rt_stage *st = ex_stage(ex, rs->replica, rs->tpr, a->pipe, s);
    void *dy = NULL, *dx = NULL;
    if (!last)
        PP_TRY(slot_take(ex, rs, a, SLOT_DY, &dy));
    pp_status e = first ? PP_OK : comm_alloc(ex, rs, &dx);
    if (e != PP_OK) {
        comm_free(ex, rs, dy);
        return e;
    }
    /* d(step loss)/d(micro-batch mean loss): the step's loss is the mean of dp*N of them. */
    float scale = 1.0f / (float)(ex->N * ex->dp);
    e = a->op == PP_OP_I ? pp_rt_stage_backward_input(st, a->mb, dy, dx, scale)
                         : pp_rt_stage_backward(st, a->mb, dy, dx, scale);
    comm_free(ex, rs, dy);
    if (e != PP_OK) {
        comm_free(ex, rs, dx);
        return pp_err_trace(e, __FILE__, __LINE__);
    }
    if (first)
        return PP_OK;
    int prev = pp_action_dst_stage(a);
    if (ex_rank_of(ex, a->pipe, prev) == rs->r)
        e = slot_put(ex, rs, a, prev, SLOT_DY, dx);
    else
        e = slot_put(ex, rs, a, s, SLOT_DX, dx);
    if (e != PP_OK)
        comm_free(ex, rs, dx);
    return e;
}

/* W: the weight gradients its I left, local to the rank (no buffer in, none out). */
static pp_status do_weight(pp_rt_executor *ex, rank_state *rs, const pp_action *a)
{
    return pp_rt_stage_backward_weight(ex_stage(ex, rs->replica, rs->tpr, a->pipe, a->stage),
                                       a->mb);
}

static pp_status do_recv(pp_rt_executor *ex, rank_state *rs, const pp_action *a, int fwd)
{
    void *buf = NULL;
    PP_TRY(comm_alloc(ex, rs, &buf));
    int peer = ex_global(ex, rs->replica, a->peer, rs->tpr);
    uint64_t tag = pp_transport_tag(a->pipe, a->stage, a->mb, !fwd);
    pp_status e = pp_ex_recv(ex, rs, peer, tag, buf, ex->io_bytes);
    if (e == PP_OK)
        e = slot_put(ex, rs, a, a->stage, fwd ? SLOT_X_IN : SLOT_DY, buf);
    if (e != PP_OK)
        comm_free(ex, rs, buf);
    return e;
}

static pp_status do_send(pp_rt_executor *ex, rank_state *rs, const pp_action *a, int fwd)
{
    void *buf = NULL;
    PP_TRY(slot_take(ex, rs, a, fwd ? SLOT_X_OUT : SLOT_DX, &buf));
    int peer = ex_global(ex, rs->replica, a->peer, rs->tpr);
    /* tagged with the stage that receives it */
    uint64_t tag = pp_transport_tag(a->pipe, pp_action_peer_stage(a), a->mb, !fwd);
    pp_status e = pp_ex_send(ex, rs, peer, tag, buf, ex->io_bytes);
    comm_free(ex, rs, buf);
    return e;
}

/* An overlapped pair (pp_action.overlap: DualPipeV's F and the B after it) runs as its F, then
 * its B: both inputs have arrived by then (its RECVs come first), and overlapping the two on a
 * GPU's streams, DualPipe's gain, is not something this executor does. */
static pp_status do_action_in(pp_rt_executor *ex, rank_state *rs, const pp_action *a)
{
    switch ((pp_op_kind)a->op) {
    case PP_OP_F:
        return do_forward(ex, rs, a);
    case PP_OP_B:
    case PP_OP_I:
        return do_backward(ex, rs, a);
    case PP_OP_W:
        return do_weight(ex, rs, a);
    case PP_OP_RECV_F:
        return do_recv(ex, rs, a, 1);
    case PP_OP_RECV_B:
        return do_recv(ex, rs, a, 0);
    case PP_OP_SEND_F:
        return do_send(ex, rs, a, 1);
    case PP_OP_SEND_B:
        return do_send(ex, rs, a, 0);
    case PP_OP_REDUCE:
        return pp_ex_post_reduce(ex, rs, a->stage);
    default:
        break;
    }
    return PP_ERR(PP_ERR_CHECK, "unknown action kind %d", (int)a->op);
}

/* Under gradient sharding a backward writes into its stage's whole gradient, opened before
 * anything of the action is allocated and closed after it (executor_zero2.c). */
static pp_status do_action(pp_rt_executor *ex, rank_state *rs, const pp_action *a)
{
    PP_TRY(pp_ex_z2_open(ex, rs, a));
    PP_TRY(do_action_in(ex, rs, a));
    return pp_ex_z2_close(ex, rs, a);
}

static pp_status run_rank(pp_rt_executor *ex, rank_state *rs)
{
    PP_TRY(pp_ex_rank_enter(ex, rs));
    PP_TRY(pp_ex_marks_begin(ex, rs));
    pp_ex_arena_begin(rs);
    PP_TRY(pp_ex_z2_begin(ex, rs));
    for (int p = 0; p < ex->P; p++)
        for (int s = 0; s < ex->S; s++)
            if (ex_rank_of(ex, p, s) == rs->r)
                pp_rt_stage_zero_grad(ex_stage(ex, rs->replica, rs->tpr, p, s));
    PP_TRY(load_tokens(ex, rs));
    rs->tp_seq = 0;
    rs->cp_sent = rs->cp_received = 0;
    rs->ep_seq = 0;
    rs->aux = 0.0f;
    rs->tp_seconds = rs->tp_bytes = 0;
    const pp_sched *sc = ex->sched;
    pp_rt_span *span = ex->spans[rs->g];
    for (int i = 0; i < sc->n_ops[rs->r]; i++) {
        const pp_action *a = &sc->ops[rs->r][i];
        span[i].start = pp_now() - ex->t0;
        pp_status e = pp_ex_mark(rs, ex_mark_action(i, 0));
        if (e == PP_OK)
            e = do_action(ex, rs, a);
        if (e == PP_OK)
            e = pp_ex_mark(rs, ex_mark_action(i, 1));
        span[i].end = pp_now() - ex->t0;
        if (e != PP_OK) {
            char what[96];
            pp_action_str(sc, a, what, sizeof what);
            /* keep the cause, say where it happened */
            char why[768];
            snprintf(why, sizeof why, "%s", pp_err_msg());
            return PP_ERR(e, "action %d (%s): %s", i, what, why);
        }
    }
    PP_TRY(pp_ex_sync_and_update(ex, rs));
    PP_TRY(pp_ex_arena_end(rs)); /* every buffer of the plan taken, and given back */
    PP_TRY(pp_transport_flush(ex->tp, rs->g));
    PP_TRY(pp_ex_marks_apply(ex, rs));
    ex->tp_seconds[rs->g] = rs->tp_seconds;
    ex->tp_bytes[rs->g] = rs->tp_bytes;
    if (ex->self >= 0)
        PP_TRY(pp_ex_share_results(ex, rs));
    return PP_OK;
}

void *pp_ex_rank_main(void *arg)
{
    pp_ex_thread_arg *ta = arg;
    pp_rt_executor *ex = ta->ex;
    rank_state *rs = &ex->rk[ta->g];
    pp_err_clear();
    pp_status st = run_rank(ex, rs);
    if (st != PP_OK) {
        rs->st = st;
        snprintf(rs->err, sizeof rs->err, "%s", pp_err_msg());
        int none = -1;
        /* the first failure is the cause; the others are ranks woken by the abort */
        atomic_compare_exchange_strong(&ex->failed, &none, rs->g);
        /* In-process, wake the other threads. A process transport's abort ends the whole job
         * (MPI_Abort): the caller aborts it after it has reported this error. */
        if (ex->self < 0)
            pp_transport_abort(ex->tp);
    }
    return NULL;
}
