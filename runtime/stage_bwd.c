/* stage_bwd.c — backward of one micro-batch through a stage, accumulating into the parameter
 * gradients and freeing the slot's saved activations.
 *
 * One running buffer dres holds the gradient of the residual stream: it enters a block as
 * d(out), the LayerNorm backwards add into it in place, and it leaves as d(block input). The
 * kernels' scratch (dres, dln, dbig, attention scratch) is one PP_MEM_WORKSPACE allocation made
 * for the call and freed before it returns, so between calls a stage holds only weights,
 * gradients, optimizer state and the saved activations of in-flight micro-batches.
 * Linear layer y = x W^T + b:  dx = dy W,  dW += dy^T x,  db += colsum(dy).
 */
#include <stdlib.h>

#include "stage_impl.h"

typedef struct {
    float *dres;    /* (N, C) gradient of the residual stream */
    float *dln;     /* (N, C) gradient of a LayerNorm output / attention output */
    float *dbig;    /* (N, max(F, 3C)) gradient of the MLP hidden or of qkv */
    float *scratch; /* attention_scratch_bytes */
    size_t bytes;
    void *mem;
} workspace;

static pp_status linear_bwd(pp_backend *be, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, int N, int in, int out)
{
    void *c = be->ctx;
    PP_TRY(be->ops->gemm(c, 0, 0, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in));
    PP_TRY(be->ops->gemm(c, 1, 0, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in));
    PP_TRY(be->ops->bias_grad(c, db, dy, N, out));
    return PP_OK;
}

/* One block's backward. With tensor parallelism (tp > 1; Cl, Fl, Hl are then this rank's
 * share, else C, F, NH and every all-reduce is a no-op): dres, the gradient of the block's
 * output, is whole and the same on every rank (g's backward is the identity), so the
 * row-parallel projections take it as it is and their biases' gradients are whole; each
 * column-parallel linear's input gradient is this rank's part of a sum, completed by f's
 * backward all-reduce before the LayerNorm's backward (so dres stays the same on every rank,
 * and so do the LayerNorms' gradients). */
static pp_status block_bwd(pp_rt_stage *st, int l, const pp_layer_acts *a, workspace *ws)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    int N = st->B * st->T, C = st->cfg.hidden, Cl = st->Cl, Fl = st->Fl;
    size_t nc = (size_t)N * C;
    int f = pp_stage_tp_fault != PP_TP_DROP_F; /* f's all-reduce (tests drop it) */
#define W(k) PP_ST_W(st, l, k)
#define G(k) PP_ST_G(st, l, k)
    /* MLP branch: out = res2 + gelu(ln2(res2) Wfc^T + bfc) Wfp^T + bfp */
    PP_TRY(linear_bwd(be, ws->dbig, G(PP_LT_FCP_W), G(PP_LT_FCP_B), ws->dres, a->gelu,
                      W(PP_LT_FCP_W), N, Fl, C));
    PP_TRY(o->gelu_bwd(be->ctx, ws->dbig, a->fch, ws->dbig, (size_t)N * Fl));
    PP_TRY(linear_bwd(be, ws->dln, G(PP_LT_FC_W), G(PP_LT_FC_B), ws->dbig, a->ln2, W(PP_LT_FC_W), N,
                      C, Fl));
    if (f)
        PP_TRY(pp_stage_tp_sum(st, ws->dln, nc));
    PP_TRY(o->layernorm_bwd(be->ctx, ws->dres, G(PP_LT_LN2_G), G(PP_LT_LN2_B), ws->dln, a->res2,
                            W(PP_LT_LN2_G), a->mean2, a->rstd2, N, C));
    /* Attention branch: res2 = x + attn(ln1(x)) Wproj^T + bproj */
    PP_TRY(linear_bwd(be, ws->dln, G(PP_LT_PROJ_W), G(PP_LT_PROJ_B), ws->dres, a->atty,
                      W(PP_LT_PROJ_W), N, Cl, C));
    PP_TRY(o->attention_bwd(be->ctx, ws->dbig, ws->scratch, ws->dln, a->att, a->qkv, st->B, st->T,
                            Cl, st->Hl));
    PP_TRY(linear_bwd(be, ws->dln, G(PP_LT_QKV_W), G(PP_LT_QKV_B), ws->dbig, a->ln1, W(PP_LT_QKV_W),
                      N, C, 3 * Cl));
    if (f)
        PP_TRY(pp_stage_tp_sum(st, ws->dln, nc));
    PP_TRY(o->layernorm_bwd(be->ctx, ws->dres, G(PP_LT_LN1_G), G(PP_LT_LN1_B), ws->dln, a->x,
                            W(PP_LT_LN1_G), a->mean1, a->rstd1, N, C));
#undef W
#undef G
    return PP_OK;
}

/* d(mean loss)/d(logits) = (p - onehot) / N, times loss_scale; then through the tied head
 * and the final LayerNorm into dres (which it initialises). */
