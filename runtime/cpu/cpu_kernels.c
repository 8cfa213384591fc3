/* cpu_kernels.c — the CPU backend's element-wise and row-wise kernels: embeddings, LayerNorm,
 * GELU, bias, cross-entropy, AdamW. Plain C; the hot loops use cpu_math.h's chunked rows so
 * that -O2 vectorises them (contiguous rows, no branches inside them). Attention is in
 * cpu_attention.c, GEMM in cpu_backend.c. Structure after karpathy/llm.c's train_gpt2.c; the code
 * is our own.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_math.h"
#include "cpu_pool.h"

typedef struct {
    float *y;
    const float *x;
    int rows, cols;
} rows_arg;

static void add_bias_part(void *v, size_t lo, size_t hi, int part)
{
    const rows_arg *a = v;
    (void)part;
    for (size_t i = lo; i < hi; i++)
        pp_row_add(a->y + i * a->cols, a->x, (size_t)a->cols);
}

pp_status pp_cpu_add_bias(void *ctx, float *y, const float *bias, int rows, int cols)
{
    rows_arg a = {y, bias, rows, cols};
    pp_cpu_par_for(ctx, (size_t)rows, 1, pp_cpu_min_rows((size_t)cols), add_bias_part, &a);
    return PP_OK;
}

/* Columns [lo, hi) of db, each summed over the rows in row order: the same additions in the
 * same order as one thread doing it row by row. */
static void bias_grad_part(void *v, size_t lo, size_t hi, int part)
{
    const rows_arg *a = v;
    (void)part;
    for (int i = 0; i < a->rows; i++)
        pp_row_add(a->y + lo, a->x + (size_t)i * a->cols + lo, hi - lo);
}

pp_status pp_cpu_bias_grad(void *ctx, float *db, const float *dy, int rows, int cols)
{
    rows_arg a = {db, dy, rows, cols};
    pp_cpu_par_for(ctx, (size_t)cols, PP_CPU_GRAIN,
                   (size_t)PP_CPU_MIN_PART / (rows > 0 ? (size_t)rows : 1), bias_grad_part, &a);
    return PP_OK;
}

static void add_part(void *v, size_t lo, size_t hi, int part)
{
    const rows_arg *a = v;
    (void)part;
    pp_row_add(a->y + lo, a->x + lo, hi - lo);
}

pp_status pp_cpu_add(void *ctx, float *y, const float *x, size_t n)
{
    rows_arg a = {y, x, 0, 0};
    pp_cpu_par_for(ctx, n, PP_CPU_GRAIN, PP_CPU_MIN_PART, add_part, &a);
    return PP_OK;
}

typedef struct {
    float *out, *dwte, *dwpe;
    const float *wte, *wpe, *dout;
    const int32_t *tok;
    int B, T, C;
} encoder_arg;

static void encoder_fwd_part(void *v, size_t lo, size_t hi, int part)
{
    const encoder_arg *a = v;
    const int C = a->C;
    (void)part;
    for (size_t r = lo; r < hi; r++) {
        float *o = a->out + r * C;
        const float *e = a->wte + (size_t)a->tok[r] * C;
        if (!a->wpe) { /* rotary models: positions enter in attention */
            memcpy(o, e, (size_t)C * sizeof(float));
            continue;
        }
        const float *p = a->wpe + (r % (size_t)a->T) * C;
        for (int c = 0; c < C; c++)
            o[c] = e[c] + p[c];
    }
}

pp_status pp_cpu_encoder_fwd(void *ctx, float *out, const int32_t *tok, const float *wte,
                             const float *wpe, int B, int T, int C)
{
    encoder_arg a = {.out = out, .wte = wte, .wpe = wpe, .tok = tok, .B = B, .T = T, .C = C};
    pp_cpu_par_for(ctx, (size_t)B * T, 1, pp_cpu_min_rows((size_t)C), encoder_fwd_part, &a);
    return PP_OK;
}

/* Columns [lo, hi) of every embedding row, the tokens taken in order: a token seen twice adds
 * in the same order as on one thread. */
static void encoder_bwd_part(void *v, size_t lo, size_t hi, int part)
{
    const encoder_arg *a = v;
    const size_t C = (size_t)a->C, n = hi - lo;
    (void)part;
    for (size_t r = 0; r < (size_t)a->B * a->T; r++) {
        const float *d = a->dout + r * C + lo;
        float *e = a->dwte + (size_t)a->tok[r] * C + lo;
        for (size_t c = 0; c < n; c++)
            e[c] += d[c];
        if (a->dwpe)
            pp_row_add(a->dwpe + (r % (size_t)a->T) * C + lo, d, n);
    }
}

