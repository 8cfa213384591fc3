/* attention_cuda.cu — causal multi-head self-attention on the GPU, forward and backward: cuBLAS
 * strided-batched GEMMs over the heads for the products (as karpathy/llm.c's attention_forward)
 * and one warp-per-row kernel for the causal softmax and for its backward. Same math as
 * runtime/cpu/cpu_attention.c:
 *
 *   S = q k^T / sqrt(hs),  A = softmax_causal(S),  y = A v
 *   dA = dy v^T,  dS = A * (dA - rowsum(A * dA)) / sqrt(hs),  dq = dS k,  dk = dS^T q,  dv = A^T dy
 *
 * No permutation copies: head h of batch row b reads q, k, v straight out of qkv(B,T,W) with a
 * leading dimension of W = (NH + 2 NKV) hs and a head stride of hs, so one batched GEMM per batch
 * row covers every head (per query head of a KV group with grouped-query attention). The products cover the whole T x T square (the softmax zeroes what lies above the
 * diagonal): twice the FLOPs causality needs, on a term that is 4BT^2C of the layer's
 * 24BTC^2 + 4BT^2C forward. Not flash attention: the saved probabilities att(B,NH,T,T) are the
 * memory the tuner's activation model counts.
 *
 * bf16 mode: q, k, v, dy are converted per batch row into the workspace; the softmax kernels
 * write a bf16 copy of A (and dS) beside their fp32 results, so no extra pass converts them.
 */
#include <math.h>

#include "cuda_impl.h"

#define CX(ctx) ((pp_cuda_ctx *)(ctx))
#define SM_WARPS 8 /* rows per block */

/* rows (B*NH*T) of length T in place: row r is query t = r % T, softmax over keys [0, t], zero
 * beyond. a16: NULL, or a bf16 copy of the result. */
static __global__ void softmax_causal_kernel(float *att, __nv_bfloat16 *a16, size_t rows, int T)
{
    size_t r = (size_t)blockIdx.x * SM_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows)
        return;
    int t = (int)(r % (size_t)T);
    float *row = att + r * T;
    float mx = -INFINITY;
    for (int j = lane; j <= t; j += 32)
        mx = fmaxf(mx, row[j]);
    mx = pp_warp_max(mx);
    float s = 0.0f;
    for (int j = lane; j <= t; j += 32)
        s += expf(row[j] - mx);
    float inv = 1.0f / pp_warp_sum(s);
    for (int j = lane; j < T; j += 32) {
        float p = j <= t ? expf(row[j] - mx) * inv : 0.0f;
        row[j] = p;
        if (a16)
            a16[r * T + j] = __float2bfloat16_rn(p);
    }
}

/* rows (NH*T) of one batch row: dS from A and dA (fp32, in place over dA unless ds16 is given,
 * then written there in bf16), scaled; zero above the diagonal. a16: NULL, or where to put a
 * bf16 copy of A (for the dv product). */
static __global__ void softmax_causal_bwd_kernel(float *ds, __nv_bfloat16 *ds16, __nv_bfloat16 *a16,
                                                 const float *att, size_t rows, int T, float scale)
{
    size_t r = (size_t)blockIdx.x * SM_WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows)
        return;
    int t = (int)(r % (size_t)T);
    const float *a = att + r * T;
    float *d = ds + r * T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32)
        dot += a[j] * d[j];
    dot = pp_warp_sum(dot);
    for (int j = lane; j < T; j += 32) {
        float v = j <= t ? a[j] * (d[j] - dot) * scale : 0.0f;
        if (ds16)
            ds16[r * T + j] = __float2bfloat16_rn(v);
        else
            d[j] = v;
        if (a16)
            a16[r * T + j] = __float2bfloat16_rn(a[j]);
    }
}

static unsigned sm_grid(size_t rows)
{
    return (unsigned)((rows + SM_WARPS - 1) / SM_WARPS);
}

size_t pp_cuda_attention_scratch_bytes(void *ctx, int B, int T, int C, int NH)
{
    (void)ctx, (void)B, (void)C;
    return pp_rt_size_attn_scratch_cuda((size_t)NH, (size_t)T); /* dA, then dS, of one batch row */
}

