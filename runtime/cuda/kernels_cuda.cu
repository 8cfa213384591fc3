/* kernels_cuda.cu — the CUDA backend's element-wise and row-wise kernels: bias, residual add,
 * embeddings, LayerNorm, GELU, cross-entropy, AdamW. Same math as runtime/cpu/cpu_kernels.c (the
 * reference), laid out for the GPU after karpathy/llm.c's llmc/ kernels (warp per row, shuffle
 * reductions); the code is our own.
 *
 * Determinism: no kernel here uses floating-point atomics. Column sums (bias and LayerNorm
 * parameter gradients) are block reductions in a fixed order, and the token-embedding gradient
 * is accumulated by one thread per channel walking the rows in order (b, t) — the CPU's order,
 * so with the same inputs it matches the CPU bit for bit; its cost is N dependent updates per
 * thread, acceptable once per micro-batch on a pipe's first stage.
 * Pointers into the stage's carved buffers carry no 16-byte alignment guarantee, so loads are
 * scalar (coalesced across the warp), not float4.
 */
#include <math.h>
#include <stdlib.h>

#include "cuda_impl.h"

#define PP_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define PP_GELU_A 0.044715f

#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

#define CX(ctx) ((pp_cuda_ctx *)(ctx))

/* ---- bias, residual ---- */

/* rows in y (grid-stride: B*T may pass the 65535 limit of gridDim.y), columns in x. */
static __global__ void add_bias_kernel(float *y, const float *bias, int rows, int cols)
{
    for (int r = blockIdx.y; r < rows; r += gridDim.y)
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
            y[(size_t)r * cols + c] += bias[c];
}

