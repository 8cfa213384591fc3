/* cpu_headnorm.c — the CPU kernels of Qwen3's per-head q/k RMSNorm, forward and backward
 * (runtime/backend.h's headnorm_fwd / headnorm_bwd). Plain C, fp32.
 *
 * Qwen3 (transformers' models/qwen3/modeling_qwen3.py, Qwen3Attention: q_norm and k_norm are
 * Qwen3RMSNorm(head_dim) applied to q_proj / k_proj's output viewed as (..., heads, head_dim),
 * before the rotary embedding) normalises every head of q and of k on its own, with one weight
 * of head_dim floats shared by all query heads and one by all KV heads:
 *   y = x r g,  r = 1/sqrt(mean over the head's hd values of x^2 + eps)
 *   dx = r (g dy) - x r^3 mean(g dy x),  dg += dy x r (summed over rows and heads)
 * as cpu_llama.c's RMSNorm, on (row, head) pieces of hd floats within rows of stride ld.
 */
#include <math.h>

#include "cpu_kernels.h"
#include "cpu_math.h"
#include "cpu_pool.h"

typedef struct {
    float *x, *xin, *rstd, *dgq, *dgk;
    const float *cxin, *crstd, *gq, *gk;
    int N, nq, nk, hd, ld;
    float eps;
} headnorm_arg;

static void headnorm_fwd_part(void *v, size_t lo, size_t hi, int part)
{
    const headnorm_arg *a = v;
    const int hd = a->hd, nh = a->nq + a->nk;
    (void)part;
    for (size_t n = lo; n < hi; n++)
        for (int h = 0; h < nh; h++) {
            float *x = a->x + n * a->ld + (size_t)h * hd;
            float *xin = a->xin + (n * nh + h) * hd;
            const float *g = h < a->nq ? a->gq : a->gk;
            float r = 1.0f / sqrtf(pp_row_dot(x, x, hd) / hd + a->eps);
            for (int j = 0; j < hd; j++) {
                xin[j] = x[j];
                x[j] = x[j] * r * g[j];
            }
            a->rstd[n * nh + h] = r;
        }
}

pp_status pp_cpu_headnorm_fwd(void *ctx, float *x, float *xin, float *rstd, const float *gq,
                              const float *gk, int N, int nq, int nk, int hd, int ld, float eps)
{
    headnorm_arg a = {.x = x, .xin = xin, .rstd = rstd, .gq = gq, .gk = gk, .N = N, .nq = nq,
                      .nk = nk, .hd = hd, .ld = ld, .eps = eps};
    pp_cpu_par_for(ctx, (size_t)N, 1, pp_cpu_min_rows((size_t)(nq + nk) * hd), headnorm_fwd_part,
                   &a);
    return PP_OK;
}

/* dg, a sum over rows and heads, column by column (parts split the hd columns of q's and k's
 * weights: index c < hd is gq's column c, else gk's c - hd) with rows and heads in order, so
 * that no split changes the order of an addition. */
static void headnorm_bwd_cols(void *v, size_t lo, size_t hi, int part)
{
    const headnorm_arg *a = v;
    const int hd = a->hd, nh = a->nq + a->nk;
    (void)part;
    for (int n = 0; n < a->N; n++)
        for (int h = 0; h < nh; h++) {
            int q = h < a->nq;
            size_t c0 = q ? 0 : (size_t)hd, c1 = c0 + (size_t)hd;
            size_t b = lo > c0 ? lo : c0, e = hi < c1 ? hi : c1;
            const float *dy = a->x + (size_t)n * a->ld + (size_t)h * hd;
            const float *xin = a->cxin + ((size_t)n * nh + h) * hd;
            float r = a->crstd[(size_t)n * nh + h], *dg = q ? a->dgq : a->dgk;
            for (size_t c = b; c < e; c++)
                dg[c - c0] += dy[c - c0] * xin[c - c0] * r;
        }
}

static void headnorm_bwd_rows(void *v, size_t lo, size_t hi, int part)
{
    const headnorm_arg *a = v;
    const int hd = a->hd, nh = a->nq + a->nk;
    (void)part;
    for (size_t n = lo; n < hi; n++)
        for (int h = 0; h < nh; h++) {
            float *dx = a->x + n * a->ld + (size_t)h * hd;
            const float *xin = a->cxin + (n * nh + h) * hd;
            const float *g = h < a->nq ? a->gq : a->gk;
            float r = a->crstd[n * nh + h], dot = 0.0f; /* sum of g dy x */
            for (int j = 0; j < hd; j++)
                dot += g[j] * dx[j] * xin[j];
            float k = dot / hd * r * r * r;
            for (int j = 0; j < hd; j++)
                dx[j] = r * g[j] * dx[j] - xin[j] * k;
        }
}

pp_status pp_cpu_headnorm_bwd(void *ctx, float *dx, float *dgq, float *dgk, const float *xin,
                              const float *rstd, const float *gq, const float *gk, int N, int nq,
                              int nk, int hd, int ld)
{
    headnorm_arg a = {.x = dx, .dgq = dgq, .dgk = dgk, .cxin = xin, .crstd = rstd, .gq = gq,
                      .gk = gk, .N = N, .nq = nq, .nk = nk, .hd = hd, .ld = ld};
    size_t rows = (size_t)N * (size_t)(nq + nk);
    /* dg first: it reads dy, which dx overwrites */
    pp_cpu_par_for(ctx, 2 * (size_t)hd, PP_CPU_GRAIN,
                   (size_t)PP_CPU_MIN_PART / (rows > 0 ? rows : 1), headnorm_bwd_cols, &a);
    pp_cpu_par_for(ctx, (size_t)N, 1, pp_cpu_min_rows((size_t)(nq + nk) * hd), headnorm_bwd_rows,
                   &a);
    return PP_OK;
}
