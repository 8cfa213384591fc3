/* pp_tune_model.h — the models the tuner plans for: presets, HuggingFace config.json and pptune's model JSON,
 * their sizes, parameter counts and the block they describe (models.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_MODEL_H
#define PP_TUNE_MODEL_H

#include <stddef.h>

#include "pp_common.h"
#include "pp_profile.h"
#include "pp_rt_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Models (models.c) ------------------------------------------------------------------- */
typedef struct pp_tune_model {
    char name[64];
    char source[256]; /* "preset", or the file it was read from */
    int layers;       /* L transformer blocks */
    int origin_layers; /* the preset's or file's own L when --layers planned the first `layers`
                          of them (pprun --layers runs the same cut); 0: not cut */
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
    double norm_eps;       /* the norms' epsilon (LayerNorm's or RMSNorm's), > 0 */
    int tied_embed;   /* 1: the LM head shares the token embedding */
    int global_batch; /* default global batch, sequences per optimizer step */
    int pprun;              /* 1: pprun trains this model (pp_tune_model_pprun_note, from the
                               one check, pp_tune_pprun_model); 0: pprun_why says why not */
    char pprun_why[320];
    /* --model-config: the config.json read, as an absolute path (what pprun --model-config is
     * given, so that a trial started in another directory or on another node reads the same
     * file), and its bytes' SHA-256 in hex; "" for every other source */
    char config_path[PP_PROFILE_PPRUN_PATH_MAX];
    char config_sha256[65];
    char seq_note[160];     /* where seq came from when it is not the preset's ("" for presets) */
    pp_model_cfg block; /* the runtime's description it was read as (model table row or
                           config.json): the details the fields above do not keep (norm eps,
                           rotary scaling, per-linear biases); pp_tune_model_cfg combines them */
} pp_tune_model;

/* Attention widths of a model (the one source for the time, memory and parameter models):
 * one head's (head_dim, else hidden / heads), Q's and the output projection's input
 * (heads x head width) and each of K's and V's (kv_heads x head width). Equal to hidden and
 * its grouped-query share where head_dim = hidden / heads; wider for Qwen3 (head_dim 128 with
 * hidden 2048 and 32 heads: q 4096). */
static inline double pp_tune_model_hd(const pp_tune_model *m)
{
    return m->head_dim ? m->head_dim : (double)m->hidden / m->heads;
}
static inline double pp_tune_model_qd(const pp_tune_model *m)
{
    return m->heads * pp_tune_model_hd(m);
}
static inline double pp_tune_model_kvd(const pp_tune_model *m)
{
    return m->kv_heads * pp_tune_model_hd(m);
}

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
    double per_layer;  /* one transformer block with a dense MLP */
    double moe_layer;  /* one block whose MLP is the experts' (router, routed and shared
                          experts); 0 for a dense model */
    double expert;     /* one routed expert's MLP */
    int moe_layers;    /* blocks with experts (the other layers - moe_layers are dense) */
    double embed;      /* token embedding (+ learned positions) */
    double head;       /* final norm + LM head weights when untied (final norm only if tied) */
    double total;      /* dense blocks + MoE blocks + embed + head */
    double active;     /* what one token computes with: total less the routed experts it
                          does not take ((experts - top_k) per MoE block); = total if dense */
} pp_tune_params;

/* ---- pprun and the model (pprun_model.c) --------------------------------------------------- */
/* The one answer to "does pprun train m, and what is it given": m's preset (line->model = its
 * name, a runnable row of the model table) or the config.json the search read
 * (line->model_config = m->config_path, whose SHA-256 must still be m->config_sha256), its
 * block one the runtime runs (pp_model_check_runnable) and m->seq within its positions. Else
 * PP_ERR_UNSUPPORTED (or the file's error) saying why: a preset the table plans only
 * (bert-large) or does not have (pptune validate's megatron-* rows), pptune's model JSON, a
 * rope scaling the runtime refuses, a changed file. The search's launch line, its trials and
 * `pptune export --format pprun` ask it, so pptune prints no line pprun rejects. line may be
 * NULL; otherwise only its model fields are set (pointing into m). */
pp_status pp_tune_pprun_model(const pp_tune_model *m, pp_profile_pprun_line *line);
/* The same check for a profile's model (model.source; a profile before 1.4, which names its
 * model only, as a preset of that name). */
pp_status pp_tune_pprun_profile_model(const pp_profile *p, pp_profile_pprun_line *line);
/* Sets m->pprun and m->pprun_why from pp_tune_pprun_model (the loaders call it; a caller
 * that changes m's seq or sizes calls it again). Clears the error it recorded. */
void pp_tune_model_pprun_note(pp_tune_model *m);

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
/* The runtime's description of m (pp_rt_model.h) for pprun and the runtime's memory plan: the
 * sizes and block traits of the fields above (which callers may have changed since it was
 * read), the details from m->block; seq at least m->seq. */
void pp_tune_model_cfg(const pp_tune_model *m, pp_model_cfg *out);
/* pptune's own model JSON (docs in models.c). */
pp_status pp_tune_model_load_json(const char *path, pp_tune_model *out);
/* Consistency of the sizes (heads divide hidden, kv_heads divide heads, ...). */
pp_status pp_tune_model_validate(const pp_tune_model *m, const char *source);
void pp_tune_model_params(const pp_tune_model *m, pp_tune_params *out);
/* The block as read ("SwiGLU MLP, RMSNorm, rotary (base 500000), untied head"), into buf (n
 * bytes); returns buf. Derived from the fields, never from the model's name. */
char *pp_tune_model_block(const pp_tune_model *m, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
