/* memory.c — peak memory per pipeline rank for one configuration (never one number for the
 * whole pipeline).
 *
 * A rank's bytes = weights + gradients + optimizer state of the stages it holds (both replicas
 * for bidirectional schedules, since it holds stages of both pipes), + saved activations at the
 * rank's own peak, found by walking its action list (F saves, B frees: the peak depends only on
 * the order of the rank's actions, which is exactly what the simulator's peak_activations
 * reports in units of micro-batch x L/D layers) + communication buffers + workspace.
 *
 * Bytes per parameter: Megatron-LM's theoretical_memory_usage.py table: bf16 weights, fp32
 * main grads, Adam (fp32 master + m + v) = 2 + 4 + 12 = 18; distributed optimizer 6 + 12/d.
 * The bundled CPU runtime is fp32 throughout: 4 + 4 + 8 = 16 (8 + 8/d distributed).
 *
 * Activations per layer: Korthikanti et al. 2022, Table 2, *tensor parallel without sequence
 * parallelism*, generalised from the paper's own derivation to grouped-query attention, any FFN
 * width and gated MLPs (it reduces to 10 + 24/t for GPT shapes); flash attention by default
 * (the 5as/(ht) score term removed); --sequence-parallel divides the remaining term by t too
 * (the table's "tensor + sequence parallel" rows). Split backward (zb-h1, zbv, dualpipev):
 * from I to W a micro-batch holds only what the weight gradients need (linear inputs and output
 * gradients, pp_tune_held_for_w_bytes_per_layer), the rest being freed by I. Mixture-of-experts
 * layers (the model's layer rule, pp_model_layer_moe, counted per stage from its layer range):
 * the routed experts' weights experts/ep per rank, their gradients and Adam state sharded over
 * the expert-data-parallel group, the routed activations and the all-to-all buffers
 * (pp_tune_moe_acts_of). Not modelled: context parallelism, activation offloading, CUDA-graph pools.
 */
#include <math.h>
#include <string.h>

#include <stdlib.h>

#include "mem_shape.h"
#include "pp_tune.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
/* CUDA context, cuBLAS/NCCL workspaces and caching-allocator fragmentation on a GPU rank: an
 * estimate (PyTorch on H100 typically shows 0.5 GiB of context and ~1 GiB of slack), stated in
 * the output as "workspace". */
#define GPU_FIXED_RESERVE (1.5 * GIB)

void pp_tune_opts_default(pp_tune_opts *o)
{
    memset(o, 0, sizeof *o);
    o->precision = PP_PREC_BF16;
    o->flash_attention = 1;
    o->headroom = 0.05;
    o->gemm_efficiency = 1.0;
    o->moe_imbalance = PP_TUNE_MOE_IMBALANCE;
}

double pp_tune_moe_imbalance(const pp_tune_opts *o)
{
    return o->moe_imbalance >= 1.0 ? o->moe_imbalance : PP_TUNE_MOE_IMBALANCE;
}

double pp_tune_mem_capacity(const pp_tune_hw *hw, const pp_tune_opts *o)
{
    return hw->mem_bytes * (1.0 - o->headroom);
}

int pp_tune_mixed_precision(const pp_tune_opts *o)
{
    return o->precision == PP_PREC_BF16; /* the one mixed precision of pp_precision */
}

static double act_dtype(const pp_tune_opts *o)
{
    return o->precision == PP_PREC_FP32 ? 4.0 : 2.0;
}

/* Tokens of one micro-batch on one rank: the sequence split over the cp context-parallel ranks
 * (ring attention: every activation of a layer is per token, K/V of the other chunks pass
 * through and are not kept; Megatron-Core's context parallelism with load-balanced causal
 * chunks holds 2 of the 2 cp chunks on each rank). */
static double local_seq(const pp_tune_model *m, const pp_config *c)
{
    return (double)m->seq / (c->cp > 1 ? c->cp : 1);
}

/* 1 when c runs Megatron sequence parallelism (it needs t > 1). */
static int seq_par(const pp_config *c)
{
    return c->sequence_parallel && c->t > 1;
}

