/* backend.h — private to runtime/: the table of callbacks a backend fills (ggml-backend style).
 *
 * The stage code (stage*.c) computes the model only through these callbacks, so a CUDA backend
 * plugs in by filling the same table; this header names no CUDA or BLAS type. Pointers passed to
 * the kernels are in the backend's memory (host for the CPU backend, device for CUDA) except
 * where a parameter says "host". Every kernel returns pp_status so that a CUDA backend can turn
 * a failed launch into an error with file:line; the CPU backend always returns PP_OK.
 *
 * Conventions: row-major fp32; N = B*T rows; "+=" in a comment means the kernel accumulates
 * into its output (gradients accumulate over micro-batches), "=" that it overwrites.
 * A backend instance is used by one thread at a time (one backend per rank).
 */
#ifndef PP_RT_BACKEND_H
#define PP_RT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "pp_rt.h"
#include "rope_freq.h"

/* One AdamW update's scalars, precomputed by the stage (bias corrections of step t). */
typedef struct {
    float lr, beta1, beta2, eps;
    float weight_decay; /* 0 for tensors that are not decayed (biases, LayerNorm) */
    float bc1, bc2;     /* 1 - beta1^t, 1 - beta2^t */
    float grad_scale;   /* multiplies the gradient first (1, or a clipping factor) */
    int part; /* host: w is a slice of a tensor (the sharded optimizer's shard): a backend
                 that keeps low-precision copies of the weights writes none for it; the
                 caller gathers the tensor and calls weights_written (pp_backend_weights_written) */
} pp_adamw_scalars;

