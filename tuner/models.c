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
 *    "tied_embeddings" (true), "norm_eps" (1e-5), "global_batch" (512)}
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_json.h"
#include "pp_tune.h"

/* The tuner's record of a runtime description (the model table's rows, config.json). */
static void from_cfg(const pp_model_cfg *c, pp_tune_model *m)
{
    m->layers = c->layers, m->hidden = c->hidden, m->heads = c->heads;
    m->kv_heads = pp_model_kv(c), m->ffn = c->ffn, m->vocab = c->vocab, m->seq = c->seq;
    m->gated_mlp = c->mlp == PP_MLP_SWIGLU;
    m->norm_bias = c->norm == PP_NORM_LAYERNORM && pp_model_bias(c, PP_NOBIAS_NORM);
    m->linear_bias = pp_model_bias(c, PP_NOBIAS_QKV) && pp_model_bias(c, PP_NOBIAS_OUT) &&
                     pp_model_bias(c, PP_NOBIAS_MLP);
    m->qkv_bias = !m->linear_bias && pp_model_bias(c, PP_NOBIAS_QKV);
    m->head_dim = c->head_dim;
    m->learned_pos = c->pos == PP_POS_LEARNED;
    m->rope_theta = c->pos == PP_POS_ROPE ? (c->rope_theta > 0 ? c->rope_theta : 10000) : 0;
    snprintf(m->rope_scaling, sizeof m->rope_scaling, "%s", c->rope_scaling_name);
    m->tied_embed = !c->untied;
    m->norm_eps = c->norm_eps > 0 ? c->norm_eps : 1e-5;
    m->block = *c;
}

void pp_tune_model_cfg(const pp_tune_model *m, pp_model_cfg *out)
{
    pp_model_cfg c = m->block;
    c.layers = m->layers, c.hidden = m->hidden, c.heads = m->heads, c.ffn = m->ffn;
    c.vocab = m->vocab, c.seq = c.seq > m->seq ? c.seq : m->seq;
    c.kv_heads = m->kv_heads == m->heads ? 0 : m->kv_heads;
    c.head_dim = m->head_dim;
    c.mlp = m->gated_mlp ? PP_MLP_SWIGLU : PP_MLP_GELU;
    if (m->norm_bias)
        c.norm = PP_NORM_LAYERNORM, c.nobias &= ~PP_NOBIAS_NORM;
    else if (!(c.norm == PP_NORM_LAYERNORM && (c.nobias & PP_NOBIAS_NORM)))
        c.norm = PP_NORM_RMSNORM; /* the tuner's "no norm bias" without a LayerNorm said */
    c.pos = m->learned_pos ? PP_POS_LEARNED : PP_POS_ROPE;
    if (c.pos == PP_POS_ROPE && !(c.rope_theta > 0))
        c.rope_theta = m->rope_theta > 0 ? m->rope_theta : 10000;
    int lin = PP_NOBIAS_QKV | PP_NOBIAS_OUT | PP_NOBIAS_MLP;
    c.nobias = (c.nobias & ~lin) |
               (m->linear_bias ? 0 : m->qkv_bias ? PP_NOBIAS_OUT | PP_NOBIAS_MLP : lin);
    c.untied = !m->tied_embed;
    if (m->norm_eps > 0)
        c.norm_eps = m->norm_eps;
    *out = c;
}

const char *const *pp_tune_model_names(int *n)
{
    static const char *names[64];
    const pp_model_row *t = pp_model_table(n);
    for (int i = 0; i < *n && i < 64; i++)
        names[i] = t[i].name;
    return names;
}

pp_status pp_tune_model_preset(const char *name, pp_tune_model *out)
{
    memset(out, 0, sizeof *out);
    const pp_model_row *r = pp_model_row_find(name);
    if (r) {
        snprintf(out->name, sizeof out->name, "%s", r->name);
        snprintf(out->source, sizeof out->source, "preset");
        from_cfg(&r->cfg, out);
        out->global_batch = r->global_batch;
        pp_tune_model_pprun_note(out);
        return PP_OK;
    }
    if (!strncmp(name, "megatron-", 9) && pp_tune_published_model(name, out) == PP_OK)
        return PP_OK; /* pptune validate's rows (validate.c) */
    pp_err_clear();
    int n;
    const pp_model_row *t = pp_model_table(&n);
    char list[512] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, t[i].name, sizeof list - strlen(list) - 3);
        if (i + 1 < n)
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

