/* stage.c — creation of a pp_rt_stage: its parameter tensors (one allocation for the weights,
 * one for the gradients, carved into named pieces), their deterministic initialisation, the
 * layout of a micro-batch slot, and the small accessors.
 *
 * Initialisation is counter-based: element i of tensor (layer, name) is a function of
 * (seed, layer, name, i) only (splitmix64, Steele et al. 2014, then Box-Muller on counters
 * 2j and 2j+1 for elements 2j and 2j+1), so a layer's weights are bit-identical whichever
 * stage, rank or allocation order holds it. GPT-2 init
 * (Radford et al. 2019): normal(0, 0.02), residual projections scaled by 1/sqrt(2L), LayerNorm
 * gain 1 and bias 0, biases 0.
 * Forward, backward and AdamW are in stage_fwd.c, stage_bwd.c, stage_adamw.c.
 *
 * Tensor parallelism (Megatron-LM, Shoeybi et al. 2019, section 3): a tensor-parallel rank
 * holds its shard of qkv (by heads) and fc (column-parallel) and of the two projections'
 * weights (row-parallel), and each element of a shard is initialised from its index in the
 * whole tensor, so the t shards put together are bit for bit the unsplit tensor.
 * The token embedding and the LM head (tied or not) are split over the vocabulary
 * (Megatron-LM's VocabParallelEmbedding and column-parallel output layer): a rank holds
 * ceil(V/t) rows of each, the last ranks' rows past V zero padding (pp_rt_sizes.h's
 * pp_rt_vocab_rows says why), a tied head's copy the same rows as the embedding; the position
 * embedding stays whole on every rank (Planned per rank in pp_rt_sizes.h).
 * Sequence parallelism (Korthikanti et al. 2022) changes no parameter: a rank's slot holds the
 * LayerNorm / residual tensors of its N/t tokens only (stage_fwd.c, stage_bwd.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "init_normal.h"
#include "pp_rt_plan.h"
#include "stage_impl.h"

typedef enum { INIT_ZERO, INIT_ONE, INIT_NORMAL } init_kind;

typedef struct {
    const char *name; /* within the layer: "ln1.g", "attn.qkv.w", ... */
    int rows, cols;   /* of the whole tensor; cols = 0 for a vector */
    init_kind init;
    int residual;       /* normal std scaled by 1/sqrt(2L) */
    pp_shard_kind kind; /* how tensor parallelism splits it */
} tensor_spec;

/* Block tensors in the order of the PP_LT_* enum, sizes from the model's widths (whole
 * tensors); present[k] is 0 for a tensor the model does not have. */
