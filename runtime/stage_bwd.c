/* stage_bwd.c — backward of one micro-batch through a stage, accumulating into the parameter
 * gradients and freeing the slot's saved activations.
 *
 * One running buffer dres holds the gradient of the residual stream: it enters a block as
 * d(out), the LayerNorm backwards add into it in place, and it leaves as d(block input). The
 * kernels' scratch (dres, dln, dbig, attention scratch) is one PP_MEM_WORKSPACE allocation made
 * for the call and freed before it returns, so between calls a stage holds only weights,
 * gradients, optimizer state and the saved activations of in-flight micro-batches.
 * Linear layer y = x W^T + b:  dx = dy W,  dW += dy^T x,  db += colsum(dy).
 *
 * Sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2): dres and dln hold the rank's Nl
 * rows; before each row-parallel linear dres is all-gathered into dfull (g-bar's backward), so
 * the row-parallel biases' gradients come whole from it; each column-parallel linear's partial
 * input gradient goes to dfull and is reduce-scattered into dln (g's backward), and its weight
 * gradient takes the LayerNorm output all-gathered again into gath (as Megatron re-gathers
 * rather than saving it). The LayerNorms' gradients of a micro-batch are partial (the rank's
 * tokens only): they go to lng and are all-reduced over the tensor-parallel ranks at the end
 * of the backward, then added (Megatron all-reduces them once per step, in
 * finalize_model_grads; once per backward keeps it inside the stage: 4 C floats per block).
 *
 * Split backward (zero-bubble schedules, Qi et al., "Zero Bubble Pipeline Parallelism", ICLR
 * 2024): I is the same walk with the weight-gradient GEMMs of every linear and of the head
 * recorded instead of run (wgrad: dy and x are copied into the slot's held-for-W buffer unless
 * they already lie in the slot: x does except the all-gathered LayerNorm outputs of sequence
 * parallelism); W runs the records and frees the slot. What stays in I: the LayerNorms' and the
 * embedding's weight gradients (element-wise, computed with their input gradients by the same
 * kernels; under sequence parallelism their all-reduce too). B is the fused walk, unchanged.
 */
#include <stdint.h>
#include <stdlib.h>

#include "stage_impl.h"

/* An I in progress on this thread: where wgrad records instead of computing. A stage runs on
 * one thread at a time (its rank's), so the recorder is the calling thread's; NULL outside
 * pp_rt_stage_backward_input, so B and every other caller compute as before. */
typedef struct {
    pp_rt_stage *st;
    pp_slot *slot;
    size_t used; /* bytes of slot->held filled */
} wgrad_recorder;
static _Thread_local wgrad_recorder *deferring;

/* Weight gradients an I records: a block's four linears (qkv, proj, fc, fc proj), the head. */
static int wgrads_of(const pp_rt_stage *st)
{
    return 4 * st->nl + st->has_head;
}

static int in_slot(const pp_rt_stage *st, const pp_slot *sl, const void *p)
{
    uintptr_t a = (uintptr_t)p, m = (uintptr_t)sl->mem;
    return a >= m && a < m + st->slot_bytes;
}

static pp_status wgrad_run(pp_backend *be, const pp_wgrad *g)
{
    PP_TRY(be->ops->gemm(be->ctx, 1, 0, g->out, g->in, g->N, 1.0f, g->dy, g->out, g->x, g->in, 1.0f,
                         g->dw, g->in));
    if (g->db)
        PP_TRY(be->ops->bias_grad(be->ctx, g->db, g->dy, g->N, g->out));
    return PP_OK;
}

/* *p (n floats) kept until W: where it is if the slot holds it, else copied into the held
 * buffer (*p then points there). */
static pp_status hold(pp_backend *be, wgrad_recorder *r, const float **p, size_t n)
{
    if (in_slot(r->st, r->slot, *p))
        return PP_OK;
    size_t bytes = n * sizeof(float);
    if (r->used + bytes > r->st->held_bytes)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "stage: split backward holds more than the %zu bytes pp_rt_size_wheld_bytes "
                      "gives",
                      r->st->held_bytes);
    float *dst = (float *)((char *)r->slot->held + r->used);
    PP_TRY(be->ops->copy(be->ctx, dst, *p, bytes));
    r->used += bytes;
    *p = dst;
    return PP_OK;
}

/* Keeps what W needs of one weight gradient: dy and x, each where the slot holds it or copied
 * into the held buffer. */
