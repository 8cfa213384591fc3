/* cpu_kernels.h — private to runtime/cpu/: the CPU backend's kernels, one declaration per entry
 * of pp_backend_ops (runtime/backend.h documents what each computes). Plain C, fp32, on the
 * threads of the backend's pool (ctx, cpu_pool.h; NULL runs them on the caller alone).
 */
#ifndef PP_RT_CPU_KERNELS_H
#define PP_RT_CPU_KERNELS_H

#include "../backend.h"

#include "pp_rt_sizes.h" /* PP_ATT_BLOCK: the attention's query blocks */

pp_status pp_cpu_gemm(void *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc);
pp_status pp_cpu_add_bias(void *ctx, float *y, const float *bias, int rows, int cols);
pp_status pp_cpu_bias_grad(void *ctx, float *db, const float *dy, int rows, int cols);
pp_status pp_cpu_add(void *ctx, float *y, const float *x, size_t n);
pp_status pp_cpu_encoder_fwd(void *ctx, float *out, const int32_t *tok, const float *wte,
                             const float *wpe, int B, int T, int C);
pp_status pp_cpu_encoder_bwd(void *ctx, float *dwte, float *dwpe, const float *dout,
                             const int32_t *tok, int B, int T, int C);
pp_status pp_cpu_layernorm_fwd(void *ctx, float *out, float *mean, float *rstd, const float *x,
                               const float *g, const float *b, int N, int C, float eps);
pp_status pp_cpu_layernorm_bwd(void *ctx, float *dx, float *dg, float *db, const float *dout,
                               const float *x, const float *g, const float *mean, const float *rstd,
                               int N, int C);
pp_status pp_cpu_attention_fwd(void *ctx, float *y, float *att, const float *qkv, int B, int T,
                               int NH, int NKV, int hd);
pp_status pp_cpu_attention_bwd(void *ctx, float *dqkv, float *scratch, const float *dy,
                               const float *att, const float *qkv, int B, int T, int NH, int NKV,
                               int hd);
pp_status pp_cpu_attention_cp_fwd(void *ctx, float *y, float *att, float *ml, float *scratch,
                                  const float *qkv, const float *kv, int B, int T, int NH, int NKV,
                                  int hd, int cp, int cpr, int owner);
pp_status pp_cpu_attention_cp_fwd_end(void *ctx, float *y, float *att, const float *ml, int B,
                                      int T, int NH, int hd, int cp, int cpr);
pp_status pp_cpu_attention_cp_bwd(void *ctx, float *dqkv, float *dkv, float *dsum, float *scratch,
                                  const float *dy, const float *y, const float *att,
                                  const float *qkv, const float *kv, int B, int T, int NH, int NKV,
                                  int hd, int cp, int cpr, int owner);
/* cpu_llama.c */
pp_status pp_cpu_rmsnorm_fwd(void *ctx, float *out, float *rstd, const float *x, const float *g,
                             int N, int C, float eps);
pp_status pp_cpu_rmsnorm_bwd(void *ctx, float *dx, float *dg, const float *dout, const float *x,
                             const float *g, const float *rstd, int N, int C);
pp_status pp_cpu_swiglu_fwd(void *ctx, float *y, const float *x, int N, int F);
pp_status pp_cpu_swiglu_bwd(void *ctx, float *dx, const float *x, const float *dy, int ldy, int N,
                            int F);
pp_status pp_cpu_rope(void *ctx, float *x, int N, int T, int nh, int hd, int ld, const pp_rope *r,
                      int dir);
/* cpu_headnorm.c */
pp_status pp_cpu_headnorm_fwd(void *ctx, float *x, float *xin, float *rstd, const float *gq,
                              const float *gk, int N, int nq, int nk, int hd, int ld, float eps);
pp_status pp_cpu_headnorm_bwd(void *ctx, float *dx, float *dgq, float *dgk, const float *xin,
                              const float *rstd, const float *gq, const float *gk, int N, int nq,
                              int nk, int hd, int ld);
size_t pp_cpu_attention_scratch_bytes(void *ctx, int B, int T, int C, int NH);
pp_status pp_cpu_gelu_fwd(void *ctx, float *y, const float *x, size_t n);
pp_status pp_cpu_gelu_bwd(void *ctx, float *dx, const float *x, const float *dy, size_t n);
pp_status pp_cpu_xent_fwd(void *ctx, float *probs, const int32_t *targets, int N, int V,
                          float *mean_loss_host);
pp_status pp_cpu_xent_bwd(void *ctx, float *probs, const int32_t *targets, int N, int V,
                          float scale);
/* cpu_vocab.c */
pp_status pp_cpu_vocab_embed_fwd(void *ctx, float *out, const int32_t *tok, const float *wte,
                                 int N, int C, int v0, int nv);
pp_status pp_cpu_vocab_embed_bwd(void *ctx, float *dwte, const float *dout, const int32_t *tok,
                                 int N, int C, int v0, int nv);
pp_status pp_cpu_vocab_xent_max(void *ctx, float *mx, const float *logits, int N, int Vl, int nv);
pp_status pp_cpu_vocab_xent_exp(void *ctx, float *probs, float *stats, const float *mx, int t,
                                const int32_t *targets, int N, int Vl, int v0, int nv);
pp_status pp_cpu_vocab_xent_norm(void *ctx, float *probs, const float *sums, int N, int Vl);
pp_status pp_cpu_vocab_xent_bwd(void *ctx, float *probs, const int32_t *targets, int N, int Vl,
                                int v0, float scale);
pp_status pp_cpu_adamw(void *ctx, float *w, const float *g, float *m, float *v, size_t n,
                       const pp_adamw_scalars *s);

#endif