static void layer_specs(const pp_model_cfg *m, tensor_spec s[PP_LT__COUNT],
                        int present[PP_LT__COUNT])
{
    pp_rt_dims d = pp_rt_dims_of(m, 1, 1);
    int C = m->hidden, F = (int)d.F, Q = (int)d.qd, QKV = (int)d.qkv, FC = (int)d.fc;
    int E = (int)d.E, Fe = (int)d.Fe; /* whole tensors: a rank of ep holds E / ep experts */
    pp_shard_kind fc = m->mlp == PP_MLP_SWIGLU ? SHARD_BLOCKS : SHARD_ROWS;
    s[PP_LT_LN1_G] = (tensor_spec){"ln1.g", C, 0, INIT_ONE, 0, SHARD_NONE};
    s[PP_LT_LN1_B] = (tensor_spec){"ln1.b", C, 0, INIT_ZERO, 0, SHARD_NONE};
    s[PP_LT_QKV_W] = (tensor_spec){"attn.qkv.w", QKV, C, INIT_NORMAL, 0, SHARD_BLOCKS};
    s[PP_LT_QKV_B] = (tensor_spec){"attn.qkv.b", QKV, 0, INIT_ZERO, 0, SHARD_BLOCKS};
    s[PP_LT_QN_G] = (tensor_spec){"attn.q_norm.g", (int)d.hd, 0, INIT_ONE, 0, SHARD_NONE};
    s[PP_LT_KN_G] = (tensor_spec){"attn.k_norm.g", (int)d.hd, 0, INIT_ONE, 0, SHARD_NONE};
    s[PP_LT_PROJ_W] = (tensor_spec){"attn.proj.w", C, Q, INIT_NORMAL, 1, SHARD_COLS};
    s[PP_LT_PROJ_B] = (tensor_spec){"attn.proj.b", C, 0, INIT_ZERO, 0, SHARD_NONE};
    s[PP_LT_LN2_G] = (tensor_spec){"ln2.g", C, 0, INIT_ONE, 0, SHARD_NONE};
    s[PP_LT_LN2_B] = (tensor_spec){"ln2.b", C, 0, INIT_ZERO, 0, SHARD_NONE};
    s[PP_LT_FC_W] = (tensor_spec){"mlp.fc.w", FC, C, INIT_NORMAL, 0, fc};
    s[PP_LT_FC_B] = (tensor_spec){"mlp.fc.b", FC, 0, INIT_ZERO, 0, fc};
    s[PP_LT_FCP_W] = (tensor_spec){"mlp.proj.w", C, F, INIT_NORMAL, 1, SHARD_COLS};
    s[PP_LT_FCP_B] = (tensor_spec){"mlp.proj.b", C, 0, INIT_ZERO, 0, SHARD_NONE};
    /* a MoE block: the router and the routed experts (the shared ones are mlp.fc / mlp.proj) */
    s[PP_LT_ROUTER_W] = (tensor_spec){"moe.router.w", E, C, INIT_NORMAL, 0, SHARD_NONE};
    s[PP_LT_EXP_FC_W] = (tensor_spec){"moe.experts.fc.w", E * 2 * Fe, C, INIT_NORMAL, 0,
                                      SHARD_NONE};
    s[PP_LT_EXP_PROJ_W] = (tensor_spec){"moe.experts.proj.w", E * C, Fe, INIT_NORMAL, 1,
                                        SHARD_NONE};
    for (int k = 0; k < PP_LT__COUNT; k++)
        present[k] = k < PP_LT_ROUTER_W || E > 0;
    if (E > 0 && F == 0) /* no shared experts */
        present[PP_LT_FC_W] = present[PP_LT_FCP_W] = 0;
    present[PP_LT_LN1_B] = present[PP_LT_LN2_B] = pp_model_bias(m, PP_NOBIAS_NORM);
    present[PP_LT_QKV_B] = pp_model_bias(m, PP_NOBIAS_QKV);
    present[PP_LT_QN_G] = present[PP_LT_KN_G] = m->qk_norm != 0;
    present[PP_LT_PROJ_B] = pp_model_bias(m, PP_NOBIAS_OUT);
    present[PP_LT_FC_B] = present[PP_LT_FCP_B] = pp_model_bias(m, PP_NOBIAS_MLP);
}

int pp_rt_block_tensors(const pp_model_cfg *m, const char *names[PP_RT_BLOCK_TENSORS_MAX])
{
    tensor_spec spec[PP_LT__COUNT];
    int present[PP_LT__COUNT], n = 0;
    layer_specs(m, spec, present);
    for (int k = 0; k < PP_LT__COUNT; k++)
        if (present[k])
            names[n++] = spec[k].name;
    return n;
}

int pp_rt_tensor_shape(const pp_model_cfg *m, const char *name, int64_t *rows, int64_t *cols)
{
    const char *dot = name[0] == 'h' && name[1] >= '0' && name[1] <= '9' ? strchr(name, '.') : NULL;
    if (dot) { /* "h3.attn.qkv.w": a block tensor */
        tensor_spec spec[PP_LT__COUNT];
        int present[PP_LT__COUNT];
        layer_specs(m, spec, present);
        for (int k = 0; k < PP_LT__COUNT; k++)
            if (present[k] && !strcmp(dot + 1, spec[k].name)) {
                *rows = spec[k].rows, *cols = spec[k].cols;
                return 1;
            }
        return 0;
    }
    int64_t C = m->hidden;
    *cols = C;
    if (!strcmp(name, "wte") || !strcmp(name, "wte.head") || !strcmp(name, "head.w"))
        *rows = m->vocab;
    else if (!strcmp(name, "wpe"))
        *rows = m->seq;
    else if (!strcmp(name, "lnf.g") || !strcmp(name, "lnf.b"))
        *rows = C, *cols = 0;
    else
        return 0;
    return 1;
}

/* The row blocks of a SHARD_BLOCKS tensor k: qkv's [q | k | v] (NH hd, NKV hd, NKV hd rows),
 * SwiGLU's [gate | up] (F rows each). */
static pp_stage_shard blocks_of(const pp_model_cfg *m, int k, size_t rows, size_t cols)
{
    pp_rt_dims d = pp_rt_dims_of(m, 1, 1);
    pp_stage_shard sh = {SHARD_BLOCKS, rows, cols, 0, {0, 0, 0}};
    if (k == PP_LT_QKV_W || k == PP_LT_QKV_B)
        sh.nblk = 3, sh.blk[0] = d.qd, sh.blk[1] = sh.blk[2] = d.kvd;
    else
        sh.nblk = 2, sh.blk[0] = sh.blk[1] = d.F;
    return sh;
}