/* Grouped-query heads: the g = NH/NKV query heads of KV head kv are h = kv g + j. For each
 * j one strided batch of NKV GEMMs covers heads j, g + j, ...: q and y with head stride g hd,
 * k and v with stride hd, att with stride g T^2 (for g = 1 one batch over every head). dk and
 * dv of a KV head are the sums over its j (beta 1 after the first). */
typedef struct {
    int W, C, hd, g, NH, NKV;
    size_t k0, v0; /* column offsets of k and v in a qkv row */
} gqa;

static gqa gqa_of(int NH, int NKV, int hd)
{
    gqa L = {(NH + 2 * NKV) * hd, NH * hd, hd, NH / NKV, NH, NKV, 0, 0};
    L.k0 = (size_t)NH * hd, L.v0 = (size_t)(NH + NKV) * hd;
    return L;
}

pp_status pp_cuda_attention_fwd(void *ctx, float *y, float *att, const float *qkv, int B, int T,
                                int NH, int NKV, int hd)
{
    pp_cuda_ctx *cx = CX(ctx);
    const gqa L = gqa_of(NH, NKV, hd);
    const int hs = hd, C3 = L.W, C = L.C, g = L.g;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t tt = (size_t)T * T, rows = (size_t)B * NH * T;
    if (B <= 0 || T <= 0)
        return PP_OK;
    int bf = cx->precision == PP_PREC_BF16;
    pp_cuda_dtype dt = bf ? PP_CUDA_BF16 : PP_CUDA_F32;
    const void *in = qkv; /* q, k, v operands: qkv itself, or its bf16 copy */
    __nv_bfloat16 *a16 = NULL;
    size_t esz = bf ? sizeof(__nv_bfloat16) : sizeof(float);
    if (bf) {
        void *ws;
        size_t nq = pp_rt_size_align64((size_t)B * T * C3);
        PP_TRY(pp_cuda_ws_reserve(cx, pp_rt_size_cuda_attn_fwd_ws(B, T, C3, NH), &ws));
        __nv_bfloat16 *q16 = (__nv_bfloat16 *)ws;
        a16 = q16 + nq;
        PP_TRY(pp_cuda_to_bf16(cx, q16, qkv, B * T, C3, C3));
        in = q16;
    }
    const char *base = (const char *)in;
    for (int b = 0; b < B; b++) /* S(h) = scale * q(h) k(h)^T */
        for (int j = 0; j < g; j++) {
            const char *row = base + (size_t)b * T * C3 * esz;
            const char *q = row + (size_t)j * hs * esz, *k = row + L.k0 * esz;
            PP_TRY(pp_cuda_gemm_batched(cx, 0, 1, T, T, hs, scale, q, C3, (long long)g * hs, k, C3,
                                        hs, 0.0f, att + ((size_t)b * NH + j) * tt, T,
                                        (long long)(g * tt), NKV, dt));
        }
    PP_LAUNCH(softmax_causal_kernel, sm_grid(rows), 32 * SM_WARPS, 0, cx->stream)
    (att, a16, rows, T);
    PP_CUDA_LAUNCH_CHECK();
    for (int b = 0; b < B; b++) /* y(h) = A(h) v(h) */
        for (int j = 0; j < g; j++) {
            const char *v = base + ((size_t)b * T * C3 + L.v0) * esz;
            size_t ah = ((size_t)b * NH + j) * tt;
            const void *A = bf ? (const void *)(a16 + ah) : (const void *)(att + ah);
            PP_TRY(pp_cuda_gemm_batched(cx, 0, 0, T, hs, T, 1.0f, A, T, (long long)(g * tt), v,
                                        C3, hs, 0.0f, y + (size_t)b * T * C + (size_t)j * hs, C,
                                        (long long)g * hs, NKV, dt));
        }
    return PP_OK;
}

