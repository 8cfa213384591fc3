/* sim.c — the event-driven simulator: runs a schedule against a cost table (pp_sim_run) and the
 * unit cost table of the textbook figures (pp_cost_init_unit).
 *
 * Model. Each rank has one compute stream that executes its actions in program order:
 *   F / B / I / W  start at the rank's clock (its RECVs already waited for the data) and advance
 *              it (I and W, the split backward, take their own durations from the table);
 *   SEND       is posted, never blocks: the transfer is ready when the producing compute ended (the
 *              clock at the SEND) and runs on the directed link src->dst, first in first out:
 *              start = max(ready, link free), end = start + latency + bytes * inv_bw;
 *   RECV       blocks the rank: clock = max(clock, arrival); an overlapped pair (pp_action.overlap)
 *              has the RECVs of both its halves before its F (pp_sched_check), so it starts when
 *              both inputs are there and runs F then B, as PyTorch's simulator has it
 *              (torch/distributed/pipelining/_schedule_visualizer.py, add_schedule_op_spacing:
 *              an OVERLAP_F_B starts once every sub-action is ready and lasts F + B);
 *   REDUCE     is issued without blocking; it runs on the rank's reduce stream (FIFO per rank)
 *              once every participant has issued it and their reduce streams are free, for
 *              reduce[id]. The makespan includes reduce completion.
 * Execution order. A directed link has one sender, whose SENDs are issued in its program order,
 * so link FIFO resolves in program order even though ranks are not simulated in global time
 * order. A worklist runs each rank as far as it can; a RECV whose SEND has not run parks the rank
 * until that SEND wakes it. Cost O(actions + ranks), lookups by (pipe, stage, mb) are O(1).
 * Each rank's in-flight peaks (inflight.c's walks, with their step functions) and its last
 * compute or REDUCE end are taken as its actions run, so they need no pass of their own and
 * no spans.
 * Lanes (pp_sim_run_lanes): which action runs next, which RECV parks, when a REDUCE resolves
 * depend on the schedule only (a RECV waits on whether its SEND ran, never on a time), so one
 * pass runs K cost tables at once: every time is an array of K, each lane does the arithmetic
 * of a pass of its own in the same order (the same doubles), and the work that is not
 * arithmetic (the action walk, lookups, the checks) is done once for all K.
 * Not modelled: contention between different links sharing a NIC or switch, compute slowed by
 * concurrent communication, memory limits. Validation here is only what keeps the simulator
 * safe; pp_sched_check gives the full diagnosis. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sim_wait.h"

typedef struct {
    const pp_sched *s;
    const pp_cost *c;        /* [K] */
    pp_sim_result *out;      /* [K] */
    int K;                   /* lanes: cost tables run at once (times below: [... * K + lane]) */
    int D, S, N;
    size_t nk;               /* keys: n_pipes * S * N */
    /* data arrival of a message sent and not yet received: K doubles in a pool entry, the
     * entry of slot (RECV_F: the first nk, then RECV_B, by the receiving (pipe, stage, mb)) in
     * at[slot] from its SEND to its RECV, which returns it to the free stack. Entries in use
     * are the messages in flight, few next to the slots (2 x nk x K doubles, tens of MiB for a
     * 1T model's schedule, would be touched once each per pass) */
    int *at;                 /* [2 * nk] read only once sent */
    double *pool;            /* [cap_pool * K] */
    int *free_entry;         /* [cap_pool] the entries not in use, n_free of them */
    int n_pool, cap_pool, n_free;
    uint8_t *sent;           /* [2 * nk] the SEND of that slot has run */
    uint8_t *received;       /* [2 * nk] the RECV of that slot has run */
    double *link_free;       /* [D * D * K] when directed link src*D+dst is free again */
    double *clock;           /* [D * K] compute stream of each rank */
    double *transfer_end_k;  /* [K] last transfer's end */
    /* the lanes' cost tables, interleaved ([entry * K + lane]; a missing table: zeros) so that
     * one action's K durations are adjacent; with one lane the caller's own arrays */
    double *t_f, *t_b, *t_i, *t_w, *t_sbf, *t_sbb, *t_lat, *t_ibw, *t_red;
    uint8_t owned[9];        /* which of them were allocated here */
    double *busy, *last_end; /* [D * K] out[lane].busy, .last_end until finish() */
    int *pc;                 /* [D] next action */
    long *waiting;           /* [D] arrival slot a parked rank waits for, -1 when not parked */
    int *queue, head, count; /* ring of runnable ranks */
    uint8_t *queued;         /* [D] */
    /* reduces: index id * PP_REDUCE_MAX_RANKS + j for participant j */
    int *n_issued;      /* [n_reduces] */
    double *start_at;   /* [n_reduces * K] latest issue time so far */
    double *red_end;    /* [n_reduces * K] completion, once resolved */
    uint8_t *resolved;  /* [n_reduces] */
    int *prev, *next;   /* previous / next REDUCE on participant j's reduce stream, -1 */
    int *issue_idx;     /* action index of the REDUCE on participant j */
    double *issue_time; /* when participant j issued it (lane 0: spans have one lane) */
    int *last_red;      /* [D] last REDUCE issued by each rank, -1 */
    int *stack;         /* [n_reduces * MAX + 1] reduces to try to resolve */
    /* the in-flight walks of pp_sched_in_flight_peak and pp_sched_held_for_w_peak, done as each
     * rank runs its actions in program order (the same arithmetic in the same order) */
    double *units;          /* [n_pipes * S] pp_sched_stage_units of each stage */
    double *in_flight;      /* [D] */
    double *held;           /* [D] */
} sim;

