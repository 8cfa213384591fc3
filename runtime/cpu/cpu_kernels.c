/* cpu_kernels.c — the CPU backend's element-wise and row-wise kernels: embeddings, LayerNorm,
 * GELU, bias, cross-entropy, AdamW. Plain C; the hot loops use cpu_math.h's chunked rows so
 * that -O2 vectorises them (contiguous rows, no branches inside them). Attention is in
 * cpu_attention.c, GEMM in cpu_backend.c. Structure after karpathy/llm.c's train_gpt2.c; the code
 * is our own.
 */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_math.h"

/* LayerNorm epsilon, as GPT-2 (Radford et al. 2019) and PyTorch's default. */

pp_status pp_cpu_add_bias(void *ctx, float *y, const float *bias, int rows, int cols)
{
    (void)ctx;
    for (int i = 0; i < rows; i++)
        pp_row_add(y + (size_t)i * cols, bias, (size_t)cols);
    return PP_OK;
}

pp_status pp_cpu_bias_grad(void *ctx, float *db, const float *dy, int rows, int cols)
{
    (void)ctx;
    /* Row by row so the inner loop is a contiguous vector add (a column walk would stride). */
    for (int i = 0; i < rows; i++)
        pp_row_add(db, dy + (size_t)i * cols, (size_t)cols);
    return PP_OK;
}

pp_status pp_cpu_add(void *ctx, float *y, const float *x, size_t n)
{
    (void)ctx;
    pp_row_add(y, x, n);
    return PP_OK;
}

pp_status pp_cpu_encoder_fwd(void *ctx, float *out, const int32_t *tok, const float *wte,
                             const float *wpe, int B, int T, int C)
{
    (void)ctx;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *e = wte + (size_t)tok[b * T + t] * C;
            if (!wpe) { /* rotary models: positions enter in attention */
                memcpy(o, e, (size_t)C * sizeof(float));
                continue;
            }
            const float *p = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++)
                o[c] = e[c] + p[c];
        }
    return PP_OK;
}

pp_status pp_cpu_encoder_bwd(void *ctx, float *dwte, float *dwpe, const float *dout,
                             const int32_t *tok, int B, int T, int C)
{
    (void)ctx;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float *e = dwte + (size_t)tok[b * T + t] * C;
            for (int c = 0; c < C; c++)
                e[c] += d[c];
            if (dwpe)
                pp_row_add(dwpe + (size_t)t * C, d, (size_t)C);
        }
    return PP_OK;
}

/* Sum of (x - m)^2 over a row, in PP_VW partial sums. */
static float row_sq_dev(const float *x, int n, float m)
{
    float s[PP_VW] = {0};
    int i = 0;
    for (; i + PP_VW <= n; i += PP_VW)
        for (int k = 0; k < PP_VW; k++)
            s[k] += (x[i + k] - m) * (x[i + k] - m);
    float r = pp_sum8(s);
    for (; i < n; i++)
        r += (x[i] - m) * (x[i] - m);
    return r;
}

pp_status pp_cpu_layernorm_fwd(void *ctx, float *out, float *mean, float *rstd, const float *x,
                               const float *g, const float *b, int N, int C, float eps)
{
    (void)ctx;
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C;
        float *oi = out + (size_t)i * C;
        float m = pp_row_sum(xi, C) / C;
        /* two passes: the variance of values far from 0 stays accurate */
        float s = 1.0f / sqrtf(row_sq_dev(xi, C, m) / C + eps);
        int c = 0;
        for (; c + PP_VW <= C; c += PP_VW) {
            float v[PP_VW]; /* loads, then stores: vectorises without alias checks */
            for (int k = 0; k < PP_VW; k++)
                v[k] = (xi[c + k] - m) * s * g[c + k] + (b ? b[c + k] : 0.0f);
            memcpy(oi + c, v, sizeof v);
        }
        for (; c < C; c++)
            oi[c] = (xi[c] - m) * s * g[c] + (b ? b[c] : 0.0f);
        mean[i] = m;
        rstd[i] = s;
    }
    return PP_OK;
}

/* With n = (x - mean) * rstd and y = n * g + b:
 *   dx = rstd * (dn - mean(dn) - n * mean(dn * n)),  dn = dy * g
 *   dg += dy * n,  db += dy                                          */
static void layernorm_bwd_row(float *dx, float *dg, float *db, const float *dy, const float *x,
                              const float *g, float m, float s, int C)
{
    float s1[PP_VW] = {0}, s2[PP_VW] = {0};
    int c = 0;
    for (; c + PP_VW <= C; c += PP_VW)
        for (int k = 0; k < PP_VW; k++) {
            float dn = g[c + k] * dy[c + k];
            s1[k] += dn;
            s2[k] += dn * (x[c + k] - m) * s;
        }
    float sum_dn = pp_sum8(s1), sum_dnn = pp_sum8(s2);
    for (int t = c; t < C; t++) {
        float dn = g[t] * dy[t];
        sum_dn += dn;
        sum_dnn += dn * (x[t] - m) * s;
    }
    const float mean_dn = sum_dn / C, mean_dnn = sum_dnn / C;
    for (c = 0; c + PP_VW <= C; c += PP_VW) {
        float vdy[PP_VW], vdg[PP_VW], vdx[PP_VW]; /* loads first, then one output at a time */
        for (int k = 0; k < PP_VW; k++) {
            float n = (x[c + k] - m) * s;
            vdy[k] = dy[c + k];
            vdg[k] = n * vdy[k];
            vdx[k] = (g[c + k] * vdy[k] - mean_dn - n * mean_dnn) * s;
        }
        if (db)
            for (int k = 0; k < PP_VW; k++)
                db[c + k] += vdy[k];
        for (int k = 0; k < PP_VW; k++)
            dg[c + k] += vdg[k];
        for (int k = 0; k < PP_VW; k++)
            dx[c + k] += vdx[k];
    }
    for (; c < C; c++) {
        float n = (x[c] - m) * s;
        if (db)
            db[c] += dy[c];
        dg[c] += n * dy[c];
        dx[c] += (g[c] * dy[c] - mean_dn - n * mean_dnn) * s;
    }
}

