/* pp_tune.h — the tuner: model descriptions, the per-rank memory model, the time model that
 * turns one configuration into simulator costs, the search over configurations, trials on the
 * bundled runtime, and the profile the search writes.
 *
 * Units everywhere: bytes, seconds, FLOP (not FLOP/s) for work and FLOP/s for rates.
 * Vocabulary (../shared/reference/schedules.md): p = D pipeline ranks, v chunks per rank,
 * G interleaving group, b micro-batch size (sequences), d data-parallel size, t tensor-parallel
 * size, N micro-batches per pipeline per step = global_batch / (b * d).
 *
 * Ownership: *_create / pp_tune_search return objects freed by the matching *_destroy
 * (NULL is a no-op). Functions return pp_status and leave a message (pp_common.h).
 */
#ifndef PP_TUNE_H
#define PP_TUNE_H

#include <stdio.h>

#include "pp_common.h"
#include "pp_probe.h"
#include "pp_profile.h"
#include "pp_rt_plan.h"
#include "pp_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Models (models.c) ------------------------------------------------------------------- */
typedef struct {
    char name[64];
    char source[256]; /* "preset", or the file it was read from */
    int layers;       /* L transformer blocks */
    int hidden;       /* h */
    int heads;        /* a attention heads */
    int kv_heads;     /* key/value heads (grouped-query attention); = heads for MHA */
    int ffn;          /* MLP width */
    int vocab;        /* V (unpadded) */
    int seq;          /* s, training sequence length */
    int gated_mlp;    /* 1: SwiGLU, three h x ffn matrices (Llama); 0: two (GPT, BERT) */
    int norm_bias;    /* 1: LayerNorm with bias (2h per norm); 0: RMSNorm (h per norm) */
    int linear_bias;  /* 1: biases on every linear layer (GPT-3, BERT) */
    int qkv_bias;     /* 1: biases on the Q, K, V projections only (Qwen2); 0 with linear_bias */
    int head_dim;     /* width of one attention head; 0: hidden / heads */
    int learned_pos;  /* 1: learned position table (seq x h); 0: rotary */
    double rope_theta;     /* rotary base (0 with learned positions) */
    char rope_scaling[24]; /* rotary scaling type ("llama3", "yarn", ...), "" for none */
    int tied_embed;   /* 1: the LM head shares the token embedding */
    int global_batch; /* default global batch, sequences per optimizer step */
    char runtime_model[32]; /* pprun --model name when the bundled runtime runs this model */
    char seq_note[160];     /* where seq came from when it is not the preset's ("" for presets) */
} pp_tune_model;

/* Training sequence length of an imported HuggingFace model when --seq does not say: the
 * config's max_position_embeddings is the longest position the model can encode (131072 for
 * Llama 3.1), not the length it is trained at, so pptune takes this (capped at that limit). */
#define PP_TUNE_HF_DEFAULT_SEQ 4096

/* Upper bounds of a model's sizes (pp_tune_model_validate), far above any published model, so
 * that products of them stay in range: more is refused as bad input. The global batch bound
 * is in sequences (BERT with LAMB trained at 65536). */
#define PP_TUNE_MAX_LAYERS 4096
#define PP_TUNE_MAX_HIDDEN (1 << 20)
#define PP_TUNE_MAX_HEADS 65536
#define PP_TUNE_MAX_FFN (1 << 22)
#define PP_TUNE_MAX_VOCAB (1 << 24)
#define PP_TUNE_MAX_SEQ (1 << 24)
#define PP_TUNE_MAX_GLOBAL_BATCH (1 << 20)
/* The most micro-batches per step simulated whole: a schedule and its simulation are linear in
 * N (a global batch of 100000 at b = d = 1 took 45 s and 6.8 GB when simulated whole), so a
 * configuration above it is predicted from the steady state of bounded prefixes
 * (pp_tune_predict_steady below); twice the largest N of the bundled presets' batches, 2048. */
#define PP_TUNE_MAX_MICROBATCHES 4096

/* Parameter counts (elements), whole model, no parallelism. */
typedef struct {
    double per_layer;  /* one transformer block */
    double embed;      /* token embedding (+ learned positions) */
    double head;       /* final norm + LM head weights when untied (final norm only if tied) */
    double total;      /* layers * per_layer + embed + head */
} pp_tune_params;

/* Preset names, in display order; *n receives the count. */
const char *const *pp_tune_model_names(int *n);
/* PP_ERR_NOTFOUND (message lists the names) for an unknown name. */
pp_status pp_tune_model_preset(const char *name, pp_tune_model *out);
/* HuggingFace config.json: num_hidden_layers, hidden_size, num_attention_heads, intermediate_size,
 * vocab_size (GPT-2's n_layer, n_embd, n_head, n_inner, n_positions too), and optionally
 * num_key_value_heads, head_dim, model_type / hidden_act, tie_word_embeddings,
 * attention_bias / mlp_bias, rope_theta / rope_scaling. seq is PP_TUNE_HF_DEFAULT_SEQ capped at
 * max_position_embeddings (seq_note says so; the caller replaces it with --seq). A
 * mixture-of-experts config (num_local_experts, n_routed_experts, num_experts, ...) is refused
 * naming the field: the model describes dense blocks only. Errors: PP_ERR_IO / PP_ERR_PARSE
 * naming file, field and expectation. */
pp_status pp_tune_model_load_hf(const char *path, pp_tune_model *out);
/* pptune's own model JSON (docs in models.c). */
pp_status pp_tune_model_load_json(const char *path, pp_tune_model *out);
/* Consistency of the sizes (heads divide hidden, kv_heads divide heads, ...). */
pp_status pp_tune_model_validate(const pp_tune_model *m, const char *source);
void pp_tune_model_params(const pp_tune_model *m, pp_tune_params *out);
/* The block as read ("SwiGLU MLP, RMSNorm, rotary (base 500000), untied head"), into buf (n
 * bytes); returns buf. Derived from the fields, never from the model's name. */
char *pp_tune_model_block(const pp_tune_model *m, char *buf, size_t n);

