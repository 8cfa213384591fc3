/* sched.c — the schedule IR: construction, layer splits, the builder, communication lowering.
 * Generators live in gen_*.c, checks in check.c, simulation in sim.c, formats in fmt_*.c. */
#include "pp_sched.h"

#include <stdlib.h>
#include <string.h>

/* Llama 3's shorthand: one layer fewer on the first and last stage. */
static pp_status split_uneven(int layers, int stages, int *first, int *last)
{
    if (stages < 3)
        return PP_ERR(PP_ERR_INVALID,
                      "an uneven split (one layer fewer on the first and last stage) needs "
                      "at least 3 stages, got %d",
                      stages);
    if ((layers + 2) % stages != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "an uneven split needs layers + 2 divisible by the stages: %d + 2 is "
                      "not a multiple of %d",
                      layers, stages);
    int per = (layers + 2) / stages;
    if (per < 2)
        return PP_ERR(PP_ERR_INVALID, "an uneven split of %d layers over %d stages leaves "
                                      "the first stage empty", layers, stages);
    *first = *last = per - 1;
    return PP_OK;
}

/* First and/or last stage counts given: the stages not given share the rest evenly. */
static pp_status split_ends(int layers, int stages, int A, int Z, int *per)
{
    if (A < 0 || Z < 0 || A > layers || Z > layers)
        return PP_ERR(PP_ERR_INVALID,
                      "first- and last-stage layers must be between 1 and the %d layers, got "
                      "%d and %d",
                      layers, A, Z);
    if (stages == 1)
        return (A == 0 || A == layers) && (Z == 0 || Z == layers)
                   ? PP_OK
                   : PP_ERR(PP_ERR_INVALID,
                            "one stage holds all %d layers: first/last-stage layers %d/%d do "
                            "not fit it",
                            layers, A, Z);
    int rest = layers - A - Z;
    int others = stages - (A > 0) - (Z > 0); /* stages that share the rest */
    if (others == 0) {
        if (rest != 0)
            return PP_ERR(PP_ERR_INVALID,
                          "2 stages of %d layers: the first- and last-stage layers must add up "
                          "to %d, got %d + %d",
                          layers, layers, A, Z);
        return PP_OK;
    }
    if (rest < others || rest % others != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "first-stage %d and last-stage %d layers leave %d of the %d layers for "
                      "the other %d stages: expected a positive multiple of %d",
                      A, Z, rest, layers, others, others);
    *per = rest / others;
    return PP_OK;
}

pp_status pp_sched_split_layers(int layers, int stages, const pp_sched_split *split, int *begin)
{
    if (stages < 1)
        return PP_ERR(PP_ERR_INVALID, "a pipeline needs at least one stage, got %d", stages);
    if (layers < stages)
        return PP_ERR(PP_ERR_INVALID, "%d layers cannot fill %d stages: every stage needs a layer",
                      layers, stages);
    int A = 0, Z = 0, per = 0;
    if (pp_sched_split_is_even(split)) {
        if (layers % stages != 0)
            return PP_ERR(PP_ERR_INVALID,
                          "%d layers do not split evenly over %d stages (use a layer count that "
                          "is a multiple of the stages, --uneven, or first/last-stage layers)",
                          layers, stages);
        per = layers / stages;
    } else if (split->uneven) {
        if (split->first || split->last)
            return PP_ERR(PP_ERR_INVALID, "uneven is a shorthand for first/last-stage layers: "
                                          "give one or the other, not both");
        PP_TRY(split_uneven(layers, stages, &A, &Z));
        per = A + 1;
    } else {
        A = split->first;
        Z = split->last;
        PP_TRY(split_ends(layers, stages, A, Z, &per));
    }
    if (!begin)
        return PP_OK;
    begin[0] = 0;
    for (int s = 0; s < stages; s++) {
        int n = per;
        if (s == 0 && A)
            n = A;
        else if (s == stages - 1 && Z)
            n = Z;
        begin[s + 1] = begin[s] + n;
    }
    if (stages == 1)
        begin[1] = layers;
    return PP_OK;
}

pp_status pp_sched_budget_check(int ranks, int microbatches, int chunks)
{
    if (ranks > PP_SCHED_MAX_RANKS)
        return PP_ERR(PP_ERR_INVALID, "ranks: expected at most %d, got %d", PP_SCHED_MAX_RANKS,
                      ranks);
    long long visits = (long long)ranks * chunks * microbatches;
    if (ranks >= 1 && chunks >= 1 && microbatches >= 1 && visits > PP_SCHED_MAX_VISITS)
        return PP_ERR(PP_ERR_INVALID,
                      "ranks x chunks x microbatches = %d x %d x %d = %lld stage visits, more "
                      "than a schedule may have (%d)",
                      ranks, chunks, microbatches, visits, PP_SCHED_MAX_VISITS);
    return PP_OK;
}