typedef struct {
    /* ---- memory (raw: accounting is done above, in backend.c) ---- */
    void *(*alloc)(void *ctx, size_t bytes); /* NULL when out of memory */
    void (*free)(void *ctx, void *p);
    pp_status (*upload)(void *ctx, void *dst, const void *src_host, size_t bytes);
    pp_status (*download)(void *ctx, void *dst_host, const void *src, size_t bytes);
    pp_status (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    pp_status (*zero)(void *ctx, void *dst, size_t bytes);

    /* ---- dense algebra ---- */
    /* c(m,n) = alpha * op(a) * op(b) + beta * c, op(x) = x or x^T; leading dimensions in floats. */
    pp_status (*gemm)(void *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc);
    /* y(rows, cols) += bias(cols) broadcast over rows. */
    pp_status (*add_bias)(void *ctx, float *y, const float *bias, int rows, int cols);
    /* db(cols) += column sums of dy(rows, cols). */
    pp_status (*bias_grad)(void *ctx, float *db, const float *dy, int rows, int cols);
    /* y(n) += x(n). */
    pp_status (*add)(void *ctx, float *y, const float *x, size_t n);

    /* ---- layer kernels ---- */
    /* out(B,T,C) = wte[tok[b,t]] + wpe[t] (wpe NULL: no position table, rotary models). */
    pp_status (*encoder_fwd)(void *ctx, float *out, const int32_t *tok, const float *wte,
                             const float *wpe, int B, int T, int C);
    /* dwte[tok[b,t]] += dout[b,t]; dwpe[t] += sum_b dout[b,t] (dwpe NULL: none). */
    pp_status (*encoder_bwd)(void *ctx, float *dwte, float *dwpe, const float *dout,
                             const int32_t *tok, int B, int T, int C);
    /* out(N,C) = (x - mean) * rstd * g + b, rstd = 1/sqrt(var + eps); saves mean(N), rstd(N).
     * b NULL: no bias. */
    pp_status (*layernorm_fwd)(void *ctx, float *out, float *mean, float *rstd, const float *x,
                               const float *g, const float *b, int N, int C, float eps);
    /* dx += ..., dg += ..., db += ... (db NULL: no bias) */
    pp_status (*layernorm_bwd)(void *ctx, float *dx, float *dg, float *db, const float *dout,
                               const float *x, const float *g, const float *mean, const float *rstd,
                               int N, int C);
    /* RMSNorm (Zhang & Sennrich 2019; transformers' LlamaRMSNorm): out(N,C) = x * rstd * g,
     * rstd = 1/sqrt(mean(x^2) + eps); saves rstd(N). */
    pp_status (*rmsnorm_fwd)(void *ctx, float *out, float *rstd, const float *x, const float *g,
                             int N, int C, float eps);
    /* dx += rstd (g dy - x rstd^2 mean(g dy x)), dg += sum over rows of dy x rstd. */
    pp_status (*rmsnorm_bwd)(void *ctx, float *dx, float *dg, const float *dout, const float *x,
                             const float *g, const float *rstd, int N, int C);
    /* Per-head RMSNorm of q and k (Qwen3's q_norm, k_norm: transformers' Qwen3Attention) in
     * place on the first nq + nk heads (hd wide) of each of the N rows of x (row stride ld):
     * heads 0 .. nq-1 scaled by gq(hd), the next nk by gk(hd); saves each row's heads before
     * the norm in xin(N, (nq + nk) hd) and their rstd(N, nq + nk). */
    pp_status (*headnorm_fwd)(void *ctx, float *x, float *xin, float *rstd, const float *gq,
                              const float *gk, int N, int nq, int nk, int hd, int ld, float eps);
    /* Its backward in place: those heads of dx (row stride ld) hold dy on entry, dx on return;
     * dgq, dgk += the sums over rows and heads of dy xin rstd. */
    pp_status (*headnorm_bwd)(void *ctx, float *dx, float *dgq, float *dgk, const float *xin,
                              const float *rstd, const float *gq, const float *gk, int N, int nq,
                              int nk, int hd, int ld);
    /* Causal attention with grouped-query heads on qkv(B,T,W), W = (NH + 2 NKV) hd, laid out
     * [q | k | v]: query head h at columns h hd, its KV head h / (NH/NKV) at NH hd + that
     * times hd (k) and (NH + NKV) hd + it (v). y(B,T,NH hd) = softmax(q k^T / sqrt(hd),
     * causal) v; saves what its backward needs in att(B,NH,T,T) (the CPU backend: the
     * probabilities on and below the diagonal). NKV = NH is multi-head attention. */
    pp_status (*attention_fwd)(void *ctx, float *y, float *att, const float *qkv, int B, int T,
                               int NH, int NKV, int hd);
    /* dqkv(B,T,W) = gradient (overwritten; a KV head's is summed over the query heads it
     * serves); scratch has attention_scratch_bytes. */
    pp_status (*attention_bwd)(void *ctx, float *dqkv, float *scratch, const float *dy,
                               const float *att, const float *qkv, int B, int T, int NH, int NKV,
                               int hd);
    size_t (*attention_scratch_bytes)(void *ctx, int B, int T, int C, int NH);
    /* Rotary positions in place on the first nh heads (hd wide) of each of the N rows of x
     * (row stride ld floats; row n is position n % T): dir +1 rotates (forward), -1 rotates
     * back (the backward: the rotation's transpose is its inverse). */
    pp_status (*rope)(void *ctx, float *x, int N, int T, int nh, int hd, int ld, const pp_rope *r,
                      int dir);
    /* SwiGLU (Shazeer 2020): y(N,F) = silu(x[:, :F]) * x[:, F:] of x(N,2F) = [gate | up]. */
    pp_status (*swiglu_fwd)(void *ctx, float *y, const float *x, int N, int F);
    /* dx(N,2F) = [dgate | dup] from dy(N,F) of row stride ldy; dy may be dx + F with ldy = 2F
     * (each element is read before its row's outputs are written). */
    pp_status (*swiglu_bwd)(void *ctx, float *dx, const float *x, const float *dy, int ldy, int N,
                            int F);
    /* y = gelu(x) (tanh approximation, as GPT-2); n elements. */
    pp_status (*gelu_fwd)(void *ctx, float *y, const float *x, size_t n);
    /* dx = gelu'(x) * dy; dx may alias dy. */
    pp_status (*gelu_bwd)(void *ctx, float *dx, const float *x, const float *dy, size_t n);
    /* In place: logits(N,V) -> softmax probabilities; *mean_loss_host = mean over rows of
     * -log p[target]. */
    pp_status (*xent_fwd)(void *ctx, float *probs, const int32_t *targets, int N, int V,
                          float *mean_loss_host);
    /* In place: probs(N,V) -> dlogits = (probs - onehot(target)) * scale. */
    pp_status (*xent_bwd)(void *ctx, float *probs, const int32_t *targets, int N, int V,
                          float scale);
    /* AdamW on n elements: m, v updated, w updated. */
    pp_status (*adamw)(void *ctx, float *w, const float *g, float *m, float *v, size_t n,
                       const pp_adamw_scalars *s);

    void (*destroy)(void *ctx); /* frees the context */

    /* ---- optional (NULL: the caller does it on the host, through upload / download) ---- */
    /* dst(n) = element i of the counter-based normals of init_normal.h for `key`, times std:
     * a device fills its parameters in place instead of receiving them through upload. */
    pp_status (*init_normal)(void *ctx, float *dst, size_t n, uint64_t key, double std);
    /* *acc += sum of x[i]^2 in double (order: the backend's; the host loop's is element order). */
    pp_status (*sum_sq)(void *ctx, const float *x, size_t n, double *acc);
    /* Host memory for staging copies of this backend's memory (page-locked for CUDA, so copies
     * run at full rate); NULL when none can be had. host_free takes what host_alloc gave. */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *p);

    /* ---- optional: a device backend (0 / NULL on a host backend such as the CPU) ----
     * The code above the table (the executor, pp_backend_* in backend_device.c) asks these
     * instead of naming a device API, so that it has no CUDA call and no #ifdef. */
    int device_memory; /* 1: alloc gives device memory, reached from the host only through
                          upload / download (tensors are staged for host transports) */
    /* Makes the backend's device current on the calling thread and waits for the work queued
     * on its streams. NULL: nothing is ever queued (the call returns PP_OK). */
    pp_status (*sync)(void *ctx);
    /* The device's free and total bytes as its driver sees them. NULL: PP_ERR_UNSUPPORTED. */
    pp_status (*mem_info)(void *ctx, size_t *free_bytes, size_t *total_bytes);
    /* Device-side timing marks on the compute stream (pp_backend_marks_* in pp_rt_backend.h
     * say what they mean); *marks is the backend's own handle. NULL: the backend has none and
     * its work is done when a kernel returns, so host clocks time it. */
    pp_status (*marks_create)(void *ctx, int n, void **marks);
    pp_status (*marks_record)(void *marks, int i);
    pp_status (*marks_read)(void *marks, double *seconds);
    void (*marks_destroy)(void *marks);
    /* Allocates the kernels' scratch at `bytes` now (the memory plan's figure) and fixes it:
     * a kernel needing more afterwards fails with PP_ERR_CHECK naming both, instead of
     * growing it. NULL: the backend's kernels need no scratch of their own (the CPU's). */
    pp_status (*scratch_reserve)(void *ctx, size_t bytes);

    /* ---- vocabulary parallelism (required; runtime/stage_fwd.c with t > 1) ----
     * A tensor-parallel rank holds vocabulary rows [v0, v0 + Vl) of the token embedding and
     * of the head, of which the first nv are real and the rest padding (pp_rt_vocab_range in
     * pp_rt_sizes.h); its logits are (N, Vl). The stage all-reduces between the calls (Megatron-
     * LM's vocab_parallel_cross_entropy: max, then sum of exp and the target's logit). */
    /* out(N,C) = wte[tok - v0] for a token in [v0, v0 + nv), zero elsewhere. */
    pp_status (*vocab_embed_fwd)(void *ctx, float *out, const int32_t *tok, const float *wte,
                                 int N, int C, int v0, int nv);
    /* dwte[tok - v0] += dout[i] for each row i (in row order) whose token is in range. */
    pp_status (*vocab_embed_bwd)(void *ctx, float *dwte, const float *dout, const int32_t *tok,
                                 int N, int C, int v0, int nv);
    /* mx(N) = maximum of each row's first nv logits (-inf when nv = 0). */
    pp_status (*vocab_xent_max)(void *ctx, float *mx, const float *logits, int N, int Vl, int nv);
    /* In place, with M(i) the maximum over r < t of mx(t, N)[r][i] (every rank's maxima):
     * probs(N,Vl) = exp(logits - M) on the first nv columns, 0 on the padding; stats(2, N):
     * stats[i] = the row's sum, stats[N + i] = logits[i][target - v0] - M(i) for a target in
     * [v0, v0 + nv), else 0. */
    pp_status (*vocab_xent_exp)(void *ctx, float *probs, float *stats, const float *mx, int t,
                                const int32_t *targets, int N, int Vl, int v0, int nv);
    /* In place: probs(N,Vl) *= 1 / sums[i] per row (sums: the all-reduced sums of exp). */
    pp_status (*vocab_xent_norm)(void *ctx, float *probs, const float *sums, int N, int Vl);
    /* In place: probs(N,Vl) -> (probs - onehot(target - v0)) * scale, the one-hot only for a
     * target in [v0, v0 + Vl). */
    pp_status (*vocab_xent_bwd)(void *ctx, float *probs, const int32_t *targets, int N, int Vl,
                                int v0, float scale);
    /* ---- optional: context parallelism (NULL on a backend whose row in common/backends.c
     * has no context_parallel; runtime/stage_cp.c calls them, one ring step at a time) ----
     * This cp rank's rows are T = 2L per sequence: global chunk cpr then chunk 2 cp - 1 - cpr,
     * L rows each (rope_freq.h: pp_rope_pos); qkv(B, T, W) its rows laid out as
     * attention_fwd's, kv(B, T, W) the rows of cp rank `owner` (the same layout; its k and v
     * columns are read), which came around the ring. A query chunk c attends the key chunks
     * 0..c (the diagonal one causally); blocks right of it are skipped.
     * One step: the scores of the rank's queries over owner's visible key chunks into
     * att(B, NH, T, cp T) at the keys' global columns, merged into y(B, T, NH hd) with the
     * online softmax's running max and sum ml(2, B, NH, T). The first step is owner == cpr
     * (it starts y and ml). scratch: pp_rt_size_attn_scratch_cp bytes. */
    pp_status (*attention_cp_fwd)(void *ctx, float *y, float *att, float *ml, float *scratch,
                                  const float *qkv, const float *kv, int B, int T, int NH,
                                  int NKV, int hd, int cp, int cpr, int owner);
    /* After the last step: y divided by the sums, att's scores turned into the probabilities
     * (those of the masked entries 0), which the backward reads. */
    pp_status (*attention_cp_fwd_end)(void *ctx, float *y, float *att, const float *ml, int B,
                                      int T, int NH, int hd, int cp, int cpr);
    /* One step of the backward: dqkv(B, T, W) += this rank's queries' gradient (q columns)
     * from owner's keys, dkv(B, T, W) += owner's keys' and values' gradient from this rank's
     * queries (k, v columns). The first step (owner == cpr) zeroes both and fills dsum(B, NH,
     * T) = rowsum(dy y) from dy and the output y (N, NH hd). */
    pp_status (*attention_cp_bwd)(void *ctx, float *dqkv, float *dkv, float *dsum,
                                  float *scratch, const float *dy, const float *y,
                                  const float *att, const float *qkv, const float *kv, int B,
                                  int T, int NH, int NKV, int hd, int cp, int cpr, int owner);
    /* ---- optional (NULL: the backend keeps no copies of the weights, as the CPU's fp32) ----
     * w(n), a whole weight tensor, was written other than by adamw (the sharded optimizer's
     * all-gather of the stepped parameters, runtime/executor_zero.c): the backend's copies of
     * it (CUDA's bf16 weights, runtime/cuda/weights_bf16.cu) are rewritten from it, as adamw
     * would have written them. */
    pp_status (*weights_written)(void *ctx, const float *w, size_t n);
} pp_backend_ops;

