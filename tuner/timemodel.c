/* timemodel.c — turns one configuration into the schedule simulator's costs.
 *
 * Compute: every GEMM of a block is timed by a roofline, max(2mnk / R, bytes moved / memory
 * bandwidth), with R = the cluster's GEMM rate at that shape (its measured sweep where there is
 * one, pp_tune_hw_gemm_rate) x opts.gemm_efficiency; attention's
 * s^2 products at R (no causal halving: Narayanan's count); element-wise kernels (norms,
 * residuals, dropout, activation) by the bytes they move. Backward = 2 x forward (dgrad + wgrad),
 * plus the recomputed forward for full recompute, or the attention core for selective.
 * Split backward (zb-h1, zbv, dualpipev: actions I and W): I = the dgrad GEMMs and everything
 * else of the backward (recompute, attention, element-wise, TP/SP collectives, the backward
 * send), W = the wgrad GEMMs and gradient accumulation; I + W = B.
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
 * Effects added for issue 15 (each can be switched off, opts.without, to measure its share):
 * TP all-reduces at the measured (or preset) all-reduce busbw, the recomputed forward's two
 * all-reduces, sequence parallelism's collectives and split element-wise work, attention's
 * memory-bound s^2 work (or flash attention's causal FLOPs), wave quantization of GEMM tiles,
 * a fixed cost per kernel, DP sync over the group's NICs, the 1/t boundary share, blocking
 * pipeline sends, the mixed-precision optimizer's other passes, the tied-embedding all-reduce of
 * first and last stage, the fp32 cross-entropy's passes, the measured rate of pipeline
 * transfers across nodes, gradient accumulation outside the GEMMs where opts.grad_accum says so. Constants with their sources below.
 * Not modelled: NCCL protocol switching, network contention between jobs, compute/comm overlap
 * inside a layer.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_tune.h"

const char *pp_tune_fx_name(int i)
{
    static const char *const names[PP_TUNE_FX_COUNT] = {
        "tp-busbw", "recompute-ar", "seq-par", "attention", "gemm-shape", "kernel-cost",
        "dp-nics", "p2p-share", "p2p-blocking", "optimizer-passes", "embed-allreduce",
        "loss-passes", "p2p-rate", "grad-accum", "dp-latency", "moe-overlap"};
    return i >= 0 && i < PP_TUNE_FX_COUNT ? names[i] : NULL;
}

double pp_tune_ring_allreduce(double bytes, int n, double bw, double lat)
{
    if (n <= 1 || bytes <= 0)
        return 0.0;
    return 2.0 * (n - 1) / n * bytes / bw + 2.0 * (n - 1) * lat;
}

/* Context-parallel ranks of c (a configuration written without the field: 1). */
static double cp_of(const pp_config *c)
{
    return c->cp > 1 ? c->cp : 1;
}

static double dtype_bytes(const pp_tune_opts *o)
{
    return o->precision == PP_PREC_FP32 ? 4.0 : 2.0;
}

/* Narayanan's FLOP count (pp_model_step_flops: the runtime's model description, shared with
 * pprun's summary). */
double pp_tune_model_flops(const pp_tune_model *m, double sequences)
{
    pp_model_cfg c;
    pp_tune_model_cfg(m, &c);
    return pp_model_step_flops(&c, m->seq, sequences);
}

/* ---- Constants: one set for every configuration ------------------------------------------
 * KERNEL_FIXED_S: what a kernel costs beyond its work (launch, ramp-up, tail of the last wave).
 *   CUDA launch overhead is ~2-5 us per kernel (NVIDIA's CUDA Graphs blog, "Getting Started with
 *   CUDA Graphs": 2.9 us per kernel launch gap measured for short kernels); 3 us taken.
 * TILE: the output tile of a tensor-core GEMM, 128 x 128 (CUTLASS's default threadblock tile
 *   for sm80/sm90 16-bit GEMMs); tiles run in waves of one per SM, so a GEMM whose tile count is
 *   not a multiple of the SMs pays for the partial last wave (NVIDIA, "Matrix Multiplication
 *   Background User's Guide", wave quantization).
 * FLASH_EFFICIENCY: FlashAttention-2 on A100 reaches 50-73 % of peak forward and ~45-60 %
 *   forward + backward at head dimension 128 (Dao 2023, Figs. 4-6); 0.5 of peak taken. Causal:
 *   half the s^2 FLOPs; backward 2.5 x forward (5 matrix products against 2).
 * ATTN_BYTES_F / _B: bytes per attention-score element moved by the memory-bound kernels of
 *   unfused attention (Megatron-LM 2021: fused scale-mask-softmax, separate dropout):
 *   forward: score GEMM output 2, softmax read 2 + write 2, dropout read 2 + write 2 + mask 1,
 *   the value GEMM reading the probabilities 2 (13; 8 without dropout); backward: the gradient
 *   of the probabilities written 2, dropout backward read 2 + mask 1 + write 2, softmax
 *   backward read 2 + probabilities 2 + write 2, the two GEMMs reading the score gradient 4 and
 *   the value-gradient GEMM reading the probabilities 2 (19; 14 without dropout).
 * IB_EFFICIENCY: NCCL all-reduce across nodes reaches ~0.9 of the NICs' line rate (nccl-tests
 *   on 3 x 8 A100 with 4 HDR NICs per node: 96 GB/s peak busbw of 100; NVIDIA/nccl-tests #119).
 */
#define KERNEL_FIXED_S 3e-6
#define TILE 128.0
#define FLASH_EFFICIENCY 0.5
#define FLASH_BWD_RATIO 2.5
#define ATTN_BYTES_F(dropout) ((dropout) ? 13.0 : 8.0)
#define ATTN_BYTES_B(dropout) ((dropout) ? 19.0 : 14.0)
#define IB_EFFICIENCY 0.9
/* NCCL's latency model (src/graph/tuning.cc of github.com/NVIDIA/nccl at 01afd20: baseLat and
 * hwLat, Simple protocol, the one large gradient buffers use; later NCCLs retuned the figures
 * per architecture), in seconds: a ring collective pays the base
 * latency plus one hop latency per step, NVLink's for steps inside a node and the network's for
 * steps across (all-reduce 2 (n-1) steps of which 2 (nodes-1) cross; reduce-scatter and
 * all-gather n-1 and nodes-1), and NCCL's own "plateau" factor 1.9 for a large all-reduce
 * across nodes; the tree all-reduce 2 ((n/nodes - 1) NVLink + log2(nodes) network) hops.
 * NCCL picks the faster algorithm: the tree's logarithmic latency is why all-reduce stays
 * usable on thousands of ranks, where the ring's linear one would cost tens of milliseconds.
 * A step of the context-parallel ring (one send/receive to the neighbour) pays one hop's. */
