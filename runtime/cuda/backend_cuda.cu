/* backend_cuda.cu — the CUDA backend: context (device, compute and communication streams, timer
 * events, cuBLAS handle), device memory, transfers, the GEMMs, and the table that binds the
 * kernels of kernels_cuda.cu and attention_cuda.cu.
 *
 * GEMMs. The table is row-major fp32; cuBLAS is column-major, so C = op(A) op(B) is computed as
 * C^T = op(B)^T op(A)^T (same pointers and leading dimensions, operands swapped). fp32 mode uses
 * cublasGemmEx with CUBLAS_COMPUTE_32F on fp32 data and the pedantic math mode: no TF32, the
 * same products as OpenBLAS up to summation order. bf16 mode converts A and B to packed bf16 in
 * the backend's workspace (one kernel each), then cublasGemmEx with bf16 inputs, fp32 output and
 * CUBLAS_COMPUTE_32F (fp32 accumulation). The fp32 table interface is kept; the price is one
 * conversion pass over each activation operand per GEMM. Weights are read from the bf16 copies
 * that AdamW leaves behind (weights_bf16.cu) once the first optimizer step has run.
 *
 * Not here: NCCL (the transports'), multi-device placement (one backend = one device).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.h"

/* The cuBLAS workspace's size is PP_RT_CUBLAS_WS_BYTES (cuda_sizes.h, with the plan's). */

/* ---- memory and transfers ---- */

/* Stream-ordered allocation from the device's memory pool (cudaMallocAsync, CUDA 11.2+), with
 * the pool told to keep what is freed (release threshold: unlimited): the stage allocates its
 * backward workspace and a slot of activations per micro-batch and frees them after, and a
 * plain cudaMalloc/cudaFree pair there would cost a device-wide synchronisation each time.
 * A buffer is usable at once on the compute stream; another stream (a transport's) must order
 * itself after the compute stream (an event) before touching it. */
static void *cuda_alloc(void *ctx, size_t bytes)
{
    pp_cuda_ctx *cx = (pp_cuda_ctx *)ctx;
    void *p = NULL;
    if (cudaSetDevice(cx->device) != cudaSuccess ||
        cudaMallocAsync(&p, bytes, cx->stream) != cudaSuccess) {
        (void)cudaGetLastError(); /* an out-of-memory is not sticky: clear it for later calls */
        return NULL;              /* backend.c reports PP_ERR_OOM with the sizes */
    }
    pp_cuda_track_alloc(cx, p, bytes);
    return p;
}

static void cuda_free(void *ctx, void *p)
{
    pp_cuda_ctx *cx = (pp_cuda_ctx *)ctx;
    pp_cuda_track_free(cx, p);          /* drops the bf16 weight copies of tensors in p */
    (void)cudaFreeAsync(p, cx->stream); /* after the queued kernels that use p */
}

static pp_status cuda_upload(void *ctx, void *dst, const void *src_host, size_t bytes)
{
    pp_cuda_ctx *cx = (pp_cuda_ctx *)ctx;
    if (!bytes)
        return PP_OK;
    pp_cuda_shadow_invalidate(cx, dst, bytes);
    /* In stream order, then wait: the caller may reuse its host buffer when this returns. */
    PP_CUDA_TRY(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, cx->stream));
    PP_CUDA_TRY(cudaStreamSynchronize(cx->stream));
    return PP_OK;
}

static pp_status cuda_download(void *ctx, void *dst_host, const void *src, size_t bytes)
{
    pp_cuda_ctx *cx = (pp_cuda_ctx *)ctx;
    if (!bytes)
        return PP_OK;
    PP_CUDA_TRY(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, cx->stream));
    PP_CUDA_TRY(cudaStreamSynchronize(cx->stream));
    return PP_OK;
}

static pp_status cuda_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    pp_cuda_ctx *cx = (pp_cuda_ctx *)ctx;
    if (!bytes || dst == src)
        return PP_OK;
    pp_cuda_shadow_invalidate(cx, dst, bytes);
    PP_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cx->stream));
    return PP_OK;
}

