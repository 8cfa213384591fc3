/* weights_hf.c — pprun's parameters as transformers' checkpoints (pp_rt_weights.h).
 *
 * A table per family maps each of pprun's tensors ("wte", "h3.attn.qkv.w", ...; whole shapes
 * from pp_rt_tensor_shape, PyTorch's (out, in)) to the transformers tensors it is made of:
 * row blocks of it, each stored as is or transposed. The names and layouts are those of
 * transformers' modeling files at v5.25.0: models/llama/modeling_llama.py (LlamaAttention's
 * q_proj / k_proj / v_proj / o_proj, LlamaMLP's gate_proj / up_proj / down_proj,
 * down(silu(gate(x)) * up(x)); Mistral, Qwen2 and Qwen3 use the same names, Qwen2 with q/k/v
 * biases, Qwen3 with self_attn.q_norm / k_norm, its per-head RMSNorm weights; Mixtral's experts
 * as its checkpoints name them, mixtral_map below, and Qwen3-MoE's, qwen3_moe_map)
 * and models/gpt2/modeling_gpt2.py (GPT2Attention's c_attn splits into query, key, value in
 * that order; pytorch_utils.Conv1D computes x @ weight + bias with weight (nx, nf) = (in, out)).
 *
 * Rotary: pprun rotates the pairs (j, j + hd/2) of a head (runtime/rope_freq.h), which is
 * transformers' rotate_half convention, so HF's q_proj / k_proj rows load as they are. (The
 * permutation in transformers' convert_llama_weights_to_hf.py maps Meta's interleaved pairs
 * (2j, 2j+1) to this layout; HF checkpoints are already in it.) Grouped-query attention: query
 * head h reads KV head h / (heads / kv_heads) in both (repeat_kv).
 *
 * Tensor parallelism: a stage's tensor is assembled whole from the file and each rank keeps
 * the elements pp_rt_stage_global_index names, and the reverse to save. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "pp_rt_weights.h"
#include "stage_impl.h"

/* Rows of a part, in pprun's widths of the whole model. */
/* R_FE, R_C: one routed expert's width and the hidden size (a part named per expert) */
typedef enum { R_ALL, R_Q, R_KV, R_F, R_FE, R_C } part_rows;

typedef struct {
    const char *fmt; /* transformers' name; %d: the block */
    part_rows rows;
} hf_part;

typedef struct {
    const char *pp; /* pprun's name: a global tensor, or the name within a block */
    int block;      /* 1: a block tensor ("h%d." + pp) */
    int transpose;  /* stored (in, out): Conv1D */
    int n;
    hf_part part[3];
} hf_map;

typedef struct {
    const char *name; /* the transformers class */
    const hf_map *map; /* then mlp: its MLP's tensors (a table of their own, shared by families
                          with the same attention: llama_map) */
    int n_map;
    const hf_map *mlp;
    int n_mlp;
    const char *skip[3]; /* name endings of buffers some checkpoints hold */
    /* The base model's prefix ("model.", "transformer."): a checkpoint of the base model
     * alone (LlamaModel, GPT2Model: e.g. the Hub's gpt2) names its tensors without it, and
     * transformers' from_pretrained loads it into the LM class; so does --load-weights (the
     * head then must be tied: a base model has no lm_head). */
    const char *base;
} hf_family;

