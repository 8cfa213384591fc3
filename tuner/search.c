/* search.c — the search over (schedule, p, v, G, b, t, cp, split) and the settings
 * (recomputation, sequence parallelism, sharding) for a model on a cluster.
 *
 * 1. Enumerate: t divides the GPUs per node (and heads, KV heads, FFN); p divides GPUs / t;
 *    cp = 1, 2, 4, ... dividing GPUs / (p t) (axes.c's rule: 2 cp divides the sequence);
 *    d = GPUs / (p t cp); b a power of two up to max_b; N = global batch / (b d); per schedule
 *    its v and G and the layer split (even, Llama-3 uneven, first/last-stage shifts); per
 *    layout every setting axes.c tries (forced ones only as forced). A candidate that breaks a
 *    rule keeps the rule as its reason (stage "rule").
 * 2. Bound: for every valid candidate a lower bound on its step time that needs no schedule:
 *    total compute / p (no rank can be busier than the average) + the DP all-reduce and optimizer
 *    step of a rank holding the average parameter count. Static memory (weights, gradients,
 *    optimizer state) averaged over ranks is a lower bound on the fullest rank: above capacity,
 *    the candidate is pruned without generating its schedule.
 * 3. In increasing bound order: the memory model with each rank's own peak from the schedule
 *    (which does not depend on b, t or the settings): from its shape (mem_shape.h: placement and
 *    the in-flight count vectors where a rank can peak, kept for every schedule key met, to the
 *    bit what walking the schedule gives), the schedule's compute generated once per key to
 *    make the shape (another split of an order held being a copy), lowered only for simulation,
 *    and generated again only where the cache let it go (schedules cached by kind/D/N/v/G/split,
 *    by recency within a byte budget); simulate the survivors with the time model's costs. Once `keep` candidates
 *    fit, a candidate whose bound is not below the keep-th best step time cannot enter the
 *    leaderboard; it and every later one are recorded as "bound" without simulation. This is
 *    exact: the kept leaderboard equals the one a full simulation of every candidate would give.
 *    The candidates that share a schedule are simulated in one pass of the simulator when the
 *    first of them is (lanes, below): each keeps its own checks and its place in this order.
 * 4. One pass: the settings are searched like the layout, so there is no fallback that
 *    switches one on when nothing fits; every candidate that did not fit keeps its reason.
 *    Trials, recalibration and choice follow on the leaderboard (search_trials.c).
 * The leaderboard's entries keep their schedule and memory (pp_tune_prediction.sched, .mem), so
 * printing, the profile and the trials reuse them.
 * What is not cached, and why: simulated makespans. Costs of different (b, t) do not scale
 * uniformly (latencies, all-reduce alpha terms, memory-bound kernels), so reusing a makespan
 * across them would not be exact.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "mem_shape.h"
#include "pp_tune.h"
#include "search_impl.h"

typedef struct {
    pp_config cfg;
    double bound; /* s */
    long group;   /* the first candidate of its layout (the same but for the settings: they
                     are enumerated together, so a layout's candidates are contiguous) */
    int group_n;  /* candidates of that layout */
} cand;

/* A candidate's place in bound order (sorting these, not the candidates, moves 16 bytes a
 * swap instead of a whole configuration). */
typedef struct {
    double bound;
    long i;
} ranked;

/* The per-op times the bound needs depend on (b, t, cp, sequence parallelism, recompute, ep)
 * only:
 * the bound asks this table first (a few distinct keys serve every candidate). */
#define OT_MEMO 64
typedef struct {
    int b, t, cp, sp, rc, ep, used;
    pp_tune_op_times ot;
} ot_memo;

/* Candidates that share one schedule (the settings of a layout, and layouts of other b, t, cp
 * with the same p, N, v, G and split) are simulated together in one pass
 * (pp_tune_evaluate_lanes) when the first of them is: with it, every one not yet decided that
 * fits and whose bound is below the threshold now (it only falls, so the others will never be
 * simulated). The others take their prediction from here when their turn comes, after the same
 * checks as before (bound, memory), so the results, counters and reasons are those of one
 * simulation each; a lane whose candidate is bound-skipped at its turn was wasted work. */
#define LANES 32
typedef struct {
    uint64_t h; /* hash of the schedule key */
    long i;     /* candidate */
} keyed;

typedef struct {
    keyed *by_key;   /* [n_keyed] the candidates with a finite bound, by (hash, index) */
    long n_keyed;
    int *slot;       /* [n_cands] 1 + its prediction's index in pred, 0: none */
    pp_tune_prediction *pred;
    long n_pred, cap_pred;
} lanes;

typedef struct {
    const pp_tune_search_params *sp;
    const pp_tune_opts *o; /* the options */
    int allow_tp;
    const pp_tune_model *m;
    const pp_tune_hw *hw;
    int gb, gpus;
    cand *cands;
    long n_cands, cap_cands;
    pp_tune_result *res;
    long cap_rejects;
    /* 1: the leaderboard keeps its best candidate with t > 1 even when t = 1 ones outrank it,
     * so that the trials measure tensor parallelism (trials on this machine, allow_tp) */
    int keep_tp;
    int n_kinds;
    double *kind_best; /* [n_kinds] step time of each schedule's best so far, INFINITY: none */
    int *kind_slot;    /* [n_kinds] its index in res->sched_best, -1: none */
    int cap_pareto;
    ot_memo memo[OT_MEMO];
    int memo_next;
    pp_tune_shape_cache *shapes; /* every schedule's shape met so far (mem_shape.h) */
    const unsigned char *done;   /* run_ranked's: candidate k's fate is decided */
    lanes lanes;                 /* predictions made in shared passes (simulate_lanes) */
} search;

/* ---- bookkeeping ------------------------------------------------------------------------ */
/* Makes room for one more element in *arr_ptr (n used, *cap allocated, doubling from 256:
 * common's pp_grow). */
static pp_status grow(void *arr_ptr, long n, long *cap, size_t size)
{
    size_t c = pp_grow(arr_ptr, (size_t)n, (size_t)*cap, size, 256);
    if (!c)
        return PP_ERR_NOMEM;
    *cap = (long)c;
    return PP_OK;
}

/* A copy of text (cut to PP_TUNE_REASON_MAX - 1 characters) that lives as long as the result:
 * in blocks of TEXT_BLOCK bytes, so that 700,000 rejects do not each carry a 200-byte array. */
#define TEXT_BLOCK (1 << 20)
static const char *keep_text(pp_tune_result *r, const char *text)
{
    size_t n = strnlen(text, PP_TUNE_REASON_MAX - 1);
    if (!r->n_texts || r->text_used + n + 1 > TEXT_BLOCK) {
        char **t = pp_realloc_array(r->texts, (size_t)r->n_texts + 1, sizeof *t);
        if (!t)
            return NULL;
        r->texts = t;
        if (!(t[r->n_texts] = malloc(TEXT_BLOCK)))
            return NULL;
        r->n_texts++;
        r->text_used = 0;
    }
    char *at = r->texts[r->n_texts - 1] + r->text_used;
    memcpy(at, text, n);
    at[n] = '\0';
    r->text_used += n + 1;
    return at;
}

/* A reject whose reason is kept (kept: a text the result already holds, or a literal) or
 * copied (kept NULL: reason). */
