/* timemodel.c — turns one configuration into the schedule simulator's costs.
 *
 * Compute: every GEMM of a block is timed by a roofline, max(2mnk / R, bytes moved / memory
 * bandwidth), with R = the cluster's GEMM rate at that shape (its measured sweep where there is
 * one, pp_tune_hw_gemm_rate) x opts.gemm_efficiency; attention's
 * s^2 products at R (no causal halving: Narayanan's count); element-wise kernels (norms,
 * residuals, dropout, activation) by the bytes they move. Backward = 2 x forward (dgrad + wgrad),
 * plus the recomputed forward for full recompute, or the attention core for selective.
 * Tensor parallel: every GEMM's split dimension divided by t, and Megatron's two all-reduces of
 * the s x b x h activation per block per direction (forward: after attention and MLP; backward:
 * their conjugates), ring all-reduce on the intra-node link, not overlapped.
 * Transfers: alpha-beta per hop; a hop uses NVLink when both pipeline ranks sit in one node for
 * every data-parallel replica, InfiniBand otherwise. Rank placement (stated in the output):
 * global GPU = tp + t * (pp + p * dp), so pipeline neighbours share a node when t * p allows.
 * REDUCE (replica sync of bidirectional schedules) and the data-parallel gradient all-reduce use
 * the ring model on fp32 (main) gradients. A rank's DP all-reduce starts when its own last
 * backward (and replica REDUCE) has ended in the simulated schedule: gradients accumulate over
 * the micro-batches, so nothing earlier can be reduced, but a rank that drains early reduces
 * while others still compute (each rank's group is disjoint). The optimizer step follows.
 * Not modelled: kernel launch gaps, NCCL protocol switching, network contention between jobs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_tune.h"

const char *pp_tune_fx_name(int i)
{
    static const char *const names[PP_TUNE_FX_COUNT] = {
        "tp-busbw", "recompute-ar", "seq-par", "attention", "gemm-shape", "kernel-cost",
        "dp-nics", "p2p-share"};
    return i >= 0 && i < PP_TUNE_FX_COUNT ? names[i] : NULL;
}

double pp_tune_ring_allreduce(double bytes, int n, double bw, double lat)
{
    if (n <= 1 || bytes <= 0)
        return 0.0;
    return 2.0 * (n - 1) / n * bytes / bw + 2.0 * (n - 1) * lat;
}

static double dtype_bytes(const pp_tune_opts *o)
{
    return o->precision == PP_PREC_FP32 ? 4.0 : 2.0;
}

/* Narayanan's FLOP count from the matrix shapes: 2 x elements for every matrix product. */
static double layer_matmul_params(const pp_tune_model *m)
{
    double h = m->hidden, kvd = (double)m->kv_heads * (h / m->heads);
    return h * (h + 2 * kvd) + h * h + (m->gated_mlp ? 3.0 : 2.0) * h * m->ffn;
}

double pp_tune_model_flops(const pp_tune_model *m, double sequences)
{
    double s = m->seq, h = m->hidden;
    double layer_fwd = 2.0 * s * layer_matmul_params(m) + 4.0 * s * s * h;
    double head_fwd = 2.0 * s * h * m->vocab;
    return 3.0 * sequences * (m->layers * layer_fwd + head_fwd);
}

typedef struct {
    double rate, bw, dt; /* rate: large-GEMM FLOP/s (attention); GEMMs ask hw by shape */
    double eff;
    const pp_tune_hw *hw;
} roof;

static double gemm(const roof *r, double M, double N, double K)
{
    double compute = 2.0 * M * N * K / (pp_tune_hw_gemm_rate(r->hw, M, N, K) * r->eff);
    double memory = r->dt * (M * K + K * N + M * N) / r->bw;
    return compute > memory ? compute : memory;
}

static void layer_times(const pp_tune_model *m, const pp_tune_config *c, const pp_tune_opts *o,
                        const roof *r, double tp_ar, pp_tune_op_times *out)
{
    double t = c->t, h = m->hidden, s = m->seq, M = s * c->b;
    double kvd = (double)m->kv_heads * (h / m->heads), f = m->ffn;
    double gemms = gemm(r, M, (h + 2 * kvd) / t, h) + gemm(r, M, h, h / t) +
                   gemm(r, M, f * (m->gated_mlp ? 2 : 1) / t, h) + gemm(r, M, h, f / t);
    double attn = 4.0 * c->b * s * s * h / t / r->rate;
    double elem_bytes = r->dt * M * h * (m->linear_bias ? 14.0 : 10.0) +
                        r->dt * M * f / t * (m->gated_mlp ? 3.0 : 2.0);
    double elem = elem_bytes / r->bw;
    double fwd = gemms + attn + elem;
    double bwd = 2.0 * (gemms + attn + elem);
    if (o->recompute == PP_TUNE_RECOMPUTE_FULL)
        bwd += fwd;
    else if (o->recompute == PP_TUNE_RECOMPUTE_SELECTIVE)
        bwd += attn;
    out->layer_f = fwd + 2.0 * tp_ar;
    out->layer_b = bwd + 2.0 * tp_ar;
}