static pp_status wgrad_record(pp_backend *be, wgrad_recorder *r, const pp_wgrad *g)
{
    pp_rt_stage *st = r->st;
    pp_slot *sl = r->slot;
    if (sl->nwg >= wgrads_of(st))
        return PP_ERR(PP_ERR_UNSUPPORTED, "stage: split backward: more than %d weight gradients",
                      wgrads_of(st));
    pp_wgrad k = *g;
    PP_TRY(hold(be, r, &k.dy, (size_t)g->N * g->out));
    PP_TRY(hold(be, r, &k.x, (size_t)g->N * g->in));
    sl->wg[sl->nwg++] = k;
    return PP_OK;
}

/* dw += dy^T x and db += colsum(dy) now (B), or recorded for W during an I. */
static pp_status wgrad(pp_backend *be, float *dw, float *db, const float *dy, const float *x, int N,
                       int in, int out)
{
    pp_wgrad g = {.dw = dw, .db = db, .dy = dy, .x = x, .N = N, .in = in, .out = out};
    return deferring ? wgrad_record(be, deferring, &g) : wgrad_run(be, &g);
}

typedef struct {
    float *dres;    /* (Nl, C) gradient of the residual stream */
    float *dln;     /* (Nl, C) gradient of a LayerNorm output, or (N, max(C, qd)) of the
                       attention output (pp_rt_size_datt_cols) */
    float *dbig;    /* (N, max(F, 3C)) gradient of the MLP hidden or of qkv */
    float *scratch; /* attention_scratch_bytes */
    /* sequence parallelism only (else NULL): */
    float *dfull; /* (N, C) all-gathered dres, or a partial sum before its reduce-scatter */
    float *gath;  /* (N, C) an all-gathered LayerNorm output, or (N, qd) d(attention output) */
    float *lng;   /* (nl * 4 + 2) C: this micro-batch's partial LayerNorm gradients */
    /* context parallelism with blocks only (else NULL): the ring's block of K/V gradients
     * (pp_rt_size_cp_kv_floats; its block of K/V is st->cp_kv, right before it) and
     * rowsum(dy y) (pp_rt_size_cp_stats_floats) */
    float *dkv, *dsum;
    float *rc;    /* the recompute workspace (pp_rt_size_rc_ws_floats), NULL without */
    float *qkg;   /* qk_norm with tp > 1 (else NULL): nl * 2 hd, this micro-batch's partial
                     q/k norm gradients (of the rank's heads), all-reduced at its end */
    float *moe;   /* MoE blocks: pp_rt_size_moe_bwd_ws_floats, else NULL */
    float loss_scale;
    size_t bytes;
    void *mem;
} workspace;

/* dx(N, in) (row stride ldx) = dy W, and the weight gradients (wgrad). */
static pp_status linear_bwd(pp_backend *be, float *dx, int ldx, float *dw, float *db,
                            const float *dy, const float *x, const float *w, int N, int in, int out)
{
    void *c = be->ctx;
    PP_TRY(be->ops->gemm(c, 0, 0, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, ldx));
    return wgrad(be, dw, db, dy, x, N, in, out);
}

pp_status pp_stage_norm_bwd(pp_rt_stage *st, float *dx, float *dg, float *db, const float *dout,
                            const float *x, const float *g, const float *mean, const float *rstd,
                            int rows)
{
    pp_backend *be = st->be;
    int C = st->cfg.hidden;
    if (st->cfg.norm == PP_NORM_RMSNORM)
        return be->ops->rmsnorm_bwd(be->ctx, dx, dg, dout, x, g, rstd, rows, C);
    return be->ops->layernorm_bwd(be->ctx, dx, dg, db, dout, x, g, mean, rstd, rows, C);
}

/* The MLP's output projection and activation backward: dy (N, C) of the block's output into
 * dbig = d(fch) (N, fc). GELU: d(act) lands in dbig and gelu_bwd turns it in place. SwiGLU:
 * d(act) (N, Fl) lands in the up half of each row of dbig (row stride 2 Fl), which swiglu_bwd
 * reads before it writes [dgate | dup] over the row. */