/* ---- The hardware the tuner plans for --------------------------------------------------- */
#define PP_TUNE_GEMM_POINTS 16
#define PP_TUNE_RANK_PEAKS 64

/* A flat summary of a cluster description (probes/), what the time and memory models read. */
typedef struct {
    char name[64];          /* "dgx-h100", or the probed machine's name */
    char source[256];       /* "preset dgx-h100", or the cluster file */
    char fingerprint[80];   /* the cluster description's fingerprint */
    char note[400];         /* how the figures were derived (efficiency factors, sources) */
    char device[64];        /* "H100 SXM 80GB" */
    int nodes;
    int gpus_per_node;      /* devices per node */
    int is_local;           /* 1: this machine (trials possible) */
    int cpu_devices;        /* 1: the devices are CPU cores (the runtime's CPU backend, fp32) */
    double mem_bytes;       /* per device */
    double peak_flops;      /* dense 16-bit peak per device, FLOP/s (MFU denominator) */
    double gemm_flops;      /* achievable large-GEMM rate per device, FLOP/s */
    double mem_bw;          /* device memory bandwidth, B/s */
    double intra_bw;        /* one direction between two devices of a node, B/s */
    double intra_lat;       /* s */
    double inter_bw;        /* one direction per device across nodes, B/s */
    double inter_lat;       /* s */
    int inter_measured;     /* 1: inter_bw is a probed point-to-point figure, not a preset's */
    double tp_busbw;        /* all-reduce bus bandwidth inside a node, B/s (nccl-tests busbw):
                               measured where the cluster has one, else intra_bw x the preset
                               efficiency PP_TUNE_NVLINK_ALLREDUCE_EFFICIENCY */
    int tp_busbw_measured;  /* 1: tp_busbw is the cluster's measured all-reduce */
    int sms;                /* streaming multiprocessors per device (vendor figure); 0: unknown */
    int n_gemm;             /* points of a measured GEMM sweep; 0: gemm_flops for every shape */
    double gemm_mnk[PP_TUNE_GEMM_POINTS];  /* m*n*k of each point, ascending */
    double gemm_rate[PP_TUNE_GEMM_POINTS]; /* FLOP/s measured there (median) */
} pp_tune_hw;

/* Achievable GEMM rate for an m x n x k product: log-linear interpolation in m*n*k over the
 * measured sweep, clamped to its ends; gemm_flops where nothing was measured. FLOP/s. */
double pp_tune_hw_gemm_rate(const pp_tune_hw *hw, double m, double n, double k);

/* Summarises a cluster description (probes/): the slowest device's memory and GEMM rate, the
 * link classes' alpha-beta. A GEMM rate equal to the vendor peak (presets without a
 * measurement) is scaled by PP_TUNE_PEAK_GEMM_EFFICIENCY; memory bandwidth, which the cluster
 * description does not carry, comes from a table of known devices (see hw.c). */
#define PP_TUNE_PEAK_GEMM_EFFICIENCY 0.8
/* NCCL all-reduce bus bandwidth over NVLink/NVSwitch as a fraction of one GPU's one-direction
 * NVLink figure: nccl-tests all_reduce_perf on 8 x A100-SXM4-80GB reports ~200-208 GB/s busbw
 * of NVLink3's 300 GB/s (NVIDIA/nccl-tests issues #149 and #178). Used where the cluster has no
 * measured all-reduce. */
#define PP_TUNE_NVLINK_ALLREDUCE_EFFICIENCY 0.7
/* Fraction of a device's vendor memory bandwidth kernels reach (hw.c gives the source). */
#define PP_TUNE_MEM_BW_EFFICIENCY 0.88
pp_status pp_tune_hw_from_cluster(const pp_cluster *c, const char *source, pp_tune_hw *out);
/* Loads preset `name` scaled to `nodes` through probes/ and summarises it. */
pp_status pp_tune_hw_preset(const char *name, int nodes, pp_tune_hw *out);

/* ---- Options shared by the memory and time models --------------------------------------- */
typedef enum {
    PP_TUNE_RECOMPUTE_NONE = 0,
    PP_TUNE_RECOMPUTE_SELECTIVE,
    PP_TUNE_RECOMPUTE_FULL
} pp_tune_recompute;

/* How each micro-batch's weight gradients reach the accumulated gradient. */
typedef enum {
    PP_TUNE_GRAD_ACCUM_FUSED = 0, /* inside the weight-gradient GEMM (Megatron-Core's default
                                     gradient-accumulation fusion): nothing more */
    PP_TUNE_GRAD_ACCUM_MAIN,      /* the DDP hook adds the 16-bit gradient into the fp32 main
                                     gradient every micro-batch (--no-gradient-accumulation-fusion) */
    PP_TUNE_GRAD_ACCUM_AUTOGRAD16 /* autograd adds into the 16-bit .grad from the second
                                     micro-batch on (Megatron-LM 2021, before the fusion existed) */
} pp_tune_grad_accum;

typedef struct {
    /* pp_common.h's: PP_PREC_BF16 Megatron mixed precision (bf16 weights, fp32 main grads,
     * Adam; the default), PP_PREC_FP32 the bundled runtime on the CPU (everything fp32) */
    pp_precision precision;
    int distributed_optimizer; /* Adam state sharded over d (Megatron --use-distributed-optimizer) */
    pp_tune_recompute recompute;
    int flash_attention;   /* 1: no s x s score matrix kept (Korthikanti's 5as/h term removed) */
    int sequence_parallel; /* 1: Megatron sequence parallelism, the 10sbh term split over t too */
    double headroom;       /* fraction of device memory kept free, default 0.05 */
    double gemm_efficiency; /* fraction of the hw GEMM rate a layer's GEMMs reach, default 1 */
    pp_tune_grad_accum grad_accum; /* default FUSED */
    unsigned without;       /* PP_TUNE_FX_* effects of the time model switched off (0: all on);
                               only for measuring each effect's share (pptune validate) */
} pp_tune_opts;