/* Index in the whole tensor of element i of tensor-parallel rank tpr's shard (of t). */
size_t pp_stage_shard_index(const pp_stage_shard *sh, int t, int tpr, size_t i)
{
    size_t R = sh->rows, K = sh->cols, tt = (size_t)t, r = (size_t)tpr;
    switch (sh->kind) {
    case SHARD_ROWS: /* local (R/t, K) */
        return (r * (R / tt)) * K + i;
    case SHARD_BLOCKS: { /* local: blk[b]/t rows of each block in turn */
        size_t lr = i / K, c = i % K, base = 0;
        for (int b = 0; b < sh->nblk; b++) {
            size_t part = sh->blk[b] / tt;
            if (lr < part)
                return (base + r * part + lr) * K + c;
            lr -= part;
            base += sh->blk[b];
        }
        return i; /* not reached: the local rows sum to R/t */
    }
    case SHARD_VOCAB: { /* local (Vl, K): rows r Vl .. of the whole (R, K), past R padding */
        size_t row = r * pp_rt_vocab_rows(R, tt) + i / K;
        return row < R ? row * K + i % K : PP_RT_STAGE_PAD;
    }
    case SHARD_COLS: { /* local (R, K/t) */
        size_t kl = K / tt, row = i / kl, c = i % kl;
        return row * K + r * kl + c;
    }
    default:
        return i;
    }
}

/* ---- counter-based normal numbers (init_normal.h) ---- */

/* Key of tensor (layer, name); layer -1 for the tensors outside the blocks. */
static uint64_t tensor_key(uint64_t seed, int layer, const char *name)
{
    uint64_t name_h = pp_fnv1a_str(PP_FNV1A_BASIS, name);
    return pp_splitmix64(seed ^ pp_splitmix64(name_h ^ pp_splitmix64((uint64_t)(layer + 1))));
}

/* Fills a shard of a tensor: element i is element shard_index(i) of the whole one. */
static pp_status init_shard(pp_backend *be, float *dst, size_t n, init_kind kind, uint64_t key,
                            double std, const pp_stage_shard *sh, int t, int tpr)
{
    float buf[4096];
    for (size_t done = 0; done < n;) {
        size_t m = n - done < 4096 ? n - done : 4096;
        for (size_t i = 0; i < m; i++) {
            size_t gi = pp_stage_shard_index(sh, t, tpr, done + i);
            float pair[2] = {kind == INIT_ONE ? 1.0f : 0.0f, kind == INIT_ONE ? 1.0f : 0.0f};
            if (kind == INIT_NORMAL && gi != PP_RT_STAGE_PAD)
                pp_normal_pair(key, gi / 2, std, pair);
            buf[i] = gi == PP_RT_STAGE_PAD ? 0.0f : pair[gi & 1]; /* padding rows: zero */
        }
        PP_TRY(be->ops->upload(be->ctx, dst + done, buf, m * sizeof(float)));
        done += m;
    }
    return PP_OK;
}

/* Fills a backend tensor through a small host buffer (no host copy of the whole tensor). The
 * chunk length is even, so a Box-Muller pair never straddles two chunks. A tensor-parallel
 * shard goes through init_shard (on the host, also beside a device). */
static pp_status init_tensor(pp_backend *be, float *dst, size_t n, init_kind kind, uint64_t key,
                             double std, const pp_stage_shard *sh, int t, int tpr)
{
    if (t > 1 && sh->kind != SHARD_NONE && kind != INIT_ZERO)
        return init_shard(be, dst, n, kind, key, std, sh, t, tpr);
    if (kind == INIT_NORMAL && be->ops->init_normal) /* the device fills it (CUDA) */
        return be->ops->init_normal(be->ctx, dst, n, key, std);
    if (kind == INIT_ZERO)
        return be->ops->zero(be->ctx, dst, n * sizeof(float));
    float buf[4096];
    for (size_t done = 0; done < n;) {
        size_t m = n - done < 4096 ? n - done : 4096;
        for (size_t i = 0; i < m; i += 2) {
            float pair[2] = {kind == INIT_ONE ? 1.0f : 0.0f, kind == INIT_ONE ? 1.0f : 0.0f};
            if (kind == INIT_NORMAL)
                pp_normal_pair(key, (done + i) / 2, std, pair);
            buf[i] = pair[0];
            if (i + 1 < m)
                buf[i + 1] = pair[1];
        }
        PP_TRY(be->ops->upload(be->ctx, dst + done, buf, m * sizeof(float)));
        done += m;
    }
    return PP_OK;
}

/* ---- the tensor table ---- */