static pp_status mlp_bwd(pp_rt_stage *st, int l, const pp_layer_acts *a, const float *dy,
                         float *dbig)
{
    pp_backend *be = st->be;
    int N = st->B * st->T, C = st->cfg.hidden, Fl = st->Fl;
    int swiglu = st->cfg.mlp == PP_MLP_SWIGLU;
    float *dact = swiglu ? dbig + Fl : dbig;
    PP_TRY(linear_bwd(be, dact, st->fc, PP_ST_G(st, l, PP_LT_FCP_W), PP_ST_G(st, l, PP_LT_FCP_B),
                      dy, a->act, PP_ST_W(st, l, PP_LT_FCP_W), N, Fl, C));
    if (swiglu)
        return be->ops->swiglu_bwd(be->ctx, dbig, a->fch, dact, 2 * Fl, N, Fl);
    return be->ops->gelu_bwd(be->ctx, dbig, a->fch, dbig, (size_t)N * Fl);
}

/* Attention backward of block l into dbig = d(qkv) (N, qkv) of the linear's output: through
 * attention, then the rotation's inverse on the q and k parts (rotary models), then the q/k
 * norm's backward (qk_norm; its weights' gradients partial with t > 1: into ws->qkg). */
static pp_status attention_bwd(pp_rt_stage *st, int l, const pp_layer_acts *a,
                               const float *datty, float *dbig, float *scratch,
                               const workspace *ws)
{
    pp_backend *be = st->be;
    if (st->cp > 1) /* over the context-parallel group's keys (stage_cp.c) */
        PP_TRY(pp_stage_cp_attention_bwd(st, a->qkv, a->att, a->atty, datty, dbig, ws->dkv,
                                         ws->dsum, scratch));
    else
        PP_TRY(be->ops->attention_bwd(be->ctx, dbig, scratch, datty, a->att, a->qkv, st->B,
                                      st->T, st->Hl, st->KVl, st->hd));
    if (st->d.rope)
        PP_TRY(be->ops->rope(be->ctx, dbig, st->B * st->T, st->T, st->Hl + st->KVl, st->hd,
                             st->qkv, &st->rope, -1));
    if (!st->d.qkn)
        return PP_OK;
    float *dgq = ws->qkg ? ws->qkg + (size_t)l * st->d.qkn_g : PP_ST_G(st, l, PP_LT_QN_G);
    float *dgk = ws->qkg ? dgq + st->hd : PP_ST_G(st, l, PP_LT_KN_G);
    return be->ops->headnorm_bwd(be->ctx, dbig, dgq, dgk, a->qkx, a->qkr,
                                 PP_ST_W(st, l, PP_LT_QN_G), PP_ST_W(st, l, PP_LT_KN_G),
                                 st->B * st->T, st->Hl, st->KVl, st->hd, st->qkv);
}

/* One block's backward. With tensor parallelism (tp > 1; the widths are then this rank's
 * share, else the whole model's, and every all-reduce is a no-op): dres, the gradient of the
 * block's output, is whole and the same on every rank (g's backward is the identity), so the
 * row-parallel projections take it as it is and their biases' gradients are whole; each
 * column-parallel linear's input gradient is this rank's part of a sum, completed by f's
 * backward all-reduce before the norm's backward (so dres stays the same on every rank,
 * and so do the norms' gradients). Under sequence parallelism see the top of the file. */