pp_status pp_cpu_layernorm_bwd(void *ctx, float *dx, float *dg, float *db, const float *dout,
                               const float *x, const float *g, const float *mean, const float *rstd,
                               int N, int C)
{
    (void)ctx;
    for (int i = 0; i < N; i++) {
        size_t o = (size_t)i * C;
        layernorm_bwd_row(dx + o, dg, db, dout + o, x + o, g, mean[i], rstd[i], C);
    }
    return PP_OK;
}

/* GELU, tanh approximation (Hendrycks & Gimpel 2016), as GPT-2:
 *   gelu(x) = 0.5 x (1 + tanh(k (x + 0.044715 x^3))),  k = sqrt(2/pi)                        */
#define PP_GELU_K 0.7978845608028654f
#define PP_GELU_A 0.044715f

static inline float gelu_at(float v)
{
    float u = PP_GELU_K * (v + PP_GELU_A * v * v * v);
    return 0.5f * v * (1.0f + pp_tanh_fast(u));
}

pp_status pp_cpu_gelu_fwd(void *ctx, float *y, const float *x, size_t n)
{
    (void)ctx;
    size_t i = 0;
    for (; i + PP_VW <= n; i += PP_VW) {
        float v[PP_VW]; /* all loads, then all stores: vectorises without alias checks */
        for (int k = 0; k < PP_VW; k++)
            v[k] = gelu_at(x[i + k]);
        memcpy(y + i, v, sizeof v);
    }
    for (; i < n; i++)
        y[i] = gelu_at(x[i]);
    return PP_OK;
}

/* d gelu / dx = 0.5 (1 + th) + 0.5 x (1 - th^2) k (1 + 3 a x^2),  th = tanh(k (x + a x^3)) */
static inline float gelu_grad_at(float v)
{
    float th = pp_tanh_fast(PP_GELU_K * (v + PP_GELU_A * v * v * v));
    float du = PP_GELU_K * (1.0f + 3.0f * PP_GELU_A * v * v);
    return 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du;
}

pp_status pp_cpu_gelu_bwd(void *ctx, float *dx, const float *x, const float *dy, size_t n)
{
    (void)ctx;
    size_t i = 0;
    for (; i + PP_VW <= n; i += PP_VW) {
        float v[PP_VW]; /* dx may alias dy: load the chunk, then store it */
        for (int k = 0; k < PP_VW; k++)
            v[k] = gelu_grad_at(x[i + k]) * dy[i + k];
        memcpy(dx + i, v, sizeof v);
    }
    for (; i < n; i++)
        dx[i] = gelu_grad_at(x[i]) * dy[i];
    return PP_OK;
}

/* Softmax with the row maximum subtracted; the loss is log(sum) - (l[target] - max), which
 * keeps its precision when p[target] is tiny. The mean is accumulated in double. */
pp_status pp_cpu_xent_fwd(void *ctx, float *probs, const int32_t *targets, int N, int V,
                          float *mean_loss_host)
{
    (void)ctx;
    double total = 0.0;
    for (int i = 0; i < N; i++) {
        float *row = probs + (size_t)i * V;
        float mx = pp_row_max(row, V);
        float lt = row[targets[i]] - mx;
        float sum = pp_row_exp_sum(row, V, mx);
        pp_row_scale(row, V, 1.0f / sum);
        total += (double)logf(sum) - (double)lt;
    }
    *mean_loss_host = N > 0 ? (float)(total / N) : 0.0f;
    return PP_OK;
}

pp_status pp_cpu_xent_bwd(void *ctx, float *probs, const int32_t *targets, int N, int V,
                          float scale)
{
    (void)ctx;
    for (int i = 0; i < N; i++) {
        float *row = probs + (size_t)i * V;
        row[targets[i]] -= 1.0f;
        pp_row_scale(row, V, scale);
    }
    return PP_OK;
}

/* AdamW (Loshchilov & Hutter 2019, Algorithm 2), decoupled weight decay:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   w -= lr * ( (m / bc1) / (sqrt(v / bc2) + eps) + wd * w )                                  */
pp_status pp_cpu_adamw(void *ctx, float *w, const float *g, float *m, float *v, size_t n,
                       const pp_adamw_scalars *s)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * s->grad_scale;
        m[i] = s->beta1 * m[i] + (1.0f - s->beta1) * gi;
        v[i] = s->beta2 * v[i] + (1.0f - s->beta2) * gi * gi;
        float mhat = m[i] / s->bc1;
        float vhat = v[i] / s->bc2;
        w[i] -= s->lr * (mhat / (sqrtf(vhat) + s->eps) + s->weight_decay * w[i]);
    }
    return PP_OK;
}
