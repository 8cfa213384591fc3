/* pp_rt_model.h — the bundled runtime's decoder described as data: its sizes and its block
 * (normalization, MLP, positions, attention heads, biases, head), the one model table that the
 * tuner and pprun share (presets), the HuggingFace config.json importer, and the checks. Part
 * of the plan library (pp_rt_plan): plain values, no backend, usable by the tuner.
 *
 * Every field's zero is GPT-2's block (pre-LayerNorm with biases, GELU MLP of width ffn,
 * learned positions, multi-head attention, biases on every linear, tied head), so a
 * description that names only the sizes is the GPT block; Llama's block sets the others.
 */
#ifndef PP_RT_MODEL_H
#define PP_RT_MODEL_H

#include <stddef.h>

#include "pp_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The block variants: one row each in model.c's variant table (names, help). */
typedef enum { PP_NORM_LAYERNORM = 0, PP_NORM_RMSNORM } pp_norm_kind;
typedef enum { PP_MLP_GELU = 0, PP_MLP_SWIGLU } pp_mlp_kind;
typedef enum { PP_POS_LEARNED = 0, PP_POS_ROPE } pp_pos_kind;
/* Rotary scalings the runtime computes: none, "linear" (positions divided by factor) and
 * "llama3" (Meta's frequency-band rule, transformers' _compute_llama3_parameters). Any other
 * rope_scaling a config names (yarn, dynamic, longrope, ...) is PP_ROPE_OTHER, kept by name
 * so the tuner can plan it, and refused by pp_model_check_runnable naming it. */
typedef enum {
    PP_ROPE_NONE = 0,
    PP_ROPE_LINEAR,
    PP_ROPE_LLAMA3,
    PP_ROPE_OTHER
} pp_rope_scaling;

/* How a mixture-of-experts router scores the experts: softmax over the router's logits
 * (Mixtral, Qwen3-MoE) or a sigmoid of each (DeepSeek-V3). */
typedef enum { PP_ROUTER_SOFTMAX = 0, PP_ROUTER_SIGMOID } pp_router_kind;

/* Mixture-of-experts layers (Shazeer et al. 2017; Mixtral, arXiv:2401.04088; Qwen3-MoE;
 * DeepSeekMoE, arXiv:2401.06066). experts == 0: every layer's MLP is dense. In a MoE layer
 * the MLP is a router (hidden -> experts logits, no bias), `experts` routed experts of width
 * `ffn` (each an MLP of the block's kind: SwiGLU's gate, up and down) of which each token
 * takes `top_k`, plus `shared` experts every token takes, of width `shared_ffn` together.
 * Layer l is a MoE layer when l >= first_dense and l % every == phase (pp_model_layer_moe):
 * Mixtral and Qwen3-MoE with decoder_sparse_step 1 are every layer; DeepSeek's first
 * first_k_dense_replace layers are dense. */
typedef struct {
    int experts;    /* E routed experts; 0: dense */
    int top_k;      /* experts per token */
    int ffn;        /* one routed expert's width */
    int shared;     /* shared experts (always taken) */
    int shared_ffn; /* the shared experts' width, all of them together */
    int every;      /* a MoE layer every `every` layers (0 or 1: every layer) */
    int phase;      /* ... at l % every == phase */
    int first_dense; /* the first layers that stay dense */
    pp_router_kind router;
    int norm_topk;   /* 1: the top-k weights renormalised to sum to 1 */
    double aux_coef; /* the load-balancing loss's coefficient (0: none) */
} pp_moe_cfg;

/* Biases a block leaves out (bit set: absent); 0 is GPT's "every one present". */
enum {
    PP_NOBIAS_QKV = 1,  /* the q, k, v projections */
    PP_NOBIAS_OUT = 2,  /* the attention output projection */
    PP_NOBIAS_MLP = 4,  /* the MLP's linears */
    PP_NOBIAS_NORM = 8, /* the norms' additive bias (always absent for RMSNorm) */
    PP_NOBIAS_ALL = 15
};