/* The first row of each table is the embedding (a base model's checkpoint is told by it). */
#define L_ "model.layers.%d."
static const hf_map llama_map[] = {
    {"wte", 0, 0, 1, {{"model.embed_tokens.weight", R_ALL}}},
    {"wte.head", 0, 0, 1, {{"model.embed_tokens.weight", R_ALL}}},
    {"head.w", 0, 0, 1, {{"lm_head.weight", R_ALL}}},
    {"lnf.g", 0, 0, 1, {{"model.norm.weight", R_ALL}}},
    {"ln1.g", 1, 0, 1, {{L_ "input_layernorm.weight", R_ALL}}},
    {"attn.qkv.w",
     1,
     0,
     3,
     {{L_ "self_attn.q_proj.weight", R_Q},
      {L_ "self_attn.k_proj.weight", R_KV},
      {L_ "self_attn.v_proj.weight", R_KV}}},
    {"attn.qkv.b",
     1,
     0,
     3,
     {{L_ "self_attn.q_proj.bias", R_Q},
      {L_ "self_attn.k_proj.bias", R_KV},
      {L_ "self_attn.v_proj.bias", R_KV}}},
    /* Qwen3's per-head norms (models/qwen3/modeling_qwen3.py: Qwen3Attention's q_norm,
     * k_norm, head_dim weights each) */
    {"attn.q_norm.g", 1, 0, 1, {{L_ "self_attn.q_norm.weight", R_ALL}}},
    {"attn.k_norm.g", 1, 0, 1, {{L_ "self_attn.k_norm.weight", R_ALL}}},
    {"attn.proj.w", 1, 0, 1, {{L_ "self_attn.o_proj.weight", R_ALL}}},
    {"attn.proj.b", 1, 0, 1, {{L_ "self_attn.o_proj.bias", R_ALL}}},
    {"ln2.g", 1, 0, 1, {{L_ "post_attention_layernorm.weight", R_ALL}}},
};
/* Llama's MLP (the dense block's): after llama_map's attention and norms */
static const hf_map llama_mlp_map[] = {
    /* pprun's SwiGLU fc is [gate | up] (stage_impl.h) */
    {"mlp.fc.w", 1, 0, 2, {{L_ "mlp.gate_proj.weight", R_F}, {L_ "mlp.up_proj.weight", R_F}}},
    {"mlp.fc.b", 1, 0, 2, {{L_ "mlp.gate_proj.bias", R_F}, {L_ "mlp.up_proj.bias", R_F}}},
    {"mlp.proj.w", 1, 0, 1, {{L_ "mlp.down_proj.weight", R_ALL}}},
    {"mlp.proj.b", 1, 0, 1, {{L_ "mlp.down_proj.bias", R_ALL}}},
};
/* Mixtral as its checkpoints name it (the Hub's mistralai/Mixtral-8x7B-v0.1, and what
 * transformers 5.25's save_pretrained writes: conversion_mapping.py's "mixtral" entry turns
 * them into modeling_mixtral.py's fused mlp.experts.gate_up_proj / down_proj on load, and back
 * on save): Llama's attention and norms, block_sparse_moe.gate.weight (E, C) the router, and
 * per expert e w1 (gate, F x C), w3 (up, F x C), w2 (down, C x F). pprun's moe.experts.fc.w
 * holds expert e's [gate | up] at rows e 2F (stage_impl.h), its moe.experts.proj.w expert e's
 * down at rows e C: a fmt with a second %d is a part repeated for every expert, in order. */
static const hf_map mixtral_map[] = {
    {"moe.router.w", 1, 0, 1, {{L_ "block_sparse_moe.gate.weight", R_ALL}}},
    {"moe.experts.fc.w",
     1,
     0,
     2,
     {{L_ "block_sparse_moe.experts.%d.w1.weight", R_FE},
      {L_ "block_sparse_moe.experts.%d.w3.weight", R_FE}}},
    {"moe.experts.proj.w", 1, 0, 1, {{L_ "block_sparse_moe.experts.%d.w2.weight", R_C}}},
};
/* Qwen3-MoE as transformers 5.25's save_pretrained writes it and the Hub's Qwen/Qwen3-30B-A3B
 * names it (models/qwen3_moe/modeling_qwen3_moe.py: Qwen3MoeSparseMoeBlock's gate, the
 * router's (E, C) weight, and experts; conversion_mapping.py's "qwen2_moe" entry, which
 * qwen3_moe uses, fuses mlp.experts.E.gate_proj / up_proj into gate_up_proj on load and splits
 * it back on save): the same parts as mixtral_map under Llama's MLP names. */
static const hf_map qwen3_moe_map[] = {
    {"moe.router.w", 1, 0, 1, {{L_ "mlp.gate.weight", R_ALL}}},
    {"moe.experts.fc.w",
     1,
     0,
     2,
     {{L_ "mlp.experts.%d.gate_proj.weight", R_FE}, {L_ "mlp.experts.%d.up_proj.weight", R_FE}}},
    {"moe.experts.proj.w", 1, 0, 1, {{L_ "mlp.experts.%d.down_proj.weight", R_C}}},
};
#undef L_
#define H_ "transformer.h.%d."
static const hf_map gpt2_map[] = {
    {"wte", 0, 0, 1, {{"transformer.wte.weight", R_ALL}}},
    {"wte.head", 0, 0, 1, {{"transformer.wte.weight", R_ALL}}},
    {"wpe", 0, 0, 1, {{"transformer.wpe.weight", R_ALL}}},
    {"head.w", 0, 0, 1, {{"lm_head.weight", R_ALL}}},
    {"lnf.g", 0, 0, 1, {{"transformer.ln_f.weight", R_ALL}}},
    {"lnf.b", 0, 0, 1, {{"transformer.ln_f.bias", R_ALL}}},
    {"ln1.g", 1, 0, 1, {{H_ "ln_1.weight", R_ALL}}},
    {"ln1.b", 1, 0, 1, {{H_ "ln_1.bias", R_ALL}}},
    {"attn.qkv.w", 1, 1, 1, {{H_ "attn.c_attn.weight", R_ALL}}},
    {"attn.qkv.b", 1, 0, 1, {{H_ "attn.c_attn.bias", R_ALL}}},
    {"attn.proj.w", 1, 1, 1, {{H_ "attn.c_proj.weight", R_ALL}}},
    {"attn.proj.b", 1, 0, 1, {{H_ "attn.c_proj.bias", R_ALL}}},
    {"ln2.g", 1, 0, 1, {{H_ "ln_2.weight", R_ALL}}},
    {"ln2.b", 1, 0, 1, {{H_ "ln_2.bias", R_ALL}}},
    {"mlp.fc.w", 1, 1, 1, {{H_ "mlp.c_fc.weight", R_ALL}}},
    {"mlp.fc.b", 1, 0, 1, {{H_ "mlp.c_fc.bias", R_ALL}}},
    {"mlp.proj.w", 1, 1, 1, {{H_ "mlp.c_proj.weight", R_ALL}}},
    {"mlp.proj.b", 1, 0, 1, {{H_ "mlp.c_proj.bias", R_ALL}}},
};
#undef H_

