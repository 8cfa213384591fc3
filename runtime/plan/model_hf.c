/* model_hf.c — HuggingFace config.json into the runtime's block description (pp_rt_model.h),
 * the one importer of pptune and pprun (the tuner converts the result into its own record).
 *
 * Field names are those of transformers' configuration classes (LlamaConfig, MistralConfig,
 * Qwen2Config, GPT2Config: configuration_llama.py and configuration_gpt2.py). Llama-style
 * configs (model_type llama / mistral / qwen2, or hidden_act silu) are RMSNorm + SwiGLU +
 * rotary without biases (modeling_llama.py), Qwen2 with biases on q, k, v only
 * (modeling_qwen2.py); everything else is read as a GPT-2 block. rope_scaling's "linear" and
 * "llama3" are described in full (transformers' modeling_rope_utils.py); any other type is
 * kept by name (the tuner plans it; the runtime refuses it: pp_model_check_runnable).
 * Mixtral and Qwen3-MoE are read with their experts (pp_moe_cfg; Qwen3's per-head q/k RMSNorm
 * too); DeepSeek's multi-head latent attention and any other mixture-of-experts type are
 * refused naming the field. What it does not do: validation of the sizes against each other
 * (the callers' validate, whose messages they own).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_json.h"
#include "pp_rt_model.h"


static pp_status get_double(json_t *o, const char *path, const char *field, double *v)
{
    const pp_json_src s = {.file = path};
    if (!json_object_get(o, field))
        return PP_OK;
    return pp_json_num(&s, o, "", field, 0, v);
}

static pp_status get_float(json_t *o, const char *path, const char *field, float *v)
{
    double d = *v;
    PP_TRY(get_double(o, path, field, &d));
    *v = (float)d;
    return PP_OK;
}

/* The first of `names` the config has (HuggingFace's own names, then GPT-2's), or names[0]. */
static const char *hf_field(json_t *o, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (json_object_get(o, names[i]) && !json_is_null(json_object_get(o, names[i])))
            return names[i];
    return names[0];
}

/* Mixture-of-experts keys of the HuggingFace configs (Mixtral, DeepSeek, Qwen-MoE, ...): a
 * config that has one and is not of a type read_moe describes is refused, since a dense read
 * would describe a model several times too small. */
static const char *const MOE_KEYS[] = {"num_local_experts", "n_routed_experts", "num_experts",
                                       "moe_num_experts", "num_experts_per_tok", NULL};

/* The first MOE_KEYS entry the config sets to more than one expert, or NULL. */
static const char *moe_key(json_t *o)
{
    for (int i = 0; MOE_KEYS[i]; i++) {
        json_t *v = json_object_get(o, MOE_KEYS[i]);
        if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) <= 1))
            return MOE_KEYS[i];
    }
    return NULL;
}

static pp_status refuse_moe(json_t *o, const char *path, const char *type, const char *why)
{
    const char *key = moe_key(o);
    char *got = json_dumps(json_object_get(o, key), JSON_ENCODE_ANY);
    pp_status st = PP_ERR(PP_ERR_PARSE,
                          "%s: field \"%s\": %s: a mixture-of-experts model of type \"%s\", "
                          "%s; refused rather than read as a dense model several times too small",
                          path, key, got ? got : "?", type ? type : "(none)", why);
    free(got);
    return st;
}

/* mlp_only_layers (Qwen-MoE): only [] is described (the layer rule is every k-th). */
static pp_status read_mlp_only(json_t *o, const char *path)
{
    json_t *v = json_object_get(o, "mlp_only_layers");
    if (!v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0))
        return PP_OK;
    const pp_json_src s = {.file = path};
    return pp_json_bad(&s, "mlp_only_layers",
                       "[] (dense layers among the experts' are described only as every "
                       "decoder_sparse_step-th layer)", v);
}