#define NCCL_BASE_LAT 8.4e-6
#define NCCL_RING_NVL_LAT 3.4e-6
#define NCCL_RING_NET_LAT 9.6e-6
#define NCCL_TREE_NVL_LAT 28e-6
#define NCCL_TREE_NET_LAT 50e-6
#define NCCL_RING_PLATEAU 1.9

/* CE_BYTES_F / _B (effect loss-passes): bytes per logit element of Megatron's vocab-parallel
 * cross-entropy in fp32 (megatron/mpu/cross_entropy.py 2021, tensor_parallel/cross_entropy.py
 * in Megatron-Core; gpt_model.py casts the logits with .float() unless --fp16-lm-cross-entropy):
 * forward: the cast (read 2 + write 4), the row max (read 4), subtracting it in place (4 + 4),
 * exp in place (4 + 4), the row sum (4), dividing by it in place (4 + 4): 38 in 6 kernels;
 * backward: scaling the saved softmax by the loss gradient in place (4 + 4) and the cast's
 * backward to 16 bits (4 + 2): 14. Without the effect: 12 each way (one fp32 read + write +
 * read, the earlier estimate). */
#define CE_BYTES_F 38.0
#define CE_BYTES_B 14.0

typedef struct {
    double rate, bw, dt; /* rate: large-GEMM FLOP/s (attention); GEMMs ask hw by shape */
    double eff;
    double kernel;       /* fixed cost per kernel, s (0 when the effect is off) */
    int quantize;        /* wave quantization on (a GPU without a measured sweep) */
    const pp_tune_hw *hw;
} roof;

static int fx(const pp_tune_opts *o, unsigned effect)
{
    return !(o->without & effect);
}

/* Fraction of the SMs' tile slots an M x N output keeps busy: tiles / (waves x SMs). */
static double wave_efficiency(const roof *r, double M, double N)
{
    if (!r->quantize)
        return 1.0;
    double tiles = ceil(M / TILE) * ceil(N / TILE), sms = r->hw->sms;
    return (M * N / (TILE * TILE)) / (ceil(tiles / sms) * sms);
}

static double gemm(const roof *r, double M, double N, double K)
{
    double rate = pp_tune_hw_gemm_rate(r->hw, M, N, K) * r->eff * wave_efficiency(r, M, N);
    double compute = 2.0 * M * N * K / rate;
    double memory = r->dt * (M * K + K * N + M * N) / r->bw;
    return (compute > memory ? compute : memory) + r->kernel;
}

/* One layer's attention core (the s x s part) for one micro-batch, forward and backward. */
static void attention(const pp_tune_model *m, const pp_config *c, const pp_tune_opts *o,
                      const roof *r, double *f, double *b)
{
    /* non-causal, QK^T + PV; context parallelism: each rank 1/cp of the s x s products (the
     * causal load balancing gives each rank chunks i and 2cp-1-i, so the shares are equal) */
    double s = m->seq, flops = 4.0 * c->b * s * s * pp_tune_model_qd(m) / c->t / cp_of(c);
    int dropout = m->linear_bias; /* GPT/BERT train with attention dropout, Llama not */
    if (!fx(o, PP_TUNE_FX_ATTENTION)) {
        *f = flops / r->rate;
        *b = 2.0 * *f;
    } else if (o->flash_attention) {
        double rate = r->hw->peak_flops * FLASH_EFFICIENCY;
        *f = 0.5 * flops / rate + r->kernel;
        *b = FLASH_BWD_RATIO * 0.5 * flops / rate + r->kernel;
    } else {
        double scores = (double)c->b * m->heads / c->t * s * s / cp_of(c); /* elements */
        *f = flops / r->rate + scores * ATTN_BYTES_F(dropout) / r->bw + 4.0 * r->kernel;
        *b = 2.0 * flops / r->rate + scores * ATTN_BYTES_B(dropout) / r->bw + 8.0 * r->kernel;
    }
}

/* Tensor-parallel collectives of one layer, as all-reduce-equivalents of the s b h tensor:
 * Megatron's two all-reduces per direction; with sequence parallelism an all-gather and a
 * reduce-scatter in their place (the same bytes), plus in the backward the all-gather of each
 * sequence-parallel input again for the weight gradients (Korthikanti et al. 2022, sec. 4.2.2). */
static void tp_collectives(const pp_config *c, const pp_tune_opts *o, double *per_f,
                           double *per_b)
{
    *per_f = *per_b = c->t > 1 ? 2.0 : 0.0;
    if (c->t > 1 && c->sequence_parallel && fx(o, PP_TUNE_FX_SEQ_PAR))
        *per_b += 1.0; /* two all-gathers = one all-reduce's bytes */
}

/* Context parallelism's ring (Liu et al., "Ring Attention with Blockwise Transformers",
 * arXiv:2310.01889; Megatron-Core's p2p ring in Transformer Engine): cp steps, each computing
 * attention of the local queries against one K/V chunk while the next chunk travels to the
 * neighbour; the forward passes K and V (2 x s/cp x b x kvd / t values per step), the backward
 * K, V and their gradients (twice that). Step i's compute hides step i+1's transfer: the time
 * is the first step's compute + (cp - 1) x max(step compute, step transfer); returned here is
 * what the transfers add beyond the compute (0 when hidden). The ring's neighbours sit t GPUs
 * apart (placement tp, cp, pp, dp): NVLink while t x cp fits a node, else the NIC. */