/* ---- unit costs ------------------------------------------------------------------------------ */

pp_status pp_cost_init_unit(pp_cost *c, const pp_sched *s, double fb_ratio)
{
    memset(c, 0, sizeof *c);
    if (!(fb_ratio > 0) || !isfinite(fb_ratio))
        return PP_ERR(PP_ERR_INVALID, "the backward/forward cost ratio must be positive, got %g",
                      fb_ratio);
    if (s->layers < 1)
        return PP_ERR(PP_ERR_INVALID, "unit costs need the model's layer count, got %d", s->layers);
    size_t n = (size_t)s->n_pipes * s->stages_per_pipe;
    c->f = pp_calloc(n, sizeof *c->f);
    c->b = pp_calloc(n, sizeof *c->b);
    c->i = pp_calloc(n, sizeof *c->i);
    c->w = pp_calloc(n, sizeof *c->w);
    if (!c->f || !c->b || !c->i || !c->w) {
        pp_cost_fini(c);
        return PP_ERR_NOMEM;
    }
    double per_unit = (double)s->layers / s->ranks; /* L/D layers cost 1 */
    for (int p = 0; p < s->n_pipes; p++)
        for (int k = 0; k < s->stages_per_pipe; k++) {
            size_t i = (size_t)p * s->stages_per_pipe + k;
            c->f[i] = pp_sched_stage_layers(s, p, k) / per_unit;
            c->b[i] = fb_ratio * c->f[i];
            c->i[i] = c->w[i] = c->b[i] / 2; /* ratio 2: F = I = W, the Zero Bubble papers' */
        }
    return PP_OK;
}

/* Frees every array of the table (each must be NULL or come from malloc) and zeroes it. */
void pp_cost_fini(pp_cost *c)
{
    if (!c)
        return;
    free(c->f);
    free(c->b);
    free(c->i);
    free(c->w);
    free(c->send_bytes_f);
    free(c->send_bytes_b);
    free(c->latency);
    free(c->inv_bw);
    free(c->reduce);
    memset(c, 0, sizeof *c);
}

void pp_sim_result_fini(pp_sim_result *r)
{
    if (!r)
        return;
    free(r->busy);
    free(r->idle);
    free(r->peak_activations);
    free(r->peak_held_for_w);
    free(r->last_end);
    if (r->spans)
        for (int i = 0; i < r->n_ranks; i++)
            free(r->spans[i]);
    free(r->spans);
    memset(r, 0, sizeof *r);
}

/* ---- validation: only what keeps the simulation in bounds ------------------------------------ */

static pp_status bad(const pp_sched *s, int r, int i, const char *why)
{
    char what[128];
    pp_action_str(s, &s->ops[r][i], what, sizeof what);
    return PP_ERR(PP_ERR_CHECK,
                  "cannot simulate: rank %d, action %d (%s): %s (pp_sched_check gives the full "
                  "diagnosis)",
                  r, i, what, why);
}

