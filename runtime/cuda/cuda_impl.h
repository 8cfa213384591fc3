/* cuda_impl.h — private to runtime/cuda/: the CUDA backend's context, its error macros and the
 * kernel entry points shared by its three translation units (backend_cuda.cu: memory, streams,
 * GEMM, the table; kernels_cuda.cu: element-wise and row-wise kernels; attention_cuda.cu).
 *
 * Only .cu files include this header: it names CUDA and cuBLAS types. Code above the backend sees
 * pp_backend_cuda_create() in pp_rt.h and nothing else (no CUDA type crosses that line).
 * Every CUDA / cuBLAS call goes through PP_CUDA_CHECK / PP_CUBLAS_CHECK, which turn a failure
 * into a pp_status with the call's text and file:line (PP_ERR_OOM for out-of-memory, so the
 * tuner can classify a trial); every kernel launch is followed by PP_CUDA_LAUNCH_CHECK().
 */
#ifndef PP_RT_CUDA_IMPL_H
#define PP_RT_CUDA_IMPL_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_sizes.h"
#include "cuda_status.h"
#include "pp_common.h"
#include "pp_rt.h"
extern "C" {
#include "../backend.h" /* no C++ guards of its own; its includes above are already in */
}

/* ---- errors: PP_CUDA_CHECK / PP_CUBLAS_CHECK and their _TRY forms (cuda_status.h) ---- */
/* A kernel launch: PP_LAUNCH(kernel, grid, block, smem, stream)(args) is
 * kernel<<<grid, block, smem, stream>>>(args) under nvcc. Under the CPU emulation of the tests
 * (PP_CUDA_EMU: the same sources compiled as host C++ against tests/cuda_emu/), it runs the
 * kernel's blocks one after another on the calling thread, each block's threads as fibers. */
#ifdef PP_CUDA_EMU
#define PP_LAUNCH(kernel, grid, block, smem, stream)                                               \
    pp_emu_launcher(#kernel, kernel, grid, block, smem, stream)
#else
#define PP_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#endif
/* After every launch: a bad configuration is reported here, at the launch's line. */
#define PP_CUDA_LAUNCH_CHECK()                                                                     \
    PP_TRY(pp_cuda_status(cudaGetLastError(), "kernel launch", __FILE__, __LINE__))

/* ---- the context ---- */
typedef struct {
    void *p;
    size_t bytes;
} pp_cuda_alloc_rec; /* a live allocation of cuda_alloc */

typedef struct {
    const float *w;     /* an fp32 weight tensor (as passed to adamw) */
    size_t n;           /* its elements */
    __nv_bfloat16 *w16; /* its bf16 copy, same layout, PP_MEM_WEIGHTS */
    int valid;          /* 0 after a write to w other than adamw's */
} pp_cuda_shadow;

typedef struct {
    int device;
    int precision;       /* PP_PREC_FP32 or PP_PREC_BF16 */
    int sms;             /* multiprocessors, for grid sizing */
    cudaStream_t stream; /* compute: every kernel and GEMM of the table runs here, in order */
    cudaStream_t comm;   /* communication: for transports to overlap transfers with compute */
    cudaEvent_t ev_start, ev_stop; /* the timer of pp_backend_cuda_timer_* (compute stream) */
    cublasHandle_t blas;
    pp_backend *be; /* back pointer: the workspaces below are counted in its accounting */
    void *ws;       /* scratch of the kernels (bf16 operand copies, per-row losses) */
    size_t ws_bytes;
    int ws_fixed;   /* the memory plan's size, reserved (pp_backend_scratch_reserve): no growing */
    void *blas_ws; /* cuBLAS workspace (cublasSetWorkspace), PP_MEM_WORKSPACE */
    size_t blas_ws_bytes;
    float *host_rows; /* host copy of per-row losses (xent_fwd), grown as needed */
    size_t host_rows_n;
    /* bf16 mode: bf16 copies of the weights (weights_bf16.cu) and the live allocations, whose
     * sizes tell which copies a free makes stale */
    pp_cuda_alloc_rec *allocs;
    size_t n_allocs, cap_allocs;
    pp_cuda_shadow *shadows;
    size_t n_shadows, cap_shadows;
    int shadows_off; /* host bookkeeping failed once: no copies, convert at every GEMM */
} pp_cuda_ctx;

/* Scratch of at least `bytes` (grown, never shrunk; counted under PP_MEM_WORKSPACE). Each call
 * may hand out the same memory: a user's kernels must be queued on the compute stream before the
 * next user's (stream order keeps them apart). */
pp_status pp_cuda_ws_reserve(pp_cuda_ctx *cx, size_t bytes, void **out);

/* 1-D launch geometry: blocks of `threads` covering n elements, capped for grid-stride loops. */
static inline unsigned pp_cuda_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    const size_t cap = 65535u * 8u;
    return (unsigned)(b == 0 ? 1 : b < cap ? b : cap);
}

