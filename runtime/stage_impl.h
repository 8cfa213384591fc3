/* stage_impl.h — private to runtime/stage*.c: the layout of a pp_rt_stage (its parameter
 * tensors carved from one allocation, the saved activations of one micro-batch slot carved from
 * another) shared by creation (stage.c), forward (stage_fwd.c), backward (stage_bwd.c) and the
 * optimizer (stage_adamw.c).
 */
#ifndef PP_RT_STAGE_IMPL_H
#define PP_RT_STAGE_IMPL_H

#include "backend.h"
#include "pp_rt_sizes.h"

/* The tensors a transformer block may have, in allocation order; a block holds those its
 * model has (no norm biases for RMSNorm, no linear biases where the model has none: the
 * stage's lt[] says where each lies). Shapes (PyTorch nn.Linear convention, weight (out, in))
 * of the whole tensor, with Q = NH hd, K = NKV hd; a tensor-parallel rank holds rows
 * (column-parallel: qkv, fc) or columns (row-parallel: proj, fcp weights) 1/t of them: */
enum {
    PP_LT_LN1_G,  /* (C) */
    PP_LT_LN1_B,  /* (C) LayerNorm with bias only */
    PP_LT_QKV_W,  /* (Q + 2K, C) [q | k | v] */
    PP_LT_QKV_B,  /* (Q + 2K) */
    PP_LT_QN_G,   /* (hd) Qwen3's q_norm: every query head's RMSNorm weight, whole on every
                     tensor rank (its gradient, of the rank's heads, all-reduced over them) */
    PP_LT_KN_G,   /* (hd) k_norm: every KV head's; follows QN_G */
    PP_LT_PROJ_W, /* (C, Q) residual projection: init std / sqrt(2L) */
    PP_LT_PROJ_B, /* (C) */
    PP_LT_LN2_G,  /* (C) */
    PP_LT_LN2_B,  /* (C) */
    PP_LT_FC_W,   /* (F, C); SwiGLU: (2F, C) [gate | up] */
    PP_LT_FC_B,   /* (F) or (2F) */
    PP_LT_FCP_W,  /* (C, F) residual projection: init std / sqrt(2L) */
    PP_LT_FCP_B,  /* (C) */
    /* a MoE block (pp_rt_dims' E > 0): fc / fcp above are its shared experts' (absent
     * without); E experts of width Fe, each [gate | up] then down, one after another: */
    PP_LT_ROUTER_W,   /* (E, C) */
    PP_LT_EXP_FC_W,   /* (E 2Fe, C) */
    PP_LT_EXP_PROJ_W, /* (E C, Fe): init std / sqrt(2L) */
    PP_LT__COUNT
};

/* Saved activations of one block for one micro-batch (N = B*T rows; qkv, qd, fc, Fl, Hl: this
 * tensor-parallel rank's widths (pp_rt_dims), the whole model's without tensor parallelism;
 * Nl: the rank's N/t rows under sequence parallelism, else N). */
typedef struct {
    float *x;     /* (Nl, C) block input (the residual stream) */
    float *ln1;   /* (Nl, C) */
    float *mean1; /* (Nl) LayerNorm only */
    float *rstd1; /* (Nl) */
    float *qkv;   /* (N, qkv) [q | k | v] of the rank's heads, q and k normalised per head
                     (qk_norm) and rotated (rotary) */
    float *atty;  /* (N, qd) attention output before the projection */
    float *qkx;   /* qk_norm only: (N, qd + kvd) q and k before their norm */
    float *qkr;   /* qk_norm only: (N, Hl + KVl) the rstd of each of their heads */
    float *att;   /* (B, Hl, T, T) probabilities (layout: the backend's attention_fwd) */
    float *res2;  /* (Nl, C) x + attention branch */
    float *ln2;   /* (Nl, C) */
    float *mean2; /* (Nl) */
    float *rstd2; /* (Nl) */
    float *fch;   /* (N, fc) MLP pre-activation ([gate | up] for SwiGLU) */
    float *act;   /* (N, Fl) gelu(fch), or silu(gate) * up */
    /* a MoE block (stage_moe.c, pp_rt_size_moe_act_floats; NK = N K): */
    float *mscore;           /* (N, E) router scores */
    int32_t *midx;           /* (NK) each token's K experts */
    float *mw;               /* (NK) their combine weights */
    int32_t *morder, *mpos;  /* (NK) sorted row -> assignment n K + j, and back */
    int32_t *moff;           /* (E + 1) each expert's first sorted row */
    float *my;               /* (NK, C) the expert outputs of the sorted rows */
    /* the rows this rank's experts took (R = pp_rt_size_moe_rows at most), expert by expert
     * and within an expert by sending rank: inputs, [gate | up], activations */
    float *mxr, *mfch, *mact; /* (R, C), (R, 2Fe), (R, Fe) */
    int32_t *mrcnt;           /* (ep, E / ep): rows of each local expert from each rank */
} pp_layer_acts;