/* Korthikanti's derivation, per layer and micro-batch, in units of s*b*h 16-bit elements,
 * per block variant (the model's shape, not GPT's 34 sbh):
 *   outside the tensor-parallel regions: attention input 2, attention dropout mask 1, MLP input
 *   2, MLP dropout mask 1, two norm inputs 4 (LayerNorm or RMSNorm: each keeps its input)
 *                                                    -> 10 (8 without dropout: Llama)
 *   inside (divided by t): Q 2 qd/h, K and V 2*kvd/h each, projection input 2 qd/h (qd =
 *   heads x head width, kvd = kv_heads x head width: qd = h but where head_dim is not h/heads,
 *   as Qwen3's) -> 8 for MHA, 4 + 4 kvd/h for GQA; with Qwen3's per-head q/k RMSNorm its
 *   inputs, 2 (qd + kvd)/h more
 *   MLP: 2*ffn/h per saved ffn-wide tensor: two for GeLU (its input and output); three for
 *   SwiGLU (the two ffn-wide tensors its backward needs, gate and up, and its output, the
 *   down projection's input)                       -> 16 for ffn = 4h
 *   scores (no flash attention): 5 a s / h, inside TP; selective recomputation drops them
 *   (the attention core is recomputed: Korthikanti sec. 5, Megatron's --recompute-granularity
 *   selective), so under flash attention selective keeps exactly what none keeps.
 * Full recomputation keeps the layer's input, 2, of which each tensor rank keeps its 1/t
 * sequence shard under sequence parallelism (Korthikanti Table 2, "full, tensor + sequence
 * parallel": 2sbh/t). Context parallelism divides s by cp throughout (local_seq).
 * The table's rows are recovered for GPT shapes (the tests check 10 + 24/t). */
static double layer_act(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o,
                        pp_recompute rc, int moe)
{
    double s = local_seq(m, c), h = m->hidden, sbh = s * c->b * h;
    double t = c->t, scale = act_dtype(o) / 2.0; /* the table counts 16-bit values */
    if (rc == PP_RECOMPUTE_FULL)
        return scale * 2.0 * sbh / (seq_par(c) ? t : 1.0);
    double qd = pp_tune_model_qd(m), kvd = pp_tune_model_kvd(m);
    double has_dropout = m->linear_bias ? 1.0 : 0.0; /* GPT/BERT train with dropout, Llama not */
    double outside = 8.0 + 2.0 * has_dropout;
    double attn_in = 2.0 * qd / h + 4.0 * kvd / h + 2.0 * qd / h +
                     (m->block.qk_norm ? 2.0 * (qd + kvd) / h : 0.0);
    double mlp_in = moe ? 0.0 : (m->gated_mlp ? 3.0 : 2.0) * 2.0 * m->ffn / h;
    double scores = 0;
    if (!o->flash_attention && rc == PP_RECOMPUTE_NONE)
        scores = 5.0 * m->heads * s / h;
    double moe_acts = 0; /* a MoE layer: the experts' terms in place of the dense MLP's */
    if (moe) {
        pp_tune_moe_acts a;
        pp_tune_moe_acts_of(m, c, o, &a);
        moe_acts = a.total;
    }
    if (seq_par(c))
        return scale * sbh * (outside + attn_in + mlp_in + scores) / t + moe_acts;
    return scale * sbh * (outside + (attn_in + mlp_in + scores) / t) + moe_acts;
}

int pp_tune_ep(const pp_config *c)
{
    return c->ep > 1 ? c->ep : 1;
}

pp_config pp_tune_expert_dp_config(const pp_config *c)
{
    pp_config e = *c;
    e.d = pp_tune_shard_ranks(c) / pp_tune_ep(c);
    e.cp = 1;
    return e;
}

int pp_tune_moe_layers_in(const pp_tune_model *m, int begin, int end)
{
    int n = 0;
    for (int l = begin; l < end; l++)
        n += pp_model_layer_moe(&m->block, l);
    return n;
}