/* The sizes of every buffer the backend asks for (workspaces, scratch, bf16 copies) are
 * cuda_sizes.h's and pp_rt_sizes.h's, shared with the memory plan (through row_cuda.c); bf16
 * elements there are this type's size. */
static_assert(sizeof(__nv_bfloat16) == PP_RT_BF16_BYTES, "bf16 is 2 bytes");

/* Sum and maximum over the 32 lanes of a warp (butterfly shuffles: every lane gets the result). */
static __device__ __forceinline__ float pp_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float pp_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide reduction through shared memory (32 warps at most). */
static __device__ __forceinline__ float pp_block_reduce(float v, int is_max)
{
    __shared__ float part[32];
    __shared__ float result;
    int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    v = is_max ? pp_warp_max(v) : pp_warp_sum(v);
    if (lane == 0)
        part[w] = v;
    __syncthreads();
    if (w == 0) {
        float u = lane < nw ? part[lane] : (is_max ? -INFINITY : 0.0f);
        u = is_max ? pp_warp_max(u) : pp_warp_sum(u);
        if (lane == 0)
            result = u;
    }
    __syncthreads();
    return result;
}

/* ---- bf16 copies of the weights (weights_bf16.cu) ----
 * In bf16 mode every GEMM needs its operands in bf16. Activations change at every call, but a
 * weight changes only when the optimizer steps, so AdamW writes a bf16 copy of each tensor it
 * updates (fused into its kernel) and a GEMM whose operand lies inside a valid copy reads the
 * copy instead of converting (Megatron-LM keeps bf16 parameters beside fp32 main parameters the
 * same way). The stage writes weights only through upload and adamw; upload, copy, zero and add
 * mark any copy they write into stale, and a free drops the copies inside the freed block. The
 * sharded optimizer steps slices (adamw with `part`: no copy) and gathers whole tensors with
 * copy, then weights_written rewrites each tensor's copy from its gathered fp32. */
void pp_cuda_track_alloc(pp_cuda_ctx *cx, void *p, size_t bytes);
void pp_cuda_track_free(pp_cuda_ctx *cx, void *p);
void pp_cuda_shadow_invalidate(pp_cuda_ctx *cx, const void *dst, size_t bytes);
/* The copy adamw is about to write for w(n) (created on first use, then valid), or NULL
 * (fp32 mode, or bookkeeping off). PP_ERR_OOM when the copy cannot be allocated. */
pp_status pp_cuda_shadow_for_update(pp_cuda_ctx *cx, const float *w, size_t n, __nv_bfloat16 **w16);
/* The valid copy of x[0, span) (same layout), or NULL. */
const __nv_bfloat16 *pp_cuda_shadow_find(const pp_cuda_ctx *cx, const float *x, size_t span);
void pp_cuda_shadows_fini(pp_cuda_ctx *cx); /* at destroy: frees the copies and the tables */

/* ---- GEMM (backend_cuda.cu) ---- */
/* Element type of a GEMM operand: fp32 everywhere in fp32 mode; bf16 copies in bf16 mode. */
typedef enum { PP_CUDA_F32, PP_CUDA_BF16 } pp_cuda_dtype;

/* Row-major strided-batched c_i(m,n) = alpha op(a_i) op(b_i) + beta c_i with a_i = a + i*sa etc.
 * (strides in elements), a and b of type `ab`, c fp32, fp32 accumulation. */
pp_status pp_cuda_gemm_batched(pp_cuda_ctx *cx, int ta, int tb, int m, int n, int k, float alpha,
                               const void *a, int lda, long long sa, const void *b, int ldb,
                               long long sb, float beta, float *c, int ldc, long long sc, int batch,
                               pp_cuda_dtype ab);
/* dst(rows, cols) packed bf16 <- src(rows, cols) fp32 with leading dimension ld. */
pp_status pp_cuda_to_bf16(pp_cuda_ctx *cx, __nv_bfloat16 *dst, const float *src, int rows, int cols,
                          int ld);

/* ---- kernels (kernels_cuda.cu), one per table entry; backend.h says what each computes ---- */
pp_status pp_cuda_add_bias(void *ctx, float *y, const float *bias, int rows, int cols);
pp_status pp_cuda_bias_grad(void *ctx, float *db, const float *dy, int rows, int cols);
pp_status pp_cuda_add(void *ctx, float *y, const float *x, size_t n);
pp_status pp_cuda_encoder_fwd(void *ctx, float *out, const int32_t *tok, const float *wte,
                              const float *wpe, int B, int T, int C);
pp_status pp_cuda_encoder_bwd(void *ctx, float *dwte, float *dwpe, const float *dout,
                              const int32_t *tok, int B, int T, int C);
pp_status pp_cuda_layernorm_fwd(void *ctx, float *out, float *mean, float *rstd, const float *x,
                                const float *g, const float *b, int N, int C, float eps);
pp_status pp_cuda_layernorm_bwd(void *ctx, float *dx, float *dg, float *db, const float *dout,
                                const float *x, const float *g, const float *mean,
                                const float *rstd, int N, int C);
