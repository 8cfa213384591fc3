/* models.c — model descriptions for the tuner: presets, HuggingFace config.json, pptune's own
 * model JSON, parameter counts.
 *
 * Presets come from the models' papers and releases (GPT-3: Brown et al., "Language Models are
 * Few-Shot Learners", arXiv:2005.14165, Table 2.1; Llama 3: Meta, "The Llama 3 Herd of Models",
 * arXiv:2407.21783, Table 3, and the released config.json files; BERT-large: Devlin et al.,
 * arXiv:1810.04805). Default global batches: GPT-3's published token batch
 * divided by its 2048-token sequence; Llama 3 405B's final 16M tokens / 8192; for llama3-8b/70b
 * (not published per model) the 405B run's first stage, 4M tokens (512 x 8192) — an assumption,
 * override with --global-batch. This file does not know about parallelism.
 *
 * pptune model JSON:
 *   {"format": "pptune-model", "version": 1, "name": "my-13b",
 *    "layers": 40, "hidden": 5120, "heads": 40, "vocab": 50257, "seq": 2048,
 *    optional: "kv_heads" (= heads), "ffn" (= 4 hidden), "gated_mlp" (false),
 *    "norm_bias" (true), "linear_bias" (true), "learned_positions" (true),
 *    "tied_embeddings" (true), "global_batch" (512)}
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_json.h"
#include "pp_tune.h"

typedef struct {
    const char *name;
    int layers, hidden, heads, kv_heads, ffn, vocab, seq, family, global_batch;
    const char *runtime_model;
} preset;

enum { GPT3, LLAMA3, BERT, RUNTIME_GPT };

static const preset presets[] = {
    {"gpt-125m", 12, 768, 12, 12, 3072, 50257, 2048, GPT3, 256, "gpt-125m"},
    {"gpt-350m", 24, 1024, 16, 16, 4096, 50257, 2048, GPT3, 256, "gpt-350m"},
    {"gpt-760m", 24, 1536, 16, 16, 6144, 50257, 2048, GPT3, 256, "gpt-760m"},
    {"gpt-1.3b", 24, 2048, 16, 16, 8192, 50257, 2048, GPT3, 512, "gpt-1.3b"},
    {"gpt-2.7b", 32, 2560, 32, 32, 10240, 50257, 2048, GPT3, 512, "gpt-2.7b"},
    {"gpt-6.7b", 32, 4096, 32, 32, 16384, 50257, 2048, GPT3, 1024, "gpt-6.7b"},
    {"gpt-13b", 40, 5120, 40, 40, 20480, 50257, 2048, GPT3, 1024, "gpt-13b"},
    {"gpt-175b", 96, 12288, 96, 96, 49152, 50257, 2048, GPT3, 1536, "gpt-175b"},
    {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, LLAMA3, 512, ""},
    {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, LLAMA3, 512, ""},
    {"llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, LLAMA3, 2048, ""},
    {"bert-large", 24, 1024, 16, 16, 4096, 30522, 512, BERT, 256, ""},
    /* The bundled runtime's CI-sized models (runtime/model.c; a test checks they agree);
     * seq is the model's maximum, which trials pass to pprun as --seq. */
    {"tiny", 4, 32, 4, 4, 128, 256, 64, RUNTIME_GPT, 16, "tiny"},
    {"small", 6, 128, 4, 4, 512, 256, 128, RUNTIME_GPT, 16, "small"},
};
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))

const char *const *pp_tune_model_names(int *n)
{
    static const char *names[N_PRESETS];
    for (int i = 0; i < N_PRESETS; i++)
        names[i] = presets[i].name;
    *n = N_PRESETS;
    return names;
}

static void fill_family(pp_tune_model *m, int family)
{
    /* RUNTIME_GPT: the runtime's GPT-2-style block, same traits as GPT-3 here */
    m->gated_mlp = family == LLAMA3;
    m->norm_bias = family != LLAMA3;
    m->linear_bias = family != LLAMA3;
    m->learned_pos = family != LLAMA3;
    m->tied_embed = family != LLAMA3;
    m->qkv_bias = 0;
    m->head_dim = 0;
    m->rope_theta = family == LLAMA3 ? 500000 : 0; /* Llama 3's published rotary base */
    m->rope_scaling[0] = '\0';
}