/* One MLP of width f: two h x f matrices, or three when gated (SwiGLU), and their biases. */
static double mlp_params(const pp_tune_model *m, double f)
{
    double h = m->hidden;
    return (m->gated_mlp ? 3 : 2) * h * f +
           (m->linear_bias ? (m->gated_mlp ? 2 * f : f) + h : 0);
}

void pp_tune_model_params(const pp_tune_model *m, pp_tune_params *out)
{
    double h = m->hidden, f = m->ffn, V = m->vocab;
    memset(out, 0, sizeof *out);
    double hd = pp_tune_model_hd(m);
    double qd = pp_tune_model_qd(m);   /* width of Q (and of the output projection's input) */
    double kvd = pp_tune_model_kvd(m); /* width of K and of V */
    double norm = m->norm_bias ? 2 * h : h;
    double bias = m->linear_bias ? qd + 2 * kvd + h : m->qkv_bias ? qd + 2 * kvd : 0;
    double attn = h * qd + 2 * h * kvd + qd * h + bias + (m->block.qk_norm ? 2 * hd : 0);
    const pp_moe_cfg *e = &m->block.moe;
    out->per_layer = attn + mlp_params(m, f) + 2 * norm;
    out->expert = e->experts > 0 ? mlp_params(m, e->ffn) : 0;
    out->moe_layer = e->experts > 0 ? attn + 2 * norm + h * e->experts /* the router */ +
                                          e->experts * out->expert +
                                          (e->shared ? mlp_params(m, e->shared_ffn) : 0)
                                    : 0;
    if (e->experts > 0) { /* the block's layer rule over this record's layer count */
        pp_model_cfg c = m->block;
        c.layers = m->layers;
        out->moe_layers = pp_model_moe_layers(&c);
    }
    out->embed = V * h + (m->learned_pos ? (double)m->seq * h : 0);
    out->head = norm + (m->tied_embed ? 0 : V * h);
    out->total = (m->layers - out->moe_layers) * out->per_layer +
                 out->moe_layers * out->moe_layer + out->embed + out->head;
    out->active = out->total - out->moe_layers * (double)(e->experts - e->top_k) * out->expert;
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
    if (m->block.qk_norm)
        MORE(", q/k RMSNorm");
    if (m->block.moe.experts > 0) {
        pp_model_cfg c = m->block;
        c.layers = m->layers;
        pp_model_describe_moe(&c, buf + len, (size_t)len < n ? n - (size_t)len : 0);
    }
#undef MORE
    return buf;
}

/* ---- JSON readers ------------------------------------------------------------------------- */

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