/* Stage k of each pipe holds layers [begin[k], begin[k + 1]). */
static void set_layers(pp_sched *s, const int *begin)
{
    for (int p = 0; p < s->n_pipes; p++)
        for (int k = 0; k < s->stages_per_pipe; k++) {
            pp_stage *g = pp_sched_stage(s, p, k);
            g->layer_begin = begin[k];
            g->layer_end = begin[k + 1];
        }
}

pp_status pp_sched_create(const char *kind, int ranks, int microbatches, int chunks, int n_pipes,
                          int layers, const pp_sched_split *split, pp_sched **out)
{
    *out = NULL;
    if (ranks < 1)
        return PP_ERR(PP_ERR_INVALID, "ranks must be at least 1, got %d", ranks);
    if (microbatches < 1)
        return PP_ERR(PP_ERR_INVALID, "micro-batches must be at least 1, got %d", microbatches);
    if (chunks < 1)
        return PP_ERR(PP_ERR_INVALID, "chunks per rank must be at least 1, got %d", chunks);
    if (n_pipes != 1 && n_pipes != 2)
        return PP_ERR(PP_ERR_INVALID, "a schedule has 1 or 2 pipes, got %d", n_pipes);
    if (layers < 0)
        return PP_ERR(PP_ERR_INVALID, "layers must be positive, got %d", layers);
    PP_TRY(pp_sched_budget_check(ranks, microbatches, chunks)); /* before any allocation */
    int S = chunks * ranks;
    int L = layers ? layers : S;
    int *begin = pp_calloc((size_t)S + 1, sizeof *begin);
    if (!begin)
        return PP_ERR_NOMEM;
    pp_status st = pp_sched_split_layers(L, S, split, begin);
    if (st != PP_OK) {
        free(begin);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    pp_sched *s = pp_calloc(1, sizeof *s);
    if (!s) {
        free(begin);
        return PP_ERR_NOMEM;
    }
    snprintf(s->kind, sizeof s->kind, "%s", kind ? kind : "custom");
    s->ranks = ranks;
    s->microbatches = microbatches;
    s->chunks = chunks;
    s->n_pipes = n_pipes;
    s->stages_per_pipe = S;
    s->layers = L;
    s->stages = pp_calloc((size_t)n_pipes * S, sizeof *s->stages);
    s->mb_pipe = pp_calloc((size_t)microbatches, 1);
    s->ops = pp_calloc((size_t)ranks, sizeof *s->ops);
    s->n_ops = pp_calloc((size_t)ranks, sizeof *s->n_ops);
    s->cap_ops = pp_calloc((size_t)ranks, sizeof *s->cap_ops);
    if (!s->stages || !s->mb_pipe || !s->ops || !s->n_ops || !s->cap_ops) {
        free(begin);
        pp_sched_destroy(s);
        return PP_ERR_NOMEM;
    }
    for (int p = 0; p < n_pipes; p++)
        for (int k = 0; k < S; k++)
            pp_sched_stage(s, p, k)->rank = -1;
    set_layers(s, begin);
    free(begin);
    *out = s;
    return PP_OK;
}

pp_status pp_sched_resplit(pp_sched *s, const pp_sched_split *split)
{
    int *begin = pp_calloc((size_t)s->stages_per_pipe + 1, sizeof *begin);
    if (!begin)
        return PP_ERR_NOMEM;
    pp_status st = pp_sched_split_layers(s->layers, s->stages_per_pipe, split, begin);
    if (st == PP_OK)
        set_layers(s, begin);
    free(begin);
    return st == PP_OK ? PP_OK : pp_err_trace(st, __FILE__, __LINE__);
}

void pp_sched_destroy(pp_sched *s)
{
    if (!s)
        return;
    if (s->ops)
        for (int r = 0; r < s->ranks; r++)
            free(s->ops[r]);
    free(s->ops);
    free(s->n_ops);
    free(s->cap_ops);
    free(s->stages);
    free(s->mb_pipe);
    free(s->reduces);
    free(s);
}

pp_status pp_sched_clone(const pp_sched *s, pp_sched **out)
{
    pp_sched *c = pp_calloc(1, sizeof *c);
    if (!c)
        return PP_ERR_NOMEM;
    *c = *s;
    size_t nst = (size_t)s->n_pipes * s->stages_per_pipe;
    c->stages = pp_calloc(nst, sizeof *c->stages);
    c->mb_pipe = pp_calloc((size_t)s->microbatches, 1);
    c->reduces = pp_calloc((size_t)s->n_reduces + 1, sizeof *c->reduces);
    c->ops = pp_calloc((size_t)s->ranks, sizeof *c->ops);
    c->n_ops = pp_calloc((size_t)s->ranks, sizeof *c->n_ops);
    c->cap_ops = pp_calloc((size_t)s->ranks, sizeof *c->cap_ops);
    c->cap_reduces = s->n_reduces + 1;
    if (!c->stages || !c->mb_pipe || !c->reduces || !c->ops || !c->n_ops || !c->cap_ops) {
        c->ranks = 0;
        pp_sched_destroy(c);
        return PP_ERR_NOMEM;
    }
    memcpy(c->stages, s->stages, nst * sizeof *c->stages);
    memcpy(c->mb_pipe, s->mb_pipe, (size_t)s->microbatches);
    if (s->n_reduces)
        memcpy(c->reduces, s->reduces, (size_t)s->n_reduces * sizeof *c->reduces);
    for (int r = 0; r < s->ranks; r++) {
        c->ops[r] = pp_calloc((size_t)s->n_ops[r] + 1, sizeof(pp_action));
        if (!c->ops[r]) {
            pp_sched_destroy(c);
            return PP_ERR_NOMEM;
        }
        if (s->n_ops[r])
            memcpy(c->ops[r], s->ops[r], (size_t)s->n_ops[r] * sizeof(pp_action));
        c->n_ops[r] = s->n_ops[r];
        c->cap_ops[r] = s->n_ops[r] + 1;
    }
    *out = c;
    return PP_OK;
}

static pp_status push_action(pp_sched *s, int rank, pp_action a)
{
    size_t cap = pp_grow(&s->ops[rank], (size_t)s->n_ops[rank], (size_t)s->cap_ops[rank],
                         sizeof *s->ops[rank], 64);
    if (!cap)
        return PP_ERR_NOMEM;
    s->cap_ops[rank] = (int)cap;
    s->ops[rank][s->n_ops[rank]++] = a;
    return PP_OK;
}

pp_status pp_sched_push(pp_sched *s, int rank, pp_op_kind op, int pipe, int stage, int mb)
{
    if (rank < 0 || rank >= s->ranks)
        return PP_ERR(PP_ERR_INVALID, "action on rank %d, but the schedule has ranks 0..%d", rank,
                      s->ranks - 1);
    if ((unsigned)op >= PP_OP__COUNT)
        return PP_ERR(PP_ERR_INVALID, "unknown action kind %d", (int)op);
    pp_action a = {.op = (uint8_t)op, .pipe = (uint8_t)pipe, .stage = stage, .mb = mb, .peer = -1};
    return push_action(s, rank, a);
}

pp_status pp_sched_reserve(pp_sched *s, int rank, int n)
{
    if (rank < 0 || rank >= s->ranks || n < 0)
        return PP_ERR(PP_ERR_INVALID, "room for %d actions on rank %d of 0..%d", n, rank,
                      s->ranks - 1);
    if (n <= s->cap_ops[rank])
        return PP_OK;
    pp_action *ops = pp_realloc_array(s->ops[rank], (size_t)n, sizeof *ops);
    if (!ops)
        return PP_ERR_NOMEM;
    s->ops[rank] = ops;
    s->cap_ops[rank] = n;
    return PP_OK;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

pp_status pp_sched_add_reduce(pp_sched *s, const int *ranks, int n_ranks,
                              const pp_stage_ref *stages, int n_stages, int *id)
{
    if (n_ranks < 1 || n_ranks > PP_REDUCE_MAX_RANKS)
        return PP_ERR(PP_ERR_INVALID, "a REDUCE takes 1..%d ranks, got %d", PP_REDUCE_MAX_RANKS,
                      n_ranks);
    if (n_stages < 1 || n_stages > PP_REDUCE_MAX_STAGES)
        return PP_ERR(PP_ERR_INVALID, "a REDUCE covers 1..%d stages, got %d",
                      PP_REDUCE_MAX_STAGES, n_stages);
    size_t cap = pp_grow(&s->reduces, (size_t)s->n_reduces, (size_t)s->cap_reduces,
                         sizeof *s->reduces, 8);
    if (!cap)
        return PP_ERR_NOMEM;
    s->cap_reduces = (int)cap;
    pp_reduce *r = &s->reduces[s->n_reduces];
    memset(r, 0, sizeof *r);
    r->n_ranks = n_ranks;
    memcpy(r->ranks, ranks, (size_t)n_ranks * sizeof *ranks);
    qsort(r->ranks, (size_t)n_ranks, sizeof *r->ranks, cmp_int);
    r->n_stages = n_stages;
    memcpy(r->stages, stages, (size_t)n_stages * sizeof *stages);
    if (id)
        *id = s->n_reduces;
    s->n_reduces++;
    return PP_OK;
}

/* The RECV (which = 0) or SEND (1) that a compute a on rank r needs, put at out[(*n)++] when
 * its peer is another rank. */
static void put_comm(const pp_sched *s, int r, pp_action a, int which, pp_action *out, int *n)
{
    int peer = which ? pp_sched_rank_of(s, a.pipe, pp_action_dst_stage(&a))  /* who consumes */
                     : pp_sched_rank_of(s, a.pipe, pp_action_src_stage(&a)); /* who feeds */
    if (!pp_op_is_compute(a.op) || pp_op_dir(a.op) == 0 || peer < 0 || peer == r)
        return; /* W moves no data; ends of the pipe and local hand-overs have none */
    a.op = (uint8_t)(which ? pp_op_send_of(a.op) : pp_op_recv_of(a.op));
    a.peer = peer;
    a.overlap = 0;
    out[(*n)++] = a;
}

/* One compute, or an overlapped pair (k = 2): the RECVs of every part before it, so a pair
 * starts with both inputs there, its SENDs after it (at most 3 actions per part). REDUCE
 * passes through. */
static void lower_one(const pp_sched *s, int r, const pp_action *a, int k, pp_action *out,
                      int *n)
{
    for (int i = 0; i < k; i++)
        put_comm(s, r, a[i], 0, out, n);
    for (int i = 0; i < k; i++) {
        pp_action c = a[i];
        if (pp_op_is_compute(c.op))
            c.peer = -1;
        out[(*n)++] = c;
    }
    for (int i = 0; i < k; i++)
        put_comm(s, r, a[i], 1, out, n);
}

/* The capacity pushing n actions one at a time gives (push_action: 64, doubling), so that a
 * lowered schedule's buffers are the same whichever way it was built (the tuner's schedule
 * cache budgets their bytes). */
static size_t pushed_cap(size_t n)
{
    size_t c = 0;
    while (c < n)
        c = c ? 2 * c : 64;
    return c;
}

pp_status pp_sched_lower_comms(pp_sched *s)
{
    for (int r = 0; r < s->ranks; r++) {
        pp_action *old = s->ops[r];
        int n_old = s->n_ops[r], n = 0;
        /* at most 3 actions per compute (RECV, it, SEND); written in place of pushed one at
         * a time */
        pp_action *out = pp_calloc(3 * (size_t)n_old + 1, sizeof *out);
        if (!out)
            return PP_ERR_NOMEM; /* old stays: the schedule is whole, if not lowered */
        for (int i = 0; i < n_old; i++) {
            if (pp_op_is_comm(old[i].op))
                continue;
            pp_action a[2] = {old[i]};
            int k = 1, j = i + 1;
            while (old[i].overlap && j < n_old && pp_op_is_comm(old[j].op))
                j++; /* the pair's B: the next compute (comms between are re-made) */
            if (old[i].overlap && j < n_old) {
                a[k++] = old[j];
                i = j;
            }
            lower_one(s, r, a, k, out, &n);
        }
        free(old);
        size_t cap = pushed_cap((size_t)n);
        pp_action *fit = cap ? pp_realloc_array(out, cap, sizeof *out) : NULL;
        if (!fit)
            free(out);
        if (cap && !fit) {
            s->ops[r] = NULL, s->n_ops[r] = s->cap_ops[r] = 0;
            return PP_ERR_NOMEM;
        }
        s->ops[r] = fit, s->n_ops[r] = n, s->cap_ops[r] = (int)cap;
    }
    return PP_OK;
}

int pp_sched_has_split_backward(const pp_sched *s)
{
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->n_ops[r]; i++)
            if (pp_op_is_split_backward(s->ops[r][i].op))
                return 1;
    return 0;
}