static void cp_ring(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                    const pp_tune_opts *o, const roof *r, double attn_f, double attn_b,
                    double *f, double *b)
{
    *f = *b = 0;
    if (c->cp <= 1)
        return;
    double kvd = pp_tune_model_kvd(m);
    double step_bytes = 2.0 * m->seq / c->cp * c->b * kvd / c->t * r->dt;
    int intra = (long)c->t * c->cp <= hw->gpus_per_node;
    double bw = intra ? hw->intra_bw : hw->inter_bw, lat = intra ? hw->intra_lat : hw->inter_lat;
    if (fx(o, PP_TUNE_FX_DP_LATENCY) && !hw->cpu_devices)
        lat = fmax(lat, intra ? NCCL_RING_NVL_LAT : NCCL_RING_NET_LAT);
    double xfer_f = step_bytes / bw + lat, xfer_b = 2.0 * step_bytes / bw + lat;
    double step_f = attn_f / c->cp, step_b = attn_b / c->cp;
    *f = (c->cp - 1) * fmax(0.0, xfer_f - step_f);
    *b = (c->cp - 1) * fmax(0.0, xfer_b - step_b);
}

double pp_tune_moe_a2a_time(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                            const pp_tune_opts *o)
{
    const pp_moe_cfg *e = &m->block.moe;
    int ep = pp_tune_ep(c);
    if (e->experts <= 0 || ep <= 1)
        return 0.0;
    double sp = c->sequence_parallel && c->t > 1 ? c->t : 1.0;
    double tokens = (double)m->seq * c->b / cp_of(c) / sp;
    double bytes = pp_tune_moe_imbalance(o) * tokens * e->top_k * m->hidden * dtype_bytes(o) *
                   (ep - 1.0) / ep;
    int intra = (long)c->t * (long)cp_of(c) * ep <= hw->gpus_per_node;
    double bw = intra ? hw->intra_bw : hw->inter_bw * (hw->cpu_devices ? 1.0 : IB_EFFICIENCY);
    double lat = intra ? hw->intra_lat : hw->inter_lat;
    return bytes / bw + (ep - 1) * lat;
}

/* A MoE layer's times from the dense layer's (out's layer_*): the dense MLP's GEMMs (mlp, one
 * direction) and its ffn-wide element-wise work (mlp_elem) replaced by
 *   the router: a GEMM of the local tokens against the experts' logits (h x E, replicated over
 *     the tensor ranks), its softmax/top-k element-wise;
 *   the routed experts: grouped GEMMs (Megatron's --moe-grouped-gemm) at top_k x tokens x the
 *     load imbalance rows (the busiest rank's), the expert width split by t; timed as one GEMM
 *     of all the rows (not modelled: a grouped GEMM's loss on small per-expert groups);
 *   the shared experts: a dense MLP of their width at the tokens;
 *   the permutation before and after the experts (read + write the routed rows, twice);
 *   the dispatch and combine all-to-alls, forward and backward (4 per layer and micro-batch,
 *     pp_tune_moe_a2a_time each), not overlapped inside the layer (Megatron's alltoall
 *     dispatcher waits for them); a schedule's overlapped pairs hide them (pp_tune_costs).
 * Backward: each GEMM twice (dgrad in I, wgrad in W), element-wise twice, the all-to-alls in
 * I. Full recomputation redoes the forward, all-to-alls included. */
static void moe_layer_times(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                            const pp_tune_opts *o, const roof *r, double mlp, double mlp_elem,
                            pp_tune_op_times *out)
{
    const pp_moe_cfg *e = &m->block.moe;
    double t = c->t, h = m->hidden, M = (double)m->seq * c->b / cp_of(c);
    double sp = c->sequence_parallel && c->t > 1 ? t : 1.0, g = m->gated_mlp ? 2.0 : 1.0;
    double rows = pp_tune_moe_imbalance(o) * e->top_k * M;
    double router = gemm(r, M / sp, e->experts, h);
    double experts = gemm(r, rows, e->ffn * g / t, h) + gemm(r, rows, h, e->ffn / t);
    double shared = e->shared_ffn > 0 ? gemm(r, M, e->shared_ffn * g / t, h) +
                                            gemm(r, M, h, e->shared_ffn / t)
                                      : 0.0;
    double elem = (r->dt * rows * e->ffn / t * (g + 1.0) + 4.0 * r->dt * rows / sp * h +
                   3.0 * 4.0 * M / sp * e->experts) / r->bw + 6.0 * r->kernel;
    double a2a = pp_tune_moe_a2a_time(m, hw, c, o);
    double gemms = router + experts + shared - mlp, el = elem - mlp_elem;
    out->moe_a2a_f = out->moe_a2a_b = 2.0 * a2a;
    out->moe_f = out->layer_f + gemms + el + out->moe_a2a_f;
    out->moe_b = out->layer_b + 2.0 * gemms + 2.0 * el + out->moe_a2a_b;
    out->moe_i = out->layer_i + gemms + 2.0 * el + out->moe_a2a_b;
    out->moe_w = out->layer_w + gemms;
    out->moe_recompute = c->recompute == PP_RECOMPUTE_FULL
                             ? out->recompute + gemms + el + out->moe_a2a_f
                             : out->recompute;
}

