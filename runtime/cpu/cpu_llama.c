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

pp_status pp_cpu_rmsnorm_fwd(void *ctx, float *out, float *rstd, const float *x, const float *g,
                             int N, int C, float eps)
{
    (void)ctx;
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C;
        float *oi = out + (size_t)i * C;
        float r = 1.0f / sqrtf(pp_row_dot(xi, xi, C) / C + eps);
        for (int c = 0; c < C; c++)
            oi[c] = xi[c] * r * g[c];
        rstd[i] = r;
    }
    return PP_OK;
}

pp_status pp_cpu_rmsnorm_bwd(void *ctx, float *dx, float *dg, const float *dout, const float *x,
                             const float *g, const float *rstd, int N, int C)
{
    (void)ctx;
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C, *dy = dout + (size_t)i * C;
        float *dxi = dx + (size_t)i * C, r = rstd[i];
        float dot = 0.0f; /* sum of g dy x */
        for (int c = 0; c < C; c++)
            dot += g[c] * dy[c] * xi[c];
        float k = dot / C * r * r * r;
        for (int c = 0; c < C; c++) {
            dxi[c] += r * g[c] * dy[c] - xi[c] * k;
            dg[c] += dy[c] * xi[c] * r;
        }
    }
    return PP_OK;
}

static inline float sigmoid(float a)
{
    return 1.0f / (1.0f + expf(-a));
}

pp_status pp_cpu_swiglu_fwd(void *ctx, float *y, const float *x, int N, int F)
{
    (void)ctx;
    for (int i = 0; i < N; i++) {
        const float *a = x + (size_t)i * 2 * F, *u = a + F;
        float *yi = y + (size_t)i * F;
        for (int j = 0; j < F; j++)
            yi[j] = a[j] * sigmoid(a[j]) * u[j];
    }
    return PP_OK;
}

pp_status pp_cpu_swiglu_bwd(void *ctx, float *dx, const float *x, const float *dy, int ldy, int N,
                            int F)
{
    (void)ctx;
    for (int i = 0; i < N; i++) {
        const float *a = x + (size_t)i * 2 * F, *u = a + F, *d = dy + (size_t)i * ldy;
        float *da = dx + (size_t)i * 2 * F, *du = da + F;
        for (int j = 0; j < F; j++) {
            float dyj = d[j], sg = sigmoid(a[j]); /* read before du[j] (may be d[j]) is written */
            da[j] = dyj * u[j] * sg * (1.0f + a[j] * (1.0f - sg));
            du[j] = dyj * a[j] * sg;
        }
    }
    return PP_OK;
}

pp_status pp_cpu_rope(void *ctx, float *x, int N, int T, int nh, int hd, int ld, const pp_rope *r,
                      int dir)
{
    (void)ctx;
    int half = hd / 2;
    float *cs = malloc((size_t)(half > 0 ? half : 1) * 3 * sizeof(float));
    if (!cs)
        return PP_ERR(PP_ERR_NOMEM, "rope: cannot allocate %d frequencies", half);
    float *inv = cs, *co = cs + half, *si = cs + 2 * half;
    for (int j = 0; j < half; j++)
        inv[j] = pp_rope_inv_freq(r, j, hd);
    for (int n = 0; n < N; n++) {
        float pos = (float)pp_rope_pos(r, (size_t)n, T);
        for (int j = 0; j < half; j++) {
            float ang = pos * inv[j]; /* float32, as transformers computes it */
            co[j] = cosf(ang);
            si[j] = dir * sinf(ang);
        }
        for (int h = 0; h < nh; h++) {
            float *v = x + (size_t)n * ld + (size_t)h * hd;
            for (int j = 0; j < half; j++) {
                float x1 = v[j], x2 = v[j + half];
                v[j] = x1 * co[j] - x2 * si[j];
                v[j + half] = x2 * co[j] + x1 * si[j];
            }
        }
    }
    free(cs);
    return PP_OK;
}
