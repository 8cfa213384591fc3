/* stage_fwd.c — forward of one micro-batch through a stage: embedding (first stage), the
 * pre-LayerNorm blocks, final LayerNorm + tied LM head + mean cross-entropy (last stage).
 *
 * Everything backward needs is written straight into the slot's saved activations (allocated
 * here, freed by backward), so the forward needs no other scratch, except with recomputation:
 * a recomputed block's activations that the slot does not keep (all but its input under full
 * recomputation, the probabilities under selective) go to the recompute workspace, reused by
 * the next block (pp_rt_sizes.h, stage_bwd.c recomputes them); the residual adds are fused
 * into the projections (the GEMM accumulates onto a copy of the residual, beta = 1).
 * Block (GPT-2, Radford et al. 2019):  x + attn(ln1(x)) = r;  r + mlp(ln2(r)) = out.
 * With tensor parallelism the block is Megatron-LM's (Shoeybi et al. 2019, fig. 3): see
 * block_fwd_tp; the embedding, the head and the loss are split over the vocabulary (see
 * embed_fwd_vocab, head_fwd_vocab).
 * With sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2) the LayerNorms and residual
 * adds run on the rank's Nl = N/t tokens: g becomes an all-gather of the LayerNorm output
 * before each column-parallel linear, g-bar a reduce-scatter of the row-parallel partial sums
 * after each row-parallel one (the reduce-scatter equals the rank's rows of the all-reduce bit
 * for bit: pp_rt_transport.h); the embedding's partial outputs are reduce-scattered to the
 * rank's rows and the final LayerNorm's output all-gathered for the column-parallel head.
 * Those steps need one (N, C) forward workspace (PP_MEM_WORKSPACE, for the call), which on a
 * last stage with t > 1 also holds the loss's row statistics (pp_rt_size_fwd_ws).
 */
#include <math.h>
#include <stdlib.h>

#include "stage_impl.h"

int pp_stage_tp_fault = PP_TP_DROP_NONE;

/* y(N, out) (=, or += when beta = 1) x(N, in) @ W(out, in)^T + bias (NULL: none) */
static pp_status linear_fwd(pp_backend *be, float *y, const float *x, const float *w,
                            const float *bias, int N, int in, int out, float beta)
{
    PP_TRY(be->ops->gemm(be->ctx, 0, 1, N, out, in, 1.0f, x, in, w, in, beta, y, out));
    if (bias)
        PP_TRY(be->ops->add_bias(be->ctx, y, bias, N, out));
    return PP_OK;
}

/* The block's norm on `rows` rows: LayerNorm (b NULL: without bias; mean and rstd saved) or
 * RMSNorm (rstd saved, mean unused). */
pp_status pp_stage_norm_fwd(pp_rt_stage *st, float *out, float *mean, float *rstd,
                            const float *x, const float *g, const float *b, int rows)
{
    pp_backend *be = st->be;
    int C = st->cfg.hidden;
    float eps = pp_model_eps(&st->cfg);
    if (st->cfg.norm == PP_NORM_RMSNORM)
        return be->ops->rmsnorm_fwd(be->ctx, out, rstd, x, g, rows, C, eps);
    return be->ops->layernorm_fwd(be->ctx, out, mean, rstd, x, g, b, rows, C, eps);
}

/* Attention of the saved qkv (N, qkv) of block l: Qwen3's per-head RMSNorm of q and k first
 * where the model has it (its input and rstd saved in qkx, qkr), then their rotation where the
 * model is rotary (both in place: the slot keeps the normalised, rotated q, k, which the
 * backward reads), then causal attention of the rank's Hl query heads over its KVl KV heads
 * into atty (N, qd). */
static pp_status attention_fwd(pp_rt_stage *st, int l, const pp_layer_acts *a)
{
    pp_backend *be = st->be;
    int N = st->B * st->T;
    if (st->d.qkn)
        PP_TRY(be->ops->headnorm_fwd(be->ctx, a->qkv, a->qkx, a->qkr, PP_ST_W(st, l, PP_LT_QN_G),
                                     PP_ST_W(st, l, PP_LT_KN_G), N, st->Hl, st->KVl, st->hd,
                                     st->qkv, pp_model_eps(&st->cfg)));
    if (st->d.rope)
        PP_TRY(be->ops->rope(be->ctx, a->qkv, N, st->T, st->Hl + st->KVl, st->hd, st->qkv,
                             &st->rope, 1));
    if (st->cp > 1) /* over the context-parallel group's keys (stage_cp.c) */
        return pp_stage_cp_attention_fwd(st, a->qkv, a->atty, a->att);
    return be->ops->attention_fwd(be->ctx, a->atty, a->att, a->qkv, st->B, st->T, st->Hl, st->KVl,
                                  st->hd);
}

