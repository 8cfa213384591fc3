/* cpu_math.h — private to runtime/cpu/: the building blocks of the CPU kernels' hot loops.
 *
 * The project builds with -O2, where GCC (12) vectorises a loop only when its trip count is a
 * known multiple of the vector width. So the hot loops here walk rows in chunks of PP_VW = 8
 * with a fixed-length inner loop (which GCC turns into SIMD), a scalar tail, and reductions
 * kept in 8 independent partial sums (which also breaks the add-latency chain). exp() is a
 * branch-free polynomial (Cephes expf: Moshier 1992), ~2 ulp on [-87, 88], so it vectorises
 * too; libm's expf/tanhf are calls per element.
 */
#ifndef PP_RT_CPU_MATH_H
#define PP_RT_CPU_MATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PP_VW 8

/* e^x for x in [-87, 88] (clamped outside; e^-87 ~ 1.6e-38 stands in for 0; a NaN comes out
 * as e^-87 or e^88, not NaN). */
static inline float pp_exp_fast(float x)
{
    /* Clamp to [-87, 88] on the bit patterns: as unsigned integers, floats below -87 are
     * exactly the patterns above bits(-87); as signed integers, floats above 88 are the
     * patterns above bits(88). Integer min vectorises at -O2 where a float ?: does not. */
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = u < 0xC2AE0000u ? u : 0xC2AE0000u; /* bits(-87.0f) */
    int32_t i = (int32_t)u;
    i = i < 0x42B00000 ? i : 0x42B00000; /* bits(88.0f) */
    memcpy(&x, &i, sizeof x);
    /* n = round(x / ln 2) by the 1.5 * 2^23 trick: the sum's low mantissa bits hold n */
    float t = x * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    int32_t ti;
    memcpy(&ti, &t, sizeof ti);
    /* r = x - n ln 2 in two parts (Cody-Waite), |r| <= ln2 / 2 */
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t e = (ti - 0x4B400000 + 127) * (1 << 23); /* 2^n as float bits; n in [-126, 127] */
    float s;
    memcpy(&s, &e, sizeof s);
    return p * s;
}

/* tanh(u) = 1 - 2 / (e^{2u} + 1): exact limits +-1, absolute error ~1e-7. */
static inline float pp_tanh_fast(float u)
{
    return 1.0f - 2.0f / (pp_exp_fast(2.0f * u) + 1.0f);
}

static inline float pp_row_max(const float *x, int n)
{
    float m[PP_VW];
    int i = 0;
    for (int k = 0; k < PP_VW; k++)
        m[k] = x[0];
    for (; i + PP_VW <= n; i += PP_VW)
        for (int k = 0; k < PP_VW; k++)
            m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
    float r = x[0];
    for (int k = 0; k < PP_VW; k++)
        r = m[k] > r ? m[k] : r;
    for (; i < n; i++)
        r = x[i] > r ? x[i] : r;
    return r;
}

static inline float pp_sum8(const float s[PP_VW])
{
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* x[i] = e^(x[i] - shift) in place; returns the sum. */
static inline float pp_row_exp_sum(float *x, int n, float shift)
{
    float s[PP_VW] = {0};
    int i = 0;
    for (; i + PP_VW <= n; i += PP_VW)
        for (int k = 0; k < PP_VW; k++) {
            x[i + k] = pp_exp_fast(x[i + k] - shift);
            s[k] += x[i + k];
        }
    float r = pp_sum8(s);
    for (; i < n; i++) {
        x[i] = pp_exp_fast(x[i] - shift);
        r += x[i];
    }
    return r;
}

static inline float pp_row_sum(const float *x, int n)
{
    float s[PP_VW] = {0};
    int i = 0;
    for (; i + PP_VW <= n; i += PP_VW)
        for (int k = 0; k < PP_VW; k++)
            s[k] += x[i + k];
    float r = pp_sum8(s);
    for (; i < n; i++)
        r += x[i];
    return r;
}

static inline float pp_row_dot(const float *a, const float *b, int n)
{
    float s[PP_VW] = {0};
    int i = 0;
    for (; i + PP_VW <= n; i += PP_VW)
        for (int k = 0; k < PP_VW; k++)
            s[k] += a[i + k] * b[i + k];
    float r = pp_sum8(s);
    for (; i < n; i++)
        r += a[i] * b[i];
    return r;
}

static inline void pp_row_scale(float *x, int n, float a)
{
    int i = 0;
    for (; i + PP_VW <= n; i += PP_VW)
        for (int k = 0; k < PP_VW; k++)
            x[i + k] *= a;
    for (; i < n; i++)
        x[i] *= a;
}

/* y[i] += x[i] */
static inline void pp_row_add(float *restrict y, const float *restrict x, size_t n)
{
    size_t i = 0;
    for (; i + PP_VW <= n; i += PP_VW)
        for (int k = 0; k < PP_VW; k++)
            y[i + k] += x[i + k];
    for (; i < n; i++)
        y[i] += x[i];
}

#endif