/* A MoE layer's activations (Megatron-Core's alltoall token dispatcher, dropless, grouped
 * GEMM), per micro-batch, on the busiest expert-parallel rank: T = the micro-batch's tokens on
 * the rank (s b / cp; each tensor rank routes its 1/t sequence shard under sequence
 * parallelism, which Megatron requires for MoE with t > 1), k = top_k, f = imbalance:
 *   dispatch: the permuted copies of the routed tokens' hidden states, the experts' first
 *     GEMM input, k T h (their wgrad needs them), x f;
 *   experts: SwiGLU's gate and up outputs and their product (the down projection's input),
 *     3 k T ffn_e / t (two for a plain MLP), x f;
 *   combine: the experts' outputs kept for the weighted sum's backward (the routing weights'
 *     gradient is their dot product with the output gradient), k T h, x f;
 *   router: its logits and the probabilities the top-k and the auxiliary loss read, 2 T E in
 *     fp32 (the scores are computed in fp32 for the softmax; 4 bytes);
 *   shared experts: a dense MLP of the shared width at T tokens (3 T ffn_s / t);
 *   all-to-all: the dispatch's send and receive buffers, 2 k T h x f, transient (comm).
 * The MLP input (the router's and the shared experts') is the dense layer's term, kept. */
void pp_tune_moe_acts_of(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o,
                         pp_tune_moe_acts *out)
{
    memset(out, 0, sizeof *out);
    const pp_moe_cfg *e = &m->block.moe;
    if (e->experts <= 0)
        return;
    double sp = seq_par(c) ? c->t : 1.0, T = local_seq(m, c) * c->b, dt = act_dtype(o);
    double f = pp_tune_moe_imbalance(o), k = e->top_k, h = m->hidden;
    double wide = m->gated_mlp ? 3.0 : 2.0;
    out->dispatch = f * k * T / sp * h * dt;
    out->experts = f * wide * k * T * (double)e->ffn / c->t * dt;
    out->combine = f * k * T / sp * h * dt;
    out->router = 2.0 * T / sp * e->experts * 4.0;
    out->shared = e->shared_ffn > 0 ? wide * T * (double)e->shared_ffn / c->t * dt : 0.0;
    out->a2a = 2.0 * f * k * T / sp * h * dt;
    out->total = out->dispatch + out->experts + out->combine + out->router + out->shared;
}

void pp_tune_layer_params_rank(const pp_tune_model *m, const pp_config *c, int moe,
                               double *dense, double *experts)
{
    pp_tune_params pc;
    pp_tune_model_params(m, &pc);
    double h = m->hidden, norm = m->norm_bias ? 2 * h : h;
    const pp_moe_cfg *e = &m->block.moe;
    if (!moe || e->experts <= 0) {
        *dense = (pc.per_layer - 2 * norm) / c->t + 2 * norm;
        *experts = 0;
        return;
    }
    double routed = (double)e->experts * pc.expert, router = h * e->experts;
    *dense = (pc.moe_layer - routed - router - 2 * norm) / c->t + router + 2 * norm;
    *experts = routed / pp_tune_ep(c) / c->t;
}

double pp_tune_act_bytes_per_layer(const pp_tune_model *m, const pp_config *c,
                                   const pp_tune_opts *o)
{
    return layer_act(m, c, o, c->recompute, 0);
}

/* A stage's layers: the recomputed ones keep layer_act(full), the others what no recomputation
 * keeps (recompute_layers = k: the first k of the stage, Megatron's block method). */
static double stage_layers_act(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o,
                               int begin, int end)
{
    int layers = end - begin, moe = pp_tune_moe_layers_in(m, begin, end);
    if (c->recompute != PP_RECOMPUTE_FULL)
        return (layers - moe) * layer_act(m, c, o, c->recompute, 0) +
               moe * layer_act(m, c, o, c->recompute, 1);
    int k = pp_tune_recomputed_layers(c, layers), moe_k = pp_tune_moe_layers_in(m, begin, begin + k);
    return k * layer_act(m, c, o, PP_RECOMPUTE_FULL, 0) +
           (layers - k - (moe - moe_k)) * layer_act(m, c, o, PP_RECOMPUTE_NONE, 0) +
           (moe - moe_k) * layer_act(m, c, o, PP_RECOMPUTE_NONE, 1);
}

