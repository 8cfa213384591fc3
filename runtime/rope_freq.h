/* rope_freq.h — private to runtime/: rotary position embedding's frequencies (Su et al.,
 * "RoFormer", arXiv:2104.09864) with the scalings the runtime implements, written once for the
 * CPU kernels and the CUDA ones (host and device code; no CUDA type).
 *
 * inv_freq[i] = theta^(-2i/hd), i < hd/2; "linear" divides it by factor; "llama3" (Meta's
 * Llama 3.1 rule, as transformers' modeling_rope_utils._compute_llama3_parameters computes it,
 * in float32): wavelengths 2 pi / inv_freq longer than orig_max / low_freq are divided by
 * factor, shorter than orig_max / high_freq are kept, and those between interpolate with
 * s = (orig_max / wavelen - low_freq) / (high_freq - low_freq):
 * (1 - s) inv_freq / factor + s inv_freq. Pairs (j, j + hd/2) of a head rotate by
 * pos * inv_freq[j] (transformers' rotate_half layout, modeling_llama.apply_rotary_pos_emb).
 */
#ifndef PP_RT_ROPE_FREQ_H
#define PP_RT_ROPE_FREQ_H

#include <math.h>

#ifdef __CUDACC__
#define PP_HD __host__ __device__
#else
#define PP_HD
#endif

typedef struct {
    float theta;
    int kind; /* pp_rope_scaling: PP_ROPE_NONE, PP_ROPE_LINEAR, PP_ROPE_LLAMA3 */
    float factor, low_freq, high_freq;
    int orig_max;
    /* Context parallelism (0 or 1: none): the rotated rows are cp rank cp_rank's tokens of
     * each sequence, two chunks of T/2 rows whose true positions pp_rope_pos gives. */
    int cp, cp_rank;
} pp_rope;

/* The true position of row `row` of a rotated tensor whose sequences are T rows each: row % T,
 * or under context parallelism (Megatron-Core's load-balanced split, as TransformerEngine's
 * get_batch_on_this_cp_rank: the sequence is cut into 2 cp chunks of L = T/2 local rows, and
 * cp rank i holds chunks i and 2 cp - 1 - i, in that order) the position in the whole
 * sequence of 2 cp L tokens. */
static inline PP_HD int pp_rope_pos(const pp_rope *r, size_t row, int T)
{
    int t = (int)(row % (size_t)T);
    if (r->cp <= 1)
        return t;
    int L = T / 2, half = t / L;
    int chunk = half ? 2 * r->cp - 1 - r->cp_rank : r->cp_rank;
    return chunk * L + t % L;
}

static inline PP_HD float pp_rope_inv_freq(const pp_rope *r, int i, int hd)
{
    float inv = 1.0f / powf(r->theta, (float)(2 * i) / (float)hd);
    if (r->kind == 1) /* PP_ROPE_LINEAR */
        return inv / r->factor;
    if (r->kind != 2) /* PP_ROPE_LLAMA3 */
        return inv;
    float wavelen = 2.0f * 3.14159265358979323846f / inv;
    float low_wl = (float)r->orig_max / r->low_freq, high_wl = (float)r->orig_max / r->high_freq;
    if (wavelen > low_wl)
        return inv / r->factor;
    if (wavelen < high_wl)
        return inv;
    float s = ((float)r->orig_max / wavelen - r->low_freq) / (r->high_freq - r->low_freq);
    return (1.0f - s) * inv / r->factor + s * inv;
}

#endif