static pp_status validate_action(const sim *x, int r, int i, uint8_t *issued)
{
    const pp_sched *s = x->s;
    const pp_action *a = &s->ops[r][i];
    if (a->op >= PP_OP__COUNT)
        return bad(s, r, i, "unknown action kind");
    for (int k = 0; k < x->K && pp_op_is_split_backward(a->op); k++)
        if (!x->c[k].i || !x->c[k].w)
            return bad(s, r, i,
                       "the cost table has no split-backward durations (pp_cost.i and .w; "
                       "pp_cost_init_unit fills them)");
    if (a->op == PP_OP_REDUCE) {
        if (a->stage < 0 || a->stage >= s->n_reduces)
            return bad(s, r, i, "no such REDUCE");
        int j = pp_reduce_participant(&s->reduces[a->stage], r);
        if (j < 0)
            return bad(s, r, i, "this rank is not a participant of the REDUCE");
        uint8_t *f = &issued[(size_t)a->stage * PP_REDUCE_MAX_RANKS + j];
        if (*f)
            return bad(s, r, i, "this rank issues the REDUCE twice");
        *f = 1;
        return PP_OK;
    }
    if (a->pipe >= s->n_pipes || a->stage < 0 || a->stage >= x->S || a->mb < 0 || a->mb >= x->N)
        return bad(s, r, i, "pipe, stage or micro-batch out of range");
    if (pp_op_is_comm(a->op)) {
        int ps = pp_action_peer_stage(a);
        if (ps >= x->S)
            return bad(s, r, i, "the last stage has no next stage");
        if (ps < 0)
            return bad(s, r, i, "the first stage has no previous stage");
    }
    return PP_OK;
}

static pp_status validate(const sim *x)
{
    const pp_sched *s = x->s;
    for (int p = 0; p < s->n_pipes; p++)
        for (int k = 0; k < x->S; k++) {
            int r = pp_sched_stage(s, p, k)->rank;
            if (r < 0 || r >= x->D)
                return PP_ERR(PP_ERR_CHECK,
                              "cannot simulate: stage %d of pipe %d is placed on rank %d, "
                              "expected 0..%d",
                              k, p, r, x->D - 1);
        }
    for (int id = 0; id < s->n_reduces; id++)
        for (int j = 0; j < s->reduces[id].n_ranks; j++)
            if (s->reduces[id].ranks[j] < 0 || s->reduces[id].ranks[j] >= x->D)
                return PP_ERR(PP_ERR_CHECK, "cannot simulate: REDUCE #%d lists rank %d", id,
                              s->reduces[id].ranks[j]);
    uint8_t *issued = pp_calloc((size_t)s->n_reduces * PP_REDUCE_MAX_RANKS + 1, 1);
    if (!issued)
        return PP_ERR_NOMEM;
    pp_status st = PP_OK;
    for (int r = 0; r < x->D && st == PP_OK; r++)
        for (int i = 0; i < s->n_ops[r] && st == PP_OK; i++)
            st = validate_action(x, r, i, issued);
    free(issued);
    return st;
}

/* ---- the run --------------------------------------------------------------------------------- */

static void wake(sim *x, int q)
{
    if (x->queued[q] || x->pc[q] >= x->s->n_ops[q])
        return;
    x->queued[q] = 1;
    x->queue[(x->head + x->count) % x->D] = q;
    x->count++;
}

static pp_span *span(sim *x, int r, int i)
{
    return x->out[0].spans ? &x->out[0].spans[r][i] : NULL; /* spans: one lane */
}

static const double *durations(const sim *x, int op)
{
    return op == PP_OP_F ? x->t_f : op == PP_OP_B ? x->t_b : op == PP_OP_I ? x->t_i : x->t_w;
}

/* A compute whose input comes from another rank must have received it: catches schedules that
 * were never lowered (no SEND/RECV), which would otherwise simulate as if links did not exist. */
static pp_status check_input(const sim *x, int r, int i, const pp_action *a)
{
    int fwd = a->op == PP_OP_F;
    int ns = pp_action_src_stage(a);
    if (ns < 0 || ns >= x->S || pp_sched_stage(x->s, a->pipe, ns)->rank == r)
        return PP_OK;
    size_t slot = (fwd ? 0 : x->nk) + pp_sched_key(x->s, a->pipe, a->stage, a->mb);
    if (x->received[slot])
        return PP_OK;
    return bad(x->s, r, i,
               "its input from another rank was never received (a schedule needs its SEND/RECV "
               "actions: pp_sched_lower_comms adds them)");
}