pp_status pp_tune_model_preset(const char *name, pp_tune_model *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < N_PRESETS; i++) {
        const preset *p = &presets[i];
        if (strcmp(p->name, name) != 0)
            continue;
        snprintf(out->name, sizeof out->name, "%s", p->name);
        snprintf(out->source, sizeof out->source, "preset");
        out->layers = p->layers;
        out->hidden = p->hidden;
        out->heads = p->heads;
        out->kv_heads = p->kv_heads;
        out->ffn = p->ffn;
        out->vocab = p->vocab;
        out->seq = p->seq;
        out->global_batch = p->global_batch;
        fill_family(out, p->family);
        snprintf(out->runtime_model, sizeof out->runtime_model, "%s", p->runtime_model);
        return PP_OK;
    }
    if (!strncmp(name, "megatron-", 9) && pp_tune_published_model(name, out) == PP_OK)
        return PP_OK; /* pptune validate's rows (validate.c) */
    pp_err_clear();
    char list[512] = "";
    for (int i = 0; i < N_PRESETS; i++) {
        strncat(list, presets[i].name, sizeof list - strlen(list) - 3);
        if (i + 1 < N_PRESETS)
            strncat(list, ", ", sizeof list - strlen(list) - 1);
    }
    return PP_ERR(PP_ERR_NOTFOUND,
                  "unknown model \"%s\": expected one of %s, megatron-1.7B ... megatron-1008B "
                  "(pptune validate's rows), or --model-config / --model-file",
                  name, list);
}

pp_status pp_tune_model_validate(const pp_tune_model *m, const char *src)
{
    const struct {
        const char *field;
        int value, max;
    } pos[] = {{"layers", m->layers, PP_TUNE_MAX_LAYERS},
               {"hidden", m->hidden, PP_TUNE_MAX_HIDDEN},
               {"heads", m->heads, PP_TUNE_MAX_HEADS},
               {"kv_heads", m->kv_heads, PP_TUNE_MAX_HEADS},
               {"ffn", m->ffn, PP_TUNE_MAX_FFN},
               {"vocab", m->vocab, PP_TUNE_MAX_VOCAB},
               {"seq", m->seq, PP_TUNE_MAX_SEQ},
               {"global_batch", m->global_batch, PP_TUNE_MAX_GLOBAL_BATCH}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
        if (pos[i].value < 1)
            return PP_ERR(PP_ERR_PARSE, "%s: field \"%s\": expected a positive integer, got %d",
                          src, pos[i].field, pos[i].value);
        if (pos[i].value > pos[i].max)
            return PP_ERR(PP_ERR_PARSE, "%s: field \"%s\": expected at most %d, got %d", src,
                          pos[i].field, pos[i].max, pos[i].value);
    }
    if (m->head_dim < 0 || m->head_dim > PP_TUNE_MAX_HIDDEN)
        return PP_ERR(PP_ERR_PARSE, "%s: field \"head_dim\": expected 1..%d, got %d", src,
                      PP_TUNE_MAX_HIDDEN, m->head_dim);
    if (!m->head_dim && m->hidden % m->heads != 0)
        return PP_ERR(PP_ERR_PARSE,
                      "%s: field \"heads\": expected a divisor of hidden (%d), got %d", src,
                      m->hidden, m->heads);
    if (m->heads % m->kv_heads != 0)
        return PP_ERR(PP_ERR_PARSE,
                      "%s: field \"kv_heads\": expected a divisor of heads (%d), got %d", src,
                      m->heads, m->kv_heads);
    return PP_OK;
}

void pp_tune_model_params(const pp_tune_model *m, pp_tune_params *out)
{
    double h = m->hidden, f = m->ffn, V = m->vocab;
    double hd = m->head_dim ? m->head_dim : h / m->heads;
    double qd = m->heads * hd;        /* width of Q (and of the output projection's input) */
    double kvd = m->kv_heads * hd;    /* width of K and of V */
    double norm = m->norm_bias ? 2 * h : h;
    double bias = m->linear_bias ? qd + 2 * kvd + h : m->qkv_bias ? qd + 2 * kvd : 0;
    double attn = h * qd + 2 * h * kvd + qd * h + bias;
    double mlp = (m->gated_mlp ? 3 : 2) * h * f +
                 (m->linear_bias ? (m->gated_mlp ? 2 * f : f) + h : 0);
    out->per_layer = attn + mlp + 2 * norm;
    out->embed = V * h + (m->learned_pos ? (double)m->seq * h : 0);
    out->head = norm + (m->tied_embed ? 0 : V * h);
    out->total = m->layers * out->per_layer + out->embed + out->head;
}