pp_status pp_cpu_encoder_bwd(void *ctx, float *dwte, float *dwpe, const float *dout,
                             const int32_t *tok, int B, int T, int C)
{
    encoder_arg a = {.dwte = dwte, .dwpe = dwpe, .dout = dout, .tok = tok, .B = B, .T = T, .C = C};
    size_t rows = (size_t)B * T;
    pp_cpu_par_for(ctx, (size_t)C, PP_CPU_GRAIN, PP_CPU_MIN_PART / (rows ? rows : 1),
                   encoder_bwd_part, &a);
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

typedef struct {
    float *out, *mean, *rstd, *dx, *dg, *db;
    const float *x, *g, *b, *dout, *cmean, *crstd;
    int N, C;
    float eps;
} norm_arg;

static void layernorm_fwd_part(void *v, size_t lo, size_t hi, int part)
{
    const norm_arg *a = v;
    const int C = a->C;
    const float *g = a->g, *b = a->b;
    (void)part;
    for (size_t i = lo; i < hi; i++) {
        const float *xi = a->x + i * C;
        float *oi = a->out + i * C;
        float m = pp_row_sum(xi, C) / C;
        /* two passes: the variance of values far from 0 stays accurate */
        float s = 1.0f / sqrtf(row_sq_dev(xi, C, m) / C + a->eps);
        int c = 0;
        for (; c + PP_VW <= C; c += PP_VW) {
            float v8[PP_VW]; /* loads, then stores: vectorises without alias checks */
            for (int k = 0; k < PP_VW; k++)
                v8[k] = (xi[c + k] - m) * s * g[c + k] + (b ? b[c + k] : 0.0f);
            memcpy(oi + c, v8, sizeof v8);
        }
        for (; c < C; c++)
            oi[c] = (xi[c] - m) * s * g[c] + (b ? b[c] : 0.0f);
        a->mean[i] = m;
        a->rstd[i] = s;
    }
}

pp_status pp_cpu_layernorm_fwd(void *ctx, float *out, float *mean, float *rstd, const float *x,
                               const float *g, const float *b, int N, int C, float eps)
{
    norm_arg a = {
        .out = out, .mean = mean, .rstd = rstd, .x = x, .g = g, .b = b, .N = N, .C = C, .eps = eps};
    pp_cpu_par_for(ctx, (size_t)N, 1, pp_cpu_min_rows((size_t)C), layernorm_fwd_part, &a);
    return PP_OK;
}

/* With n = (x - mean) * rstd and y = n * g + b:
 *   dx = rstd * (dn - mean(dn) - n * mean(dn * n)),  dn = dy * g
 *   dg += dy * n,  db += dy
 * dx row by row (a row's sums stay in its part); dg and db, sums over rows, column by column
 * with the rows in order (layernorm_bwd_cols), so no split changes an addition's order. */
static void layernorm_bwd_row(float *dx, const float *dy, const float *x, const float *g, float m,
                              float s, int C)
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
        float vdx[PP_VW]; /* loads first, then the output */
        for (int k = 0; k < PP_VW; k++) {
            float n = (x[c + k] - m) * s;
            vdx[k] = (g[c + k] * dy[c + k] - mean_dn - n * mean_dnn) * s;
        }
        for (int k = 0; k < PP_VW; k++)
            dx[c + k] += vdx[k];
    }
    for (; c < C; c++) {
        float n = (x[c] - m) * s;
        dx[c] += (g[c] * dy[c] - mean_dn - n * mean_dnn) * s;
    }
}

static void layernorm_bwd_rows(void *v, size_t lo, size_t hi, int part)
{
    const norm_arg *a = v;
    (void)part;
    for (size_t i = lo; i < hi; i++) {
        size_t o = i * a->C;
        layernorm_bwd_row(a->dx + o, a->dout + o, a->x + o, a->g, a->cmean[i], a->crstd[i], a->C);
    }
}