static pp_status compute(sim *x, int r, int i, const pp_action *a)
{
    PP_TRY(check_input(x, r, i, a));
    size_t st = (size_t)a->pipe * x->S + a->stage, K = (size_t)x->K;
    double *restrict clock = &x->clock[r * K], *restrict busy = &x->busy[r * K],
                    *restrict last = &x->last_end[r * K];
    const double *restrict dur = durations(x, a->op) + st * K;
    pp_span *sp = span(x, r, i); /* spans: one lane, before it moves */
    if (sp)
        *sp = (pp_span){clock[0], clock[0] + dur[0]};
    /* the lanes' loops hold no branch on spans, so that they vectorize */
    for (size_t k = 0; k < K; k++) {
        double d = dur[k];
        clock[k] += d;
        busy[k] += d;
        if (clock[k] > last[k])
            last[k] = clock[k];
    }
    /* the in-flight walks do not depend on the costs: lane 0's result, copied to the others
     * at the end */
    pp_sim_result *o = x->out;
    double u = x->units[st]; /* the walks with weight NULL: held = full (I frees nothing) */
    x->in_flight[r] = pp_in_flight_step(a->op, x->in_flight[r], u, u);
    x->held[r] = pp_held_for_w_step(a->op, x->held[r], u);
    if (x->in_flight[r] > o->peak_activations[r])
        o->peak_activations[r] = x->in_flight[r];
    if (x->held[r] > o->peak_held_for_w[r])
        o->peak_held_for_w[r] = x->held[r];
    return PP_OK;
}

/* A free pool entry (growing the pool by doubling), -1: out of memory. */
static int take_entry(sim *x)
{
    if (x->n_free > 0)
        return x->free_entry[--x->n_free];
    if (x->n_pool == x->cap_pool) {
        int cap = x->cap_pool ? 2 * x->cap_pool : 64;
        double *pool = realloc(x->pool, (size_t)cap * x->K * sizeof *pool);
        if (!pool)
            return -1;
        x->pool = pool;
        int *fe = realloc(x->free_entry, (size_t)cap * sizeof *fe);
        if (!fe)
            return -1;
        x->free_entry = fe;
        x->cap_pool = cap;
    }
    return x->n_pool++;
}

static pp_status send(sim *x, int r, int i, const pp_action *a)
{
    int fwd = a->op == PP_OP_SEND_F;
    int ps = pp_action_peer_stage(a);
    int dst = pp_sched_stage(x->s, a->pipe, ps)->rank;
    size_t st = (size_t)a->pipe * x->S + a->stage;
    size_t link = (size_t)r * x->D + dst;
    long slot = (long)((fwd ? 0 : x->nk) + pp_sched_key(x->s, a->pipe, ps, a->mb));
    size_t K = (size_t)x->K;
    const double *bytes_v = (fwd ? x->t_sbf : x->t_sbb) + st * K;
    const double *lat = x->t_lat + link * K, *ibw = x->t_ibw + link * K;
    const double *clock = &x->clock[r * K];
    if (x->sent[slot])
        return bad(x->s, r, i, "this message was sent before (each is sent once)");
    int e = take_entry(x);
    if (e < 0)
        return PP_ERR(PP_ERR_NOMEM, "out of memory simulating: %d messages in flight", x->n_pool);
    x->at[slot] = e;
    double *restrict link_free = &x->link_free[link * K];
    double *restrict arrival = &x->pool[(size_t)e * K], *restrict tend = x->transfer_end_k;
    double free0 = link_free[0]; /* for lane 0's span */
    for (size_t k = 0; k < K; k++) {
        double start = clock[k] > link_free[k] ? clock[k] : link_free[k];
        double end = start + lat[k] + bytes_v[k] * ibw[k]; /* a missing table's 0: 0 */
        link_free[k] = end;
        if (end > tend[k])
            tend[k] = end;
        arrival[k] = end;
    }
    pp_span *sp = span(x, r, i);
    if (sp)
        *sp = (pp_span){clock[0] > free0 ? clock[0] : free0, arrival[0]};
    x->sent[slot] = 1;
    x->out->cross_rank_transfers += dst != r;
    if (x->waiting[dst] == slot)
        wake(x, dst);
    return PP_OK;
}