static pp_status head_bwd(pp_rt_stage *st, const pp_head_acts *h, const int32_t *targets,
                          float loss_scale, workspace *ws)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    int N = st->B * st->T, C = st->cfg.hidden, V = st->cfg.vocab;
    const pp_rt_tensor *t = st->tensors;
    PP_TRY(o->xent_bwd(be->ctx, h->probs, targets, N, V, loss_scale / (float)N));
    const float *dlogits = h->probs;
    PP_TRY(o->gemm(be->ctx, 0, 0, N, C, V, 1.0f, dlogits, V, t[st->i_headwte].data, C, 0.0f,
                   ws->dln, C));
    PP_TRY(o->gemm(be->ctx, 1, 0, V, C, N, 1.0f, dlogits, V, h->lnf, C, 1.0f, t[st->i_headwte].grad,
                   C));
    PP_TRY(o->zero(be->ctx, ws->dres, (size_t)N * C * sizeof(float)));
    PP_TRY(o->layernorm_bwd(be->ctx, ws->dres, t[st->i_lnf].grad, t[st->i_lnf + 1].grad, ws->dln,
                            h->xf, t[st->i_lnf].data, h->meanf, h->rstdf, N, C));
    return PP_OK;
}

static pp_status workspace_alloc(pp_rt_stage *st, workspace *ws)
{
    size_t N = (size_t)st->B * st->T, C = (size_t)st->cfg.hidden, F = (size_t)st->cfg.ffn;
    size_t t = (size_t)st->tp;
    size_t big = st->nl > 0 ? N * ((F > 3 * C ? F : 3 * C) / t) : 0;
    size_t scratch = st->nl > 0 ? st->be->ops->attention_scratch_bytes(st->be->ctx, st->B, st->T,
                                                                       st->Cl, st->Hl)
                                : 0;
    ws->bytes = pp_rt_size_bwd_ws(N, C, F, (size_t)st->nl, scratch, t); /* pp_rt_sizes.h */
    PP_TRY(pp_stage_mem_alloc(st, ws->bytes, PP_MEM_WORKSPACE, &ws->mem));
    ws->dres = ws->mem;
    ws->dln = ws->dres + N * C;
    ws->dbig = ws->dln + N * C;
    ws->scratch = ws->dbig + big;
    return PP_OK;
}

static pp_status backward_slot(pp_rt_stage *st, void *mem, const float *dx_out, float *dx_in,
                               float loss_scale, workspace *ws)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    size_t nc = (size_t)st->B * st->T * st->cfg.hidden * sizeof(float);
    int32_t *tok_s, *tgt_s;
    pp_stage_slot_views(st, mem, &tok_s, &tgt_s);
    if (st->has_head) {
        pp_head_acts h;
        pp_stage_head_acts(st, mem, &h);
        PP_TRY(head_bwd(st, &h, tgt_s, loss_scale, ws));
    } else {
        PP_TRY(o->copy(be->ctx, ws->dres, dx_out, nc));
    }
    for (int l = st->nl - 1; l >= 0; l--) {
        pp_layer_acts a;
        pp_stage_layer_acts(st, mem, l, &a);
        PP_TRY(block_bwd(st, l, &a, ws));
    }
    if (st->has_embed) {
        const pp_rt_tensor *t = st->tensors;
        PP_TRY(o->encoder_bwd(be->ctx, t[st->i_wte].grad, t[st->i_wpe].grad, ws->dres, tok_s, st->B,
                              st->T, st->cfg.hidden));
    } else {
        PP_TRY(o->copy(be->ctx, dx_in, ws->dres, nc));
    }
    return PP_OK;
}

pp_status pp_rt_stage_backward(pp_rt_stage *st, int slot, const float *dx_out, float *dx_in,
                               float loss_scale)
{
    int i = pp_stage_find_slot(st, slot);
    if (i < 0)
        return PP_ERR(PP_ERR_INVALID, "stage: backward of slot %d, which holds no forward", slot);
    if (!st->has_head && !dx_out)
        return PP_ERR(PP_ERR_INVALID, "stage: backward needs the gradient of the output");
    if (!st->has_embed && !dx_in)
        return PP_ERR(PP_ERR_INVALID, "stage: backward needs a buffer for the input gradient");
    workspace ws = {0};
    PP_TRY(workspace_alloc(st, &ws));
    void *mem = st->slots[i].mem;
    pp_status rc = backward_slot(st, mem, dx_out, dx_in, loss_scale, &ws);
    pp_stage_mem_free(st, ws.mem, ws.bytes, PP_MEM_WORKSPACE);
    /* The slot is released even after a failure: its activations are consumed either way. */
    pp_stage_mem_free(st, mem, st->slot_bytes, PP_MEM_ACTS);
    st->slots[i] = st->slots[--st->nslots];
    if (rc != PP_OK)
        return pp_err_trace(rc, __FILE__, __LINE__);
    return PP_OK;
}
