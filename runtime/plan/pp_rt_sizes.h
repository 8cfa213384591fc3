/* pp_rt_sizes.h — the sizes of the runtime's buffers, written down once. The stages and the
 * backends (runtime/stage*.c, runtime/cpu/, runtime/cuda/) allocate with these functions, and
 * the memory plan (plan.c) adds the same functions up, so the plan cannot drift from what is
 * allocated. Pure arithmetic on sizes: no allocation, no CUDA type (the .cu files include it
 * too). Shapes: B micro-batch size, T sequence length, C hidden, F MLP width, V vocabulary,
 * NH heads, N = B*T rows. Each name says whether it counts elements or bytes.
 */
#ifndef PP_RT_SIZES_H
#define PP_RT_SIZES_H

#include <stddef.h>

/* cuBLAS workspace of a CUDA backend: 32 MiB, NVIDIA's recommendation for Hopper (cuBLAS docs,
 * cublasSetWorkspace), over-allocated by its alignment (256 B) so the pointer can be rounded up. */
#define PP_RT_CUBLAS_WS_BYTES ((size_t)32 << 20)
#define PP_RT_CUBLAS_WS_ALIGN ((size_t)256)
/* The CUDA gradient norm's grid (runtime/cuda/params_cuda.cu): at most this many blocks, whose
 * partial sums (one double each) go through the kernel scratch. */
#define PP_RT_SUMSQ_BLOCKS 256
/* Bytes of a bf16 element (the CUDA backend's GEMM operands and weight copies). */
#define PP_RT_BF16_BYTES ((size_t)2)

/* Elements to the next multiple of 64: bf16 operands carved from one workspace start on
 * 128-byte boundaries, which cuBLAS's tensor-core kernels and 16-byte loads want. */
