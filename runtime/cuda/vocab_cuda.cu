/* vocab_cuda.cu — the CUDA backend's kernels of vocabulary parallelism (backend.h's vocab_*):
 * a tensor-parallel rank's rows [v0, v0 + nv) of the token embedding and of the LM head, and
 * the pieces of the cross-entropy that the stage puts together around its all-reduces
 * (runtime/stage_fwd.c; Megatron-LM's vocab_parallel_cross_entropy). Same math as
 * runtime/cpu/cpu_vocab.c, laid out as kernels_cuda.cu's whole-vocabulary ones: one block per
 * row for the row reductions, one thread per channel walking the rows in order for the
 * embedding's gradient (no floating-point atomics: the CPU's order, deterministic).
 */
#include <math.h>

#include "cuda_impl.h"

#define CX(ctx) ((pp_cuda_ctx *)(ctx))
#define VOCAB_THREADS 512

static __device__ __forceinline__ int in_range(int32_t tok, int v0, int nv)
{
    return tok >= v0 && tok < v0 + nv;
}

static __global__ void vocab_embed_fwd_kernel(float *out, const int32_t *tok, const float *wte,
                                              int C, int v0, int nv, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / (size_t)C, c = i % (size_t)C;
        int32_t k = tok[r];
        out[i] = in_range(k, v0, nv) ? wte[(size_t)(k - v0) * C + c] : 0.0f;
    }
}

pp_status pp_cuda_vocab_embed_fwd(void *ctx, float *out, const int32_t *tok, const float *wte,
                                  int N, int C, int v0, int nv)
{
    size_t n = (size_t)N * C;
    if (!n)
        return PP_OK;
    PP_LAUNCH(vocab_embed_fwd_kernel, pp_cuda_blocks(n, 256), 256, 0, CX(ctx)->stream)
    (out, tok, wte, C, v0, nv, n);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* One thread per channel c: the rows in order, those of the rank's tokens only. */
static __global__ void vocab_embed_bwd_kernel(float *dwte, const float *dout, const int32_t *tok,
                                              int N, int C, int v0, int nv)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int r = 0; r < N; r++)
        if (in_range(tok[r], v0, nv))
            dwte[(size_t)(tok[r] - v0) * C + c] += dout[(size_t)r * C + c];
}

pp_status pp_cuda_vocab_embed_bwd(void *ctx, float *dwte, const float *dout, const int32_t *tok,
                                  int N, int C, int v0, int nv)
{
    if (N <= 0 || C <= 0)
        return PP_OK;
    PP_LAUNCH(vocab_embed_bwd_kernel, (unsigned)((C + 127) / 128), 128, 0, CX(ctx)->stream)
    (dwte, dout, tok, N, C, v0, nv);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

static __global__ void vocab_xent_max_kernel(float *mx, const float *logits, int Vl, int nv)
{
    const float *row = logits + (size_t)blockIdx.x * Vl;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < nv; j += blockDim.x)
        m = fmaxf(m, row[j]);
    m = pp_block_reduce(m, 1);
    if (threadIdx.x == 0)
        mx[blockIdx.x] = m;
}

pp_status pp_cuda_vocab_xent_max(void *ctx, float *mx, const float *logits, int N, int Vl, int nv)
{
    if (N <= 0)
        return PP_OK;
    PP_LAUNCH(vocab_xent_max_kernel, (unsigned)N, VOCAB_THREADS, 0, CX(ctx)->stream)
    (mx, logits, Vl, nv);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* One block per row: the maximum over the t ranks' maxima, the target's shifted logit (read
 * before any thread overwrites the row), then exp and its block sum. */
static __global__ void vocab_xent_exp_kernel(float *probs, float *stats, const float *mx, int t,
                                             const int32_t *targets, int N, int Vl, int v0,
                                             int nv)
{
    int i = blockIdx.x;
    float *row = probs + (size_t)i * Vl;
    float m = mx[i];
    for (int r = 1; r < t; r++)
        m = fmaxf(m, mx[(size_t)r * N + i]);
    if (threadIdx.x == 0)
        stats[N + i] = in_range(targets[i], v0, nv) ? row[targets[i] - v0] - m : 0.0f;
    __syncthreads();
    float s = 0.0f;
    for (int j = threadIdx.x; j < Vl; j += blockDim.x) {
        float e = j < nv ? expf(row[j] - m) : 0.0f; /* padding: p = 0 */
        row[j] = e;
        s += e;
    }
    s = pp_block_reduce(s, 0);
    if (threadIdx.x == 0)
        stats[i] = s;
}

pp_status pp_cuda_vocab_xent_exp(void *ctx, float *probs, float *stats, const float *mx, int t,
                                 const int32_t *targets, int N, int Vl, int v0, int nv)
{
    if (N <= 0)
        return PP_OK;
    PP_LAUNCH(vocab_xent_exp_kernel, (unsigned)N, VOCAB_THREADS, 0, CX(ctx)->stream)
    (probs, stats, mx, t, targets, N, Vl, v0, nv);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

static __global__ void vocab_xent_norm_kernel(float *probs, const float *sums, int Vl)
{
    float *row = probs + (size_t)blockIdx.x * Vl, inv = 1.0f / sums[blockIdx.x];
    for (int j = threadIdx.x; j < Vl; j += blockDim.x)
        row[j] *= inv;
}

pp_status pp_cuda_vocab_xent_norm(void *ctx, float *probs, const float *sums, int N, int Vl)
{
    if (N <= 0)
        return PP_OK;
    PP_LAUNCH(vocab_xent_norm_kernel, (unsigned)N, 256, 0, CX(ctx)->stream)(probs, sums, Vl);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

static __global__ void vocab_xent_bwd_kernel(float *probs, const int32_t *targets, int Vl, int v0,
                                             float scale)
{
    float *row = probs + (size_t)blockIdx.x * Vl;
    int k = targets[blockIdx.x] - v0;
    for (int j = threadIdx.x; j < Vl; j += blockDim.x)
        row[j] = (row[j] - (j == k ? 1.0f : 0.0f)) * scale;
}

pp_status pp_cuda_vocab_xent_bwd(void *ctx, float *probs, const int32_t *targets, int N, int Vl,
                                 int v0, float scale)
{
    if (N <= 0)
        return PP_OK;
    PP_LAUNCH(vocab_xent_bwd_kernel, (unsigned)N, 256, 0, CX(ctx)->stream)
    (probs, targets, Vl, v0, scale);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
