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

#include "pp_rt_model.h"

/* Bytes of a bf16 element (GEMM operands and the weight copies of a backend computing in bf16). */
#define PP_RT_BF16_BYTES ((size_t)2)

/* Elements to the next multiple of 64: bf16 operands carved from one workspace start on
 * 128-byte boundaries, which cuBLAS's tensor-core kernels and 16-byte loads want. */
static inline size_t pp_rt_size_align64(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* ---- the block's widths on one tensor-parallel rank ---- */

/* Tensor parallelism (runtime/stage*.c, Megatron-LM's split): a block's qkv and fc are
 * column-parallel (t shards of their output rows: q by heads, k and v by KV heads, a SwiGLU's
 * gate and up each by its width), its two projections row-parallel (t shards of their input
 * columns, the bias whole on every rank), the norms whole; t = 1 is no split. Shapes: hd head
 * width, H query heads, KV key/value heads; the whole model's qkv has (H + 2 KV) hd rows. */
typedef struct pp_rt_dims { /* its tag: pp_backends.h names it */
    size_t C, F, V, seq; /* hidden, MLP width, vocabulary, maximum positions */
    size_t hd, H, KV;    /* head width, query heads, KV heads (whole model) */
    size_t t, sp;        /* tensor-parallel ranks, sequence shards (t or 1) */
    size_t cp;           /* context-parallel ranks (1: none; pp_rt_dims_with_cp) */
    size_t Hl, KVl, Fl;  /* this rank's query heads, KV heads, MLP width */
    size_t qd, kvd;      /* this rank's widths of q (Hl hd) and of each of k, v (KVl hd) */
    size_t qkv, fc;      /* this rank's qkv width (qd + 2 kvd) and fc width (Fl, SwiGLU 2 Fl) */
    size_t norm;         /* floats of one norm: C (RMSNorm, LayerNorm without bias) or 2C */
    int b_qkv, b_out, b_mlp; /* biases present */
    int rope, untied;
} pp_rt_dims;

static inline pp_rt_dims pp_rt_dims_of(const pp_model_cfg *m, size_t t, size_t sp)
{
    pp_rt_dims d;
    t = t ? t : 1;
    d.C = (size_t)m->hidden, d.F = (size_t)m->ffn, d.V = (size_t)m->vocab, d.seq = (size_t)m->seq;
    d.hd = (size_t)pp_model_hd(m), d.H = (size_t)m->heads, d.KV = (size_t)pp_model_kv(m);
    d.t = t, d.sp = sp ? sp : 1, d.cp = 1;
    d.Hl = d.H / t, d.KVl = d.KV / t, d.Fl = d.F / t;
    d.qd = d.Hl * d.hd, d.kvd = d.KVl * d.hd;
    d.qkv = d.qd + 2 * d.kvd;
    d.fc = m->mlp == PP_MLP_SWIGLU ? 2 * d.Fl : d.Fl;
    d.norm = pp_model_bias(m, PP_NOBIAS_NORM) ? 2 * d.C : d.C;
    d.b_qkv = pp_model_bias(m, PP_NOBIAS_QKV), d.b_out = pp_model_bias(m, PP_NOBIAS_OUT);
    d.b_mlp = pp_model_bias(m, PP_NOBIAS_MLP);
    d.rope = m->pos == PP_POS_ROPE, d.untied = m->untied != 0;
    return d;
}

/* Context parallelism (Megatron-Core's --context-parallel-size; runtime/stage_cp.c): cp ranks
 * share each sequence, every one holding T = seq / cp of its tokens (two chunks of T/2, at the
 * true positions pp_rope_pos gives), so every size below with a T or N = B T is the rank's
 * local tokens; only attention sees the whole sequence: its probabilities span cp T keys and
 * its K/V come from the whole cp group. cp 0 or 1: none. */
static inline pp_rt_dims pp_rt_dims_with_cp(pp_rt_dims d, size_t cp)
{
    d.cp = cp > 1 ? cp : 1;
    return d;
}

/* Floats of one block of the ring (runtime/stage_cp.c): a cp rank's qkv rows of a
 * micro-batch (its N local rows, the qkv width each), as K/V or as their gradient; 0 without
 * context parallelism. */
static inline size_t pp_rt_size_cp_kv_floats(const pp_rt_dims *d, size_t N)
{
    return d->cp > 1 ? N * d->qkv : 0;
}

/* Floats of the ring attention's statistics, one per (row, head) of the rank's N rows: the
 * forward's running max and sum take two, the backward's rowsum(dy y) one. */
static inline size_t pp_rt_size_cp_stats_floats(const pp_rt_dims *d, size_t N)
{
    return d->cp > 1 ? N * d->Hl : 0;
}

/* ---- parameters (runtime/stage.c) ---- */

/* Floats of one block on one tensor-parallel rank: two norms, qkv (qkv x C, bias qkv), the
 * attention projection (C x qd, bias C whole), fc (fc x C, bias fc) and the MLP's projection
 * (C x Fl, bias C whole), the biases where the model has them. */
static inline size_t pp_rt_size_block_params(const pp_rt_dims *d)
{
    return 2 * d->norm + d->qkv * d->C + (d->b_qkv ? d->qkv : 0) + d->C * d->qd +
           (d->b_out ? d->C : 0) + d->fc * d->C + d->C * d->Fl + (d->b_mlp ? d->fc + d->C : 0);
}

/* Floats of a stage on one tensor-parallel rank: its blocks, the token (V*C) and, with learned
 * positions, position (seq*C) embedding on a pipe's first stage, the final norm and the head's
 * matrix (V*C: an untied head's own, or a tied head's copy on a last stage without the
 * embedding) on its last. The embedding and head are replicated on every tensor-parallel
 * rank (stage.c says why). */
static inline size_t pp_rt_size_stage_params(const pp_rt_dims *d, size_t layers, int has_embed,
                                             int has_head)
{
    size_t n = layers * pp_rt_size_block_params(d);
    if (has_embed)
        n += d->V * d->C + (d->rope ? 0 : d->seq * d->C);
    if (has_head)
        n += d->norm + (d->untied || !has_embed ? d->V * d->C : 0);
    return n;
}

/* ---- activations saved for backward: one slot per in-flight micro-batch ---- */

/* Sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2; runtime/stage*.c): sp = t splits
 * the norm / residual regions of a micro-batch's N tokens over the t tensor-parallel ranks
 * (rank i holds rows [i N/t, (i+1) N/t) of the (B, T, C) layout), sp = 1 is no split; the
 * activation a stage sends or receives is then the rank's N/sp rows. */

/* Floats one block saves on one tensor-parallel rank (runtime/stage.c's slot layout): x, ln1,
 * res2, ln2 (4 N C / sp: whole, or the rank's tokens under sequence parallelism), qkv (N qkv,
 * after the rotation where the model is rotary) and atty (N qd) of the rank's heads, the
 * MLP's fc output (N fc) and its activation (N Fl), the two norms' mean and rstd (4 N / sp;
 * RMSNorm leaves its means unused), and the attention probabilities of the rank's heads
 * (B, Hl, T, T); under context parallelism (B, Hl, T, cp T): the rank's T queries over the
 * whole sequence's keys. */
static inline size_t pp_rt_size_act_layer_floats(const pp_rt_dims *d, size_t B, size_t T)
{
    size_t N = B * T, Nl = N / d->sp;
    return Nl * (4 * d->C + 4) + N * (d->qkv + d->qd + d->fc + d->Fl) +
           B * d->Hl * T * T * d->cp;
}

/* Floats the head saves: final norm input (N C / sp) and output (N C: all-gathered under
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

/* Bytes of one slot of a stage on one tensor-parallel rank (PP_MEM_ACTS). */
static inline size_t pp_rt_size_act_slot_bytes(const pp_rt_dims *d, size_t B, size_t T,
                                               size_t layers, int has_embed, int has_head)
{
    size_t N = B * T;
    return (pp_rt_size_act_prefix_words(N, has_embed, has_head) +
            layers * pp_rt_size_act_layer_floats(d, B, T) +
            (has_head ? pp_rt_size_act_head_floats(N, d->C, d->V, d->sp) : 0)) *
           4;
}

/* Bytes of the activation a stage sends / receives per micro-batch: its N / sp rows of C. */
static inline size_t pp_rt_size_io_bytes(size_t N, size_t C, size_t sp)
{
    return N / sp * C * 4;
}

/* ---- held for W: split backward (zero-bubble schedules) ---- */

/* Bytes a split backward's I keeps from its end to its W besides the slot (PP_MEM_ACTS,
 * runtime/stage_bwd.c): the output gradient of each of a block's four linears on one
 * tensor-parallel rank, the MLP's projection and the attention projection (N C each, whole),
 * fc (N fc) and qkv (N qkv), which the weight-gradient GEMMs dW += dy^T x need. Their inputs x
 * are saved activations of the slot, which W frees, except under sequence parallelism
 * (sp > 1) the norm outputs fc and qkv take, which the backward all-gathers into its
 * workspace: I keeps those two (N C each) too. The head's dlogits are the slot's
 * probabilities, turned into them in place, so the head adds nothing. */
static inline size_t pp_rt_size_wheld_bytes(const pp_rt_dims *d, size_t N, size_t layers)
{
    return layers * N * (2 * d->C + d->fc + d->qkv + (d->sp > 1 ? 2 * d->C : 0)) * 4;
}

/* ---- scratch ---- */

/* The attention backward's scratch (attention_scratch_bytes): the CPU backend's dS of one
 * (batch row, head) at a time (each backend's own: its row, pp_backends.h). */
static inline size_t pp_rt_size_attn_scratch_cpu(size_t T)
{
    return T * T * 4;
}
/* The ring attention's block scratch (attention_cp_fwd / _bwd): one L x L block, L = T/2
 * (the forward's exponentiated scores, the backward's dS). */
static inline size_t pp_rt_size_attn_scratch_cp(size_t T)
{
    return (T / 2) * (T / 2) * 4;
}
/* A host backend's attention scratch for a rank holding T tokens of each sequence: the ring's
 * block under context parallelism (d->cp > 1), else one (batch row, head)'s scores. */
static inline size_t pp_rt_size_attn_scratch_host(const pp_rt_dims *d, size_t T)
{
    return d->cp > 1 ? pp_rt_size_attn_scratch_cp(T) : pp_rt_size_attn_scratch_cpu(T);
}

/* Bytes of a backward's workspace on one tensor-parallel rank (runtime/stage_bwd.c,
 * PP_MEM_WORKSPACE, freed at its end): dres and dln (N C / sp each), with blocks the widest
 * intermediate gradient (N max(fc, qkv): the MLP's hidden, or qkv) and the attention scratch
 * (attn_scratch: the backend's, for the rank's Hl heads). Under sequence parallelism
 * (sp > 1) also a whole (N, C) gradient (the all-gather of dres, or the sum a reduce-scatter
 * takes), with blocks a second (N, C) for the all-gathered norm outputs, and the
 * micro-batch's partial norm gradients (2 norm floats per block, norm for the final one) that
 * are all-reduced at its end. Under context parallelism (cp > 1), with blocks, the ring's
 * block of K/V and of their gradient (two of pp_rt_size_cp_kv_floats) and rowsum(dy y)
 * (pp_rt_size_cp_stats_floats); attn_scratch is then pp_rt_size_attn_scratch_cp. */
static inline size_t pp_rt_size_bwd_ws(const pp_rt_dims *d, size_t N, size_t layers, int has_head,
                                       size_t attn_scratch)
{
    size_t C = d->C, sp = d->sp;
    size_t big = layers > 0 ? N * (d->fc > d->qkv ? d->fc : d->qkv) : 0;
    size_t n = 2 * (N / sp) * C + big;
    if (sp > 1)
        n += N * C + (layers > 0 ? N * C : 0) + layers * 2 * d->norm + (has_head ? d->norm : 0);
    if (layers > 0)
        n += 2 * pp_rt_size_cp_kv_floats(d, N) + pp_rt_size_cp_stats_floats(d, N);
    return n * 4 + (layers > 0 ? attn_scratch : 0);
}

/* Bytes of a forward's workspace (runtime/stage_fwd.c, PP_MEM_WORKSPACE, freed at its end):
 * under sequence parallelism one (N, C) buffer that holds in turn the embedding's whole
 * output, each all-gathered LayerNorm output and each row-parallel linear's partial product
 * before its reduce-scatter; under context parallelism, with blocks, the ring's block of K/V
 * (pp_rt_size_cp_kv_floats), the online softmax's running max and sum (two of
 * pp_rt_size_cp_stats_floats) and the block scratch (pp_rt_size_attn_scratch_cp, of T = N/B
 * tokens); neither: none. */
static inline size_t pp_rt_size_fwd_ws(const pp_rt_dims *d, size_t B, size_t T, size_t layers)
{
    size_t N = B * T, n = d->sp > 1 ? N * d->C : 0;
    if (layers > 0 && d->cp > 1)
        n += pp_rt_size_cp_kv_floats(d, N) + 2 * pp_rt_size_cp_stats_floats(d, N) +
             pp_rt_size_attn_scratch_cp(T) / 4;
    return n * 4;
}

#endif