#define N_(t) (int)(sizeof t / sizeof *t)
static const hf_family families[] = {
    {"Qwen3MoeForCausalLM", llama_map, N_(llama_map), qwen3_moe_map, N_(qwen3_moe_map),
     {"rotary_emb.inv_freq", NULL, NULL},
     "model."},
    {"MixtralForCausalLM", llama_map, N_(llama_map), mixtral_map, N_(mixtral_map),
     {"rotary_emb.inv_freq", NULL, NULL},
     "model."},
    {"LlamaForCausalLM", llama_map, N_(llama_map), llama_mlp_map, N_(llama_mlp_map),
     {"rotary_emb.inv_freq", NULL, NULL},
     "model."},
    {"GPT2LMHeadModel", gpt2_map, N_(gpt2_map), NULL, 0,
     {".attn.bias", ".attn.masked_bias", NULL},
     "transformer."},
};
#undef N_

static pp_status family_of(const pp_model_cfg *m, const hf_family **out)
{
    int rope_swiglu = m->norm == PP_NORM_RMSNORM && m->mlp == PP_MLP_SWIGLU &&
                      m->pos == PP_POS_ROPE;
    if (rope_swiglu && m->moe.experts > 0) {
        /* Qwen3-MoE is told by its q/k norm (Mixtral has none) and renormalises where
         * norm_topk_prob says; Mixtral always does */
        if (m->moe.shared > 0 || m->moe.router != PP_ROUTER_SOFTMAX ||
            (!m->qk_norm && !m->moe.norm_topk) || pp_model_bias(m, PP_NOBIAS_QKV))
            return PP_ERR(PP_ERR_UNSUPPORTED,
                          "HuggingFace weights: a mixture-of-experts block other than Mixtral's "
                          "or Qwen3-MoE's (shared experts %d, %s router, renormalised %d, q/k "
                          "norm %d, q/k/v biases %d): no transformers class pprun writes has "
                          "its names",
                          m->moe.shared, m->moe.router == PP_ROUTER_SOFTMAX ? "softmax" : "sigmoid",
                          m->moe.norm_topk, m->qk_norm, pp_model_bias(m, PP_NOBIAS_QKV));
        *out = &families[m->qk_norm ? 0 : 1];
    } else if (rope_swiglu)
        *out = &families[2];
    else if (m->norm == PP_NORM_LAYERNORM && m->mlp == PP_MLP_GELU && m->pos == PP_POS_LEARNED)
        *out = &families[3];
    else {
        char block[256];
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "HuggingFace weights: the block (%s) is neither GPT-2's (LayerNorm, GELU, "
                      "learned positions) nor Llama's (RMSNorm, SwiGLU, rotary); no transformers "
                      "class has its names",
                      pp_model_describe(m, block, sizeof block));
    }
    return PP_OK;
}

/* ---- one pprun tensor and its parts ---- */

typedef struct {
    const hf_map *map;
    int layer; /* -1: global */
    int64_t R, K; /* whole shape; K = 1 for a vector */
    int vec;
    int64_t rows[3];
    int reps; /* the parts repeated this many times: once per routed expert, else 1 */
    const char *strip; /* the family's base prefix, left out of the names (or NULL) */
} tensor_ref;

static int64_t rows_of(const pp_model_cfg *m, part_rows r, int64_t all)
{
    pp_rt_dims d = pp_rt_dims_of(m, 1, 1);
    switch (r) {
    case R_Q:
        return (int64_t)d.qd;
    case R_KV:
        return (int64_t)d.kvd;
    case R_F:
        return (int64_t)d.F;
    case R_FE:
        return (int64_t)d.Fe;
    case R_C:
        return (int64_t)d.C;
    default:
        return all;
    }
}

/* Resolves pprun's tensor name (as a stage names it) in family f; 0 when f has no entry. */
static int resolve(const pp_model_cfg *m, const hf_family *f, const char *name, tensor_ref *t)
{
    int layer = -1;
    const char *local = name;
    if (name[0] == 'h' && name[1] >= '0' && name[1] <= '9') {
        layer = atoi(name + 1);
        local = strchr(name, '.') + 1;
    }
    int64_t cols;
    if (!pp_rt_tensor_shape(m, name, &t->R, &cols))
        return 0;
    t->vec = cols == 0;
    t->K = cols ? cols : 1;
    t->layer = layer;
    t->strip = NULL;
    t->reps = 1;
    for (int i = 0; i < f->n_map + f->n_mlp; i++) {
        const hf_map *e = i < f->n_map ? &f->map[i] : &f->mlp[i - f->n_map];
        if (e->block != (layer >= 0) || strcmp(e->pp, local) != 0)
            continue;
        t->map = e;
        for (int p = 0; p < t->map->n; p++) {
            t->rows[p] = rows_of(m, t->map->part[p].rows, t->R);
            const char *d = strstr(t->map->part[p].fmt, "%d");
            if (d && strstr(d + 2, "%d"))
                t->reps = m->moe.experts;
        }
        return 1;
    }
    return 0;
}

