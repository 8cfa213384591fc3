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

pp_status pp_cpu_attention_fwd(void *ctx, float *y, float *att, const float *qkv, int B, int T,
                               int NH, int NKV, int hd)
{
    const qkv_layout L = layout_of(NH, NKV, hd);
    const int hs = hd, C3 = L.W, C = NH * hd;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *row = qkv + (size_t)b * T * C3;
            const float *q = row + q_col(&L, h), *k = row + k_col(&L, h), *v = row + v_col(&L, h);
            float *A = att + ((size_t)b * NH + h) * T * T;
            float *out = y + (size_t)b * T * C + (size_t)h * hs;
            for (int r0 = 0; r0 < T; r0 += PP_ATT_BLOCK) {
                int r1 = r0 + PP_ATT_BLOCK < T ? r0 + PP_ATT_BLOCK : T, rb = r1 - r0;
                float *Ab = A + (size_t)r0 * T;
                pp_cpu_gemm(ctx, 0, 1, rb, r1, hs, scale, q + (size_t)r0 * C3, C3, k, C3, 0.0f, Ab,
                            T);
                for (int t = r0; t < r1; t++)
                    softmax_causal_row(A + (size_t)t * T, t, r1);
                pp_cpu_gemm(ctx, 0, 0, rb, hs, r1, 1.0f, Ab, T, v, C3, 0.0f, out + (size_t)r0 * C,
                            C);
            }
        }
    return PP_OK;
}

size_t pp_cpu_attention_scratch_bytes(void *ctx, int B, int T, int C, int NH)
{
    (void)ctx, (void)B, (void)C, (void)NH;
    return pp_rt_size_attn_scratch_cpu((size_t)T); /* dS of one (batch, head) at a time */
}

pp_status pp_cpu_attention_bwd(void *ctx, float *dqkv, float *scratch, const float *dy,
                               const float *att, const float *qkv, int B, int T, int NH, int NKV,
                               int hd)
{
    const qkv_layout L = layout_of(NH, NKV, hd);
    const int hs = hd, C3 = L.W, C = NH * hd;
    const float scale = 1.0f / sqrtf((float)hs);
    float *S = scratch;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t off = (size_t)b * T * C3;
            const float *q = qkv + off + q_col(&L, h), *k = qkv + off + k_col(&L, h);
            const float *v = qkv + off + v_col(&L, h);
            float *dq = dqkv + off + q_col(&L, h), *dk = dqkv + off + k_col(&L, h);
            float *dv = dqkv + off + v_col(&L, h);
            float beta = h % L.g ? 1.0f : 0.0f; /* the group's later heads add to dk, dv */
            const float *A = att + ((size_t)b * NH + h) * T * T;
            const float *dyh = dy + (size_t)b * T * C + (size_t)h * hs;
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
                pp_cpu_gemm(ctx, 1, 0, cb, hs, T - c0, 1.0f, S + blk, T, q + (size_t)c0 * C3, C3,
                            beta, dk + (size_t)c0 * C3, C3);
                pp_cpu_gemm(ctx, 1, 0, cb, hs, T - c0, 1.0f, A + blk, T, dyh + (size_t)c0 * C, C,
                            beta, dv + (size_t)c0 * C3, C3);
            }
        }
    return PP_OK;
}

/* ---- context parallelism: the rank's two query chunks over the cp group's keys ----
 * Megatron-Core's load-balanced split (TransformerEngine's attention with context parallelism:
 * transformer_engine/pytorch/attention.py, AttnFuncWithCPAndKVP2P at v1.x): 2 cp chunks of L
 * tokens, cp rank i holding chunks i and 2 cp - 1 - i, so that every rank has the same
 * (2 cp + 1) L^2 causal work. The work goes chunk by chunk of keys, as the ring's steps do:
 * key chunks left of a query chunk are whole blocks, its own chunk the causal diagonal block,
 * those right of it are skipped. Unlike the ring (which merges each step's partial softmax with
 * its log-sum-exp), the probabilities of a query row are normalised once over every key chunk,
 * because all the group's K/V are here at once (stage_cp.c: all-gathered). */

/* Where key chunk k (global, 0 .. 2 cp - 1) of batch row b lies in all: block of its owner,
 * first or second half of that block's sequence. */
static size_t cp_chunk_row(int k, int b, int B, int T, int cp)
{
    int owner = k < cp ? k : 2 * cp - 1 - k, half = k < cp ? 0 : 1;
    return ((size_t)owner * B + b) * T + (size_t)half * (T / 2);
}