typedef struct {
    char name[48];
    int layer; /* global layer, -1 outside blocks */
    const char *key_name;
    size_t n;
    init_kind init;
    double std;
    int matrix;
    pp_stage_shard shard;
    int parts, part; /* the split the shard is of: tensor parallelism's, or for the routed
                        experts under expert parallelism ep's (ep, epr) */
} tensor_plan;

/* Lists the stage's tensors in allocation order; returns the count (plan may be NULL). */
static int plan_tensors(const pp_rt_stage *st, tensor_plan *plan)
{
    const pp_model_cfg *m = &st->cfg;
    const double std = 0.02, res_std = 0.02 / sqrt(2.0 * m->layers);
    size_t C = (size_t)m->hidden;
    int k = 0;
#define PLAN(nm, ly, key, count, kind, sd, mat)                                                    \
    do {                                                                                           \
        if (plan) {                                                                                \
            tensor_plan *p_ = &plan[k];                                                            \
            snprintf(p_->name, sizeof p_->name, "%s", nm);                                         \
            p_->layer = (ly), p_->key_name = (key), p_->n = (count), p_->init = (kind);            \
            p_->std = (sd), p_->matrix = (mat);                                                    \
            p_->shard = (pp_stage_shard){SHARD_NONE, (count), 1, 0, {0}};                          \
            p_->parts = st->tp, p_->part = st->tpr;                                                \
        }                                                                                          \
        k++;                                                                                       \
    } while (0)
    /* the embedding's and the head's vocabulary rows on this rank (all of them at t = 1) */
    size_t V = (size_t)m->vocab, Vl = pp_rt_vocab_rows(V, (size_t)st->tp);
#define VOCAB_SHARD()                                                                              \
    do {                                                                                           \
        if (plan && st->tp > 1)                                                                    \
            plan[k - 1].shard = (pp_stage_shard){SHARD_VOCAB, V, C, 0, {0}};                       \
    } while (0)
    if (st->has_embed) {
        PLAN("wte", -1, "wte", Vl * C, INIT_NORMAL, std, 1);
        VOCAB_SHARD();
        if (m->pos == PP_POS_LEARNED)
            PLAN("wpe", -1, "wpe", (size_t)m->seq * C, INIT_NORMAL, std, 1);
    }
    tensor_spec spec[PP_LT__COUNT];
    int present[PP_LT__COUNT];
    layer_specs(m, spec, present);
    for (int l = 0; l < st->nl; l++) {
        int gl = st->l0 + l;
        for (int t = 0; t < PP_LT__COUNT; t++) {
            if (!present[t])
                continue;
            char nm[48];
            snprintf(nm, sizeof nm, "h%d.%s", gl, spec[t].name);
            size_t rows = (size_t)spec[t].rows, cols = spec[t].cols ? (size_t)spec[t].cols : 1;
            int split = st->tp > 1 && spec[t].kind != SHARD_NONE;
            int experts = st->ep > 1 && (t == PP_LT_EXP_FC_W || t == PP_LT_EXP_PROJ_W);
            size_t n = rows * cols / (split ? (size_t)st->tp : experts ? (size_t)st->ep : 1);
            PLAN(nm, gl, spec[t].name, n, spec[t].init, spec[t].residual ? res_std : std,
                 spec[t].cols != 0);
            if (plan && experts) { /* rows [epr E/ep, ..) of the whole, as ep = 1 has them */
                plan[k - 1].shard = (pp_stage_shard){SHARD_ROWS, rows, cols, 0, {0}};
                plan[k - 1].parts = st->ep, plan[k - 1].part = st->epr;
            }
            if (plan && split)
                plan[k - 1].shard = spec[t].kind == SHARD_BLOCKS
                                        ? blocks_of(m, t, rows, cols)
                                        : (pp_stage_shard){spec[t].kind, rows, cols, 0, {0}};
        }
    }
    if (st->has_head) {
        PLAN("lnf.g", -1, "lnf.g", C, INIT_ONE, 0.0, 0);
        if (pp_model_bias(m, PP_NOBIAS_NORM))
            PLAN("lnf.b", -1, "lnf.b", C, INIT_ZERO, 0.0, 0);
        /* An untied head is its own matrix. The tied LM head: its own copy only when the
         * embedding lives on another stage, initialised from the same key as "wte" so both
         * copies start equal. */
        if (m->untied) {
            PLAN("head.w", -1, "head.w", Vl * C, INIT_NORMAL, std, 1);
            VOCAB_SHARD();
        } else if (!st->has_embed) {
            PLAN("wte.head", -1, "wte", Vl * C, INIT_NORMAL, std, 1);
            VOCAB_SHARD();
        }
    }
#undef VOCAB_SHARD
#undef PLAN
    return k;
}

