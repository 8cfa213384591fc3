/* stage_moe.c — the mixture-of-experts MLP of a block (pp_moe_cfg), forward and backward, on a
 * host backend (the CPU's: it reads the routing where the activations lie).
 *
 * Router (Shazeer et al. 2017; Mixtral, arXiv:2401.04088, transformers' MixtralSparseMoeBlock):
 * logits z = ln2 Wr^T (N, E), scores s = softmax(z) per row (or sigmoid(z), DeepSeek-V3's),
 * each token's top-k experts by score, ties to the lowest expert index (a strict > scan in
 * index order), weights w = the k scores, renormalised to sum 1 when norm_topk (Mixtral).
 * Dropless dispatch: the N k assignments are sorted by expert (a counting sort, stable in token
 * order), each expert e runs its SwiGLU MLP on its rows y = (silu(x W1g^T) * x W1u^T) W2^T, and
 * out[n] += sum_j w_nj y[n, j] (j in top-k order). Shared experts (every token) run as the
 * dense MLP of width shared_ffn, added too.
 * Load-balancing loss (Switch Transformer, Fedus et al. 2021, eq. 4; transformers'
 * load_balancing_loss_func for Mixtral): per MoE layer aux = coef E sum_e f_e P_e with
 * f_e = (tokens routed to e, over the k slots) / N and P_e = mean_n s_ne; f is a count (no
 * gradient), P carries it. transformers concatenates the layers' logits before the means;
 * this sums the per-layer terms (as Megatron-Core adds each layer's aux loss): equal for one
 * MoE layer. The gradient is scaled by the backward's loss_scale, as the cross-entropy's.
 * Backward: dY[n,j] = w_nj dout[n], dw_nj = dout[n] . y[n,j]; through each expert's MLP
 * (weight gradients computed at once, also inside a split backward's I); the router through
 * the renormalisation, the aux loss and the softmax (or sigmoid).
 * Expert parallelism over ep ranks (Megatron-Core's alltoall token dispatcher,
 * megatron/core/transformer/moe/token_dispatcher.py): rank r holds experts [r El, (r+1) El),
 * El = E / ep. The sorted rows are already grouped by destination rank; an all-to-all of the
 * El per-expert row counts, then one of the rows (dispatch); each rank runs its experts on
 * what it received, reordered expert by expert (the source ranks in order within one); the
 * outputs go back in the arriving order by the reverse all-to-all (combine), and the source
 * rank combines as above. The backward sends the rows' output gradients the dispatch's way
 * and their input gradients the combine's way. ep = 1 is the same path with copies for the
 * all-to-alls, so one code computes both, in the same order per row: the floats of a row
 * do not depend on ep (the expert GEMMs take more rows at once, which can change their
 * blocking: equal within fp32 rounding, not bit for bit).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stage_impl.h"

int pp_stage_moe_fault = PP_MOE_FAULT_NONE;

/* Top-k of one row of scores s (E) into idx / w (k), ties to the lowest index. */
static void topk_row(const float *s, int E, int k, int norm, int32_t *idx, float *w)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++)
                taken |= idx[i] == e;
            if (!taken && (best < 0 || s[e] > s[best]))
                best = e;
        }
        idx[j] = best;
        w[j] = s[best];
    }
    if (pp_stage_moe_fault == PP_MOE_FAULT_INDEX && k > 0) /* a test's wrong dispatch */
        idx[k - 1] = (idx[k - 1] + 1) % E;
    if (norm) {
        float sum = 0.0f;
        for (int j = 0; j < k; j++)
            sum += w[j];
        for (int j = 0; j < k; j++)
            w[j] /= sum;
    }
    if (pp_stage_moe_fault == PP_MOE_FAULT_WEIGHT) /* a test's wrong combine weight */
        w[0] *= 1.5f;
}