pp_status pp_cuda_gelu_fwd(void *ctx, float *y, const float *x, size_t n);
pp_status pp_cuda_gelu_bwd(void *ctx, float *dx, const float *x, const float *dy, size_t n);
pp_status pp_cuda_xent_fwd(void *ctx, float *probs, const int32_t *targets, int N, int V,
                           float *mean_loss_host);
pp_status pp_cuda_xent_bwd(void *ctx, float *probs, const int32_t *targets, int N, int V,
                           float scale);
pp_status pp_cuda_adamw(void *ctx, float *w, const float *g, float *m, float *v, size_t n,
                        const pp_adamw_scalars *s);
pp_status pp_cuda_weights_written(void *ctx, const float *w, size_t n);
/* vocab_cuda.cu: vocabulary parallelism's embedding and cross-entropy pieces */
pp_status pp_cuda_vocab_embed_fwd(void *ctx, float *out, const int32_t *tok, const float *wte,
                                  int N, int C, int v0, int nv);
pp_status pp_cuda_vocab_embed_bwd(void *ctx, float *dwte, const float *dout, const int32_t *tok,
                                  int N, int C, int v0, int nv);
pp_status pp_cuda_vocab_xent_max(void *ctx, float *mx, const float *logits, int N, int Vl, int nv);
pp_status pp_cuda_vocab_xent_exp(void *ctx, float *probs, float *stats, const float *mx, int t,
                                 const int32_t *targets, int N, int Vl, int v0, int nv);
pp_status pp_cuda_vocab_xent_norm(void *ctx, float *probs, const float *sums, int N, int Vl);
pp_status pp_cuda_vocab_xent_bwd(void *ctx, float *probs, const int32_t *targets, int N, int Vl,
                                 int v0, float scale);
/* c(m, n) = beta * c (0 when beta = 0, whatever c held): an empty product (k = 0). */
pp_status pp_cuda_scale_matrix(pp_cuda_ctx *cx, float *c, int m, int n, int ldc, float beta);

/* ---- optional entries (params_cuda.cu): device-side parameter fill, sum of squares, pinned
 * host memory ---- */
pp_status pp_cuda_init_normal(void *ctx, float *dst, size_t n, uint64_t key, double std);
pp_status pp_cuda_sum_sq(void *ctx, const float *x, size_t n, double *acc);
void *pp_cuda_host_alloc(void *ctx, size_t bytes);
void pp_cuda_host_free(void *ctx, void *p);

/* ---- attention (attention_cuda.cu) ---- */
pp_status pp_cuda_attention_fwd(void *ctx, float *y, float *att, const float *qkv, int B, int T,
                                int NH, int NKV, int hd);
pp_status pp_cuda_attention_bwd(void *ctx, float *dqkv, float *scratch, const float *dy,
                                const float *att, const float *qkv, int B, int T, int NH, int NKV,
                                int hd);
size_t pp_cuda_attention_scratch_bytes(void *ctx, int B, int T, int C, int NH);
/* attention_cp_cuda.cu: context parallelism's ring attention (backend.h), fp32 */
pp_status pp_cuda_attention_cp_fwd(void *ctx, float *y, float *att, float *ml, float *scratch,
                                   const float *qkv, const float *kv, int B, int T, int NH,
                                   int NKV, int hd, int cp, int cpr, int owner);
pp_status pp_cuda_attention_cp_fwd_end(void *ctx, float *y, float *att, const float *ml, int B,
                                       int T, int NH, int hd, int cp, int cpr);
pp_status pp_cuda_attention_cp_bwd(void *ctx, float *dqkv, float *dkv, float *dsum,
                                   float *scratch, const float *dy, const float *y,
                                   const float *att, const float *qkv, const float *kv, int B,
                                   int T, int NH, int NKV, int hd, int cp, int cpr, int owner);

/* ---- the Llama-family block's kernels (llama_cuda.cu) ---- */
/* headnorm_cuda.cu */
pp_status pp_cuda_headnorm_fwd(void *ctx, float *x, float *xin, float *rstd, const float *gq,
                               const float *gk, int N, int nq, int nk, int hd, int ld, float eps);
pp_status pp_cuda_headnorm_bwd(void *ctx, float *dx, float *dgq, float *dgk, const float *xin,
                               const float *rstd, const float *gq, const float *gk, int N, int nq,
                               int nk, int hd, int ld);
pp_status pp_cuda_rmsnorm_fwd(void *ctx, float *out, float *rstd, const float *x, const float *g,
                              int N, int C, float eps);
pp_status pp_cuda_rmsnorm_bwd(void *ctx, float *dx, float *dg, const float *dout, const float *x,
                              const float *g, const float *rstd, int N, int C);
pp_status pp_cuda_rope(void *ctx, float *x, int N, int T, int nh, int hd, int ld, const pp_rope *r,
                       int dir);
pp_status pp_cuda_swiglu_fwd(void *ctx, float *y, const float *x, int N, int F);
pp_status pp_cuda_swiglu_bwd(void *ctx, float *dx, const float *x, const float *dy, int ldy, int N,
                             int F);

#endif