static inline size_t pp_rt_size_align64(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* ---- parameters (runtime/stage.c) ---- */

/* Tensor parallelism (runtime/stage*.c, Megatron-LM's split): a block's qkv and fc are
 * column-parallel (t shards of their output rows, qkv by heads), its two projections
 * row-parallel (t shards of their input columns, the bias whole on every rank), LayerNorms
 * whole; t = 1 is no split. C/t, NH/t and F/t are whole numbers (the stage checks it). */

/* Floats of one pre-LN block on one of t tensor-parallel ranks: ln1 (2C), qkv (3C*C/t +
 * 3C/t), proj (C*C/t + C), ln2 (2C), fc (F*C/t + F/t), fc proj (C*F/t + C). */
static inline size_t pp_rt_size_block_params(size_t C, size_t F, size_t t)
{
    return 2 * C + (3 * C * C + 3 * C) / t + C * C / t + C + 2 * C + (F * C + F) / t + C * F / t +
           C;
}

/* Floats of a stage on one of t tensor-parallel ranks: its blocks, the token (V*C) and
 * position (seq*C) embedding on a pipe's first stage, final LN (2C) and, on a last stage
 * without the embedding, the head's copy of the tied embedding (V*C). The embedding and head
 * are replicated on every tensor-parallel rank (stage.c says why). seq: the model's maximum
 * length (learned positions). */
static inline size_t pp_rt_size_stage_params(size_t layers, int has_embed, int has_head, size_t C,
                                        size_t F, size_t V, size_t seq, size_t t)
{
    size_t n = layers * pp_rt_size_block_params(C, F, t);
    if (has_embed)
        n += V * C + seq * C;
    if (has_head)
        n += 2 * C + (has_embed ? 0 : V * C);
    return n;
}

/* ---- activations saved for backward: one slot per in-flight micro-batch ---- */

/* Sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2; runtime/stage*.c): sp = t splits
 * the LayerNorm / residual regions of a micro-batch's N tokens over the t tensor-parallel ranks
 * (rank i holds rows [i N/t, (i+1) N/t) of the (B, T, C) layout), sp = 1 is no split; the
 * activation a stage sends or receives is then the rank's N/sp rows. */

/* Floats one block saves on one of t tensor-parallel ranks (runtime/stage.c's slot layout):
 * x, ln1, res2, ln2 (4 N C / sp: whole, or the rank's tokens under sequence parallelism), qkv
 * (3 N C/t) and atty (N C/t) of the rank's heads, the MLP's fc output and GELU output
 * (2 N F/t), the two LayerNorms' mean and rstd (4 N / sp), and the attention probabilities of
 * the rank's heads (B, NH/t, T, T). */
static inline size_t pp_rt_size_act_layer_floats(size_t B, size_t T, size_t C, size_t F, size_t NH,
                                                 size_t t, size_t sp)
{
    size_t N = B * T, Nl = N / sp;
    return Nl * (4 * C + 4) + N * (4 * C / t + 2 * F / t) + B * (NH / t) * T * T;
}

/* Floats the head saves: final LN input (N C / sp) and output (N C: all-gathered under
 * sequence parallelism, for the replicated head), its mean and rstd (2 N / sp), the
 * probabilities (N V). */
static inline size_t pp_rt_size_act_head_floats(size_t N, size_t C, size_t V, size_t sp)
{
    return N / sp * (C + 2) + N * (C + V);
}

/* 4-byte words of the slot's prefix: the micro-batch's tokens (a first stage) and targets (a
 * last stage), uploaded into the slot. */
static inline size_t pp_rt_size_act_prefix_words(size_t N, int has_embed, int has_head)
{
    return (has_embed ? N : 0) + (has_head ? N : 0);
}

/* Bytes of one slot of a stage on one of t tensor-parallel ranks (PP_MEM_ACTS). */
static inline size_t pp_rt_size_act_slot_bytes(size_t B, size_t T, size_t layers, int has_embed,
                                          int has_head, size_t C, size_t F, size_t V, size_t NH,
                                          size_t t, size_t sp)
{
    size_t N = B * T;
    return (pp_rt_size_act_prefix_words(N, has_embed, has_head) +
            layers * pp_rt_size_act_layer_floats(B, T, C, F, NH, t, sp) +
            (has_head ? pp_rt_size_act_head_floats(N, C, V, sp) : 0)) *
           4;
}

/* Bytes of the activation a stage sends / receives per micro-batch: its N / sp rows of C. */
static inline size_t pp_rt_size_io_bytes(size_t N, size_t C, size_t sp)
{
    return N / sp * C * 4;
}

/* ---- held for W: split backward (zero-bubble schedules) ---- */

/* Bytes a split backward's I keeps from its end to its W besides the slot (PP_MEM_ACTS,
 * runtime/stage_bwd.c): the output gradient of each of a block's four linears on one of t
 * tensor-parallel ranks, fc proj and proj (N C each, whole), fc (N F/t) and qkv (N 3C/t),
 * which the weight-gradient GEMMs dW += dy^T x need. Their inputs x are saved activations of
 * the slot, which W frees, except under sequence parallelism (sp > 1) the LayerNorm outputs
 * fc and qkv take, which the backward all-gathers into its workspace: I keeps those two (N C
 * each) too. The head's dlogits are the slot's probabilities, turned into them in place, so
 * the head adds nothing. */
static inline size_t pp_rt_size_wheld_bytes(size_t N, size_t layers, size_t C, size_t F, size_t t,
                                            size_t sp)
{
    return layers * N * (2 * C + F / t + 3 * C / t + (sp > 1 ? 2 * C : 0)) * 4;
}

/* ---- scratch ---- */

/* The attention backward's scratch (attention_scratch_bytes): the CPU backend's dS of one
 * (batch row, head) at a time; the CUDA backend's dA, then dS, of every head of one batch row. */
static inline size_t pp_rt_size_attn_scratch_cpu(size_t T)
{
    return T * T * 4;
}
static inline size_t pp_rt_size_attn_scratch_cuda(size_t NH, size_t T)
{
    return NH * T * T * 4;
}

/* Bytes of a backward's workspace on one of t tensor-parallel ranks (runtime/stage_bwd.c,
 * PP_MEM_WORKSPACE, freed at its end): dres and dln (N C / sp each), with blocks the widest
 * intermediate gradient (N max(F, 3C) / t) and the attention scratch (attn_scratch: one of the
 * two above, for the rank's NH/t heads). Under sequence parallelism (sp > 1) also a whole
 * (N, C) gradient (the all-gather of dres, or the sum a reduce-scatter takes), with blocks a
 * second (N, C) for the all-gathered LayerNorm outputs, and the micro-batch's partial
 * LayerNorm gradients (4 C per block, 2 C for the final LN) that are all-reduced at its end. */
static inline size_t pp_rt_size_bwd_ws(size_t N, size_t C, size_t F, size_t layers, int has_head,
                                        size_t attn_scratch, size_t t, size_t sp)
{
    size_t big = layers > 0 ? N * ((F > 3 * C ? F : 3 * C) / t) : 0;
    size_t n = 2 * (N / sp) * C + big;
    if (sp > 1)
        n += N * C + (layers > 0 ? N * C : 0) + layers * 4 * C + (has_head ? 2 * C : 0);
    return n * 4 + (layers > 0 ? attn_scratch : 0);
}

/* Bytes of a forward's workspace (runtime/stage_fwd.c, PP_MEM_WORKSPACE, freed at its end):
 * none without sequence parallelism; with it one (N, C) buffer that holds in turn the
 * embedding's whole output, each all-gathered LayerNorm output and each row-parallel linear's
 * partial product before its reduce-scatter. */
static inline size_t pp_rt_size_fwd_ws(size_t N, size_t C, size_t sp)
{
    return sp > 1 ? N * C * 4 : 0;
}

/* ---- the CUDA backend's kernel scratch (pp_cuda_ws_reserve: one buffer that only grows) ---- */

/* A bf16 GEMM's operand copies: A (a elements, padded to 64) then B (b elements); 0 for an
 * operand read from a weight's bf16 copy. */
static inline size_t pp_rt_size_cuda_gemm_ws(size_t a, size_t b)
{
    return (pp_rt_size_align64(a) + b) * PP_RT_BF16_BYTES;
}
/* bf16 attention forward: q,k,v of the whole micro-batch, then the probabilities. */
static inline size_t pp_rt_size_cuda_attn_fwd_ws(size_t B, size_t T, size_t C, size_t NH)
{
    return (pp_rt_size_align64(B * T * 3 * C) + B * NH * T * T) * PP_RT_BF16_BYTES;
}
/* bf16 attention backward, per batch row: q,k,v | dy | A | dS. */
static inline size_t pp_rt_size_cuda_attn_bwd_ws(size_t T, size_t C, size_t NH)
{
    return (pp_rt_size_align64(T * 3 * C) + pp_rt_size_align64(T * C) + 2 * pp_rt_size_align64(NH * T * T)) *
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