typedef struct {
    int layers; /* L transformer blocks */
    int hidden; /* C */
    int heads;  /* NH query heads */
    int ffn;    /* F: MLP width (SwiGLU: the width of each of gate and up) */
    int vocab;  /* V */
    int seq;    /* maximum sequence length (learned positions: the table's rows) */
    int kv_heads; /* key/value heads (grouped-query: a divisor of heads); 0: heads */
    int head_dim; /* width of one head; 0: hidden / heads */
    pp_norm_kind norm;
    double norm_eps; /* 0: 1e-5; the config's decimal (the kernels take it as a float) */
    pp_mlp_kind mlp;
    pp_pos_kind pos;
    double rope_theta; /* rotary base; 0: 10000 */
    pp_rope_scaling rope_scaling;
    char rope_scaling_name[24]; /* as the config names it ("" for none) */
    float rope_factor;          /* linear and llama3: the context extension factor */
    float rope_low_freq, rope_high_freq; /* llama3: low_freq_factor, high_freq_factor */
    int rope_orig_max;          /* llama3: original_max_position_embeddings */
    int nobias;                 /* PP_NOBIAS_* bits */
    int untied;                 /* 1: the LM head is its own (V, C) matrix */
    int qk_norm;                /* 1: RMSNorm over each head of q and k before the rotation
                                   (Qwen3: q_norm, k_norm, head_dim weights each) */
    pp_moe_cfg moe;             /* mixture-of-experts layers; moe.experts 0: none */
} pp_model_cfg;

/* Derived sizes (kv_heads and head_dim with their defaults filled in). */
static inline int pp_model_kv(const pp_model_cfg *m)
{
    return m->kv_heads ? m->kv_heads : m->heads;
}
static inline int pp_model_hd(const pp_model_cfg *m)
{
    return m->head_dim ? m->head_dim : m->hidden / (m->heads ? m->heads : 1);
}
static inline float pp_model_eps(const pp_model_cfg *m)
{
    return m->norm_eps > 0 ? (float)m->norm_eps : 1e-5f;
}
/* 1 when layer l (0-based) is a mixture-of-experts layer. */
static inline int pp_model_layer_moe(const pp_model_cfg *m, int l)
{
    const pp_moe_cfg *e = &m->moe;
    if (e->experts <= 0 || l < e->first_dense)
        return 0;
    return e->every <= 1 || l % e->every == e->phase;
}
/* How many of the model's layers are mixture-of-experts layers. */
static inline int pp_model_moe_layers(const pp_model_cfg *m)
{
    int n = 0;
    for (int l = 0; l < m->layers; l++)
        n += pp_model_layer_moe(m, l);
    return n;
}

/* 1 when the bias named by bit (PP_NOBIAS_*) is there. */
static inline int pp_model_bias(const pp_model_cfg *m, int bit)
{
    if (bit == PP_NOBIAS_NORM && m->norm == PP_NORM_RMSNORM)
        return 0;
    return !(m->nobias & bit);
}

/* A row of the model table: the one list of named models of pptune and pprun. */
typedef struct {
    const char *name;
    pp_model_cfg cfg;
    int global_batch; /* the tuner's default sequences per optimizer step */
    int runnable;     /* 1: pprun trains this block (0: the tuner only plans it, e.g. BERT) */
    const char *family; /* "gpt", "llama3", "bert", "runtime" */
} pp_model_row;

/* Returns the table (display order), *n rows. */
const pp_model_row *pp_model_table(int *n);
/* Fills *out with the row `name` of the table. Returns PP_OK, or PP_ERR_NOTFOUND whose
 * message lists the names pprun runs (NULL name: not found); a row pprun cannot run (BERT) is
 * PP_ERR_UNSUPPORTED saying why. */
pp_status pp_model_preset(const char *name, pp_model_cfg *out);
/* Returns the row named `name`, or NULL. */
const pp_model_row *pp_model_row_find(const char *name);

