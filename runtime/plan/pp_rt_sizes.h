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

/* ---- the vocabulary split (the embedding, the LM head and the loss) ---- */

/* Vocabulary parallelism (Megatron-LM's VocabParallelEmbedding, the output layer as a
 * ColumnParallelLinear and vocab_parallel_cross_entropy: megatron/core/tensor_parallel/
 * layers.py, cross_entropy.py): with t > 1 tensor-parallel rank r holds rows [r Vl, r Vl + Vl)
 * of the (V, C) token embedding and of the head, Vl = ceil(V / t). Where t does not divide V
 * the last ranks' rows past V are padding: zero, never looked up, masked out of the softmax
 * (so losses and gradients equal the unsplit model's, unlike Megatron's padded vocabulary,
 * whose padding logits join the softmax), and every tensor rank holds the same bytes (so one
 * memory plan serves them all). t = 1: the whole vocabulary. */
static inline size_t pp_rt_vocab_rows(size_t V, size_t t)
{
    return t > 1 ? (V + t - 1) / t : V;
}
/* Rank r's first vocabulary id and its real (not padding) rows, of Vl = pp_rt_vocab_rows. */
static inline void pp_rt_vocab_range(size_t V, size_t t, size_t r, size_t *v0, size_t *nv)
{
    size_t Vl = pp_rt_vocab_rows(V, t);
    *v0 = r * Vl;
    *nv = *v0 >= V ? 0 : V - *v0 < Vl ? V - *v0 : Vl;
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
    size_t Vl;           /* this rank's vocabulary rows of the embedding / head: ceil(V/t) */
    size_t norm;         /* floats of one norm: C (RMSNorm, LayerNorm without bias) or 2C */
    /* Qwen3's per-head q/k RMSNorm (pp_model_cfg.qk_norm; else 0): qkn_g, the floats of its
     * two weights (hd each, whole on every tensor rank); qkn, the floats a block saves per
     * row for its backward: the rank's q and k before the norm (qd + kvd) and the rstd of
     * each of their heads (Hl + KVl) */
    size_t qkn_g, qkn;
    int b_qkv, b_out, b_mlp; /* biases present */
    int rope, untied;
    int rc;      /* activation recomputation: PP_RT_RC_* (pp_rt_dims_of: none) */
    size_t rc_k; /* with PP_RT_RC_FULL: the first rc_k blocks of a stage; 0: all of them */
} pp_rt_dims;

/* Activation recomputation (Korthikanti et al. 2022, "Reducing Activation Recomputation in
 * Large Transformer Models", arXiv:2205.05198; runtime/stage*.c), the values of pp_recompute
 * (profiles/pp_config.h): none; selective, the attention core: a block's probabilities
 * (B, Hl, T, T) are not kept but recomputed from its kept q, k, v at the start of its backward
 * (Megatron-LM's checkpointed core attention, megatron/core/transformer/attention.py
 * _checkpointed_attention_forward); full, a recomputed block keeps only its input (the rank's
 * N/sp rows: under sequence parallelism the 1/t shard, as Megatron keeps it) and reruns its
 * forward at the start of its backward, on the first rc_k blocks of each stage (Megatron's
 * --recompute-method block --recompute-num-layers k) or on all of them (rc_k = 0). */
enum { PP_RT_RC_NONE = 0, PP_RT_RC_SELECTIVE = 1, PP_RT_RC_FULL = 2 };

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
    d.qkn_g = m->qk_norm ? 2 * d.hd : 0;
    d.qkn = m->qk_norm ? d.qd + d.kvd + d.Hl + d.KVl : 0;
    d.b_qkv = pp_model_bias(m, PP_NOBIAS_QKV), d.b_out = pp_model_bias(m, PP_NOBIAS_OUT);
    d.b_mlp = pp_model_bias(m, PP_NOBIAS_MLP);
    d.rope = m->pos == PP_POS_ROPE, d.untied = m->untied != 0;
    d.rc = PP_RT_RC_NONE, d.rc_k = 0;
    d.Vl = pp_rt_vocab_rows(d.V, t);
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
 * (C x Fl, bias C whole), the biases where the model has them, and the q/k norms' weights. */
static inline size_t pp_rt_size_block_params(const pp_rt_dims *d)
{
    return 2 * d->norm + d->qkn_g + d->qkv * d->C + (d->b_qkv ? d->qkv : 0) + d->C * d->qd +
           (d->b_out ? d->C : 0) + d->fc * d->C + d->C * d->Fl + (d->b_mlp ? d->fc + d->C : 0);
}

/* Floats of a stage on one tensor-parallel rank: its blocks, the token (Vl*C: the rank's
 * vocabulary rows) and, with learned positions, position (seq*C, whole on every rank)
 * embedding on a pipe's first stage, the final norm and the head's matrix (Vl*C: an untied
 * head's own, or a tied head's copy on a last stage without the embedding) on its last. */