/* The time model's effects (timemodel.c), each of which `without` can switch off. */
enum {
    PP_TUNE_FX_TP_BUSBW = 1u << 0,    /* TP all-reduce at the measured / preset busbw, not link */
    PP_TUNE_FX_RECOMPUTE_AR = 1u << 1, /* the recomputed forward's two TP all-reduces */
    PP_TUNE_FX_SEQ_PAR = 1u << 2,     /* sequence parallelism's collectives and split work */
    PP_TUNE_FX_ATTENTION = 1u << 3,   /* s^2 memory-bound work / flash attention's causal FLOPs */
    PP_TUNE_FX_GEMM_SHAPE = 1u << 4,  /* wave quantization of GEMM tiles over the SMs */
    PP_TUNE_FX_KERNEL_COST = 1u << 5, /* a fixed cost per kernel */
    PP_TUNE_FX_DP_NICS = 1u << 6,     /* DP sync over all the node's NICs of the group */
    PP_TUNE_FX_P2P_SHARE = 1u << 7,   /* each TP rank sends 1/t of the boundary tensor */
    PP_TUNE_FX_P2P_BLOCKING = 1u << 8, /* Megatron's pipeline sends block compute */
    PP_TUNE_FX_OPTIMIZER_PASSES = 1u << 9, /* the mixed-precision step's unscale, norm, clip,
                                              copy-back passes beside Adam's */
    PP_TUNE_FX_EMBED_AR = 1u << 10,   /* tied-embedding all-reduce of first and last stage */
    PP_TUNE_FX_LOSS_PASSES = 1u << 11, /* the fp32 cross-entropy's memory-bound passes */
    PP_TUNE_FX_P2P_RATE = 1u << 12,   /* pipeline transfers across nodes at the measured rate */
    PP_TUNE_FX_GRAD_ACCUM = 1u << 13, /* unfused gradient accumulation (opts.grad_accum) */
    PP_TUNE_FX_COUNT = 14
};
/* "tp-busbw", "recompute-ar", ... for bit i; NULL past the last. */
const char *pp_tune_fx_name(int i);

void pp_tune_opts_default(pp_tune_opts *o);
const char *pp_tune_recompute_name(pp_tune_recompute r);

/* ---- One configuration ------------------------------------------------------------------- */
typedef struct {
    char kind[16]; /* schedule generator name */
    int p;         /* D pipeline ranks */
    int v;         /* chunks per rank (interleaved; 1 otherwise, 2 for bitpipe) */
    int G;         /* interleaving group; 0 where it does not apply */
    int b;         /* micro-batch size, sequences */
    int d;         /* data-parallel size */
    int t;         /* tensor-parallel size */
    int N;         /* micro-batches per step per pipeline */
    int uneven;    /* Llama-3 split */
    int first;     /* layers of a pipe's first stage (with the embedding); 0 = as the others */
    int last;      /* layers of a pipe's last stage (with the head and loss); 0 = as the others */
} pp_tune_config;

/* The one mapping each way between the tuner's configuration and the profile's (which pprun
 * and the exporters read; pp_profile.h). to_profile: out->schedule points into c->kind (valid
 * while c is). from_profile: PP_ERR_INVALID when the schedule name does not fit kind. */
void pp_tune_config_to_profile(const pp_tune_config *c, pp_profile_config *out);
pp_status pp_tune_config_from_profile(const pp_profile_config *c, pp_tune_config *out);

/* "interleaved p=4 v=2 G=4 b=1 d=8 t=8 N=32 even" into buf; returns buf. */
char *pp_tune_config_str(const pp_tune_config *c, char *buf, size_t n);
/* The layer split as the leaderboard shows it: "even", "uneven" (Llama 3), or "A/Z" (first- and
 * last-stage layers, the rest even; "-" for one not given). Returns buf. */
char *pp_tune_split_str(const pp_tune_config *c, char *buf, size_t n);

/* Per-rank memory (memory.c). */
typedef struct {
    double params;    /* parameters held by the rank (all its stages, after tensor split) */
    double weights;   /* bytes */
    double grads;
    double optim;
    double acts;      /* saved activations at the rank's peak */
    double comm;      /* send/receive buffers */
    double workspace; /* transient buffers and fixed framework reserve */
    double total;
    double peak_units; /* peak in-flight activations, micro-batch x (L/D layers) */
} pp_tune_rank_mem;

/* Bytes of activations one transformer layer keeps for one micro-batch of b sequences
 * (Korthikanti et al. 2022 Table 2, tensor-parallel variant; see memory.c). */
double pp_tune_act_bytes_per_layer(const pp_tune_model *m, int b, int t, const pp_tune_opts *o);
/* Bytes one layer holds for one micro-batch between its I and its W (split backward): the
 * linears' inputs and output gradients, Korthikanti's terms (memory.c says which). */
double pp_tune_held_for_w_bytes_per_layer(const pp_tune_model *m, int b, int t,
                                          const pp_tune_opts *o);
/* Fills mem[0..D-1] for the schedule s of configuration c. */
pp_status pp_tune_memory(const pp_tune_model *m, const pp_tune_config *c, const pp_sched *s,
                         const pp_tune_opts *o, pp_tune_rank_mem *mem);
/* The bundled runtime's own accounting (pprun, CPU backend, fp32): the runtime's memory plan
 * (runtime/plan/pp_rt_plan.h, adapted in runtime_mem.c), the one the executor's measured peaks
 * equal; pp_tune_memory uses it when o->precision is PP_PREC_FP32. t > 1 is planned as the
 * runtime splits each stage (Megatron's split, embedding and head replicated), and with
 * o->sequence_parallel (o may be NULL: none) as it runs sequence parallelism. */
pp_status pp_tune_memory_runtime(const pp_tune_model *m, const pp_tune_config *c,
                                 const pp_sched *s, const pp_tune_opts *o, pp_tune_rank_mem *mem);