/* The MLP's activation: act (N, Fl) = gelu(fch) or silu(gate) * up of fch (N, 2 Fl). */
static pp_status mlp_act_fwd(pp_rt_stage *st, const pp_layer_acts *a)
{
    pp_backend *be = st->be;
    int N = st->B * st->T;
    if (st->cfg.mlp == PP_MLP_SWIGLU)
        return be->ops->swiglu_fwd(be->ctx, a->act, a->fch, N, st->Fl);
    return be->ops->gelu_fwd(be->ctx, a->act, a->fch, (size_t)N * st->Fl);
}

/* A row-parallel linear after tensor-parallel work, then the residual add:
 * y(N, out) = res + g(x(N, in_l) @ W_l(out, in_l)^T) + bias, where g sums the t ranks'
 * partial products (Megatron's g: all-reduce forward, identity backward) before the residual
 * and the bias, which every rank holds whole, are added once. Under sequence parallelism the
 * product goes to fws (N, out) and g-bar's reduce-scatter leaves this rank's Nl rows of the
 * sum in y, to which its rows of the residual res (Nl, out) and the bias are added. */
static pp_status row_parallel_fwd(pp_rt_stage *st, float *y, const float *res, const float *x,
                                  const float *w, const float *bias, int N, int in_l, int out,
                                  float *fws)
{
    pp_backend *be = st->be;
    int drop = pp_stage_tp_fault == PP_TP_DROP_G, rows = N;
    float *prod = st->sp > 1 ? fws : y;
    PP_TRY(be->ops->gemm(be->ctx, 0, 1, N, out, in_l, 1.0f, x, in_l, w, in_l, 0.0f, prod, out));
    if (st->sp > 1) {
        PP_TRY(pp_stage_sp_scatter(st, prod, y, out, drop));
        rows = st->Nl;
    } else if (!drop) {
        PP_TRY(pp_stage_tp_sum(st, y, (size_t)N * out));
    }
    PP_TRY(be->ops->add(be->ctx, y, res, (size_t)rows * out));
    if (bias)
        PP_TRY(be->ops->add_bias(be->ctx, y, bias, rows, out));
    return PP_OK;
}

/* The input of a column-parallel linear: the whole LayerNorm output ln (N, C) as it is, or
 * under sequence parallelism (ln: the rank's Nl rows) its all-gather into fws. */
static pp_status column_input(pp_rt_stage *st, const float *ln, float *fws, const float **in)
{
    *in = ln;
    if (st->sp == 1)
        return PP_OK;
    *in = fws;
    return pp_stage_sp_gather(st, ln, fws, st->cfg.hidden);
}

/* Tensor-parallel block (tp > 1): the column-parallel qkv and fc take the whole LayerNorm
 * output (f: identity forward; under sequence parallelism g's all-gather of it) and produce
 * this rank's heads / MLP columns; the row-parallel projections' partial sums meet in g (or
 * g-bar's reduce-scatter). fws: the forward workspace (sequence parallelism only). The
 * LayerNorms and residual adds run on the rank's Nl rows (N without sequence parallelism). */
