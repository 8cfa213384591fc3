/* attention_cp_cuda.cu — context parallelism's ring attention on the GPU (backend.h's
 * attention_cp_fwd / _fwd_end / _bwd), the same blocks, masks and online softmax as
 * runtime/cpu/cpu_attention.c (Megatron-Core's load-balanced 2 cp chunks, TransformerEngine's
 * AttnFuncWithCPAndKVP2P merge: Milakov & Gimelshein 2018's running max and sum): per ring
 * step, for every (batch row, query head, local chunk) the key chunks of the step's block at or
 * left of it, each an L x L product (cuBLAS), then one warp per query row merges it (running
 * max m and sum l, the output row rescaled, E = exp(S - m) into the block scratch) and a second
 * product adds E v. The raw scores stay in att at their global key columns; the end turns them
 * into probabilities, which the backward reads (dS = P (dP - rowsum(dy y)) scaled).
 *
 * fp32 and bf16 (the products' operands in bf16, fp32 accumulation: cp_gemm). One L x L
 * block scratch (pp_rt_size_attn_scratch_cp), as the CPU's: the products run one block at a
 * time on the stream, so no two blocks are live at once. Compile-checked with nvcc here and run
 * under the CPU emulation of the tests (tests/cuda_emu/), never on a GPU yet.
 */
#include <math.h>

#include "cuda_impl.h"

#define CX(ctx) ((pp_cuda_ctx *)(ctx))
#define CP_WARPS 8 /* rows per block */

/* x[i] = v for i < n */
static __global__ void cp_fill_kernel(float *x, size_t n, float v)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = v;
}

static pp_status cp_fill(pp_cuda_ctx *cx, float *x, size_t n, float v)
{
    if (!n)
        return PP_OK;
    PP_LAUNCH(cp_fill_kernel, pp_cuda_blocks(n, 256), 256, 0, cx->stream)(x, n, v);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* L rows t of one L x L block of raw scores S (row stride ld): the diagonal block (diag) masked
 * above the diagonal (-inf, kept in att), the row's running max m[t] and sum l[t] updated, its
 * hd output columns y (row stride C) rescaled, E = exp(S - m_new) into e (L x L). */
static __global__ void cp_merge_kernel(float *S, int ld, float *e, float *m, float *l, float *y,
                                       int C, int L, int hd, int diag)
{
    int t = (int)(blockIdx.x * CP_WARPS + threadIdx.x / 32), lane = threadIdx.x % 32;
    if (t >= L)
        return;
    float *row = S + (size_t)t * ld;
    float mx = -INFINITY;
    for (int k = lane; k < L; k += 32) {
        if (diag && k > t)
            row[k] = -INFINITY;
        mx = fmaxf(mx, row[k]);
    }
    mx = pp_warp_max(mx);
    float mn = mx > m[t] ? mx : m[t], corr = expf(m[t] - mn), s = 0.0f;
    for (int k = lane; k < L; k += 32) {
        float v = expf(row[k] - mn);
        e[(size_t)t * L + k] = v;
        s += v;
    }
    s = pp_warp_sum(s);
    for (int d = lane; d < hd; d += 32)
        y[(size_t)t * C + d] *= corr;
    if (lane == 0) /* every lane read m[t] before the warp's reductions */
        l[t] = l[t] * corr + s, m[t] = mn;
}

/* Global chunk of local chunk j (0, 1) of cp rank cpr: the device's pp_rt_cp_chunk. */
static __device__ int cp_chunk(int j, int cp, int cpr)
{
    return j ? 2 * cp - 1 - cpr : cpr;
}

/* Rows r of (B, NH, T): probabilities exp(S - m) / l over the row's causal keys, output / l. */
static __global__ void cp_end_kernel(float *y, float *att, const float *ml, size_t rows, int T,
                                     int NH, int hd, int cp, int cpr)
{
    size_t r = (size_t)blockIdx.x * CP_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32, L = T / 2, TT = cp * T;
    if (r >= rows)
        return;
    int t = (int)(r % (size_t)T), h = (int)(r / (size_t)T % (size_t)NH);
    size_t b = r / ((size_t)T * NH);
    int keys = (cp_chunk(t / L, cp, cpr) + 1) * L;
    float m = ml[r], inv = 1.0f / ml[rows + r], *row = att + r * TT;
    for (int k = lane; k < keys; k += 32)
        row[k] = expf(row[k] - m) * inv;
    float *out = y + (b * T + (size_t)t) * ((size_t)NH * hd) + (size_t)h * hd;
    for (int d = lane; d < hd; d += 32)
        out[d] *= inv;
}

/* Rows r of (B, NH, T): dsum[r] = dy . y over the head's hd columns. */
static __global__ void cp_dsum_kernel(float *dsum, const float *dy, const float *y, size_t rows,
                                      int T, int NH, int hd)
{
    size_t r = (size_t)blockIdx.x * CP_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows)
        return;
    int t = (int)(r % (size_t)T), h = (int)(r / (size_t)T % (size_t)NH);
    size_t b = r / ((size_t)T * NH), at = (b * T + (size_t)t) * ((size_t)NH * hd) + (size_t)h * hd;
    float s = 0.0f;
    for (int d = lane; d < hd; d += 32)
        s += dy[at + d] * y[at + d];
    s = pp_warp_sum(s);
    if (lane == 0)
        dsum[r] = s;
}