/* Mixtral (configuration_mixtral.py, modeling_mixtral.py: MixtralSparseMoeBlock, softmax over
 * the experts, top-k, renormalised) and Qwen3-MoE (configuration_qwen3_moe.py,
 * modeling_qwen3_moe.py: Qwen3MoeSparseMoeBlock, renormalised where norm_topk_prob says; layer
 * l is sparse where (l + 1) % decoder_sparse_step == 0). The expert width is Mixtral's
 * intermediate_size and Qwen's moe_intermediate_size. Transformers' defaults where a key is
 * absent. */
static pp_status read_moe(json_t *o, const char *path, const char *type, pp_model_cfg *m)
{
    pp_moe_cfg *e = &m->moe;
    int mixtral = type && strcmp(type, "mixtral") == 0;
    int qwen3 = type && strcmp(type, "qwen3_moe") == 0;
    if (type && (strncmp(type, "deepseek", 8) == 0) && json_object_get(o, "kv_lora_rank"))
        return refuse_moe(o, path, type,
                          "whose attention is multi-head latent attention (field "
                          "\"kv_lora_rank\"), which pptune's model does not describe");
    if (!mixtral && !qwen3)
        return refuse_moe(o, path, type,
                          "which pptune describes for model_type \"mixtral\" and "
                          "\"qwen3_moe\" only");
    e->router = PP_ROUTER_SOFTMAX;
    e->every = 1;
    /* The load-balancing loss is in the training loss only where output_router_logits is true
     * (MixtralForCausalLM.forward and Qwen3MoeForCausalLM.forward add router_aux_loss_coef x
     * the aux loss only then; both configs default to false, as the published Mixtral 8x7B and
     * Qwen3-30B-A3B files say): otherwise the coefficient is kept unused, as transformers
     * trains the file. */
    int router_logits = 0;
    double coef = 0.001; /* MixtralConfig's and Qwen3MoeConfig's router_aux_loss_coef */
    PP_TRY(pp_json_file_bool(o, path, "output_router_logits", &router_logits));
    PP_TRY(get_double(o, path, "router_aux_loss_coef", &coef));
    e->aux_coef = router_logits ? coef : 0;
    PP_TRY(pp_json_file_int(o, path, "num_experts_per_tok", 1, &e->top_k));
    if (mixtral) {
        PP_TRY(pp_json_file_int(o, path, "num_local_experts", 1, &e->experts));
        e->ffn = m->ffn;
        e->norm_topk = 1;
    } else {
        /* Qwen's name, or the one transformers 5's save_pretrained writes
         * (configuration_qwen3_moe.py's attribute_map: num_experts -> num_local_experts) */
        static const char *const experts[] = {"num_experts", "num_local_experts", NULL};
        PP_TRY(pp_json_file_int(o, path, hf_field(o, experts), 1, &e->experts));
        PP_TRY(pp_json_file_int(o, path, "moe_intermediate_size", 1, &e->ffn));
        PP_TRY(pp_json_file_bool(o, path, "norm_topk_prob", &e->norm_topk));
        PP_TRY(pp_json_file_int(o, path, "decoder_sparse_step", 0, &e->every));
        if (e->every < 1)
            e->every = 1;
        e->phase = e->every - 1;
        PP_TRY(read_mlp_only(o, path));
        m->qk_norm = 1;
    }
    if (e->top_k > e->experts) {
        const pp_json_src s = {.file = path};
        return pp_json_fail(&s, "num_experts_per_tok",
                            "expected at most the number of experts (%d), got %d", e->experts,
                            e->top_k);
    }
    return PP_OK;
}

/* attention_bias / mlp_bias (Llama-style configs; both false when absent); Qwen2 puts biases
 * on Q, K and V only, whatever the config says (its modelling code does). */