static void scores_of(const pp_rt_stage *st, float *s, int N)
{
    int E = (int)st->d.E;
    for (int n = 0; n < N; n++) {
        float *r = s + (size_t)n * E;
        if (st->cfg.moe.router == PP_ROUTER_SIGMOID) {
            for (int e = 0; e < E; e++)
                r[e] = 1.0f / (1.0f + expf(-r[e]));
            continue;
        }
        float mx = r[0], sum = 0.0f;
        for (int e = 1; e < E; e++)
            mx = r[e] > mx ? r[e] : mx;
        for (int e = 0; e < E; e++)
            sum += (r[e] = expf(r[e] - mx));
        for (int e = 0; e < E; e++)
            r[e] /= sum;
    }
}

/* The counting sort of the assignments by expert: off (E + 1), order (sorted row -> n k + j),
 * pos (n k + j -> sorted row). */
static void dispatch(const pp_rt_stage *st, const pp_layer_acts *a, int N)
{
    int E = (int)st->d.E, K = (int)st->d.K, NK = N * K;
    memset(a->moff, 0, (size_t)(E + 1) * sizeof(int32_t));
    for (int i = 0; i < NK; i++)
        a->moff[a->midx[i] + 1]++;
    for (int e = 0; e < E; e++)
        a->moff[e + 1] += a->moff[e];
    for (int i = 0; i < NK; i++) /* moff[e] runs from e's first row to its end */
        a->morder[a->moff[a->midx[i]]++] = i;
    for (int e = E; e > 0; e--)
        a->moff[e] = a->moff[e - 1];
    a->moff[0] = 0;
    for (int r = 0; r < NK; r++)
        a->mpos[a->morder[r]] = r;
}

/* Local expert le's block of an expert tensor (per: floats per expert). */
static const float *expert_w(const pp_rt_stage *st, int l, int k, int le, size_t per)
{
    return PP_ST_W(st, l, k) + (size_t)le * per;
}
static float *expert_g(const pp_rt_stage *st, int l, int k, int le, size_t per)
{
    return PP_ST_G(st, l, k) + (size_t)le * per;
}

/* The all-to-all over the ep group (a copy at ep = 1). */
static pp_status exchange(pp_rt_stage *st, const void *send, const size_t *sb, void *recv,
                          const size_t *rb)
{
    if (st->ep == 1) {
        if (sb[0])
            memcpy(recv, send, sb[0]);
        return PP_OK;
    }
    return st->ep_alltoallv(st->ep_ctx, send, sb, recv, rb);
}

/* Rows (each `width` floats) between the arriving order (rank by rank, within a rank expert
 * by expert) and the experts' order (expert by expert, within an expert rank by rank):
 * to_experts 1 from arrive into experts, 0 back. */
static void reorder(const pp_rt_stage *st, const pp_layer_acts *a, float *arrive, float *experts,
                    size_t width, int to_experts)
{
    int ep = st->ep, El = (int)st->d.E / ep;
    size_t at = 0; /* arriving order's row */
    for (int s = 0; s < ep; s++)
        for (int le = 0; le < El; le++) {
            size_t e0 = 0; /* expert le's first row, then this rank's within it */
            for (int q = 0; q < le * ep + s; q++)
                e0 += (size_t)a->mrcnt[(q % ep) * El + q / ep];
            size_t n = (size_t)a->mrcnt[s * El + le] * width * sizeof(float);
            if (to_experts)
                memcpy(experts + e0 * width, arrive + at * width, n);
            else
                memcpy(arrive + at * width, experts + e0 * width, n);
            at += (size_t)a->mrcnt[s * El + le];
        }
}

/* Rows of local expert le in the experts' order: first row, count. */
static void expert_rows(const pp_rt_stage *st, const pp_layer_acts *a, int le, int *r0, int *m)
{
    int ep = st->ep, El = (int)st->d.E / ep;
    *r0 = *m = 0;
    for (int q = 0; q < le; q++)
        for (int s = 0; s < ep; s++)
            *r0 += a->mrcnt[s * El + q];
    for (int s = 0; s < ep; s++)
        *m += a->mrcnt[s * El + le];
}

