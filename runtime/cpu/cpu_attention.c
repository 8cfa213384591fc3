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

/* Whether the (batch, head) units run in parallel, each with its GEMMs on its own thread
 * (pp_rt_cpu_attn_units_parallel, which the memory plan asks too: the threads' scratch);
 * otherwise the units run one after the other with OpenBLAS threading their GEMMs and only the
 * softmax rows split. Either way every GEMM is the same call and every row the same code, so
 * the choice, which the kernel thread count does not enter, changes no result. */
static int units_in_parallel(int T, int hs)
{
    return pp_rt_cpu_attn_units_parallel(pp_backend_cpu_threads(), (size_t)T, (size_t)hs);
}

typedef struct {
    float *S;       /* the scores (T x T), rows from 0 */
    const float *A; /* backward: the saved probabilities */
    int T, r0, r1;
    float scale;
} softmax_arg;

static void softmax_fwd_part(void *v, size_t lo, size_t hi, int part)
{
    const softmax_arg *s = v;
    (void)part;
    for (int t = s->r0 + (int)lo; t < s->r0 + (int)hi; t++)
        softmax_causal_row(s->S + (size_t)t * s->T, t, s->r1);
}

static void softmax_bwd_part(void *v, size_t lo, size_t hi, int part)
{
    const softmax_arg *s = v;
    (void)part;
    for (int t = s->r0 + (int)lo; t < s->r0 + (int)hi; t++)
        softmax_causal_row_bwd(s->S + (size_t)t * s->T, s->A + (size_t)t * s->T, t, s->r1,
                               s->scale);
}

/* Rows [r0, r1) of the scores on `rows`' threads (NULL: this one); an exp per element. */
static void softmax_rows(pp_cpu_pool *rows, pp_cpu_range_fn fn, float *S, const float *A, int T,
                         int r0, int r1, float scale)
{
    softmax_arg s = {S, A, T, r0, r1, scale};
    pp_cpu_par_for(rows, (size_t)(r1 - r0), 1, pp_cpu_min_rows((size_t)r1) / 4 + 1, fn, &s);
}

typedef struct {
    void *ctx;
    float *y, *att, *dqkv, *scratch;
    const float *qkv, *dy, *catt;
    int B, T, NH, NKV, hd;
} att_arg;

/* Unit u = (batch, head) of the forward: its own probabilities and output columns. */
static void attention_fwd_unit(const att_arg *a, size_t u, pp_cpu_pool *rows)
{
    const qkv_layout L = layout_of(a->NH, a->NKV, a->hd);
    const int hs = a->hd, C3 = L.W, C = a->NH * a->hd, T = a->T, NH = a->NH;
    const float scale = 1.0f / sqrtf((float)hs);
    int b = (int)(u / (size_t)NH), h = (int)(u % (size_t)NH);
    const float *row = a->qkv + (size_t)b * T * C3;
    const float *q = row + q_col(&L, h), *k = row + k_col(&L, h), *v = row + v_col(&L, h);
    float *A = a->att + ((size_t)b * NH + h) * T * T;
    float *out = a->y + (size_t)b * T * C + (size_t)h * hs;
    for (int r0 = 0; r0 < T; r0 += PP_ATT_BLOCK) {
        int r1 = r0 + PP_ATT_BLOCK < T ? r0 + PP_ATT_BLOCK : T, rb = r1 - r0;
        float *Ab = A + (size_t)r0 * T;
        pp_cpu_gemm(a->ctx, 0, 1, rb, r1, hs, scale, q + (size_t)r0 * C3, C3, k, C3, 0.0f, Ab, T);
        softmax_rows(rows, softmax_fwd_part, A, NULL, T, r0, r1, 0.0f);
        pp_cpu_gemm(a->ctx, 0, 0, rb, hs, r1, 1.0f, Ab, T, v, C3, 0.0f, out + (size_t)r0 * C, C);
    }
}

static void attention_fwd_part(void *v, size_t lo, size_t hi, int part)
{
    (void)part;
    for (size_t u = lo; u < hi; u++)
        attention_fwd_unit(v, u, NULL);
}