/* Global chunk of this rank's local chunk j (0, 1). */
static int cp_query_chunk(int j, int cp, int cpr)
{
    return j ? 2 * cp - 1 - cpr : cpr;
}

pp_status pp_cpu_attention_cp_fwd(void *ctx, float *y, float *att, const float *all, int B, int T,
                                  int NH, int NKV, int hd, int cp, int cpr)
{
    const qkv_layout Lq = layout_of(NH, NKV, hd);
    const int W = Lq.W, C = NH * hd, L = T / 2, TT = cp * T;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < 2; j++) {
                int qc = cp_query_chunk(j, cp, cpr);
                const float *q = all + cp_chunk_row(qc, b, B, T, cp) * W + q_col(&Lq, h);
                float *A = att + (((size_t)b * NH + h) * T + (size_t)j * L) * TT;
                float *out = y + ((size_t)b * T + (size_t)j * L) * C + (size_t)h * hd;
                for (int kc = 0; kc <= qc; kc++) {
                    const float *k = all + cp_chunk_row(kc, b, B, T, cp) * W + k_col(&Lq, h);
                    pp_cpu_gemm(ctx, 0, 1, L, L, hd, scale, q, W, k, W, 0.0f,
                                A + (size_t)kc * L, TT);
                }
                for (int t = 0; t < L; t++)
                    softmax_causal_row(A + (size_t)t * TT, qc * L + t, (qc + 1) * L);
                for (int kc = 0; kc <= qc; kc++) {
                    const float *v = all + cp_chunk_row(kc, b, B, T, cp) * W + v_col(&Lq, h);
                    pp_cpu_gemm(ctx, 0, 0, L, hd, L, 1.0f, A + (size_t)kc * L, TT, v, W,
                                kc ? 1.0f : 0.0f, out, C);
                }
            }
    return PP_OK;
}

pp_status pp_cpu_attention_cp_bwd(void *ctx, float *dall, float *scratch, const float *dy,
                                  const float *att, const float *all, int B, int T, int NH,
                                  int NKV, int hd, int cp, int cpr)
{
    const qkv_layout Lq = layout_of(NH, NKV, hd);
    const int W = Lq.W, C = NH * hd, L = T / 2, TT = cp * T;
    const float scale = 1.0f / sqrtf((float)hd);
    memset(dall, 0, (size_t)cp * B * T * W * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < 2; j++) {
                int qc = cp_query_chunk(j, cp, cpr);
                size_t qrow = cp_chunk_row(qc, b, B, T, cp) * W;
                const float *q = all + qrow + q_col(&Lq, h);
                float *dq = dall + qrow + q_col(&Lq, h);
                const float *A = att + (((size_t)b * NH + h) * T + (size_t)j * L) * TT;
                const float *dyj = dy + ((size_t)b * T + (size_t)j * L) * C + (size_t)h * hd;
                float *S = scratch + (size_t)j * L * TT;
                /* dA = dy v^T block by block, then dS in place (scaled) */
                for (int kc = 0; kc <= qc; kc++) {
                    const float *v = all + cp_chunk_row(kc, b, B, T, cp) * W + v_col(&Lq, h);
                    pp_cpu_gemm(ctx, 0, 1, L, L, hd, 1.0f, dyj, C, v, W, 0.0f, S + (size_t)kc * L,
                                TT);
                }
                for (int t = 0; t < L; t++)
                    softmax_causal_row_bwd(S + (size_t)t * TT, A + (size_t)t * TT, qc * L + t,
                                           (qc + 1) * L, scale);
                /* dq += dS k; dk += dS^T q and dv += A^T dy into the key chunk's owner block */
                for (int kc = 0; kc <= qc; kc++) {
                    size_t krow = cp_chunk_row(kc, b, B, T, cp) * W;
                    const float *Sk = S + (size_t)kc * L, *Ak = A + (size_t)kc * L;
                    pp_cpu_gemm(ctx, 0, 0, L, hd, L, 1.0f, Sk, TT, all + krow + k_col(&Lq, h), W,
                                1.0f, dq, W);
                    pp_cpu_gemm(ctx, 1, 0, L, hd, L, 1.0f, Sk, TT, q, W, 1.0f,
                                dall + krow + k_col(&Lq, h), W);
                    pp_cpu_gemm(ctx, 1, 0, L, hd, L, 1.0f, Ak, TT, dyj, C, 1.0f,
                                dall + krow + v_col(&Lq, h), W);
                }
            }
    return PP_OK;
}