/* Byte sizes of the blocks: `out` those this rank sends in the dispatch (the sorted rows of
 * each rank's experts), `in` those it receives (from each rank, for its experts), of rows of
 * `width` floats. */
static void block_bytes(const pp_rt_stage *st, const pp_layer_acts *a, size_t width, size_t *out,
                        size_t *in)
{
    int ep = st->ep, El = (int)st->d.E / ep;
    for (int r = 0; r < ep; r++) {
        out[r] = (size_t)(a->moff[(r + 1) * El] - a->moff[r * El]) * width * sizeof(float);
        size_t rows = 0;
        for (int le = 0; le < El; le++)
            rows += (size_t)a->mrcnt[r * El + le];
        in[r] = rows * width * sizeof(float);
    }
}

/* The dispatch's counts: each rank's rows for each of this rank's experts into a->mrcnt;
 * the total (<= pp_rt_size_moe_rows) into *rows. */
static pp_status exchange_counts(pp_rt_stage *st, const pp_layer_acts *a, int *rows)
{
    int ep = st->ep, E = (int)st->d.E, El = E / ep;
    size_t b[2 * PP_MOE_MAX_EP];
    int32_t *cnt = malloc((size_t)E * sizeof *cnt);
    if (!cnt)
        return PP_ERR(PP_ERR_NOMEM, "stage: cannot count the rows of %d experts", E);
    for (int e = 0; e < E; e++)
        cnt[e] = a->moff[e + 1] - a->moff[e];
    for (int r = 0; r < ep; r++)
        b[r] = b[ep + r] = (size_t)El * sizeof(int32_t);
    pp_status rc = exchange(st, cnt, b, a->mrcnt, b + ep);
    free(cnt);
    PP_TRY(rc);
    *rows = 0;
    for (int i = 0; i < E; i++)
        *rows += a->mrcnt[i];
    size_t R = pp_rt_size_moe_rows(&st->d, (size_t)st->B * st->T);
    if ((size_t)*rows > R)
        return PP_ERR(PP_ERR_CHECK, "stage: the experts of ep rank %d received %d rows, more "
                                    "than the %zu planned",
                      st->epr, *rows, R);
    return PP_OK;
}

float pp_stage_moe_aux(const pp_rt_stage *st, const pp_layer_acts *a)
{
    int N = st->B * st->T, E = (int)st->d.E;
    double aux = 0.0;
    for (int e = 0; e < E; e++) {
        double p = 0.0;
        for (int n = 0; n < N; n++)
            p += a->mscore[(size_t)n * E + e];
        aux += (double)(a->moff[e + 1] - a->moff[e]) / N * (p / N);
    }
    return (float)(st->cfg.moe.aux_coef * E * aux);
}

