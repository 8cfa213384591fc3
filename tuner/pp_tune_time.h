/* pp_tune_time.h — the time model: model FLOPs, per-op times, the simulator's cost table, the
 * data-parallel sync and the optimizer step (timemodel.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_TIME_H
#define PP_TUNE_TIME_H

#include "pp_tune_memory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Time model (timemodel.c) ------------------------------------------------------------ */
/* Model FLOPs of one step for B sequences (Narayanan et al. 2021):
 * 72 B s L h^2 (1 + s/(6h) + V/(12 L h)) for GPT shapes, computed from the matrix shapes so that
 * GQA, head widths, gated MLPs and MoE layers (their active experts and router) count right:
 * pp_model_step_flops, which pprun's summary uses too. Recompute is not counted (that is
 * hardware FLOPs). */
double pp_tune_model_flops(const pp_tune_model *m, double sequences);

/* Split backward (the zero-bubble family's I and W actions): each backward (b) is the sum of
 * its input-gradient part (i: the dgrad GEMMs, the element-wise and attention backward, the
 * recomputed forward, every tensor-parallel collective) and its weight-gradient part (w: the
 * wgrad GEMMs, the embedding's scatter-add). b = i + w up to rounding; W moves no data. */
typedef struct {
    double layer_f, layer_b; /* one transformer block, one micro-batch, s */
    double layer_i, layer_w; /* layer_b split: input gradient, weight gradient */
    double recompute;        /* added to layer_b and layer_i of each layer that recomputes its
                                forward (pp_tune_recomputed_layers): not inside layer_b */
    double cp_ring_f, cp_ring_b; /* context parallelism: the ring's K/V (and dK/dV) transfers
                                    not hidden behind attention, inside layer_f / layer_b */
    double embed_f, embed_b; /* embedding on a pipe's first stage */
    double embed_i, embed_w; /* embed_b split (the scatter-add is a weight gradient: i = 0) */
    double head_f, head_b;   /* final norm + LM head + loss on a pipe's last stage */
    double head_i, head_w;   /* head_b split: logits' dgrad, loss, norm | the head's wgrad */
    /* a mixture-of-experts layer (its MLP the router, the routed and shared experts;
     * 0 for a dense model): its times as layer_* above, its recomputation, and the
     * dispatch + combine all-to-alls inside moe_f and moe_b (= inside moe_i), which a
     * schedule's overlapped F/B pair can hide (pp_tune_costs) */
    double moe_f, moe_b, moe_i, moe_w, moe_recompute;
    double moe_a2a_f, moe_a2a_b;
    double tp_allreduce;     /* per layer per direction (already inside layer_f/layer_b) */
    double p2p_bytes;        /* bytes of one stage-boundary activation transfer (per TP rank) */
    double p2p_gather;       /* s: the receiver's all-gather of the 1/t shares (0 for t = 1) */
} pp_tune_op_times;

void pp_tune_op_times_compute(const pp_tune_model *m, const pp_tune_hw *hw,
                              const pp_config *c, const pp_tune_opts *o,
                              pp_tune_op_times *out);
/* Ring all-reduce of `bytes` over n ranks on links of bandwidth bw (B/s) and latency lat (s):
 * 2 (n-1)/n bytes/bw + 2 (n-1) lat (Patarasuk & Yuan; NCCL's busbw definition). */
double pp_tune_ring_allreduce(double bytes, int n, double bw, double lat);
/* One MoE all-to-all (dispatch or combine) of one micro-batch on the busiest rank, s: each of
 * the rank's local tokens (s b / cp, its 1/t shard under sequence parallelism) sends top_k
 * hidden states, (ep - 1) / ep of them to other ranks, times the load imbalance; over NVLink
 * when the t x cp x ep ranks fit a node (Megatron-Core's rank order tp-cp-ep-dp-pp puts the
 * expert-parallel ranks beside the tensor and context ranks), else over each GPU's NIC; plus
 * ep - 1 per-peer latencies. 0 for ep = 1 or a dense model. */
double pp_tune_moe_a2a_time(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                            const pp_tune_opts *o);

/* Extra per-step times outside the pipeline schedule. */
typedef struct {
    double dp_allreduce; /* slowest rank's data-parallel gradient all-reduce, s */
    double optimizer;    /* slowest rank's optimizer step, s */
    double embed_allreduce; /* tied-embedding gradient all-reduce of first and last stage, s
                               (included in their dp_rank entries) */
    double *dp_rank;     /* [D] each rank's all-reduce, s; filled when the caller gives it */
} pp_tune_step_extra;

/* Fills the simulator's cost table for schedule s (pp_cost_fini frees it) and the extras
 * (set extra->dp_rank to an array of D doubles, or NULL, before the call). mem: the memory
 * model's D entries for (c, s) when the caller has them (their params give each rank's
 * gradient sync and optimizer step); NULL: computed here. */
pp_status pp_tune_costs(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                        const pp_tune_opts *o, const pp_sched *s, const pp_tune_rank_mem *mem,
                        pp_cost *cost, pp_tune_step_extra *extra);
/* Data-parallel gradient sync of a rank holding `params` parameters, s, over the d x cp ranks
 * that hold its weights: shard none, an all-reduce of the gradients; optimizer, a
 * reduce-scatter of gradients plus an all-gather of the weights; gradients, the all-gather
 * only (the reduce-scatters ran per micro-batch, pp_tune_grad_shard_time). Hierarchical
 * (members per node over NVLink, the node's NICs across) with NCCL's latencies (effect
 * dp-latency). 0 for d x cp = 1. */
double pp_tune_dp_sync_time(const pp_tune_hw *hw, const pp_config *c, const pp_tune_opts *o,
                            double params);
/* Gradient sharding (ZeRO-2): the reduce-scatter of one micro-batch's gradients of `params`
 * parameters into the ranks' fp32 shards, s (0 unless c->shard is gradients and d x cp > 1). */
double pp_tune_grad_shard_time(const pp_tune_hw *hw, const pp_config *c, const pp_tune_opts *o,
                               double params);
/* Adam step of a rank holding `params` parameters (memory bound), s; sharded over d x cp with
 * shard optimizer or gradients. */
double pp_tune_optimizer_time(const pp_tune_hw *hw, const pp_config *c, const pp_tune_opts *o,
                              double params);

#ifdef __cplusplus
}
#endif
#endif