/* The same walk for the runtime on another backend: the CPU (as above), or the CUDA backend
 * (pprun --backend cuda) in fp32 or bf16 with a transport that stages through host memory
 * (threads, MPI: the transport's copies are not device memory). CUDA differs from the CPU's
 * accounting: the kernel scratch (its largest single need, first step: GEMM operand copies in
 * bf16, per-row losses, the gradient norm's partials) and the cuBLAS workspace under
 * workspace; every head's attention scratch of a batch row in the backward; in bf16 a 2-byte
 * copy of every weight; the step's tokens and targets stay in host memory. Equal to the
 * backend's own accounting to the byte (tests/test_cuda_rt.c, run under the CUDA emulation).
 * Not modelled: the NCCL transport's message buffers, and what the driver holds outside the
 * backend's accounting (context, memory-pool slack: bench_cuda_layer reports both). With
 * o->sequence_parallel (o may be NULL: none) it plans sequence parallelism as the runtime runs
 * it. */
/* backend: PP_RT_BACKEND_CPU or PP_RT_BACKEND_CUDA (runtime/plan/pp_rt_plan.h); precision:
 * PP_PREC_BF16 on CUDA only. */
pp_status pp_tune_memory_runtime_on(const pp_tune_model *m, const pp_tune_config *c,
                                    const pp_sched *s, const pp_tune_opts *o,
                                    pp_rt_backend_kind backend, pp_precision precision,
                                    pp_tune_rank_mem *mem);
/* Bytes available per device after the headroom. */
double pp_tune_mem_capacity(const pp_tune_hw *hw, const pp_tune_opts *o);
/* Bytes per parameter of the weights, gradients and optimizer state (memory.c; Megatron-LM's
 * theoretical_memory_usage.py table): bf16 2 + 4 + 12, the CPU runtime's fp32 4 + 4 + 8; with
 * the distributed optimizer and d > 1 the optimizer's share divided by d. The one copy: the
 * memory model, the time model's gradient sync and the search's lower bound read it. */
typedef struct {
    double weights, grads, optim;
} pp_tune_param_bytes;
pp_tune_param_bytes pp_tune_bytes_per_param(const pp_tune_opts *o, int d);

/* ---- Time model (timemodel.c) ------------------------------------------------------------ */
/* Model FLOPs of one step for B sequences (Narayanan et al. 2021):
 * 72 B s L h^2 (1 + s/(6h) + V/(12 L h)) for GPT shapes, computed from the matrix shapes so that
 * GQA and gated MLPs count right. Recompute is not counted (that is hardware FLOPs). */
double pp_tune_model_flops(const pp_tune_model *m, double sequences);

/* Split backward (the zero-bubble family's I and W actions): each backward (b) is the sum of
 * its input-gradient part (i: the dgrad GEMMs, the element-wise and attention backward, the
 * recomputed forward, every tensor-parallel collective) and its weight-gradient part (w: the
 * wgrad GEMMs, the embedding's scatter-add). b = i + w up to rounding; W moves no data. */
typedef struct {
    double layer_f, layer_b; /* one transformer block, one micro-batch, s */
    double layer_i, layer_w; /* layer_b split: input gradient, weight gradient */
    double embed_f, embed_b; /* embedding on a pipe's first stage */
    double embed_i, embed_w; /* embed_b split (the scatter-add is a weight gradient: i = 0) */
    double head_f, head_b;   /* final norm + LM head + loss on a pipe's last stage */
    double head_i, head_w;   /* head_b split: logits' dgrad, loss, norm | the head's wgrad */
    double tp_allreduce;     /* per layer per direction (already inside layer_f/layer_b) */
    double p2p_bytes;        /* bytes of one stage-boundary activation transfer (per TP rank) */
    double p2p_gather;       /* s: the receiver's all-gather of the 1/t shares (0 for t = 1) */
} pp_tune_op_times;

void pp_tune_op_times_compute(const pp_tune_model *m, const pp_tune_hw *hw,
                              const pp_tune_config *c, const pp_tune_opts *o,
                              pp_tune_op_times *out);
/* Ring all-reduce of `bytes` over n ranks on links of bandwidth bw (B/s) and latency lat (s):
 * 2 (n-1)/n bytes/bw + 2 (n-1) lat (Patarasuk & Yuan; NCCL's busbw definition). */
double pp_tune_ring_allreduce(double bytes, int n, double bw, double lat);

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
pp_status pp_tune_costs(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                        const pp_tune_opts *o, const pp_sched *s, const pp_tune_rank_mem *mem,
                        pp_cost *cost, pp_tune_step_extra *extra);
/* Data-parallel gradient sync of a rank holding `params` parameters, s: a ring all-reduce of
 * the gradients, or with the distributed optimizer a reduce-scatter of gradients plus an
 * all-gather of the weights (bytes from pp_tune_bytes_per_param). 0 for d = 1. */
double pp_tune_dp_sync_time(const pp_tune_hw *hw, const pp_tune_config *c, const pp_tune_opts *o,
                            double params);
/* Adam step of a rank holding `params` parameters (memory bound), s; sharded by d with the
 * distributed optimizer. */
double pp_tune_optimizer_time(const pp_tune_hw *hw, const pp_tune_config *c, const pp_tune_opts *o,
                              double params);

/* ---- Prediction of one configuration ----------------------------------------------------- */
typedef struct {
    pp_tune_config cfg;
    double step_time;       /* s: max over ranks of (its last compute or reduce in the simulated
                               schedule + its DP all-reduce), + the optimizer step */
    double pipeline_time;   /* s: simulated makespan */
    double tokens_per_s;
    double tflops_per_gpu;  /* model TFLOP/s per GPU (Narayanan) */
    double mfu;             /* model FLOPs / (step_time * GPUs * peak) in [0, 1] */
    double bubble_ideal;    /* idle / busy (Megatron's definition) */
    double bubble_total;    /* idle / (D * makespan) */
    double peak_mem;        /* bytes, the fullest rank */
    int peak_rank;
    double capacity;        /* bytes usable per device */
    int fits;
    double measured_step;   /* s from a trial, 0 when none */
    double measured_peak;   /* bytes, 0 when none */
    char trial_status[16];  /* "", "ok", "crash", "oom", "timeout" */
    char trial_detail[200]; /* the failed trial's error line, signal or time limit */
    char trial_where[512];  /* the trial's launcher and nodes (pp_tune_trial_result.where) */
    double measured_rank_peak[PP_TUNE_RANK_PEAKS]; /* bytes per pipeline rank (first
                                                       PP_TUNE_RANK_PEAKS), trials only */
    int predicted_only;     /* not runnable by the runtime (its model) or not on this machine */
    /* In a pp_tune_result's best list (owned by the result, valid until
     * pp_tune_result_destroy): the schedule the candidate was evaluated on and the memory
     * model's [cfg.p] entries for it, shared by the leaderboard, the profile and the trials.
     * NULL in a prediction from pp_tune_evaluate / pp_tune_predict. For N above the steady-state
     * budget (pp_tune_predict_steady) sched is the simulated prefix: sched->microbatches <
     * cfg.N, and what is drawn from it is the prefix's timeline. */
    const pp_sched *sched;
    const pp_tune_rank_mem *mem;
} pp_tune_prediction;