pp_status pp_stage_moe_fwd(pp_rt_stage *st, int l, const pp_layer_acts *a, float *out, float *xg)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    int N = st->B * st->T, C = st->cfg.hidden, E = (int)st->d.E, K = (int)st->d.K;
    int Fe = (int)st->d.Fe, El = E / st->ep, rows;
    size_t R = pp_rt_size_moe_rows(&st->d, (size_t)N);
    float *arrive = xg + (size_t)N * K * C, *yexp = arrive + R * C;
    if (st->Fl > 0) { /* shared experts: the dense MLP of their width */
        PP_TRY(o->gemm(be->ctx, 0, 1, N, st->fc, C, 1.0f, a->ln2, C, PP_ST_W(st, l, PP_LT_FC_W), C,
                       0.0f, a->fch, st->fc));
        PP_TRY(o->swiglu_fwd(be->ctx, a->act, a->fch, N, st->Fl));
        PP_TRY(o->gemm(be->ctx, 0, 1, N, C, st->Fl, 1.0f, a->act, st->Fl,
                       PP_ST_W(st, l, PP_LT_FCP_W), st->Fl, 1.0f, out, C));
    }
    PP_TRY(o->gemm(be->ctx, 0, 1, N, E, C, 1.0f, a->ln2, C, PP_ST_W(st, l, PP_LT_ROUTER_W), C, 0.0f,
                   a->mscore, E));
    scores_of(st, a->mscore, N);
    for (int n = 0; n < N; n++)
        topk_row(a->mscore + (size_t)n * E, E, K, st->cfg.moe.norm_topk, a->midx + (size_t)n * K,
                 a->mw + (size_t)n * K);
    dispatch(st, a, N);
    for (int r = 0; r < N * K; r++)
        memcpy(xg + (size_t)r * C, a->ln2 + (size_t)(a->morder[r] / K) * C, (size_t)C * 4);
    PP_TRY(exchange_counts(st, a, &rows));
    size_t sb[PP_MOE_MAX_EP], rb[PP_MOE_MAX_EP];
    block_bytes(st, a, (size_t)C, sb, rb);
    PP_TRY(exchange(st, xg, sb, arrive, rb)); /* dispatch */
    reorder(st, a, arrive, a->mxr, (size_t)C, 1);
    for (int le = 0; le < El; le++) {
        int r0, m;
        expert_rows(st, a, le, &r0, &m);
        if (m == 0)
            continue;
        float *fch = a->mfch + (size_t)r0 * 2 * Fe, *act = a->mact + (size_t)r0 * Fe;
        PP_TRY(o->gemm(be->ctx, 0, 1, m, 2 * Fe, C, 1.0f, a->mxr + (size_t)r0 * C, C,
                       expert_w(st, l, PP_LT_EXP_FC_W, le, (size_t)2 * Fe * C), C, 0.0f, fch,
                       2 * Fe));
        PP_TRY(o->swiglu_fwd(be->ctx, act, fch, m, Fe));
        PP_TRY(o->gemm(be->ctx, 0, 1, m, C, Fe, 1.0f, act, Fe,
                       expert_w(st, l, PP_LT_EXP_PROJ_W, le, (size_t)C * Fe), Fe, 0.0f,
                       yexp + (size_t)r0 * C, C));
    }
    reorder(st, a, arrive, yexp, (size_t)C, 0);
    PP_TRY(exchange(st, arrive, rb, a->my, sb)); /* combine: the reverse blocks */
    for (int n = 0; n < N; n++) /* the combine, in top-k order */
        for (int j = 0; j < K; j++) {
            float w = a->mw[(size_t)n * K + j], *on = out + (size_t)n * C;
            const float *y = a->my + (size_t)a->mpos[(size_t)n * K + j] * C;
            for (int c = 0; c < C; c++)
                on[c] += w * y[c];
        }
    st->aux_loss += pp_stage_moe_aux(st, a);
    return PP_OK;
}

/* d(scores) (N, E) from dw (N, K) and the aux loss, then d(logits) in place. */
static void router_bwd(const pp_rt_stage *st, const pp_layer_acts *a, const float *dw, float *ds,
                       float loss_scale, int N)
{
    int E = (int)st->d.E, K = (int)st->d.K;
    memset(ds, 0, (size_t)N * E * sizeof(float));
    for (int n = 0; n < N; n++) {
        const int32_t *idx = a->midx + (size_t)n * K;
        const float *w = a->mw + (size_t)n * K, *g = dw + (size_t)n * K;
        float *d = ds + (size_t)n * E;
        if (st->cfg.moe.norm_topk) { /* w_j = s_j / S: ds_j = (g_j - sum_i g_i w_i) / S */
            float S = 0.0f, gw = 0.0f;
            for (int j = 0; j < K; j++)
                S += a->mscore[(size_t)n * E + idx[j]], gw += g[j] * w[j];
            for (int j = 0; j < K; j++)
                d[idx[j]] += (g[j] - gw) / S;
        } else {
            for (int j = 0; j < K; j++)
                d[idx[j]] += g[j];
        }
    }
    double coef = st->cfg.moe.aux_coef;
    if (coef != 0.0)
        for (int e = 0; e < E; e++) { /* d aux / d s_ne = coef E f_e / N */
            float f = (float)(loss_scale * coef * E * (a->moff[e + 1] - a->moff[e]) /
                              ((double)N * N));
            for (int n = 0; n < N; n++)
                ds[(size_t)n * E + e] += f;
        }
    for (int n = 0; n < N; n++) {
        const float *s = a->mscore + (size_t)n * E;
        float *d = ds + (size_t)n * E;
        if (st->cfg.moe.router == PP_ROUTER_SIGMOID) {
            for (int e = 0; e < E; e++)
                d[e] *= s[e] * (1.0f - s[e]);
            continue;
        }
        float dot = 0.0f;
        for (int e = 0; e < E; e++)
            dot += d[e] * s[e];
        for (int e = 0; e < E; e++)
            d[e] = s[e] * (d[e] - dot);
    }
}