/* Sets *parked when the data has not arrived yet (the rank parks on it). */
static pp_status recv(sim *x, int r, int i, const pp_action *a, int *parked)
{
    long slot =
        (long)((a->op == PP_OP_RECV_F ? 0 : x->nk) + pp_sched_key(x->s, a->pipe, a->stage, a->mb));
    *parked = !x->sent[slot];
    if (*parked) {
        x->waiting[r] = slot;
        return PP_OK;
    }
    if (x->received[slot])
        return bad(x->s, r, i, "this message was received before (each is received once)");
    x->waiting[r] = -1;
    x->received[slot] = 1;
    size_t K = (size_t)x->K;
    int e = x->at[slot];
    x->free_entry[x->n_free++] = e; /* read below, before any SEND can take it again */
    const double *restrict arrival = &x->pool[(size_t)e * K];
    double *restrict clock = &x->clock[r * K];
    pp_span *sp = span(x, r, i);
    if (sp)
        *sp = (pp_span){clock[0], arrival[0]};
    for (size_t k = 0; k < K; k++)
        if (arrival[k] > clock[k])
            clock[k] = arrival[k];
    return PP_OK;
}

/* A REDUCE runs once all participants issued it and, on each participant's reduce stream, the
 * REDUCE issued before it has completed. Resolving one may unblock the next on each stream. */
static void resolve(sim *x, int id0)
{
    const pp_sched *s = x->s;
    int n = 0;
    x->stack[n++] = id0;
    while (n > 0) {
        int id = x->stack[--n];
        const pp_reduce *red = &s->reduces[id];
        if (x->resolved[id] || x->n_issued[id] < red->n_ranks)
            continue;
        int ready = 1;
        for (int j = 0; j < red->n_ranks && ready; j++) {
            int p = x->prev[id * PP_REDUCE_MAX_RANKS + j];
            ready = p < 0 || x->resolved[p];
        }
        if (!ready)
            continue;
        x->resolved[id] = 1;
        size_t K = (size_t)x->K;
        for (size_t l = 0; l < K; l++) {
            double start = x->start_at[id * K + l];
            for (int j = 0; j < red->n_ranks; j++) {
                int p = x->prev[id * PP_REDUCE_MAX_RANKS + j];
                if (p >= 0 && x->red_end[p * K + l] > start)
                    start = x->red_end[p * K + l];
            }
            double end = start + x->t_red[id * K + l];
            x->red_end[id * K + l] = end;
            for (int j = 0; j < red->n_ranks; j++) {
                double *last = &x->last_end[red->ranks[j] * K + l];
                if (end > *last)
                    *last = end;
            }
        }
        for (int j = 0; j < red->n_ranks; j++) {
            int k = id * PP_REDUCE_MAX_RANKS + j;
            pp_span *sp = span(x, red->ranks[j], x->issue_idx[k]);
            if (sp)
                *sp = (pp_span){x->issue_time[k], x->red_end[id]};
            if (x->next[k] >= 0)
                x->stack[n++] = x->next[k];
        }
    }
}

static void issue(sim *x, int r, int i, int id)
{
    const pp_reduce *red = &x->s->reduces[id];
    int j = pp_reduce_participant(red, r);
    int k = id * PP_REDUCE_MAX_RANKS + j;
    size_t K = (size_t)x->K;
    x->issue_idx[k] = i;
    x->issue_time[k] = x->clock[r * K];
    int p = x->last_red[r];
    x->prev[k] = p;
    if (p >= 0)
        x->next[p * PP_REDUCE_MAX_RANKS + pp_reduce_participant(&x->s->reduces[p], r)] = id;
    x->last_red[r] = id;
    for (size_t l = 0; l < K; l++)
        if (x->clock[r * K + l] > x->start_at[id * K + l])
            x->start_at[id * K + l] = x->clock[r * K + l];
    x->n_issued[id]++;
    resolve(x, id);
}

static pp_status run_rank(sim *x, int r)
{
    const pp_sched *s = x->s;
    const pp_action *ops = s->ops[r];
    int n = s->n_ops[r];
    for (int i = x->pc[r]; i < n; i++) {
        const pp_action *a = &ops[i];
        switch (a->op) {
        case PP_OP_F:
        case PP_OP_B:
        case PP_OP_I:
        case PP_OP_W:
            PP_TRY(compute(x, r, i, a));
            break;
        case PP_OP_SEND_F:
        case PP_OP_SEND_B:
            PP_TRY(send(x, r, i, a));
            break;
        case PP_OP_RECV_F:
        case PP_OP_RECV_B: {
            int parked;
            PP_TRY(recv(x, r, i, a, &parked));
            if (parked) {
                x->pc[r] = i;
                return PP_OK;
            }
            break;
        }
        default:
            issue(x, r, i, a->stage);
            break;
        }
        x->pc[r] = i + 1;
    }
    return PP_OK;
}