struct pp_backend {
    const char *name; /* "cpu", "cuda" */
    const pp_backend_ops *ops;
    void *ctx;
    pp_mem_stats mem;
};

/* Arenas (runtime/executor_arena.c): pp_backend_reserve allocates bytes of the backend's
 * memory counted in mem.reserved only (NULL and an error message when out of memory);
 * pp_backend_unreserve frees it (NULL: no-op). The buffers carved from an arena are counted
 * in their categories with pp_backend_count while they are live, and uncounted
 * (pp_backend_uncount, saturating) when given back: the same figures pp_backend_alloc /
 * pp_backend_free keep, so peaks mean the same whichever way a buffer was had. */
void *pp_backend_reserve(pp_backend *be, size_t bytes);
void pp_backend_unreserve(pp_backend *be, void *p, size_t bytes);
void pp_backend_count(pp_backend *be, size_t bytes, pp_mem_category cat);
void pp_backend_uncount(pp_backend *be, size_t bytes, pp_mem_category cat);

/* The table's weights_written, or nothing where the backend keeps no weight copies (the CPU). */
pp_status pp_backend_weights_written(pp_backend *be, const float *w, size_t n);

/* How the runtime makes the backend of a row (common/pp_backends.h): each backend's code
 * defines `const pp_backend_maker pp_backend_maker_<id>`, <id> that of its row file
 * (runtime/<folder>/row_<id>.c), and backend_device.c finds them all through the generated list
 * (pp_backend_list.h), so that a backend needs no line outside its folder. */
typedef struct {
    /* Creates one on `device` (a host backend ignores it) computing in `precision` into *out
     * (the caller's, freed with pp_backend_destroy). */
    pp_status (*create)(int device, int precision, pp_backend **out);
    /* The devices it can be created on; NULL: a host backend, which needs none (0). */
    int (*device_count)(void);
} pp_backend_maker;
#define PP_BACKEND(ID, id) extern const pp_backend_maker pp_backend_maker_##id;
#include "pp_backend_list.h"
#undef PP_BACKEND

/* Wraps a filled table into a backend (takes ownership of ctx: destroy is called on failure). */
pp_status pp_backend_wrap(const char *name, const pp_backend_ops *ops, void *ctx, pp_backend **out);

#endif