static pp_status read_own(json_t *o, const char *path, pp_tune_model *m)
{
    const pp_json_src s = {.file = path};
    const char *fmt = json_string_value(json_object_get(o, "format"));
    if (!fmt || strcmp(fmt, "pptune-model") != 0)
        return pp_json_bad(&s, "format", "\"pptune-model\"", json_object_get(o, "format"));
    int version = 0;
    PP_TRY(pp_json_file_int(o, path, "version", 1, &version));
    if (version != 1)
        return pp_json_bad(&s, "version", "1", json_object_get(o, "version"));
    json_t *jn = json_object_get(o, "name");
    const char *name = json_string_value(jn);
    if (jn && !name_ok(name, sizeof m->name)) /* profiles and the store are keyed by it */
        return pp_json_bad(&s, "name",
                           "letters, digits and . _ - only (at most 63 characters)", jn);
    if (name)
        snprintf(m->name, sizeof m->name, "%s", name);
    PP_TRY(pp_json_file_int(o, path, "layers", 1, &m->layers));
    PP_TRY(pp_json_file_int(o, path, "hidden", 1, &m->hidden));
    PP_TRY(pp_json_file_int(o, path, "heads", 1, &m->heads));
    PP_TRY(pp_json_file_int(o, path, "vocab", 1, &m->vocab));
    PP_TRY(pp_json_file_int(o, path, "seq", 1, &m->seq));
    m->kv_heads = m->heads;
    m->ffn = m->hidden <= INT_MAX / 4 ? 4 * m->hidden : INT_MAX; /* validate refuses it */
    m->norm_bias = m->linear_bias = m->learned_pos = m->tied_embed = 1; /* GPT's block */
    PP_TRY(pp_json_file_int(o, path, "kv_heads", 0, &m->kv_heads));
    PP_TRY(pp_json_file_int(o, path, "ffn", 0, &m->ffn));
    PP_TRY(pp_json_file_int(o, path, "global_batch", 0, &m->global_batch));
    PP_TRY(pp_json_file_bool(o, path, "gated_mlp", &m->gated_mlp));
    PP_TRY(pp_json_file_bool(o, path, "norm_bias", &m->norm_bias));
    PP_TRY(pp_json_file_bool(o, path, "linear_bias", &m->linear_bias));
    PP_TRY(pp_json_file_bool(o, path, "learned_positions", &m->learned_pos));
    PP_TRY(pp_json_file_bool(o, path, "tied_embeddings", &m->tied_embed));
    m->norm_eps = 1e-5;
    if (json_object_get(o, "norm_eps")) {
        const pp_json_src s = {.file = path};
        PP_TRY(pp_json_range(&s, o, "", "norm_eps", 1e-30, 1, 0, &m->norm_eps));
    }
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
    PP_TRY(pp_json_load_object_file(path, &o));
    pp_status st = reader(o, path, out);
    json_decref(o);
    PP_TRY(st);
    if (!out->name[0])
        basename_of(path, out->name, sizeof out->name);
    snprintf(out->source, sizeof out->source, "%s", path);
    PP_TRY(pp_tune_model_validate(out, path));
    pp_tune_model_pprun_note(out);
    return PP_OK;
}

/* The config.json as pprun is given it: its absolute path (a trial or launch may start in
 * another directory) and the SHA-256 of the bytes read, which the profile records and pprun
 * --profile checks. */
static pp_status config_file(const char *path, pp_tune_model *m)
{
    char *abs = realpath(path, NULL);
    if (!abs)
        return PP_ERR(PP_ERR_IO, "%s: cannot resolve the path: %s", path, strerror(errno));
    size_t len = strlen(abs);
    if (len < sizeof m->config_path)
        memcpy(m->config_path, abs, len + 1);
    free(abs);
    if (len >= sizeof m->config_path)
        return PP_ERR(PP_ERR_INVALID,
                      "%s: the path resolves to %zu bytes; pptune records at most %zu (move the "
                      "config.json to a shorter path)",
                      path, len, sizeof m->config_path - 1);
    return pp_profile_file_sha256(m->config_path, m->config_sha256);
}

/* The model table's importer (runtime/plan/model_hf.c), then the tuner's training length:
 * PP_TUNE_HF_DEFAULT_SEQ capped at the position limit, said in seq_note. */
pp_status pp_tune_model_load_hf(const char *path, pp_tune_model *out)
{
    memset(out, 0, sizeof *out);
    out->global_batch = 512; /* a config.json does not say; --global-batch overrides */
    pp_model_cfg c;
    pp_model_hf_pos pos;
    PP_TRY(pp_model_load_hf(path, &c, &pos));
    int max_pos = pos.max;
    from_cfg(&c, out);
    out->seq = max_pos && max_pos < PP_TUNE_HF_DEFAULT_SEQ ? max_pos : PP_TUNE_HF_DEFAULT_SEQ;
    if (max_pos)
        snprintf(out->seq_note, sizeof out->seq_note,
                 "s=%d: pptune's default for imported models%s (%s %d is the longest position "
                 "the model encodes, not its training length); --seq sets it",
                 out->seq, max_pos < PP_TUNE_HF_DEFAULT_SEQ ? ", capped at the position limit" : "",
                 pos.key, max_pos);
    else
        snprintf(out->seq_note, sizeof out->seq_note,
                 "s=%d: pptune's default for imported models; --seq sets it", out->seq);
    basename_of(path, out->name, sizeof out->name);
    snprintf(out->source, sizeof out->source, "%s", path);
    PP_TRY(pp_tune_model_validate(out, path));
    PP_TRY(config_file(path, out));
    pp_tune_model_pprun_note(out);
    return PP_OK;
}

pp_status pp_tune_model_load_json(const char *path, pp_tune_model *out)
{
    return load_with(path, read_own, out);
}