/* A rank parked forever: name the wait cycle (RECVs wait for the rank of the sending stage). */
static pp_status report_stuck(sim *x)
{
    const pp_sched *s = x->s;
    int *waits = pp_calloc((size_t)x->D, sizeof *waits);
    if (!waits)
        return PP_ERR_NOMEM;
    for (int r = 0; r < x->D; r++) {
        waits[r] = -1;
        if (x->pc[r] < s->n_ops[r]) {
            const pp_action *a = &s->ops[r][x->pc[r]];
            waits[r] = pp_sched_stage(s, a->pipe, pp_action_peer_stage(a))->rank;
        }
    }
    pp_status st = pp_sched_deadlock_error(s, x->pc, waits);
    free(waits);
    return st;
}

/* Lane k's figures (o = &x->out[k]) once every action ran. */
static void finish_lane(sim *x, int k, pp_sim_result *o)
{
    const pp_sched *s = x->s;
    size_t K = (size_t)x->K;
    double makespan = x->transfer_end_k[k];
    for (int r = 0; r < x->D; r++)
        makespan = x->clock[r * K + k] > makespan ? x->clock[r * K + k] : makespan;
    for (int id = 0; id < s->n_reduces; id++)
        makespan = x->red_end[id * K + k] > makespan ? x->red_end[id * K + k] : makespan;
    if (k > 0) { /* the walks and the transfer count are lane 0's (the same for every lane) */
        memcpy(o->peak_activations, x->out->peak_activations, x->D * sizeof(double));
        memcpy(o->peak_held_for_w, x->out->peak_held_for_w, x->D * sizeof(double));
        o->cross_rank_transfers = x->out->cross_rank_transfers;
    }
    for (int r = 0; r < x->D; r++)
        o->busy[r] = x->busy[r * K + k], o->last_end[r] = x->last_end[r * K + k];
    double busy = 0, idle = 0;
    for (int r = 0; r < x->D; r++) {
        o->idle[r] = makespan - o->busy[r];
        busy += o->busy[r];
        idle += o->idle[r];
        o->actions += s->n_ops[r];
    }
    o->makespan = makespan;
    o->bubble_over_total = makespan > 0 ? idle / (x->D * makespan) : 0;
    o->bubble_over_ideal = busy > 0 ? idle / busy : 0;
}

static pp_status finish(sim *x)
{
    const pp_sched *s = x->s;
    for (int r = 0; r < x->D; r++)
        if (x->pc[r] < s->n_ops[r])
            return report_stuck(x);
    for (int id = 0; id < s->n_reduces; id++)
        if (!x->resolved[id])
            return PP_ERR(PP_ERR_DEADLOCK,
                          "deadlock: REDUCE #%d never runs (%d of %d participants issued it, "
                          "or the ranks' reduce streams order the REDUCEs in conflicting ways)",
                          id, x->n_issued[id], s->reduces[id].n_ranks);
    for (int k = 0; k < x->K; k++)
        finish_lane(x, k, &x->out[k]);
    return PP_OK;
}

static pp_status simulate(sim *x)
{
    PP_TRY(validate(x));
    for (int r = 0; r < x->D; r++) {
        x->waiting[r] = -1;
        x->last_red[r] = -1;
    }
    size_t nr = (size_t)x->s->n_reduces * PP_REDUCE_MAX_RANKS;
    for (size_t k = 0; k < nr; k++)
        x->prev[k] = x->next[k] = -1;
    for (int r = 0; r < x->D; r++)
        wake(x, r);
    while (x->count > 0) {
        int r = x->queue[x->head];
        x->head = (x->head + 1) % x->D;
        x->count--;
        x->queued[r] = 0;
        PP_TRY(run_rank(x, r));
    }
    return finish(x);
}

static pp_status alloc_result(const pp_sched *s, int want_spans, pp_sim_result *o)
{
    size_t D = (size_t)s->ranks;
    o->n_ranks = s->ranks;
    o->busy = pp_calloc(D, sizeof *o->busy);
    o->idle = pp_calloc(D, sizeof *o->idle);
    o->peak_activations = pp_calloc(D, sizeof *o->peak_activations);
    o->peak_held_for_w = pp_calloc(D, sizeof *o->peak_held_for_w);
    o->last_end = pp_calloc(D, sizeof *o->last_end);
    if (!o->busy || !o->idle || !o->peak_activations || !o->peak_held_for_w || !o->last_end)
        return PP_ERR_NOMEM;
    if (!want_spans)
        return PP_OK;
    o->spans = pp_calloc(D, sizeof *o->spans);
    if (!o->spans)
        return PP_ERR_NOMEM;
    for (size_t r = 0; r < D; r++) {
        o->spans[r] = pp_calloc((size_t)s->n_ops[r] + 1, sizeof **o->spans);
        if (!o->spans[r])
            return PP_ERR_NOMEM;
    }
    return PP_OK;
}