pp_status pp_cuda_add_bias(void *ctx, float *y, const float *bias, int rows, int cols)
{
    if (rows <= 0 || cols <= 0)
        return PP_OK;
    dim3 grid((unsigned)((cols + 255) / 256 < 64 ? (cols + 255) / 256 : 64),
              (unsigned)(rows < 65535 ? rows : 65535));
    PP_LAUNCH(add_bias_kernel, grid, 256, 0, CX(ctx)->stream)(y, bias, rows, cols);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* Column sums of a (rows, cols) matrix, added into out(cols) (+= out of each of up to two
 * inputs): block (32, 8) owns 32 columns; thread (x, y) sums rows y, y+8, ... of column x
 * (coalesced over x), then the 8 partial sums are combined in shared memory in a fixed order.
 * mode 0: sum of a.  mode 1 (LayerNorm's dg, db): out0 += sum dy*n, out1 += sum dy, with
 * n = (x - mean[r]) * rstd[r] for row r. */
#define COLSUM_X 32
#define COLSUM_Y 8
static __global__ void colsum_kernel(float *out0, float *out1, const float *a, const float *x,
                                     const float *mean, const float *rstd, int rows, int cols,
                                     int mode)
{
    __shared__ float s0[COLSUM_Y][COLSUM_X], s1[COLSUM_Y][COLSUM_X];
    int c = blockIdx.x * COLSUM_X + threadIdx.x;
    float acc0 = 0.0f, acc1 = 0.0f;
    if (c < cols)
        for (int r = threadIdx.y; r < rows; r += COLSUM_Y) {
            float v = a[(size_t)r * cols + c];
            if (mode == 1) {
                acc0 += v * ((x[(size_t)r * cols + c] - mean[r]) * rstd[r]);
                acc1 += v;
            } else {
                acc0 += v;
            }
        }
    s0[threadIdx.y][threadIdx.x] = acc0;
    s1[threadIdx.y][threadIdx.x] = acc1;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float t0 = 0.0f, t1 = 0.0f;
        for (int k = 0; k < COLSUM_Y; k++) {
            t0 += s0[k][threadIdx.x];
            t1 += s1[k][threadIdx.x];
        }
        out0[c] += t0;
        if (mode == 1 && out1) /* NULL: a LayerNorm without bias */
            out1[c] += t1;
    }
}

static pp_status colsum(pp_cuda_ctx *cx, float *out0, float *out1, const float *a, const float *x,
                        const float *mean, const float *rstd, int rows, int cols, int mode)
{
    if (rows <= 0 || cols <= 0)
        return PP_OK;
    dim3 block(COLSUM_X, COLSUM_Y);
    unsigned grid = (unsigned)((cols + COLSUM_X - 1) / COLSUM_X);
    PP_LAUNCH(colsum_kernel, grid, block, 0, cx->stream)
    (out0, out1, a, x, mean, rstd, rows, cols, mode);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status pp_cuda_bias_grad(void *ctx, float *db, const float *dy, int rows, int cols)
{
    return colsum(CX(ctx), db, NULL, dy, NULL, NULL, NULL, rows, cols, 0);
}

static __global__ void add_kernel(float *y, const float *x, size_t n)
{
    GRID_STRIDE(i, n)
    {
        y[i] += x[i];
    }
}

pp_status pp_cuda_add(void *ctx, float *y, const float *x, size_t n)
{
    if (!n)
        return PP_OK;
    pp_cuda_shadow_invalidate(CX(ctx), y, n * sizeof(float));
    PP_LAUNCH(add_kernel, pp_cuda_blocks(n, 256), 256, 0, CX(ctx)->stream)(y, x, n);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

static __global__ void scale_matrix_kernel(float *c, int n, int ldc, float beta, size_t total)
{
    GRID_STRIDE(i, total)
    {
        float *p = c + (i / (size_t)n) * (size_t)ldc + i % (size_t)n;
        *p = beta == 0.0f ? 0.0f : beta * *p; /* not 0 * c: that would keep NaNs of a fresh c */
    }
}

pp_status pp_cuda_scale_matrix(pp_cuda_ctx *cx, float *c, int m, int n, int ldc, float beta)
{
    if (m <= 0 || n <= 0 || beta == 1.0f)
        return PP_OK;
    size_t total = (size_t)m * n;
    PP_LAUNCH(scale_matrix_kernel, pp_cuda_blocks(total, 256), 256, 0, cx->stream)
    (c, n, ldc, beta, total);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* ---- embeddings ---- */

static __global__ void encoder_fwd_kernel(float *out, const int32_t *tok, const float *wte,
                                          const float *wpe, int T, int C, size_t n)
{
    GRID_STRIDE(i, n)
    {
        size_t bt = i / (size_t)C;
        int c = (int)(i % (size_t)C), t = (int)(bt % (size_t)T);
        out[i] = wte[(size_t)tok[bt] * C + c] + (wpe ? wpe[(size_t)t * C + c] : 0.0f);
    }
}

pp_status pp_cuda_encoder_fwd(void *ctx, float *out, const int32_t *tok, const float *wte,
                              const float *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    if (!n)
        return PP_OK;
    PP_LAUNCH(encoder_fwd_kernel, pp_cuda_blocks(n, 256), 256, 0, CX(ctx)->stream)
    (out, tok, wte, wpe, T, C, n);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* One thread per channel c: dwte[tok] += dout row by row, in the CPU's (b, t) order. */
static __global__ void encoder_bwd_wte_kernel(float *dwte, const float *dout, const int32_t *tok,
                                              int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int r = 0; r < N; r++)
        dwte[(size_t)tok[r] * C + c] += dout[(size_t)r * C + c];
}

/* One thread per (t, c): dwpe[t, c] += sum over b, in order. */
static __global__ void encoder_bwd_wpe_kernel(float *dwpe, const float *dout, int B, int T, int C)
{
    size_t n = (size_t)T * C;
    GRID_STRIDE(i, n)
    {
        float s = dwpe[i];
        for (int b = 0; b < B; b++)
            s += dout[(size_t)b * n + i];
        dwpe[i] = s;
    }
}

pp_status pp_cuda_encoder_bwd(void *ctx, float *dwte, float *dwpe, const float *dout,
                              const int32_t *tok, int B, int T, int C)
{
    pp_cuda_ctx *cx = CX(ctx);
    if (B <= 0 || T <= 0 || C <= 0)
        return PP_OK;
    PP_LAUNCH(encoder_bwd_wte_kernel, (unsigned)((C + 127) / 128), 128, 0, cx->stream)
    (dwte, dout, tok, B * T, C);
    PP_CUDA_LAUNCH_CHECK();
    if (!dwpe) /* rotary models: no position table */
        return PP_OK;
    size_t n = (size_t)T * C;
    PP_LAUNCH(encoder_bwd_wpe_kernel, pp_cuda_blocks(n, 256), 256, 0, cx->stream)
    (dwpe, dout, B, T, C);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* ---- LayerNorm: one warp per row ---- */

#define ROW_WARPS 8 /* warps (rows) per block of the row kernels */

static __global__ void layernorm_fwd_kernel(float *out, float *mean, float *rstd, const float *x,
                                            const float *g, const float *b, int N, int C,
                                            float eps)
{
    int row = blockIdx.x * ROW_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const float *xr = x + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32)
        s += xr[c];
    float m = pp_warp_sum(s) / C;
    float v = 0.0f; /* two passes, as the CPU: accurate for rows far from 0 */
    for (int c = lane; c < C; c += 32) {
        float d = xr[c] - m;
        v += d * d;
    }
    float r = 1.0f / sqrtf(pp_warp_sum(v) / C + eps);
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32)
        o[c] = (xr[c] - m) * r * g[c] + (b ? b[c] : 0.0f);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

pp_status pp_cuda_layernorm_fwd(void *ctx, float *out, float *mean, float *rstd, const float *x,
                                const float *g, const float *b, int N, int C, float eps)
{
    if (N <= 0)
        return PP_OK;
    unsigned grid = (unsigned)((N + ROW_WARPS - 1) / ROW_WARPS);
    PP_LAUNCH(layernorm_fwd_kernel, grid, 32 * ROW_WARPS, 0, CX(ctx)->stream)
    (out, mean, rstd, x, g, b, N, C, eps);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* dx += rstd * (dn - mean(dn) - n * mean(dn * n)),  dn = dy * g,  n = (x - mean) * rstd */
static __global__ void layernorm_bwd_dx_kernel(float *dx, const float *dout, const float *x,
                                               const float *g, const float *mean, const float *rstd,
                                               int N, int C)
{
    int row = blockIdx.x * ROW_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const float *dy = dout + (size_t)row * C, *xr = x + (size_t)row * C;
    float m = mean[row], s = rstd[row], sdn = 0.0f, sdnn = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float dn = g[c] * dy[c];
        sdn += dn;
        sdnn += dn * ((xr[c] - m) * s);
    }
    float mdn = pp_warp_sum(sdn) / C, mdnn = pp_warp_sum(sdnn) / C;
    float *d = dx + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float n = (xr[c] - m) * s;
        d[c] += (g[c] * dy[c] - mdn - n * mdnn) * s;
    }
}

pp_status pp_cuda_layernorm_bwd(void *ctx, float *dx, float *dg, float *db, const float *dout,
                                const float *x, const float *g, const float *mean,
                                const float *rstd, int N, int C)
{
    pp_cuda_ctx *cx = CX(ctx);
    if (N <= 0)
        return PP_OK;
    unsigned grid = (unsigned)((N + ROW_WARPS - 1) / ROW_WARPS);
    PP_LAUNCH(layernorm_bwd_dx_kernel, grid, 32 * ROW_WARPS, 0, cx->stream)
    (dx, dout, x, g, mean, rstd, N, C);
    PP_CUDA_LAUNCH_CHECK();
    return colsum(cx, dg, db, dout, x, mean, rstd, N, C, 1);
}

/* ---- GELU (tanh approximation, Hendrycks & Gimpel 2016, as GPT-2) ---- */

static __global__ void gelu_fwd_kernel(float *y, const float *x, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(PP_GELU_K * (v + PP_GELU_A * v * v * v)));
    }
}

/* d gelu / dx = 0.5 (1 + th) + 0.5 x (1 - th^2) k (1 + 3 a x^2) */
static __global__ void gelu_bwd_kernel(float *dx, const float *x, const float *dy, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float v = x[i];
        float th = tanhf(PP_GELU_K * (v + PP_GELU_A * v * v * v));
        float du = PP_GELU_K * (1.0f + 3.0f * PP_GELU_A * v * v);
        dx[i] = (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du) * dy[i];
    }
}

