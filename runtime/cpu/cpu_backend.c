/* cpu_backend.c — the CPU backend: host memory, OpenBLAS GEMM, and the table that binds the
 * plain-C kernels of cpu_kernels.c / cpu_attention.c. It is the numerical reference the CUDA
 * backend is held to.
 *
 * OpenBLAS runs pp_backend_cpu_set_threads' count per call (1 unless told: ranks are threads,
 * each with its own backend, and ranks that spawned more BLAS threads than the cores hold would
 * oversubscribe them and blur the per-rank timings; pprun sets cores / ranks on the node). The
 * setting is process-wide in OpenBLAS; every CPU backend applies the same value, so creating
 * several is harmless. The backend's own kernels run on as many threads (its pool, cpu_pool.c,
 * the backend's context): the count it was created with, by default the same setting.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_pool.h"

/* 64-byte alignment: a cache line and a full AVX-512 vector. */
#define PP_CPU_ALIGN 64

static void *cpu_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    size_t rounded = (bytes + PP_CPU_ALIGN - 1) / PP_CPU_ALIGN * PP_CPU_ALIGN;
    return aligned_alloc(PP_CPU_ALIGN, rounded);
}

static void cpu_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static pp_status cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes && dst != src)
        memmove(dst, src, bytes);
    return PP_OK;
}

static pp_status cpu_zero(void *ctx, void *dst, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memset(dst, 0, bytes);
    return PP_OK;
}

pp_status pp_cpu_gemm(void *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc)
{
    (void)ctx;
    if (m <= 0 || n <= 0)
        return PP_OK;
    if (k <= 0) { /* an empty product: c = beta * c, which BLAS may skip */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                c[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(size_t)i * ldc + j];
        return PP_OK;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return PP_OK;
}

static void cpu_destroy(void *ctx)
{
    pp_cpu_pool_destroy(ctx);
}

/* The memory plan's kernel scratch (row_cpu.c: the attention backward's per-thread dS), made
 * now and held to: its pool's, counted as the backend's workspace. */
static pp_status cpu_scratch_reserve(void *ctx, size_t bytes)
{
    return pp_cpu_pool_fix_scratch(ctx, bytes);
}

static const pp_backend_ops cpu_ops = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .gemm = pp_cpu_gemm,
    .add_bias = pp_cpu_add_bias,
    .bias_grad = pp_cpu_bias_grad,
    .add = pp_cpu_add,
    .encoder_fwd = pp_cpu_encoder_fwd,
    .encoder_bwd = pp_cpu_encoder_bwd,
    .layernorm_fwd = pp_cpu_layernorm_fwd,
    .layernorm_bwd = pp_cpu_layernorm_bwd,
    .attention_fwd = pp_cpu_attention_fwd,
    .attention_bwd = pp_cpu_attention_bwd,
    .attention_scratch_bytes = pp_cpu_attention_scratch_bytes,
    .rmsnorm_fwd = pp_cpu_rmsnorm_fwd,
    .rmsnorm_bwd = pp_cpu_rmsnorm_bwd,
    .headnorm_fwd = pp_cpu_headnorm_fwd,
    .headnorm_bwd = pp_cpu_headnorm_bwd,
    .rope = pp_cpu_rope,
    .swiglu_fwd = pp_cpu_swiglu_fwd,
    .swiglu_bwd = pp_cpu_swiglu_bwd,
    .gelu_fwd = pp_cpu_gelu_fwd,
    .gelu_bwd = pp_cpu_gelu_bwd,
    .xent_fwd = pp_cpu_xent_fwd,
    .xent_bwd = pp_cpu_xent_bwd,
    .adamw = pp_cpu_adamw,
    .destroy = cpu_destroy,
    .scratch_reserve = cpu_scratch_reserve,
    .vocab_embed_fwd = pp_cpu_vocab_embed_fwd,
    .vocab_embed_bwd = pp_cpu_vocab_embed_bwd,
    .vocab_xent_max = pp_cpu_vocab_xent_max,
    .vocab_xent_exp = pp_cpu_vocab_xent_exp,
    .vocab_xent_norm = pp_cpu_vocab_xent_norm,
    .vocab_xent_bwd = pp_cpu_vocab_xent_bwd,
    .attention_cp_fwd = pp_cpu_attention_cp_fwd,
    .attention_cp_fwd_end = pp_cpu_attention_cp_fwd_end,
    .attention_cp_bwd = pp_cpu_attention_cp_bwd,
};

/* What every CPU backend created later applies (OpenBLAS's count is process-wide anyway), and
 * the threads of its own kernels. */
static int g_blas_threads = 1, g_kernel_threads = 1;

int pp_backend_cpu_set_threads(int n)
{
    if (n >= 1) {
        g_blas_threads = n;
        g_kernel_threads = n < PP_CPU_MAX_THREADS ? n : PP_CPU_MAX_THREADS;
        openblas_set_num_threads(n);
    }
    return openblas_get_num_threads();
}

int pp_backend_cpu_set_kernel_threads(int n)
{
    if (n >= 1)
        g_kernel_threads = n < PP_CPU_MAX_THREADS ? n : PP_CPU_MAX_THREADS;
    return g_kernel_threads;
}

int pp_backend_cpu_blas_threads(void)
{
    openblas_set_num_threads(g_blas_threads); /* as pp_backend_cpu_create_threads applies it */
    return openblas_get_num_threads();
}

int pp_backend_cpu_threads(void)
{
    return openblas_get_num_threads();
}

pp_status pp_backend_cpu_create_threads(int threads, pp_backend **out)
{
    *out = NULL;
    if (threads < 1 || threads > PP_CPU_MAX_THREADS)
        return PP_ERR(PP_ERR_INVALID, "cpu backend: %d kernel threads; expected 1 to %d", threads,
                      PP_CPU_MAX_THREADS);
    openblas_set_num_threads(g_blas_threads);
    pp_cpu_pool *pool = NULL;
    if (threads > 1) /* one thread: no pool, every kernel runs on the caller */
        PP_TRY(pp_cpu_pool_create(threads, &pool));
    PP_TRY(pp_backend_wrap("cpu", &cpu_ops, pool, out)); /* (which frees the pool if not) */
    pp_cpu_pool_set_owner(pool, *out);
    return PP_OK;
}

pp_status pp_backend_cpu_create(pp_backend **out)
{
    return pp_backend_cpu_create_threads(g_kernel_threads, out);
}

/* The makers of the CPU rows (row_cpu.c, row_cpu_staged.c: the same backend, staged or not by
 * the executor): host backends, fp32 whatever is asked (the plan and pprun check precisions
 * against the row). */
static pp_status make(int device, int precision, pp_backend **out)
{
    (void)device, (void)precision;
    return pp_backend_cpu_create(out);
}

const pp_backend_maker pp_backend_maker_cpu = {make, NULL};
const pp_backend_maker pp_backend_maker_cpu_staged = {make, NULL};