static void layer_times(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                        const pp_tune_opts *o, const roof *r, double tp_ar,
                        pp_tune_op_times *out)
{
    double t = c->t, h = m->hidden, M = (double)m->seq * c->b / cp_of(c);
    double qd = pp_tune_model_qd(m), kvd = pp_tune_model_kvd(m), f = m->ffn;
    double gemms = gemm(r, M, (qd + 2 * kvd) / t, h) + gemm(r, M, h, qd / t) +
                   gemm(r, M, f * (m->gated_mlp ? 2 : 1) / t, h) + gemm(r, M, h, f / t);
    /* backward: input and weight gradient of every GEMM (two kernels each) */
    double gemms_b = 2.0 * gemms;
    double attn_f, attn_b;
    attention(m, c, o, r, &attn_f, &attn_b);
    /* element-wise kernels: two norms, bias + GeLU, two bias + dropout + residual; the s b h
     * ones run on 1/t of the sequence under sequence parallelism */
    double sp = c->sequence_parallel && fx(o, PP_TUNE_FX_SEQ_PAR) ? t : 1.0;
    double elem_bytes = r->dt * M * h / sp * (m->linear_bias ? 14.0 : 10.0) +
                        r->dt * M * f / t * (m->gated_mlp ? 3.0 : 2.0);
    double elem = elem_bytes / r->bw + 5.0 * r->kernel;
    cp_ring(m, hw, c, o, r, attn_f, attn_b, &out->cp_ring_f, &out->cp_ring_b);
    double fwd = gemms + attn_f + elem + out->cp_ring_f;
    double bwd = gemms_b + attn_b + 2.0 * elem + out->cp_ring_b;
    double ar_f, ar_b;
    tp_collectives(c, o, &ar_f, &ar_b);
    /* forward work a recomputing layer redoes before its backward: full, the whole forward
     * with its all-reduces; selective, the attention core (Korthikanti sec. 5) */
    double again = 0;
    if (c->recompute == PP_RECOMPUTE_FULL)
        again = fwd + (fx(o, PP_TUNE_FX_RECOMPUTE_AR) ? ar_f * tp_ar : 0.0);
    else if (c->recompute == PP_RECOMPUTE_SELECTIVE)
        again = attn_f + out->cp_ring_f;
    out->recompute = again;
    out->layer_f = fwd + ar_f * tp_ar;
    out->layer_b = bwd + ar_b * tp_ar;
    /* Split backward (Qi et al. 2024, sec. 2): I = every dgrad GEMM (dX = dY W^T, the same
     * 2MNK FLOPs as its wgrad twin, so half of gemms_b), the attention core's and the
     * element-wise backward, the recomputation (I needs the activations first) and all the
     * tensor-parallel collectives: the conjugate all-reduces sit on the input gradient's path,
     * and sequence parallelism's re-gather of the linear inputs happens there too (its result
     * is held for W, memory.c), so that W is local. W = every wgrad GEMM (dW = X^T dY). */
    out->layer_w = gemms_b - gemms;
    out->layer_i = gemms + attn_b + 2.0 * elem + out->cp_ring_b + ar_b * tp_ar;
    if (m->block.moe.experts > 0) {
        double mlp = gemm(r, M, f * (m->gated_mlp ? 2 : 1) / t, h) + gemm(r, M, h, f / t);
        double mlp_elem = r->dt * M * f / t * (m->gated_mlp ? 3.0 : 2.0) / r->bw;
        moe_layer_times(m, hw, c, o, r, mlp, mlp_elem, out);
    }
}

void pp_tune_op_times_compute(const pp_tune_model *m, const pp_tune_hw *hw,
                              const pp_config *c, const pp_tune_opts *o,
                              pp_tune_op_times *out)
{
    memset(out, 0, sizeof *out);
    double eff = o->gemm_efficiency > 0 ? o->gemm_efficiency : 1.0;
    roof r = {hw->gemm_flops * eff,
              hw->mem_bw,
              dtype_bytes(o),
              eff,
              fx(o, PP_TUNE_FX_KERNEL_COST) && !hw->cpu_devices ? KERNEL_FIXED_S : 0.0,
              fx(o, PP_TUNE_FX_GEMM_SHAPE) && hw->sms > 0 && hw->n_gemm <= 1,
              hw};
    double h = m->hidden, M = (double)m->seq * c->b / cp_of(c), act = r.dt * M * h;
    double busbw = fx(o, PP_TUNE_FX_TP_BUSBW) && hw->tp_busbw > 0 ? hw->tp_busbw : hw->intra_bw;
    out->tp_allreduce = pp_tune_ring_allreduce(act, c->t, busbw, hw->intra_lat);
    /* Megatron's scatter/gather of the boundary tensor: each TP rank sends its 1/t share, the
     * receiver all-gathers it inside the node */
    int share = c->t > 1 && fx(o, PP_TUNE_FX_P2P_SHARE);
    out->p2p_bytes = share ? act / c->t : act;
    out->p2p_gather = share ? (c->t - 1.0) / c->t * act / busbw + (c->t - 1) * hw->intra_lat : 0;
    layer_times(m, hw, c, o, &r, out->tp_allreduce, out);
    /* Embedding: gather of b*s rows forward, scatter-add backward (memory bound). */
    out->embed_f = 2.0 * r.dt * M * h / r.bw + r.kernel;
    out->embed_b = 2.0 * out->embed_f;
    out->embed_i = 0.0; /* token ids have no gradient: the scatter-add is the weight's */
    out->embed_w = out->embed_b;
    /* Head: final norm, logits GEMM over the vocabulary padded to 128 t (Megatron), fp32
     * softmax cross-entropy over the logits: CE_BYTES_F / _B per logit element. */
    double vpad = ceil((double)m->vocab / (128.0 * c->t)) * 128.0;
    int passes = fx(o, PP_TUNE_FX_LOSS_PASSES);
    double logits = M * vpad;
    double ce_f = (passes ? CE_BYTES_F : 12.0) * logits / r.bw + (passes ? 6.0 : 2.0) * r.kernel;
    double ce_b = (passes ? CE_BYTES_B : 12.0) * logits / r.bw + 2.0 * r.kernel;
    double norm = 2.0 * r.dt * M * h / r.bw + r.kernel;
    out->head_f = gemm(&r, M, vpad, h) + ce_f + norm;
    out->head_b = 2.0 * gemm(&r, M, vpad, h) + ce_b + 2.0 * norm;
    /* I: the loss backward, the logits' dgrad into the hidden state and the final norm's
     * backward (its weight gradient with it: a norm's is a reduction, not a GEMM, and the
     * runtime keeps it in I); W: the LM head's wgrad GEMM */
    out->head_w = gemm(&r, M, vpad, h);
    out->head_i = out->head_w + ce_b + 2.0 * norm;
}

/* Node of pipeline rank `pp` in data-parallel replica `dp` under tp-cp-pp-dp placement (the
 * context-parallel ranks of a stage beside its tensor ranks; cp = 1: tp-pp-dp). */