/* L rows t of dS = P (dP - dsum) scale in place over dP (ds, L x L), P's row stride ld. */
static __global__ void cp_ds_kernel(float *ds, const float *P, int ld, const float *dsum, int L,
                                    float scale)
{
    int t = (int)(blockIdx.x * CP_WARPS + threadIdx.x / 32), lane = threadIdx.x % 32;
    if (t >= L)
        return;
    for (int k = lane; k < L; k += 32) {
        float *d = &ds[(size_t)t * L + k];
        *d = P[(size_t)t * ld + k] * (*d - dsum[t]) * scale;
    }
}

static unsigned cp_grid(size_t rows)
{
    return (unsigned)((rows + CP_WARPS - 1) / CP_WARPS);
}

/* c(m, n) = alpha op(a) op(b) + beta c, one product on the stream: the table's gemm, so in bf16
 * mode its operands (q, k, v blocks, E, dS, P, dy) are converted to bf16 in the kernel scratch
 * and multiplied with fp32 accumulation into fp32 c, as every bf16 GEMM and the bf16 attention
 * (attention_cuda.cu) do; the softmax statistics, scores and merges stay fp32. */
static pp_status cp_gemm(pp_cuda_ctx *cx, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc)
{
    return cx->be->ops->gemm(cx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

pp_status pp_cuda_attention_cp_fwd(void *ctx, float *y, float *att, float *ml, float *scratch,
                                   const float *qkv, const float *kv, int B, int T, int NH,
                                   int NKV, int hd, int cp, int cpr, int owner)
{
    pp_cuda_ctx *cx = CX(ctx);
    const int g = NH / NKV, W = (NH + 2 * NKV) * hd, C = NH * hd, L = T / 2, TT = cp * T;
    const float scale = 1.0f / sqrtf((float)hd);
    size_t nrow = (size_t)B * NH * T;
    if (owner == cpr) { /* the first step: the rank's own block */
        PP_TRY(cp_fill(cx, ml, nrow, -INFINITY));
        PP_TRY(cp_fill(cx, ml + nrow, nrow, 0.0f));
        PP_TRY(cp_fill(cx, y, (size_t)B * T * C, 0.0f));
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < 2; j++) {
                int kc[2], n = pp_rt_cp_key_chunks(j, cp, cpr, owner, kc);
                int qc = pp_rt_cp_chunk(j, cp, cpr);
                const float *q = qkv + ((size_t)b * T + (size_t)j * L) * W + (size_t)h * hd;
                size_t r0 = ((size_t)b * NH + h) * T + (size_t)j * L;
                float *A = att + r0 * TT, *out = y + ((size_t)b * T + (size_t)j * L) * C + h * hd;
                size_t kcol = (size_t)(NH + h / g) * hd, vcol = (size_t)(NH + NKV + h / g) * hd;
                for (int i = 0; i < n; i++) {
                    size_t kr = pp_rt_cp_key_row(kc[i], owner, b, T) * W;
                    float *S = A + (size_t)kc[i] * L;
                    PP_TRY(cp_gemm(cx, 0, 1, L, L, hd, scale, q, W, kv + kr + kcol, W, 0.0f, S,
                                   TT));
                    PP_LAUNCH(cp_merge_kernel, cp_grid((size_t)L), 32 * CP_WARPS, 0, cx->stream)
                    (S, TT, scratch, ml + r0, ml + nrow + r0, out, C, L, hd, kc[i] == qc);
                    PP_CUDA_LAUNCH_CHECK();
                    PP_TRY(cp_gemm(cx, 0, 0, L, hd, L, 1.0f, scratch, L, kv + kr + vcol, W, 1.0f,
                                   out, C));
                }
            }
    return PP_OK;
}

pp_status pp_cuda_attention_cp_fwd_end(void *ctx, float *y, float *att, const float *ml, int B,
                                       int T, int NH, int hd, int cp, int cpr)
{
    pp_cuda_ctx *cx = CX(ctx);
    size_t rows = (size_t)B * NH * T;
    if (!rows)
        return PP_OK;
    PP_LAUNCH(cp_end_kernel, cp_grid(rows), 32 * CP_WARPS, 0, cx->stream)
    (y, att, ml, rows, T, NH, hd, cp, cpr);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status pp_cuda_attention_cp_bwd(void *ctx, float *dqkv, float *dkv, float *dsum,
                                   float *scratch, const float *dy, const float *y,
                                   const float *att, const float *qkv, const float *kv, int B,
                                   int T, int NH, int NKV, int hd, int cp, int cpr, int owner)
{
    pp_cuda_ctx *cx = CX(ctx);
    const int g = NH / NKV, W = (NH + 2 * NKV) * hd, C = NH * hd, L = T / 2, TT = cp * T;
    const float scale = 1.0f / sqrtf((float)hd);
    size_t rows = (size_t)B * NH * T;
    if (owner == cpr) { /* the first step: rowsum(dy y) of every row, the gradients zeroed */
        PP_TRY(cp_fill(cx, dqkv, (size_t)B * T * W, 0.0f));
        PP_TRY(cp_fill(cx, dkv, (size_t)B * T * W, 0.0f));
        if (rows) {
            PP_LAUNCH(cp_dsum_kernel, cp_grid(rows), 32 * CP_WARPS, 0, cx->stream)
            (dsum, dy, y, rows, T, NH, hd);
            PP_CUDA_LAUNCH_CHECK();
        }
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < 2; j++) {
                int kc[2], n = pp_rt_cp_key_chunks(j, cp, cpr, owner, kc);
                size_t qr = ((size_t)b * T + (size_t)j * L) * W + (size_t)h * hd;
                size_t r0 = ((size_t)b * NH + h) * T + (size_t)j * L;
                const float *q = qkv + qr, *A = att + r0 * TT;
                const float *dyj = dy + ((size_t)b * T + (size_t)j * L) * C + h * hd;
                size_t kcol = (size_t)(NH + h / g) * hd, vcol = (size_t)(NH + NKV + h / g) * hd;
                for (int i = 0; i < n; i++) {
                    size_t kr = pp_rt_cp_key_row(kc[i], owner, b, T) * W;
                    const float *P = A + (size_t)kc[i] * L;
                    /* dP = dy v^T, then dS in place */
                    PP_TRY(cp_gemm(cx, 0, 1, L, L, hd, 1.0f, dyj, C, kv + kr + vcol, W, 0.0f,
                                   scratch, L));
                    PP_LAUNCH(cp_ds_kernel, cp_grid((size_t)L), 32 * CP_WARPS, 0, cx->stream)
                    (scratch, P, TT, dsum + r0, L, scale);
                    PP_CUDA_LAUNCH_CHECK();
                    PP_TRY(cp_gemm(cx, 0, 0, L, hd, L, 1.0f, scratch, L, kv + kr + kcol, W, 1.0f,
                                   dqkv + qr, W)); /* dq += dS k */
                    PP_TRY(cp_gemm(cx, 1, 0, L, hd, L, 1.0f, scratch, L, q, W, 1.0f,
                                   dkv + kr + kcol, W)); /* dk += dS^T q */
                    PP_TRY(cp_gemm(cx, 1, 0, L, hd, L, 1.0f, P, TT, dyj, C, 1.0f,
                                   dkv + kr + vcol, W)); /* dv += P^T dy */
                }
            }
    return PP_OK;
}