static pp_status block_bwd(pp_rt_stage *st, int l, const pp_layer_acts *a, workspace *ws)
{
    pp_backend *be = st->be;
    int N = st->B * st->T, Nl = st->Nl, C = st->cfg.hidden;
    size_t nc = (size_t)N * C, nrm = st->d.norm;
    int f = pp_stage_tp_fault != PP_TP_DROP_F; /* f's all-reduce (tests drop it) */
    int sp = st->sp > 1;
    /* sequence parallelism: the row-parallel linears' dy, the column-parallel ones' x and dx,
     * the attention output's gradient, and where the norms' gradients go */
    float *dy_row = sp ? ws->dfull : ws->dres, *dx_col = sp ? ws->dfull : ws->dln;
    float *datty = sp ? ws->gath : ws->dln;
    const float *ln1 = sp ? ws->gath : a->ln1, *ln2 = sp ? ws->gath : a->ln2;
    float *lng = sp ? ws->lng + (size_t)l * 2 * nrm : NULL;
#define W(k) PP_ST_W(st, l, k)
#define G(k) PP_ST_G(st, l, k)
    /* i: ln1 at 0, ln2 at nrm; the bias (LayerNorm with bias) C after the gain */
#define LNG(k, i) (sp ? lng + (i) : G(k))
#define LNB(k, i) (sp ? (G(k) ? lng + (i) + C : NULL) : G(k))
    /* MLP branch: out = res2 + act(ln2(res2) Wfc^T + bfc) Wfp^T + bfp */
    if (sp)
        PP_TRY(pp_stage_sp_gather(st, ws->dres, ws->dfull, C));
    if (st->d.E) { /* a MoE block (no tensor parallelism: dx_col is dln) */
        PP_TRY(pp_stage_moe_bwd(st, l, a, dy_row, dx_col, ws->dbig, ws->moe, ws->loss_scale));
    } else {
        PP_TRY(mlp_bwd(st, l, a, dy_row, ws->dbig));
        if (sp)
            PP_TRY(pp_stage_sp_gather(st, a->ln2, ws->gath, C));
        PP_TRY(linear_bwd(be, dx_col, C, G(PP_LT_FC_W), G(PP_LT_FC_B), ws->dbig, ln2,
                          W(PP_LT_FC_W), N, C, st->fc));
    }
    if (sp)
        PP_TRY(pp_stage_sp_scatter(st, ws->dfull, ws->dln, C, !f));
    else if (f)
        PP_TRY(pp_stage_tp_sum(st, ws->dln, nc));
    PP_TRY(pp_stage_norm_bwd(st, ws->dres, LNG(PP_LT_LN2_G, nrm), LNB(PP_LT_LN2_B, nrm), ws->dln,
                             a->res2, W(PP_LT_LN2_G), a->mean2, a->rstd2, Nl));
    /* Attention branch: res2 = x + attn(ln1(x)) Wproj^T + bproj */
    if (sp)
        PP_TRY(pp_stage_sp_gather(st, ws->dres, ws->dfull, C));
    PP_TRY(linear_bwd(be, datty, st->qd, G(PP_LT_PROJ_W), G(PP_LT_PROJ_B), dy_row, a->atty,
                      W(PP_LT_PROJ_W), N, st->qd, C));
    PP_TRY(attention_bwd(st, l, a, datty, ws->dbig, ws->scratch, ws));
    if (sp) /* datty is consumed: gath takes ln1 */
        PP_TRY(pp_stage_sp_gather(st, a->ln1, ws->gath, C));
    PP_TRY(linear_bwd(be, dx_col, C, G(PP_LT_QKV_W), G(PP_LT_QKV_B), ws->dbig, ln1,
                      W(PP_LT_QKV_W), N, C, st->qkv));
    if (sp)
        PP_TRY(pp_stage_sp_scatter(st, ws->dfull, ws->dln, C, !f));
    else if (f)
        PP_TRY(pp_stage_tp_sum(st, ws->dln, nc));
    PP_TRY(pp_stage_norm_bwd(st, ws->dres, LNG(PP_LT_LN1_G, 0), LNB(PP_LT_LN1_B, 0), ws->dln,
                             a->x, W(PP_LT_LN1_G), a->mean1, a->rstd1, Nl));
#undef W
#undef G
#undef LNG
#undef LNB
    return PP_OK;
}

/* d(mean loss)/d(logits) = (p - onehot) / N, times loss_scale; then through the head (the
 * rank's vocabulary rows with t > 1) and the final LayerNorm into dres (which it
 * initialises). With t > 1 the head is column-parallel (Megatron-LM's output layer): each
 * rank's dlogits slice gives a partial d(lnf), summed over the ranks (f's backward
 * all-reduce; under sequence parallelism the reduce-scatter that is the backward of the
 * all-gather before the head, leaving the rank's rows). */