static pp_status block_fwd_tp(pp_rt_stage *st, int l, const pp_layer_acts *a, float *out,
                              float *fws)
{
    pp_backend *be = st->be;
    int N = st->B * st->T, Nl = st->Nl, C = st->cfg.hidden;
    const float *in;
#define W(k) PP_ST_W(st, l, k)
    PP_TRY(pp_stage_norm_fwd(st, a->ln1, a->mean1, a->rstd1, a->x, W(PP_LT_LN1_G),
                             W(PP_LT_LN1_B), Nl));
    PP_TRY(column_input(st, a->ln1, fws, &in));
    PP_TRY(linear_fwd(be, a->qkv, in, W(PP_LT_QKV_W), W(PP_LT_QKV_B), N, C, st->qkv, 0.0f));
    PP_TRY(attention_fwd(st, l, a));
    PP_TRY(row_parallel_fwd(st, a->res2, a->x, a->atty, W(PP_LT_PROJ_W), W(PP_LT_PROJ_B), N,
                            st->qd, C, fws));
    PP_TRY(pp_stage_norm_fwd(st, a->ln2, a->mean2, a->rstd2, a->res2, W(PP_LT_LN2_G),
                             W(PP_LT_LN2_B), Nl));
    PP_TRY(column_input(st, a->ln2, fws, &in));
    PP_TRY(linear_fwd(be, a->fch, in, W(PP_LT_FC_W), W(PP_LT_FC_B), N, C, st->fc, 0.0f));
    PP_TRY(mlp_act_fwd(st, a));
    PP_TRY(row_parallel_fwd(st, out, a->res2, a->act, W(PP_LT_FCP_W), W(PP_LT_FCP_B), N, st->Fl,
                            C, fws));
#undef W
    return PP_OK;
}

pp_status pp_stage_block_fwd(pp_rt_stage *st, int l, const pp_layer_acts *a, float *out,
                             float *fws, float *mws)
{
    if (st->tp > 1)
        return block_fwd_tp(st, l, a, out, fws);
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    int N = st->B * st->T, C = st->cfg.hidden, F = st->cfg.ffn;
    size_t nc = (size_t)N * C * sizeof(float);
#define W(k) PP_ST_W(st, l, k)
    PP_TRY(pp_stage_norm_fwd(st, a->ln1, a->mean1, a->rstd1, a->x, W(PP_LT_LN1_G),
                             W(PP_LT_LN1_B), N));
    PP_TRY(linear_fwd(be, a->qkv, a->ln1, W(PP_LT_QKV_W), W(PP_LT_QKV_B), N, C, st->qkv, 0.0f));
    PP_TRY(attention_fwd(st, l, a));
    PP_TRY(o->copy(be->ctx, a->res2, a->x, nc));
    PP_TRY(linear_fwd(be, a->res2, a->atty, W(PP_LT_PROJ_W), W(PP_LT_PROJ_B), N, st->qd, C,
                      1.0f));
    PP_TRY(pp_stage_norm_fwd(st, a->ln2, a->mean2, a->rstd2, a->res2, W(PP_LT_LN2_G),
                             W(PP_LT_LN2_B), N));
    if (st->d.E) { /* a MoE block: its workspace after the forward's others */
        PP_TRY(o->copy(be->ctx, out, a->res2, nc));
        return pp_stage_moe_fwd(st, l, a, out, mws);
    }
    PP_TRY(linear_fwd(be, a->fch, a->ln2, W(PP_LT_FC_W), W(PP_LT_FC_B), N, C, st->fc, 0.0f));
    PP_TRY(mlp_act_fwd(st, a));
    PP_TRY(o->copy(be->ctx, out, a->res2, nc));
    PP_TRY(linear_fwd(be, out, a->act, W(PP_LT_FCP_W), W(PP_LT_FCP_B), N, F, C, 1.0f));
#undef W
    return PP_OK;
}

/* The loss from the per-row sums of exp S and shifted target logits TL, stats (2, N) in the
 * backend's memory: the mean over rows of log S - TL, in double and row order as the CPU's
 * whole-vocabulary xent_fwd. */
static pp_status vocab_loss(pp_rt_stage *st, const float *stats, int N, float *loss)
{
    float *h = malloc((size_t)2 * N * sizeof *h);
    if (!h)
        return PP_ERR(PP_ERR_NOMEM, "stage: cannot hold the loss's %d row statistics", 2 * N);
    pp_status rc = st->be->ops->download(st->be->ctx, h, stats, (size_t)2 * N * sizeof *h);
    double total = 0.0;
    for (int i = 0; rc == PP_OK && i < N; i++)
        total += (double)logf(h[i]) - (double)h[N + i];
    free(h);
    *loss = N > 0 ? (float)(total / N) : 0.0f;
    return rc;
}