/* What one layer keeps for one micro-batch from its I to its W (split backward): everything W
 * needs to form dW = X^T dY for each linear, the Zero Bubble paper's M_W (Qi et al. 2024,
 * Table 1, 32 sbh for GPT shapes without TP). In Korthikanti's units of s*b*h 16-bit elements:
 *   inputs X (already among the saved activations; I frees the rest of them): the QKV input 2
 *   and the first MLP input 2 (outside the TP regions, every rank holds them whole), the
 *   projection input 2 qd/(h t) and the last MLP input 2*ffn/(h t) (inside);
 *   output gradients dY (new: produced by I, consumed by W): QKV 2 (qd + 2 kvd)/(h t), the
 *   projection 2, the first MLP (up and gate for a gated MLP) 2 ffn/(h t) each, the last 2.
 * Assumptions: biases' and norms' gradients are reductions I computes at once (nothing held);
 * under sequence parallelism the inputs outside the TP regions are held gathered (I re-gathers
 * them, so that W stays local: the time model charges the gather to I) and the row-parallel
 * output gradients arrive gathered, so neither is divided by t; full recompute holds the same
 * tensors, recomputed during I (more than the 2 sbh its forward kept). */
double pp_tune_held_for_w_bytes_per_layer(const pp_tune_model *m, const pp_config *c,
                                          const pp_tune_opts *o)
{
    double s = local_seq(m, c), h = m->hidden, sbh = s * c->b * h, ffn = m->ffn, t = c->t;
    double qd = pp_tune_model_qd(m), kvd = pp_tune_model_kvd(m);
    double inputs = 2.0 + 2.0 + (2.0 * qd / h + 2.0 * ffn / h) / t;
    double grads = 2.0 * (qd + 2.0 * kvd) / h / t + 2.0 +
                   (m->gated_mlp ? 2.0 : 1.0) * 2.0 * ffn / h / t + 2.0;
    return act_dtype(o) / 2.0 * sbh * (inputs + grads);
}

/* What a MoE layer holds for W beyond a dense one's (split backward): the experts' GEMM inputs
 * and output gradients at k T f routed rows in place of the dense MLP's at T (the dispatch
 * copies are counted among the saved activations already; the output gradients are new), in
 * bytes: the up/gate output gradients (2 x ffn_e / t wide, or 1) and the down projection's
 * input (ffn_e / t) and output gradient (h), less the dense MLP's same terms. */
static double moe_held_extra(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o)
{
    const pp_moe_cfg *e = &m->block.moe;
    if (e->experts <= 0)
        return 0.0;
    double T = local_seq(m, c) * c->b, dt = act_dtype(o), h = m->hidden, t = c->t;
    double rows = pp_tune_moe_imbalance(o) * e->top_k * T, g = m->gated_mlp ? 2.0 : 1.0;
    double routed = rows * ((g + 1.0) * e->ffn / t + h) * dt;
    double shared = e->shared_ffn > 0 ? T * (g + 1.0) * e->shared_ffn / t * dt : 0.0;
    double dense = T * ((g + 1.0) * m->ffn / t + h) * dt;
    return fmax(0.0, routed + shared - dense);
}

/* The first stage's W (the embedding's scatter-add) holds the token ids (8 s b, int64) and the
 * embedding output's gradient (s b h); the last stage's (the LM head's wgrad) the head input
 * (s b h) and the logits' gradient (s b V / t), in the activation dtype. */
static double embed_held(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o)
{
    double sb = local_seq(m, c) * c->b;
    return 8.0 * sb + act_dtype(o) * sb * m->hidden;
}

static double head_held(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o)
{
    double sb = local_seq(m, c) * c->b;
    return act_dtype(o) * sb * ((double)m->hidden + (double)m->vocab / c->t);
}

/* Extra activations of a pipe's first stage (token ids 8sb as int64, embedding dropout mask
 * sbh, of which each rank keeps its 1/t of the sequence under sequence parallelism: Megatron
 * scatters the embedding output to the sequence-parallel region before its dropout) and last
 * stage (final norm + head inputs 4sbh, fp32 logits for the loss 4 s b V / t):
 * Korthikanti's "embedding" and "output layer + cross-entropy" terms. */
static double embed_act(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o)
{
    double sb = local_seq(m, c) * c->b, sp = seq_par(c) ? c->t : 1;
    return 8.0 * sb + (m->linear_bias ? sb * m->hidden * act_dtype(o) / 2.0 / sp : 0.0);
}