/* Parts of t: its map's, repeated per expert (part q is part q % n of expert q / n). */
static int part_count(const tensor_ref *t)
{
    return t->map->n * t->reps;
}

static void part_name(const tensor_ref *t, int q, char *buf, size_t n)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(buf, n, t->map->part[q % t->map->n].fmt, t->layer, q / t->map->n);
#pragma GCC diagnostic pop
    size_t k = t->strip ? strlen(t->strip) : 0;
    if (k && !strncmp(buf, t->strip, k))
        memmove(buf, buf + k, strlen(buf + k) + 1);
}

/* The shape transformers stores part p in. */
static int part_shape(const tensor_ref *t, int q, int64_t shape[2])
{
    int64_t r = t->rows[q % t->map->n];
    if (t->vec) {
        shape[0] = r;
        return 1;
    }
    shape[0] = t->map->transpose ? t->K : r;
    shape[1] = t->map->transpose ? r : t->K;
    return 2;
}

/* Part p (laid out as stored, rows*K floats) to / from rows [off, off + rows) of the whole. */
static void part_copy(const tensor_ref *t, int q, int64_t off, float *whole, float *part,
                      int to_whole)
{
    int64_t r = t->rows[q % t->map->n], K = t->K;
    for (int64_t i = 0; i < r; i++)
        for (int64_t k = 0; k < K; k++) {
            float *w = &whole[(off + i) * K + k];
            float *s = t->map->transpose ? &part[k * r + i] : &part[i * K + k];
            if (to_whole)
                *w = *s;
            else
                *s = *w;
        }
}

/* ---- the whole model's names ---- */

/* Every pprun tensor name of the whole model (one stage holding every layer, tied head once). */
typedef struct {
    char (*name)[48];
    int n;
} name_list;