static void layernorm_bwd_cols(void *v, size_t lo, size_t hi, int part)
{
    const norm_arg *a = v;
    const size_t n = hi - lo;
    float *dg = a->dg + lo, *db = a->db ? a->db + lo : NULL;
    (void)part;
    for (int i = 0; i < a->N; i++) {
        const float *x = a->x + (size_t)i * a->C + lo, *dy = a->dout + (size_t)i * a->C + lo;
        const float m = a->cmean[i], s = a->crstd[i];
        if (db)
            pp_row_add(db, dy, n);
        for (size_t c = 0; c < n; c++)
            dg[c] += (x[c] - m) * s * dy[c];
    }
}

pp_status pp_cpu_layernorm_bwd(void *ctx, float *dx, float *dg, float *db, const float *dout,
                               const float *x, const float *g, const float *mean, const float *rstd,
                               int N, int C)
{
    norm_arg a = {.dx = dx,
                  .dg = dg,
                  .db = db,
                  .dout = dout,
                  .x = x,
                  .g = g,
                  .cmean = mean,
                  .crstd = rstd,
                  .N = N,
                  .C = C};
    /* dg, db first: they read dout, which dx may share storage with */
    pp_cpu_par_for(ctx, (size_t)C, PP_CPU_GRAIN, (size_t)PP_CPU_MIN_PART / (N > 0 ? (size_t)N : 1),
                   layernorm_bwd_cols, &a);
    pp_cpu_par_for(ctx, (size_t)N, 1, pp_cpu_min_rows((size_t)C), layernorm_bwd_rows, &a);
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

typedef struct {
    float *y;
    const float *x, *dy;
} ew_arg;

static void gelu_fwd_part(void *v, size_t lo, size_t hi, int part)
{
    const ew_arg *a = v;
    const float *x = a->x;
    float *y = a->y;
    size_t i = lo;
    (void)part;
    for (; i + PP_VW <= hi; i += PP_VW) {
        float v8[PP_VW]; /* all loads, then all stores: vectorises without alias checks */
        for (int k = 0; k < PP_VW; k++)
            v8[k] = gelu_at(x[i + k]);
        memcpy(y + i, v8, sizeof v8);
    }
    for (; i < hi; i++)
        y[i] = gelu_at(x[i]);
}

/* An exp per element: parts of a quarter of the plain minimum. */
pp_status pp_cpu_gelu_fwd(void *ctx, float *y, const float *x, size_t n)
{
    ew_arg a = {y, x, NULL};
    pp_cpu_par_for(ctx, n, PP_CPU_GRAIN, PP_CPU_MIN_PART / 4, gelu_fwd_part, &a);
    return PP_OK;
}

/* d gelu / dx = 0.5 (1 + th) + 0.5 x (1 - th^2) k (1 + 3 a x^2),  th = tanh(k (x + a x^3)) */
static inline float gelu_grad_at(float v)
{
    float th = pp_tanh_fast(PP_GELU_K * (v + PP_GELU_A * v * v * v));
    float du = PP_GELU_K * (1.0f + 3.0f * PP_GELU_A * v * v);
    return 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du;
}

static void gelu_bwd_part(void *v, size_t lo, size_t hi, int part)
{
    const ew_arg *a = v;
    const float *x = a->x, *dy = a->dy;
    float *dx = a->y;
    size_t i = lo;
    (void)part;
    for (; i + PP_VW <= hi; i += PP_VW) {
        float v8[PP_VW]; /* dx may alias dy: load the chunk, then store it */
        for (int k = 0; k < PP_VW; k++)
            v8[k] = gelu_grad_at(x[i + k]) * dy[i + k];
        memcpy(dx + i, v8, sizeof v8);
    }
    for (; i < hi; i++)
        dx[i] = gelu_grad_at(x[i]) * dy[i];
}

pp_status pp_cpu_gelu_bwd(void *ctx, float *dx, const float *x, const float *dy, size_t n)
{
    ew_arg a = {dx, x, dy};
    pp_cpu_par_for(ctx, n, PP_CPU_GRAIN, PP_CPU_MIN_PART / 4, gelu_bwd_part, &a);
    return PP_OK;
}

typedef struct {
    float *probs;
    double *loss; /* per row, summed in row order by the caller */
    const int32_t *targets;
    int V;
    float scale;
} xent_arg;

/* Softmax with the row maximum subtracted; the loss is log(sum) - (l[target] - max), which
 * keeps its precision when p[target] is tiny. */
static void xent_fwd_part(void *v, size_t lo, size_t hi, int part)
{
    const xent_arg *a = v;
    const int V = a->V;
    (void)part;
    for (size_t i = lo; i < hi; i++) {
        float *row = a->probs + i * V;
        float mx = pp_row_max(row, V);
        float lt = row[a->targets[i]] - mx;
        float sum = pp_row_exp_sum(row, V, mx);
        pp_row_scale(row, V, 1.0f / sum);
        a->loss[i] = (double)logf(sum) - (double)lt;
    }
}

/* The mean is accumulated in double, over the rows in order whatever the split. */
pp_status pp_cpu_xent_fwd(void *ctx, float *probs, const int32_t *targets, int N, int V,
                          float *mean_loss_host)
{
    double *loss = malloc((size_t)(N > 0 ? N : 1) * sizeof *loss);
    if (!loss)
        return PP_ERR(PP_ERR_NOMEM, "xent_fwd: cannot allocate the losses of %d rows", N);
    xent_arg a = {probs, loss, targets, V, 0.0f};
    pp_cpu_par_for(ctx, (size_t)N, 1, pp_cpu_min_rows((size_t)V) / 4 + 1, xent_fwd_part, &a);
    double total = 0.0;
    for (int i = 0; i < N; i++)
        total += loss[i];
    free(loss);
    *mean_loss_host = N > 0 ? (float)(total / N) : 0.0f;
    return PP_OK;
}

static void xent_bwd_part(void *v, size_t lo, size_t hi, int part)
{
    const xent_arg *a = v;
    (void)part;
    for (size_t i = lo; i < hi; i++) {
        float *row = a->probs + i * a->V;
        row[a->targets[i]] -= 1.0f;
        pp_row_scale(row, a->V, a->scale);
    }
}

pp_status pp_cpu_xent_bwd(void *ctx, float *probs, const int32_t *targets, int N, int V,
                          float scale)
{
    xent_arg a = {probs, NULL, targets, V, scale};
    pp_cpu_par_for(ctx, (size_t)N, 1, pp_cpu_min_rows((size_t)V), xent_bwd_part, &a);
    return PP_OK;
}

typedef struct {
    float *w, *m, *v;
    const float *g;
    const pp_adamw_scalars *s;
} adamw_arg;

/* AdamW (Loshchilov & Hutter 2019, Algorithm 2), decoupled weight decay:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   w -= lr * ( (m / bc1) / (sqrt(v / bc2) + eps) + wd * w )                                  */
static void adamw_part(void *arg, size_t lo, size_t hi, int part)
{
    const adamw_arg *a = arg;
    const pp_adamw_scalars *s = a->s;
    const float b1 = s->beta1, b2 = s->beta2, c1 = 1.0f - b1, c2 = 1.0f - b2, gs = s->grad_scale;
    const float bc1 = s->bc1, bc2 = s->bc2, lr = s->lr, eps = s->eps, wd = s->weight_decay;
    float *w = a->w, *m = a->m, *v = a->v;
    const float *g = a->g;
    size_t i = lo;
    (void)part;
    for (; i + PP_VW <= hi; i += PP_VW) {
        float vw[PP_VW], vm[PP_VW], vv[PP_VW]; /* loads, then stores: vectorises */
        for (int k = 0; k < PP_VW; k++) {
            float gi = g[i + k] * gs;
            vm[k] = b1 * m[i + k] + c1 * gi;
            vv[k] = b2 * v[i + k] + c2 * gi * gi;
            vw[k] = w[i + k] - lr * ((vm[k] / bc1) / (sqrtf(vv[k] / bc2) + eps) + wd * w[i + k]);
        }
        memcpy(m + i, vm, sizeof vm);
        memcpy(v + i, vv, sizeof vv);
        memcpy(w + i, vw, sizeof vw);
    }
    for (; i < hi; i++) {
        float gi = g[i] * gs;
        m[i] = b1 * m[i] + c1 * gi;
        v[i] = b2 * v[i] + c2 * gi * gi;
        w[i] -= lr * ((m[i] / bc1) / (sqrtf(v[i] / bc2) + eps) + wd * w[i]);
    }
}

pp_status pp_cpu_adamw(void *ctx, float *w, const float *g, float *m, float *v, size_t n,
                       const pp_adamw_scalars *s)
{
    adamw_arg a = {w, m, v, g, s};
    pp_cpu_par_for(ctx, n, PP_CPU_GRAIN, PP_CPU_MIN_PART / 2, adamw_part, &a);
    return PP_OK;
}