/* Costs schedule s with the time model (pp_tune_costs, extra as there) and simulates it with
 * spans recorded: on PP_OK *sim holds the result (pp_sim_result_fini frees it). */
pp_status pp_tune_simulate(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                           const pp_tune_opts *o, const pp_sched *s, pp_tune_step_extra *extra,
                           pp_sim_result *sim);
/* Evaluates configuration c on an already generated schedule s (its kind, D, N, v, G and split
 * must be c's): applies the memory model once (into mem, D entries, when not NULL), simulates
 * with the time model's costs. */
pp_status pp_tune_evaluate(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                           const pp_tune_opts *o, const pp_sched *s, pp_tune_prediction *out,
                           pp_tune_rank_mem *mem);
/* The same with the memory model's D entries for (c, s) already computed (not recomputed). */
pp_status pp_tune_evaluate_mem(const pp_tune_model *m, const pp_tune_hw *hw,
                               const pp_tune_config *c, const pp_tune_opts *o, const pp_sched *s,
                               const pp_tune_rank_mem *mem, pp_tune_prediction *out);
/* Schedule parameters of c. */
void pp_tune_sched_params(const pp_tune_model *m, const pp_tune_config *c, pp_sched_params *out);
/* Generates the schedule, simulates it with the time model and applies the memory model.
 * mem (optional) receives D per-rank entries the caller allocated. */
pp_status pp_tune_predict(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                          const pp_tune_opts *o, pp_tune_prediction *out, pp_tune_rank_mem *mem);

/* ---- Huge N: the steady state (predict.c) ------------------------------------------------
 * A configuration with more micro-batches than the simulation budget (PP_TUNE_MAX_MICROBATCHES
 * unless a test sets another) is not simulated whole: three prefixes N1 < N2 < N3 <= budget
 * (N3 about max(1024, 16 D v, 4 periods), N1 about N3 / 2)
 * with N's remainder modulo the schedule's period (pp_sched_desc_period) and equal steps are,
 * and makespan, every rank's step end, busy and idle time (the bubble) and every rank's memory
 * (in-flight activations included) are extrapolated linearly to N after checking that they grow
 * by the same amount over both steps (relative 1e-9). pp_tune_predict takes this path by itself
 * for N above the budget. */
int pp_tune_steady_budget(void);
/* Test-only knob: the budget in micro-batches (n <= 0: back to PP_TUNE_MAX_MICROBATCHES). */
void pp_tune_steady_budget_set(int n);
/* The three prefixes for c into n[0..2]; PP_ERR_UNSUPPORTED saying why when the budget holds
 * too few periods (a group larger than the budget), PP_ERR_INVALID when a prefix breaks a rule
 * of the schedule. */
pp_status pp_tune_steady_prefixes(const pp_tune_model *m, const pp_tune_config *c, int n[3]);
/* The prediction of c (its real N) from the prefixes, mem (c->p entries, may be NULL) the
 * extrapolated memory; *prefix (prefix may be NULL; the caller destroys it) the N3 prefix's
 * schedule, the one a timeline can show. PP_ERR_UNSUPPORTED naming the figure when the prefixes
 * are not in a steady state. */
pp_status pp_tune_predict_steady(const pp_tune_model *m, const pp_tune_hw *hw,
                                 const pp_tune_config *c, const pp_tune_opts *o,
                                 pp_tune_prediction *out, pp_tune_rank_mem *mem,
                                 pp_sched **prefix);

/* ---- Validation against published measurements (validate.c) ----------------------------- */
typedef struct {
    const char *name;    /* "1.7B" */
    const char *cluster; /* the cluster preset that describes the machine */
    int hidden, heads, layers;
    int model_parallel;  /* t.p */
    int gpus, global_batch, seq, vocab;
    double tflops_per_gpu; /* published, the paper's FLOP count (recompute included) */
    const char *source;
    int micro_batch;       /* the run's micro-batch size; 0: not published (chosen) */
    int chunks;            /* the run's model chunks per rank (v); 0: not published (chosen) */
} pp_tune_published;

/* The bundled table (static storage); *n receives the count. */
const pp_tune_published *pp_tune_published_rows(int *n);
/* The row's published step time, s: its FLOP count over the measured rate. */
double pp_tune_published_step(const pp_tune_published *r);

#define PP_TUNE_VALIDATE_MAX 32
typedef struct {
    const pp_tune_published *row;
    pp_tune_config cfg;    /* the layout predicted (the published (b, v), else the fastest) */
    double published_step; /* s */
    double predicted_step; /* s */
    double error;          /* predicted / published - 1 */
} pp_tune_check;

typedef struct {
    int n;
    pp_tune_check rows[PP_TUNE_VALIDATE_MAX];
    double median_abs, max_abs; /* of |error| */
    char hw_note[400];          /* where the first row's hardware figures came from */
} pp_tune_validation;

/* Predicts every bundled row with the time model (effects in `without` off; 0 for the model
 * every command uses). PP_ERR_INVALID when a row has no layout that fits. */
pp_status pp_tune_validate(unsigned without, pp_tune_validation *out);
/* Where a prediction's step time goes (breakdown.c), s; the parts add up to p->step_time. */
typedef struct {
    double compute;   /* the busiest rank's compute, without its tensor-parallel all-reduces */
    double tp;        /* that rank's tensor-parallel all-reduces (inside its F and B) */
    double bubble;    /* pipeline makespan with free links - that rank's compute: idle time */
    double p2p;       /* makespan - makespan with free links: exposed point-to-point transfers
                         and weight-replica syncs (bidirectional schedules) */
    double dp;        /* exposed data-parallel gradient sync after the pipeline */
    double optimizer; /* the optimizer step */
} pp_tune_time_parts;