/* ---- slot layout ----
 * [tokens (N) int32][targets (N) int32][block 0 .. block nl-1][head]; no padding, so the
 * bytes are exactly the sum of the saved tensors (what the accounting test checks). A block
 * keeps what its recomputation leaves (pp_rt_size_act_kept_floats). */

static size_t prefix_words(const pp_rt_stage *st)
{
    return pp_rt_size_act_prefix_words((size_t)st->B * st->T, st->has_embed, st->has_head);
}

/* Offset (floats) of block `layer`'s kept activations in the slot: pp_rt_sizes.h's, which the
 * memory plan adds up. */
static size_t layer_offset(const pp_rt_stage *st, int layer)
{
    return prefix_words(st) +
           pp_rt_size_act_kept_floats(&st->d, (size_t)st->B, (size_t)st->T, (size_t)layer);
}

void pp_stage_slot_views(const pp_rt_stage *st, void *mem, int32_t **tokens, int32_t **targets)
{
    size_t N = (size_t)st->B * st->T;
    int32_t *p = mem;
    *tokens = st->has_embed ? p : NULL;
    *targets = st->has_head ? p + (st->has_embed ? N : 0) : NULL;
}

/* A block's activations laid out from p in order, the probabilities skipped when !with_att. */
static void carve_layer(const pp_rt_stage *st, float *p, int with_att, pp_layer_acts *a)
{
    size_t N = (size_t)st->B * st->T, C = (size_t)st->cfg.hidden, Nl = (size_t)st->Nl;
    a->x = p, p += Nl * C;
    a->ln1 = p, p += Nl * C;
    a->mean1 = p, p += Nl;
    a->rstd1 = p, p += Nl;
    a->qkv = p, p += N * st->d.qkv;
    a->atty = p, p += N * st->d.qd;
    a->qkx = st->d.qkn ? p : NULL, p += st->d.qkn ? N * (st->d.qd + st->d.kvd) : 0;
    a->qkr = st->d.qkn ? p : NULL, p += st->d.qkn ? N * (st->d.Hl + st->d.KVl) : 0;
    a->att = with_att ? p : NULL;
    p += with_att ? pp_rt_size_att_floats(&st->d, (size_t)st->B, (size_t)st->T) : 0;
    a->res2 = p, p += Nl * C;
    a->ln2 = p, p += Nl * C;
    a->mean2 = p, p += Nl;
    a->rstd2 = p, p += Nl;
    a->fch = p, p += N * st->d.fc;
    a->act = p, p += N * st->d.Fl;
    size_t NK = N * st->d.K, E = st->d.E; /* a MoE block: pp_rt_size_moe_act_floats */
    a->mscore = p, p += N * E;
    a->midx = (int32_t *)p, p += NK;
    a->mw = p, p += NK;
    a->morder = (int32_t *)p, p += NK;
    a->mpos = (int32_t *)p, p += NK;
    a->moff = (int32_t *)p, p += E ? E + 1 : 0;
    a->my = p, p += NK * C;
    size_t R = E ? pp_rt_size_moe_rows(&st->d, N) : 0;
    a->mxr = p, p += R * C;
    a->mfch = p, p += R * 2 * st->d.Fe;
    a->mact = p, p += R * st->d.Fe;
    a->mrcnt = (int32_t *)p;
}

void pp_stage_layer_acts(const pp_rt_stage *st, void *mem, int layer, float *rws,
                         pp_layer_acts *a)
{
    float *kept = (float *)mem + layer_offset(st, layer);
    switch (pp_stage_rc_of(st, layer)) {
    case PP_RT_RC_FULL: /* all in the workspace but the input */
        carve_layer(st, rws, 1, a);
        a->x = kept;
        break;
    case PP_RT_RC_SELECTIVE: /* all in the slot but the probabilities */
        carve_layer(st, kept, 0, a);
        a->att = rws;
        break;
    default:
        carve_layer(st, kept, 1, a);
    }
}

void pp_stage_head_acts(const pp_rt_stage *st, void *mem, pp_head_acts *h)
{
    size_t N = (size_t)st->B * st->T, C = (size_t)st->cfg.hidden, Nl = (size_t)st->Nl;
    float *p = (float *)mem + layer_offset(st, st->nl);
    h->xf = p, p += Nl * C;
    h->lnf = p, p += N * C;
    h->meanf = p, p += Nl;
    h->rstdf = p, p += Nl;
    h->probs = p;
}

int pp_stage_find_slot(const pp_rt_stage *st, int id)
{
    for (int i = 0; i < st->nslots; i++)
        if (st->slots[i].id == id)
            return i;
    return -1;
}

/* ---- create / destroy ---- */

/* What the MoE layer (stage_moe.c) runs: a host backend's memory (it reads the routing
 * where it lies), no tensor or context parallelism. */