static long node_of(const pp_tune_hw *hw, const pp_config *c, int pp, int dp)
{
    long gpu = (long)c->t * (long)cp_of(c) * ((long)pp + (long)c->p * dp);
    return gpu / hw->gpus_per_node;
}

/* 1 when ranks i and j of the pipeline share a node in every replica. The placement repeats
 * after gpus_per_node replicas at the latest, so checking that many is exact. */
static int same_node(const pp_tune_hw *hw, const pp_config *c, int i, int j)
{
    int reps = c->d < hw->gpus_per_node ? c->d : hw->gpus_per_node;
    for (int k = 0; k < reps; k++)
        if (node_of(hw, c, i, k) != node_of(hw, c, j, k))
            return 0;
    return 1;
}

/* P2P_IB_EFFICIENCY (effect p2p-rate): the pipeline's point-to-point transfers across nodes
 * reach 0.74 of the NIC's line rate. Measured: Narayanan et al. (SC'21, sec. 5.9) observed an
 * effective bisection bandwidth of 892 GB/s for the pipeline's point-to-point communication of
 * the 1T run on Selene (t = 8, d = 6: 48 GPUs, each on its own 200 Gb/s HDR NIC, cross the
 * middle stage boundary): 892 / (48 x 25) = 0.743. Applied to a preset's line rate on GPU
 * devices (the figure is NCCL over InfiniBand), not to a probed point-to-point figure. */
#define P2P_IB_EFFICIENCY (892.0 / (48 * 25.0))

static void fill_links(const pp_tune_hw *hw, const pp_config *c, const pp_tune_opts *o,
                       const pp_sched *s, pp_cost *cost)
{
    int D = s->ranks;
    double inter = hw->inter_bw;
    if (fx(o, PP_TUNE_FX_P2P_RATE) && !hw->cpu_devices && !hw->inter_measured)
        inter *= P2P_IB_EFFICIENCY;
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            int intra = same_node(hw, c, i, j);
            cost->latency[i * D + j] = intra ? hw->intra_lat : hw->inter_lat;
            cost->inv_bw[i * D + j] = 1.0 / (intra ? hw->intra_bw : inter);
        }
}

/* Gradient accumulation outside the GEMMs, seconds per parameter per micro-batch (memory bound,
 * in the backward on the compute stream; 0 when fused, the default):
 * MAIN: Megatron-Core's backward hook without gradient-accumulation fusion,
 *   param.main_grad.add_(param.grad) (distributed/distributed_data_parallel.py): read the fp32
 *   main gradient 4 + the 16-bit gradient 2, write 4: 10 bytes (12 when everything is fp32);
 * AUTOGRAD16: Megatron-LM 2021's local DDP without contiguous buffers (the SC'21 runs), where
 *   main_grad is param.grad and autograd's AccumulateGrad adds each micro-batch's fp16 gradient
 *   in place (read 2 + 2, write 2: 6 bytes); zero_grad(set_to_none=True) makes the first
 *   micro-batch an assignment, so (N-1)/N of them pay, charged evenly. The fusion (the weight-
 *   gradient GEMM accumulating into main_grad) came to Megatron-LM in February 2022. */
static double grad_accum_per_param(const pp_tune_hw *hw, const pp_config *c,
                                   const pp_tune_opts *o)
{
    if (!fx(o, PP_TUNE_FX_GRAD_ACCUM))
        return 0.0;
    switch (o->grad_accum) {
    case PP_TUNE_GRAD_ACCUM_MAIN:
        return (o->precision == PP_PREC_FP32 ? 12.0 : 10.0) / hw->mem_bw;
    case PP_TUNE_GRAD_ACCUM_AUTOGRAD16:
        return c->N > 1 ? 6.0 * (c->N - 1.0) / c->N / hw->mem_bw : 0.0;
    default:
        return 0.0;
    }
}

/* accum: gradient accumulation per parameter (s); end_params: the word embedding's share on
 * the first stage, and the head's (or the tied copy's) on the last. Recomputing layers add ot->recompute to B and I; with gradient
 * sharding each B (or W) reduce-scatters its stage's gradients into the ranks' shards before
 * the next micro-batch's gradients can accumulate: added to the op whole, as every gradient
 * sync here is timed without overlap (Megatron's default, no --overlap-grad-reduce; the
 * end-of-step sync of the other shardings is not overlapped either, so the three compare on
 * the same terms). */
/* Recomputing layers of a stage [begin, end) (the first k: Megatron's block method) that are
 * MoE layers. */
static int moe_recomputed(const pp_tune_model *m, const pp_config *c, int begin, int end)
{
    return pp_tune_moe_layers_in(m, begin, begin + pp_tune_recomputed_layers(c, end - begin));
}