static pp_status cuda_zero(void *ctx, void *dst, size_t bytes)
{
    pp_cuda_ctx *cx = (pp_cuda_ctx *)ctx;
    if (!bytes)
        return PP_OK;
    pp_cuda_shadow_invalidate(cx, dst, bytes);
    PP_CUDA_TRY(cudaMemsetAsync(dst, 0, bytes, cx->stream));
    return PP_OK;
}

pp_status pp_cuda_ws_reserve(pp_cuda_ctx *cx, size_t bytes, void **out)
{
    if (bytes > cx->ws_bytes && cx->ws_fixed)
        return PP_ERR(PP_ERR_CHECK,
                      "cuda backend: a kernel needs %zu bytes of scratch, the memory plan "
                      "reserved %zu (runtime/plan/plan.c's cuda_scratch_bytes and the kernels "
                      "disagree)",
                      bytes, cx->ws_bytes);
    if (bytes > cx->ws_bytes) { /* the free is stream-ordered: queued users of the old one finish */
        pp_backend_free(cx->be, cx->ws, cx->ws_bytes, PP_MEM_WORKSPACE);
        cx->ws = NULL;
        cx->ws_bytes = 0;
        cx->ws = pp_backend_alloc(cx->be, bytes, PP_MEM_WORKSPACE);
        if (!cx->ws)
            return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
        cx->ws_bytes = bytes;
    }
    *out = cx->ws;
    return PP_OK;
}

/* The memory plan's kernel scratch, made now and held to (pp_backend_scratch_reserve). */
static pp_status cuda_scratch_reserve(void *ctx, size_t bytes)
{
    pp_cuda_ctx *cx = (pp_cuda_ctx *)ctx;
    void *ws;
    cx->ws_fixed = 0;
    PP_TRY(pp_cuda_ws_reserve(cx, bytes, &ws));
    cx->ws_fixed = 1;
    return PP_OK;
}

/* ---- GEMM ---- */

/* fp32 -> bf16 (round to nearest even). The weights pass through here at every bf16 GEMM, so
 * the contiguous case (ld = cols) is a flat loop, 16-byte loads where the pointers allow; the
 * strided case walks rows in y and columns in x (no 64-bit division per element). */
static __global__ void to_bf16_flat4(__nv_bfloat162 *dst, const float4 *src, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = src[i];
        dst[2 * i] = __floats2bfloat162_rn(v.x, v.y);
        dst[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
    }
}

