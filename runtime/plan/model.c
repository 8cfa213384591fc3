/* model.c — the one model table of pptune and pprun, and the checks of pp_model_cfg.
 *
 * Presets come from the models' papers and releases: GPT-3 (Brown et al., "Language Models are
 * Few-Shot Learners", arXiv:2005.14165, Table 2.1: learned positions, pre-LN blocks, GELU MLP,
 * biases, tied embedding), Llama 3 (Meta, "The Llama 3 Herd of Models", arXiv:2407.21783,
 * Table 3, and the released config.json files: RMSNorm eps 1e-5, SwiGLU, rotary base 500000,
 * 8 KV heads, no biases, untied head), BERT-large (Devlin et al., arXiv:1810.04805; planned
 * only: its post-LN bidirectional block is not the runtime's). Default global batches: GPT-3's
 * published token batch divided by its 2048-token sequence; Llama 3 405B's final 16M tokens /
 * 8192; for llama3-8b/70b (not published per model) the 405B run's first stage, 4M tokens
 * (512 x 8192), an assumption the tuner's --global-batch overrides.
 * The HuggingFace importer is model_hf.c. This file does not know about parallelism beyond
 * what divides what.
 */
#include <stdio.h>
#include <string.h>

#include "pp_rt_model.h"

#define PP_GPT3(L, C, H)                                                                       \
    {.layers = L, .hidden = C, .heads = H, .ffn = 4 * (C), .vocab = 50257, .seq = 2048}
#define PP_LLAMA3(L, C, H, F)                                                                  \
    {.layers = L, .hidden = C, .heads = H, .ffn = F, .vocab = 128256, .seq = 8192,             \
     .kv_heads = 8, .norm = PP_NORM_RMSNORM, .norm_eps = 1e-5, .mlp = PP_MLP_SWIGLU,          \
     .pos = PP_POS_ROPE, .rope_theta = 500000, .nobias = PP_NOBIAS_ALL, .untied = 1}

static const pp_model_row table[] = {
    {"gpt-125m", PP_GPT3(12, 768, 12), 256, 1, "gpt"},
    {"gpt-350m", PP_GPT3(24, 1024, 16), 256, 1, "gpt"},
    {"gpt-760m", PP_GPT3(24, 1536, 16), 256, 1, "gpt"},
    {"gpt-1.3b", PP_GPT3(24, 2048, 16), 512, 1, "gpt"},
    {"gpt-2.7b", PP_GPT3(32, 2560, 32), 512, 1, "gpt"},
    {"gpt-6.7b", PP_GPT3(32, 4096, 32), 1024, 1, "gpt"},
    {"gpt-13b", PP_GPT3(40, 5120, 40), 1024, 1, "gpt"},
    {"gpt-175b", PP_GPT3(96, 12288, 96), 1536, 1, "gpt"},
    {"llama3-8b", PP_LLAMA3(32, 4096, 32, 14336), 512, 1, "llama3"},
    {"llama3-70b", PP_LLAMA3(80, 8192, 64, 28672), 512, 1, "llama3"},
    {"llama3-405b", PP_LLAMA3(126, 16384, 128, 53248), 2048, 1, "llama3"},
    {"bert-large",
     {.layers = 24, .hidden = 1024, .heads = 16, .ffn = 4096, .vocab = 30522, .seq = 512},
     256,
     0,
     "bert"},
    /* CI-sized: byte-level vocabulary; many schedules run in seconds. */
    {"tiny", {.layers = 4, .hidden = 32, .heads = 4, .ffn = 128, .vocab = 256, .seq = 64}, 16, 1,
     "runtime"},
    /* A few minutes of training on a laptop-class CPU. */
    {"small", {.layers = 6, .hidden = 128, .heads = 4, .ffn = 512, .vocab = 256, .seq = 128}, 16,
     1, "runtime"},
    /* The Llama 3 block at CI size (RMSNorm, SwiGLU, rotary with Llama 3.1's scaling, 2 KV
     * heads for 4 query heads, untied head). */
    {"tiny-llama",
     {.layers = 4, .hidden = 32, .heads = 4, .ffn = 96, .vocab = 256, .seq = 64, .kv_heads = 2,
      .norm = PP_NORM_RMSNORM, .norm_eps = 1e-5, .mlp = PP_MLP_SWIGLU, .pos = PP_POS_ROPE,
      .rope_theta = 500000, .rope_scaling = PP_ROPE_LLAMA3, .rope_scaling_name = "llama3",
      .rope_factor = 8, .rope_low_freq = 1, .rope_high_freq = 4, .rope_orig_max = 16,
      .nobias = PP_NOBIAS_ALL, .untied = 1},
     16, 1, "runtime"},
};
#undef PP_GPT3
#undef PP_LLAMA3

