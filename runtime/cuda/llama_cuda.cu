/* llama_cuda.cu — the CUDA backend's kernels of the Llama-family block: RMSNorm, SwiGLU and
 * rotary positions, forward and backward. Same math as runtime/cpu/cpu_llama.c (the
 * reference; the formulas are written there) and the same frequencies (runtime/rope_freq.h).
 * RMSNorm runs a warp per row; its gain gradient is a block column sum in a fixed order (no
 * floating-point atomics, as kernels_cuda.cu). SwiGLU and the rotation are element-wise.
 */
#include <math.h>

#include "cuda_impl.h"

#define CX(ctx) ((pp_cuda_ctx *)(ctx))
#define ROW_WARPS 8 /* rows per block of the row kernels */
#define COLSUM_X 32
#define COLSUM_Y 8

#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

/* ---- RMSNorm ---- */

static __global__ void rmsnorm_fwd_kernel(float *out, float *rstd, const float *x, const float *g,
                                          int N, int C, float eps)
{
    int row = blockIdx.x * ROW_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const float *xr = x + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32)
        s += xr[c] * xr[c];
    float r = 1.0f / sqrtf(pp_warp_sum(s) / C + eps);
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32)
        o[c] = xr[c] * r * g[c];
    if (lane == 0)
        rstd[row] = r;
}

pp_status pp_cuda_rmsnorm_fwd(void *ctx, float *out, float *rstd, const float *x, const float *g,
                              int N, int C, float eps)
{
    if (N <= 0)
        return PP_OK;
    unsigned grid = (unsigned)((N + ROW_WARPS - 1) / ROW_WARPS);
    PP_LAUNCH(rmsnorm_fwd_kernel, grid, 32 * ROW_WARPS, 0, CX(ctx)->stream)
    (out, rstd, x, g, N, C, eps);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* dx += r (g dy) - x r^3 mean(g dy x) */
static __global__ void rmsnorm_bwd_dx_kernel(float *dx, const float *dout, const float *x,
                                             const float *g, const float *rstd, int N, int C)
{
    int row = blockIdx.x * ROW_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const float *dy = dout + (size_t)row * C, *xr = x + (size_t)row * C;
    float r = rstd[row], s = 0.0f;
    for (int c = lane; c < C; c += 32)
        s += g[c] * dy[c] * xr[c];
    float k = pp_warp_sum(s) / C * r * r * r;
    float *d = dx + (size_t)row * C;
    for (int c = lane; c < C; c += 32)
        d[c] += r * g[c] * dy[c] - xr[c] * k;
}

/* dg(c) += sum over rows of dy x rstd: block (32, 8) owns 32 columns, partial sums combined
 * in shared memory in a fixed order. */
static __global__ void rmsnorm_bwd_dg_kernel(float *dg, const float *dout, const float *x,
                                             const float *rstd, int N, int C)
{
    __shared__ float part[COLSUM_Y][COLSUM_X];
    int c = blockIdx.x * COLSUM_X + threadIdx.x;
    float acc = 0.0f;
    if (c < C)
        for (int r = threadIdx.y; r < N; r += COLSUM_Y)
            acc += dout[(size_t)r * C + c] * x[(size_t)r * C + c] * rstd[r];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = 0.0f;
        for (int k = 0; k < COLSUM_Y; k++)
            t += part[k][threadIdx.x];
        dg[c] += t;
    }
}

pp_status pp_cuda_rmsnorm_bwd(void *ctx, float *dx, float *dg, const float *dout, const float *x,
                              const float *g, const float *rstd, int N, int C)
{
    pp_cuda_ctx *cx = CX(ctx);
    if (N <= 0 || C <= 0)
        return PP_OK;
    unsigned grid = (unsigned)((N + ROW_WARPS - 1) / ROW_WARPS);
    PP_LAUNCH(rmsnorm_bwd_dx_kernel, grid, 32 * ROW_WARPS, 0, cx->stream)
    (dx, dout, x, g, rstd, N, C);
    PP_CUDA_LAUNCH_CHECK();
    dim3 block(COLSUM_X, COLSUM_Y);
    PP_LAUNCH(rmsnorm_bwd_dg_kernel, (unsigned)((C + COLSUM_X - 1) / COLSUM_X), block, 0,
              cx->stream)
    (dg, dout, x, rstd, N, C);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* ---- SwiGLU ---- */

static __device__ __forceinline__ float sigmoid_of(float a)
{
    return 1.0f / (1.0f + expf(-a));
}

static __global__ void swiglu_fwd_kernel(float *y, const float *x, int F, size_t n)
{
    GRID_STRIDE(i, n)
    {
        size_t r = i / (size_t)F, j = i % (size_t)F;
        float a = x[r * 2 * F + j], u = x[r * 2 * F + F + j];
        y[i] = a * sigmoid_of(a) * u;
    }
}

pp_status pp_cuda_swiglu_fwd(void *ctx, float *y, const float *x, int N, int F)
{
    size_t n = (size_t)N * F;
    if (!n)
        return PP_OK;
    PP_LAUNCH(swiglu_fwd_kernel, pp_cuda_blocks(n, 256), 256, 0, CX(ctx)->stream)(y, x, F, n);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* One thread per (row, j): it alone reads dy[r, j] and writes dx[r, j] and dx[r, F + j], so dy
 * may lie in dx's up half. */
static __global__ void swiglu_bwd_kernel(float *dx, const float *x, const float *dy, int ldy,
                                         int F, size_t n)
{
    GRID_STRIDE(i, n)
    {
        size_t r = i / (size_t)F, j = i % (size_t)F;
        float a = x[r * 2 * F + j], u = x[r * 2 * F + F + j], d = dy[r * ldy + j];
        float sg = sigmoid_of(a);
        dx[r * 2 * F + j] = d * u * sg * (1.0f + a * (1.0f - sg));
        dx[r * 2 * F + F + j] = d * a * sg;
    }
}

pp_status pp_cuda_swiglu_bwd(void *ctx, float *dx, const float *x, const float *dy, int ldy, int N,
                             int F)
{
    size_t n = (size_t)N * F;
    if (!n)
        return PP_OK;
    PP_LAUNCH(swiglu_bwd_kernel, pp_cuda_blocks(n, 256), 256, 0, CX(ctx)->stream)
    (dx, x, dy, ldy, F, n);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* ---- rotary positions: one thread per (row, head, pair) ---- */

static __global__ void rope_kernel(float *x, int T, int nh, int hd, int ld, pp_rope r, int dir,
                                   size_t n)
{
    int half = hd / 2;
    GRID_STRIDE(i, n)
    {
        size_t row = i / ((size_t)nh * half);
        int rest = (int)(i % ((size_t)nh * half)), h = rest / half, j = rest % half;
        float ang = (float)pp_rope_pos(&r, row, T) * pp_rope_inv_freq(&r, j, hd);
        float co = cosf(ang), si = dir * sinf(ang);
        float *v = x + row * ld + (size_t)h * hd;
        float x1 = v[j], x2 = v[j + half];
        v[j] = x1 * co - x2 * si;
        v[j + half] = x2 * co + x1 * si;
    }
}

pp_status pp_cuda_rope(void *ctx, float *x, int N, int T, int nh, int hd, int ld, const pp_rope *r,
                       int dir)
{
    size_t n = (size_t)N * nh * (hd / 2);
    if (!n)
        return PP_OK;
    PP_LAUNCH(rope_kernel, pp_cuda_blocks(n, 256), 256, 0, CX(ctx)->stream)
    (x, T, nh, hd, ld, *r, dir, n);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