static void free_sim(sim *x)
{
    double *t[] = {x->t_f, x->t_b, x->t_i, x->t_w, x->t_sbf, x->t_sbb, x->t_lat, x->t_ibw, x->t_red};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (x->owned[i])
            free(t[i]);
    free(x->busy);
    free(x->last_end);
    void *p[] = {x->at, x->pool, x->free_entry, x->sent, x->transfer_end_k, x->received,  x->link_free,  x->clock,    x->pc,        x->waiting,    x->queue,    x->queued,
                 x->n_issued, x->start_at,  x->red_end,    x->resolved, x->prev,
                 x->next,     x->issue_idx, x->issue_time, x->last_red, x->stack,
                 x->units,    x->in_flight, x->held};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
}

/* The K lanes' table at byte offset off of pp_cost (n entries each), interleaved; with one
 * lane the caller's array itself (owned 0). NULL: out of memory. */
static double *lane_table(const sim *x, size_t off, size_t n, uint8_t *owned)
{
    size_t K = (size_t)x->K;
    const double *one;
    memcpy(&one, (const char *)&x->c[0] + off, sizeof one);
    if (K == 1 && one) {
        *owned = 0;
        return (double *)one;
    }
    double *t = pp_calloc(n * K + 1, sizeof *t);
    *owned = 1;
    for (size_t k = 0; t && k < K; k++) {
        const double *c;
        memcpy(&c, (const char *)&x->c[k] + off, sizeof c);
        for (size_t e = 0; c && e < n; e++)
            t[e * K + k] = c[e];
    }
    return t;
}

static int alloc_lane_tables(sim *x)
{
    size_t n_st = (size_t)x->s->n_pipes * x->S, DD = (size_t)x->D * x->D;
    const struct {
        double **to;
        size_t off, n;
    } tb[] = {{&x->t_f, offsetof(pp_cost, f), n_st},
              {&x->t_b, offsetof(pp_cost, b), n_st},
              {&x->t_i, offsetof(pp_cost, i), n_st},
              {&x->t_w, offsetof(pp_cost, w), n_st},
              {&x->t_sbf, offsetof(pp_cost, send_bytes_f), n_st},
              {&x->t_sbb, offsetof(pp_cost, send_bytes_b), n_st},
              {&x->t_lat, offsetof(pp_cost, latency), DD},
              {&x->t_ibw, offsetof(pp_cost, inv_bw), DD},
              {&x->t_red, offsetof(pp_cost, reduce), (size_t)x->s->n_reduces}};
    int ok = 1;
    for (size_t i = 0; i < sizeof tb / sizeof tb[0]; i++)
        ok &= (*tb[i].to = lane_table(x, tb[i].off, tb[i].n, &x->owned[i])) != NULL;
    x->busy = pp_calloc((size_t)x->D * x->K, sizeof *x->busy);
    x->last_end = pp_calloc((size_t)x->D * x->K, sizeof *x->last_end);
    return ok && x->busy && x->last_end;
}

