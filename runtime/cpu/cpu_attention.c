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

/* Whether the (batch, head) units run in parallel, each with its GEMMs on its own thread: when
 * OpenBLAS runs those GEMMs on the calling thread anyway (one BLAS thread, or M N K at most
 * 65536 x 4, SMP_THRESHOLD_MIN x GEMM_MULTITHREAD_THRESHOLD, below which OpenBLAS 0.3's
 * interface/gemm.c does not thread). Otherwise the units run one after the other with OpenBLAS
 * threading their GEMMs and only the softmax rows split: parallel callers of a threaded
 * OpenBLAS wait for each other's BLAS threads. Either way every GEMM is the same call and every
 * row the same code, so the choice, which the kernel thread count does not enter, changes no
 * result. */
static int units_in_parallel(int T, int hs)
{
    double rb = T < PP_ATT_BLOCK ? T : PP_ATT_BLOCK;
    return pp_backend_cpu_threads() == 1 || rb * T * hs <= 65536.0 * 4;
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
 * for each thread beyond the first, outside the backend's memory accounting). */
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

/* The ring kernels' work: units of one (batch, query head) forward, of one (batch, KV head)
 * with its query heads in order backward (the group's dK/dV rows are written by it alone), split
 * over the pool's threads as the whole-sequence kernels split theirs (units_in_parallel); each
 * part has its own L x L block scratch (part 0 the caller's, the others the pool's), so every
 * unit runs the same code in the same order on any thread count: bit-identical results. */
typedef struct {
    void *ctx;
    float *y, *att, *ml, *scratch, *dqkv, *dkv;
    const float *qkv, *kv, *dy, *catt, *dsum;
    int B, T, NH, NKV, hd, cp, cpr, owner;
} cp_arg;

static void cp_fwd_unit(const cp_arg *a, float *E, size_t u)
{
    const qkv_layout Lq = layout_of(a->NH, a->NKV, a->hd);
    const int W = Lq.W, C = a->NH * a->hd, T = a->T, L = T / 2, TT = a->cp * T, hd = a->hd;
    const float scale = 1.0f / sqrtf((float)hd);
    size_t nrow = (size_t)a->B * a->NH * T;
    int b = (int)(u / (size_t)a->NH), h = (int)(u % (size_t)a->NH);
    float *m = a->ml, *l = a->ml + nrow;
    for (int j = 0; j < 2; j++) {
        int kc[2], n = pp_rt_cp_key_chunks(j, a->cp, a->cpr, a->owner, kc);
        int qc = pp_rt_cp_chunk(j, a->cp, a->cpr);
        const float *q = a->qkv + ((size_t)b * T + (size_t)j * L) * W + q_col(&Lq, h);
        size_t r0 = ((size_t)b * a->NH + h) * T + (size_t)j * L;
        float *A = a->att + r0 * TT, *out = a->y + ((size_t)b * T + (size_t)j * L) * C + h * hd;
        for (int i = 0; i < n; i++) {
            size_t kr = pp_rt_cp_key_row(kc[i], a->owner, b, T) * W;
            float *S = A + (size_t)kc[i] * L;
            pp_cpu_gemm(a->ctx, 0, 1, L, L, hd, scale, q, W, a->kv + kr + k_col(&Lq, h), W, 0.0f,
                        S, TT);
            if (kc[i] == qc) /* the diagonal block: causal */
                for (int t = 0; t < L; t++)
                    for (int k = t + 1; k < L; k++)
                        S[(size_t)t * TT + k] = -INFINITY;
            cp_merge_block(S, TT, E, m + r0, l + r0, out, C, L, hd);
            pp_cpu_gemm(a->ctx, 0, 0, L, hd, L, 1.0f, E, L, a->kv + kr + v_col(&Lq, h), W, 1.0f,
                        out, C);
        }
    }
}

static void cp_bwd_head(const cp_arg *a, float *E, int b, int h)
{
    const qkv_layout Lq = layout_of(a->NH, a->NKV, a->hd);
    const int W = Lq.W, C = a->NH * a->hd, T = a->T, L = T / 2, TT = a->cp * T, hd = a->hd;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int j = 0; j < 2; j++) {
        int kc[2], n = pp_rt_cp_key_chunks(j, a->cp, a->cpr, a->owner, kc);
        size_t qr = ((size_t)b * T + (size_t)j * L) * W;
        size_t r0 = ((size_t)b * a->NH + h) * T + (size_t)j * L;
        const float *q = a->qkv + qr + q_col(&Lq, h), *A = a->catt + r0 * TT;
        const float *dyj = a->dy + ((size_t)b * T + (size_t)j * L) * C + h * hd;
        for (int i = 0; i < n; i++) {
            size_t kr = pp_rt_cp_key_row(kc[i], a->owner, b, T) * W;
            const float *P = A + (size_t)kc[i] * L;
            /* dP = dy v^T, then dS = P (dP - rowsum(dy y)) scaled, in E (L x L) */
            pp_cpu_gemm(a->ctx, 0, 1, L, L, hd, 1.0f, dyj, C, a->kv + kr + v_col(&Lq, h), W,
                        0.0f, E, L);
            for (int t = 0; t < L; t++)
                for (int k = 0; k < L; k++) {
                    float *ds = &E[(size_t)t * L + k];
                    *ds = P[(size_t)t * TT + k] * (*ds - a->dsum[r0 + t]) * scale;
                }
            pp_cpu_gemm(a->ctx, 0, 0, L, hd, L, 1.0f, E, L, a->kv + kr + k_col(&Lq, h), W, 1.0f,
                        a->dqkv + qr + q_col(&Lq, h), W);
            pp_cpu_gemm(a->ctx, 1, 0, L, hd, L, 1.0f, E, L, q, W, 1.0f,
                        a->dkv + kr + k_col(&Lq, h), W);
            pp_cpu_gemm(a->ctx, 1, 0, L, hd, L, 1.0f, P, TT, dyj, C, 1.0f,
                        a->dkv + kr + v_col(&Lq, h), W);
        }
    }
}

