/* pp_tune_opts.h — the options the memory and time models share, and the time model's effects that
 * can be switched off (memory.c, timemodel.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_OPTS_H
#define PP_TUNE_OPTS_H

#include "pp_common.h"
#include "pp_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Options shared by the memory and time models --------------------------------------- */
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
    /* Recomputation, sequence parallelism, sharding and context parallelism are axes of the
     * configuration (pp_config), not options: the models read them from the candidate. */
    int flash_attention;   /* 1: no s x s score matrix kept (Korthikanti's 5as/h term removed) */
    double headroom;       /* fraction of device memory kept free, default 0.05 */
    double gemm_efficiency; /* fraction of the hw GEMM rate a layer's GEMMs reach, default 1 */
    pp_tune_grad_accum grad_accum; /* default FUSED */
    double moe_imbalance;   /* mixture-of-experts: the busiest expert-parallel rank's routed
                               tokens over the mean (>= 1; 0: PP_TUNE_MOE_IMBALANCE) */
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
    PP_TUNE_FX_DP_LATENCY = 1u << 14, /* NCCL's per-collective and per-hop latencies of the
                                         data-parallel collectives (ring or tree, the faster)
                                         and of the context-parallel ring's steps */
    PP_TUNE_FX_MOE_OVERLAP = 1u << 15, /* a schedule's overlapped F/B pairs (DualPipeV) hide
                                          the MoE all-to-alls behind the paired compute */
    PP_TUNE_FX_COUNT = 16
};
/* "tp-busbw", "recompute-ar", ... for bit i; NULL past the last. */
const char *pp_tune_fx_name(int i);

void pp_tune_opts_default(pp_tune_opts *o);

/* The default load imbalance of a dropless MoE layer: the busiest expert-parallel rank
 * receives this many times the mean of the routed tokens (its expert GEMMs, and the
 * all-to-all it receives, take that much longer; the layer waits for it). 1.25 is the
 * capacity factor Switch Transformer trains with (Fedus et al., "Switch Transformers",
 * arXiv:2101.03961, sec. 2.2 and Table 1), the max/mean expert load its routers are sized
 * for once the auxiliary loss balances them: a published design bound, not a measurement of
 * one run's loads. --moe-imbalance changes it. */
#define PP_TUNE_MOE_IMBALANCE 1.25
/* o's factor (its moe_imbalance, or the default). */
double pp_tune_moe_imbalance(const pp_tune_opts *o);

/* ---- The searched settings a user may force (axes.c) --------------------------------------- */
/* Each field: a value forces it for every candidate (pptune --recompute full ...); the
 * "searched" value lets the search vary it (the default). `pptune simulate` takes the forced
 * values and the configuration's defaults for the rest. */
typedef struct {
    int recompute;         /* PP_TUNE_SEARCHED, or a pp_recompute */
    int recompute_layers;  /* PP_TUNE_SEARCHED, or k >= 0 (with full; 0: every layer) */
    int sequence_parallel; /* PP_TUNE_SEARCHED, 0 or 1 */
    int shard;             /* PP_TUNE_SEARCHED, or a pp_shard */
    int cp;                /* PP_TUNE_SEARCHED, or c >= 1 */
    int ep;                /* PP_TUNE_SEARCHED, or e >= 1 (expert parallelism, MoE models) */
} pp_tune_force;
#define PP_TUNE_SEARCHED (-1)
/* Every axis searched. */
void pp_tune_force_init(pp_tune_force *f);
/* c's settings: the forced values, the axes' defaults (none, off, none, 1) for the rest. */
void pp_tune_force_apply(const pp_tune_force *f, pp_config *c);
/* The forced settings as pptune's flags ("--recompute full --cp 2"), "" when none. Returns buf. */
char *pp_tune_force_flags(const pp_tune_force *f, char *buf, size_t n);
/* How many of a stage's `layers` layers recompute their forward under c: all for selective
 * and full, min(k, layers) for full with recompute_layers = k, none otherwise. */
int pp_tune_recomputed_layers(const pp_config *c, int layers);

#ifdef __cplusplus
}
#endif
#endif