/* The shared experts' backward: dln = their input gradient, their weight gradients. */
static pp_status shared_bwd(pp_rt_stage *st, int l, const pp_layer_acts *a, const float *dout,
                            float *dln, float *dbig)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    int N = st->B * st->T, C = st->cfg.hidden, Fl = st->Fl;
    if (Fl == 0) {
        memset(dln, 0, (size_t)N * C * sizeof(float));
        return PP_OK;
    }
    PP_TRY(o->gemm(be->ctx, 0, 0, N, Fl, C, 1.0f, dout, C, PP_ST_W(st, l, PP_LT_FCP_W), Fl, 0.0f,
                   dbig + Fl, st->fc));
    PP_TRY(o->gemm(be->ctx, 1, 0, C, Fl, N, 1.0f, dout, C, a->act, Fl, 1.0f,
                   PP_ST_G(st, l, PP_LT_FCP_W), Fl));
    PP_TRY(o->swiglu_bwd(be->ctx, dbig, a->fch, dbig + Fl, st->fc, N, Fl));
    PP_TRY(o->gemm(be->ctx, 0, 0, N, C, st->fc, 1.0f, dbig, st->fc, PP_ST_W(st, l, PP_LT_FC_W), C,
                   0.0f, dln, C));
    PP_TRY(o->gemm(be->ctx, 1, 0, st->fc, C, N, 1.0f, dbig, st->fc, a->ln2, C, 1.0f,
                   PP_ST_G(st, l, PP_LT_FC_W), C));
    return PP_OK;
}

/* This rank's experts' backward on their rows (experts' order): dy (rows, C) in, their input
 * gradients out in its place; dfch: R 3 Fe floats. */
static pp_status experts_bwd(pp_rt_stage *st, int l, const pp_layer_acts *a, float *dy,
                             float *dfch)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    int C = st->cfg.hidden, Fe = (int)st->d.Fe, El = (int)st->d.E / st->ep;
    size_t p1 = (size_t)2 * Fe * C, p2 = (size_t)C * Fe;
    for (int le = 0; le < El; le++) {
        int r0, m;
        expert_rows(st, a, le, &r0, &m);
        if (m == 0)
            continue;
        float *df = dfch + (size_t)r0 * 3 * Fe; /* this expert's (m, 2Fe) then (m, Fe) */
        float *da = df + (size_t)m * 2 * Fe, *dye = dy + (size_t)r0 * C;
        const float *x = a->mxr + (size_t)r0 * C, *act = a->mact + (size_t)r0 * Fe;
        const float *fch = a->mfch + (size_t)r0 * 2 * Fe;
        PP_TRY(o->gemm(be->ctx, 0, 0, m, Fe, C, 1.0f, dye, C,
                       expert_w(st, l, PP_LT_EXP_PROJ_W, le, p2), Fe, 0.0f, da, Fe));
        PP_TRY(o->gemm(be->ctx, 1, 0, C, Fe, m, 1.0f, dye, C, act, Fe, 1.0f,
                       expert_g(st, l, PP_LT_EXP_PROJ_W, le, p2), Fe));
        PP_TRY(o->swiglu_bwd(be->ctx, df, fch, da, Fe, m, Fe));
        PP_TRY(o->gemm(be->ctx, 1, 0, 2 * Fe, C, m, 1.0f, df, 2 * Fe, x, C, 1.0f,
                       expert_g(st, l, PP_LT_EXP_FC_W, le, p1), C));
        PP_TRY(o->gemm(be->ctx, 0, 0, m, C, 2 * Fe, 1.0f, df, 2 * Fe,
                       expert_w(st, l, PP_LT_EXP_FC_W, le, p1), C, 0.0f, dye, C));
    }
    return PP_OK;
}