static double head_act(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o)
{
    double sb = local_seq(m, c) * c->b, h = m->hidden;
    return act_dtype(o) * 2.0 * sb * h + 4.0 * sb * (double)m->vocab / c->t;
}

pp_tune_param_bytes pp_tune_bytes_per_param(const pp_tune_opts *o, const pp_config *c)
{
    int d = pp_tune_shard_ranks(c);
    pp_tune_param_bytes r;
    if (!pp_tune_mixed_precision(o)) {
        r.weights = 4, r.grads = 4, r.optim = 8; /* fp32 weights/grads, Adam m and v */
    } else {
        r.weights = 2, r.grads = 4, r.optim = 12; /* bf16 weights, fp32 main grads, Adam */
    }
    if (c->shard != PP_SHARD_NONE && d > 1)
        r.optim /= d;
    if (c->shard == PP_SHARD_GRADIENTS && d > 1)
        r.grads /= d;
    return r;
}

/* Parameters one stage holds on its rank, after the tensor-parallel split (norms replicated).
 * The token embedding and the head are split over the vocabulary, ceil(V/t) rows per rank
 * (Megatron-LM's VocabParallelEmbedding and column-parallel output layer; the bundled
 * runtime's split, runtime/plan/pp_rt_sizes.h's pp_rt_vocab_rows, which pads the last ranks
 * to ceil(V/t) where Megatron pads V to a multiple of 128 t); learned positions are whole on
 * every rank. */
static double stage_params(const pp_tune_model *m, const pp_mem_place *pl, const pp_config *c,
                           int pipe, int stage, double *expert_params)
{
    int t = c->t;
    pp_tune_params pc;
    pp_tune_model_params(m, &pc);
    double h = m->hidden, norm = m->norm_bias ? 2 * h : h;
    const pp_stage *st = &pl->stages[pipe * pl->S + stage];
    int moe = pp_tune_moe_layers_in(m, st->layer_begin, st->layer_end);
    double dense, md, me;
    pp_tune_layer_params_rank(m, c, 0, &dense, &me);
    pp_tune_layer_params_rank(m, c, 1, &md, &me);
    double n = dense * (st->layer_end - st->layer_begin - moe) + md * moe;
    *expert_params = moe ? me * moe : 0.0;
    n += *expert_params;
    double Vl = (double)(((long long)m->vocab + t - 1) / t);
    int S = pl->S;
    if (stage == 0) /* pc.embed: V h and the position table */
        n += pc.embed - (double)m->vocab * h + Vl * h;
    if (stage == S - 1) {
        n += norm;
        /* An untied head has its own V x h matrix; a tied one needs a copy of the embedding on
         * the last stage when that stage is not on the embedding's rank (Megatron keeps one and
         * sums the gradients). */
        int first_rank = pl->stages[pipe * S].rank;
        if (!m->tied_embed || st->rank != first_rank)
            n += Vl * h;
    }
    return n;
}

static int place_layers(const pp_mem_place *pl, int i)
{
    return pl->stages[i].layer_end - pl->stages[i].layer_begin;
}

static double stage_act(const pp_tune_model *m, const pp_mem_place *pl, const pp_config *c,
                        const pp_tune_opts *o, int i)
{
    double a = stage_layers_act(m, c, o, pl->stages[i].layer_begin, pl->stages[i].layer_end);
    if (i % pl->S == 0)
        a += embed_act(m, c, o);
    if (i % pl->S == pl->S - 1)
        a += head_act(m, c, o);
    return a;
}

static double stage_held(const pp_tune_model *m, const pp_mem_place *pl, const pp_config *c,
                         const pp_tune_opts *o, int i, double per_layer)
{
    double a = per_layer * place_layers(pl, i) +
               pp_tune_moe_layers_in(m, pl->stages[i].layer_begin, pl->stages[i].layer_end) *
                   moe_held_extra(m, c, o);
    if (i % pl->S == 0)
        a += embed_held(m, c, o);
    if (i % pl->S == pl->S - 1)
        a += head_held(m, c, o);
    return a;
}

