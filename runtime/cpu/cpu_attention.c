/* cpu_attention.c — causal multi-head self-attention on the CPU, forward and backward, with the
 * matrix products done by OpenBLAS per (batch, head) instead of scalar dot-product loops.
 *
 * Causality is exploited in blocks of PP_ATT_BLOCK rows: a row block [r0, r1) only needs keys
 * [0, r1), so the products cover about half of the T x T square (plus the diagonal blocks).
 * The probabilities att (B, NH, T, T) are saved for backward with zeros above the diagonal
 * inside the diagonal blocks, which lets the backward products read whole blocks without
 * masks; entries right of a row's block are left unwritten (no product ever reads them).
 * It deliberately does not do flash-attention style recomputation: the saved T x T matrix is
 * the memory the tuner's activation model counts (Korthikanti et al. 2022, the 5as/h term).
 *
 *   S = q k^T / sqrt(hs),  A = softmax_causal(S),  y = A v
 *   dA = dy v^T,  dS = A * (dA - rowsum(A * dA)),  dq = dS k / sqrt(hs),
 *   dk = dS^T q / sqrt(hs),  dv = A^T dy
 * Grouped-query attention (Ainslie et al., arXiv:2305.13245): the NH/NKV query heads of a
 * group read one KV head, so its dk and dv are the sums of theirs (the group's first head
 * overwrites them, the others accumulate: beta 1 in the products).
 */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_math.h"
#include "cpu_pool.h"
#include "pp_rt_sizes.h"

/* Row t of the scores: softmax over keys [0, t], zero for keys (t, r1) up to the end of its
 * block. Keys from r1 on are never written nor read (their pages are never even touched). */
static void softmax_causal_row(float *row, int t, int r1)
{
    float mx = pp_row_max(row, t + 1);
    float sum = pp_row_exp_sum(row, t + 1, mx);
    pp_row_scale(row, t + 1, 1.0f / sum);
    if (t + 1 < r1)
        memset(row + t + 1, 0, (size_t)(r1 - t - 1) * sizeof(float));
}

/* Row t of dS from A and dA (in place over dA), scaled; keys (t, r1) zeroed because the dk
 * product reads the diagonal block whole. */
static void softmax_causal_row_bwd(float *restrict ds, const float *restrict a, int t, int r1,
                                   float scale)
{
    int n = t + 1, j = 0;
    float dot = pp_row_dot(a, ds, n);
    for (; j + PP_VW <= n; j += PP_VW)
        for (int k = 0; k < PP_VW; k++)
            ds[j + k] = a[j + k] * (ds[j + k] - dot) * scale;
    for (; j < n; j++)
        ds[j] = a[j] * (ds[j] - dot) * scale;
    if (n < r1)
        memset(ds + n, 0, (size_t)(r1 - n) * sizeof(float));
}

/* Column offsets in a qkv row of W = (NH + 2 NKV) hd floats: q of head h, k and v of its KV
 * head. */
typedef struct {
    int W, hd, g, NH, NKV;
} qkv_layout;

static qkv_layout layout_of(int NH, int NKV, int hd)
{
    return (qkv_layout){(NH + 2 * NKV) * hd, hd, NH / NKV, NH, NKV};
}
static size_t q_col(const qkv_layout *l, int h)
{
    return (size_t)h * l->hd;
}
static size_t k_col(const qkv_layout *l, int h)
{
    return (size_t)(l->NH + h / l->g) * l->hd;
}
static size_t v_col(const qkv_layout *l, int h)
{
    return (size_t)(l->NH + l->NKV + h / l->g) * l->hd;
}

typedef struct {
    void *ctx;
    float *y, *att, *dqkv, *scratch;
    const float *qkv, *dy, *catt;
    int B, T, NH, NKV, hd;
} att_arg;

/* One (batch, head) unit per item: each writes its own probabilities and output columns. */
static void attention_fwd_part(void *v, size_t lo, size_t hi, int part)
{
    const att_arg *a = v;
    const qkv_layout L = layout_of(a->NH, a->NKV, a->hd);
    const int hs = a->hd, C3 = L.W, C = a->NH * a->hd, T = a->T, NH = a->NH;
    const float scale = 1.0f / sqrtf((float)hs);
    (void)part;
    for (size_t u = lo; u < hi; u++) {
        int b = (int)(u / (size_t)NH), h = (int)(u % (size_t)NH);
        const float *row = a->qkv + (size_t)b * T * C3;
        const float *q = row + q_col(&L, h), *k = row + k_col(&L, h), *v = row + v_col(&L, h);
        float *A = a->att + ((size_t)b * NH + h) * T * T;
        float *out = a->y + (size_t)b * T * C + (size_t)h * hs;
        for (int r0 = 0; r0 < T; r0 += PP_ATT_BLOCK) {
            int r1 = r0 + PP_ATT_BLOCK < T ? r0 + PP_ATT_BLOCK : T, rb = r1 - r0;
            float *Ab = A + (size_t)r0 * T;
            pp_cpu_gemm(a->ctx, 0, 1, rb, r1, hs, scale, q + (size_t)r0 * C3, C3, k, C3, 0.0f, Ab,
                        T);
            for (int t = r0; t < r1; t++)
                softmax_causal_row(A + (size_t)t * T, t, r1);
            pp_cpu_gemm(a->ctx, 0, 0, rb, hs, r1, 1.0f, Ab, T, v, C3, 0.0f, out + (size_t)r0 * C,
                        C);
        }
    }
}