pp_status pp_stage_moe_bwd(pp_rt_stage *st, int l, const pp_layer_acts *a, const float *dout,
                           float *dln, float *dbig, float *mws, float loss_scale)
{
    pp_backend *be = st->be;
    const pp_backend_ops *o = be->ops;
    int N = st->B * st->T, C = st->cfg.hidden, E = (int)st->d.E, K = (int)st->d.K;
    int Fe = (int)st->d.Fe, NK = N * K;
    size_t R = pp_rt_size_moe_rows(&st->d, (size_t)N);
    /* the layout of pp_rt_size_moe_bwd_ws_floats */
    float *dy = mws, *dfch = dy + (size_t)NK * C, *ds = dfch + R * 3 * Fe;
    float *arrive = ds + (size_t)N * E, *dexp = arrive + R * C;
    PP_TRY(shared_bwd(st, l, a, dout, dln, dbig));
    /* the sorted rows' output gradients, and dw (N K) in dfch until the experts need it */
    float *dw = ds; /* N E >= N K */
    for (int r = 0; r < NK; r++) {
        int i = a->morder[r], n = i / K;
        const float *dn = dout + (size_t)n * C, *y = a->my + (size_t)r * C;
        float w = a->mw[i], acc = 0.0f, *d = dy + (size_t)r * C;
        for (int c = 0; c < C; c++)
            d[c] = w * dn[c], acc += dn[c] * y[c];
        dw[i] = acc;
    }
    size_t sb[PP_MOE_MAX_EP], rb[PP_MOE_MAX_EP];
    block_bytes(st, a, (size_t)C, sb, rb);
    PP_TRY(exchange(st, dy, sb, arrive, rb)); /* the dispatch's way */
    reorder(st, a, arrive, dexp, (size_t)C, 1);
    PP_TRY(experts_bwd(st, l, a, dexp, dfch));
    reorder(st, a, arrive, dexp, (size_t)C, 0);
    PP_TRY(exchange(st, arrive, rb, dy, sb)); /* the combine's way: d(rows' inputs) */
    for (int n = 0; n < N; n++) /* gather back, in top-k order */
        for (int j = 0; j < K; j++) {
            const float *d = dy + (size_t)a->mpos[(size_t)n * K + j] * C;
            float *dn = dln + (size_t)n * C;
            for (int c = 0; c < C; c++)
                dn[c] += d[c];
        }
    memcpy(dfch, dw, (size_t)NK * sizeof(float)); /* router_bwd writes ds over dw */
    router_bwd(st, a, dfch, ds, loss_scale, N);
    PP_TRY(o->gemm(be->ctx, 0, 0, N, C, E, 1.0f, ds, E, PP_ST_W(st, l, PP_LT_ROUTER_W), C, 1.0f,
                   dln, C));
    PP_TRY(o->gemm(be->ctx, 1, 0, E, C, N, 1.0f, ds, E, a->ln2, C, 1.0f,
                   PP_ST_G(st, l, PP_LT_ROUTER_W), C));
    return PP_OK;
}