/* Regenerates p->cfg's schedule, simulates it with and without link costs under options o
 * (the search's: pp_tune_result.opts) and fills *out. For N above the steady-state budget the
 * two longest prefixes of pp_tune_steady_prefixes are, and their parts extrapolated to N. */
pp_status pp_tune_breakdown(const pp_tune_model *m, const pp_tune_hw *hw,
                            const pp_tune_prediction *p, const pp_tune_opts *o,
                            pp_tune_time_parts *out);

/* PP_OK when every name in the comma list (NULL: all) is a registry schedule, else
 * PP_ERR_INVALID naming the unknown one and the known ones. pp_tune_search checks it too. */
pp_status pp_tune_schedules_check(const char *list);

/* ---- Trials (trials.c) ---------------------------------------------------------------------- */
#define PP_TUNE_TRIAL_MAX_RANKS PP_TUNE_RANK_PEAKS

/* ---- The allocation trials run in (alloc.c) ------------------------------------------------- */
/* Where trials may run beyond this process: a Slurm allocation (job steps with srun) or an
 * Open MPI host list (mpirun --hostfile). launcher "" = none: trials run pprun as one child
 * with every rank a thread. Plain value, filled by pp_tune_alloc_detect. */
typedef struct {
    char launcher[16];   /* "srun", "mpirun" or "" */
    char nodes[256];     /* as the launcher names them: "n[1-4]", or the host file's hosts */
    char hostfile[PP_PROFILE_PPRUN_ARG_LEN]; /* mpirun: the Open MPI host file */
    char job[32];        /* srun: SLURM_JOB_ID */
    int n_nodes;         /* nodes of the allocation */
    int slots;           /* ranks the allocation holds (tasks or host-file slots, all nodes) */
    /* srun: nodes lost during the search, a comma list; later steps --exclude them (n_nodes
     * and slots no longer count them); sized to fit one launcher word */
    char lost[PP_PROFILE_PPRUN_ARG_LEN - 10];
} pp_tune_alloc;

/* hostfile != NULL: an Open MPI host file ("host [slots=N]" lines, # comments); else a Slurm
 * allocation from SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_JOB_NUM_NODES and SLURM_NTASKS (or
 * SLURM_JOB_CPUS_PER_NODE); else launcher "". PP_ERR_IO / PP_ERR_INVALID naming the file, line
 * or variable when they are unreadable. */
pp_status pp_tune_alloc_detect(const char *hostfile, pp_tune_alloc *out);

/* The launcher's words before pprun for a trial of `ranks` processes with a time limit:
 * srun --nodes n --ntasks R [--ntasks-per-node R/n] --kill-on-bad-exit=1 --time M --mpi=pmix,
 * or mpirun --hostfile F -np R. Writes into store[0..max), argv pointing at them; returns the
 * count (0 for launcher ""), -1 when ranks exceed a.slots. nodes_used: the nodes it spreads on. */
int pp_tune_alloc_argv(const pp_tune_alloc *a, int ranks, double timeout_s, int max,
                       char store[][PP_PROFILE_PPRUN_ARG_LEN], char **argv, int *nodes_used);
/* The same for one process on every node of the allocation (probes: alloc_probe.c). */
int pp_tune_alloc_argv_per_node(const pp_tune_alloc *a, double timeout_s, int max,
                                char store[][PP_PROFILE_PPRUN_ARG_LEN], char **argv);
/* The node a failed step's launcher said was lost ("srun: error: Node failure on n2" in msg)
 * into node (n bytes); returns 1, or 0 when msg names none. */
int pp_tune_alloc_lost_node(const char *msg, char *node, size_t n);
/* Takes node out of the allocation for the steps that follow (srun --exclude; one node's share
 * of slots less). Returns 1, or 0 when it was already out, is the last node, or the launcher is
 * not srun. */
int pp_tune_alloc_lose(pp_tune_alloc *a, const char *node);

/* ---- Probes over the allocation (alloc_probe.c) ---------------------------------------- */
/* Probes every node of allocation a, one rank per node: `LAUNCHER pptune probe --json
 * --no-probe-nodes [--quick]` (pptune: the program's path), gathered on rank 0 over MPI. *out
 * (pp_cluster_destroy) holds every node, named as the launcher names them; source (n bytes)
 * says how it was probed and names the nodes. PP_ERR_DEVICE when the step fails or is killed
 * at timeout_s (the message has its last line); PP_ERR_PARSE for unreadable output. */
pp_status pp_tune_probe_nodes(const pp_tune_alloc *a, const char *pptune, int quick,
                              double timeout_s, pp_cluster **out, char *source, size_t n);
/* 1 when the nodes of c differ by more than tolerance (0.2: 20 %) in their slowest device's
 * GEMM rate or smallest memory, with msg (n bytes) naming the lowest and highest nodes; else 0.
 * (The tuner plans with the slowest and smallest: pp_tune_hw_from_cluster.) */
int pp_tune_nodes_differ(const pp_cluster *c, double tolerance, char *msg, size_t n);
#define PP_TUNE_NODES_TOLERANCE 0.2      /* nodes differing more than this are warned about */
#define PP_TUNE_PROBE_NODES_TIMEOUT_S 900 /* the probe of every node is killed past it */

/* The data-parallel all-reduce of a reduced trial, timed across the allocation. */
typedef struct {
    int ranks, nodes; /* the group timed: min(d, the allocation's ranks), over that many nodes */
    double bytes;     /* message per rank: the fullest stage's gradient bytes */
    double probed_s;  /* median all-reduce over `ranks` */
    double full_s;    /* at the candidate's d: probed_s x ring(d) / ring(ranks) */
    double run_s;     /* at the d the trial ran (0 for one replica): what its step included */
} pp_tune_dp_probe;
/* 2(n-1)/n: the share of a message each rank moves in a ring all-reduce (0 for n < 2). */
double pp_tune_ring_factor(int n);
/* Times an MPI all-reduce of `bytes` over min(d, a->slots) ranks spread over a's nodes (`LAUNCHER
 * pptune probe --allreduce BYTES --json`) and scales it to d and d_run (ring formula).
 * PP_ERR_UNSUPPORTED when the allocation holds fewer than 2 ranks; PP_ERR_DEVICE when the step
 * fails; PP_ERR_PARSE for unreadable output. */