pp_status pp_cpu_attention_fwd(void *ctx, float *y, float *att, const float *qkv, int B, int T,
                               int NH, int NKV, int hd)
{
    att_arg a = {
        .ctx = ctx, .y = y, .att = att, .qkv = qkv, .B = B, .T = T, .NH = NH, .NKV = NKV, .hd = hd};
    pp_cpu_par_for(ctx, (size_t)B * NH, 1, 1, attention_fwd_part, &a);
    return PP_OK;
}

size_t pp_cpu_attention_scratch_bytes(void *ctx, int B, int T, int C, int NH)
{
    (void)ctx, (void)B, (void)C, (void)NH;
    return pp_rt_size_attn_scratch_cpu((size_t)T); /* dS of one (batch, head) at a time */
}

/* One (batch, query head) of the backward, dS in S (T x T). */
static void attention_bwd_head(const att_arg *a, float *S, int b, int h)
{
    const qkv_layout L = layout_of(a->NH, a->NKV, a->hd);
    const int hs = a->hd, C3 = L.W, C = a->NH * a->hd, T = a->T, NH = a->NH;
    const float scale = 1.0f / sqrtf((float)hs);
    void *ctx = a->ctx;
    size_t off = (size_t)b * T * C3;
    const float *q = a->qkv + off + q_col(&L, h), *k = a->qkv + off + k_col(&L, h);
    const float *v = a->qkv + off + v_col(&L, h);
    float *dq = a->dqkv + off + q_col(&L, h), *dk = a->dqkv + off + k_col(&L, h);
    float *dv = a->dqkv + off + v_col(&L, h);
    float beta = h % L.g ? 1.0f : 0.0f; /* the group's later heads add to dk, dv */
    const float *A = a->catt + ((size_t)b * NH + h) * T * T;
    const float *dyh = a->dy + (size_t)b * T * C + (size_t)h * hs;
    for (int r0 = 0; r0 < T; r0 += PP_ATT_BLOCK) {
        int r1 = r0 + PP_ATT_BLOCK < T ? r0 + PP_ATT_BLOCK : T, rb = r1 - r0;
        /* dA(rb, r1) = dy_block v^T, then dS in place */
        pp_cpu_gemm(ctx, 0, 1, rb, r1, hs, 1.0f, dyh + (size_t)r0 * C, C, v, C3, 0.0f,
                    S + (size_t)r0 * T, T);
        for (int t = r0; t < r1; t++)
            softmax_causal_row_bwd(S + (size_t)t * T, A + (size_t)t * T, t, r1, scale);
        pp_cpu_gemm(ctx, 0, 0, rb, hs, r1, 1.0f, S + (size_t)r0 * T, T, k, C3, 0.0f,
                    dq + (size_t)r0 * C3, C3);
    }
    /* Column block [c0, c1) of keys gets contributions from queries t >= c0 only. */
    for (int c0 = 0; c0 < T; c0 += PP_ATT_BLOCK) {
        int c1 = c0 + PP_ATT_BLOCK < T ? c0 + PP_ATT_BLOCK : T, cb = c1 - c0;
        size_t blk = (size_t)c0 * T + c0;
        pp_cpu_gemm(ctx, 1, 0, cb, hs, T - c0, 1.0f, S + blk, T, q + (size_t)c0 * C3, C3, beta,
                    dk + (size_t)c0 * C3, C3);
        pp_cpu_gemm(ctx, 1, 0, cb, hs, T - c0, 1.0f, A + blk, T, dyh + (size_t)c0 * C, C, beta,
                    dv + (size_t)c0 * C3, C3);
    }
}

/* One (batch, KV head) unit per item, its query heads in order: the group's dk and dv are
 * written by its first head and added to by the others in the same order on any split. Part 0
 * uses the caller's scratch, the others the pool's. */
static void attention_bwd_part(void *v, size_t lo, size_t hi, int part)
{
    const att_arg *a = v;
    const int g = a->NH / a->NKV;
    float *S = part ? pp_cpu_pool_scratch(a->ctx, part) : a->scratch;
    for (size_t u = lo; u < hi; u++) {
        int b = (int)(u / (size_t)a->NKV), kv = (int)(u % (size_t)a->NKV);
        for (int h = kv * g; h < (kv + 1) * g; h++)
            attention_bwd_head(a, S, b, h);
    }
}

pp_status pp_cpu_attention_bwd(void *ctx, float *dqkv, float *scratch, const float *dy,
                               const float *att, const float *qkv, int B, int T, int NH, int NKV,
                               int hd)
{
    att_arg a = {.ctx = ctx,
                 .dqkv = dqkv,
                 .scratch = scratch,
                 .qkv = qkv,
                 .dy = dy,
                 .catt = att,
                 .B = B,
                 .T = T,
                 .NH = NH,
                 .NKV = NKV,
                 .hd = hd};
    size_t units = (size_t)B * NKV;
    if (pp_cpu_pool_parts(ctx, units, 1, 1) > 1)
        PP_TRY(pp_cpu_pool_reserve(ctx, pp_rt_size_attn_scratch_cpu((size_t)T)));
    pp_cpu_par_for(ctx, units, 1, 1, attention_bwd_part, &a);
    return PP_OK;
}