char *pp_tune_model_block(const pp_tune_model *m, char *buf, size_t n)
{
    int len = snprintf(buf, n, "%s, %s, %s, %s", m->gated_mlp ? "gated MLP" : "GeLU MLP",
                       m->norm_bias ? "LayerNorm" : "RMSNorm",
                       m->learned_pos ? "learned positions" : "rotary",
                       m->tied_embed ? "tied head" : "untied head");
    /* what differs from the usual pairing (GPT: biases; gated blocks: none) is said */
#define MORE(...) (len += snprintf(buf + len, (size_t)len < n ? n - (size_t)len : 0, __VA_ARGS__))
    if (m->qkv_bias)
        MORE(", QKV biases");
    else if (m->linear_bias && m->gated_mlp)
        MORE(", linear biases");
    else if (!m->linear_bias && !m->gated_mlp)
        MORE(", no linear biases");
    if (m->head_dim && m->head_dim * m->heads != m->hidden)
        MORE(", head_dim %d", m->head_dim);
    if (m->rope_scaling[0])
        MORE(", %s rope scaling", m->rope_scaling);
#undef MORE
    return buf;
}

/* ---- JSON readers ------------------------------------------------------------------------- */
static pp_status load_json(const char *path, json_t **out)
{
    char *text;
    size_t len;
    PP_TRY(pp_file_read(path, &text, &len)); /* bounded; NOTFOUND names a missing file */
    json_t *root;
    pp_status st = pp_json_load(text, len, path, 0, &root);
    free(text);
    PP_TRY(st);
    if (!json_is_object(root)) {
        json_decref(root);
        return PP_ERR(PP_ERR_PARSE, "%s: expected a JSON object at the top level", path);
    }
    *out = root;
    return PP_OK;
}

/* Reads a positive integer field; required=0 leaves *v unchanged when the field is absent. */
static pp_status get_int(json_t *o, const char *path, const char *field, int required, int *v)
{
    const pp_json_src s = {.file = path};
    if (!json_object_get(o, field))
        return required ? pp_json_fail(&s, field, "missing, expected a positive integer") : PP_OK;
    return pp_json_int(&s, o, "", field, 1, 1 << 30, "a positive integer", v);
}

static pp_status get_bool(json_t *o, const char *path, const char *field, int *v)
{
    const pp_json_src s = {.file = path};
    return json_object_get(o, field) ? pp_json_bool(&s, o, "", field, v) : PP_OK;
}

/* A model name as profiles and the store key it (the store's one rule,
 * pp_profile_model_name_ok), shorter than n. */
static int name_ok(const char *s, size_t n)
{
    return s && strlen(s) < n && pp_profile_model_name_ok(s);
}

/* The file's name without its folder and extension, other characters as '_' (a name the
 * profile reader accepts: the writer and the reader agree). */
static void basename_of(const char *path, char *buf, size_t n)
{
    const char *b = strrchr(path, '/');
    snprintf(buf, n, "%s", b ? b + 1 : path);
    char *dot = strrchr(buf, '.');
    if (dot && dot != buf)
        *dot = '\0';
    pp_profile_model_name_sanitize(buf);
    if (!name_ok(buf, n))
        snprintf(buf, n, "model");
}

/* The first of `names` the config has (HuggingFace's own names, then GPT-2's), or names[0]. */
static const char *hf_field(json_t *o, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (json_object_get(o, names[i]) && !json_is_null(json_object_get(o, names[i])))
            return names[i];
    return names[0];
}

/* Mixture-of-experts keys of the HuggingFace configs (Mixtral, DeepSeek, Qwen-MoE, ...). A
 * dense read of such a config would describe a model several times too small. */
static pp_status refuse_moe(json_t *o, const char *path)
{
    static const char *const MOE[] = {"num_local_experts", "n_routed_experts", "num_experts",
                                      "moe_num_experts", "num_experts_per_tok", NULL};
    for (int i = 0; MOE[i]; i++) {
        json_t *v = json_object_get(o, MOE[i]);
        if (!v || json_is_null(v) || (json_is_integer(v) && json_integer_value(v) <= 1))
            continue;
        char *got = json_dumps(v, JSON_ENCODE_ANY);
        pp_status st = PP_ERR(PP_ERR_PARSE,
                              "%s: field \"%s\": %s: a mixture-of-experts model, which pptune's "
                              "model (dense blocks) does not describe; refused rather than "
                              "read as a dense model several times too small",
                              path, MOE[i], got ? got : "?");
        free(got);
        return st;
    }
    return PP_OK;
}