static pp_status check_moe(const pp_backend *be, const pp_rt_stage_params *p)
{
    if (p->model->moe.experts <= 0)
        return p->ep > 1 ? PP_ERR(PP_ERR_INVALID,
                                  "stage: expert parallelism (ep %d) needs mixture-of-experts "
                                  "layers; the model has none",
                                  p->ep)
                         : PP_OK;
    const char *why = strcmp(be->name, "cpu")     ? "another backend than the CPU's"
                      : p->tp > 1                 ? "tensor parallelism (t > 1)"
                      : p->cp > 1                 ? "context parallelism (cp > 1)"
                      : p->ep > 1 && (p->model->moe.experts % p->ep || p->ep > PP_MOE_MAX_EP ||
                                      !p->ep_alltoallv ||
                                      p->ep_rank < 0 || p->ep_rank >= p->ep)
                          ? "expert parallelism whose ep divides not the experts, or without "
                            "a rank and an all-to-all"
                          : NULL;
    if (why)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "stage: mixture-of-experts layers run on the CPU backend without tensor "
                      "or context parallelism; this run asks for %s "
                      "(backend %s, t %d, cp %d, recompute %d, ep %d of %d experts)",
                      why, be->name, p->tp, p->cp, p->recompute, p->ep, p->model->moe.experts);
    return PP_OK;
}

static pp_status check_params(const pp_backend *be, const pp_rt_stage_params *p)
{
    if (!p->model)
        return PP_ERR(PP_ERR_INVALID, "stage: no model configuration given");
    PP_TRY(pp_model_check_runnable(p->model));
    const pp_model_cfg *m = p->model;
    if (p->layer_begin < 0 || p->layer_begin > p->layer_end || p->layer_end > m->layers)
        return PP_ERR(PP_ERR_INVALID,
                      "stage: layer range [%d, %d) must lie within the model's %d layers",
                      p->layer_begin, p->layer_end, m->layers);
    if (p->micro_batch < 1)
        return PP_ERR(PP_ERR_INVALID, "stage: micro-batch size must be >= 1, got %d",
                      p->micro_batch);
    if (p->seq < 1 || p->seq > m->seq)
        return PP_ERR(PP_ERR_INVALID,
                      "stage: sequence length must be in 1..%d (the model's positions), got %d",
                      m->seq, p->seq);
    PP_TRY(pp_model_check_tp(m, p->tp < 1 ? 1 : p->tp));
    PP_TRY(pp_rt_check_recompute(p->recompute, p->recompute_layers));
    PP_TRY(check_moe(be, p));
    if (p->tp > 1 && (!p->tp_allreduce || p->tp_rank < 0 || p->tp_rank >= p->tp))
        return PP_ERR(PP_ERR_INVALID,
                      "stage: tensor-parallel rank %d of %d needs a rank in 0..%d and an "
                      "all-reduce",
                      p->tp_rank, p->tp, p->tp - 1);
    if (p->tp > 1 && p->sequence_parallel) {
        PP_TRY(pp_model_check_sp(p->seq, p->tp));
        if (!p->tp_allgather || !p->tp_reduce_scatter)
            return PP_ERR(PP_ERR_INVALID,
                          "stage: sequence parallelism needs an all-gather and a reduce-scatter");
    }
    if (p->cp > 1) {
        PP_TRY(pp_model_check_cp(p->seq, p->cp, p->tp > 1 && p->sequence_parallel ? p->tp : 1));
        if (p->cp_rank < 0 || p->cp_rank >= p->cp || !p->cp_send || !p->cp_recv)
            return PP_ERR(PP_ERR_INVALID,
                          "stage: context-parallel rank %d of %d needs a rank in 0..%d, a send "
                          "and a receive",
                          p->cp_rank, p->cp, p->cp - 1);
        if (!be->ops->attention_cp_fwd || !be->ops->attention_cp_fwd_end ||
            !be->ops->attention_cp_bwd)
            return PP_ERR(PP_ERR_UNSUPPORTED,
                          "stage: context parallelism (cp %d): the %s backend has no "
                          "context-parallel attention kernel",
                          p->cp, be->name);
    }
    return PP_OK;
}