static pp_status head_bwd(pp_rt_stage *st, const pp_head_acts *h, const int32_t *targets,
                          float loss_scale, workspace *ws)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    int N = st->B * st->T, C = st->cfg.hidden, V = st->tp > 1 ? st->Vl : st->cfg.vocab;
    const pp_rt_tensor *t = st->tensors;
    if (st->tp > 1)
        PP_TRY(o->vocab_xent_bwd(be->ctx, h->probs, targets, N, V, st->v0, loss_scale / (float)N));
    else
        PP_TRY(o->xent_bwd(be->ctx, h->probs, targets, N, V, loss_scale / (float)N));
    const float *dlogits = h->probs;
    int sp = st->sp > 1;
    float *dlnf = sp ? ws->dfull : ws->dln;
    PP_TRY(o->gemm(be->ctx, 0, 0, N, C, V, 1.0f, dlogits, V, t[st->i_headwte].data, C, 0.0f,
                   dlnf, C));
    PP_TRY(wgrad(be, t[st->i_headwte].grad, NULL, dlogits, h->lnf, N, C, V));
    if (sp)
        PP_TRY(pp_stage_sp_scatter(st, ws->dfull, ws->dln, C, 0));
    else
        PP_TRY(pp_stage_tp_sum(st, ws->dln, (size_t)N * C));
    PP_TRY(o->zero(be->ctx, ws->dres, (size_t)st->Nl * C * sizeof(float)));
    float *lng = sp ? ws->lng + (size_t)st->nl * 2 * st->d.norm : NULL;
    int nb = pp_model_bias(&st->cfg, PP_NOBIAS_NORM);
    PP_TRY(pp_stage_norm_bwd(st, ws->dres, sp ? lng : t[st->i_lnf].grad,
                             !nb ? NULL : sp ? lng + C : t[st->i_lnf + 1].grad,
                             ws->dln, h->xf,
                             t[st->i_lnf].data, h->meanf, h->rstdf, st->Nl));
    return PP_OK;
}

/* Recomputation (pp_rt_sizes.h) of block l at the start of its backward, into the recompute
 * workspace, from what the slot kept, with the same kernels, weights and order as the forward
 * (and, with tensor parallelism, the same collectives on every rank), so the recomputed floats
 * are the forward's bit for bit. Full: the block's forward from its kept input; its output,
 * which the next block's kept input already holds, lands in the workspace's unused input place
 * (a->x is the slot's); under sequence parallelism the forward's (N, C) workspace is dfull,
 * free between blocks. Selective: the probabilities from the kept (rotated) q, k, v; the
 * attention output it writes beside them is the slot's atty again, not needed. Under context
 * parallelism both rerun the ring forward (stage_cp.c), its K/V exchange included, on every
 * cp rank of the group at the same point of the schedule, so the ring's messages pair up as
 * in the forward. With split
 * backward, what W takes of a full recomputation is copied by I into what it holds for W
 * (pp_rt_size_wheld_bytes); the workspace ends with I. */
static pp_status recompute(pp_rt_stage *st, int l, const pp_layer_acts *a, workspace *ws)
{
    pp_backend *be = st->be;
    switch (pp_stage_rc_of(st, l)) {
    case PP_RT_RC_FULL: {
        /* a MoE block's rerun: its forward workspace in the backward's (not yet in use), its
         * load-balancing loss not counted again (the forward's is the step's) */
        double aux = st->aux_loss;
        pp_status e = pp_stage_block_fwd(st, l, a, ws->rc, st->sp > 1 ? ws->dfull : NULL,
                                         ws->moe);
        st->aux_loss = aux;
        return e;
    }
    case PP_RT_RC_SELECTIVE: {
        float *atty = ws->rc + pp_rt_size_att_floats(&st->d, (size_t)st->B, (size_t)st->T);
        if (st->cp > 1) /* the ring again: the K/V blocks of the whole cp group */
            return pp_stage_cp_attention_fwd(st, a->qkv, atty, a->att);
        return be->ops->attention_fwd(be->ctx, atty, a->att, a->qkv, st->B, st->T, st->Hl, st->KVl,
                                      st->hd);
    }
    default:
        return PP_OK;
    }
}