static pp_status read_biases(json_t *o, const char *path, const char *type, pp_model_cfg *m)
{
    int attn = 0, mlp = 0;
    PP_TRY(pp_json_file_bool(o, path, "attention_bias", &attn));
    PP_TRY(pp_json_file_bool(o, path, "mlp_bias", &mlp));
    if (attn != mlp) {
        const pp_json_src s = {.file = path};
        return pp_json_fail(&s, "mlp_bias",
                            "expected the same as attention_bias (%s): biases on only one of "
                            "attention and MLP are not described by pptune's model",
                            attn ? "true" : "false");
    }
    m->nobias = attn ? 0 : PP_NOBIAS_QKV | PP_NOBIAS_OUT | PP_NOBIAS_MLP;
    if (!attn && type && strcmp(type, "qwen2") == 0)
        m->nobias &= ~PP_NOBIAS_QKV;
    return PP_OK;
}

/* rope_scaling: null, or an object whose rope_type (or older "type") names the rule. */
static pp_status read_scaling(json_t *sc, const char *path, pp_model_cfg *m)
{
    const pp_json_src s = {.file = path};
    const char *t = json_string_value(json_object_get(sc, "rope_type"));
    if (!t)
        t = json_string_value(json_object_get(sc, "type"));
    /* a name (it is printed, and goes into profiles, whose reader wants one) */
    if (!json_is_object(sc) || !t || !*t || strlen(t) >= sizeof m->rope_scaling_name ||
        strspn(t, "abcdefghijklmnopqrstuvwxyz0123456789_-.") != strlen(t))
        return pp_json_bad(&s, "rope_scaling",
                           "null or an object with \"rope_type\" (or \"type\"): a name of "
                           "a-z 0-9 _ - .", sc);
    snprintf(m->rope_scaling_name, sizeof m->rope_scaling_name, "%s", t);
    if (strcmp(t, "default") == 0) {
        m->rope_scaling = PP_ROPE_NONE;
        return PP_OK;
    }
    int llama3 = strcmp(t, "llama3") == 0;
    m->rope_scaling = llama3 ? PP_ROPE_LLAMA3 : strcmp(t, "linear") == 0 ? PP_ROPE_LINEAR
                                                                          : PP_ROPE_OTHER;
    if (m->rope_scaling == PP_ROPE_OTHER)
        return PP_OK;
    const pp_json_src in = {.file = path};
    if (!json_object_get(sc, "factor"))
        return pp_json_fail(&in, "rope_scaling.factor", "missing, expected a positive number");
    PP_TRY(get_float(sc, path, "factor", &m->rope_factor));
    if (!llama3)
        return PP_OK;
    m->rope_low_freq = 1, m->rope_high_freq = 4; /* transformers' defaults */
    PP_TRY(get_float(sc, path, "low_freq_factor", &m->rope_low_freq));
    PP_TRY(get_float(sc, path, "high_freq_factor", &m->rope_high_freq));
    return pp_json_file_int(sc, path, "original_max_position_embeddings", 1, &m->rope_orig_max);
}

/* rope_theta (default 10000, HuggingFace's) and rope_scaling, or rope_parameters. */
static pp_status read_rope(json_t *o, const char *path, pp_model_cfg *m)
{
    const pp_json_src s = {.file = path};
    m->pos = PP_POS_ROPE;
    m->rope_theta = 10000;
    if (json_object_get(o, "rope_theta"))
        PP_TRY(pp_json_num(&s, o, "", "rope_theta", 1, &m->rope_theta));
    /* transformers 5 writes both as one object, "rope_parameters": {"rope_type": "llama3",
     * "rope_theta": 500000.0, "factor": 8.0, ...} (modeling_rope_utils.RopeParameters); its
     * rope_type "default" is no scaling */
    json_t *rp = json_object_get(o, "rope_parameters");
    if (json_is_object(rp)) {
        if (json_object_get(rp, "rope_theta"))
            PP_TRY(pp_json_num(&s, rp, "rope_parameters.", "rope_theta", 1, &m->rope_theta));
        return read_scaling(rp, path, m);
    }
    json_t *sc = json_object_get(o, "rope_scaling");
    return sc && !json_is_null(sc) ? read_scaling(sc, path, m) : PP_OK;
}