static pp_status build_tensors(pp_rt_stage *st)
{
    int n = plan_tensors(st, NULL);
    tensor_plan *plan = pp_calloc(n ? (size_t)n : 1, sizeof *plan);
    st->tensors = pp_calloc(n ? (size_t)n : 1, sizeof *st->tensors);
    st->decay = pp_calloc(n ? (size_t)n : 1, 1);
    st->shard = pp_calloc(n ? (size_t)n : 1, sizeof *st->shard);
    st->names = pp_calloc(n ? (size_t)n : 1, 48);
    if (!plan || !st->tensors || !st->decay || !st->shard || !st->names) {
        free(plan);
        return PP_ERR(PP_ERR_NOMEM, "stage: cannot allocate the table of %d tensors", n);
    }
    plan_tensors(st, plan);
    st->ntensors = n;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += plan[i].n;
    st->nparams = total;
    pp_status rc = PP_OK;
    st->params = pp_backend_alloc(st->be, total * sizeof(float), PP_MEM_WEIGHTS);
    st->grads = st->params && !st->grads_outside
                    ? pp_backend_alloc(st->be, total * sizeof(float), PP_MEM_GRADS)
                    : NULL;
    if (!st->params || (!st->grads && !st->grads_outside))
        rc = pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
    size_t off = 0;
    st->i_wte = st->i_wpe = st->i_lnf = st->i_headwte = -1;
    st->i_layer0 = st->has_embed ? (st->cfg.pos == PP_POS_LEARNED ? 2 : 1) : 0;
    for (int i = 0; rc == PP_OK && i < n; i++) {
        char *nm = st->names + (size_t)i * 48;
        memcpy(nm, plan[i].name, 48);
        st->tensors[i] = (pp_rt_tensor){nm, st->params + off, st->grads ? st->grads + off : NULL,
                                        plan[i].n,
                                        plan[i].shard.kind != SHARD_NONE};
        st->decay[i] = (unsigned char)plan[i].matrix;
        st->shard[i] = plan[i].shard;
        rc = init_tensor(st->be, st->params + off, plan[i].n, plan[i].init,
                         tensor_key(st->seed, plan[i].layer, plan[i].key_name), plan[i].std,
                         &plan[i].shard, plan[i].parts, plan[i].part);
        off += plan[i].n;
        if (!strcmp(nm, "wte"))
            st->i_wte = i;
        else if (!strcmp(nm, "wpe"))
            st->i_wpe = i;
        else if (!strcmp(nm, "lnf.g"))
            st->i_lnf = i;
        else if (!strcmp(nm, "wte.head") || !strcmp(nm, "head.w"))
            st->i_headwte = i;
    }
    if (st->has_head && st->has_embed && !st->cfg.untied)
        st->i_headwte = st->i_wte; /* one tied matrix serves both ends */
    free(plan);
    if (rc == PP_OK && st->grads)
        rc = st->be->ops->zero(st->be->ctx, st->grads, total * sizeof(float));
    return rc;
}