pp_status pp_cpu_attention_fwd(void *ctx, float *y, float *att, const float *qkv, int B, int T,
                               int NH, int NKV, int hd)
{
    att_arg a = {.ctx = ctx, .y = y, .att = att, .qkv = qkv, .B = B, .T = T, .NH = NH,
                 .NKV = NKV, .hd = hd};
    size_t units = (size_t)B * NH;
    if (units_in_parallel(T, hd))
        pp_cpu_par_for(ctx, units, 1, 1, attention_fwd_part, &a);
    else
        for (size_t u = 0; u < units; u++)
            attention_fwd_unit(&a, u, ctx);
    return PP_OK;
}

size_t pp_cpu_attention_scratch_bytes(void *ctx, int B, int T, int C, int NH)
{
    (void)ctx, (void)B, (void)C, (void)NH;
    return pp_rt_size_attn_scratch_cpu((size_t)T); /* dS of one (batch, head) at a time */
}

/* One (batch, query head) of the backward, dS in S (T x T), softmax rows on `rows`' threads. */
static void attention_bwd_head(const att_arg *a, float *S, int b, int h, pp_cpu_pool *rows)
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
        softmax_rows(rows, softmax_bwd_part, S, A, T, r0, r1, scale);
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

/* Unit u = (batch, KV head) of the backward, its query heads in order: the group's dk and dv
 * are written by its first head and added to by the others in the same order on any split. */
static void attention_bwd_unit(const att_arg *a, float *S, size_t u, pp_cpu_pool *rows)
{
    const int g = a->NH / a->NKV;
    int b = (int)(u / (size_t)a->NKV), kv = (int)(u % (size_t)a->NKV);
    for (int h = kv * g; h < (kv + 1) * g; h++)
        attention_bwd_head(a, S, b, h, rows);
}

/* Part 0 uses the caller's scratch, the others the pool's (pp_cpu_pool_reserve: T x T floats
 * for each thread beyond the first, counted as the backend's PP_MEM_WORKSPACE and reserved at
 * the memory plan's figure, pp_rt_size_cpu_kernel_scratch). */
static void attention_bwd_part(void *v, size_t lo, size_t hi, int part)
{
    const att_arg *a = v;
    float *S = part ? pp_cpu_pool_scratch(a->ctx, part) : a->scratch;
    for (size_t u = lo; u < hi; u++)
        attention_bwd_unit(a, S, u, NULL);
}

pp_status pp_cpu_attention_bwd(void *ctx, float *dqkv, float *scratch, const float *dy,
                               const float *att, const float *qkv, int B, int T, int NH, int NKV,
                               int hd)
{
    att_arg a = {.ctx = ctx, .dqkv = dqkv, .scratch = scratch, .qkv = qkv, .dy = dy,
                 .catt = att, .B = B, .T = T, .NH = NH, .NKV = NKV, .hd = hd};
    size_t units = (size_t)B * NKV;
    if (!units_in_parallel(T, hd) || pp_cpu_pool_parts(ctx, units, 1, 1) == 1) {
        for (size_t u = 0; u < units; u++)
            attention_bwd_unit(&a, scratch, u, ctx);
        return PP_OK;
    }
    PP_TRY(pp_cpu_pool_reserve(ctx, pp_rt_size_attn_scratch_cpu((size_t)T)));
    pp_cpu_par_for(ctx, units, 1, 1, attention_bwd_part, &a);
    return PP_OK;
}

/* ---- context parallelism: ring attention, one K/V block at a time ----
 * Megatron-Core's load-balanced split as TransformerEngine's ring attention does it
 * (transformer_engine/pytorch/attention.py, AttnFuncWithCPAndKVP2P): 2 cp chunks of L tokens,
 * cp rank i holding chunks i and 2 cp - 1 - i, so every rank has the same (2 cp + 1) L^2 causal
 * work; the K/V of cp rank `owner` (its two chunks) come around the ring one step at a time, and
 * each step's partial attention is merged into the output with the online softmax (Milakov &
 * Gimelshein 2018; flash attention's running max and sum): for each row the running max m and
 * sum l, y rescaled by exp(m_old - m_new). A query chunk qc attends key chunk kc when kc <= qc
 * (the diagonal block causally); the blocks right of it are skipped. The raw scores stay in att
 * (keys at their global columns) and become the probabilities at the end, which the backward
 * reads as the whole-sequence attention's (dS = P (dP - rowsum(dy y)), as flash attention's
 * backward). */