/* The vocabulary-parallel head and loss (t > 1; Megatron-LM's column-parallel output layer and
 * vocab_parallel_cross_entropy, megatron/core/tensor_parallel/cross_entropy.py): logits
 * (N, Vl) of the rank's vocabulary rows; each row's maximum over the t ranks (every rank's
 * maxima put in its row of a zeroed (t, N) buffer and all-reduced: a sum that adds zeros, so
 * exact, over the transports' one collective); exp and its sum, and the target's logit on the
 * rank that holds it, all-reduced together (2 N floats); the probabilities normalised in
 * place, which backward turns into the rank's slice of dlogits. */
static pp_status head_fwd_vocab(pp_rt_stage *st, const pp_head_acts *h, const int32_t *targets,
                                float *loss, float *fws)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    int N = st->B * st->T, C = st->cfg.hidden, Vl = st->Vl, t = st->tp;
    float *mx = fws + pp_rt_size_fwd_ws_xent_at(&st->d, (size_t)st->B, (size_t)st->T,
                                                  (size_t)st->nl);
    float *stats = mx + (size_t)t * N;
    PP_TRY(o->gemm(be->ctx, 0, 1, N, Vl, C, 1.0f, h->lnf, C, st->tensors[st->i_headwte].data, C,
                   0.0f, h->probs, Vl));
    PP_TRY(o->zero(be->ctx, mx, (size_t)t * N * sizeof(float)));
    PP_TRY(o->vocab_xent_max(be->ctx, mx + (size_t)st->tpr * N, h->probs, N, Vl, st->nv));
    PP_TRY(pp_stage_tp_sum(st, mx, (size_t)t * N));
    PP_TRY(o->vocab_xent_exp(be->ctx, h->probs, stats, mx, t, targets, N, Vl, st->v0, st->nv));
    if (pp_stage_tp_fault != PP_TP_DROP_VOCAB)
        PP_TRY(pp_stage_tp_sum(st, stats, (size_t)2 * N));
    PP_TRY(o->vocab_xent_norm(be->ctx, h->probs, stats, N, Vl));
    return vocab_loss(st, stats, N, loss);
}

static pp_status head_fwd(pp_rt_stage *st, const pp_head_acts *h, const int32_t *targets,
                          float *loss, float *fws)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    int N = st->B * st->T, C = st->cfg.hidden, V = st->cfg.vocab;
    const pp_rt_tensor *t = st->tensors;
    /* under sequence parallelism: the rank's rows of lnf, then their all-gather in place */
    float *mine = h->lnf + (st->sp > 1 ? (size_t)st->tpr * st->Nl * C : 0);
    PP_TRY(pp_stage_norm_fwd(st, mine, h->meanf, h->rstdf, h->xf, t[st->i_lnf].data,
                             pp_model_bias(&st->cfg, PP_NOBIAS_NORM) ? t[st->i_lnf + 1].data
                                                                     : NULL,
                             st->Nl));
    if (st->sp > 1)
        PP_TRY(pp_stage_sp_gather(st, mine, h->lnf, C));
    if (st->tp > 1) /* the rank's vocabulary rows of the head */
        return head_fwd_vocab(st, h, targets, loss, fws);
    /* logits(N, V) = lnf(N, C) @ head(V, C)^T: the token embedding (tied) or its own */
    PP_TRY(o->gemm(be->ctx, 0, 1, N, V, C, 1.0f, h->lnf, C, t[st->i_headwte].data, C, 0.0f,
                   h->probs, V));
    PP_TRY(o->xent_fwd(be->ctx, h->probs, targets, N, V, loss));
    return PP_OK;
}

static pp_status check_tokens(const int32_t *tok, int n, int vocab, const char *what)
{
    for (int i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= vocab)
            return PP_ERR(PP_ERR_INVALID, "stage: %s[%d] = %d is outside the vocabulary [0, %d)",
                          what, i, (int)tok[i], vocab);
    return PP_OK;
}