static void fill_compute(const pp_tune_model *m, const pp_tune_op_times *ot,
                         const pp_tune_hw *hw, const pp_config *c, const pp_tune_opts *o,
                         const pp_sched *s, double accum, double end_params, pp_cost *cost)
{
    int S = s->stages_per_pipe;
    /* a layer's parameters on a rank as the gradient traffic counts them (all / t); a MoE
     * layer's routed experts apart (experts / ep of them) */
    pp_tune_params pc;
    pp_tune_model_params(m, &pc);
    double routed = m->block.moe.experts > 0 ? m->block.moe.experts * pc.expert : 0.0;
    double dense_p = pc.per_layer / c->t, moe_p = (pc.moe_layer - routed) / c->t;
    double exp_p = routed / pp_tune_ep(c) / c->t;
    pp_config ce = pp_tune_expert_dp_config(c);
    for (int pipe = 0; pipe < s->n_pipes; pipe++)
        for (int st = 0; st < S; st++) {
            const pp_stage *g = pp_sched_stage(s, pipe, st);
            int k = pipe * S + st, layers = pp_sched_stage_layers(s, pipe, st);
            int nm = pp_tune_moe_layers_in(m, g->layer_begin, g->layer_end), nd = layers - nm;
            int rm = moe_recomputed(m, c, g->layer_begin, g->layer_end);
            double params = nd * dense_p + nm * moe_p + (st == 0 ? end_params : 0) +
                            (st == S - 1 && S > 1 ? end_params : 0);
            double experts = nm * exp_p;
            /* the receiver's gather of the 1/t shares follows a transfer from another rank;
             * a hand-over between two stages of one rank (the turn of a V) has none */
            int r = pp_sched_stage(s, pipe, st)->rank;
            double gather_f = pp_sched_rank_of(s, pipe, st - 1) != r ? ot->p2p_gather : 0;
            double gather_b = pp_sched_rank_of(s, pipe, st + 1) != r ? ot->p2p_gather : 0;
            cost->f[k] = nd * ot->layer_f + nm * ot->moe_f +
                         (st == 0 ? ot->embed_f : gather_f) + (st == S - 1 ? ot->head_f : 0);
            double again = (pp_tune_recomputed_layers(c, layers) - rm) * ot->recompute +
                           rm * ot->moe_recompute;
            cost->b[k] = nd * ot->layer_b + nm * ot->moe_b + again +
                         (st == 0 ? ot->embed_b : 0) + (st == S - 1 ? ot->head_b : gather_b) +
                         accum * (params + experts);
            /* split backward: the gather of the incoming gradient's shares feeds I; the
             * accumulation into the main gradient follows the wgrad GEMMs in W */
            cost->i[k] = nd * ot->layer_i + nm * ot->moe_i + again +
                         (st == 0 ? ot->embed_i : 0) + (st == S - 1 ? ot->head_i : gather_b);
            cost->w[k] = nd * ot->layer_w + nm * ot->moe_w + (st == 0 ? ot->embed_w : 0) +
                         (st == S - 1 ? ot->head_w : 0) + accum * (params + experts);
            /* ZeRO-2: the experts' gradients reduce-scatter over their own group */
            double rs = pp_tune_grad_shard_time(hw, c, o, params) +
                        (experts > 0 ? pp_tune_grad_shard_time(hw, &ce, o, experts) : 0.0);
            cost->b[k] += rs;
            cost->w[k] += rs;
            cost->send_bytes_f[k] = ot->p2p_bytes;
            cost->send_bytes_b[k] = ot->p2p_bytes;
        }
}

/* The MoE all-to-alls an overlapped pair hides (DualPipe, arXiv:2412.19437 sec. 3.2.1: one
 * micro-batch's forward chunk and another's backward chunk run together, each one's
 * all-to-all hidden behind the other's compute). The schedule says which F and B are paired
 * (pp_action.overlap: the F opening a pair, the B right after it closes it); the simulator runs
 * a pair as F then B on one stream, so the overlap is modelled in the costs: a pair hides
 * min(F's all-to-alls, B's compute without its own) + min(B's all-to-alls, F's compute
 * without its own), and that is taken off the stages' f (the F's part) and b and i (the B's),
 * spread over all the stage's F (or B) actions, since the cost table holds one figure per
 * stage: a rank's total compute is exact, the order within it an average. Off with
 * --without moe-overlap (pptune validate). */
static pp_status hide_paired_a2a(const pp_tune_model *m, const pp_tune_op_times *ot,
                                 const pp_tune_opts *o, const pp_sched *s, pp_cost *cost)
{
    if (ot->moe_a2a_f <= 0 || !fx(o, PP_TUNE_FX_MOE_OVERLAP))
        return PP_OK;
    int S = s->stages_per_pipe, K = s->n_pipes * S;
    double *v = pp_calloc(4 * (size_t)K, sizeof *v);
    if (!v)
        return PP_ERR_NOMEM;
    double *nf = v, *nb = v + K, *hf = v + 2 * K, *hb = v + 3 * K;
    for (int r = 0; r < s->ranks; r++)
        for (int j = 0; j < s->n_ops[r]; j++) {
            const pp_action *a = &s->ops[r][j];
            int k = a->pipe * S + a->stage;
            if (a->op == PP_OP_F)
                nf[k]++;
            else if (a->op == PP_OP_B || a->op == PP_OP_I)
                nb[k]++;
            if (a->op != PP_OP_F || !a->overlap || j + 1 >= s->n_ops[r])
                continue;
            const pp_action *bw = &s->ops[r][j + 1];
            int kb = bw->pipe * S + bw->stage;
            const pp_stage *gf = pp_sched_stage(s, a->pipe, a->stage);
            const pp_stage *gb = pp_sched_stage(s, bw->pipe, bw->stage);
            double a2a_f = pp_tune_moe_layers_in(m, gf->layer_begin, gf->layer_end) *
                           ot->moe_a2a_f;
            double a2a_b = pp_tune_moe_layers_in(m, gb->layer_begin, gb->layer_end) *
                           ot->moe_a2a_b;
            hf[k] += fmin(a2a_f, cost->b[kb] - a2a_b);
            hb[kb] += fmin(a2a_b, cost->f[k] - a2a_f);
        }
    for (int k = 0; k < K; k++) {
        if (nf[k] > 0)
            cost->f[k] -= hf[k] / nf[k];
        if (nb[k] > 0) {
            cost->b[k] -= hb[k] / nb[k];
            cost->i[k] -= hb[k] / nb[k];
        }
    }
    free(v);
    return PP_OK;
}

/* Megatron-LM's pipeline transfers block both sides: batch_isend_irecv, req.wait() and then
 * torch.cuda.synchronize() ("to protect against race condition when using batch_isend_irecv",
 * megatron/p2p_communication.py; batch_p2p_sync defaults to on in Megatron-Core), so no
 * compute overlaps a stage's send. The transfer's time is folded into the compute that produced
 * it and the link carries nothing more (the data arrives when the op ends). */
static void fold_blocking_sends(const pp_sched *s, pp_cost *cost)
{
    int S = s->stages_per_pipe, D = s->ranks;
    for (int pipe = 0; pipe < s->n_pipes; pipe++)
        for (int st = 0; st < S; st++) {
            int k = pipe * S + st, r = pp_sched_stage(s, pipe, st)->rank;
            int next = pp_sched_rank_of(s, pipe, st + 1), prev = pp_sched_rank_of(s, pipe, st - 1);
            if (next >= 0 && next != r) {
                cost->f[k] += cost->send_bytes_f[k] * cost->inv_bw[r * D + next];
                cost->send_bytes_f[k] = 0;
            }
            if (prev >= 0 && prev != r) { /* B's or I's input gradient: I sends it */
                double t = cost->send_bytes_b[k] * cost->inv_bw[r * D + prev];
                cost->b[k] += t;
                cost->i[k] += t;
                cost->send_bytes_b[k] = 0;
            }
        }
}