static int alloc_sim(sim *x)
{
    if (!alloc_lane_tables(x))
        return 0;
    size_t D = (size_t)x->D, nr = (size_t)x->s->n_reduces + 1, K = (size_t)x->K;
    size_t nrj = nr * PP_REDUCE_MAX_RANKS;
    x->at = malloc(2 * x->nk * sizeof *x->at + 1); /* read only once sent */
    x->sent = pp_calloc(2 * x->nk, 1);
    x->transfer_end_k = pp_calloc(K, sizeof *x->transfer_end_k);
    x->received = pp_calloc(2 * x->nk, 1);
    x->link_free = pp_calloc(D * D * K, sizeof *x->link_free);
    x->clock = pp_calloc(D * K, sizeof *x->clock);
    x->pc = pp_calloc(D, sizeof *x->pc);
    x->waiting = pp_calloc(D, sizeof *x->waiting);
    x->queue = pp_calloc(D, sizeof *x->queue);
    x->queued = pp_calloc(D, 1);
    x->n_issued = pp_calloc(nr, sizeof *x->n_issued);
    x->start_at = pp_calloc(nr * K, sizeof *x->start_at);
    x->red_end = pp_calloc(nr * K, sizeof *x->red_end);
    x->resolved = pp_calloc(nr, 1);
    x->prev = pp_calloc(nrj, sizeof *x->prev);
    x->next = pp_calloc(nrj, sizeof *x->next);
    x->issue_idx = pp_calloc(nrj, sizeof *x->issue_idx);
    x->issue_time = pp_calloc(nrj, sizeof *x->issue_time);
    x->last_red = pp_calloc(D, sizeof *x->last_red);
    x->stack = pp_calloc(nrj + 1, sizeof *x->stack);
    size_t n_st = (size_t)x->s->n_pipes * x->S;
    x->units = pp_calloc(n_st, sizeof *x->units);
    x->in_flight = pp_calloc(D, sizeof *x->in_flight);
    x->held = pp_calloc(D, sizeof *x->held);
    for (size_t i = 0; x->units && i < n_st; i++)
        x->units[i] = pp_sched_stage_units(x->s, (int)(i / x->S), (int)(i % x->S));
    return x->units && x->in_flight && x->held && x->at && x->sent && x->transfer_end_k &&
           x->received && x->link_free && x->clock && x->pc &&
           x->waiting && x->queue && x->queued && x->n_issued && x->start_at && x->red_end &&
           x->resolved && x->prev && x->next && x->issue_idx && x->issue_time && x->last_red &&
           x->stack;
}

static pp_status run_lanes(const pp_sched *s, const pp_cost *c, int K, int want_spans,
                           pp_sim_result *out)
{
    for (int k = 0; k < K; k++)
        memset(&out[k], 0, sizeof out[k]);
    for (int k = 0; k < K; k++)
        if (!s || !c || !c[k].f || !c[k].b)
            return PP_ERR(PP_ERR_INVALID,
                          "pp_sim_run needs a schedule and a cost table with forward and "
                          "backward durations (pp_cost_init_unit gives the unit table)");
    if (s->ranks < 1 || s->microbatches < 1 || s->stages_per_pipe < 1 || s->n_pipes < 1 ||
        s->n_pipes > 2)
        return PP_ERR(PP_ERR_CHECK,
                      "cannot simulate a schedule of %d ranks, %d micro-batches, "
                      "%d stages per pipe and %d pipes",
                      s->ranks, s->microbatches, s->stages_per_pipe, s->n_pipes);
    if (s->ranks > PP_SIM_MAX_RANKS) /* before the ranks x ranks link table is allocated */
        return PP_ERR(PP_ERR_INVALID,
                      "ranks: expected at most %d to simulate, got %d (the links between ranks "
                      "are a ranks x ranks table)",
                      PP_SIM_MAX_RANKS, s->ranks);
    sim x = {.s = s, .c = c, .out = out, .K = K, .D = s->ranks, .S = s->stages_per_pipe,
             .N = s->microbatches};
    x.nk = (size_t)s->n_pipes * x.S * x.N;
    pp_status st = alloc_sim(&x) ? PP_OK : PP_ERR_NOMEM;
    for (int k = 0; k < K && st == PP_OK; k++)
        st = alloc_result(s, want_spans, &out[k]);
    if (st != PP_OK)
        st = PP_ERR(PP_ERR_NOMEM,
                    "out of memory simulating %d ranks and %zu (pipe, stage, mb) "
                    "keys",
                    x.D, x.nk);
    else
        st = simulate(&x);
    free_sim(&x);
    for (int k = 0; k < K && st != PP_OK; k++)
        pp_sim_result_fini(&out[k]);
    return st;
}

pp_status pp_sim_run(const pp_sched *s, const pp_cost *c, int want_spans, pp_sim_result *out)
{
    return run_lanes(s, c, 1, want_spans, out);
}

pp_status pp_sim_run_lanes(const pp_sched *s, const pp_cost *c, int k, pp_sim_result *out)
{
    if (k < 1 || k > PP_SIM_MAX_LANES)
        return PP_ERR(PP_ERR_INVALID, "lanes: expected 1 to %d cost tables, got %d",
                      PP_SIM_MAX_LANES, k);
    return run_lanes(s, c, k, 0, out);
}