static inline size_t pp_rt_size_stage_params(const pp_rt_dims *d, size_t layers, int has_embed,
                                             int has_head)
{
    size_t n = layers * pp_rt_size_block_params(d);
    if (has_embed)
        n += d->Vl * d->C + (d->rope ? 0 : d->seq * d->C);
    if (has_head)
        n += d->norm + (d->untied || !has_embed ? d->Vl * d->C : 0);
    return n;
}

/* ---- activations saved for backward: one slot per in-flight micro-batch ---- */

/* Sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2; runtime/stage*.c): sp = t splits
 * the norm / residual regions of a micro-batch's N tokens over the t tensor-parallel ranks
 * (rank i holds rows [i N/t, (i+1) N/t) of the (B, T, C) layout), sp = 1 is no split; the
 * activation a stage sends or receives is then the rank's N/sp rows. */

/* Floats one block saves on one tensor-parallel rank (runtime/stage.c's slot layout): x, ln1,
 * res2, ln2 (4 N C / sp: whole, or the rank's tokens under sequence parallelism), qkv (N qkv,
 * after the q/k norm and the rotation where the model has them) and atty (N qd) of the rank's
 * heads, with the q/k norm its input and rstd (N qkn), the MLP's fc output (N fc) and its activation (N Fl), the two norms' mean and rstd (4 N / sp;
 * RMSNorm leaves its means unused), and the attention probabilities of the rank's heads
 * (B, Hl, T, T); under context parallelism (B, Hl, T, cp T): the rank's T queries over the
 * whole sequence's keys. */
static inline size_t pp_rt_size_act_layer_floats(const pp_rt_dims *d, size_t B, size_t T)
{
    size_t N = B * T, Nl = N / d->sp;
    return Nl * (4 * d->C + 4) + N * (d->qkv + d->qd + d->qkn + d->fc + d->Fl) +
           B * d->Hl * T * T * d->cp;
}

/* Floats of one block's attention probabilities on one tensor-parallel rank (B, Hl, T, T). */
static inline size_t pp_rt_size_att_floats(const pp_rt_dims *d, size_t B, size_t T)
{
    return B * d->Hl * T * T * d->cp; /* under context parallelism over cp T keys */
}

/* Blocks of a stage of `layers` that full recomputation reruns: its first rc_k, or all. */
static inline size_t pp_rt_size_rc_full_layers(const pp_rt_dims *d, size_t layers)
{
    if (d->rc != PP_RT_RC_FULL)
        return 0;
    return d->rc_k && d->rc_k < layers ? d->rc_k : layers;
}

/* Floats a stage's slot keeps of its first `layers` blocks (layers 0 .. layers-1 of the stage;
 * the offset of block `layers` in the slot): full pp_rt_size_act_layer_floats for a block
 * without recomputation, less the probabilities under selective recomputation, only the input
 * (N/sp rows of C) for a fully recomputed block. */
static inline size_t pp_rt_size_act_kept_floats(const pp_rt_dims *d, size_t B, size_t T,
                                                size_t layers)
{
    size_t lf = pp_rt_size_act_layer_floats(d, B, T), x = B * T / d->sp * d->C;
    size_t nfull = pp_rt_size_rc_full_layers(d, layers);
    size_t n = layers * lf - nfull * (lf - x);
    if (d->rc == PP_RT_RC_SELECTIVE)
        n -= layers * pp_rt_size_att_floats(d, B, T);
    return n;
}

/* Floats of the recompute workspace a stage of `layers` blocks uses in its forward (where a
 * block's activations are computed before only its input is kept, or its probabilities before
 * they are dropped) and in its backward (where they are recomputed), freed with the call:
 * full, one block's activations (pp_rt_size_act_layer_floats; the recomputed output lands in
 * its input's place, which the slot holds); selective, the probabilities and the attention
 * output the recomputation writes beside the kept one (N qd); 0 without recomputation. */
static inline size_t pp_rt_size_rc_ws_floats(const pp_rt_dims *d, size_t B, size_t T,
                                             size_t layers)
{
    if (layers == 0)
        return 0;
    if (pp_rt_size_rc_full_layers(d, layers))
        return pp_rt_size_act_layer_floats(d, B, T);
    if (d->rc == PP_RT_RC_SELECTIVE)
        return pp_rt_size_att_floats(d, B, T) + B * T * d->qd;
    return 0;
}

/* Floats the head saves: final norm input (N C / sp) and output (N C: all-gathered under
 * sequence parallelism, for the column-parallel head), its mean and rstd (2 N / sp), the
 * probabilities of the rank's vocabulary rows (N Vl, V = Vl without tensor parallelism). */
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