/* Saved activations of the head for one micro-batch. */
typedef struct {
    float *xf;    /* (Nl, C) head input: last block's output */
    float *lnf;   /* (N, C) whole (all-gathered under sequence parallelism) */
    float *meanf; /* (Nl) */
    float *rstdf; /* (Nl) */
    float *probs; /* (N, Vl) softmax over the rank's vocabulary rows (V without tensor
                     parallelism); turned into dlogits in place by backward */
} pp_head_acts;

/* How a tensor-parallel rank's piece of a tensor maps into the whole (rows, cols) tensor
 * (cols 1 for a vector): SHARD_NONE the whole; SHARD_ROWS rows [tpr R/t, (tpr+1) R/t) of it
 * (column-parallel: GELU's fc); SHARD_BLOCKS those rows of each of its row blocks, blk[i]
 * rows each (column-parallel by heads: qkv's [q | k | v], with KV heads for k and v; SwiGLU's
 * [gate | up]); SHARD_COLS columns [tpr K/t, ..) of every row (row-parallel: the
 * projections' weights). */
/* SHARD_VOCAB: vocabulary rows [tpr Vl, (tpr+1) Vl) of the (V, C) embedding or head, Vl =
 * ceil(V/t), those past V being padding (no place in the whole tensor: PP_SHARD_PAD). */
typedef enum { SHARD_NONE, SHARD_ROWS, SHARD_BLOCKS, SHARD_COLS, SHARD_VOCAB } pp_shard_kind;
typedef struct {
    pp_shard_kind kind;
    size_t rows, cols; /* of the whole tensor */
    int nblk;          /* SHARD_BLOCKS: blocks, rows of each (summing to rows) */
    size_t blk[3];
} pp_stage_shard;
/* Index in the whole tensor of element i of tensor-parallel rank tpr's shard (of t). */
size_t pp_stage_shard_index(const pp_stage_shard *sh, int t, int tpr, size_t i);

/* One weight-gradient GEMM that a split backward's I recorded for its W (stage_bwd.c):
 * dw(out, in) += dy^T x, db(out) += colsum(dy) (db NULL: no bias). dy and x point into the
 * slot's saved activations or its held-for-W buffer, both kept until W. */
typedef struct {
    float *dw, *db;
    const float *dy; /* (N, out) */
    const float *x;  /* (N, in) */
    int N, in, out;
} pp_wgrad;

typedef struct {
    int id;    /* the micro-batch the caller named */
    void *mem; /* slot_bytes of PP_MEM_ACTS */
    /* After the slot's I (split backward) until its W: the output gradients of its linears
     * (held_bytes of PP_MEM_ACTS, pp_rt_size_wheld_bytes) and the GEMMs W runs (host). */
    int split; /* 1: I ran, W has not */
    void *held;
    pp_wgrad *wg;
    int nwg;
} pp_slot;