const pp_model_row *pp_model_table(int *n)
{
    *n = (int)(sizeof table / sizeof table[0]);
    return table;
}

const pp_model_row *pp_model_row_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof table / sizeof table[0]; i++)
        if (strcmp(name, table[i].name) == 0)
            return &table[i];
    return NULL;
}

pp_status pp_model_preset(const char *name, pp_model_cfg *out)
{
    const pp_model_row *r = pp_model_row_find(name);
    if (r && r->runnable) {
        *out = r->cfg;
        return PP_OK;
    }
    if (r)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "model \"%s\" is planned by pptune but not run by pprun (its %s block is "
                      "post-LN and bidirectional, not the runtime's causal decoder)",
                      name, r->family);
    char list[512] = "";
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (!table[i].runnable)
            continue;
        strncat(list, list[0] ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, table[i].name, sizeof list - strlen(list) - 1);
    }
    return PP_ERR(PP_ERR_NOTFOUND,
                  "unknown model \"%s\"; the runtime's presets are: %s (or --model-config "
                  "config.json)",
                  name ? name : "(null)", list);
}

pp_status pp_model_validate(const pp_model_cfg *cfg)
{
    const struct {
        const char *field;
        int value;
    } sizes[] = {
        {"layers", cfg->layers}, {"hidden", cfg->hidden}, {"heads", cfg->heads},
        {"ffn", cfg->ffn},       {"vocab", cfg->vocab},   {"seq", cfg->seq},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value <= 0)
            return PP_ERR(PP_ERR_INVALID, "model: \"%s\" must be a positive integer, got %d",
                          sizes[i].field, sizes[i].value);
    if (cfg->kv_heads < 0 || cfg->head_dim < 0)
        return PP_ERR(PP_ERR_INVALID, "model: \"%s\" must be positive (0: the default), got %d",
                      cfg->kv_heads < 0 ? "kv_heads" : "head_dim",
                      cfg->kv_heads < 0 ? cfg->kv_heads : cfg->head_dim);
    if (!cfg->head_dim && cfg->hidden % cfg->heads != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "model: \"heads\" (%d) must divide \"hidden\" (%d) so every head has the "
                      "same width (or \"head_dim\" must say it)",
                      cfg->heads, cfg->hidden);
    if (cfg->heads % pp_model_kv(cfg) != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "model: \"kv_heads\" (%d) must divide \"heads\" (%d): each KV head serves "
                      "the same number of query heads",
                      pp_model_kv(cfg), cfg->heads);
    return pp_model_validate_moe(&cfg->moe);
}

pp_status pp_model_validate_moe(const pp_moe_cfg *e)
{
    if (e->experts == 0)
        return PP_OK;
    if (e->experts < 0 || e->top_k < 1 || e->top_k > e->experts)
        return PP_ERR(PP_ERR_INVALID,
                      "model: mixture of experts: top_k must be 1..experts (%d), got %d",
                      e->experts, e->top_k);
    if (e->ffn < 1 || e->shared < 0 || (e->shared > 0) != (e->shared_ffn > 0))
        return PP_ERR(PP_ERR_INVALID,
                      "model: mixture of experts: the expert width must be positive (got %d) "
                      "and shared experts need their width (got %d shared, width %d)",
                      e->ffn, e->shared, e->shared_ffn);
    if (e->every < 0 || e->phase < 0 || (e->every > 1 && e->phase >= e->every) ||
        e->first_dense < 0)
        return PP_ERR(PP_ERR_INVALID,
                      "model: mixture of experts: a MoE layer every %d layers at phase %d after "
                      "%d dense ones is not a layer rule",
                      e->every, e->phase, e->first_dense);
    return PP_OK;
}

