/* cuda_sizes.h — the sizes of the CUDA backend's own buffers, written down once: its kernels
 * (the .cu files of runtime/cuda/) allocate with these functions and its row (row_cuda.c) adds the same up
 * for the memory plan. Pure arithmetic on sizes (pp_rt_sizes.h's shapes), no CUDA type: C
 * code includes it too.
 */
#ifndef PP_CUDA_SIZES_H
#define PP_CUDA_SIZES_H

#include <stddef.h>

#include "pp_rt_sizes.h"

/* cuBLAS workspace of a CUDA backend: 32 MiB, NVIDIA's recommendation for Hopper (cuBLAS docs,
 * cublasSetWorkspace), over-allocated by its alignment (256 B) so the pointer can be rounded up. */
#define PP_RT_CUBLAS_WS_BYTES ((size_t)32 << 20)
#define PP_RT_CUBLAS_WS_ALIGN ((size_t)256)
/* The CUDA gradient norm's grid (runtime/cuda/params_cuda.cu): at most this many blocks, whose
 * partial sums (one double each) go through the kernel scratch. */
#define PP_RT_SUMSQ_BLOCKS 256

/* The attention backward's scratch (attention_scratch_bytes): dA, then dS, of every one of the
 * NH heads of one batch row. */
static inline size_t pp_rt_size_attn_scratch_cuda(size_t NH, size_t T)
{
    return NH * T * T * 4;
}

/* ---- the CUDA backend's kernel scratch (pp_cuda_ws_reserve: one buffer that only grows) ---- */

/* A bf16 GEMM's operand copies: A (a elements, padded to 64) then B (b elements); 0 for an
 * operand read from a weight's bf16 copy. */
static inline size_t pp_rt_size_cuda_gemm_ws(size_t a, size_t b)
{
    return (pp_rt_size_align64(a) + b) * PP_RT_BF16_BYTES;
}
/* bf16 attention forward: q,k,v (qkv wide per row) of the whole micro-batch, then the
 * probabilities of its NH heads. */
static inline size_t pp_rt_size_cuda_attn_fwd_ws(size_t B, size_t T, size_t qkv, size_t NH)
{
    return (pp_rt_size_align64(B * T * qkv) + B * NH * T * T) * PP_RT_BF16_BYTES;
}
/* bf16 attention backward, per batch row: q,k,v (qkv wide) | dy (qd wide) | A | dS. */
static inline size_t pp_rt_size_cuda_attn_bwd_ws(size_t T, size_t qkv, size_t qd, size_t NH)
{
    return (pp_rt_size_align64(T * qkv) + pp_rt_size_align64(T * qd) +
            2 * pp_rt_size_align64(NH * T * T)) *
           PP_RT_BF16_BYTES;
}
/* The loss kernel's per-row losses (floats). */
static inline size_t pp_rt_size_cuda_xent_ws(size_t N)
{
    return N * 4;
}
/* The gradient norm's block partials (doubles). */
static inline size_t pp_rt_size_cuda_sumsq_ws(void)
{
    return (size_t)PP_RT_SUMSQ_BLOCKS * 8;
}

#endif