/* Bytes of one slot of a stage on one tensor-parallel rank (PP_MEM_ACTS), with the
 * recomputation d->rc says. */
static inline size_t pp_rt_size_act_slot_bytes(const pp_rt_dims *d, size_t B, size_t T,
                                               size_t layers, int has_embed, int has_head)
{
    size_t N = B * T;
    return (pp_rt_size_act_prefix_words(N, has_embed, has_head) +
            pp_rt_size_act_kept_floats(d, B, T, layers) +
            (has_head ? pp_rt_size_act_head_floats(N, d->C, d->Vl, d->sp) : 0)) *
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
 * probabilities, turned into them in place, so the head adds nothing.
 * A fully recomputed block's recomputed activations live in the backward's workspace, which
 * ends with I: I keeps those W's GEMMs take, the attention output (N qd), the MLP's activation
 * (N Fl) and, without sequence parallelism, the two norm outputs (N C each; with it they are
 * the all-gathered copies above), until W; the rest of the recomputation dies with I.
 * Selective recomputation drops only the probabilities, which W does not take: nothing more. */
static inline size_t pp_rt_size_wheld_bytes(const pp_rt_dims *d, size_t N, size_t layers)
{
    size_t rc = pp_rt_size_rc_full_layers(d, layers) * N *
                (d->qd + d->Fl + (d->sp > 1 ? 0 : 2 * d->C));
    return (layers * N * (2 * d->C + d->fc + d->qkv + (d->sp > 1 ? 2 * d->C : 0)) + rc) * 4;
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
/* Rows (queries) per block of the causal attention products (cpu_attention.c): a block only
 * multiplies against the keys up to its end, so T = 1024 computes 10/16 of the T x T square.
 * Smaller blocks waste less but make GEMMs too small for BLAS (the inner dimension is only the
 * head width); 256 measured best of 64/128/256 in bench_layer. bench_layer replays the same
 * blocking; test_runtime_model's gradient check uses T = 300 to cross a block edge. */
#define PP_ATT_BLOCK 256

/* Whether the CPU attention backward runs its (batch row, KV head) units on the kernel threads
 * at once, each unit's GEMMs on its own thread (cpu_attention.c): when OpenBLAS runs those GEMMs
 * on the calling thread anyway (one BLAS thread, or M N K at most 65536 x 4,
 * SMP_THRESHOLD_MIN x GEMM_MULTITHREAD_THRESHOLD, below which OpenBLAS 0.3's interface/gemm.c
 * does not thread). Otherwise the units run one after the other with OpenBLAS threading their
 * GEMMs: parallel callers of a threaded OpenBLAS wait for each other's BLAS threads. */
static inline int pp_rt_cpu_attn_units_parallel(int blas_threads, size_t T, size_t hd)
{
    double rb = T < PP_ATT_BLOCK ? (double)T : PP_ATT_BLOCK;
    return blas_threads <= 1 || rb * (double)T * (double)hd <= 65536.0 * 4;
}
/* The CPU backend's kernel scratch (its pool's, cpu_pool.c, held all run in PP_MEM_WORKSPACE):
 * when the attention backward's units run in parallel (more than one unit: B rows x the rank's
 * KV heads, kernel threads > 1), each kernel thread beyond the first takes its own dS of one
 * unit (T x T floats; the first thread uses the backward's workspace). The ring attention of
 * context parallelism (cp > 1) takes none (its kernels run on the rank's thread). */
static inline size_t pp_rt_size_cpu_kernel_scratch(const pp_rt_dims *d, size_t B, size_t T,
                                                   int kernel_threads, int blas_threads)
{
    if (kernel_threads <= 1 || d->cp > 1 || B * d->KVl <= 1 ||
        !pp_rt_cpu_attn_units_parallel(blas_threads, T, d->hd))
        return 0;
    return (size_t)(kernel_threads - 1) * pp_rt_size_attn_scratch_cpu(T);
}

/* A host backend's attention scratch for a rank holding T tokens of each sequence: the ring's
 * block under context parallelism (d->cp > 1), else one (batch row, head)'s scores. */
static inline size_t pp_rt_size_attn_scratch_host(const pp_rt_dims *d, size_t T)
{
    return d->cp > 1 ? pp_rt_size_attn_scratch_cp(T) : pp_rt_size_attn_scratch_cpu(T);
}

/* Floats of a backward's partial q/k norm gradients (qk_norm under tensor parallelism: each
 * rank's are of its heads only, all-reduced at the backward's end): 2 hd per block; 0
 * without. */
static inline size_t pp_rt_size_qkn_grads_floats(const pp_rt_dims *d, size_t layers)
{
    return d->t > 1 ? layers * d->qkn_g : 0;
}

/* Width of the buffer that takes the gradient of the attention output (N rows: dln without
 * sequence parallelism, the all-gather buffer with it): C, or the rank's q width where that
 * is wider (head_dim x heads > hidden, e.g. Qwen3-30B-A3B: 32 x 128 = 4096 > 2048). */
static inline size_t pp_rt_size_datt_cols(const pp_rt_dims *d, size_t layers)
{
    return layers > 0 && d->qd > d->C ? d->qd : d->C;
}

/* Bytes of a backward's workspace on one tensor-parallel rank (runtime/stage_bwd.c,
 * PP_MEM_WORKSPACE, freed at its end): dres and dln (N C / sp each), with blocks the widest
 * intermediate gradient (N max(fc, qkv): the MLP's hidden, or qkv) and the attention scratch
 * (dln N pp_rt_size_datt_cols wide without sequence parallelism, as it takes the attention
 * output's gradient)
 * (attn_scratch: the backend's, for the rank's Hl heads). Under sequence parallelism
 * (sp > 1) also a whole (N, C) gradient (the all-gather of dres, or the sum a reduce-scatter
 * takes), with blocks a second (N, pp_rt_size_datt_cols) for the all-gathered norm outputs and
 * the attention output's gradient, and the
 * micro-batch's partial norm gradients (2 norm floats per block, norm for the final one) that
 * are all-reduced at its end. Under context parallelism (cp > 1), with blocks, the ring's
 * block of K/V and of their gradient (two of pp_rt_size_cp_kv_floats) and rowsum(dy y)
 * (pp_rt_size_cp_stats_floats); attn_scratch is then pp_rt_size_attn_scratch_cp. With
 * recomputation, its workspace (pp_rt_size_rc_ws_floats), then the partial q/k norm
 * gradients (pp_rt_size_qkn_grads_floats), before the attention scratch. */
static inline size_t pp_rt_size_bwd_ws(const pp_rt_dims *d, size_t B, size_t T, size_t layers,
                                       int has_head, size_t attn_scratch)
{
    size_t C = d->C, sp = d->sp, N = B * T;
    size_t big = layers > 0 ? N * (d->fc > d->qkv ? d->fc : d->qkv) : 0;
    size_t ac = pp_rt_size_datt_cols(d, layers);
    size_t n = (N / sp) * C + (N / sp) * (sp > 1 ? C : ac) + big;
    if (sp > 1)
        n += N * C + (layers > 0 ? N * ac : 0) + layers * 2 * d->norm + (has_head ? d->norm : 0);
    if (layers > 0)
        n += 2 * pp_rt_size_cp_kv_floats(d, N) + pp_rt_size_cp_stats_floats(d, N);
    n += pp_rt_size_rc_ws_floats(d, B, T, layers) + pp_rt_size_qkn_grads_floats(d, layers);
    return n * 4 + (layers > 0 ? attn_scratch : 0);
}

/* Bytes of a forward's workspace (runtime/stage_fwd.c, PP_MEM_WORKSPACE, freed at its end):
 * under sequence parallelism one (N, C) buffer that holds in turn the embedding's whole
 * output, each all-gathered LayerNorm output and each row-parallel linear's partial product
 * before its reduce-scatter (the embedding's partial output, vocabulary-parallel); under
 * context parallelism, with blocks, the ring's block of K/V (pp_rt_size_cp_kv_floats), the
 * online softmax's running max and sum (two of pp_rt_size_cp_stats_floats) and the block
 * scratch (pp_rt_size_attn_scratch_cp, of T = N/B tokens); then, with recomputation, its workspace (pp_rt_size_rc_ws_floats); with a
 * vocabulary-parallel loss (t > 1, a last stage) after those the t ranks' row maxima (t N,
 * all-reduced) and the row sums of exp and target logits (2 N, all-reduced); none of these:
 * none. pp_rt_size_fwd_ws_xent_at: floats before the loss's statistics. */
static inline size_t pp_rt_size_fwd_ws_xent_at(const pp_rt_dims *d, size_t B, size_t T,
                                               size_t layers)
{
    size_t N = B * T, n = d->sp > 1 ? N * d->C : 0;
    if (layers > 0 && d->cp > 1)
        n += pp_rt_size_cp_kv_floats(d, N) + 2 * pp_rt_size_cp_stats_floats(d, N) +
             pp_rt_size_attn_scratch_cp(T) / 4;
    n += pp_rt_size_rc_ws_floats(d, B, T, layers);
    return n;
}
static inline size_t pp_rt_size_fwd_ws(const pp_rt_dims *d, size_t B, size_t T, size_t layers,
                                       int has_head)
{
    size_t N = B * T;
    return (pp_rt_size_fwd_ws_xent_at(d, B, T, layers) +
            (d->t > 1 && has_head ? (d->t + 2) * N : 0)) *
           4;
}

#endif
