/* cpu_llama.c — the CPU kernels of the Llama-family block: RMSNorm, SwiGLU and rotary
 * positions, forward and backward (runtime/backend.h says what each computes). Plain C, fp32.
 *
 * RMSNorm (Zhang & Sennrich, arXiv:1910.07467; transformers' LlamaRMSNorm):
 *   y = x r g,  r = 1/sqrt(mean(x^2) + eps)
 *   dx = r (g dy) - x r^3 mean(g dy x),  dg += dy x r
 * SwiGLU (Shazeer, arXiv:2002.05202): y = silu(a) u, silu(a) = a sigma(a)
 *   da = dy u sigma(a) (1 + a (1 - sigma(a))),  du = dy silu(a)
 * Rotary (Su et al., arXiv:2104.09864; frequencies and layout in runtime/rope_freq.h):
 *   (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), its backward the rotation by -angle.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu_kernels.h"
#include "cpu_math.h"
#include "cpu_pool.h"

typedef struct {
    float *out, *rstd, *dx, *dg;
    const float *x, *g, *dout, *crstd;
    int N, C;
    float eps;
} rms_arg;

static void rmsnorm_fwd_part(void *v, size_t lo, size_t hi, int part)
{
    const rms_arg *a = v;
    const int C = a->C;
    (void)part;
    for (size_t i = lo; i < hi; i++) {
        const float *xi = a->x + i * C;
        float *oi = a->out + i * C;
        float r = 1.0f / sqrtf(pp_row_dot(xi, xi, C) / C + a->eps);
        for (int c = 0; c < C; c++)
            oi[c] = xi[c] * r * a->g[c];
        a->rstd[i] = r;
    }
}

pp_status pp_cpu_rmsnorm_fwd(void *ctx, float *out, float *rstd, const float *x, const float *g,
                             int N, int C, float eps)
{
    rms_arg a = {.out = out, .rstd = rstd, .x = x, .g = g, .N = N, .C = C, .eps = eps};
    pp_cpu_par_for(ctx, (size_t)N, 1, pp_cpu_min_rows((size_t)C), rmsnorm_fwd_part, &a);
    return PP_OK;
}

/* dx row by row; dg, a sum over rows, column by column with the rows in order, so that no
 * split changes the order of an addition. */
static void rmsnorm_bwd_rows(void *v, size_t lo, size_t hi, int part)
{
    const rms_arg *a = v;
    const int C = a->C;
    const float *g = a->g;
    (void)part;
    for (size_t i = lo; i < hi; i++) {
        const float *xi = a->x + i * C, *dy = a->dout + i * C;
        float *dxi = a->dx + i * C, r = a->crstd[i];
        float dot = 0.0f; /* sum of g dy x */
        for (int c = 0; c < C; c++)
            dot += g[c] * dy[c] * xi[c];
        float k = dot / C * r * r * r;
        for (int c = 0; c < C; c++)
            dxi[c] += r * g[c] * dy[c] - xi[c] * k;
    }
}

static void rmsnorm_bwd_cols(void *v, size_t lo, size_t hi, int part)
{
    const rms_arg *a = v;
    float *dg = a->dg;
    (void)part;
    for (int i = 0; i < a->N; i++) {
        const float *xi = a->x + (size_t)i * a->C, *dy = a->dout + (size_t)i * a->C;
        float r = a->crstd[i];
        for (size_t c = lo; c < hi; c++)
            dg[c] += dy[c] * xi[c] * r;
    }
}

pp_status pp_cpu_rmsnorm_bwd(void *ctx, float *dx, float *dg, const float *dout, const float *x,
                             const float *g, const float *rstd, int N, int C)
{
    rms_arg a = {.dx = dx, .dg = dg, .x = x, .g = g, .dout = dout, .crstd = rstd, .N = N, .C = C};
    /* dg first: it reads dout, which dx may share storage with */
    pp_cpu_par_for(ctx, (size_t)C, PP_CPU_GRAIN, (size_t)PP_CPU_MIN_PART / (N > 0 ? (size_t)N : 1),
                   rmsnorm_bwd_cols, &a);
    pp_cpu_par_for(ctx, (size_t)N, 1, pp_cpu_min_rows((size_t)C), rmsnorm_bwd_rows, &a);
    return PP_OK;
}

static inline float sigmoid(float a)
{
    return 1.0f / (1.0f + expf(-a));
}