/* Largest transient of a rank's stages: the fp32 logit gradient of the head, the MLP's
 * ffn-wide backward temporaries, or (full recompute) one layer's recomputed activations; with
 * gradient sharding (ZeRO-2) the largest layer's 16-bit gradient, which lives from its
 * backward until its reduce-scatter into the rank's fp32 shard (a framework's bucket, as
 * DeepSpeed's stage 2 reduces each bucket as it fills). This is the mixed-precision model; in
 * fp32 the memory is the bundled runtime's own plan (pp_tune_memory_runtime), whose ZeRO-2
 * holds a whole stage's fp32 gradient while that stage's backwards run
 * (runtime/executor_zero2.c). */
static double transient(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o,
                        int holds_head, int holds_moe)
{
    double sb = local_seq(m, c) * c->b;
    double w = 2.0 * sb * m->ffn / c->t * act_dtype(o);
    const pp_moe_cfg *e = &m->block.moe;
    if (holds_moe) /* the experts' ffn-wide backward temporaries at k T f routed rows */
        w = fmax(w, 2.0 * pp_tune_moe_imbalance(o) * e->top_k * sb * e->ffn / c->t *
                        act_dtype(o));
    if (holds_head) {
        double logits = 4.0 * sb * m->vocab / c->t;
        if (logits > w)
            w = logits;
    }
    if (c->recompute == PP_RECOMPUTE_FULL)
        w += layer_act(m, c, o, PP_RECOMPUTE_NONE, holds_moe);
    if (c->shard == PP_SHARD_GRADIENTS && pp_tune_shard_ranks(c) > 1) {
        double dense, md, me;
        pp_tune_layer_params_rank(m, c, 0, &dense, &me);
        pp_tune_layer_params_rank(m, c, holds_moe, &md, &me);
        w += act_dtype(o) * fmax(dense, md + me);
    }
    return w;
}

char *pp_tune_rank_mem_str(const pp_tune_rank_mem *x, char *buf, size_t n)
{
    double k;
    const char *unit = pp_fmt_bytes_unit(x->total, &k);
    snprintf(buf, n,
             "%.1f %s = weights %.1f + grads %.1f + optimizer %.1f + activations %.1f (%.2g in "
             "flight) + comm %.1f + workspace %.1f",
             x->total / k, unit, x->weights / k, x->grads / k, x->optim / k, x->acts / k,
             x->peak_units, x->comm / k, x->workspace / k);
    return buf;
}

/* The accounting of pp_tune_memory over the placement pl, each rank's activations from the
 * schedule's walk (s) or from its shape (sh: *exact = 0 where the shape cannot give the walk's
 * bytes). Per stage (i = pipe * S + stage): w[i] its saved activations of one micro-batch, held[i]
 * what W needs of them from I to W (the walk's weights), prm[i] its parameters. */