/* Unit u = (batch, KV head): its query heads in order. */
static void cp_bwd_unit(const cp_arg *a, float *E, size_t u)
{
    const int g = a->NH / a->NKV;
    int b = (int)(u / (size_t)a->NKV), kv = (int)(u % (size_t)a->NKV);
    for (int h = kv * g; h < (kv + 1) * g; h++)
        cp_bwd_head(a, E, b, h);
}

typedef void (*cp_unit_fn)(const cp_arg *a, float *E, size_t u);
typedef struct {
    const cp_arg *a;
    cp_unit_fn fn;
} cp_job;

static void cp_part(void *v, size_t lo, size_t hi, int part)
{
    const cp_job *j = v;
    float *E = part ? pp_cpu_pool_scratch(j->a->ctx, part) : j->a->scratch;
    for (size_t u = lo; u < hi; u++)
        j->fn(j->a, E, u);
}

/* The units on the pool's threads, each part with its block scratch (pp_cpu_pool_reserve:
 * pp_rt_size_attn_scratch_cp for each thread beyond the first), or in turn on this one. */
static pp_status cp_units(const cp_arg *a, size_t units, cp_unit_fn fn)
{
    if (!units_in_parallel(a->T / 2, a->hd) || pp_cpu_pool_parts(a->ctx, units, 1, 1) == 1) {
        for (size_t u = 0; u < units; u++)
            fn(a, a->scratch, u);
        return PP_OK;
    }
    PP_TRY(pp_cpu_pool_reserve(a->ctx, pp_rt_size_attn_scratch_cp((size_t)a->T)));
    cp_job j = {a, fn};
    pp_cpu_par_for(a->ctx, units, 1, 1, cp_part, &j);
    return PP_OK;
}

pp_status pp_cpu_attention_cp_fwd(void *ctx, float *y, float *att, float *ml, float *scratch,
                                  const float *qkv, const float *kv, int B, int T, int NH, int NKV,
                                  int hd, int cp, int cpr, int owner)
{
    size_t nrow = (size_t)B * NH * T;
    if (owner == cpr) { /* the first step: the rank's own block */
        for (size_t i = 0; i < nrow; i++)
            ml[i] = -INFINITY, ml[nrow + i] = 0.0f;
        memset(y, 0, (size_t)B * T * NH * hd * sizeof(float));
    }
    cp_arg a = {.ctx = ctx, .y = y, .att = att, .ml = ml, .scratch = scratch, .qkv = qkv,
                .kv = kv, .B = B, .T = T, .NH = NH, .NKV = NKV, .hd = hd, .cp = cp, .cpr = cpr,
                .owner = owner};
    return cp_units(&a, (size_t)B * NH, cp_fwd_unit);
}

/* Unit u = (batch, head): its rows' probabilities and output normalized. */
static void cp_end_unit(const cp_arg *a, float *E, size_t u)
{
    (void)E;
    const int C = a->NH * a->hd, T = a->T, L = T / 2, TT = a->cp * T;
    size_t nrow = (size_t)a->B * a->NH * T;
    int b = (int)(u / (size_t)a->NH), h = (int)(u % (size_t)a->NH);
    for (int t = 0; t < T; t++) {
        size_t r = u * (size_t)T + (size_t)t;
        int keys = (pp_rt_cp_chunk(t / L, a->cp, a->cpr) + 1) * L;
        float m = a->ml[r], inv = 1.0f / a->ml[nrow + r], *row = a->att + r * TT;
        for (int k = 0; k < keys; k++)
            row[k] = expf(row[k] - m) * inv;
        float *out = a->y + ((size_t)b * T + (size_t)t) * C + (size_t)h * a->hd;
        for (int d = 0; d < a->hd; d++)
            out[d] *= inv;
    }
}

static void cp_end_part(void *v, size_t lo, size_t hi, int part)
{
    (void)part;
    for (size_t u = lo; u < hi; u++)
        cp_end_unit(v, NULL, u);
}

pp_status pp_cpu_attention_cp_fwd_end(void *ctx, float *y, float *att, const float *ml, int B,
                                      int T, int NH, int hd, int cp, int cpr)
{
    cp_arg a = {.ctx = ctx, .y = y, .att = att, .ml = (float *)ml, .B = B, .T = T, .NH = NH,
                .hd = hd, .cp = cp, .cpr = cpr};
    size_t units = (size_t)B * NH;
    pp_cpu_par_for(ctx, units, 1, pp_cpu_min_rows((size_t)T * cp * T), cp_end_part, &a);
    return PP_OK;
}

pp_status pp_cpu_attention_cp_bwd(void *ctx, float *dqkv, float *dkv, float *dsum, float *scratch,
                                  const float *dy, const float *y, const float *att,
                                  const float *qkv, const float *kv, int B, int T, int NH, int NKV,
                                  int hd, int cp, int cpr, int owner)
{
    const int W = (NH + 2 * NKV) * hd, C = NH * hd;
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
    cp_arg a = {.ctx = ctx, .dqkv = dqkv, .dkv = dkv, .scratch = scratch, .qkv = qkv, .kv = kv,
                .dy = dy, .catt = att, .dsum = dsum, .B = B, .T = T, .NH = NH, .NKV = NKV,
                .hd = hd, .cp = cp, .cpr = cpr, .owner = owner};
    return cp_units(&a, (size_t)B * NKV, cp_bwd_unit);
}