/* attention_bias / mlp_bias (Llama-style configs; both false when absent); Qwen2 puts biases
 * on Q, K and V only, whatever the config says (its modelling code does). */
static pp_status read_hf_biases(json_t *o, const char *path, const char *type, int llama_like,
                                pp_tune_model *m)
{
    if (!llama_like)
        return PP_OK; /* GPT-2 and BERT style: biases everywhere (fill_family) */
    int attn = 0, mlp = 0;
    PP_TRY(get_bool(o, path, "attention_bias", &attn));
    PP_TRY(get_bool(o, path, "mlp_bias", &mlp));
    if (attn != mlp) {
        const pp_json_src s = {.file = path};
        return pp_json_fail(&s, "mlp_bias",
                            "expected the same as attention_bias (%s): biases on only one of "
                            "attention and MLP are not described by pptune's model",
                            attn ? "true" : "false");
    }
    m->linear_bias = attn;
    m->qkv_bias = !attn && type && strcmp(type, "qwen2") == 0;
    return PP_OK;
}

/* rope_theta (default 10000, HuggingFace's) and rope_scaling's type. */
static pp_status read_hf_rope(json_t *o, const char *path, pp_tune_model *m)
{
    const pp_json_src s = {.file = path};
    m->rope_theta = 10000;
    if (json_object_get(o, "rope_theta"))
        PP_TRY(pp_json_num(&s, o, "", "rope_theta", 1, &m->rope_theta));
    json_t *sc = json_object_get(o, "rope_scaling");
    if (sc && !json_is_null(sc)) {
        const char *t = json_string_value(json_object_get(sc, "rope_type"));
        if (!t)
            t = json_string_value(json_object_get(sc, "type"));
        if (!json_is_object(sc) || !t)
            return pp_json_bad(&s, "rope_scaling",
                               "null or an object with \"rope_type\" (or \"type\")", sc);
        snprintf(m->rope_scaling, sizeof m->rope_scaling, "%s", t);
    }
    return PP_OK;
}

static pp_status read_hf(json_t *o, const char *path, pp_tune_model *m)
{
    static const char *const L[] = {"num_hidden_layers", "n_layer", NULL};
    static const char *const H[] = {"hidden_size", "n_embd", NULL};
    static const char *const A[] = {"num_attention_heads", "n_head", NULL};
    static const char *const F[] = {"intermediate_size", "n_inner", NULL};
    static const char *const P[] = {"max_position_embeddings", "n_positions", NULL};
    PP_TRY(refuse_moe(o, path));
    PP_TRY(get_int(o, path, hf_field(o, L), 1, &m->layers));
    PP_TRY(get_int(o, path, hf_field(o, H), 1, &m->hidden));
    PP_TRY(get_int(o, path, hf_field(o, A), 1, &m->heads));
    m->kv_heads = m->heads;
    PP_TRY(get_int(o, path, "num_key_value_heads", 0, &m->kv_heads));
    const char *ffn = hf_field(o, F);
    m->ffn = m->hidden <= INT_MAX / 4 ? 4 * m->hidden : INT_MAX; /* GPT-2's n_inner: null */
    int gpt2_names = json_object_get(o, "n_embd") != NULL; /* n_inner null or absent: 4 h */
    PP_TRY(get_int(o, path, ffn, !gpt2_names, &m->ffn));
    PP_TRY(get_int(o, path, "vocab_size", 1, &m->vocab));
    int max_pos = 0;
    PP_TRY(get_int(o, path, hf_field(o, P), 0, &max_pos));
    m->seq = max_pos && max_pos < PP_TUNE_HF_DEFAULT_SEQ ? max_pos : PP_TUNE_HF_DEFAULT_SEQ;
    if (max_pos)
        snprintf(m->seq_note, sizeof m->seq_note,
                 "s=%d: pptune's default for imported models%s (%s %d is the longest position "
                 "the model encodes, not its training length); --seq sets it",
                 m->seq, max_pos < PP_TUNE_HF_DEFAULT_SEQ ? ", capped at the position limit" : "",
                 hf_field(o, P), max_pos);
    else
        snprintf(m->seq_note, sizeof m->seq_note,
                 "s=%d: pptune's default for imported models; --seq sets it", m->seq);
    /* Gated (SwiGLU) MLP, RMSNorm and rotary positions: Llama-style configs, recognised by
     * model_type or by a SiLU activation; everything else is read as a GPT/BERT-style block. */
    const char *type = json_string_value(json_object_get(o, "model_type"));
    const char *act = json_string_value(json_object_get(o, "hidden_act"));
    int llama_like = (type && (strcmp(type, "llama") == 0 || strcmp(type, "mistral") == 0 ||
                               strcmp(type, "qwen2") == 0)) ||
                     (act && strcmp(act, "silu") == 0);
    fill_family(m, llama_like ? LLAMA3 : GPT3);
    m->tied_embed = !llama_like;
    PP_TRY(get_bool(o, path, "tie_word_embeddings", &m->tied_embed));
    PP_TRY(get_int(o, path, "head_dim", 0, &m->head_dim));
    PP_TRY(read_hf_biases(o, path, type, llama_like, m));
    if (llama_like)
        PP_TRY(read_hf_rope(o, path, m));
    return PP_OK;
}