static __global__ void to_bf16_flat(__nv_bfloat16 *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

static __global__ void to_bf16_2d(__nv_bfloat16 *dst, const float *src, int rows, int cols, int ld)
{
    for (int r = blockIdx.y; r < rows; r += gridDim.y)
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
            dst[(size_t)r * cols + c] = __float2bfloat16_rn(src[(size_t)r * ld + c]);
}

pp_status pp_cuda_to_bf16(pp_cuda_ctx *cx, __nv_bfloat16 *dst, const float *src, int rows, int cols,
                          int ld)
{
    size_t n = (size_t)rows * cols;
    if (!n)
        return PP_OK;
    if (ld != cols) {
        dim3 grid((unsigned)((cols + 255) / 256 < 64 ? (cols + 255) / 256 : 64),
                  (unsigned)(rows < 65535 ? rows : 65535));
        PP_LAUNCH(to_bf16_2d, grid, 256, 0, cx->stream)(dst, src, rows, cols, ld);
        PP_CUDA_LAUNCH_CHECK();
        return PP_OK;
    }
    size_t head = 0;
    if ((uintptr_t)src % 16 == 0 && (uintptr_t)dst % 8 == 0) {
        size_t n4 = n / 4;
        if (n4) {
            PP_LAUNCH(to_bf16_flat4, pp_cuda_blocks(n4, 256), 256, 0, cx->stream)
            ((__nv_bfloat162 *)dst, (const float4 *)src, n4);
            PP_CUDA_LAUNCH_CHECK();
        }
        head = n4 * 4;
    }
    if (head < n) {
        PP_LAUNCH(to_bf16_flat, pp_cuda_blocks(n - head, 256), 256, 0, cx->stream)
        (dst + head, src + head, n - head);
        PP_CUDA_LAUNCH_CHECK();
    }
    return PP_OK;
}

pp_status pp_cuda_gemm_batched(pp_cuda_ctx *cx, int ta, int tb, int m, int n, int k, float alpha,
                               const void *a, int lda, long long sa, const void *b, int ldb,
                               long long sb, float beta, float *c, int ldc, long long sc, int batch,
                               pp_cuda_dtype ab)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return PP_OK;
    if (k <= 0) {
        for (int i = 0; i < batch; i++)
            PP_TRY(pp_cuda_scale_matrix(cx, c + (size_t)i * sc, m, n, ldc, beta));
        return PP_OK;
    }
    cudaDataType_t t = ab == PP_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* row-major C(m,n) = op(A) op(B)  <=>  column-major C^T(n,m) = op(B)^T op(A)^T */
    if (batch == 1)
        PP_CUBLAS_TRY(cublasGemmEx(cx->blas, opb, opa, n, m, k, &alpha, b, t, ldb, a, t, lda, &beta,
                                   c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        PP_CUBLAS_TRY(cublasGemmStridedBatchedEx(cx->blas, opb, opa, n, m, k, &alpha, b, t, ldb, sb,
                                                 a, t, lda, sa, &beta, c, CUDA_R_32F, ldc, sc,
                                                 batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return PP_OK;
}

static pp_status cuda_gemm(void *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
                           const float *a, int lda, const float *b, int ldb, float beta, float *c,
                           int ldc)
{
    pp_cuda_ctx *cx = (pp_cuda_ctx *)ctx;
    if (cx->precision == PP_PREC_FP32 || m <= 0 || n <= 0 || k <= 0)
        return pp_cuda_gemm_batched(cx, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0,
                                    beta, c, ldc, 0, 1, PP_CUDA_F32);
    /* bf16: the stored shapes of A and B (rows x cols with their leading dimensions); a weight
     * with a valid bf16 copy is read from it, anything else is converted into the workspace */
    int ar = trans_a ? k : m, ac = trans_a ? m : k;
    int br = trans_b ? n : k, bc = trans_b ? k : n;
    const __nv_bfloat16 *a16 = pp_cuda_shadow_find(cx, a, (size_t)(ar - 1) * lda + ac);
    const __nv_bfloat16 *b16 = pp_cuda_shadow_find(cx, b, (size_t)(br - 1) * ldb + bc);
    size_t na = a16 ? 0 : pp_rt_size_align64((size_t)ar * ac), nb = b16 ? 0 : (size_t)br * bc;
    if (na + nb > 0) {
        void *ws;
        PP_TRY(pp_cuda_ws_reserve(
            cx, pp_rt_size_cuda_gemm_ws(a16 ? 0 : (size_t)ar * ac, nb), &ws)); /* = (na + nb) */
        __nv_bfloat16 *w16 = (__nv_bfloat16 *)ws;
        if (!a16) {
            PP_TRY(pp_cuda_to_bf16(cx, w16, a, ar, ac, lda));
            a16 = w16;
            lda = ac;
        }
        if (!b16) {
            PP_TRY(pp_cuda_to_bf16(cx, w16 + na, b, br, bc, ldb));
            b16 = w16 + na;
            ldb = bc;
        }
    }
    return pp_cuda_gemm_batched(cx, trans_a, trans_b, m, n, k, alpha, a16, lda, 0, b16, ldb, 0,
                                beta, c, ldc, 0, 1, PP_CUDA_BF16);
}

/* ---- the table ---- */

static void cuda_destroy(void *ctx)
{
    pp_cuda_ctx *cx = (pp_cuda_ctx *)ctx;
    if (!cx)
        return;
    (void)cudaSetDevice(cx->device);
    /* The workspaces were counted in cx->be, which is being destroyed with us: free them raw,
     * then hand the pool's cached memory back to the device. */
    if (cx->stream) {
        pp_cuda_shadows_fini(cx);
        if (cx->ws)
            (void)cudaFreeAsync(cx->ws, cx->stream);
        if (cx->blas_ws)
            (void)cudaFreeAsync(cx->blas_ws, cx->stream);
        (void)cudaStreamSynchronize(cx->stream);
    }
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, cx->device) == cudaSuccess)
        (void)cudaMemPoolTrimTo(pool, 0);
    if (cx->blas)
        (void)cublasDestroy(cx->blas);
    if (cx->ev_start)
        (void)cudaEventDestroy(cx->ev_start);
    if (cx->ev_stop)
        (void)cudaEventDestroy(cx->ev_stop);
    if (cx->comm)
        (void)cudaStreamDestroy(cx->comm);
    if (cx->stream)
        (void)cudaStreamDestroy(cx->stream);
    free(cx->host_rows);
    free(cx);
}

/* ---- the table's device ops: what the executor asks without naming CUDA ---- */

static pp_status cuda_sync(void *ctx)
{
    pp_cuda_ctx *cx = (pp_cuda_ctx *)ctx;
    PP_CUDA_TRY(cudaSetDevice(cx->device));
    PP_CUDA_TRY(cudaStreamSynchronize(cx->stream));
    PP_CUDA_TRY(cudaStreamSynchronize(cx->comm));
    return PP_OK;
}

static pp_status cuda_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes)
{
    PP_CUDA_TRY(cudaSetDevice(((pp_cuda_ctx *)ctx)->device));
    PP_CUDA_TRY(cudaMemGetInfo(free_bytes, total_bytes));
    return PP_OK;
}

static pp_status cuda_marks_create(void *ctx, int n, void **marks)
{
    pp_cuda_marks *mk = NULL;
    pp_status st = pp_cuda_marks_create(((pp_cuda_ctx *)ctx)->be, n, &mk);
    *marks = mk;
    return st;
}

static pp_status cuda_marks_record(void *marks, int i)
{
    return pp_cuda_marks_record((pp_cuda_marks *)marks, i);
}

static pp_status cuda_marks_read(void *marks, double *seconds)
{
    return pp_cuda_marks_read((pp_cuda_marks *)marks, seconds);
}

static void cuda_marks_destroy(void *marks)
{
    pp_cuda_marks_destroy((pp_cuda_marks *)marks);
}

static const pp_backend_ops cuda_ops = {
    /* .alloc = */ cuda_alloc,
    /* .free = */ cuda_free,
    /* .upload = */ cuda_upload,
    /* .download = */ cuda_download,
    /* .copy = */ cuda_copy,
    /* .zero = */ cuda_zero,
    /* .gemm = */ cuda_gemm,
    /* .add_bias = */ pp_cuda_add_bias,
    /* .bias_grad = */ pp_cuda_bias_grad,
    /* .add = */ pp_cuda_add,
    /* .encoder_fwd = */ pp_cuda_encoder_fwd,
    /* .encoder_bwd = */ pp_cuda_encoder_bwd,
    /* .layernorm_fwd = */ pp_cuda_layernorm_fwd,
    /* .layernorm_bwd = */ pp_cuda_layernorm_bwd,
    /* .rmsnorm_fwd = */ pp_cuda_rmsnorm_fwd,
    /* .rmsnorm_bwd = */ pp_cuda_rmsnorm_bwd,
    /* .headnorm_fwd = */ pp_cuda_headnorm_fwd,
    /* .headnorm_bwd = */ pp_cuda_headnorm_bwd,
    /* .attention_fwd = */ pp_cuda_attention_fwd,
    /* .attention_bwd = */ pp_cuda_attention_bwd,
    /* .attention_scratch_bytes = */ pp_cuda_attention_scratch_bytes,
    /* .rope = */ pp_cuda_rope,
    /* .swiglu_fwd = */ pp_cuda_swiglu_fwd,
    /* .swiglu_bwd = */ pp_cuda_swiglu_bwd,
    /* .gelu_fwd = */ pp_cuda_gelu_fwd,
    /* .gelu_bwd = */ pp_cuda_gelu_bwd,
    /* .xent_fwd = */ pp_cuda_xent_fwd,
    /* .xent_bwd = */ pp_cuda_xent_bwd,
    /* .adamw = */ pp_cuda_adamw,
    /* .destroy = */ cuda_destroy,
    /* .init_normal = */ pp_cuda_init_normal,
    /* .sum_sq = */ pp_cuda_sum_sq,
    /* .host_alloc = */ pp_cuda_host_alloc,
    /* .host_free = */ pp_cuda_host_free,
    /* .device_memory = */ 1,
    /* .sync = */ cuda_sync,
    /* .mem_info = */ cuda_mem_info,
    /* .marks_create = */ cuda_marks_create,
    /* .marks_record = */ cuda_marks_record,
    /* .marks_read = */ cuda_marks_read,
    /* .marks_destroy = */ cuda_marks_destroy,
    /* .scratch_reserve = */ cuda_scratch_reserve,
    /* .vocab_embed_fwd = */ pp_cuda_vocab_embed_fwd,
    /* .vocab_embed_bwd = */ pp_cuda_vocab_embed_bwd,
    /* .vocab_xent_max = */ pp_cuda_vocab_xent_max,
    /* .vocab_xent_exp = */ pp_cuda_vocab_xent_exp,
    /* .vocab_xent_norm = */ pp_cuda_vocab_xent_norm,
    /* .vocab_xent_bwd = */ pp_cuda_vocab_xent_bwd,
    /* context parallelism's ring attention (attention_cp_cuda.cu), fp32 */
    /* .attention_cp_fwd = */ pp_cuda_attention_cp_fwd,
    /* .attention_cp_fwd_end = */ pp_cuda_attention_cp_fwd_end,
    /* .attention_cp_bwd = */ pp_cuda_attention_cp_bwd,
    /* .weights_written = */ pp_cuda_weights_written,
};

/* Streams, events and the cuBLAS handle of a fresh context (on failure the caller destroys it). */
static pp_status ctx_init(pp_cuda_ctx *cx)
{
    cudaDeviceProp prop;
    PP_CUDA_TRY(cudaSetDevice(cx->device));
    PP_CUDA_TRY(cudaGetDeviceProperties(&prop, cx->device));
    cx->sms = prop.multiProcessorCount;
    PP_CUDA_TRY(cudaStreamCreateWithFlags(&cx->stream, cudaStreamNonBlocking));
    PP_CUDA_TRY(cudaStreamCreateWithFlags(&cx->comm, cudaStreamNonBlocking));
    PP_CUDA_TRY(cudaEventCreate(&cx->ev_start));
    PP_CUDA_TRY(cudaEventCreate(&cx->ev_stop));
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    PP_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, cx->device));
    PP_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    PP_CUBLAS_TRY(cublasCreate(&cx->blas));
    PP_CUBLAS_TRY(cublasSetStream(cx->blas, cx->stream));
    /* fp32: pedantic math forbids TF32 and other reduced-precision shortcuts; bf16 inputs are
     * requested explicitly per call, which the default mode allows. */
    PP_CUBLAS_TRY(cublasSetMathMode(cx->blas, cx->precision == PP_PREC_FP32 ? CUBLAS_PEDANTIC_MATH
                                                                            : CUBLAS_DEFAULT_MATH));
    return PP_OK;
}