struct pp_rt_stage {
    pp_backend *be;
    pp_model_cfg cfg;
    int l0, nl; /* first global layer, number of layers */
    int has_embed, has_head;
    int B, T;
    uint64_t seed;
    /* tensor parallelism: tp ranks (1: none), this one's index, the all-reduce over them;
     * d: the block's widths on this rank (pp_rt_sizes.h); Hl, KVl, Fl, qd, qkv, fc: its
     * query heads, KV heads, MLP width, q width, qkv width and fc width as ints */
    int tp, tpr;
    pp_rt_dims d;
    int Hl, KVl, Fl, hd, qd, qkv, fc;
    int lt[PP_LT__COUNT]; /* a block tensor's index within its block, -1 when absent */
    int lt_n;             /* tensors per block */
    pp_rope rope;         /* rotary frequencies' parameters (rotary models) */
    pp_status (*tp_allreduce)(void *ctx, float *data, size_t n);
    void *tp_ctx;
    /* vocabulary parallelism (tp > 1): the rank's vocabulary rows [v0, v0 + Vl) of the
     * embedding and head, the first nv of them real, the rest padding (pp_rt_vocab_range) */
    int v0, nv, Vl;
    /* per-micro-batch memory (pp_rt_stage_params.mem_*; NULL: the backend's) */
    pp_status (*mem_alloc)(void *ctx, size_t bytes, pp_mem_category cat, void **out);
    void (*mem_free)(void *ctx, void *p, size_t bytes, pp_mem_category cat);
    void *mem_ctx;
    /* sequence parallelism: sp = tp (else 1) shards of the N = B*T tokens in the LayerNorm and
     * residual regions, this rank's Nl = N/sp rows from row tpr*Nl; the collectives on them */
    int sp, Nl;
    pp_status (*tp_allgather)(void *ctx, const float *part, float *full, size_t n);
    pp_status (*tp_reduce_scatter)(void *ctx, const float *full, float *part, size_t n);
    /* context parallelism (stage_cp.c): cp ranks (1: none), this one's index; T above is then
     * the rank's seq / cp tokens of a sequence (two chunks, rope_freq.h's pp_rope_pos); the
     * ring's send to the next cp rank and receive from the previous one; cp_kv: the call's
     * buffer of one ring block (pp_rt_size_cp_kv_floats), cp_ml the ring forward's running
     * max and sum (two of pp_rt_size_cp_stats_floats), cp_scratch its block scratch
     * (pp_rt_size_attn_scratch_cp): set by the forward, and by a backward for a recomputation's
     * ring forward, for the call's duration */
    int cp, cpr;
    pp_status (*cp_send)(void *ctx, const float *buf, size_t n);
    pp_status (*cp_recv)(void *ctx, float *buf, size_t n);
    pp_status (*cp_release)(void *ctx); /* NULL: none */
    void *cp_ctx;
    float *cp_kv, *cp_ml, *cp_scratch;
    /* expert parallelism (stage_moe.c): ep ranks (1: none), this one's index (it holds the
     * experts [epr E / ep, (epr + 1) E / ep)), the all-to-all over them */
    int ep, epr;
    pp_status (*ep_alltoallv)(void *ctx, const void *send, const size_t *send_bytes, void *recv,
                              const size_t *recv_bytes);
    void *ep_ctx;

    float *params, *grads; /* one allocation each: nparams floats (grads NULL: outside) */
    int grads_outside;     /* pp_rt_stage_params' */
    size_t nparams;
    pp_rt_tensor *tensors; /* ntensors, views into params / grads */
    unsigned char *decay;  /* per tensor: 1 if weight decay applies (2-D matrices) */
    pp_stage_shard *shard; /* per tensor: how this tensor-parallel rank's piece maps */
    char *names;           /* storage of the tensor names */
    int ntensors;
    int i_wte, i_wpe;     /* tensor indices or -1 */
    int i_layer0;         /* index of the first block's first tensor */
    int i_lnf, i_headwte; /* lnf.g (lnf.b follows); the head's embedding ("wte" or "wte.head") */

    size_t slot_bytes; /* saved activations of one micro-batch */
    size_t held_bytes; /* what an I keeps for its W besides the slot (pp_rt_size_wheld_bytes) */
    pp_slot *slots;
    int nslots, cap_slots;

    double aux_loss; /* the MoE load-balancing losses of the forwards since it was read */
    float *opt; /* AdamW m then v: 2 * nparams floats, PP_MEM_OPTIM, NULL until first step */
};

/* Block tensor k (PP_LT_*) of the stage's layer `layer`: its weights / gradient, NULL when the
 * model has no such tensor (a bias it leaves out). */
static inline float *pp_st_w(const struct pp_rt_stage *st, int layer, int k)
{
    return st->lt[k] < 0 ? NULL : st->tensors[st->i_layer0 + layer * st->lt_n + st->lt[k]].data;
}
static inline float *pp_st_g(const struct pp_rt_stage *st, int layer, int k)
{
    return st->lt[k] < 0 ? NULL : st->tensors[st->i_layer0 + layer * st->lt_n + st->lt[k]].grad;
}
#define PP_ST_W(st, layer, k) pp_st_w(st, layer, k)
#define PP_ST_G(st, layer, k) pp_st_g(st, layer, k)