/* REDUCE: ring all-reduce among its participants of the gradients one participant holds for
 * the listed stages; the link is intra-node only if every pair of participants shares a node. */
static void fill_reduces(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
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
        pp_tune_param_bytes bp = pp_tune_bytes_per_param(o, &(pp_config){.shard = PP_SHARD_NONE});
        cost->reduce[id] = pp_tune_ring_allreduce(params * bp.grads,
                                                  rd->n_ranks,
                                                  intra ? hw->intra_bw : hw->inter_bw,
                                                  intra ? hw->intra_lat : hw->inter_lat);
    }
}

typedef struct {
    int n, nodes;  /* ranks of the group, nodes it spans */
    double bw;     /* per-rank bandwidth of the ring's slowest hop, B/s */
    double lat;    /* per-step alpha where NCCL's model is off, s */
    int nccl;      /* 1: NCCL's latencies (GPU devices, effect dp-latency) */
} dp_group;

static double ring_lat(const dp_group *g, int allreduce)
{
    int steps = allreduce ? 2 * (g->n - 1) : g->n - 1;
    if (!g->nccl)
        return steps * g->lat;
    int inter = allreduce ? 2 * (g->nodes - 1) : g->nodes - 1;
    double lat = NCCL_BASE_LAT + (steps - inter) * NCCL_RING_NVL_LAT + inter * NCCL_RING_NET_LAT;
    return allreduce && g->nodes > 1 ? lat * NCCL_RING_PLATEAU : lat;
}

static double allreduce_lat(const dp_group *g)
{
    double ring = ring_lat(g, 1);
    if (!g->nccl || g->nodes <= 1)
        return ring;
    double tree = 2.0 * ((g->n / g->nodes - 1) * NCCL_TREE_NVL_LAT +
                         log2((double)g->nodes) * NCCL_TREE_NET_LAT);
    return fmin(ring, tree);
}

/* The group of ranks holding the same weights as one rank (pp_tune_shard_ranks): its cp
 * members t GPUs apart, its d replicas t cp p apart (placement tp, cp, pp, dp). Inside a node
 * when the whole group fits one; else hierarchical: k members per node reduce over NVLink and
 * NCCL runs one ring per NIC across nodes (rail-optimised, each GPU's own NIC) at
 * IB_EFFICIENCY, bounded by the node's NVLink (effect dp-nics; off: one NIC's rate). */
static dp_group dp_group_of(const pp_tune_hw *hw, const pp_config *c, const pp_tune_opts *o)
{
    dp_group g = {.n = pp_tune_shard_ranks(c), .nodes = 1};
    long cp = (long)cp_of(c), gpn = hw->gpus_per_node, span = (long)c->t * cp * c->p * c->d;
    long stride = (long)c->t * cp * c->p;
    int intra = span <= gpn;
    g.bw = intra ? hw->intra_bw : hw->inter_bw;
    g.lat = intra ? hw->intra_lat : hw->inter_lat;
    g.nccl = fx(o, PP_TUNE_FX_DP_LATENCY) && !hw->cpu_devices;
    if (intra)
        return g;
    long cp_here = (long)c->t * cp <= gpn ? cp : (gpn >= c->t ? gpn / c->t : 1);
    long dp_here = stride < gpn ? gpn / stride : 1;
    long k = cp_here * dp_here; /* members of the group per node */
    g.nodes = (int)((g.n + k - 1) / k);
    if (fx(o, PP_TUNE_FX_DP_NICS))
        g.bw = fmin(hw->intra_bw, (double)k * hw->inter_bw * IB_EFFICIENCY);
    return g;
}

double pp_tune_dp_sync_time(const pp_tune_hw *hw, const pp_config *c, const pp_tune_opts *o,
                            double params)
{
    dp_group g = dp_group_of(hw, c, o);
    if (g.n <= 1)
        return 0.0;
    pp_tune_param_bytes bp = pp_tune_bytes_per_param(o, &(pp_config){.shard = PP_SHARD_NONE});
    double frac = (double)(g.n - 1) / g.n;
    /* one collective per model chunk: Megatron-Core keeps a gradient buffer per chunk and,
     * without overlap, reduces each buffer as one bucket */
    int chunks = c->v > 0 ? c->v : 1;
    switch (c->shard) {
    case PP_SHARD_OPTIMIZER: /* reduce-scatter fp32 gradients, all-gather 16-bit weights */
        return frac * params * (bp.grads + bp.weights) / g.bw + chunks * 2.0 * ring_lat(&g, 0);
    case PP_SHARD_GRADIENTS: /* the reduce-scatters ran per micro-batch; the all-gather */
        return frac * params * bp.weights / g.bw + chunks * ring_lat(&g, 0);
    default:
        return 2.0 * frac * params * bp.grads / g.bw + chunks * allreduce_lat(&g);
    }
}

double pp_tune_grad_shard_time(const pp_tune_hw *hw, const pp_config *c, const pp_tune_opts *o,
                               double params)
{
    if (c->shard != PP_SHARD_GRADIENTS || params <= 0)
        return 0.0;
    dp_group g = dp_group_of(hw, c, o);
    if (g.n <= 1)
        return 0.0;
    pp_tune_param_bytes bp = pp_tune_bytes_per_param(o, &(pp_config){.shard = PP_SHARD_NONE});
    return (double)(g.n - 1) / g.n * params * bp.grads / g.bw + ring_lat(&g, 0);
}