static pp_status add_reject_kept(search *x, const pp_config *c, int stage, const char *reason,
                                 const char *kept)
{
    pp_tune_result *r = x->res;
    PP_TRY(grow(&r->rejects, r->n_rejects, &x->cap_rejects, sizeof *r->rejects));
    if (!kept && !(kept = keep_text(r, reason)))
        return PP_ERR_NOMEM;
    pp_tune_reject *j = &r->rejects[r->n_rejects++];
    memset(j, 0, sizeof *j);
    j->cfg = *c;
    j->stage = stage;
    j->reason = kept;
    return PP_OK;
}

static pp_status add_reject(search *x, const pp_config *c, int stage, const char *reason)
{
    return add_reject_kept(x, c, stage, reason, NULL);
}

static pp_status add_cand(search *x, const pp_config *c)
{
    PP_TRY(grow(&x->cands, x->n_cands, &x->cap_cands, sizeof *x->cands));
    x->cands[x->n_cands].cfg = *c;
    x->cands[x->n_cands].bound = 0;
    x->n_cands++;
    return PP_OK;
}

/* ---- rules -------------------------------------------------------------------------------- */
/* Returns 1 when c breaks a rule of its schedule (the registry's row) or of the layer split,
 * with the rule's own text in why. */
static int breaks_rule(const pp_tune_model *m, const pp_config *c, char *why, size_t n)
{
    const pp_sched_desc *d = pp_sched_find(c->schedule);
    pp_sched_params sp;
    pp_config_sched_params(c, m->layers, &sp);
    pp_sched_split split = pp_sched_params_split(&sp);
    if (d && pp_sched_desc_check(d, &sp) == PP_OK &&
        pp_sched_split_layers(m->layers, c->p * c->v, &split, NULL) == PP_OK)
        return 0;
    snprintf(why, n, "%s", pp_err_text());
    pp_err_clear();
    return 1;
}

/* With --for pprun (sp->pprun_lines): 1 when c has a setting pprun has no option for in the
 * launch's precision, why naming it. */
static int pprun_has_no_option(const search *x, const pp_config *c, char *why, size_t n)
{
    char unrun[160];
    if (!x->sp->pprun_lines ||
        !pp_profile_pprun_unrun(c, pp_tune_launch_precision(x->sp->hw, &x->sp->opts), unrun,
                                sizeof unrun))
        return 0;
    snprintf(why, n, "pprun (--for pprun) has no option for %s", unrun);
    return 1;
}

/* One setting of a layout that keeps the layout's rules: a candidate, or its reject. */
static pp_status offer_setting(void *ctx, const pp_config *c)
{
    search *x = ctx;
    x->res->seen++;
    char why[200];
    if (pp_tune_axes_rule(x->m, c, why, sizeof why) || pprun_has_no_option(x, c, why, sizeof why)) {
        x->res->pruned_rule++;
        return add_reject(x, c, 0, why);
    }
    return add_cand(x, c);
}

/* Adds one layout with each of its settings (axes.c), or the layout's reject. */
static pp_status offer(search *x, const pp_config *c)
{
    char why[200];
    if (breaks_rule(x->m, c, why, sizeof why)) {
        x->res->seen++;
        x->res->pruned_rule++;
        return add_reject(x, c, 0, why);
    }
    pp_tune_axes_ctx a = {.m = x->m, .o = x->o, .force = &x->sp->force,
                          .max_ep = x->sp->max_ep,
                          .fn = offer_setting, .ctx = x};
    long first = x->n_cands;
    PP_TRY(pp_tune_axes_each(&a, *c));
    for (long i = first; i < x->n_cands; i++)
        x->cands[i].group = first, x->cands[i].group_n = (int)(x->n_cands - first);
    return PP_OK;
}

/* The layer splits searched for one (schedule, p, v): even and Llama 3's uneven, as always
 * (with their rule as the reason where they do not apply), then shifts of 1..SPLIT_SHIFTS
 * layers off the first stage (the embedding's) and the last (the head and loss'), onto the
 * others, as Megatron's first/last-pipeline-num-layers: only the valid ones, and none that
 * repeats even or uneven. Where a pipe's first and last stage share ranks (the registry's
 * split_ends_together) only A = Z is tried, and nothing on two ranks; with two stages
 * A = L - Z. */
#define SPLIT_SHIFTS 2

static int same_as_even_or_uneven(int L, int S, int A, int Z)
{
    if (A != Z)
        return 0;
    return (L % S == 0 && A == L / S) || (S >= 3 && (L + 2) % S == 0 && A == (L + 2) / S - 1);
}

static pp_status offer_splits(search *x, const pp_sched_desc *d, pp_config c)
{
    for (int uneven = 0; uneven <= 1; uneven++) {
        c.uneven = uneven;
        PP_TRY(offer(x, &c));
    }
    c.uneven = 0;
    int L = x->m->layers, S = c.p * c.v, q = S > 0 ? L / S : 0;
    if (S < 2 || q < 2)
        return PP_OK;
    if (d->split_ends_together && c.p == 2)
        return PP_OK; /* both ranks hold a pipe's first and the other's last stage and every
                         layer once per pipe pair: no split changes a rank's load */
    for (int dz = 0; dz <= SPLIT_SHIFTS; dz++)
        for (int da = 0; da <= SPLIT_SHIFTS; da++) {
            int Z = q - dz, A = S == 2 ? L - Z : q - da;
            if (Z < 1 || A < 1 || (S == 2 && da) || (d->split_ends_together && A != Z) ||
                same_as_even_or_uneven(L, S, A, Z))
                continue;
            pp_sched_split sp = {.first = A, .last = Z};
            if (pp_sched_split_layers(L, S, &sp, NULL) != PP_OK) {
                pp_err_clear();
                continue;
            }
            c.first_layers = A, c.last_layers = Z;
            PP_TRY(offer(x, &c));
        }
    return PP_OK;
}

static pp_status enumerate_schedules(search *x, pp_config c)
{
    int n_kinds;
    const pp_sched_desc *kinds = pp_sched_generators(&n_kinds);
    for (int k = 0; k < n_kinds; k++) {
        const pp_sched_desc *d = &kinds[k];
        if (!pp_sched_desc_searched(d, x->sp->schedules)) /* opt-in rows only when named */
            continue;
        c.schedule = d->name;
        if (d->chunks) {
            c.v = d->chunks;
            c.G = 0;
            PP_TRY(offer_splits(x, d, c));
            continue;
        }
        /* tunable chunks: v up to the layers a rank holds; G = p, 2p, 4p, ... and N
         * (Megatron's default is p; Llama 3 tuned it). Too few ranks to interleave: one
         * candidate says so. */
        if (c.p < d->min_ranks) {
            c.v = d->chunks_min, c.G = c.p;
            PP_TRY(offer_splits(x, d, c));
            continue;
        }
        for (int v = d->chunks_min; v * c.p <= x->m->layers + 2 && v <= 16; v++) {
            c.v = v;
            for (long long G = c.p; G <= c.N; G *= 2) { /* 64 bits: N may be 2^30 */
                c.G = (int)G;
                PP_TRY(offer_splits(x, d, c));
            }
            if (c.N > c.p && (c.N & (c.N - 1)) != 0) {
                c.G = c.N;
                PP_TRY(offer_splits(x, d, c));
            }
            if (c.N < c.p) {
                c.G = c.p;
                PP_TRY(offer_splits(x, d, c));
            }
        }
    }
    return PP_OK;
}