/* The MoE blocks the runtime computes (runtime/stage_moe.c): every layer a MoE layer, SwiGLU
 * experts without biases (Mixtral's and Qwen3-MoE's). */
static pp_status check_moe_runnable(const pp_model_cfg *cfg)
{
    const pp_moe_cfg *e = &cfg->moe;
    if (e->experts <= 0)
        return PP_OK;
    const char *why = pp_model_moe_layers(cfg) != cfg->layers ? "some layers dense (the layer "
                                                                "rule: every, phase, first_dense)"
                      : cfg->mlp != PP_MLP_SWIGLU           ? "GELU experts (SwiGLU expected)"
                      : pp_model_bias(cfg, PP_NOBIAS_MLP)   ? "MLP biases (none expected)"
                                                            : NULL;
    if (why)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "model: mixture of experts (%d experts, top-%d): the runtime runs every "
                      "layer as a MoE layer of SwiGLU experts without biases; this model has %s",
                      e->experts, e->top_k, why);
    return PP_OK;
}

pp_status pp_model_check_runnable(const pp_model_cfg *cfg)
{
    PP_TRY(pp_model_validate(cfg));
    PP_TRY(check_moe_runnable(cfg));
    if (cfg->pos != PP_POS_ROPE)
        return PP_OK;
    if (cfg->rope_scaling == PP_ROPE_OTHER)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "model: rope_scaling \"%s\" is not implemented by the runtime (it "
                      "computes none, \"linear\" and \"llama3\"; YaRN, dynamic and longrope "
                      "are refused)",
                      cfg->rope_scaling_name);
    if (pp_model_hd(cfg) % 2 != 0)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "model: rotary positions need an even head width, got head_dim %d",
                      pp_model_hd(cfg));
    if (cfg->rope_scaling != PP_ROPE_NONE && !(cfg->rope_factor > 0))
        return PP_ERR(PP_ERR_INVALID, "model: rope_scaling \"%s\" needs a positive factor",
                      cfg->rope_scaling_name);
    if (cfg->rope_scaling == PP_ROPE_LLAMA3 &&
        (cfg->rope_orig_max < 1 || !(cfg->rope_high_freq > cfg->rope_low_freq)))
        return PP_ERR(PP_ERR_INVALID,
                      "model: llama3 rope scaling needs original_max_position_embeddings >= 1 "
                      "and high_freq_factor > low_freq_factor");
    return PP_OK;
}

char *pp_model_describe(const pp_model_cfg *m, char *buf, size_t n)
{
    int len = 0;
#define MORE(...) (len += snprintf(buf + len, (size_t)len < n ? n - (size_t)len : 0, __VA_ARGS__))
    if (m->norm == PP_NORM_RMSNORM)
        MORE("RMSNorm (eps %g)", (double)pp_model_eps(m));
    else
        MORE("LayerNorm%s", pp_model_bias(m, PP_NOBIAS_NORM) ? "" : " without bias");
    MORE(", %s MLP", m->mlp == PP_MLP_SWIGLU ? "SwiGLU" : "GELU");
    if (m->pos == PP_POS_ROPE) {
        MORE(", rotary (base %g", m->rope_theta > 0 ? m->rope_theta : 10000.0);
        if (m->rope_scaling != PP_ROPE_NONE)
            MORE(", %s scaling", m->rope_scaling_name);
        MORE(")");
    } else {
        MORE(", learned positions");
    }
    if (pp_model_kv(m) != m->heads)
        MORE(", %d KV heads", pp_model_kv(m));
    if (m->head_dim && m->head_dim * m->heads != m->hidden)
        MORE(", head_dim %d", m->head_dim);
    int lin = m->nobias & (PP_NOBIAS_QKV | PP_NOBIAS_OUT | PP_NOBIAS_MLP);
    if (lin == (PP_NOBIAS_QKV | PP_NOBIAS_OUT | PP_NOBIAS_MLP))
        MORE(", no linear biases");
    else if (lin == (PP_NOBIAS_OUT | PP_NOBIAS_MLP))
        MORE(", QKV biases only");
    else if (lin)
        MORE(", biases off: %s%s%s", lin & PP_NOBIAS_QKV ? "qkv " : "",
             lin & PP_NOBIAS_OUT ? "out " : "", lin & PP_NOBIAS_MLP ? "mlp" : "");
    if (m->qk_norm)
        MORE(", q/k RMSNorm");
    MORE(", %s head", m->untied ? "untied" : "tied");
    if (m->moe.experts > 0)
        pp_model_describe_moe(m, buf + len, (size_t)len < n ? n - (size_t)len : 0);
#undef MORE
    return buf;
}

