/* init_normal.h — private to runtime/: the counter-based normal numbers of the parameters'
 * initialisation, shared by the host (stage.c) and the CUDA backend's device-side fill
 * (runtime/cuda/init_cuda.cu), so both compute element i of a tensor from (key, i) with the
 * same arithmetic: splitmix64 (Steele et al. 2014) on counters 2j and 2j+1, 24-bit uniforms,
 * Box-Muller in double, rounded to float. The integer part is exact everywhere; the device's
 * double log/cos/sin are within 1-2 ulp of glibc's, so a device-filled float can differ from
 * the host's in its last bit where the double result lies that close to a float rounding
 * boundary (rare; immaterial to training).
 */
#ifndef PP_RT_INIT_NORMAL_H
#define PP_RT_INIT_NORMAL_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define PP_HD __host__ __device__
#else
#define PP_HD
#endif

static inline PP_HD uint64_t pp_splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Uniform in (0, 1): 24 random bits, offset by half a step so log() never sees 0. */
static inline PP_HD double pp_uniform01(uint64_t key, uint64_t i)
{
    return ((double)(pp_splitmix64(key + i) >> 40) + 0.5) / 16777216.0;
}

/* Elements 2j and 2j+1 of a tensor: the two outputs of one Box-Muller draw from counters 2j
 * and 2j+1, scaled by std. */
static inline PP_HD void pp_normal_pair(uint64_t key, uint64_t j, double std, float out[2])
{
    const double two_pi = 6.283185307179586;
    double u1 = pp_uniform01(key, 2 * j), u2 = pp_uniform01(key, 2 * j + 1);
    double r = std * sqrt(-2.0 * log(u1));
    out[0] = (float)(r * cos(two_pi * u2));
    out[1] = (float)(r * sin(two_pi * u2));
}

#endif