void pp_tune_op_times_compute(const pp_tune_model *m, const pp_tune_hw *hw,
                              const pp_tune_config *c, const pp_tune_opts *o,
                              pp_tune_op_times *out)
{
    memset(out, 0, sizeof *out);
    double eff = o->gemm_efficiency > 0 ? o->gemm_efficiency : 1.0;
    roof r = {hw->gemm_flops * eff, hw->mem_bw, dtype_bytes(o), eff, hw};
    double h = m->hidden, M = (double)m->seq * c->b;
    out->p2p_bytes = r.dt * M * h;
    out->tp_allreduce = pp_tune_ring_allreduce(out->p2p_bytes, c->t, hw->intra_bw, hw->intra_lat);
    layer_times(m, c, o, &r, out->tp_allreduce, out);
    /* Embedding: gather of b*s rows forward, scatter-add backward (memory bound). */
    out->embed_f = 2.0 * r.dt * M * h / r.bw;
    out->embed_b = 2.0 * out->embed_f;
    /* Head: final norm, logits GEMM over the vocabulary padded to 128 t (Megatron), fp32
     * softmax cross-entropy reading and writing the logits. */
    double vpad = ceil((double)m->vocab / (128.0 * c->t)) * 128.0;
    double ce = 3.0 * 4.0 * M * vpad / r.bw;
    double norm = 2.0 * r.dt * M * h / r.bw;
    out->head_f = gemm(&r, M, vpad, h) + ce + norm;
    out->head_b = 2.0 * gemm(&r, M, vpad, h) + ce + 2.0 * norm;
}

/* Node of pipeline rank `pp` in data-parallel replica `dp` under tp-pp-dp placement. */
static long node_of(const pp_tune_hw *hw, const pp_tune_config *c, int pp, int dp)
{
    long gpu = (long)c->t * ((long)pp + (long)c->p * dp);
    return gpu / hw->gpus_per_node;
}

/* 1 when ranks i and j of the pipeline share a node in every replica. The placement repeats
 * after gpus_per_node replicas at the latest, so checking that many is exact. */
static int same_node(const pp_tune_hw *hw, const pp_tune_config *c, int i, int j)
{
    int reps = c->d < hw->gpus_per_node ? c->d : hw->gpus_per_node;
    for (int k = 0; k < reps; k++)
        if (node_of(hw, c, i, k) != node_of(hw, c, j, k))
            return 0;
    return 1;
}

static void fill_links(const pp_tune_hw *hw, const pp_tune_config *c, const pp_sched *s,
                       pp_cost *cost)
{
    int D = s->ranks;
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            int intra = same_node(hw, c, i, j);
            cost->latency[i * D + j] = intra ? hw->intra_lat : hw->inter_lat;
            cost->inv_bw[i * D + j] = 1.0 / (intra ? hw->intra_bw : hw->inter_bw);
        }
}

static void fill_compute(const pp_tune_op_times *ot, const pp_sched *s, pp_cost *cost)
{
    int S = s->stages_per_pipe;
    for (int pipe = 0; pipe < s->n_pipes; pipe++)
        for (int st = 0; st < S; st++) {
            int k = pipe * S + st, layers = pp_sched_stage_layers(s, pipe, st);
            cost->f[k] = layers * ot->layer_f + (st == 0 ? ot->embed_f : 0) +
                         (st == S - 1 ? ot->head_f : 0);
            cost->b[k] = layers * ot->layer_b + (st == 0 ? ot->embed_b : 0) +
                         (st == S - 1 ? ot->head_b : 0);
            cost->send_bytes_f[k] = ot->p2p_bytes;
            cost->send_bytes_b[k] = ot->p2p_bytes;
        }
}

/* REDUCE: ring all-reduce among its participants of the gradients one participant holds for
 * the listed stages; the link is intra-node only if every pair of participants shares a node. */
static void fill_reduces(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                         const pp_tune_opts *o, const pp_sched *s, const double *layer_params,
                         pp_cost *cost)
{
    for (int id = 0; id < s->n_reduces; id++) {
        const pp_reduce *rd = &s->reduces[id];
        double params = 0;
        int r0 = rd->ranks[0];
        for (int k = 0; k < rd->n_stages; k++) {
            const pp_stage_ref *ref = &rd->stages[k];
            if (pp_sched_stage(s, ref->pipe, ref->stage)->rank != r0)
                continue;
            params += *layer_params * pp_sched_stage_layers(s, ref->pipe, ref->stage);
            if (ref->stage == 0 || ref->stage == s->stages_per_pipe - 1)
                params += (double)m->vocab * m->hidden / c->t;
        }
        int intra = 1;
        for (int a = 0; a < rd->n_ranks; a++)
            for (int b = a + 1; b < rd->n_ranks; b++)
                intra &= same_node(hw, c, rd->ranks[a], rd->ranks[b]);
        cost->reduce[id] = pp_tune_ring_allreduce(params * pp_tune_bytes_per_param(o, 1).grads,
                                                  rd->n_ranks,
                                                  intra ? hw->intra_bw : hw->inter_bw,
                                                  intra ? hw->intra_lat : hw->inter_lat);
    }
}