static pp_status workspace_alloc(pp_rt_stage *st, workspace *ws)
{
    size_t N = (size_t)st->B * st->T, C = (size_t)st->cfg.hidden;
    size_t Nl = (size_t)st->Nl, nl = (size_t)st->nl, nrm = st->d.norm;
    size_t big = st->nl > 0 ? N * (st->d.fc > st->d.qkv ? st->d.fc : st->d.qkv) : 0;
    size_t scratch = st->nl == 0  ? 0
                     : st->cp > 1 ? pp_rt_size_attn_scratch_cp((size_t)st->T)
                                  : st->be->ops->attention_scratch_bytes(st->be->ctx, st->B, st->T,
                                                                         st->qd, st->Hl);
    ws->bytes = pp_rt_size_bwd_ws(&st->d, (size_t)st->B, (size_t)st->T, nl, st->has_head,
                                  scratch); /* pp_rt_sizes.h */
    PP_TRY(pp_stage_mem_alloc(st, ws->bytes, PP_MEM_WORKSPACE, &ws->mem));
    size_t ac = pp_rt_size_datt_cols(&st->d, nl); /* the attention output's gradient */
    ws->dres = ws->mem;
    ws->dln = ws->dres + Nl * C;
    ws->dbig = ws->dln + Nl * (st->sp > 1 ? C : ac);
    float *p = ws->dbig + big;
    if (st->sp > 1) { /* the layout of pp_rt_size_bwd_ws: dfull, gath (blocks), lng */
        ws->dfull = p, p += N * C;
        ws->gath = nl > 0 ? p : NULL, p += nl > 0 ? N * ac : 0;
        ws->lng = p, p += nl * 2 * nrm + (st->has_head ? nrm : 0);
    }
    if (st->cp > 1 && nl > 0) { /* then the ring's blocks and statistics */
        size_t kv = pp_rt_size_cp_kv_floats(&st->d, N);
        st->cp_kv = p, p += kv;
        ws->dkv = p, p += kv;
        ws->dsum = p, p += pp_rt_size_cp_stats_floats(&st->d, N);
    }
    size_t moe = nl > 0 ? pp_rt_size_moe_bwd_ws_floats(&st->d, N) : 0; /* then the MoE's */
    ws->moe = moe ? p : NULL, p += moe;
    size_t rc = pp_rt_size_rc_ws_floats(&st->d, (size_t)st->B, (size_t)st->T, nl);
    ws->rc = rc ? p : NULL, p += rc;
    size_t qkg = pp_rt_size_qkn_grads_floats(&st->d, nl);
    ws->qkg = qkg ? p : NULL, p += qkg;
    ws->scratch = p;
    if (st->cp > 1 && nl > 0) {
        /* a recomputation's ring forward (before the block's backward, which zeroes dkv and
         * writes dsum at its first step) keeps its running max and sum in dkv and dsum, 2 N Hl
         * of their N (qkv + Hl) floats, and its block scratch in the attention scratch: the
         * backward's workspace holds it unchanged */
        st->cp_ml = ws->dkv;
        st->cp_scratch = ws->scratch;
    }
    return PP_OK;
}

/* Sequence parallelism: the micro-batch's partial LayerNorm gradients (lng) summed over the
 * tensor-parallel ranks, then added to the gradients (ln1.g, ln1.b and ln2.g, ln2.b are
 * adjacent tensors, as are lnf.g, lnf.b). */
static pp_status ln_grads_reduce(pp_rt_stage *st, workspace *ws)
{
    pp_backend *be = st->be;
    size_t nrm = st->d.norm, n = (size_t)st->nl * 2 * nrm + (st->has_head ? nrm : 0);
    if (n == 0)
        return PP_OK;
    if (pp_stage_tp_fault != PP_TP_DROP_LN)
        PP_TRY(pp_stage_tp_sum(st, ws->lng, n));
    for (int l = 0; l < st->nl; l++) {
        const float *g = ws->lng + (size_t)l * 2 * nrm;
        PP_TRY(be->ops->add(be->ctx, PP_ST_G(st, l, PP_LT_LN1_G), g, nrm));
        PP_TRY(be->ops->add(be->ctx, PP_ST_G(st, l, PP_LT_LN2_G), g + nrm, nrm));
    }
    if (st->has_head)
        PP_TRY(be->ops->add(be->ctx, st->tensors[st->i_lnf].grad, ws->lng + (size_t)st->nl * 2 * nrm,
                            nrm));
    return PP_OK;
}

/* Tensor parallelism with Qwen3's q/k norms: each rank's gradients of the two norm weights,
 * whole on every rank, are of its own heads only; their sum over the ranks is the gradient
 * (the rank's partial sums in qkg, summed, then added: q_norm's and k_norm's are adjacent
 * tensors, as in qkg). */
static pp_status qkn_grads_reduce(pp_rt_stage *st, workspace *ws)
{
    pp_backend *be = st->be;
    size_t g = st->d.qkn_g;
    if (pp_stage_tp_fault != PP_TP_DROP_QKN)
        PP_TRY(pp_stage_tp_sum(st, ws->qkg, (size_t)st->nl * g));
    for (int l = 0; l < st->nl; l++) {
        PP_TRY(be->ops->add(be->ctx, PP_ST_G(st, l, PP_LT_QN_G), ws->qkg + (size_t)l * g,
                            g / 2));
        PP_TRY(be->ops->add(be->ctx, PP_ST_G(st, l, PP_LT_KN_G), ws->qkg + (size_t)l * g + g / 2,
                            g / 2));
    }
    return PP_OK;
}