/* Rows of key chunk k (global) in its owner's block (B, T, W): chunk o is the first half of
 * each sequence, 2 cp - 1 - o the second. */
static size_t cp_key_row(int k, int owner, int b, int T)
{
    return (size_t)b * T + (k == owner ? 0 : (size_t)(T / 2));
}

/* Global chunk of this rank's local chunk j (0, 1). */
static int cp_query_chunk(int j, int cp, int cpr)
{
    return j ? 2 * cp - 1 - cpr : cpr;
}

/* The (query chunk, key chunk) blocks of one ring step: for local chunk j, the key chunks of
 * `owner` at or left of it (n of them, in kc[]). */
static int cp_blocks(int j, int cp, int cpr, int owner, int kc[2])
{
    int qc = cp_query_chunk(j, cp, cpr), n = 0, ks[2] = {owner, 2 * cp - 1 - owner};
    for (int i = 0; i < 2; i++)
        if (ks[i] <= qc)
            kc[n++] = ks[i];
    return n;
}

/* Online softmax of one L x L block of raw scores S (row stride ld, -inf where masked) into
 * rows t of the running max m and sum l: E = exp(S - m_new) into e (L x L), y's L rows (stride
 * C, hd wide) rescaled. */
static void cp_merge_block(const float *S, int ld, float *e, float *m, float *l, float *y, int C,
                           int L, int hd)
{
    for (int t = 0; t < L; t++) {
        const float *row = S + (size_t)t * ld;
        float mx = pp_row_max(row, L), mn = mx > m[t] ? mx : m[t];
        float corr = expf(m[t] - mn), sum = 0.0f;
        for (int k = 0; k < L; k++)
            sum += e[(size_t)t * L + k] = expf(row[k] - mn);
        l[t] = l[t] * corr + sum;
        m[t] = mn;
        for (int d = 0; d < hd; d++)
            y[(size_t)t * C + d] *= corr;
    }
}

pp_status pp_cpu_attention_cp_fwd(void *ctx, float *y, float *att, float *ml, float *scratch,
                                  const float *qkv, const float *kv, int B, int T, int NH, int NKV,
                                  int hd, int cp, int cpr, int owner)
{
    const qkv_layout Lq = layout_of(NH, NKV, hd);
    const int W = Lq.W, C = NH * hd, L = T / 2, TT = cp * T;
    const float scale = 1.0f / sqrtf((float)hd);
    size_t nrow = (size_t)B * NH * T;
    float *m = ml, *l = ml + nrow;
    if (owner == cpr) { /* the first step: the rank's own block */
        for (size_t i = 0; i < nrow; i++)
            m[i] = -INFINITY, l[i] = 0.0f;
        memset(y, 0, (size_t)B * T * C * sizeof(float));
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < 2; j++) {
                int kc[2], n = cp_blocks(j, cp, cpr, owner, kc), qc = cp_query_chunk(j, cp, cpr);
                const float *q = qkv + ((size_t)b * T + (size_t)j * L) * W + q_col(&Lq, h);
                size_t r0 = ((size_t)b * NH + h) * T + (size_t)j * L;
                float *A = att + r0 * TT, *out = y + ((size_t)b * T + (size_t)j * L) * C + h * hd;
                for (int i = 0; i < n; i++) {
                    size_t kr = cp_key_row(kc[i], owner, b, T) * W;
                    float *S = A + (size_t)kc[i] * L;
                    pp_cpu_gemm(ctx, 0, 1, L, L, hd, scale, q, W, kv + kr + k_col(&Lq, h), W, 0.0f,
                                S, TT);
                    if (kc[i] == qc) /* the diagonal block: causal */
                        for (int t = 0; t < L; t++)
                            for (int k = t + 1; k < L; k++)
                                S[(size_t)t * TT + k] = -INFINITY;
                    cp_merge_block(S, TT, scratch, m + r0, l + r0, out, C, L, hd);
                    pp_cpu_gemm(ctx, 0, 0, L, hd, L, 1.0f, scratch, L, kv + kr + v_col(&Lq, h), W,
                                1.0f, out, C);
                }
            }
    return PP_OK;
}