static int divides_model(const pp_tune_model *m, int t, char *why, size_t n)
{
    if (m->heads % t || m->kv_heads % t || m->ffn % t || m->hidden % t)
        return snprintf(why, n, "t = %d must divide heads %d, KV heads %d, FFN %d and hidden %d",
                        t, m->heads, m->kv_heads, m->ffn, m->hidden),
               0;
    return 1;
}

static pp_status enumerate_batches(search *x, pp_config c);

static pp_status enumerate(search *x)
{
    int gpn = x->hw->gpus_per_node;
    int max_t = x->sp->max_t > 0 ? x->sp->max_t : gpn;
    for (int t = 1; t <= max_t && t <= gpn; t++) {
        if (gpn % t || (t > 1 && !x->allow_tp))
            continue; /* t divides the devices of a node: a tensor group never spans nodes */
        char why[200];
        /* the axes not searched at their defaults (the settings: axes.c, per layout) */
        pp_config c;
        pp_config_defaults(&c);
        c.t = t, c.schedule = "any";
        pp_tune_force_apply(&x->sp->force, &c);
        if (!divides_model(x->m, t, why, sizeof why)) {
            x->res->seen++, x->res->pruned_rule++;
            PP_TRY(add_reject(x, &c, 0, why));
            continue;
        }
        pp_tune_axes_ctx ax = {.m = x->m, .o = x->o, .force = &x->sp->force};
        int max_cp = pp_tune_axes_cp_max(&ax, x->sp->max_cp);
        /* cp: the forced value alone, else 1, 2, 4, ... up to the limit */
        int cp0 = x->sp->force.cp >= 1 ? x->sp->force.cp : 1;
        for (int p = 1; p <= x->gpus / t && p <= x->m->layers; p++)
            for (int cp = cp0; cp <= max_cp; cp *= 2) {
                if ((x->gpus / t) % p || (x->gpus / t / p) % cp)
                    continue;
                c.p = p, c.cp = cp;
                PP_TRY(enumerate_batches(x, c));
            }
    }
    return PP_OK;
}

/* The micro-batch sizes of one (t, p, cp): d = GPUs / (p t cp), N = global batch / (b d). */
static pp_status enumerate_batches(search *x, pp_config c)
{
    char why[200];
    int max_b = x->sp->max_b > 0 ? x->sp->max_b : 16;
    c.d = x->gpus / (c.p * c.t * c.cp);
    /* 64 bits: b x d of 32-bit ints wrapped to 0 (SIGFPE) and b *= 2 past INT_MAX */
    for (long long b = 1; b <= max_b; b *= 2) {
        c.b = (int)b;
        long long bd = b * c.d;
        if (x->gb % bd != 0) {
            c.N = 0;
            c.schedule = "any";
            snprintf(why, sizeof why, "global batch %d is not a multiple of b x d = %d x %d",
                     x->gb, c.b, c.d);
            x->res->seen++, x->res->pruned_rule++;
            PP_TRY(add_reject(x, &c, 0, why));
            continue;
        }
        c.N = (int)(x->gb / bd); /* above the budget: the steady state (predict.c) */
        PP_TRY(enumerate_schedules(x, c));
    }
    return PP_OK;
}

/* ---- bounds -------------------------------------------------------------------------------- */
/* Layers of the whole model that recompute their forward in one micro-batch under c: exact,
 * from the split's per-stage counts (block recomputation: min(k, a stage's layers) each). */
static int recomputed(const pp_tune_model *m, const pp_config *c)
{
    if (c->recompute != PP_RECOMPUTE_FULL || c->recompute_layers <= 0)
        return pp_tune_recomputed_layers(c, m->layers);
    int S = c->p * c->v, n = 0;
    int *begin = pp_calloc((size_t)S + 1, sizeof *begin);
    pp_sched_params sp;
    pp_config_sched_params(c, m->layers, &sp);
    pp_sched_split split = pp_sched_params_split(&sp);
    if (!begin || pp_sched_split_layers(m->layers, S, &split, begin) != PP_OK) {
        pp_err_clear();
        free(begin);
        return S < m->layers ? S : m->layers; /* a lower bound: every stage has a layer */
    }
    for (int i = 0; i < S; i++)
        n += pp_tune_recomputed_layers(c, begin[i + 1] - begin[i]);
    free(begin);
    return n;
}

/* Lower bound on the step time and on the fullest rank's static bytes (see the file comment),
 * from the cost model's own functions applied to a rank holding the average parameters. */
static const pp_tune_op_times *op_times(search *x, const pp_config *c)
{
    int sp = c->sequence_parallel && c->t > 1;
    for (int i = 0; i < OT_MEMO && x->memo[i].used; i++) {
        const ot_memo *e = &x->memo[i];
        if (e->b == c->b && e->t == c->t && e->cp == c->cp && e->sp == sp &&
            e->rc == (int)c->recompute && e->ep == c->ep)
            return &e->ot;
    }
    ot_memo *e = &x->memo[x->memo_next++ % OT_MEMO];
    *e = (ot_memo){.b = c->b, .t = c->t, .cp = c->cp, .sp = sp, .rc = (int)c->recompute,
                   .ep = c->ep, .used = 1};
    pp_tune_op_times_compute(x->m, x->hw, c, x->o, &e->ot);
    return &e->ot;
}

static void bound(search *x, const pp_config *c, double *time_lb, double *static_lb)
{
    const pp_tune_model *m = x->m;
    const pp_tune_opts *o = x->o;
    pp_tune_op_times ot = *op_times(x, c);
    /* MoE layers: their all-to-alls may hide behind overlapped pairs, so the bound leaves
     * them out, and takes the cheaper recomputation of the two layer kinds */
    pp_tune_params pc;
    pp_tune_model_params(m, &pc);
    double nm = pc.moe_layers, nd = m->layers - nm;
    double per_mb = nd * (ot.layer_f + ot.layer_b) +
                    nm * (ot.moe_f + ot.moe_b - ot.moe_a2a_f - ot.moe_a2a_b) +
                    recomputed(m, c) * (nm > 0 ? fmin(ot.recompute, ot.moe_recompute - ot.moe_a2a_f)
                                               : ot.recompute);
    per_mb += ot.embed_f + ot.embed_b + ot.head_f + ot.head_b;
    double compute = (double)c->N * per_mb / c->p;

    const pp_sched_desc *d = pp_sched_lookup(c->schedule);
    /* the routed experts: experts / ep of them per rank, their state over d cp / ep ranks */
    double routed = nm * (double)m->block.moe.experts * pc.expert;
    int reps = d ? d->weight_replicas : 1;
    double avg_params = (pc.total - routed) / c->t * reps / c->p;
    double avg_experts = routed / pp_tune_ep(c) / c->t * reps / c->p;
    pp_config ce = pp_tune_expert_dp_config(c);
    pp_tune_param_bytes bp = pp_tune_bytes_per_param(o, c), bpe = pp_tune_bytes_per_param(o, &ce);
    *static_lb = avg_params * (bp.weights + bp.grads + bp.optim) +
                 avg_experts * (bpe.weights + bpe.grads + bpe.optim);
    /* gradient sharding's reduce-scatter per micro-batch (affine in the parameters, at least
     * one per stage: the average rank's is a lower bound on the busiest's) */
    if (!d || d->weight_replicas == 1)
        compute += c->N * (pp_tune_grad_shard_time(x->hw, c, o, avg_params) +
                           (avg_experts > 0 ? pp_tune_grad_shard_time(x->hw, &ce, o, avg_experts)
                                            : 0.0));
    /* the DP sync and optimizer step of an average rank (the slowest moves at least as much) */
    *time_lb = compute + pp_tune_dp_sync_time(x->hw, c, o, avg_params) +
               pp_tune_optimizer_time(x->hw, c, o, avg_params);
    if (avg_experts > 0)
        *time_lb += pp_tune_dp_sync_time(x->hw, &ce, o, avg_experts) +
                    pp_tune_optimizer_time(x->hw, &ce, o, avg_experts);
}