pp_status pp_rt_stage_create(pp_backend *be, const pp_rt_stage_params *p, pp_rt_stage **out)
{
    *out = NULL;
    PP_TRY(check_params(be, p));
    if (!p->mem_alloc != !p->mem_free)
        return PP_ERR(PP_ERR_INVALID, "stage: mem_alloc and mem_free go together (both or none)");
    pp_rt_stage *st = pp_calloc(1, sizeof *st);
    if (!st)
        return PP_ERR(PP_ERR_NOMEM, "stage: cannot allocate its descriptor");
    st->be = be;
    st->cfg = *p->model;
    st->l0 = p->layer_begin;
    st->nl = p->layer_end - p->layer_begin;
    st->has_embed = p->has_embed != 0;
    st->has_head = p->has_head != 0;
    st->B = p->micro_batch;
    /* context parallelism: the stage holds seq / cp tokens of each sequence (stage_cp.c) */
    st->cp = p->cp > 1 ? p->cp : 1;
    st->cpr = st->cp > 1 ? p->cp_rank : 0;
    st->T = p->seq / st->cp;
    st->cp_send = p->cp_send;
    st->cp_recv = p->cp_recv;
    st->cp_release = p->cp_release;
    st->cp_ctx = p->cp_ctx;
    st->seed = p->seed;
    st->tp = p->tp > 1 ? p->tp : 1;
    st->tpr = st->tp > 1 ? p->tp_rank : 0;
    st->sp = st->tp > 1 && p->sequence_parallel ? st->tp : 1;
    st->d = pp_rt_dims_with_cp(pp_rt_dims_of(&st->cfg, (size_t)st->tp, (size_t)st->sp),
                               (size_t)st->cp);
    st->d.rc = p->recompute, st->d.rc_k = (size_t)p->recompute_layers;
    st->ep = p->ep > 1 ? p->ep : 1;
    st->epr = st->ep > 1 ? p->ep_rank : 0;
    st->ep_alltoallv = p->ep_alltoallv;
    st->ep_ctx = p->ep_ctx;
    st->d = pp_rt_dims_with_ep(st->d, (size_t)st->ep);
    st->grads_outside = p->grads_outside;
    st->Hl = (int)st->d.Hl, st->KVl = (int)st->d.KVl, st->Fl = (int)st->d.Fl;
    st->hd = (int)st->d.hd, st->qd = (int)st->d.qd, st->qkv = (int)st->d.qkv;
    st->fc = (int)st->d.fc;
    st->rope = (pp_rope){.theta = st->cfg.rope_theta > 0 ? (float)st->cfg.rope_theta : 10000.0f,
                         .kind = (int)st->cfg.rope_scaling,
                         .factor = st->cfg.rope_factor,
                         .low_freq = st->cfg.rope_low_freq,
                         .high_freq = st->cfg.rope_high_freq,
                         .orig_max = st->cfg.rope_orig_max,
                         .cp = st->cp,
                         .cp_rank = st->cpr};
    {
        tensor_spec spec[PP_LT__COUNT];
        int present[PP_LT__COUNT];
        layer_specs(&st->cfg, spec, present);
        st->lt_n = 0;
        for (int k = 0; k < PP_LT__COUNT; k++)
            st->lt[k] = present[k] ? st->lt_n++ : -1;
    }
    st->tp_allreduce = p->tp_allreduce;
    st->tp_ctx = p->tp_ctx;
    {
        size_t v0, nv;
        pp_rt_vocab_range(st->d.V, (size_t)st->tp, (size_t)st->tpr, &v0, &nv);
        st->v0 = (int)v0, st->nv = (int)nv, st->Vl = (int)st->d.Vl;
    }
    st->mem_alloc = p->mem_alloc;
    st->mem_free = p->mem_free;
    st->mem_ctx = p->mem_ctx;
    st->Nl = st->B * st->T / st->sp;
    st->tp_allgather = p->tp_allgather;
    st->tp_reduce_scatter = p->tp_reduce_scatter;
    st->slot_bytes = pp_rt_size_act_slot_bytes(&st->d, (size_t)st->B, (size_t)st->T,
                                               (size_t)st->nl, st->has_embed, st->has_head);
    st->held_bytes = pp_rt_size_wheld_bytes(&st->d, (size_t)st->B * st->T, (size_t)st->nl);
    pp_status rc = build_tensors(st);
    if (rc != PP_OK) {
        pp_rt_stage_destroy(st);
        return pp_err_trace(rc, __FILE__, __LINE__);
    }
    *out = st;
    return PP_OK;
}

void pp_rt_stage_destroy(pp_rt_stage *st)
{
    if (!st)
        return;
    while (st->nslots > 0)
        pp_stage_slot_release(st, st->nslots - 1);
    free(st->slots);
    size_t pb = st->nparams * sizeof(float);
    pp_backend_free(st->be, st->opt, 2 * pb, PP_MEM_OPTIM);
    if (st->grads)
        pp_backend_free(st->be, st->grads, pb, PP_MEM_GRADS);
    pp_backend_free(st->be, st->params, pb, PP_MEM_WEIGHTS);
    free(st->tensors);
    free(st->decay);
    free(st->shard);
    free(st->names);
    free(st);
}

double pp_rt_stage_take_aux_loss(pp_rt_stage *st)
{
    double a = st->aux_loss;
    st->aux_loss = 0;
    return a;
}

int pp_rt_tensor_is_expert(const char *name)
{
    return strstr(name, ".moe.experts.") != NULL;
}

size_t pp_rt_stage_io_bytes(const pp_rt_stage *st)
{
    return pp_rt_size_io_bytes((size_t)st->B * st->T, (size_t)st->cfg.hidden, (size_t)st->sp);
}

size_t pp_rt_stage_act_bytes(const pp_rt_stage *st)
{
    return st->slot_bytes;
}

size_t pp_rt_stage_held_bytes(const pp_rt_stage *st)
{
    return st->held_bytes;
}

pp_rt_tensor *pp_rt_stage_tensors(pp_rt_stage *st, int *n)
{
    *n = st->ntensors;
    return st->tensors;
}

pp_rt_tensor *pp_rt_stage_tensor(pp_rt_stage *st, const char *name)
{
    for (int i = 0; i < st->ntensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0)
            return &st->tensors[i];
    return NULL;
}

size_t pp_rt_stage_global_index(const pp_rt_stage *st, int tensor, size_t i)
{
    return pp_stage_shard_index(&st->shard[tensor], st->tp, st->tpr, i);
}

void pp_rt_stage_zero_grad(pp_rt_stage *st)
{
    if (st->grads)
        st->be->ops->zero(st->be->ctx, st->grads, st->nparams * sizeof(float));
}

void pp_rt_stage_set_grad(pp_rt_stage *st, int tensor, float *g)
{
    st->tensors[tensor].grad = g;
}