/* The vocabulary-parallel embedding's backward (t > 1): the forward's all-reduce has the
 * identity as its backward, so demb (N, C), whole and the same on every rank, goes to the rows
 * of the rank's tokens; the position embedding, whole on every rank, takes the sum over the
 * batch rows (in row order, as encoder_bwd). */
static pp_status embed_bwd_vocab(pp_rt_stage *st, const float *demb, const int32_t *tok)
{
    pp_backend *be = st->be;
    int T = st->T, C = st->cfg.hidden;
    PP_TRY(be->ops->vocab_embed_bwd(be->ctx, st->tensors[st->i_wte].grad, demb, tok, st->B * T, C,
                                    st->v0, st->nv));
    for (int r = 0; st->i_wpe >= 0 && r < st->B * T; r++) /* at each row's true position */
        PP_TRY(be->ops->add(be->ctx,
                            st->tensors[st->i_wpe].grad +
                                (size_t)pp_rope_pos(&st->rope, (size_t)r, T) * C,
                            demb + (size_t)r * C, (size_t)C));
    return PP_OK;
}

static pp_status backward_slot(pp_rt_stage *st, void *mem, const float *dx_out, float *dx_in,
                               float loss_scale, workspace *ws)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    size_t nc = (size_t)st->Nl * st->cfg.hidden * sizeof(float);
    int32_t *tok_s, *tgt_s;
    pp_stage_slot_views(st, mem, &tok_s, &tgt_s);
    if (ws->lng)
        PP_TRY(o->zero(be->ctx, ws->lng,
                       ((size_t)st->nl * 2 + (st->has_head ? 1 : 0)) * st->d.norm *
                           sizeof(float)));
    if (ws->qkg)
        PP_TRY(o->zero(be->ctx, ws->qkg, (size_t)st->nl * st->d.qkn_g * sizeof(float)));
    if (st->has_head) {
        pp_head_acts h;
        pp_stage_head_acts(st, mem, &h);
        PP_TRY(head_bwd(st, &h, tgt_s, loss_scale, ws));
    } else {
        PP_TRY(o->copy(be->ctx, ws->dres, dx_out, nc));
    }
    for (int l = st->nl - 1; l >= 0; l--) {
        pp_layer_acts a;
        pp_stage_layer_acts(st, mem, l, ws->rc, &a);
        PP_TRY(recompute(st, l, &a, ws));
        PP_TRY(block_bwd(st, l, &a, ws));
    }
    if (ws->lng)
        PP_TRY(ln_grads_reduce(st, ws));
    if (ws->qkg)
        PP_TRY(qkn_grads_reduce(st, ws));
    if (st->has_embed) {
        const pp_rt_tensor *t = st->tensors;
        /* under sequence parallelism the embedding takes the whole gradient: the backward of
         * Megatron's reduce-scatter to the sequence-parallel region is an all-gather */
        float *demb = ws->dres;
        if (st->sp > 1) {
            PP_TRY(pp_stage_sp_gather(st, ws->dres, ws->dfull, st->cfg.hidden));
            demb = ws->dfull;
        }
        if (st->tp > 1) /* the rank's vocabulary rows */
            PP_TRY(embed_bwd_vocab(st, demb, tok_s));
        else if (st->cp > 1) /* the tokens' true positions */
            PP_TRY(pp_stage_cp_embed_bwd(st, demb, tok_s));
        else
            PP_TRY(o->encoder_bwd(be->ctx, t[st->i_wte].grad,
                                  st->i_wpe >= 0 ? t[st->i_wpe].grad : NULL, demb, tok_s, st->B,
                                  st->T, st->cfg.hidden));
    } else {
        PP_TRY(o->copy(be->ctx, dx_in, ws->dres, nc));
    }
    return PP_OK;
}

void pp_stage_slot_release(pp_rt_stage *st, int i)
{
    pp_slot *sl = &st->slots[i];
    if (sl->held)
        pp_stage_mem_free(st, sl->held, st->held_bytes, PP_MEM_ACTS);
    free(sl->wg);
    pp_stage_mem_free(st, sl->mem, st->slot_bytes, PP_MEM_ACTS);
    st->slots[i] = st->slots[--st->nslots];
}