/* Increasing bound; equal bounds in enumeration order (qsort is not stable: the index makes
 * the order, and so the leaderboard's ties, the same on every platform). */
static int by_bound(const void *a, const void *b)
{
    const ranked *p = a, *q = b;
    if (p->bound != q->bound)
        return p->bound < q->bound ? -1 : 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

/* ---- schedule cache --------------------------------------------------------------------- */
/* A schedule leaving the cache while a leaderboard entry points to it moves to the result's
 * held list (freed with the result); unreferenced ones are destroyed. The cache keeps the most
 * recent CACHE_SLOTS schedules within CACHE_BYTES (the candidates that fit come back to a
 * schedule after its shape was taken, often after many others: 1T on 3,072 GPUs generated 625
 * schedules with 16 slots for 402 distinct ones; with 64 slots it still generated chimera's 86
 * times, 256 slots take it to 49, the distinct ones, and a tenth off that search's time). A schedule is generated without its SEND and
 * RECV actions (pp_sched_generate_compute: the shape and the memory walks read the compute
 * only) and lowered (pp_sched_lower_comms) when a candidate of it is first simulated: most
 * schedules of a large search are made for their shape alone, and lowering was a seventh of
 * the 1T search's time. */
#define CACHE_SLOTS 256
#define CACHE_BYTES (256.0 * 1024 * 1024)
typedef struct {
    pp_sched_params key;
    char kind[16];
    pp_sched *s;
    int lowered;  /* s has its SEND/RECV actions */
    double bytes; /* its action lists */
    long used;    /* when it was last asked for (the cache's clock) */
} cache_slot;

static double sched_bytes(const pp_sched *s)
{
    double n = 0;
    for (int r = 0; r < s->ranks; r++)
        n += (double)s->cap_ops[r] * sizeof(pp_action);
    return n;
}

static int referenced(const pp_tune_result *r, const pp_sched *s)
{
    for (int i = 0; i < r->n_best; i++)
        if (r->best[i].sched == s)
            return 1;
    return 0;
}

/* Destroys the held schedules no entry points to any more. */
static void prune_held(pp_tune_result *r)
{
    int n = 0;
    for (int i = 0; i < r->n_held; i++) {
        if (referenced(r, r->held[i]))
            r->held[n++] = r->held[i];
        else
            pp_sched_destroy(r->held[i]);
    }
    r->n_held = n;
}

static pp_status release(search *x, pp_sched *s)
{
    pp_tune_result *r = x->res;
    if (!s || !referenced(r, s)) {
        pp_sched_destroy(s);
        return PP_OK;
    }
    prune_held(r);
    pp_sched **h = pp_realloc_array(r->held, (size_t)r->n_held + 1, sizeof *h);
    if (!h) {
        pp_sched_destroy(s); /* the entries pointing to it are cleared with the error */
        return PP_ERR_NOMEM;
    }
    r->held = h;
    r->held[r->n_held++] = s;
    return PP_OK;
}

/* The least recently used schedule's slot (empty: NULL none), or an empty slot first. */
static cache_slot *oldest(cache_slot *cache, int or_empty)
{
    cache_slot *v = NULL;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (!cache[i].s && or_empty)
            return &cache[i];
        if (cache[i].s && (!v || cache[i].used < v->used))
            v = &cache[i];
    }
    return v;
}

/* Lets slot's schedule go (to the held list where the leaderboard points to it). */
static pp_status evict(search *x, cache_slot *slot, double *held)
{
    if (!slot->s)
        return PP_OK;
    *held -= slot->bytes;
    pp_sched *s = slot->s;
    slot->s = NULL;
    return release(x, s);
}

/* Lowers the schedule of slot (its communication, for the simulator), once. */
static pp_status lower(cache_slot *slot)
{
    if (slot->lowered)
        return PP_OK;
    PP_TRY(pp_sched_lower_comms(slot->s));
    slot->lowered = 1;
    slot->bytes = sched_bytes(slot->s);
    return PP_OK;
}

/* Lowers s, which the cache holds. */
static pp_status lower_held(cache_slot *cache, const pp_sched *s)
{
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (cache[i].s == s)
            return lower(&cache[i]);
    return PP_ERR(PP_ERR_INVALID, "search: a schedule left the cache before it was simulated");
}

/* A slot holding kind's schedule of sp but for the layer split (the generators' order and
 * placement do not depend on it: pp_sched_resplit), NULL: none. */
static cache_slot *same_order(cache_slot *cache, const char *kind, const pp_sched_params *sp)
{
    for (int i = 0; i < CACHE_SLOTS; i++) {
        const pp_sched_params *k = &cache[i].key;
        if (cache[i].s && !strcmp(cache[i].kind, kind) && k->ranks == sp->ranks &&
            k->microbatches == sp->microbatches && k->chunks == sp->chunks &&
            k->group == sp->group && k->layers == sp->layers)
            return &cache[i];
    }
    return NULL;
}

/* c's schedule (*out, the cache's), lowered when `comms` (to be simulated), else perhaps its
 * compute only. */
static pp_status cached_schedule(search *x, const pp_config *c, cache_slot *cache,
                                 long *clock, int comms, pp_sched **out)
{
    pp_sched_params sp;
    pp_tune_sched_params(x->m, c, &sp);
    ++*clock;
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (cache[i].s && !strcmp(cache[i].kind, c->schedule) &&
            !memcmp(&cache[i].key, &sp, sizeof sp)) {
            x->res->sim_cache_hits++;
            cache[i].used = *clock;
            *out = cache[i].s;
            return comms ? lower(&cache[i]) : PP_OK;
        }
    pp_sched *s = NULL;
    cache_slot *same = same_order(cache, c->schedule, &sp);
    if (same) { /* another split of the same order: a copy, resplit */
        PP_TRY(pp_sched_clone(same->s, &s));
        pp_sched_split split = pp_sched_params_split(&sp);
        pp_status rs = pp_sched_resplit(s, &split);
        if (rs != PP_OK) {
            pp_sched_destroy(s);
            return rs;
        }
    } else {
        PP_TRY(pp_sched_generate_compute(c->schedule, &sp, &s));
    }
    int lowered = same && same->lowered;
    double held = 0, need = sched_bytes(s);
    for (int i = 0; i < CACHE_SLOTS; i++)
        held += cache[i].s ? cache[i].bytes : 0;
    cache_slot *slot = oldest(cache, 1), *o;
    pp_status st = evict(x, slot, &held);
    while (st == PP_OK && held + need > CACHE_BYTES && (o = oldest(cache, 0)))
        st = evict(x, o, &held); /* the least recent go until it fits the budget */
    *slot = (cache_slot){.key = sp, .s = s, .lowered = lowered, .bytes = sched_bytes(s),
                         .used = *clock};
    snprintf(slot->kind, sizeof slot->kind, "%s", c->schedule);
    *out = s;
    return st == PP_OK && comms ? lower(slot) : st;
}

