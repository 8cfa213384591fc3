/* safetensors_dtype.c — the element types of safetensors (one table: name, size, whether fp32
 * converts to and from it) and the bf16 / f16 conversions. Sub-byte types (F4, F6_*) and the
 * rarer 8-bit floats (F8_E8M0, the FNUZ pair) and C64 are not in the table: a checkpoint that
 * holds them is refused naming the dtype.
 */
#include <string.h>

#include "pp_rt_safetensors.h"

typedef struct {
    const char *name;
    size_t size;  /* bytes per element */
    int is_float; /* loadable as / writable from fp32 */
} dtype_row;

/* Indexed by pp_st_dtype (the order of safetensors' Dtype enum, safetensors/src/tensor.rs). */
static const dtype_row rows[PP_ST_N_DTYPES] = {
    [PP_ST_BOOL] = {"BOOL", 1, 0},       [PP_ST_U8] = {"U8", 1, 0},
    [PP_ST_I8] = {"I8", 1, 0},           [PP_ST_F8_E5M2] = {"F8_E5M2", 1, 0},
    [PP_ST_F8_E4M3] = {"F8_E4M3", 1, 0}, [PP_ST_I16] = {"I16", 2, 0},
    [PP_ST_U16] = {"U16", 2, 0},         [PP_ST_F16] = {"F16", 2, 1},
    [PP_ST_BF16] = {"BF16", 2, 1},       [PP_ST_I32] = {"I32", 4, 0},
    [PP_ST_U32] = {"U32", 4, 0},         [PP_ST_F32] = {"F32", 4, 1},
    [PP_ST_F64] = {"F64", 8, 0},         [PP_ST_I64] = {"I64", 8, 0},
    [PP_ST_U64] = {"U64", 8, 0},
};

static int valid(pp_st_dtype d)
{
    return (int)d >= 0 && d < PP_ST_N_DTYPES;
}

const char *pp_st_dtype_name(pp_st_dtype d)
{
    return valid(d) ? rows[d].name : "?";
}

size_t pp_st_dtype_size(pp_st_dtype d)
{
    return valid(d) ? rows[d].size : 0;
}

int pp_st_dtype_is_float(pp_st_dtype d)
{
    return valid(d) && rows[d].is_float;
}

int pp_st_dtype_parse(const char *s, pp_st_dtype *out)
{
    for (int i = 0; i < PP_ST_N_DTYPES; i++)
        if (!strcmp(rows[i].name, s)) {
            *out = (pp_st_dtype)i;
            return 1;
        }
    return 0;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 is the top half of an fp32. */
float pp_st_bf16_to_f32(uint16_t h)
{
    return float_of((uint32_t)h << 16);
}

/* Round to nearest even by adding 0x7FFF plus the lowest kept bit, then truncating (PyTorch's
 * c10/util/BFloat16.h round_to_nearest_even); a carry out of the mantissa lands in the
 * exponent, which is exactly the rounding up to the next binade or to infinity. */
uint16_t pp_st_f32_to_bf16(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fc0;
    uint32_t bias = 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)((u + bias) >> 16);
}

/* IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
float pp_st_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31)
        return float_of(sign | 0x7f800000u | (m << 13));
    if (e != 0)
        return float_of(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0)
        return float_of(sign);
    /* a subnormal m * 2^-24: normalise it */
    uint32_t exp = 113;
    while (!(m & 0x400u)) {
        m <<= 1;
        exp--;
    }
    return float_of(sign | (exp << 23) | ((m & 0x3ffu) << 13));
}

/* Keeps `keep` = m >> shift, rounding the dropped bits to nearest, ties to even. */
static uint32_t round_shift(uint32_t m, uint32_t shift)
{
    uint32_t keep = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    return keep + (rem > half || (rem == half && (keep & 1u)));
}

uint16_t pp_st_f32_to_f16(float f)
{
    uint32_t u = bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) { /* NaN: the payload's top bits, never 0 (that would be infinity) */
        uint32_t m = (a & 0x7fffffu) >> 13;
        return (uint16_t)(sign | 0x7c00u | (m ? m : 1u));
    }
    if (a >= 0x47800000u) /* 2^16 or more (and infinity): past the largest half, 65504 */
        return sign | 0x7c00u;
    if (a >= 0x38800000u) { /* a normal half (2^-14 and up); a carry may round it to inf */
        uint32_t h = ((((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3ffu));
        uint32_t rem = a & 0x1fffu;
        h += rem > 0x1000u || (rem == 0x1000u && (h & 1u));
        return (uint16_t)(sign | h);
    }
    if (a < 0x33000000u) /* below 2^-25: rounds to zero (2^-25 itself ties to even zero) */
        return sign;
    /* a subnormal half: units of 2^-24; a = 1.m * 2^(e-127), so units = (1.m << 23) >> (126-e) */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    return (uint16_t)(sign | round_shift(m, 126u - e));
}