static pp_status model_names(const pp_model_cfg *m, name_list *out)
{
    const char *blk[PP_RT_BLOCK_TENSORS_MAX];
    int nb = pp_rt_block_tensors(m, blk);
    out->name = pp_calloc((size_t)m->layers * (size_t)nb + 8, 48);
    if (!out->name)
        return PP_ERR(PP_ERR_NOMEM, "HuggingFace weights: no memory for the tensor names");
    int n = 0;
    const char *globals[] = {"wte", m->pos == PP_POS_LEARNED ? "wpe" : NULL, "lnf.g",
                             pp_model_bias(m, PP_NOBIAS_NORM) ? "lnf.b" : NULL,
                             m->untied ? "head.w" : NULL};
    for (size_t i = 0; i < sizeof globals / sizeof *globals; i++)
        if (globals[i])
            snprintf(out->name[n++], 48, "%s", globals[i]);
    for (int l = 0; l < m->layers; l++)
        for (int k = 0; k < nb; k++)
            snprintf(out->name[n++], 48, "h%d.%s", l, blk[k]);
    out->n = n;
    return PP_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 when name is fmt's name for a block >= first ("model.layers.%d.mlp.up_proj.weight"). */
static int is_block_past(const char *fmt, const char *name, int first)
{
    const char *d = strstr(fmt, "%d");
    size_t pre = (size_t)(d - fmt);
    if (strncmp(fmt, name, pre) != 0)
        return 0;
    const char *p = name + pre, *q = p;
    while (*q >= '0' && *q <= '9')
        q++;
    return q > p && q - p < 8 && !strcmp(q, d + 2) && atoi(p) >= first;
}

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

/* What the file holds besides the model's tensors: skipped (buffers, a tied lm_head, blocks
 * past the model's when more_layers) or refused. *past_max: the highest block skipped. */
static pp_status check_extra(const pp_st *st, const pp_model_cfg *m, const hf_family *f,
                             const char **want, int n_want, int more_layers, const char *strip,
                             int *past_max)
{
    for (size_t i = 0; i < pp_st_count(st); i++) {
        const pp_st_tensor *t = pp_st_at(st, i);
        if (bsearch(&t->name, want, (size_t)n_want, sizeof *want, cmp_str))
            continue;
        char full[160]; /* the name with the base prefix, as the family's table has it */
        snprintf(full, sizeof full, "%s%s", strip ? strip : "", t->name);
        int skip = !m->untied && !strcmp(t->name, "lm_head.weight");
        for (int k = 0; k < 3 && f->skip[k] && !skip; k++)
            skip = ends_with(t->name, f->skip[k]);
        for (int k = 0; k < f->n_map + f->n_mlp && !skip && more_layers; k++) {
            const hf_map *e = k < f->n_map ? &f->map[k] : &f->mlp[k - f->n_map];
            for (int p = 0; p < e->n && !skip; p++)
                if (e->block && is_block_past(e->part[p].fmt, full, m->layers)) {
                    skip = 1;
                    int b = atoi(full + (strstr(e->part[p].fmt, "%d") - e->part[p].fmt));
                    *past_max = b > *past_max ? b : *past_max;
                }
        }
        if (!skip)
            return PP_ERR(PP_ERR_INVALID,
                          "%s: tensor %s: not a tensor of this model (%s with %d layers)%s", t->file,
                          t->name, f->name, m->layers,
                          more_layers ? "" : "; a checkpoint with more layers loads with --layers");
    }
    return PP_OK;
}

/* Checks the file against the whole model: every tensor there with its shape, nothing else. */
static pp_status check_model(const pp_st *st, const pp_model_cfg *m, const hf_family *f,
                             int more_layers, const char *strip, int *skipped)
{
    name_list nl;
    PP_TRY(model_names(m, &nl));
    size_t most = (size_t)nl.n * 3 * (size_t)(m->moe.experts > 1 ? m->moe.experts : 1) + 1;
    const char **want = pp_calloc(most, sizeof *want); /* parts: 3 a tensor, per expert */
    char(*names)[96] = pp_calloc(most, 96);
    pp_status rc = want && names ? PP_OK : PP_ERR(PP_ERR_NOMEM, "HuggingFace weights: no memory");
    int n_want = 0;
    for (int i = 0; rc == PP_OK && i < nl.n; i++) {
        tensor_ref t;
        if (!resolve(m, f, nl.name[i], &t)) {
            rc = PP_ERR(PP_ERR_UNSUPPORTED, "HuggingFace weights: %s has no name for pprun's %s",
                        f->name, nl.name[i]);
            break;
        }
        t.strip = strip;
        for (int p = 0; rc == PP_OK && p < part_count(&t); p++) {
            int64_t shape[2];
            int nd = part_shape(&t, p, shape);
            part_name(&t, p, names[n_want], 96);
            rc = pp_st_expect(st, names[n_want], nd, shape, NULL);
            want[n_want] = names[n_want];
            n_want++;
        }
    }
    int past = -1;
    if (rc == PP_OK) {
        qsort(want, (size_t)n_want, sizeof *want, cmp_str);
        rc = check_extra(st, m, f, want, n_want, more_layers, strip, &past);
    }
    if (skipped)
        *skipped = past < 0 ? 0 : past + 1 - m->layers;
    free(want);
    free(names);
    free(nl.name);
    return rc;
}

/* ---- load ---- */

/* Reads parts [q0, q1) of pprun's tensor t from the file into dst, one after another (all of
 * them: the whole R*K floats; an expert rank's experts: their parts); part is scratch. */
static pp_status read_parts(const pp_st *st, const tensor_ref *t, int q0, int q1, float *dst,
                            float *part)
{
    int64_t off = 0;
    for (int p = q0; p < q1; p++) {
        char name[96];
        int64_t shape[2];
        int nd = part_shape(t, p, shape);
        part_name(t, p, name, sizeof name);
        PP_TRY(pp_st_load_named_f32(st, name, nd, shape, part));
        part_copy(t, p, off, dst, part, 1);
        off += t->rows[p % t->map->n];
    }
    return PP_OK;
}

/* The parts of t a stage holds: all, or under expert parallelism (ep > 1) an expert tensor's
 * experts [epr E / ep, (epr + 1) E / ep), which lie one after another in pprun's tensor
 * (stage_impl.h), so each expert rank reads only its own experts from the file. */
static void stage_parts(const pp_rt_stage *s, const pp_rt_tensor *pt, const tensor_ref *t,
                        int *q0, int *q1)
{
    int n = part_count(t);
    *q0 = 0, *q1 = n;
    if (s->ep > 1 && pp_rt_tensor_is_expert(pt->name))
        *q0 = n / s->ep * s->epr, *q1 = *q0 + n / s->ep;
}

typedef struct {
    float *whole, *part, *mine;
    size_t cap; /* floats of each */
} scratch;

static pp_status scratch_fit(scratch *s, size_t n)
{
    if (n <= s->cap)
        return PP_OK;
    free(s->whole), free(s->part), free(s->mine);
    s->whole = malloc(n * sizeof(float));
    s->part = malloc(n * sizeof(float));
    s->mine = malloc(n * sizeof(float));
    s->cap = s->whole && s->part && s->mine ? n : 0;
    if (!s->cap)
        return PP_ERR(PP_ERR_NOMEM, "HuggingFace weights: no host memory for %zu floats", n);
    return PP_OK;
}

static pp_status load_stage(const pp_st *st, const hf_family *f, const char *strip,
                            pp_rt_stage *s, scratch *sc)
{
    for (int i = 0; i < s->ntensors; i++) {
        pp_rt_tensor *pt = &s->tensors[i];
        tensor_ref t;
        if (!resolve(&s->cfg, f, pt->name, &t))
            return PP_ERR(PP_ERR_UNSUPPORTED, "HuggingFace weights: %s has no name for pprun's %s",
                          f->name, pt->name);
        t.strip = strip;
        PP_TRY(scratch_fit(sc, (size_t)(t.R * t.K)));
        int q0, q1;
        stage_parts(s, pt, &t, &q0, &q1);
        PP_TRY(read_parts(st, &t, q0, q1, sc->whole, sc->part));
        const float *src = sc->whole;
        if (pt->sharded) { /* the vocabulary padding (no place in the whole) stays zero */
            for (size_t j = 0; j < pt->n; j++) {
                size_t g = pp_rt_stage_global_index(s, i, j);
                sc->mine[j] = g == PP_RT_STAGE_PAD ? 0.0f : sc->whole[g];
            }
            src = sc->mine;
        }
        PP_TRY(s->be->ops->upload(s->be->ctx, pt->data, src, pt->n * sizeof(float)));
    }
    return PP_OK;
}

pp_status pp_rt_weights_load(pp_rt_executor *ex, const char *path, int more_layers, int *skipped)
{
    const hf_family *f;
    PP_TRY(family_of(&ex->model, &f));
    pp_st *st;
    PP_TRY(pp_st_open(path, &st));
    /* a base model's checkpoint: its embedding without the prefix, and none with it */
    const char *embed = f->map[0].part[0].fmt, *strip = NULL;
    size_t k = strlen(f->base);
    if (!pp_st_find(st, embed) && !strncmp(embed, f->base, k) && pp_st_find(st, embed + k))
        strip = f->base;
    pp_status rc = check_model(st, &ex->model, f, more_layers, strip, skipped);
    scratch sc = {0};
    size_t n_stages = (size_t)ex->dp * ex->TP * ex->P * ex->S;
    for (size_t i = 0; rc == PP_OK && i < n_stages; i++)
        if (ex->stages[i])
            rc = load_stage(st, f, strip, ex->stages[i], &sc);
    free(sc.whole), free(sc.part), free(sc.mine);
    pp_st_destroy(st);
    return rc;
}

/* ---- save ----
 * Every process visits the pieces of the tensors it holds (replica 0, pipe 0: each stage's
 * tensors as its tensor-parallel rank holds them, a replicated one from tensor rank 0 only, the
 * tied head's copy not at all; under expert parallelism replicas 1 .. ep-1 add their experts,
 * which replica 0 lacks). Global rank 0 puts them into whole tensors and writes the file: its
 * own pieces directly, the other processes' (under MPI) as one message each. */

/* A piece as it travels: which tensor, how the sender's slice maps into the whole, n floats. */
typedef struct {
    char name[48];
    pp_stage_shard shard;
    int32_t t, tpr;
    int32_t ep, epr; /* an expert tensor's piece under expert parallelism: experts epr of ep */
    uint64_t n;
} piece_head;

typedef pp_status (*piece_fn)(void *ctx, const piece_head *h, const float *data);

static pp_status each_piece(pp_rt_executor *ex, piece_fn fn, void *ctx)
{
    float *host = NULL;
    size_t cap = 0;
    pp_status rc = PP_OK;
    for (int k = 0; k < ex->TP * ex->EP && rc == PP_OK; k++)
        for (int stage = 0; stage < ex->S && rc == PP_OK; stage++) {
            int tpr = k % ex->TP, rep = k / ex->TP; /* ep > 1 has TP 1 */
            pp_rt_stage *s = ex_stage(ex, rep, tpr, 0, stage);
            for (int i = 0; s && i < s->ntensors && rc == PP_OK; i++) {
                pp_rt_tensor *pt = &s->tensors[i];
                int expert = s->ep > 1 && pp_rt_tensor_is_expert(pt->name);
                if (!strcmp(pt->name, "wte.head") || (tpr > 0 && !pt->sharded) ||
                    (rep > 0 && !expert))
                    continue;
                if (pt->n > cap) {
                    free(host);
                    cap = pt->n;
                    if (!(host = malloc(cap * sizeof(float))))
                        return PP_ERR(PP_ERR_NOMEM, "HuggingFace weights: no host memory");
                }
                rc = s->be->ops->download(s->be->ctx, host, pt->data, pt->n * sizeof(float));
                piece_head h = {.shard = s->shard[i], .t = s->tp, .tpr = s->tpr,
                                .ep = expert ? s->ep : 1, .epr = expert ? s->epr : 0,
                                .n = pt->n};
                snprintf(h.name, sizeof h.name, "%s", pt->name);
                if (rc == PP_OK)
                    rc = fn(ctx, &h, host);
            }
        }
    free(host);
    return rc;
}

/* The whole model on the writing rank: whole[i] for pprun's tensor nl.name[i]. */
typedef struct {
    const pp_model_cfg *m;
    name_list nl;
    float **whole;
} model_buf;

static pp_status place(void *ctx, const piece_head *h, const float *data)
{
    model_buf *mb = ctx;
    int k = 0;
    while (k < mb->nl.n && strncmp(mb->nl.name[k], h->name, sizeof h->name) != 0)
        k++;
    int64_t R, K;
    if (k == mb->nl.n || !pp_rt_tensor_shape(mb->m, mb->nl.name[k], &R, &K))
        return PP_ERR(PP_ERR_INVALID, "HuggingFace weights: a stage holds %.48s, not a tensor "
                                      "of the model", h->name);
    size_t n = (size_t)R * (size_t)(K ? K : 1);
    if (!mb->whole[k] && !(mb->whole[k] = malloc(n * sizeof(float))))
        return PP_ERR(PP_ERR_NOMEM, "HuggingFace weights: no host memory for %s", h->name);
    int split = h->t > 1 && h->shard.kind != SHARD_NONE;
    /* a piece: the whole, 1/t, or ceil(V/t) vocabulary rows (padding past V), or an expert
     * rank's experts, 1/ep of the whole from epr / ep on */
    if (h->ep > 1) {
        size_t part = n / (size_t)h->ep;
        if (h->n != part || part * (size_t)h->ep != n || h->epr < 0 || h->epr >= h->ep)
            return PP_ERR(PP_ERR_INVALID, "HuggingFace weights: expert piece %d of %d of %.48s "
                                          "of %llu floats", h->epr, h->ep, h->name,
                          (unsigned long long)h->n);
        memcpy(mb->whole[k] + (size_t)h->epr * part, data, part * sizeof(float));
        return PP_OK;
    }
    size_t want = !split                          ? n
                  : h->shard.kind == SHARD_VOCAB ? pp_rt_vocab_rows((size_t)R, (size_t)h->t) *
                                                       (size_t)(K ? K : 1)
                                                 : n / (size_t)h->t;
    if (h->n != want || (split && h->shard.kind != SHARD_VOCAB && want * (size_t)h->t != n))
        return PP_ERR(PP_ERR_INVALID, "HuggingFace weights: a piece of %.48s of %llu floats",
                      h->name, (unsigned long long)h->n);
    for (size_t j = 0; j < h->n; j++) {
        size_t g = split ? pp_stage_shard_index(&h->shard, h->t, h->tpr, j) : j;
        if (g != PP_RT_STAGE_PAD) /* the vocabulary padding is no part of the model */
            mb->whole[k][g] = data[j];
    }
    return PP_OK;
}

/* ---- the pieces of other processes (MPI) ---- */

typedef struct {
    char *buf;
    size_t len, cap;
} packer;

static pp_status pack(void *ctx, const piece_head *h, const float *data)
{
    packer *p = ctx;
    size_t need = p->len + sizeof *h + h->n * sizeof(float);
    if (need > p->cap) {
        size_t cap = need * 2;
        char *b = realloc(p->buf, cap);
        if (!b)
            return PP_ERR(PP_ERR_NOMEM, "HuggingFace weights: no memory for a message");
        p->buf = b, p->cap = cap;
    }
    memcpy(p->buf + p->len, h, sizeof *h);
    memcpy(p->buf + p->len + sizeof *h, data, h->n * sizeof(float));
    p->len = need;
    return PP_OK;
}

/* Another process of replica 0 (or under ep of replicas 1 .. ep-1, their experts): its pieces
 * to rank 0, as a length then the bytes. */
static pp_status send_pieces(pp_rt_executor *ex)
{
    packer p = {0};
    pp_status rc = each_piece(ex, pack, &p);
    uint64_t len = p.len;
    if (rc == PP_OK)
        rc = pp_ex_send_host(ex, ex->self, 0,
                             pp_ex_coll_tag(TAG_GATHER, GATHER_WEIGHTS_LEN, ex->self), &len,
                             sizeof len);
    if (rc == PP_OK && len)
        rc = pp_ex_send_host(ex, ex->self, 0, pp_ex_coll_tag(TAG_GATHER, GATHER_WEIGHTS, ex->self),
                             p.buf, p.len);
    if (rc == PP_OK)
        rc = pp_transport_flush(ex->tp, ex->self);
    free(p.buf);
    return rc;
}

/* Rank 0: every other process's pieces of replicas 0 .. ep-1 into mb. */
static pp_status recv_pieces(pp_rt_executor *ex, model_buf *mb)
{
    pp_status rc = PP_OK;
    for (int g = 1; g < ex->G && rc == PP_OK; g++) {
        if (pp_rt_place_dp(&ex->place, g) >= ex->EP)
            continue;
        uint64_t len = 0;
        rc = pp_ex_recv_host(ex, 0, g, pp_ex_coll_tag(TAG_GATHER, GATHER_WEIGHTS_LEN, g), &len,
                             sizeof len);
        char *buf = rc == PP_OK && len ? malloc(len) : NULL;
        if (rc == PP_OK && len && !buf)
            rc = PP_ERR(PP_ERR_NOMEM, "HuggingFace weights: no memory for rank %d's part", g);
        if (rc == PP_OK && len)
            rc = pp_ex_recv_host(ex, 0, g, pp_ex_coll_tag(TAG_GATHER, GATHER_WEIGHTS, g), buf, len);
        for (size_t off = 0; rc == PP_OK && off < len;) {
            piece_head h;
            memcpy(&h, buf + off, sizeof h);
            float *data = malloc(h.n * sizeof(float) + 1);
            if (!data) {
                rc = PP_ERR(PP_ERR_NOMEM, "HuggingFace weights: no memory for a piece");
                break;
            }
            memcpy(data, buf + off + sizeof h, h.n * sizeof(float));
            rc = place(mb, &h, data);
            free(data);
            off += sizeof h + h.n * sizeof(float);
        }
        free(buf);
    }
    return rc;
}

/* ---- the file ---- */

typedef struct {
    pp_st_out *out;
    int64_t (*shape)[2];
    char (*name)[96];
    float **data;
    int n, cap;
} out_list;

static pp_status out_add(out_list *o, const tensor_ref *t, const float *whole, pp_st_dtype dtype)
{
    int64_t off = 0;
    for (int p = 0; p < part_count(t); p++) {
        if (o->n == o->cap)
            return PP_ERR(PP_ERR_INVALID, "HuggingFace weights: more tensors than planned (%d)",
                          o->cap);
        int64_t r = t->rows[p % t->map->n];
        float *d = malloc((size_t)(r * t->K) * sizeof(float));
        if (!d)
            return PP_ERR(PP_ERR_NOMEM, "HuggingFace weights: no host memory for a tensor");
        part_copy(t, p, off, (float *)whole, d, 0);
        off += r;
        int k = o->n++;
        o->data[k] = d;
        part_name(t, p, o->name[k], 96);
        int nd = part_shape(t, p, o->shape[k]);
        o->out[k] = (pp_st_out){o->name[k], dtype, nd, o->shape[k], d};
    }
    return PP_OK;
}

static pp_status write_model(const model_buf *mb, const hf_family *f, const char *path,
                             pp_st_dtype dtype)
{
    int cap = mb->nl.n * 3 * (mb->m->moe.experts > 1 ? mb->m->moe.experts : 1);
    out_list o = {pp_calloc((size_t)cap, sizeof(pp_st_out)), pp_calloc((size_t)cap, 2 * sizeof(int64_t)),
                  pp_calloc((size_t)cap, 96), pp_calloc((size_t)cap, sizeof(float *)), 0, cap};
    pp_status rc = o.out && o.shape && o.name && o.data
                       ? PP_OK
                       : PP_ERR(PP_ERR_NOMEM, "HuggingFace weights: no memory");
    for (int i = 0; rc == PP_OK && i < mb->nl.n; i++) {
        tensor_ref t;
        if (!mb->whole[i])
            rc = PP_ERR(PP_ERR_INVALID, "HuggingFace weights: no stage holds %s", mb->nl.name[i]);
        else if (!resolve(mb->m, f, mb->nl.name[i], &t))
            rc = PP_ERR(PP_ERR_UNSUPPORTED, "HuggingFace weights: %s has no name for pprun's %s",
                        f->name, mb->nl.name[i]);
        else
            rc = out_add(&o, &t, mb->whole[i], dtype);
    }
    const pp_st_meta meta = {"format", "pt"};
    if (rc == PP_OK)
        rc = pp_st_write(path, o.out, o.n, &meta, 1);
    for (int k = 0; k < o.n; k++)
        free(o.data[k]);
    free(o.out), free(o.shape), free(o.name), free(o.data);
    return rc;
}

pp_status pp_rt_weights_save(pp_rt_executor *ex, const char *path, pp_st_dtype dtype)
{
    if (dtype != PP_ST_F32 && dtype != PP_ST_BF16)
        return PP_ERR(PP_ERR_INVALID, "HuggingFace weights: dtype %s, expected F32 or BF16",
                      pp_st_dtype_name(dtype));
    const hf_family *f;
    PP_TRY(family_of(&ex->model, &f));
    if (ex->self > 0)
        return pp_rt_place_dp(&ex->place, ex->self) < ex->EP ? send_pieces(ex) : PP_OK;
    model_buf mb = {.m = &ex->model};
    PP_TRY(model_names(&ex->model, &mb.nl));
    mb.whole = pp_calloc((size_t)mb.nl.n, sizeof *mb.whole);
    pp_status rc = mb.whole ? each_piece(ex, place, &mb)
                            : PP_ERR(PP_ERR_NOMEM, "HuggingFace weights: no memory");
    if (rc == PP_OK && ex->self == 0)
        rc = recv_pieces(ex, &mb);
    if (rc == PP_OK)
        rc = write_model(&mb, f, path, dtype);
    for (int i = 0; mb.whole && i < mb.nl.n; i++)
        free(mb.whole[i]);
    free(mb.whole);
    free(mb.nl.name);
    return rc;
}