static pp_status read_own(json_t *o, const char *path, pp_tune_model *m)
{
    const pp_json_src s = {.file = path};
    const char *fmt = json_string_value(json_object_get(o, "format"));
    if (!fmt || strcmp(fmt, "pptune-model") != 0)
        return pp_json_bad(&s, "format", "\"pptune-model\"", json_object_get(o, "format"));
    int version = 0;
    PP_TRY(get_int(o, path, "version", 1, &version));
    if (version != 1)
        return pp_json_bad(&s, "version", "1", json_object_get(o, "version"));
    json_t *jn = json_object_get(o, "name");
    const char *name = json_string_value(jn);
    if (jn && !name_ok(name, sizeof m->name)) /* profiles and the store are keyed by it */
        return pp_json_bad(&s, "name",
                           "letters, digits and . _ - only (at most 63 characters)", jn);
    if (name)
        snprintf(m->name, sizeof m->name, "%s", name);
    PP_TRY(get_int(o, path, "layers", 1, &m->layers));
    PP_TRY(get_int(o, path, "hidden", 1, &m->hidden));
    PP_TRY(get_int(o, path, "heads", 1, &m->heads));
    PP_TRY(get_int(o, path, "vocab", 1, &m->vocab));
    PP_TRY(get_int(o, path, "seq", 1, &m->seq));
    m->kv_heads = m->heads;
    m->ffn = m->hidden <= INT_MAX / 4 ? 4 * m->hidden : INT_MAX; /* validate refuses it */
    fill_family(m, GPT3);
    PP_TRY(get_int(o, path, "kv_heads", 0, &m->kv_heads));
    PP_TRY(get_int(o, path, "ffn", 0, &m->ffn));
    PP_TRY(get_int(o, path, "global_batch", 0, &m->global_batch));
    PP_TRY(get_bool(o, path, "gated_mlp", &m->gated_mlp));
    PP_TRY(get_bool(o, path, "norm_bias", &m->norm_bias));
    PP_TRY(get_bool(o, path, "linear_bias", &m->linear_bias));
    PP_TRY(get_bool(o, path, "learned_positions", &m->learned_pos));
    PP_TRY(get_bool(o, path, "tied_embeddings", &m->tied_embed));
    return PP_OK;
}

/* Reads path with `reader`, names the model after the file where the reader did not, and
 * validates the sizes. */
static pp_status load_with(const char *path, pp_status (*reader)(json_t *, const char *,
                                                                 pp_tune_model *),
                           pp_tune_model *out)
{
    memset(out, 0, sizeof *out);
    out->global_batch = 512; /* neither format has to say; --global-batch overrides */
    json_t *o = NULL;
    PP_TRY(load_json(path, &o));
    pp_status st = reader(o, path, out);
    json_decref(o);
    PP_TRY(st);
    if (!out->name[0])
        basename_of(path, out->name, sizeof out->name);
    snprintf(out->source, sizeof out->source, "%s", path);
    PP_TRY(pp_tune_model_validate(out, path));
    return PP_OK;
}

pp_status pp_tune_model_load_hf(const char *path, pp_tune_model *out)
{
    return load_with(path, read_hf, out);
}

pp_status pp_tune_model_load_json(const char *path, pp_tune_model *out)
{
    return load_with(path, read_own, out);
}