/* ---- leaderboard --------------------------------------------------------------------------- */
/* Inserts p into the sorted best list (at most keep entries); the one pushed out (or p itself)
 * becomes an "outranked" reject. */
static pp_status outranked(search *x, const pp_tune_prediction *p)
{
    char why[200], st[16], pk[16];
    snprintf(why, sizeof why, "outranked: predicted step %s s, %.1f %% MFU, peak %s",
             pp_fmt_seconds(p->step_time, st, sizeof st), 100 * p->mfu,
             pp_fmt_bytes(p->peak_mem, pk, sizeof pk));
    return add_reject(x, &p->cfg, 2, why);
}

static int n_tp_entries(const pp_tune_result *r)
{
    int n = 0;
    for (int i = 0; i < r->n_best; i++)
        n += r->best[i].cfg.t > 1;
    return n;
}

/* The entry a full leaderboard gives up for p: its worst, except the one candidate with t > 1
 * under keep_tp when p has t = 1 (the next worst goes instead). keep_tp is on where the trials
 * run on this machine: its tensor-parallel communication is the figure the time model knows
 * least, so the best t > 1 candidate is measured rather than outranked on a prediction. */
static int victim(const search *x, const pp_tune_prediction *p, int keep)
{
    const pp_tune_result *r = x->res;
    if (x->keep_tp && keep > 1 && p->cfg.t == 1 && r->best[keep - 1].cfg.t > 1 &&
        n_tp_entries(r) == 1)
        return keep - 2;
    return keep - 1;
}

/* p enters with its schedule s and its memory (copied: p->cfg.p entries). */
static pp_status insert_best(search *x, const pp_tune_prediction *p, const pp_sched *s,
                             const pp_tune_rank_mem *mem)
{
    pp_tune_result *r = x->res;
    int keep = x->sp->keep > 0 ? x->sp->keep : 10;
    if (r->n_best == keep) {
        int v = victim(x, p, keep);
        /* under keep_tp the first candidate with t > 1 enters whatever its time */
        int first_tp = x->keep_tp && p->cfg.t > 1 && n_tp_entries(r) == 0;
        if (p->step_time >= r->best[v].step_time && !first_tp)
            return outranked(x, p);
        PP_TRY(outranked(x, &r->best[v]));
        free((void *)r->best[v].mem);
        memmove(&r->best[v], &r->best[v + 1], (size_t)(r->n_best - v - 1) * sizeof r->best[0]);
        r->n_best--;
    }
    pp_tune_rank_mem *own = pp_calloc((size_t)p->cfg.p, sizeof *own);
    if (!own)
        return PP_ERR_NOMEM;
    memcpy(own, mem, (size_t)p->cfg.p * sizeof *own);
    int i = r->n_best;
    while (i > 0 && r->best[i - 1].step_time > p->step_time) {
        r->best[i] = r->best[i - 1];
        i--;
    }
    r->best[i] = *p;
    r->best[i].sched = s;
    r->best[i].mem = own;
    r->n_best++;
    return PP_OK;
}

/* ---- per-schedule bests and the Pareto front ---------------------------------------------- */
static int kind_index(const search *x, const char *kind)
{
    const pp_sched_desc *kinds = pp_sched_generators(&(int){0});
    const pp_sched_desc *d = pp_sched_lookup(kind);
    int k = d ? (int)(d - kinds) : -1;
    return k >= 0 && k < x->n_kinds ? k : -1;
}

static pp_tune_candidate candidate(const pp_tune_prediction *p, const pp_tune_rank_mem *mem)
{
    pp_tune_candidate c = {.pred = *p, .worst = mem[p->peak_rank]};
    c.pred.sched = NULL;
    c.pred.mem = NULL;
    return c;
}

/* Keeps p when it is its schedule's fastest so far (sched_best stays in registry order). */
static void note_kind_best(search *x, const pp_tune_prediction *p, const pp_tune_rank_mem *mem)
{
    int k = kind_index(x, p->cfg.schedule);
    if (k < 0 || p->step_time >= x->kind_best[k])
        return;
    x->kind_best[k] = p->step_time;
    pp_tune_result *r = x->res;
    if (x->kind_slot[k] < 0) { /* sched_best has room for n_kinds entries */
        int at = 0;
        while (at < r->n_sched_best && kind_index(x, r->sched_best[at].pred.cfg.schedule) < k)
            at++;
        memmove(&r->sched_best[at + 1], &r->sched_best[at],
                (size_t)(r->n_sched_best - at) * sizeof *r->sched_best);
        for (int j = 0; j < x->n_kinds; j++)
            if (x->kind_slot[j] >= at)
                x->kind_slot[j]++;
        x->kind_slot[k] = at;
        r->n_sched_best++;
    }
    r->sched_best[x->kind_slot[k]] = candidate(p, mem);
}

static int dominates(const pp_tune_prediction *a, const pp_tune_prediction *b)
{
    return a->step_time <= b->step_time && a->peak_mem <= b->peak_mem &&
           (a->step_time < b->step_time || a->peak_mem < b->peak_mem);
}

/* Adds p to the front unless one there dominates it; drops the ones p dominates. */
static pp_status note_pareto(search *x, const pp_tune_prediction *p, const pp_tune_rank_mem *mem)
{
    pp_tune_result *r = x->res;
    int n = 0, at = 0;
    for (int i = 0; i < r->n_pareto; i++)
        if (dominates(&r->pareto[i].pred, p) ||
            (r->pareto[i].pred.step_time == p->step_time &&
             r->pareto[i].pred.peak_mem == p->peak_mem))
            return PP_OK;
    for (int i = 0; i < r->n_pareto; i++)
        if (!dominates(p, &r->pareto[i].pred))
            r->pareto[n++] = r->pareto[i];
    r->n_pareto = n;
    long cap = x->cap_pareto;
    PP_TRY(grow(&r->pareto, n, &cap, sizeof *r->pareto));
    x->cap_pareto = (int)cap;
    while (at < n && r->pareto[at].pred.peak_mem < p->peak_mem)
        at++;
    memmove(&r->pareto[at + 1], &r->pareto[at], (size_t)(n - at) * sizeof *r->pareto);
    r->pareto[at] = candidate(p, mem);
    r->n_pareto++;
    return PP_OK;
}

/* The step time a candidate's bound must beat to be simulated: the keep-th best (it could
 * enter the leaderboard) or its schedule's best so far (it could be that schedule's best). */
static double simulate_below(const search *x, const pp_config *c);

static double kth_best(const search *x)
{
    int keep = x->sp->keep > 0 ? x->sp->keep : 10;
    return x->res->n_best < keep ? INFINITY : x->res->best[keep - 1].step_time;
}

/* 1 (and the candidate's "does not fit" reject) when the fullest of mem's c->p ranks is over
 * the capacity. */
static int over_capacity(search *x, const pp_config *c, const pp_tune_rank_mem *mem,
                         pp_status *st)
{
    double cap = pp_tune_mem_capacity(x->hw, x->o);
    int worst = 0;
    for (int r = 1; r < c->p; r++)
        if (mem[r].total > mem[worst].total)
            worst = r;
    if (mem[worst].total <= cap)
        return 0;
    x->res->pruned_memory++;
    char why[200], parts[170], usable[16];
    snprintf(why, sizeof why, "does not fit: rank %d needs %s > %s usable", worst,
             pp_tune_rank_mem_str(&mem[worst], parts, sizeof parts),
             pp_fmt_bytes(cap, usable, sizeof usable));
    *st = add_reject(x, c, 1, why);
    return 1;
}