/* Adam update, memory bound: fp32 master weight, m, v read and written, gradient read, 16-bit
 * weight written: ~30 bytes per parameter (28 in fp32). Sharded by d with the distributed
 * optimizer.
 * OPT_PASSES_BYTES (effect optimizer-passes): the other memory-bound passes of Megatron's
 * mixed-precision step over every fp32 main gradient / weight (megatron/optimizer/optimizer.py,
 * MixedPrecisionOptimizer.step and clip_grads.py, 2021 to Megatron-Core): unscale with the
 * inf/nan check (read 4 + write 4), the gradient norm for --clip-grad (read 4; Megatron's
 * default clip-grad is 1.0 and the SC'21 runs pass it), the clip scaling (read 4 + write 4),
 * and the copy of the fp32 main weights back into the 16-bit model weights (read 4; Adam's
 * figure above already counts the 2-byte write): 24 bytes. fp32 training (the bundled CPU
 * runtime) has no loss scale, no clip and no copy-back, so nothing is added there. */
#define OPT_PASSES_BYTES 24.0

double pp_tune_optimizer_time(const pp_tune_hw *hw, const pp_config *c,
                              const pp_tune_opts *o, double params)
{
    double per = o->precision == PP_PREC_FP32 ? 28.0 : 30.0;
    if (o->precision != PP_PREC_FP32 && fx(o, PP_TUNE_FX_OPTIMIZER_PASSES))
        per += OPT_PASSES_BYTES;
    double n = c->shard != PP_SHARD_NONE ? params / pp_tune_shard_ranks(c) : params;
    return n * per / hw->mem_bw;
}

/* Tied embeddings under pipelining: after the data-parallel sync the first and the last stage
 * all-reduce the word-embedding gradient (V x h / t, the main-gradient dtype) between them
 * before the optimizer step (megatron/training.py train_step, "All-reduce word_embeddings'
 * grad across first and last stages", 2021; finalize_model_grads._allreduce_word_embedding_grads
 * in Megatron-Core), a two-rank ring over the link that joins them. Both wait for it, so it
 * ends max(their ends) + its time later: added to both ranks' sync. */
static double embed_allreduce_time(const pp_tune_model *m, const pp_tune_hw *hw,
                                   const pp_config *c, const pp_tune_opts *o, int intra)
{
    double bytes = (double)m->vocab * m->hidden / c->t *
                   pp_tune_bytes_per_param(o, &(pp_config){.shard = PP_SHARD_NONE}).grads;
    return pp_tune_ring_allreduce(bytes, 2, intra ? hw->intra_bw : hw->inter_bw,
                                  intra ? hw->intra_lat : hw->inter_lat);
}

static pp_status alloc_cost(const pp_sched *s, pp_cost *cost)
{
    memset(cost, 0, sizeof *cost);
    size_t k = (size_t)s->n_pipes * s->stages_per_pipe, DD = (size_t)s->ranks * s->ranks;
    cost->f = pp_calloc(k, sizeof(double));
    cost->b = pp_calloc(k, sizeof(double));
    cost->i = pp_calloc(k, sizeof(double));
    cost->w = pp_calloc(k, sizeof(double));
    cost->send_bytes_f = pp_calloc(k, sizeof(double));
    cost->send_bytes_b = pp_calloc(k, sizeof(double));
    cost->latency = pp_calloc(DD, sizeof(double));
    cost->inv_bw = pp_calloc(DD, sizeof(double));
    cost->reduce = pp_calloc(s->n_reduces > 0 ? (size_t)s->n_reduces : 1, sizeof(double));
    if (!cost->f || !cost->b || !cost->i || !cost->w || !cost->send_bytes_f || !cost->send_bytes_b || !cost->latency ||
        !cost->inv_bw || !cost->reduce) {
        pp_cost_fini(cost);
        return PP_ERR_NOMEM;
    }
    return PP_OK;
}

pp_status pp_tune_costs(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
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
    pp_tune_params pc;
    pp_tune_model_params(m, &pc);
    /* REDUCE of bidirectional schedules: a layer's parameters on a rank, the mean layer's
     * for a MoE model (dense and MoE layers as the model has them) */
    double layer_params = (pc.total - pc.embed - pc.head) / m->layers / c->t;
    fill_compute(m, &ot, hw, c, o, s, grad_accum_per_param(hw, c, o),
                 (double)m->vocab * m->hidden / c->t, cost);
    st = hide_paired_a2a(m, &ot, o, s, cost);
    if (st != PP_OK) {
        pp_cost_fini(cost);
        free(own);
        return st;
    }
    fill_links(hw, c, o, s, cost);
    if (fx(o, PP_TUNE_FX_P2P_BLOCKING))
        fold_blocking_sends(s, cost);
    fill_reduces(m, hw, c, o, s, &layer_params, cost);

    double *dp_rank = extra->dp_rank;
    memset(extra, 0, sizeof *extra);
    extra->dp_rank = dp_rank;
    /* the routed experts synchronise (and shard their state) over their expert-data-parallel
     * group, the rest over d x cp; the two run one after the other */
    pp_config ce = pp_tune_expert_dp_config(c);
    for (int r = 0; r < s->ranks; r++) {
        double dense = mem[r].params - mem[r].expert_params, ex = mem[r].expert_params;
        double ar = pp_tune_dp_sync_time(hw, c, o, dense) +
                    (ex > 0 ? pp_tune_dp_sync_time(hw, &ce, o, ex) : 0.0);
        double opt = pp_tune_optimizer_time(hw, c, o, dense) +
                     (ex > 0 ? pp_tune_optimizer_time(hw, &ce, o, ex) : 0.0);
        if (dp_rank)
            dp_rank[r] = ar;
        extra->dp_allreduce = fmax(extra->dp_allreduce, ar);
        extra->optimizer = fmax(extra->optimizer, opt);
    }
    int first = pp_sched_rank_of(s, 0, 0), last = pp_sched_rank_of(s, 0, s->stages_per_pipe - 1);
    if (m->tied_embed && first >= 0 && last >= 0 && first != last &&
        fx(o, PP_TUNE_FX_EMBED_AR)) {
        extra->embed_allreduce = embed_allreduce_time(m, hw, c, o, same_node(hw, c, first, last));
        if (dp_rank) {
            dp_rank[first] += extra->embed_allreduce;
            dp_rank[last] += extra->embed_allreduce;
        }
    }
    free(own);
    return PP_OK;
}