pp_status pp_cuda_gelu_fwd(void *ctx, float *y, const float *x, size_t n)
{
    if (!n)
        return PP_OK;
    PP_LAUNCH(gelu_fwd_kernel, pp_cuda_blocks(n, 256), 256, 0, CX(ctx)->stream)(y, x, n);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status pp_cuda_gelu_bwd(void *ctx, float *dx, const float *x, const float *dy, size_t n)
{
    if (!n)
        return PP_OK;
    PP_LAUNCH(gelu_bwd_kernel, pp_cuda_blocks(n, 256), 256, 0, CX(ctx)->stream)(dx, x, dy, n);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* ---- cross-entropy: one block per row (V is large: 50257 for GPT-2) ---- */

#define XENT_THREADS 512

/* Softmax in place; row_loss[i] = log(sum) - (l[target] - max), as the CPU (precise when
 * p[target] is tiny). */
static __global__ void xent_fwd_kernel(float *probs, float *row_loss, const int32_t *targets, int V)
{
    float *row = probs + (size_t)blockIdx.x * V;
    float lt = row[targets[blockIdx.x]]; /* read by every thread before any write below */
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        mx = fmaxf(mx, row[j]);
    mx = pp_block_reduce(mx, 1);
    float s = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        float e = expf(row[j] - mx);
        row[j] = e;
        s += e;
    }
    s = pp_block_reduce(s, 0);
    float inv = 1.0f / s;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        row[j] *= inv;
    if (threadIdx.x == 0)
        row_loss[blockIdx.x] = logf(s) - (lt - mx);
}

pp_status pp_cuda_xent_fwd(void *ctx, float *probs, const int32_t *targets, int N, int V,
                           float *mean_loss_host)
{
    pp_cuda_ctx *cx = CX(ctx);
    *mean_loss_host = 0.0f;
    if (N <= 0)
        return PP_OK;
    void *ws;
    PP_TRY(pp_cuda_ws_reserve(cx, pp_rt_size_cuda_xent_ws((size_t)N), &ws));
    if ((size_t)N > cx->host_rows_n) {
        float *h = (float *)realloc(cx->host_rows, (size_t)N * sizeof(float));
        if (!h)
            return PP_ERR(PP_ERR_NOMEM, "cuda xent: cannot hold %d row losses on the host", N);
        cx->host_rows = h;
        cx->host_rows_n = (size_t)N;
    }
    PP_LAUNCH(xent_fwd_kernel, (unsigned)N, XENT_THREADS, 0, cx->stream)
    (probs, (float *)ws, targets, V);
    PP_CUDA_LAUNCH_CHECK();
    PP_CUDA_TRY(cudaMemcpyAsync(cx->host_rows, ws, (size_t)N * sizeof(float),
                                cudaMemcpyDeviceToHost, cx->stream));
    PP_CUDA_TRY(cudaStreamSynchronize(cx->stream));
    double total = 0.0; /* in row order and in double, as the CPU */
    for (int i = 0; i < N; i++)
        total += (double)cx->host_rows[i];
    *mean_loss_host = (float)(total / N);
    return PP_OK;
}

static __global__ void xent_bwd_kernel(float *probs, const int32_t *targets, int V, float scale)
{
    float *row = probs + (size_t)blockIdx.x * V;
    int t = targets[blockIdx.x];
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        row[j] = (row[j] - (j == t ? 1.0f : 0.0f)) * scale;
}

pp_status pp_cuda_xent_bwd(void *ctx, float *probs, const int32_t *targets, int N, int V,
                           float scale)
{
    if (N <= 0)
        return PP_OK;
    PP_LAUNCH(xent_bwd_kernel, (unsigned)N, 256, 0, CX(ctx)->stream)(probs, targets, V, scale);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* ---- AdamW (Loshchilov & Hutter 2019, decoupled weight decay), as cpu_kernels.c ---- */

static __global__ void adamw_kernel(float *w, __nv_bfloat16 *w16, const float *g, float *m,
                                    float *v, size_t n, pp_adamw_scalars s)
{
    GRID_STRIDE(i, n)
    {
        float gi = g[i] * s.grad_scale;
        float mi = s.beta1 * m[i] + (1.0f - s.beta1) * gi;
        float vi = s.beta2 * v[i] + (1.0f - s.beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / s.bc1, vhat = vi / s.bc2;
        float wi = w[i] - s.lr * (mhat / (sqrtf(vhat) + s.eps) + s.weight_decay * w[i]);
        w[i] = wi;
        if (w16)
            w16[i] = __float2bfloat16_rn(wi); /* the bf16 mode's copy for the GEMMs */
    }
}

pp_status pp_cuda_adamw(void *ctx, float *w, const float *g, float *m, float *v, size_t n,
                        const pp_adamw_scalars *s)
{
    if (!n)
        return PP_OK;
    __nv_bfloat16 *w16 = NULL; /* a part's copy: its whole tensor's, by weights_written */
    if (!s->part)
        PP_TRY(pp_cuda_shadow_for_update(CX(ctx), w, n, &w16));
    PP_LAUNCH(adamw_kernel, pp_cuda_blocks(n, 256), 256, 0, CX(ctx)->stream)
    (w, w16, g, m, v, n, *s);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* The bf16 copy of a weight as adamw_kernel writes it: the same rounding of the same fp32. */
static __global__ void weights_bf16_kernel(__nv_bfloat16 *w16, const float *w, size_t n)
{
    GRID_STRIDE(i, n)
    {
        w16[i] = __float2bfloat16_rn(w[i]);
    }
}

pp_status pp_cuda_weights_written(void *ctx, const float *w, size_t n)
{
    if (!n)
        return PP_OK;
    __nv_bfloat16 *w16;
    PP_TRY(pp_cuda_shadow_for_update(CX(ctx), w, n, &w16));
    if (!w16) /* fp32 mode, or copies switched off: the GEMMs convert */
        return PP_OK;
    PP_LAUNCH(weights_bf16_kernel, pp_cuda_blocks(n, 256), 256, 0, CX(ctx)->stream)(w16, w, n);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