/* A simulated candidate that fits enters the bests, the front and the leaderboard. */
static pp_status admit(search *x, const pp_tune_prediction *pred, const pp_sched *s,
                       const pp_tune_rank_mem *mem)
{
    x->res->simulated++;
    note_kind_best(x, pred, mem);
    PP_TRY(note_pareto(x, pred, mem));
    return insert_best(x, pred, s, mem);
}

/* N above the budget: the steady state of three prefixes (predict.c); the leaderboard keeps
 * the longest prefix's schedule. A budget that holds too few periods, or prefixes that are not
 * yet steady, make the candidate's reason. */
static pp_status evaluate_steady(search *x, const pp_config *c, pp_tune_rank_mem *mem)
{
    int n[3];
    pp_status st = pp_tune_steady_prefixes(x->m, c, n);
    pp_sched *s = NULL;
    pp_tune_prediction pred;
    if (st == PP_OK)
        st = pp_tune_predict_steady(x->m, x->hw, c, x->o, &pred, mem, &s);
    if (st == PP_ERR_INVALID || st == PP_ERR_UNSUPPORTED) {
        x->res->pruned_rule++;
        return add_reject(x, c, 0, pp_err_text());
    }
    PP_TRY(st);
    if (!over_capacity(x, c, mem, &st))
        st = admit(x, &pred, s, mem);
    pp_status rs = release(x, s); /* held while the leaderboard points to it */
    return st == PP_OK ? rs : st;
}

/* The shape of c's schedule (*sh), from the cache, else from the schedule, generated (*s) and
 * added to both caches. A generator's refusal returns its status. */
static pp_status shape_of(search *x, const pp_config *c, cache_slot *cache, long *clock,
                          const pp_tune_shape **sh, pp_sched **s)
{
    pp_sched_params sp;
    pp_tune_sched_params(x->m, c, &sp);
    *sh = pp_tune_shape_cache_get(x->shapes, c->schedule, &sp);
    if (*sh) {
        x->res->sim_cache_hits++;
        return PP_OK;
    }
    PP_TRY(cached_schedule(x, c, cache, clock, 0, s));
    pp_tune_shape *made = NULL;
    PP_TRY(pp_tune_shape_create(*s, &made));
    PP_TRY(pp_tune_shape_cache_put(x->shapes, c->schedule, &sp, made));
    *sh = made;
    return PP_OK;
}

/* A candidate whose schedule or memory model refuses it: the refusal is its reason. */
static pp_status refused(search *x, const pp_config *c)
{
    x->res->pruned_rule++;
    return add_reject(x, c, 0, pp_err_text());
}

/* 1 with *pred when candidate i's prediction was made in a shared pass (taken once) */
static int from_lanes(search *x, long i, pp_tune_prediction *pred)
{
    int k = x->lanes.slot ? x->lanes.slot[i] : 0;
    if (!k)
        return 0;
    *pred = x->lanes.pred[k - 1];
    x->lanes.slot[i] = 0;
    return 1;
}

static uint64_t key_hash(const search *x, const pp_config *c)
{
    pp_sched_params sp;
    pp_tune_sched_params(x->m, c, &sp);
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const char *p = c->schedule; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    const int v[] = {sp.ranks,  sp.microbatches, sp.chunks,       sp.group,
                     sp.layers, sp.uneven,       sp.first_layers, sp.last_layers};
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
        h = (h ^ (uint32_t)v[k]) * 1099511628211ULL;
    return h;
}

static int same_key(const search *x, const pp_config *a, const pp_config *b)
{
    pp_sched_params ka, kb;
    pp_tune_sched_params(x->m, a, &ka);
    pp_tune_sched_params(x->m, b, &kb);
    return !strcmp(a->schedule, b->schedule) && !memcmp(&ka, &kb, sizeof ka);
}