/* Test-only fault injection (tests/test_runtime_tp.c shows that its equivalence test fails
 * without each conjugate operator): PP_TP_DROP_F skips f's backward all-reduce (before the
 * column-parallel linears; under sequence parallelism the backward reduce-scatter there),
 * PP_TP_DROP_G g's forward all-reduce (after the row-parallel ones; under sequence
 * parallelism the forward reduce-scatter there), PP_TP_DROP_LN the all-reduce of the
 * sequence-parallel LayerNorm gradients, PP_TP_DROP_VOCAB the vocabulary-parallel loss's
 * all-reduce of the sums of exp and target logits, PP_TP_DROP_QKN the q/k norms' gradient
 * all-reduce. A dropped reduce-scatter keeps the rank's own slice
 * of its partial sum. 0 in every other use. Read at each forward / backward. */
enum {
    PP_TP_DROP_NONE,
    PP_TP_DROP_F,
    PP_TP_DROP_G,
    PP_TP_DROP_LN,
    PP_TP_DROP_VOCAB,
    PP_TP_DROP_QKN /* the all-reduce of the q/k norms' gradients (qk_norm, t > 1) */
};
extern int pp_stage_tp_fault;

/* All-reduce over the stage's tensor-parallel ranks (nothing when tp == 1). */
static inline pp_status pp_stage_tp_sum(pp_rt_stage *st, float *data, size_t n)
{
    return st->tp > 1 ? st->tp_allreduce(st->tp_ctx, data, n) : PP_OK;
}

/* The stage's per-micro-batch memory: its allocator's, else its backend's. */
static inline pp_status pp_stage_mem_alloc(pp_rt_stage *st, size_t bytes, pp_mem_category cat,
                                           void **out)
{
    if (st->mem_alloc)
        return st->mem_alloc(st->mem_ctx, bytes, cat, out);
    *out = pp_backend_alloc(st->be, bytes, cat);
    return *out ? PP_OK : pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
}
static inline void pp_stage_mem_free(pp_rt_stage *st, void *p, size_t bytes, pp_mem_category cat)
{
    if (st->mem_free)
        st->mem_free(st->mem_ctx, p, bytes, cat);
    else
        pp_backend_free(st->be, p, bytes, cat);
}

/* Sequence parallelism's all-gather: every rank's (Nl, cols) part into full (N, cols) in rank
 * order (part may be full's own slice). */
static inline pp_status pp_stage_sp_gather(pp_rt_stage *st, const float *part, float *full,
                                           int cols)
{
    return st->tp_allgather(st->tp_ctx, part, full, (size_t)st->Nl * cols);
}

/* Its reduce-scatter: part (Nl, cols) = this rank's rows of the sum over the ranks of full
 * (N, cols); drop (a test's fault) keeps this rank's rows of its own full instead. */
static inline pp_status pp_stage_sp_scatter(pp_rt_stage *st, const float *full, float *part,
                                            int cols, int drop)
{
    size_t n = (size_t)st->Nl * cols;
    if (drop)
        return st->be->ops->copy(st->be->ctx, part, full + (size_t)st->tpr * n, n * sizeof(float));
    return st->tp_reduce_scatter(st->tp_ctx, full, part, n);
}

/* The block's norm (LayerNorm or RMSNorm, as the model says) on `rows` rows (stage_fwd.c);
 * b NULL: no bias. Its backward (stage_bwd.c) accumulates into dx, dg and db (NULL: none). */
pp_status pp_stage_norm_fwd(pp_rt_stage *st, float *out, float *mean, float *rstd, const float *x,
                            const float *g, const float *b, int rows);
pp_status pp_stage_norm_bwd(pp_rt_stage *st, float *dx, float *dg, float *db, const float *dout,
                            const float *x, const float *g, const float *mean, const float *rstd,
                            int rows);

/* Context parallelism (stage_cp.c). The embedding of the slot's local tokens tok (B, T) at
 * their true positions into out (B, T, C); its backward into the embeddings' gradients. */
pp_status pp_stage_cp_embed_fwd(pp_rt_stage *st, float *out, const int32_t *tok);
pp_status pp_stage_cp_embed_bwd(pp_rt_stage *st, const float *dout, const int32_t *tok);
/* Ring attention of the rank's (rotated) qkv (N, qkv) over the cp group's keys into atty
 * (N, qd), saving att; in st->cp_kv, cp_ml and cp_scratch (see pp_rt_stage). */
