/* row_cuda.c — the CUDA backend's row (common/pp_backends.h): cuBLAS and CUDA kernels on one
 * GPU per rank, fp32 or bf16, and the sizes of its kernels' memory for the memory plan
 * (cuda_sizes.h, with which its kernels allocate). Compiled in every build (pure arithmetic, no
 * CUDA type): the tuner plans GPU runs where no CUDA is; creating one is cuda_none.c's refusal
 * there. Its code: the .cu files of this folder. */
#include "cuda_sizes.h"
#include "pp_backends.h"

static size_t max_z(size_t a, size_t b)
{
    return a > b ? a : b;
}

static size_t attn_scratch(const pp_backend_stage *s)
{
    if (s->d->cp > 1) /* the ring's one L x L block (attention_cp_cuda.cu) */
        return pp_rt_size_attn_scratch_cp(s->T);
    return pp_rt_size_attn_scratch_cuda(s->d->Hl, s->T); /* every head of one batch row */
}

/* The kernel scratch (pp_cuda_ws_reserve) for a stage: one buffer per rank that only grows, so
 * its size is the largest single need over the step, reached in the first step (no bf16 weight
 * copies exist before the first AdamW, so every GEMM converts both operands). fp32: the loss
 * kernel's per-row losses and the gradient norm's partial sums. bf16: also the operand copies
 * of each GEMM and of the attention's products. */
static size_t kernel_scratch(const pp_backend_stage *s)
{
    /* the loss kernel's row losses: the whole-vocabulary loss (t = 1) only; the
     * vocabulary-parallel one keeps its statistics in the forward workspace */
    size_t need = max_z(pp_rt_size_cuda_sumsq_ws(),
                        s->last && s->d->t == 1 ? pp_rt_size_cuda_xent_ws(s->N) : 0);
    if (!s->bf16)
        return need;
    const pp_rt_dims *d = s->d;
    size_t e = 0, N = s->N, C = d->C, V = d->Vl; /* the head's vocabulary rows on this rank */
    if (s->layers > 0) {
        /* in, out of this tensor-parallel rank's shards (the whole layers when t = 1) */
        const size_t lin[4][2] = {{C, d->qkv}, {d->qd, C}, {C, d->fc}, {d->Fl, C}};
        for (int i = 0; i < 4; i++) {
            size_t in = lin[i][0], out = lin[i][1];
            e = max_z(e, pp_rt_size_cuda_gemm_ws(N * in, out * in));  /* forward: x w^T */
            e = max_z(e, pp_rt_size_cuda_gemm_ws(N * out, out * in)); /* dx = dy w */
            e = max_z(e, pp_rt_size_cuda_gemm_ws(N * out, N * in));   /* dw = dy^T x */
        }
        if (d->cp > 1) { /* the ring's products, one L x L block at a time (cp_gemm) */
            size_t L = s->T / 2, hd = d->hd;
            e = max_z(e, pp_rt_size_cuda_gemm_ws(L * hd, L * hd)); /* q k^T, dy v^T */
            e = max_z(e, pp_rt_size_cuda_gemm_ws(L * L, L * hd));  /* E v, dS k, dS^T q, P^T dy */
        } else {
            e = max_z(e, pp_rt_size_cuda_attn_fwd_ws(s->B, s->T, d->qkv, d->Hl));
            e = max_z(e, pp_rt_size_cuda_attn_bwd_ws(s->T, d->qkv, d->qd, d->Hl));
        }
    }
    if (s->last) {
        e = max_z(e, pp_rt_size_cuda_gemm_ws(N * C, V * C)); /* logits = x head^T */
        e = max_z(e, pp_rt_size_cuda_gemm_ws(N * V, V * C)); /* dx = dlogits wte */
        e = max_z(e, pp_rt_size_cuda_gemm_ws(N * V, N * C)); /* dwte += dlogits^T x */
    }
    return max_z(need, e);
}

const pp_backend_row pp_backend_row_cuda = {
    .name = "cuda",
    .device_kind = "gpu",
    .help = "cuBLAS and CUDA kernels on a GPU, fp32 or bf16",
    .choice = 1,
    .device_memory = 1,
    .staged = 1,
    .precisions = (1u << PP_PREC_FP32) | (1u << PP_PREC_BF16),
    .device_collectives = 1,
    .attn_scratch = attn_scratch,
    .kernel_scratch = kernel_scratch,
    .library_workspace = PP_RT_CUBLAS_WS_BYTES + PP_RT_CUBLAS_WS_ALIGN, /* cuBLAS's */
    .context_parallel = 1, /* fp32 and bf16 (attention_cp_cuda.cu) */
};