/* Reads a HuggingFace config.json into *out (the GPT defaults for what it does not say):
 * num_hidden_layers, hidden_size, num_attention_heads, intermediate_size, vocab_size (GPT-2's
 * n_layer, n_embd, n_head, n_inner, n_positions too), num_key_value_heads, head_dim,
 * model_type / hidden_act (llama, mistral, qwen2 or silu: RMSNorm with rms_norm_eps, SwiGLU,
 * rotary with rope_theta and rope_scaling, no biases but attention_bias / mlp_bias, Qwen2's
 * QKV biases), tie_word_embeddings, layer_norm_epsilon. seq is max_position_embeddings (2048
 * when absent). *pos receives the position limit as the file states it (max 0 when absent) and
 * the key it was read from ("max_position_embeddings" or GPT-2's "n_positions"; static).
 * Mixtral and Qwen3-MoE configs fill moe (and Qwen3's qk_norm); DeepSeek's latent attention
 * and other mixture-of-experts types are refused naming the field. Returns PP_OK;
 * PP_ERR_NOTFOUND / PP_ERR_IO / PP_ERR_PARSE naming file, field and expectation. */
typedef struct {
    int max;
    const char *key;
} pp_model_hf_pos;
pp_status pp_model_load_hf(const char *path, pp_model_cfg *out, pp_model_hf_pos *pos);

/* Returns PP_OK when every size is positive, kv_heads divides heads, and heads divide hidden
 * (unless head_dim says the width), else PP_ERR_INVALID naming the field and its value. */
pp_status pp_model_validate(const pp_model_cfg *cfg);
/* Returns PP_OK for experts == 0 or a rule the layers can follow (1 <= top_k <= experts, a
 * positive width, shared experts with theirs), else PP_ERR_INVALID naming what. */
pp_status pp_model_validate_moe(const pp_moe_cfg *e);
/* "; experts: 8 of width 14336, top-2 (softmax, renormalised), every layer" into buf (n
 * bytes), "" for a dense model; returns buf. */
char *pp_model_describe_moe(const pp_model_cfg *cfg, char *buf, size_t n);
/* Returns PP_OK when the runtime can compute this block (validate, plus a rotary scaling it
 * implements and an even head width for rotary; MoE only with every layer a MoE layer of
 * SwiGLU experts without biases), else PP_ERR_UNSUPPORTED naming what. */
pp_status pp_model_check_runnable(const pp_model_cfg *cfg);
/* The block in words ("RMSNorm (eps 1e-05), SwiGLU MLP, rotary (base 500000, llama3 scaling),
 * 8 KV heads, no biases, untied head") into buf (n bytes); returns buf. */
char *pp_model_describe(const pp_model_cfg *cfg, char *buf, size_t n);

/* Model FLOPs of one training step of `sequences` sequences of seq tokens (Narayanan et al.
 * 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
 * arXiv:2104.04473, from the matrix shapes; forward + backward = 3 x forward, recomputation not
 * counted): per sequence and layer 2 seq x the layer's matrix weights (q, k, v and output
 * projections at the block's head widths, the MLP's two or, SwiGLU, three matrices; a MoE layer
 * its router, top_k routed experts and the shared ones: the active weights) plus the attention
 * core 4 seq^2 x (heads x head width); the LM head 2 seq hidden vocab. The one count of the
 * tuner (MFU, TFLOP/s) and of pprun's summary. */
double pp_model_step_flops(const pp_model_cfg *cfg, int seq, double sequences);

/* Returns PP_OK when the model splits over t tensor-parallel ranks as the runtime splits it
 * (Megatron-LM: q by heads, k and v by KV heads, the MLP by its width): t >= 1 divides heads,
 * kv_heads and ffn; else PP_ERR_INVALID naming the size that t does not divide. Any
 * vocabulary splits (ceil(V/t) rows per rank, padded: pp_rt_sizes.h's pp_rt_vocab_rows). */
pp_status pp_model_check_tp(const pp_model_cfg *cfg, int t);
/* Returns PP_OK when sequence parallelism over t > 1 tensor-parallel ranks can split a
 * sequence of seq tokens (Megatron's check: t divides seq), or t <= 1; else PP_ERR_INVALID
 * naming both. */
pp_status pp_model_check_sp(int seq, int t);
/* Context parallelism over cp ranks (0 or 1: none): PP_ERR_INVALID unless 2 cp divides seq
 * (two chunks per rank), and, with sequence parallelism over sp > 1 tensor ranks, sp divides
 * the seq / cp tokens of a rank. */
pp_status pp_model_check_cp(int seq, int cp, int sp);

#ifdef __cplusplus
}
#endif
#endif