static int by_hash(const void *a, const void *b)
{
    const keyed *p = a, *q = b;
    if (p->h != q->h)
        return p->h < q->h ? -1 : 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

/* The index of the candidates by schedule key (those with a finite bound). */
static pp_status lanes_index(search *x)
{
    lanes *l = &x->lanes;
    l->by_key = pp_calloc((size_t)x->n_cands + 1, sizeof *l->by_key);
    l->slot = pp_calloc((size_t)x->n_cands + 1, sizeof *l->slot);
    if (!l->by_key || !l->slot)
        return PP_ERR_NOMEM;
    for (long i = 0; i < x->n_cands; i++)
        if (!isinf(x->cands[i].bound))
            l->by_key[l->n_keyed++] = (keyed){key_hash(x, &x->cands[i].cfg), i};
    if (l->n_keyed)
        qsort(l->by_key, (size_t)l->n_keyed, sizeof *l->by_key, by_hash);
    return PP_OK;
}

static void lanes_free(lanes *l)
{
    free(l->by_key);
    free(l->slot);
    free(l->pred);
    memset(l, 0, sizeof *l);
}

static int bounded_out(const search *x, const cand *cd);

/* 1 when candidate j (not i) may still be simulated: not decided yet, its static memory fits,
 * its bound below the threshold now (which only falls: one above it now is above it at its
 * turn), no prediction waiting for it. */
static int may_follow(const search *x, long i, long j)
{
    const cand *c = &x->cands[j];
    return j != i && !x->done[j] && !x->lanes.slot[j] && !isinf(c->bound) && !bounded_out(x, c);
}

/* 1 when c, with its schedule s of shape sh, fits by the memory model (into mem) */
static int fits(search *x, const pp_config *c, const pp_sched *s, const pp_tune_shape *sh,
                pp_tune_rank_mem *mem)
{
    int exact = 0;
    pp_status st = sh ? pp_tune_memory_shape(x->m, c, sh, x->o, mem, &exact) : PP_OK;
    if (st == PP_OK && !exact)
        st = pp_tune_memory(x->m, c, s, x->o, mem);
    if (st != PP_OK) {
        pp_err_clear();
        return 0;
    }
    double cap = pp_tune_mem_capacity(x->hw, x->o);
    for (int r = 0; r < c->p; r++)
        if (mem[r].total > cap)
            return 0;
    return 1;
}

/* The first entry of by_key with hash h (n_keyed: none). */
static long first_of(const lanes *l, uint64_t h)
{
    long lo = 0, hi = l->n_keyed;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (l->by_key[mid].h < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The lanes of one pass: cd (which fits), then the undecided candidates of its schedule
 * key that may still be simulated and fit (mem: their memory, D entries each). Returns the
 * count. */
static int gather(search *x, const cand *cd, const pp_sched *s, const pp_tune_shape *sh,
                  int most, pp_config *cfg, long *idx, pp_tune_rank_mem *mem)
{
    long i = cd - x->cands;
    int D = cd->cfg.p, n = 0;
    cfg[n] = cd->cfg, idx[n++] = i;
    uint64_t h = key_hash(x, &cd->cfg);
    for (long k = first_of(&x->lanes, h); k < x->lanes.n_keyed && n < most; k++) {
        long j = x->lanes.by_key[k].i;
        if (x->lanes.by_key[k].h != h)
            break;
        if (!may_follow(x, i, j) || !same_key(x, &cd->cfg, &x->cands[j].cfg) ||
            !fits(x, &x->cands[j].cfg, s, sh, mem + (size_t)n * D))
            continue;
        cfg[n] = x->cands[j].cfg, idx[n++] = j;
    }
    return n;
}

/* Simulates cd and the candidates gather() gives in one pass into x->lanes; with none besides
 * cd, or on an error (each is then simulated alone, which reports it), nothing is kept. */
static pp_status simulate_lanes(search *x, const cand *cd, const pp_sched *s,
                                const pp_tune_shape *sh)
{
    int D = cd->cfg.p;
    pp_config cfg[LANES];
    long idx[LANES];
    const pp_tune_rank_mem *mp[LANES];
    pp_tune_prediction *pred = pp_calloc(LANES, sizeof *pred);
    pp_tune_rank_mem *mem = pp_calloc((size_t)LANES * D, sizeof *mem);
    if (!mem || !pred) {
        free(mem);
        free(pred);
        return PP_ERR_NOMEM;
    }
    int n = gather(x, cd, s, sh, LANES, cfg, idx, mem);
    pp_status st = PP_ERR_INVALID;
    if (n >= 2 && fits(x, &cd->cfg, s, sh, mem)) {
        for (int k = 0; k < n; k++)
            mp[k] = mem + (size_t)k * D;
        st = pp_tune_evaluate_lanes(x->m, x->hw, cfg, x->o, s, mp, n, pred);
        if (st == PP_OK)
            x->res->sim_passes++, x->res->sim_lanes += n;
    }
    lanes *l = &x->lanes;
    for (int k = 0; st == PP_OK && k < n; k++) {
        long cap = l->cap_pred;
        if ((st = grow(&l->pred, l->n_pred, &cap, sizeof *l->pred)) != PP_OK)
            break;
        l->cap_pred = cap;
        l->pred[l->n_pred++] = pred[k];
        l->slot[idx[k]] = (int)l->n_pred;
    }
    free(mem);
    free(pred);
    if (st == PP_ERR_NOMEM)
        return st;
    if (st != PP_OK)
        pp_err_clear();
    return PP_OK;
}

static pp_status evaluate_one(search *x, const cand *cd, cache_slot *cache, long *clock,
                              pp_tune_rank_mem *mem)
{
    const pp_config *c = &cd->cfg;
    if (c->N > pp_tune_steady_budget())
        return evaluate_steady(x, c, mem);
    pp_sched *s = NULL;
    const pp_tune_shape *sh = NULL;
    pp_status st = shape_of(x, c, cache, clock, &sh, &s);
    if (st == PP_ERR_NOMEM)
        return st;
    if (st != PP_OK)
        return refused(x, c);
    /* the memory from the shape, or walking the schedule where the shape cannot give the same
     * bytes (generated again where the schedule cache let it go; lowered: the runtime's plan
     * simulates it) */
    int exact = 0;
    st = pp_tune_memory_shape(x->m, c, sh, x->o, mem, &exact);
    if (st == PP_OK && !exact) {
        if (s)
            st = lower_held(cache, s);
        else
            st = cached_schedule(x, c, cache, clock, 1, &s);
        if (st != PP_OK)
            return st == PP_ERR_NOMEM ? st : refused(x, c);
        st = pp_tune_memory(x->m, c, s, x->o, mem);
    }
    if (st == PP_ERR_UNSUPPORTED) /* e.g. t > 1 with the runtime's memory model */
        return refused(x, c);
    PP_TRY(st);
    if (over_capacity(x, c, mem, &st))
        return st;
    /* to be simulated (or kept by the leaderboard): lowered */
    if (s)
        st = lower_held(cache, s);
    else if ((st = cached_schedule(x, c, cache, clock, 1, &s)) != PP_OK)
        return st == PP_ERR_NOMEM ? st : refused(x, c);
    PP_TRY(st);
    pp_tune_prediction pred;
    if (!from_lanes(x, cd - x->cands, &pred)) {
        PP_TRY(simulate_lanes(x, cd, s, sh));
        if (!from_lanes(x, cd - x->cands, &pred))
        {
            PP_TRY(pp_tune_evaluate_mem(x->m, x->hw, c, x->o, s, mem, &pred));
            x->res->sim_passes++, x->res->sim_lanes++;
        }
    }
    return admit(x, &pred, s, mem);
}

static double kind_best_of(const search *x, const pp_config *c)
{
    int k = kind_index(x, c->schedule);
    return k >= 0 ? x->kind_best[k] : INFINITY;
}

static double simulate_below(const search *x, const pp_config *c)
{
    int k = kind_index(x, c->schedule);
    double own = k >= 0 ? x->kind_best[k] : 0;
    double kth = kth_best(x);
    return own > kth ? own : kth;
}

/* 1 when the bound says the candidate can beat neither the leaderboard nor its schedule's
 * best (unless the trials still need a t > 1 entry). */
static int bounded_out(const search *x, const cand *cd)
{
    return cd->bound >= simulate_below(x, &cd->cfg) &&
           !(x->keep_tp && cd->cfg.t > 1 && n_tp_entries(x->res) == 0);
}

static pp_status run_ranked(search *x)
{
    const pp_tune_search_params *sp = x->sp;
    double cap = pp_tune_mem_capacity(x->hw, x->o);
    ranked *order = pp_calloc((size_t)x->n_cands + 1, sizeof *order);
    if (!order)
        return PP_ERR_NOMEM;
    for (long i = 0; i < x->n_cands; i++) {
        double slb;
        bound(x, &x->cands[i].cfg, &x->cands[i].bound, &slb);
        if (slb > cap)
            x->cands[i].bound = INFINITY; /* marked: pruned below without a schedule */
        order[i] = (ranked){x->cands[i].bound, i};
    }
    if (x->n_cands > 0) /* no candidate: qsort(NULL, 0) is undefined */
        qsort(order, (size_t)x->n_cands, sizeof *order, by_bound);
    int keep = sp->keep > 0 ? sp->keep : 10;
    x->res->best = pp_calloc((size_t)keep + 1, sizeof *x->res->best);
    pp_tune_rank_mem *mem = pp_calloc((size_t)x->gpus + 1, sizeof *mem);
    pp_sched_generators(&x->n_kinds);
    x->kind_best = pp_calloc((size_t)x->n_kinds, sizeof *x->kind_best);
    x->kind_slot = pp_calloc((size_t)x->n_kinds, sizeof *x->kind_slot);
    x->res->sched_best = pp_calloc((size_t)x->n_kinds + 1, sizeof *x->res->sched_best);
    for (int k = 0; x->kind_best && x->kind_slot && k < x->n_kinds; k++)
        x->kind_best[k] = INFINITY, x->kind_slot[k] = -1;
    cache_slot cache[CACHE_SLOTS];
    memset(cache, 0, sizeof cache);
    long clock = 0; /* the schedule cache's */
    pp_status st = x->res->best && mem && x->kind_best && x->kind_slot && x->res->sched_best
                       ? PP_OK
                       : PP_ERR_NOMEM;
    char why[200], usable[16]; /* the reason of every static-memory reject, formatted once */
    snprintf(why, sizeof why, "does not fit: weights, gradients and optimizer state alone "
                              "average more than %s usable per rank",
             pp_fmt_bytes(cap, usable, sizeof usable));
    const char *static_why = keep_text(x->res, why); /* shared by all of them */
    if (!static_why)
        st = PP_ERR_NOMEM;
    /* done[k]: candidate k was evaluated with a sibling (below) */
    unsigned char *done = pp_calloc((size_t)x->n_cands + 1, 1);
    if (!done)
        st = PP_ERR_NOMEM;
    x->done = done;
    if (st == PP_OK)
        st = lanes_index(x);
    for (long i = 0; i < x->n_cands && st == PP_OK; i++) {
        const cand *cd = &x->cands[order[i].i];
        if (done[order[i].i])
            continue;
        done[order[i].i] = 1; /* decided here (simulate_lanes asks) */
        if (isinf(cd->bound)) {
            x->res->pruned_memory++;
            st = add_reject_kept(x, &cd->cfg, 1, why, static_why);
        } else if (bounded_out(x, cd)) {
            x->res->bounded++;
            st = add_reject_kept(x, &cd->cfg, 3, "", "");
            if (st == PP_OK) {
                pp_tune_reject *j = &x->res->rejects[x->res->n_rejects - 1];
                j->bound = cd->bound, j->kth = kth_best(x), j->keep = keep;
                j->kind_best = kind_best_of(x, &cd->cfg);
            }
        } else {
            st = evaluate_one(x, cd, cache, &clock, mem);
            /* its layout's other settings while the schedule is in the cache: any order of
             * evaluation is exact, since the bound is held against a threshold that only
             * falls (a candidate skipped now would be skipped at the end); the order by bound
             * only finds the fast ones early */
            for (long j = cd->group; j < cd->group + cd->group_n && st == PP_OK; j++) {
                const cand *sib = &x->cands[j];
                if (done[j] || sib == cd || isinf(sib->bound) || bounded_out(x, sib))
                    continue;
                done[j] = 1;
                st = evaluate_one(x, sib, cache, &clock, mem);
            }
        }
        if (sp->progress && (i % 16 == 15 || i + 1 == x->n_cands))
            sp->progress(sp->progress_ctx, i + 1, x->n_cands);
    }
    for (int i = 0; i < CACHE_SLOTS; i++) {
        pp_status rs = release(x, cache[i].s);
        st = st == PP_OK ? rs : st;
    }
    prune_held(x->res);
    lanes_free(&x->lanes);
    free(done);
    free(order);
    free(mem);
    free(x->kind_best);
    free(x->kind_slot);
    return st;
}

/* The pass over the space with options o. */
static pp_status search_pass(const pp_tune_search_params *sp, const pp_tune_opts *o,
                             int allow_tp, pp_tune_result **out)
{
    *out = NULL;
    double t0 = pp_now();
    search x;
    memset(&x, 0, sizeof x);
    x.sp = sp;
    x.o = o;
    x.allow_tp = allow_tp;
    x.keep_tp = allow_tp && sp->trials > 0 && sp->hw->is_local && sp->model->pprun;
    x.m = sp->model;
    x.hw = sp->hw;
    x.gb = sp->global_batch > 0 ? sp->global_batch : sp->model->global_batch;
    x.gpus = sp->hw->nodes * sp->hw->gpus_per_node;
    x.res = pp_calloc(1, sizeof *x.res);
    if (!x.res)
        return PP_ERR_NOMEM;
    x.res->global_batch = x.gb;
    x.res->opts = *o;
    x.res->force = sp->force;
    x.res->allow_tp = allow_tp;
    x.shapes = pp_tune_shape_cache_create();
    pp_status st = x.shapes ? enumerate(&x) : PP_ERR_NOMEM;
    if (st == PP_OK)
        st = run_ranked(&x);
    free(x.cands);
    pp_tune_shape_cache_destroy(x.shapes);
    if (st != PP_OK) {
        pp_tune_result_destroy(x.res);
        return st;
    }
    x.res->wall_s = pp_now() - t0;
    *out = x.res;
    return PP_OK;
}

void pp_tune_search_adjust(const pp_tune_hw *hw, pp_tune_opts *o, int *allow_tp)
{
    if (hw->cpu_devices) /* the runtime's CPU backend runs these devices: fp32 (tensor and
                            sequence parallelism run there) */
        o->precision = PP_PREC_FP32;
    (void)allow_tp;
}

/* Every name in the comma list is a registry row: an unknown one is refused, not dropped
 * (a typo would otherwise search the rest silently). */
pp_status pp_tune_schedules_check(const char *list)
{
    if (!list)
        return PP_OK;
    for (const char *p = list;;) {
        size_t n = strcspn(p, ",");
        char name[64];
        if (n == 0 || n >= sizeof name)
            return PP_ERR(PP_ERR_INVALID, "--schedules: expected a comma list of schedule names, "
                                          "got \"%s\"", list);
        memcpy(name, p, n);
        name[n] = '\0';
        if (!pp_sched_lookup(name)) {
            char known[200];
            return PP_ERR(PP_ERR_INVALID, "--schedules: unknown schedule \"%s\" (known: %s)",
                          name, pp_sched_names(PP_SCHED_MEGATRON_NONE, ", ", known, sizeof known));
        }
        if (!p[n])
            return PP_OK;
        p += n + 1;
    }
}

pp_status pp_tune_search(const pp_tune_search_params *sp, pp_tune_result **out)
{
    *out = NULL;
    PP_TRY(pp_tune_schedules_check(sp->schedules));
    int gb = sp->global_batch > 0 ? sp->global_batch : sp->model->global_batch;
    if (gb < 1 || gb > PP_TUNE_MAX_GLOBAL_BATCH)
        return PP_ERR(PP_ERR_INVALID, "global batch: expected 1 to %d sequences, got %d",
                      PP_TUNE_MAX_GLOBAL_BATCH, gb);
    if (sp->max_b > gb)
        return PP_ERR(PP_ERR_INVALID, "max_b: expected at most the global batch (%d), got %d",
                      gb, sp->max_b);
    pp_tune_opts o = sp->opts;
    int allow_tp = sp->allow_tp;
    pp_tune_search_adjust(sp->hw, &o, &allow_tp);
    if (sp->force.cp >= 1 && sp->model->seq % sp->force.cp)
        return PP_ERR(PP_ERR_INVALID, "--cp: expected a divisor of the sequence %d, got %d",
                      sp->model->seq, sp->force.cp);
    pp_tune_result *r = NULL;
    pp_status st = search_pass(sp, &o, allow_tp, &r);
    if (st == PP_OK && sp->on_pass)
        sp->on_pass(sp->progress_ctx, r);
    if (st == PP_OK && r->n_best > 0)
        st = pp_tune_search_trials(sp, r);
    if (st != PP_OK) {
        pp_tune_result_destroy(r);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    *out = r;
    return PP_OK;
}

const char *pp_tune_reject_reason(const pp_tune_reject *j, char *buf, size_t n)
{
    if (j->stage != 3 || j->reason[0])
        return j->reason;
    snprintf(buf, n,
             "not simulated: lower bound %.4g s >= the %d-th best %.4g s and the best %s's "
             "%.4g s",
             j->bound, j->keep, j->kth, j->cfg.schedule, j->kind_best);
    return buf;
}

void pp_tune_result_destroy(pp_tune_result *r)
{
    if (!r)
        return;
    for (int i = 0; r->best && i < r->n_best; i++)
        free((void *)r->best[i].mem);
    for (int i = 0; i < r->n_held; i++)
        pp_sched_destroy(r->held[i]);
    free(r->held);
    free(r->best);
    free(r->sched_best);
    free(r->pareto);
    free(r->rejects);
    for (int i = 0; i < r->n_texts; i++)
        free(r->texts[i]);
    free(r->texts);
    free(r);
}