/* The cuBLAS workspace, allocated through the accounting once the backend exists. */
static pp_status blas_ws_init(pp_cuda_ctx *cx)
{
    /* cuBLAS wants the workspace 256-byte aligned: over-allocate and round the pointer up
     * rather than rely on the pool's alignment, which its documentation does not state. */
    cx->blas_ws_bytes = PP_RT_CUBLAS_WS_BYTES + PP_RT_CUBLAS_WS_ALIGN;
    cx->blas_ws = pp_backend_alloc(cx->be, cx->blas_ws_bytes, PP_MEM_WORKSPACE);
    if (!cx->blas_ws)
        return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
    uintptr_t p = ((uintptr_t)cx->blas_ws + PP_RT_CUBLAS_WS_ALIGN - 1) / PP_RT_CUBLAS_WS_ALIGN *
                  PP_RT_CUBLAS_WS_ALIGN;
    PP_CUBLAS_TRY(cublasSetWorkspace(cx->blas, (void *)p, PP_RT_CUBLAS_WS_BYTES));
    return PP_OK;
}

extern "C" pp_status pp_backend_cuda_create(int device, int precision, pp_backend **out)
{
    *out = NULL;
    if (precision != PP_PREC_FP32 && precision != PP_PREC_BF16)
        return PP_ERR(PP_ERR_INVALID,
                      "cuda backend: precision %d is not PP_PREC_FP32 (0) or PP_PREC_BF16 (1)",
                      precision);
    if (device < 0)
        return PP_ERR(PP_ERR_INVALID, "cuda backend: device index %d is negative", device);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return PP_ERR(PP_ERR_UNSUPPORTED, "no CUDA device: %s",
                      e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
    }
    if (device >= count)
        return PP_ERR(PP_ERR_INVALID, "cuda backend: device %d does not exist (%d device%s)",
                      device, count, count == 1 ? "" : "s");
    pp_cuda_ctx *cx = (pp_cuda_ctx *)pp_calloc(1, sizeof *cx);
    if (!cx)
        return PP_ERR(PP_ERR_NOMEM, "cuda backend: cannot allocate its context");
    cx->device = device;
    cx->precision = precision;
    pp_status st = ctx_init(cx);
    if (st != PP_OK) {
        cuda_destroy(cx);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    PP_TRY(pp_backend_wrap("cuda", &cuda_ops, cx, out)); /* destroys cx on failure */
    cx->be = *out;
    st = blas_ws_init(cx);
    if (st != PP_OK) {
        pp_backend_destroy(*out);
        *out = NULL;
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    return PP_OK;
}

/* ---- CUDA-only queries ---- */

static pp_status cuda_ctx_of(pp_backend *be, pp_cuda_ctx **out)
{
    if (!be || be->ops != &cuda_ops)
        return PP_ERR(PP_ERR_UNSUPPORTED, "backend \"%s\" is not a CUDA backend",
                      pp_backend_name(be));
    *out = (pp_cuda_ctx *)be->ctx;
    PP_CUDA_TRY(cudaSetDevice((*out)->device));
    return PP_OK;
}

extern "C" pp_status pp_backend_cuda_sync(pp_backend *be)
{
    pp_cuda_ctx *cx = NULL;
    PP_TRY(cuda_ctx_of(be, &cx));
    return cuda_sync(cx);
}

extern "C" pp_status pp_backend_cuda_timer_start(pp_backend *be)
{
    pp_cuda_ctx *cx = NULL;
    PP_TRY(cuda_ctx_of(be, &cx));
    PP_CUDA_TRY(cudaEventRecord(cx->ev_start, cx->stream));
    return PP_OK;
}

extern "C" pp_status pp_backend_cuda_timer_stop(pp_backend *be, double *ms)
{
    pp_cuda_ctx *cx = NULL;
    float f = 0.0f;
    PP_TRY(cuda_ctx_of(be, &cx));
    PP_CUDA_TRY(cudaEventRecord(cx->ev_stop, cx->stream));
    PP_CUDA_TRY(cudaEventSynchronize(cx->ev_stop));
    PP_CUDA_TRY(cudaEventElapsedTime(&f, cx->ev_start, cx->ev_stop));
    *ms = f;
    return PP_OK;
}

extern "C" pp_status pp_backend_cuda_mem_info(pp_backend *be, size_t *free_bytes,
                                              size_t *total_bytes)
{
    pp_cuda_ctx *cx = NULL;
    PP_TRY(cuda_ctx_of(be, &cx));
    return cuda_mem_info(cx, free_bytes, total_bytes);
}

extern "C" pp_status pp_backend_cuda_streams(pp_backend *be, int *device, void **compute,
                                             void **comm)
{
    pp_cuda_ctx *cx = NULL;
    PP_TRY(cuda_ctx_of(be, &cx));
    *device = cx->device;
    *compute = (void *)cx->stream;
    *comm = (void *)cx->comm;
    return PP_OK;
}

extern "C" int pp_cuda_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no device: not an error of a later call */
        return 0;
    }
    return count;
}

/* The row's maker (row_cuda.c, runtime/backend.h); cuda_none.c's stands in without CUDA. */
extern "C" const pp_backend_maker pp_backend_maker_cuda = {pp_backend_cuda_create,
                                                           pp_cuda_device_count};