static pp_status read_sizes(json_t *o, const char *path, pp_model_cfg *m, pp_model_hf_pos *pos)
{
    static const char *const L[] = {"num_hidden_layers", "n_layer", NULL};
    static const char *const H[] = {"hidden_size", "n_embd", NULL};
    static const char *const A[] = {"num_attention_heads", "n_head", NULL};
    static const char *const F[] = {"intermediate_size", "n_inner", NULL};
    static const char *const P[] = {"max_position_embeddings", "n_positions", NULL};
    PP_TRY(pp_json_file_int(o, path, hf_field(o, L), 1, &m->layers));
    PP_TRY(pp_json_file_int(o, path, hf_field(o, H), 1, &m->hidden));
    PP_TRY(pp_json_file_int(o, path, hf_field(o, A), 1, &m->heads));
    PP_TRY(pp_json_file_int(o, path, "num_key_value_heads", 0, &m->kv_heads));
    m->ffn = m->hidden <= (1 << 28) ? 4 * m->hidden : 1 << 30; /* GPT-2's n_inner: null */
    int gpt2_names = json_object_get(o, "n_embd") != NULL; /* n_inner null or absent: 4 h */
    PP_TRY(pp_json_file_int(o, path, hf_field(o, F), !gpt2_names, &m->ffn));
    PP_TRY(pp_json_file_int(o, path, "vocab_size", 1, &m->vocab));
    pos->key = hf_field(o, P);
    PP_TRY(pp_json_file_int(o, path, pos->key, 0, &pos->max));
    /* transformers 5's MixtralConfig writes "head_dim": null (hidden / heads, as absent) */
    if (!json_is_null(json_object_get(o, "head_dim")))
        PP_TRY(pp_json_file_int(o, path, "head_dim", 0, &m->head_dim));
    if (m->kv_heads == m->heads)
        m->kv_heads = 0;
    if (m->head_dim && m->head_dim * m->heads == m->hidden)
        m->head_dim = 0;
    return PP_OK;
}

static pp_status read_hf(json_t *o, const char *path, pp_model_cfg *m, pp_model_hf_pos *pos)
{
    PP_TRY(read_sizes(o, path, m, pos));
    m->seq = pos->max ? pos->max : 2048;
    const char *type = json_string_value(json_object_get(o, "model_type"));
    const char *act = json_string_value(json_object_get(o, "hidden_act"));
    static const char *const LLAMA_LIKE[] = {"llama", "mistral", "qwen2", "qwen3",
                                             "mixtral", "qwen3_moe", NULL};
    int llama_like = act && strcmp(act, "silu") == 0;
    for (int i = 0; type && LLAMA_LIKE[i]; i++)
        llama_like |= strcmp(type, LLAMA_LIKE[i]) == 0;
    if (moe_key(o))
        PP_TRY(read_moe(o, path, type, m));
    m->qk_norm |= type && strcmp(type, "qwen3") == 0;
    int tied = !llama_like;
    PP_TRY(pp_json_file_bool(o, path, "tie_word_embeddings", &tied));
    m->untied = !tied;
    if (!llama_like)
        return get_double(o, path, "layer_norm_epsilon", &m->norm_eps);
    m->norm = PP_NORM_RMSNORM;
    m->mlp = PP_MLP_SWIGLU;
    m->norm_eps = 1e-6; /* absent: LlamaConfig's, MistralConfig's and Qwen2Config's default */
    PP_TRY(get_double(o, path, "rms_norm_eps", &m->norm_eps));
    PP_TRY(read_biases(o, path, type, m));
    m->nobias |= PP_NOBIAS_NORM; /* RMSNorm has none */
    return read_rope(o, path, m);
}

pp_status pp_model_load_hf(const char *path, pp_model_cfg *out, pp_model_hf_pos *pos)
{
    memset(out, 0, sizeof *out);
    *pos = (pp_model_hf_pos){0, "max_position_embeddings"};
    json_t *o = NULL;
    PP_TRY(pp_json_load_object_file(path, &o));
    pp_status st = read_hf(o, path, out, pos);
    json_decref(o);
    return st;
}