/* The checks B and I share; returns the slot's index. */
static pp_status find_for_backward(pp_rt_stage *st, int slot, const float *dx_out, float *dx_in,
                                   const char *what, int *i)
{
    *i = pp_stage_find_slot(st, slot);
    if (*i < 0)
        return PP_ERR(PP_ERR_INVALID, "stage: %s of slot %d, which holds no forward", what, slot);
    if (st->slots[*i].split)
        return PP_ERR(PP_ERR_INVALID,
                      "stage: %s of slot %d, whose input-gradient backward (I) ran already", what,
                      slot);
    if (!st->has_head && !dx_out)
        return PP_ERR(PP_ERR_INVALID, "stage: %s needs the gradient of the output", what);
    if (!st->has_embed && !dx_in)
        return PP_ERR(PP_ERR_INVALID, "stage: %s needs a buffer for the input gradient", what);
    return PP_OK;
}

static pp_status run_backward(pp_rt_stage *st, void *mem, const float *dx_out, float *dx_in,
                              float loss_scale)
{
    workspace ws = {0};
    PP_TRY(workspace_alloc(st, &ws));
    ws.loss_scale = loss_scale;
    pp_status rc = backward_slot(st, mem, dx_out, dx_in, loss_scale, &ws);
    st->cp_kv = st->cp_ml = st->cp_scratch = NULL;
    pp_stage_mem_free(st, ws.mem, ws.bytes, PP_MEM_WORKSPACE);
    return rc;
}

pp_status pp_rt_stage_backward(pp_rt_stage *st, int slot, const float *dx_out, float *dx_in,
                               float loss_scale)
{
    int i;
    PP_TRY(find_for_backward(st, slot, dx_out, dx_in, "backward", &i));
    pp_status rc = run_backward(st, st->slots[i].mem, dx_out, dx_in, loss_scale);
    /* The slot is released even after a failure: its activations are consumed either way. */
    pp_stage_slot_release(st, i);
    if (rc != PP_OK)
        return pp_err_trace(rc, __FILE__, __LINE__);
    return PP_OK;
}

/* I: the held buffer is allocated before the backward's workspace (the memory plan's order,
 * runtime/plan/plan.c) and kept with the slot until W. */
pp_status pp_rt_stage_backward_input(pp_rt_stage *st, int slot, const float *dx_out, float *dx_in,
                                     float loss_scale)
{
    int i;
    PP_TRY(find_for_backward(st, slot, dx_out, dx_in, "input-gradient backward (I)", &i));
    pp_slot *sl = &st->slots[i];
    pp_status rc = PP_OK;
    sl->wg = pp_calloc((size_t)wgrads_of(st) + 1, sizeof *sl->wg);
    if (!sl->wg)
        rc = PP_ERR(PP_ERR_NOMEM, "stage: cannot record the weight gradients of slot %d", slot);
    else if (st->held_bytes)
        rc = pp_stage_mem_alloc(st, st->held_bytes, PP_MEM_ACTS, &sl->held);
    if (rc == PP_OK) {
        wgrad_recorder r = {.st = st, .slot = sl};
        deferring = &r;
        rc = run_backward(st, sl->mem, dx_out, dx_in, loss_scale);
        deferring = NULL;
    }
    if (rc != PP_OK) { /* consumed, as after a failed B */
        pp_stage_slot_release(st, i);
        return pp_err_trace(rc, __FILE__, __LINE__);
    }
    sl->split = 1;
    return PP_OK;
}

pp_status pp_rt_stage_backward_weight(pp_rt_stage *st, int slot)
{
    int i = pp_stage_find_slot(st, slot);
    if (i < 0 || !st->slots[i].split)
        return PP_ERR(PP_ERR_INVALID, "stage: weight-gradient backward (W) of slot %d, %s", slot,
                      i < 0 ? "which holds no forward"
                            : "whose input-gradient backward (I) has not run");
    pp_slot *sl = &st->slots[i];
    pp_status rc = PP_OK;
    for (int k = 0; k < sl->nwg && rc == PP_OK; k++)
        rc = wgrad_run(st->be, &sl->wg[k]);
    pp_stage_slot_release(st, i);
    if (rc != PP_OK)
        return pp_err_trace(rc, __FILE__, __LINE__);
    return PP_OK;
}