char *pp_model_describe_moe(const pp_model_cfg *m, char *buf, size_t n)
{
    const pp_moe_cfg *e = &m->moe;
    int len = 0, moe = pp_model_moe_layers(m);
#define MORE(...) (len += snprintf(buf + len, (size_t)len < n ? n - (size_t)len : 0, __VA_ARGS__))
    if (n)
        buf[0] = 0;
    if (e->experts <= 0)
        return buf;
    MORE("; experts: %d of width %d, top-%d (%s%s)", e->experts, e->ffn, e->top_k,
         e->router == PP_ROUTER_SIGMOID ? "sigmoid" : "softmax",
         e->norm_topk ? ", renormalised" : "");
    if (e->shared)
        MORE(", %d shared of width %d", e->shared, e->shared_ffn);
    if (moe == m->layers)
        MORE(", every layer");
    else
        MORE(", %d of %d layers", moe, m->layers);
    if (e->aux_coef > 0)
        MORE(", aux loss %g", e->aux_coef);
#undef MORE
    return buf;
}

pp_status pp_model_check_tp(const pp_model_cfg *cfg, int t)
{
    if (t < 1)
        return PP_ERR(PP_ERR_INVALID, "tensor parallelism: --tp must be >= 1, got %d", t);
    if (cfg->heads % t != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "tensor parallelism: --tp %d must divide the model's %d attention heads "
                      "(each rank takes whole heads)",
                      t, cfg->heads);
    if (pp_model_kv(cfg) % t != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "tensor parallelism: --tp %d must divide the model's %d KV heads (each "
                      "rank takes whole KV heads with the query heads they serve; Megatron "
                      "refuses the same)",
                      t, pp_model_kv(cfg));
    if (cfg->ffn % t != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "tensor parallelism: --tp %d must divide the model's MLP width \"ffn\" %d",
                      t, cfg->ffn);
    return PP_OK;
}

pp_status pp_model_check_cp(int seq, int cp, int sp)
{
    if (cp > 1 && seq % (2 * cp) != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "context parallelism: the sequence length %d must be a multiple of 2 x --cp "
                      "%d = %d (the sequence is cut into 2 cp chunks, cp rank i holding chunks i "
                      "and 2 cp - 1 - i)",
                      seq, cp, 2 * cp);
    if (cp > 1 && sp > 1 && seq / cp % sp != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "sequence parallelism with context parallelism: the %d tokens of a cp rank "
                      "(--seq %d / --cp %d) must be a multiple of --tp %d",
                      seq / cp, seq, cp, sp);
    return PP_OK;
}

pp_status pp_model_check_sp(int seq, int t)
{
    if (t > 1 && seq % t != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "sequence parallelism: the sequence length %d must be a multiple of --tp %d "
                      "(each tensor-parallel rank takes seq/tp of its tokens)",
                      seq, t);
    return PP_OK;
}

double pp_model_step_flops(const pp_model_cfg *cfg, int seq, double sequences)
{
    double h = cfg->hidden, s = seq, hd = pp_model_hd(cfg);
    double qd = cfg->heads * hd, kvd = pp_model_kv(cfg) * hd;
    double mats = cfg->mlp == PP_MLP_SWIGLU ? 3.0 : 2.0; /* an MLP's matrices */
    double attn = h * (qd + 2 * kvd) + qd * h, core = 4.0 * s * s * qd;
    const pp_moe_cfg *e = &cfg->moe;
    double dense = 2.0 * s * (attn + mats * h * cfg->ffn) + core;
    double moe = 2.0 * s *
                     (attn + h * e->experts + (double)e->top_k * mats * h * e->ffn +
                      (e->shared_ffn > 0 ? mats * h * e->shared_ffn : 0)) +
                 core;
    int n_moe = pp_model_moe_layers(cfg);
    double fwd = (cfg->layers - n_moe) * dense + n_moe * moe + 2.0 * s * h * cfg->vocab;
    return 3.0 * sequences * fwd;
}