pp_status pp_cpu_attention_cp_fwd_end(void *ctx, float *y, float *att, const float *ml, int B,
                                      int T, int NH, int hd, int cp, int cpr)
{
    (void)ctx;
    const int C = NH * hd, L = T / 2, TT = cp * T;
    size_t nrow = (size_t)B * NH * T;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                size_t r = ((size_t)b * NH + h) * T + (size_t)t;
                int keys = (cp_query_chunk(t / L, cp, cpr) + 1) * L;
                float m = ml[r], inv = 1.0f / ml[nrow + r], *row = att + r * TT;
                for (int k = 0; k < keys; k++)
                    row[k] = expf(row[k] - m) * inv;
                float *out = y + ((size_t)b * T + (size_t)t) * C + (size_t)h * hd;
                for (int d = 0; d < hd; d++)
                    out[d] *= inv;
            }
    return PP_OK;
}

pp_status pp_cpu_attention_cp_bwd(void *ctx, float *dqkv, float *dkv, float *dsum, float *scratch,
                                  const float *dy, const float *y, const float *att,
                                  const float *qkv, const float *kv, int B, int T, int NH, int NKV,
                                  int hd, int cp, int cpr, int owner)
{
    const qkv_layout Lq = layout_of(NH, NKV, hd);
    const int W = Lq.W, C = NH * hd, L = T / 2, TT = cp * T;
    const float scale = 1.0f / sqrtf((float)hd);
    if (owner == cpr) { /* the first step: rowsum(dy y) of every row, the gradients zeroed */
        memset(dqkv, 0, (size_t)B * T * W * sizeof(float));
        memset(dkv, 0, (size_t)B * T * W * sizeof(float));
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    size_t at = ((size_t)b * T + (size_t)t) * C + (size_t)h * hd;
                    dsum[((size_t)b * NH + h) * T + (size_t)t] = pp_row_dot(dy + at, y + at, hd);
                }
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < 2; j++) {
                int kc[2], n = cp_blocks(j, cp, cpr, owner, kc);
                size_t qr = ((size_t)b * T + (size_t)j * L) * W;
                size_t r0 = ((size_t)b * NH + h) * T + (size_t)j * L;
                const float *q = qkv + qr + q_col(&Lq, h), *A = att + r0 * TT;
                const float *dyj = dy + ((size_t)b * T + (size_t)j * L) * C + h * hd;
                for (int i = 0; i < n; i++) {
                    size_t kr = cp_key_row(kc[i], owner, b, T) * W;
                    const float *P = A + (size_t)kc[i] * L;
                    /* dP = dy v^T, then dS = P (dP - rowsum(dy y)) scaled, in scratch (L x L) */
                    pp_cpu_gemm(ctx, 0, 1, L, L, hd, 1.0f, dyj, C, kv + kr + v_col(&Lq, h), W,
                                0.0f, scratch, L);
                    for (int t = 0; t < L; t++)
                        for (int k = 0; k < L; k++) {
                            float *ds = &scratch[(size_t)t * L + k];
                            *ds = P[(size_t)t * TT + k] * (*ds - dsum[r0 + t]) * scale;
                        }
                    pp_cpu_gemm(ctx, 0, 0, L, hd, L, 1.0f, scratch, L, kv + kr + k_col(&Lq, h), W,
                                1.0f, dqkv + qr + q_col(&Lq, h), W);
                    pp_cpu_gemm(ctx, 1, 0, L, hd, L, 1.0f, scratch, L, q, W, 1.0f,
                                dkv + kr + k_col(&Lq, h), W);
                    pp_cpu_gemm(ctx, 1, 0, L, hd, L, 1.0f, P, TT, dyj, C, 1.0f,
                                dkv + kr + v_col(&Lq, h), W);
                }
            }
    return PP_OK;
}