pp_status pp_cuda_attention_bwd(void *ctx, float *dqkv, float *scratch, const float *dy,
                                const float *att, const float *qkv, int B, int T, int NH, int NKV,
                                int hd)
{
    pp_cuda_ctx *cx = CX(ctx);
    const gqa L = gqa_of(NH, NKV, hd);
    const int hs = hd, C3 = L.W, C = L.C, g = L.g;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t tt = (size_t)T * T, rows = (size_t)NH * T;
    const long long sq = (long long)g * hs, sa = (long long)(g * tt);
    if (B <= 0 || T <= 0)
        return PP_OK;
    int bf = cx->precision == PP_PREC_BF16;
    pp_cuda_dtype dt = bf ? PP_CUDA_BF16 : PP_CUDA_F32;
    size_t esz = bf ? sizeof(__nv_bfloat16) : sizeof(float);
    __nv_bfloat16 *q16 = NULL, *dy16 = NULL, *a16 = NULL, *ds16 = NULL;
    if (bf) { /* per batch row: q,k,v | dy | A | dS, all bf16 */
        void *ws;
        size_t nq = pp_rt_size_align64((size_t)T * C3), ny = pp_rt_size_align64((size_t)T * C);
        size_t na = pp_rt_size_align64(NH * tt);
        PP_TRY(pp_cuda_ws_reserve(cx, pp_rt_size_cuda_attn_bwd_ws(T, C3, C, NH), &ws));
        q16 = (__nv_bfloat16 *)ws;
        dy16 = q16 + nq;
        a16 = dy16 + ny;
        ds16 = a16 + na;
    }
    for (int b = 0; b < B; b++) {
        const float *qkv_b = qkv + (size_t)b * T * C3, *dy_b = dy + (size_t)b * T * C;
        const float *A = att + (size_t)b * NH * tt;
        float *dq = dqkv + (size_t)b * T * C3, *dk = dq + L.k0, *dv = dq + L.v0;
        const char *q = (const char *)qkv_b, *dyo = (const char *)dy_b;
        if (bf) {
            PP_TRY(pp_cuda_to_bf16(cx, q16, qkv_b, T, C3, C3));
            PP_TRY(pp_cuda_to_bf16(cx, dy16, dy_b, T, C, C));
            q = (const char *)q16;
            dyo = (const char *)dy16;
        }
        const char *k = q + L.k0 * esz, *v = q + L.v0 * esz;
        /* dA(h) = dy(h) v(h)^T into scratch, then dS over it (or into ds16) */
        for (int j = 0; j < g; j++)
            PP_TRY(pp_cuda_gemm_batched(cx, 0, 1, T, T, hs, 1.0f, dyo + (size_t)j * hs * esz, C,
                                        sq, v, C3, hs, 0.0f, scratch + (size_t)j * tt, T, sa, NKV,
                                        dt));
        PP_LAUNCH(softmax_causal_bwd_kernel, sm_grid(rows), 32 * SM_WARPS, 0, cx->stream)
        (scratch, ds16, a16, A, rows, T, scale);
        PP_CUDA_LAUNCH_CHECK();
        for (int j = 0; j < g; j++) {
            size_t hoff = (size_t)j * tt;
            const void *dS = bf ? (const void *)(ds16 + hoff) : (const void *)(scratch + hoff);
            const void *Ao = bf ? (const void *)(a16 + hoff) : (const void *)(A + hoff);
            const char *qj = q + (size_t)j * hs * esz, *dyj = dyo + (size_t)j * hs * esz;
            float beta = j ? 1.0f : 0.0f; /* the group's later heads add to dk, dv */
            PP_TRY(pp_cuda_gemm_batched(cx, 0, 0, T, hs, T, 1.0f, dS, T, sa, k, C3, hs, 0.0f,
                                        dq + (size_t)j * hs, C3, sq, NKV, dt)); /* dq = dS k */
            PP_TRY(pp_cuda_gemm_batched(cx, 1, 0, T, hs, T, 1.0f, dS, T, sa, qj, C3, sq, beta, dk,
                                        C3, hs, NKV, dt)); /* dk = dS^T q */
            PP_TRY(pp_cuda_gemm_batched(cx, 1, 0, T, hs, T, 1.0f, Ao, T, sa, dyj, C, sq, beta, dv,
                                        C3, hs, NKV, dt)); /* dv = A^T dy */
        }
    }
    return PP_OK;
}