static pp_status account(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o,
                         const pp_mem_place *pl, const pp_sched *s, const pp_tune_shape *sh,
                         pp_tune_rank_mem *mem, int *exact)
{
    if (c->t < 1 || c->b < 1 || c->d < 1)
        return PP_ERR(PP_ERR_INVALID, "memory model needs t, b, d >= 1 (got t=%d b=%d d=%d)",
                      c->t, c->b, c->d);
    pp_tune_param_bytes bp = pp_tune_bytes_per_param(o, c);
    pp_config ce = pp_tune_expert_dp_config(c);
    pp_tune_param_bytes bpe = pp_tune_bytes_per_param(o, &ce);
    pp_tune_moe_acts moe;
    pp_tune_moe_acts_of(m, c, o, &moe);
    double p2p = act_dtype(o) * local_seq(m, c) * c->b * m->hidden; /* one boundary tensor */
    int S = pl->S, n = pl->n_pipes * S, e = 0;
    double *w = pp_calloc(4 * (size_t)n, sizeof *w), *held = w + n, *prm = held + n;
    double *eprm = prm + n; /* of prm: the routed experts' */
    if (!w)
        return PP_ERR_NOMEM;
    double per_layer_w = pp_tune_held_for_w_bytes_per_layer(m, c, o);
    for (int i = 0; i < n; i++) {
        w[i] = stage_act(m, pl, c, o, i);
        held[i] = stage_held(m, pl, c, o, i, per_layer_w);
        prm[i] = stage_params(m, pl, c, i / S, i % S, &eprm[i]);
        if (sh) {
            int ew = pp_mem_frac_bits(w[i]), eh = pp_mem_frac_bits(held[i]);
            e = ew > e ? ew : e;
            e = eh > e ? eh : e;
        }
    }
    *exact = 1;
    for (int r = 0; r < pl->ranks && *exact; r++) {
        pp_tune_rank_mem *x = &mem[r];
        memset(x, 0, sizeof *x);
        int holds_head = 0, pipes_here = 0, pipe_seen = -1, holds_moe = 0;
        for (int k = pl->loc_off[r]; k < pl->loc_off[r + 1]; k++) {
            int i = pl->loc[k]; /* increasing: pipe by pipe, stage by stage */
            x->params += prm[i];
            x->expert_params += eprm[i];
            holds_head |= i % S == S - 1;
            holds_moe |= pp_tune_moe_layers_in(m, pl->stages[i].layer_begin,
                                               pl->stages[i].layer_end) > 0;
            pipes_here += i / S != pipe_seen;
            pipe_seen = i / S;
        }
        /* the routed experts' gradients and Adam state are sharded over their own
         * expert-data-parallel group (d x cp / ep ranks), the rest over d x cp */
        double dense = x->params - x->expert_params;
        x->weights = x->params * bp.weights;
        x->grads = dense * bp.grads + x->expert_params * bpe.grads;
        x->optim = dense * bp.optim + x->expert_params * bpe.optim;
        if (s) {
            x->acts = pp_sched_in_flight_peak_split(s, r, w, held);
            x->peak_units = pp_sched_in_flight_peak(s, r, NULL);
        } else if (!pp_tune_shape_peak(sh, r, w, held, e, &x->acts, &x->peak_units)) {
            *exact = 0;
        }
        /* One outgoing activation and one outgoing gradient in flight per pipe through the
         * rank (received tensors become the next stage's saved input, counted above). */
        x->comm = pl->ranks > 1 ? 2.0 * p2p * pipes_here : 0.0;
        if (holds_moe) /* one MoE layer's all-to-all buffers at a time */
            x->comm += moe.a2a;
        x->workspace = transient(m, c, o, holds_head, holds_moe) +
                       (pp_tune_mixed_precision(o) ? GPU_FIXED_RESERVE : 0.0);
        x->total = x->weights + x->grads + x->optim + x->acts + x->comm + x->workspace;
    }
    free(w);
    return PP_OK;
}

pp_status pp_tune_memory(const pp_tune_model *m, const pp_config *c, const pp_sched *s,
                         const pp_tune_opts *o, pp_tune_rank_mem *mem)
{
    if (c->t < 1 || c->b < 1 || c->d < 1)
        return PP_ERR(PP_ERR_INVALID, "memory model needs t, b, d >= 1 (got t=%d b=%d d=%d)",
                      c->t, c->b, c->d);
    if (!pp_tune_mixed_precision(o) && m->block.moe.experts > 0 &&
        (c->t > 1 || c->cp > 1 || pp_model_check_runnable(&m->block) != PP_OK))
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: a mixture-of-experts model in fp32 (the bundled runtime's plan): "
                      "pprun runs MoE layers on the cpu backend without tp or cp, of SwiGLU "
                      "experts in every layer, so its memory plan has no other; plan it in "
                      "bf16 for a GPU cluster", m->name);
    if (!pp_tune_mixed_precision(o)) /* what the bundled runtime runs: its own plan */
        return pp_tune_memory_runtime(m, c, s, o, mem);
    pp_mem_place pl;
    int *owned = NULL, exact;
    PP_TRY(pp_mem_place_of(s, &pl, &owned));
    pp_status st = account(m, c, o, &pl, s, NULL, mem, &exact);
    free(owned);
    return st;
}

pp_status pp_tune_memory_shape(const pp_tune_model *m, const pp_config *c, const pp_tune_shape *sh,
                               const pp_tune_opts *o, pp_tune_rank_mem *mem, int *exact)
{
    *exact = 0;
    if (!pp_tune_mixed_precision(o)) /* the runtime's plan reads the schedule itself */
        return PP_OK;
    return account(m, c, o, pp_tune_shape_place(sh), NULL, sh, mem, exact);
}