pp_status pp_tune_dp_allreduce_probe(const pp_tune_alloc *a, const char *pptune, double bytes,
                                     int d, int d_run, double timeout_s, pp_tune_dp_probe *out);

typedef struct {
    const pp_tune_model *model; /* model->runtime_model names pprun's preset */
    const pp_tune_config *cfg;  /* t >= 1 (t > 1: pprun --tp t) */
    const char *pprun;          /* path of the pprun program; the search passes NULL to a
                                   runner (the default runner fills in its own path) */
    int steps;                  /* >= 2: the first is warm-up */
    double timeout_s;           /* the child is killed past it */
    int cuda;                   /* 1: pprun --backend cuda --precision bf16 (the ranks' GPUs) */
    const pp_tune_alloc *alloc; /* NULL or launcher "": one child, ranks as threads; else a
                                   job step (srun) or mpirun over its nodes, MPI transport */
    int sequence_parallel;      /* 1: pprun --sequence-parallel (with cfg->t > 1) */
} pp_tune_trial_params;

typedef struct {
    char status[16];   /* "ok", "oom", "crash", "timeout", "hang", "mpi", "node-lost" */
    char detail[200];  /* the child's error line, signal, or time limit */
    double step_time;  /* s, pprun's median after warm-up ("ok" only) */
    double peak;       /* bytes, the fullest rank ("ok" only) */
    double peak_per_rank[PP_TUNE_TRIAL_MAX_RANKS]; /* replica 0's pipeline ranks */
    double wall_s;     /* the trial's own wall time */
    char where[512];   /* how it ran: "ranks as threads of one pprun on this machine", "srun on
                          2 nodes of n[1-4]", and a reduction when there was one */
    int d_run;         /* data-parallel replicas it ran: cfg->d, or fewer where the allocation
                          holds fewer ranks (a reduced trial, said in where) */
    char lost_node[64]; /* "node-lost": the node the launcher named ("" when it named none) */
} pp_tune_trial_result;

/* Runs pprun --json for the configuration in a child process. A crash, OOM or timeout of the
 * child is a result in *r (status), not an error; errors are failures to start it. */
pp_status pp_tune_trial(const pp_tune_trial_params *tp, pp_tune_trial_result *r);

/* A trial runner: how the search measures a candidate. run() fills *r like pp_tune_trial (a
 * failed run is a status, an error is a failure to start); ctx is the runner's own. The
 * default (run NULL in the search's parameters) runs pprun in a child process: pp_tune_trial
 * with tp->pprun = the path pp_tune_pprun_find gives. Tests pass a fake one. */
typedef struct {
    pp_status (*run)(void *ctx, const pp_tune_trial_params *tp, pp_tune_trial_result *r);
    void *ctx;
} pp_tune_runner;

/* The pprun program for trials: $PPTUNE_PPRUN, else beside the running program's build tree
 * (<dir>/../runtime/pprun) or directory (<dir>/pprun). PP_ERR_NOTFOUND (message says to set
 * PPTUNE_PPRUN) when none is executable. */
pp_status pp_tune_pprun_find(char *path, size_t n);
/* The running program's own path (/proc/self/exe): pptune, for the probes it starts over an
 * allocation (alloc_probe.c). PP_ERR_NOTFOUND when it cannot be read. */
pp_status pp_tune_self_path(char *path, size_t n);
/* The default runner's run(): ctx is the pprun path (const char *). */
pp_status pp_tune_runner_pprun(void *ctx, const pp_tune_trial_params *tp, pp_tune_trial_result *r);

/* What the search reports about its trials (pp_tune_search_params.on_trial). */
typedef enum {
    PP_TUNE_TRIAL_NO_RUNNER,   /* the default runner found no pprun: message; nothing runs */
    PP_TUNE_TRIAL_SKIPPED,     /* cfg not trialled: the runtime needs `need` bytes per GPU,
                                  `capacity` usable */
    PP_TUNE_TRIAL_START,       /* cfg starts; done of total trials ran before it */
    PP_TUNE_TRIAL_NOT_STARTED, /* the runner failed to start cfg: message */
    PP_TUNE_TRIAL_DONE,        /* cfg ran: result (its status may be a failure) */
    PP_TUNE_TRIAL_END          /* every trial is over: done = total */
} pp_tune_trial_event_kind;

typedef struct {
    pp_tune_trial_event_kind kind;
    const pp_tune_config *cfg;
    int done, total;
    double need, capacity;              /* SKIPPED, bytes */
    const char *message;                /* NO_RUNNER, NOT_STARTED */
    const pp_tune_trial_result *result; /* DONE */
} pp_tune_trial_event;

/* ---- Search (search.c, search_trials.c) ------------------------------------------------------ */
/* Memory savings the fallback adds one at a time (each keeping the previous ones) when nothing
 * fits: the distributed optimizer, sequence parallelism (only with t > 1 allowed), selective
 * recompute, then full recompute instead. */
typedef enum {
    PP_TUNE_SAVING_DISTRIBUTED_OPTIMIZER = 1,
    PP_TUNE_SAVING_SEQUENCE_PARALLEL,
    PP_TUNE_SAVING_RECOMPUTE_SELECTIVE,
    PP_TUNE_SAVING_RECOMPUTE_FULL
} pp_tune_saving;

typedef struct pp_tune_result pp_tune_result;