pp_status pp_stage_cp_attention_fwd(pp_rt_stage *st, const float *qkv, float *atty, float *att);
/* Its backward: dqkv (N, qkv) of the rank's rows from datty (N, qd) and the saved output atty;
 * st->cp_kv and dkv: a block each (pp_rt_size_cp_kv_floats), dsum pp_rt_size_cp_stats_floats,
 * scratch pp_rt_size_attn_scratch_cp bytes. */
pp_status pp_stage_cp_attention_bwd(pp_rt_stage *st, const float *qkv, const float *att,
                                    const float *atty, const float *datty, float *dqkv,
                                    float *dkv, float *dsum, float *scratch);

/* The MoE MLP of block l (stage_moe.c): out (N, C, holding the residual) += shared experts
 * + combined routed experts of a->ln2, saving the routing and the experts' activations in a;
 * xg: pp_rt_size_moe_fwd_ws_floats. Adds the block's load-balancing loss to st->aux_loss. */
pp_status pp_stage_moe_fwd(pp_rt_stage *st, int l, const pp_layer_acts *a, float *out,
                           float *xg);
/* Its backward: dln (N, C) = d(ln2) from dout (N, C), the weight gradients accumulated (at
 * once, also in a split backward's I); dbig the dense MLP's (shared experts), mws
 * pp_rt_size_moe_bwd_ws_floats; loss_scale scales the aux loss's gradient. */
pp_status pp_stage_moe_bwd(pp_rt_stage *st, int l, const pp_layer_acts *a, const float *dout,
                           float *dln, float *dbig, float *mws, float loss_scale);
/* The load-balancing loss of the routing saved in a (coef E sum_e f_e P_e). */
float pp_stage_moe_aux(const pp_rt_stage *st, const pp_layer_acts *a);
/* Test-only fault injection (tests/test_runtime_moe.c): a wrong dispatch index (each token's
 * last expert moved to the next one) or a wrong combine weight (the first times 1.5). */
enum { PP_MOE_FAULT_NONE, PP_MOE_FAULT_INDEX, PP_MOE_FAULT_WEIGHT };
/* The most expert-parallel ranks (the executor's replicas are at most 64). */
#define PP_MOE_MAX_EP 64
extern int pp_stage_moe_fault;

/* Views of a slot's memory (stage.c). tokens/targets are NULL when absent. A block's
 * activations lie in the slot, except with recomputation (pp_stage_rc_of) in the recompute
 * workspace rws (pp_rt_size_rc_ws_floats; NULL where the block has none): a fully recomputed
 * block's all but its input x (the slot's), a selectively recomputed one's probabilities. */
void pp_stage_slot_views(const pp_rt_stage *st, void *mem, int32_t **tokens, int32_t **targets);
void pp_stage_layer_acts(const pp_rt_stage *st, void *mem, int layer, float *rws,
                         pp_layer_acts *a);
/* The recomputation of the stage's block `layer` (0 .. nl-1): a PP_RT_RC_*. */
static inline int pp_stage_rc_of(const struct pp_rt_stage *st, int layer)
{
    if (st->d.rc == PP_RT_RC_FULL)
        return (size_t)layer < pp_rt_size_rc_full_layers(&st->d, (size_t)st->nl) ? PP_RT_RC_FULL
                                                                                  : PP_RT_RC_NONE;
    return st->d.rc;
}
/* One block's forward (stage_fwd.c): its activations into a (a->x its input), its output into
 * out; fws the sequence-parallel forward workspace (N, C) or NULL; mws a MoE block's
 * (pp_rt_size_moe_fwd_ws_floats; NULL for a dense one). The backward reruns it for a fully
 * recomputed block (a MoE block's in its backward workspace, which is larger and not yet in
 * use then). */
pp_status pp_stage_block_fwd(pp_rt_stage *st, int l, const pp_layer_acts *a, float *out,
                             float *fws, float *mws);
void pp_stage_head_acts(const pp_rt_stage *st, void *mem, pp_head_acts *h);
/* Index of slot id in st->slots, or -1. */
int pp_stage_find_slot(const pp_rt_stage *st, int id);
/* Frees slot i's saved activations (and what an I held for its W) and removes it from the
 * table (stage_bwd.c). */
void pp_stage_slot_release(pp_rt_stage *st, int i);

#endif
