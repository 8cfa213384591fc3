/* headnorm_cuda.cu — the CUDA backend's kernels of Qwen3's per-head q/k RMSNorm, forward and
 * backward. Same math as runtime/cpu/cpu_headnorm.c (the reference; the formulas and the
 * source are written there): a warp per (row, head) piece of hd floats within rows of stride
 * ld; the two weights' gradient a block column sum over rows and heads in a fixed order (no
 * floating-point atomics, as llama_cuda.cu's RMSNorm).
 */
#include <math.h>

#include "cuda_impl.h"

#define CX(ctx) ((pp_cuda_ctx *)(ctx))
#define HN_WARPS 8 /* (row, head) pieces per block */
#define HN_COLS 32
#define HN_ROWS 8

/* The (row, head) piece of this warp: its index (row n, head h) of the N (nq + nk) pieces; 0
 * past the last one. */
static __device__ __forceinline__ int hn_piece(int N, int nh, size_t *piece, size_t *n, int *h)
{
    *piece = (size_t)blockIdx.x * HN_WARPS + threadIdx.x / 32;
    *n = *piece / nh;
    *h = (int)(*piece % nh);
    return *piece < (size_t)N * nh;
}

static __global__ void headnorm_fwd_kernel(float *x, float *xin, float *rstd, const float *gq,
                                           const float *gk, int N, int nq, int nk, int hd, int ld,
                                           float eps)
{
    size_t piece, n;
    int h, lane = threadIdx.x % 32;
    if (!hn_piece(N, nq + nk, &piece, &n, &h))
        return;
    float *xr = x + n * ld + (size_t)h * hd, *in = xin + piece * hd;
    const float *g = h < nq ? gq : gk;
    float s = 0.0f;
    for (int j = lane; j < hd; j += 32)
        s += xr[j] * xr[j];
    float r = 1.0f / sqrtf(pp_warp_sum(s) / hd + eps);
    for (int j = lane; j < hd; j += 32) {
        in[j] = xr[j];
        xr[j] = xr[j] * r * g[j];
    }
    if (lane == 0)
        rstd[piece] = r;
}

pp_status pp_cuda_headnorm_fwd(void *ctx, float *x, float *xin, float *rstd, const float *gq,
                               const float *gk, int N, int nq, int nk, int hd, int ld, float eps)
{
    size_t pieces = (size_t)N * (nq + nk);
    if (pieces == 0)
        return PP_OK;
    unsigned grid = (unsigned)((pieces + HN_WARPS - 1) / HN_WARPS);
    PP_LAUNCH(headnorm_fwd_kernel, grid, 32 * HN_WARPS, 0, CX(ctx)->stream)
    (x, xin, rstd, gq, gk, N, nq, nk, hd, ld, eps);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* dx = r (g dy) - x r^3 mean(g dy x), in place over dy */
static __global__ void headnorm_bwd_dx_kernel(float *dx, const float *xin, const float *rstd,
                                              const float *gq, const float *gk, int N, int nq,
                                              int nk, int hd, int ld)
{
    size_t piece, n;
    int h, lane = threadIdx.x % 32;
    if (!hn_piece(N, nq + nk, &piece, &n, &h))
        return;
    float *d = dx + n * ld + (size_t)h * hd;
    const float *in = xin + piece * hd, *g = h < nq ? gq : gk;
    float r = rstd[piece], s = 0.0f;
    for (int j = lane; j < hd; j += 32)
        s += g[j] * d[j] * in[j];
    float k = pp_warp_sum(s) / hd * r * r * r;
    for (int j = lane; j < hd; j += 32)
        d[j] = r * g[j] * d[j] - in[j] * k;
}

/* Column c of [gq | gk] (2 hd columns): dg(c) += sum over rows and the heads of its kind of
 * dy x r. Block (32, 8) owns 32 columns; its partial sums are combined in a fixed order. */
static __global__ void headnorm_bwd_dg_kernel(float *dgq, float *dgk, const float *dy,
                                              const float *xin, const float *rstd, int N, int nq,
                                              int nk, int hd, int ld)
{
    __shared__ float part[HN_ROWS][HN_COLS];
    int c = blockIdx.x * HN_COLS + threadIdx.x, nh = nq + nk;
    int q = c < hd, j = q ? c : c - hd, h0 = q ? 0 : nq, h1 = q ? nq : nh;
    float acc = 0.0f;
    if (c < 2 * hd)
        for (int n = threadIdx.y; n < N; n += HN_ROWS)
            for (int h = h0; h < h1; h++) {
                size_t piece = (size_t)n * nh + h;
                acc += dy[(size_t)n * ld + (size_t)h * hd + j] * xin[piece * hd + j] * rstd[piece];
            }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < 2 * hd) {
        float t = 0.0f;
        for (int k = 0; k < HN_ROWS; k++)
            t += part[k][threadIdx.x];
        (q ? dgq : dgk)[j] += t;
    }
}

pp_status pp_cuda_headnorm_bwd(void *ctx, float *dx, float *dgq, float *dgk, const float *xin,
                               const float *rstd, const float *gq, const float *gk, int N, int nq,
                               int nk, int hd, int ld)
{
    pp_cuda_ctx *cx = CX(ctx);
    size_t pieces = (size_t)N * (nq + nk);
    if (pieces == 0 || hd <= 0)
        return PP_OK;
    /* the gradient of the weights first: it reads dy, which dx overwrites */
    dim3 block(HN_COLS, HN_ROWS);
    PP_LAUNCH(headnorm_bwd_dg_kernel, (unsigned)((2 * hd + HN_COLS - 1) / HN_COLS), block, 0,
              cx->stream)
    (dgq, dgk, dx, xin, rstd, N, nq, nk, hd, ld);
    PP_CUDA_LAUNCH_CHECK();
    unsigned grid = (unsigned)((pieces + HN_WARPS - 1) / HN_WARPS);
    PP_LAUNCH(headnorm_bwd_dx_kernel, grid, 32 * HN_WARPS, 0, cx->stream)
    (dx, xin, rstd, gq, gk, N, nq, nk, hd, ld);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