typedef struct {
    const pp_tune_model *model;
    const pp_tune_hw *hw;
    pp_tune_opts opts;
    int global_batch;    /* sequences; 0 = the model's default */
    const char *schedules; /* comma list; NULL = the registry's default set (the rows not
                              opt_in: all eight, the zero-bubble family included) */
    int max_t;           /* 0 = gpus per node */
    int max_b;           /* largest micro-batch size tried, 0 = 16 */
    int allow_tp;        /* 0: t = 1 only */
    int keep;            /* leaderboard size kept (ranked), default 10 */
    /* When nothing fits (bf16 only): 1 retries with the memory savings one at a time. */
    int fallback;
    /* Trials of the best `trials` candidates (any t: the runtime splits stages), only where the
     * cluster is this machine (hw->is_local) and the runtime runs the model
     * (model->runtime_model): then recalibration and choice (pp_tune_result). 0: none. */
    int trials;
    int trial_steps;        /* per trial, the first is warm-up; 0 = 5 */
    double trial_timeout_s; /* a trial running longer is killed; 0 = 60 */
    pp_tune_runner runner;  /* run NULL: pprun in a child process (pp_tune_runner_pprun) */
    const pp_tune_alloc *alloc; /* NULL: trials on this machine; else job steps over it; a
                                   node lost in one trial is excluded from the later ones */
    /* The pptune program, for the allocation's data-parallel all-reduce probe: a reduced trial
     * (fewer replicas than d) adds the probed full-size all-reduce in place of the one it ran
     * (pp_tune_dp_allreduce_probe). NULL: not probed (said in the trial's where). */
    const char *prober;
    /* Reports, all optional, each given progress_ctx: progress of a pass over the
     * candidates; a pass's end (r: its counters; r->opts its options); a retry with one more
     * saving (next: the next pass's options); the trials. */
    void (*progress)(void *ctx, long done, long total);
    void (*on_pass)(void *ctx, const pp_tune_result *r);
    void (*on_retry)(void *ctx, pp_tune_saving added, const pp_tune_opts *next);
    void (*on_trial)(void *ctx, const pp_tune_trial_event *ev);
    void *progress_ctx;
} pp_tune_search_params;

typedef struct {
    pp_tune_config cfg;
    char reason[200]; /* why it was pruned or lost */
    int stage;        /* 0 rule, 1 memory, 2 outranked, 3 bound (not simulated: lower bound slower
                         than the kept ones) */
} pp_tune_reject;

/* A simulated candidate kept beside the leaderboard (per-schedule bests, the Pareto front). */
typedef struct {
    pp_tune_prediction pred; /* its sched and mem are NULL */
    pp_tune_rank_mem worst;  /* the fullest rank's memory by category (pred.peak_rank) */
} pp_tune_candidate;

struct pp_tune_result {
    pp_tune_prediction *best; /* [n_best], fastest first (after trials: the fastest measured
                                 candidate that fits first); only fitting candidates */
    int n_best;
    pp_tune_reject *rejects;  /* every candidate that lost, with its reason */
    long n_rejects;
    long seen, pruned_rule, pruned_memory, simulated, bounded, trialled;
    long sim_cache_hits;
    double wall_s;
    int global_batch;
    double calibration; /* median measured / predicted step time over ok trials; 0 = none */
    pp_tune_opts opts;  /* the options the figures assume (the last pass's, after fallback) */
    /* [n_sched_best], in registry order: the fastest fitting candidate of each schedule
     * searched that has one (predicted figures). The bound skips a candidate only when it
     * can beat neither the leaderboard nor its own schedule's best, so each is exact. */
    pp_tune_candidate *sched_best;
    int n_sched_best;
    /* [n_pareto], by increasing peak memory: the simulated fitting candidates no other
     * simulated one beats in both step time and peak memory (the bound's skipped ones are not
     * among them: see `simulated`). */
    pp_tune_candidate *pareto;
    int n_pareto;
    int allow_tp;       /* t > 1 was searched (0 on CPU devices whatever was asked) */
    pp_sched **held;    /* private: the schedules best[i].sched point to */
    int n_held;
};

/* The options a search on hw uses: on CPU devices (the runtime's CPU backend) fp32 (tensor
 * and sequence parallelism as asked: the CPU backend runs both), else o and allow_tp as
 * given. pp_tune_search applies it; a program
 * that describes the options before searching calls it too. */
void pp_tune_search_adjust(const pp_tune_hw *hw, pp_tune_opts *o, int *allow_tp);

/* enumerate → bound → simulate (one pass; with fallback, more passes with added savings) →
 * trials through the runner → recalibration → choice. *out (pp_tune_result_destroy frees it)
 * is the last pass's result, also when nothing fits (n_best = 0). Errors: allocation, or a
 * model inconsistency found while evaluating. */
pp_status pp_tune_search(const pp_tune_search_params *sp, pp_tune_result **out);
void pp_tune_result_destroy(pp_tune_result *r);

/* ---- Profile (profile_write.c) ------------------------------------------------------------ */
typedef struct {
    const pp_tune_model *model;
    const pp_tune_hw *hw;
    const pp_tune_opts *opts;
    const pp_tune_result *result;
    const char *command_line;  /* how pptune was invoked */
    int trials_run;            /* 0: figures are predicted only */
    const char *cluster_json;  /* the cluster description used (probes' JSON), or NULL when
                                  hw's preset name and nodes describe it */
    const pp_tune_alloc *alloc; /* NULL: trials (if any) on this machine; else the allocation
                                   they ran in ("allocation" in the profile) */
} pp_tune_profile_input;

#define PP_TUNE_PROFILE_VERSION 1

/* Writes the profile atomically to path; "-" writes it to stdout. */
pp_status pp_tune_profile_write(const pp_tune_profile_input *in, const char *path);
/* Default store path: the local store's (profiles/: $XDG_DATA_HOME/pptune/profiles, else
 * ~/.local/share/...) entry for the cluster's fingerprint and the model, directories created.
 * Caller frees. */
pp_status pp_tune_profile_default_path(const pp_tune_hw *hw, const pp_tune_model *m, char **out);
/* The pprun command line that launches configuration c (buf, n) as the search planned it under
 * options o (the result's: precision, sequence parallelism; NULL: the defaults): on GPUs (hw not
 * CPU cores) with the CUDA backend in o's precision. hw may be NULL (then the CPU's line). */
char *pp_tune_launch_command(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_config *c,
                             const pp_tune_opts *o, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
