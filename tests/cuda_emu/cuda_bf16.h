/* cuda_bf16.h — the CPU emulation's bf16 types (tests only; see cuda_runtime.h here).
 * 16-bit storage; conversions bit-exact to the toolkit's: round to nearest, ties to even, and
 * any NaN becomes the canonical NaN 0x7fff (as cuda_bf16.hpp's host path and cvt.rn.bf16.f32).
 */
#ifndef PP_CUDA_EMU_BF16_H
#define PP_CUDA_EMU_BF16_H

#include <stdint.h>
#include <string.h>

#include "cuda_runtime.h"

struct __nv_bfloat16 {
    uint16_t x; /* the bits: sign, 8 exponent bits, 7 mantissa bits */
};
struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
};

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.x = 0x7fffu;
        return r;
    }
    uint32_t lsb = (u >> 16) & 1u;
    r.x = (uint16_t)((u + 0x7fffu + lsb) >> 16); /* carries into the exponent as it should */
    return r;
}

static inline float __bfloat162float(__nv_bfloat16 h)
{
    uint32_t u = (uint32_t)h.x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b)
{
    __nv_bfloat162 r;
    r.x = __float2bfloat16_rn(a);
    r.y = __float2bfloat16_rn(b);
    return r;
}

#endif