typedef struct {
    float *y;
    const float *x, *dy;
    int F, ldy;
} swiglu_arg;

static void swiglu_fwd_part(void *v, size_t lo, size_t hi, int part)
{
    const swiglu_arg *s = v;
    const int F = s->F;
    (void)part;
    for (size_t i = lo; i < hi; i++) {
        const float *a = s->x + i * 2 * F, *u = a + F;
        float *yi = s->y + i * F;
        for (int j = 0; j < F; j++)
            yi[j] = a[j] * sigmoid(a[j]) * u[j];
    }
}

/* An exp per element: parts of a quarter of the plain minimum. */
pp_status pp_cpu_swiglu_fwd(void *ctx, float *y, const float *x, int N, int F)
{
    swiglu_arg a = {y, x, NULL, F, 0};
    pp_cpu_par_for(ctx, (size_t)N, 1, pp_cpu_min_rows((size_t)F) / 4 + 1, swiglu_fwd_part, &a);
    return PP_OK;
}

static void swiglu_bwd_part(void *v, size_t lo, size_t hi, int part)
{
    const swiglu_arg *s = v;
    const int F = s->F;
    (void)part;
    for (size_t i = lo; i < hi; i++) {
        const float *a = s->x + i * 2 * F, *u = a + F, *d = s->dy + i * s->ldy;
        float *da = s->y + i * 2 * F, *du = da + F;
        for (int j = 0; j < F; j++) {
            float dyj = d[j], sg = sigmoid(a[j]); /* read before du[j] (may be d[j]) is written */
            da[j] = dyj * u[j] * sg * (1.0f + a[j] * (1.0f - sg));
            du[j] = dyj * a[j] * sg;
        }
    }
}

pp_status pp_cpu_swiglu_bwd(void *ctx, float *dx, const float *x, const float *dy, int ldy, int N,
                            int F)
{
    swiglu_arg a = {dx, x, dy, F, ldy};
    pp_cpu_par_for(ctx, (size_t)N, 1, pp_cpu_min_rows((size_t)F) / 4 + 1, swiglu_bwd_part, &a);
    return PP_OK;
}

typedef struct {
    float *x, *cs; /* cs: the inverse frequencies, then cos and sin for each part */
    const pp_rope *r;
    int T, nh, hd, ld, dir;
} rope_arg;

static void rope_part(void *v, size_t lo, size_t hi, int part)
{
    const rope_arg *a = v;
    const int half = a->hd / 2;
    const float *inv = a->cs;
    float *co = a->cs + (size_t)half * (1 + 2 * part), *si = co + half;
    for (size_t n = lo; n < hi; n++) {
        float pos = (float)pp_rope_pos(a->r, n, a->T);
        for (int j = 0; j < half; j++) {
            float ang = pos * inv[j]; /* float32, as transformers computes it */
            co[j] = cosf(ang);
            si[j] = a->dir * sinf(ang);
        }
        for (int h = 0; h < a->nh; h++) {
            float *x = a->x + n * a->ld + (size_t)h * a->hd;
            for (int j = 0; j < half; j++) {
                float x1 = x[j], x2 = x[j + half];
                x[j] = x1 * co[j] - x2 * si[j];
                x[j + half] = x2 * co[j] + x1 * si[j];
            }
        }
    }
}

pp_status pp_cpu_rope(void *ctx, float *x, int N, int T, int nh, int hd, int ld, const pp_rope *r,
                      int dir)
{
    int half = hd / 2;
    size_t row = (size_t)nh * hd;
    int parts = pp_cpu_pool_parts(ctx, (size_t)N, 1, pp_cpu_min_rows(row) / 4 + 1);
    float *cs = malloc((size_t)(half > 0 ? half : 1) * (1 + 2 * (size_t)parts) * sizeof(float));
    if (!cs)
        return PP_ERR(PP_ERR_NOMEM, "rope: cannot allocate %d frequencies", half);
    for (int j = 0; j < half; j++)
        cs[j] = pp_rope_inv_freq(r, j, hd);
    rope_arg a = {x, cs, r, T, nh, hd, ld, dir};
    pp_cpu_par_for(ctx, (size_t)N, 1, pp_cpu_min_rows(row) / 4 + 1, rope_part, &a);
    free(cs);
    return PP_OK;
}