/* Data-parallel gradient sync of one rank's parameters: a ring all-reduce of fp32 gradients, or
 * with the distributed optimizer a reduce-scatter of gradients plus an all-gather of the 16-bit
 * weights. Members sit t*p GPUs apart: inside a node only when the whole group fits in one. */
double pp_tune_dp_sync_time(const pp_tune_hw *hw, const pp_tune_config *c, const pp_tune_opts *o,
                            double params)
{
    if (c->d <= 1)
        return 0.0;
    long span = (long)c->t * c->p * c->d;
    int intra = span <= hw->gpus_per_node;
    double bw = intra ? hw->intra_bw : hw->inter_bw, lat = intra ? hw->intra_lat : hw->inter_lat;
    pp_tune_param_bytes bp = pp_tune_bytes_per_param(o, 1);
    if (!o->distributed_optimizer)
        return pp_tune_ring_allreduce(params * bp.grads, c->d, bw, lat);
    double frac = (double)(c->d - 1) / c->d;
    return frac * params * (bp.grads + bp.weights) / bw + 2.0 * (c->d - 1) * lat;
}

/* Adam update, memory bound: fp32 master weight, m, v read and written, gradient read, 16-bit
 * weight written: ~30 bytes per parameter (28 in fp32). Sharded by d with the distributed
 * optimizer. */
double pp_tune_optimizer_time(const pp_tune_hw *hw, const pp_tune_config *c,
                              const pp_tune_opts *o, double params)
{
    double per = o->precision == PP_PREC_FP32 ? 28.0 : 30.0;
    double n = o->distributed_optimizer ? params / c->d : params;
    return n * per / hw->mem_bw;
}

static pp_status alloc_cost(const pp_sched *s, pp_cost *cost)
{
    memset(cost, 0, sizeof *cost);
    size_t k = (size_t)s->n_pipes * s->stages_per_pipe, DD = (size_t)s->ranks * s->ranks;
    cost->f = pp_calloc(k, sizeof(double));
    cost->b = pp_calloc(k, sizeof(double));
    cost->send_bytes_f = pp_calloc(k, sizeof(double));
    cost->send_bytes_b = pp_calloc(k, sizeof(double));
    cost->latency = pp_calloc(DD, sizeof(double));
    cost->inv_bw = pp_calloc(DD, sizeof(double));
    cost->reduce = pp_calloc(s->n_reduces > 0 ? (size_t)s->n_reduces : 1, sizeof(double));
    if (!cost->f || !cost->b || !cost->send_bytes_f || !cost->send_bytes_b || !cost->latency ||
        !cost->inv_bw || !cost->reduce) {
        pp_cost_fini(cost);
        return PP_ERR_NOMEM;
    }
    return PP_OK;
}

pp_status pp_tune_costs(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                        const pp_tune_opts *o, const pp_sched *s, const pp_tune_rank_mem *mem,
                        pp_cost *cost, pp_tune_step_extra *extra)
{
    pp_tune_rank_mem *own = NULL;
    if (!mem) { /* each rank's parameters, from the memory model's accounting */
        own = pp_calloc((size_t)s->ranks, sizeof *own);
        if (!own)
            return PP_ERR_NOMEM;
        pp_status st = pp_tune_memory(m, c, s, o, own);
        if (st != PP_OK) {
            free(own);
            return pp_err_trace(st, __FILE__, __LINE__);
        }
        mem = own;
    }
    pp_tune_op_times ot;
    pp_tune_op_times_compute(m, hw, c, o, &ot);
    pp_status st = alloc_cost(s, cost);
    if (st != PP_OK) {
        free(own);
        return st;
    }
    fill_compute(&ot, s, cost);
    fill_links(hw, c, s, cost);
    pp_tune_params pc;
    pp_tune_model_params(m, &pc);
    double layer_params = pc.per_layer / c->t;
    fill_reduces(m, hw, c, o, s, &layer_params, cost);

    double *dp_rank = extra->dp_rank;
    memset(extra, 0, sizeof *extra);
    extra->dp_rank = dp_rank;
    for (int r = 0; r < s->ranks; r++) {
        double ar = pp_tune_dp_sync_time(hw, c, o, mem[r].params);
        double opt = pp_tune_optimizer_time(hw, c, o, mem[r].params);
        if (dp_rank)
            dp_rank[r] = ar;
        extra->dp_allreduce = fmax(extra->dp_allreduce, ar);
        extra->optimizer = fmax(extra->optimizer, opt);
    }
    free(own);
    return PP_OK;
}