static pp_status check_io(const pp_rt_stage *st, int slot, const int32_t *tokens, const float *x_in,
                          const int32_t *targets, float *x_out, float *loss)
{
    if (pp_stage_find_slot(st, slot) >= 0)
        return PP_ERR(PP_ERR_INVALID,
                      "stage: slot %d already holds a forward whose backward has not run", slot);
    if (st->has_embed ? !tokens : !x_in)
        return PP_ERR(PP_ERR_INVALID, "stage: forward needs %s",
                      st->has_embed ? "tokens (it holds the embedding)" : "an input activation");
    if (st->has_head ? (!targets || !loss) : !x_out)
        return PP_ERR(PP_ERR_INVALID, "stage: forward needs %s",
                      st->has_head ? "targets and a loss pointer (it holds the head)"
                                   : "an output buffer");
    int N = st->B * st->T;
    if (tokens && st->has_embed)
        PP_TRY(check_tokens(tokens, N, st->cfg.vocab, "tokens"));
    if (targets && st->has_head)
        PP_TRY(check_tokens(targets, N, st->cfg.vocab, "targets"));
    return PP_OK;
}

/* x(rows, C) += wpe at the positions of the micro-batch's rows [r0, r0 + rows): row n's true
 * position (pp_rope_pos: n % T, or its place in the whole sequence under context parallelism). */
static pp_status add_positions(pp_rt_stage *st, float *x, const float *wpe, int r0, int rows)
{
    int C = st->cfg.hidden;
    for (int r = r0; r < r0 + rows; r++)
        PP_TRY(st->be->ops->add(st->be->ctx, x + (size_t)(r - r0) * C,
                                wpe + (size_t)pp_rope_pos(&st->rope, (size_t)r, st->T) * C,
                                (size_t)C));
    return PP_OK;
}

/* The vocabulary-parallel embedding (t > 1; Megatron-LM's VocabParallelEmbedding): the rows of
 * the rank's tokens, zero for the others, summed over the tensor-parallel ranks (an
 * all-reduce into in, or under sequence parallelism a reduce-scatter from fws of this rank's
 * rows: Megatron's reduce_scatter_to_sequence_parallel_region); each token's row comes from
 * one rank and zeros from the rest, so the sum is the row exactly. Then the position
 * embedding, whole on every rank, onto the rank's rows: bit for bit t = 1's wte + wpe. */
static pp_status embed_fwd_vocab(pp_rt_stage *st, const int32_t *tok_s, float *in, float *fws)
{
    int N = st->B * st->T, C = st->cfg.hidden;
    float *emb = st->sp > 1 ? fws : in;
    PP_TRY(st->be->ops->vocab_embed_fwd(st->be->ctx, emb, tok_s, st->tensors[st->i_wte].data, N,
                                        C, st->v0, st->nv));
    if (st->sp > 1)
        PP_TRY(pp_stage_sp_scatter(st, emb, in, C, 0));
    else
        PP_TRY(pp_stage_tp_sum(st, in, (size_t)N * C));
    if (st->i_wpe < 0) /* rotary models: positions enter in attention */
        return PP_OK;
    return add_positions(st, in, st->tensors[st->i_wpe].data, st->sp > 1 ? st->tpr * st->Nl : 0,
                         st->Nl);
}

static pp_status add_slot(pp_rt_stage *st, int id, void **mem)
{
    size_t cap = pp_grow(&st->slots, (size_t)st->nslots, (size_t)st->cap_slots, sizeof *st->slots, 8);
    if (!cap)
        return PP_ERR(PP_ERR_NOMEM, "stage: cannot grow the table of %d slots", st->cap_slots);
    st->cap_slots = (int)cap;
    PP_TRY(pp_stage_mem_alloc(st, st->slot_bytes, PP_MEM_ACTS, mem));
    st->slots[st->nslots++] = (pp_slot){.id = id, .mem = *mem};
    return PP_OK;
}

static pp_status forward_in_slot(pp_rt_stage *st, void *mem, const int32_t *tokens,
                                 const float *x_in, const int32_t *targets, float *x_out,
                                 float *loss, float *fws, float *rws)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    size_t N = (size_t)st->B * st->T, nc = (size_t)st->Nl * st->cfg.hidden * sizeof(float);
    int32_t *tok_s, *tgt_s;
    pp_stage_slot_views(st, mem, &tok_s, &tgt_s);
    pp_head_acts h;
    pp_stage_head_acts(st, mem, &h);
    pp_layer_acts a;
    /* a MoE block's workspace: after the forward's others */
    float *mws = st->d.E && st->nl > 0
                     ? fws + pp_rt_size_fwd_ws_xent_at(&st->d, (size_t)st->B, (size_t)st->T,
                                                       (size_t)st->nl)
                     : NULL;

    /* Where the stage's input lands: the first block's saved input, else the head's, else
     * straight into the output (a stage without blocks or head). */
    float *in;
    if (st->nl > 0) {
        pp_stage_layer_acts(st, mem, 0, rws, &a);
        in = a.x;
    } else {
        in = st->has_head ? h.xf : x_out;
    }
    if (st->has_embed) {
        PP_TRY(o->upload(be->ctx, tok_s, tokens, N * sizeof(int32_t)));
        const pp_rt_tensor *t = st->tensors;
        if (st->tp > 1)
            PP_TRY(embed_fwd_vocab(st, tok_s, in, fws));
        else if (st->cp > 1) /* the tokens' true positions */
            PP_TRY(pp_stage_cp_embed_fwd(st, in, tok_s));
        else
            PP_TRY(o->encoder_fwd(be->ctx, in, tok_s, t[st->i_wte].data,
                                  st->i_wpe >= 0 ? t[st->i_wpe].data : NULL, st->B, st->T,
                                  st->cfg.hidden));
    } else {
        PP_TRY(o->copy(be->ctx, in, x_in, nc));
    }
    for (int l = 0; l < st->nl; l++) {
        pp_layer_acts next;
        float *out;
        if (l + 1 < st->nl) {
            pp_stage_layer_acts(st, mem, l + 1, rws, &next);
            out = next.x; /* kept in the slot whatever the recomputation */
        } else {
            out = st->has_head ? h.xf : x_out;
        }
        pp_stage_layer_acts(st, mem, l, rws, &a);
        PP_TRY(pp_stage_block_fwd(st, l, &a, out, fws, mws));
    }
    if (st->has_head) {
        PP_TRY(o->upload(be->ctx, tgt_s, targets, N * sizeof(int32_t)));
        PP_TRY(head_fwd(st, &h, tgt_s, loss, fws));
    }
    return PP_OK;
}

pp_status pp_rt_stage_forward(pp_rt_stage *st, int slot, const int32_t *tokens, const float *x_in,
                              const int32_t *targets, float *x_out, float *loss)
{
    PP_TRY(check_io(st, slot, tokens, x_in, targets, x_out, loss));
    void *mem;
    PP_TRY(add_slot(st, slot, &mem));
    size_t N = (size_t)st->B * st->T;
    size_t ws_bytes = pp_rt_size_fwd_ws(&st->d, (size_t)st->B, (size_t)st->T, (size_t)st->nl,
                                        st->has_head);
    void *fws = NULL;
    pp_status rc = ws_bytes ? pp_stage_mem_alloc(st, ws_bytes, PP_MEM_WORKSPACE, &fws) : PP_OK;
    /* the layout of pp_rt_size_fwd_ws: the sequence-parallel (N, C), then the ring's, then the
     * recompute workspace, then (head_fwd_vocab) the vocabulary-parallel loss's statistics */
    st->cp_kv = st->cp > 1 && fws ? (float *)fws + (st->sp > 1 ? N * st->cfg.hidden : 0) : NULL;
    st->cp_ml = st->cp_kv ? st->cp_kv + pp_rt_size_cp_kv_floats(&st->d, N) : NULL;
    st->cp_scratch = st->cp_ml ? st->cp_ml + 2 * pp_rt_size_cp_stats_floats(&st->d, N) : NULL;
    size_t rcf = pp_rt_size_rc_ws_floats(&st->d, (size_t)st->B, (size_t)st->T, (size_t)st->nl);
    float *rws = rcf ? (float *)fws +
                           pp_rt_size_fwd_ws_xent_at(&st->d, (size_t)st->B, (size_t)st->T,
                                                     (size_t)st->nl) -
                           rcf
                     : NULL;
    if (rc == PP_OK)
        rc = forward_in_slot(st, mem, tokens, x_in, targets, x_out, loss, fws, rws);
    st->cp_kv = st->cp_ml = st->cp_scratch = NULL;
    if (fws)
        pp_stage_mem_free(st, fws, ws_bytes, PP_MEM_WORKSPACE);
    if (rc != PP_OK) { /* give the slot back: a failed forward leaves nothing saved */
        st->nslots--;
        pp_stage_mem_free(st, mem, st->slot_bytes, PP_MEM_ACTS);
        return pp_err_trace(rc, __FILE__, __LINE__);
    }
    return PP_OK;
}
