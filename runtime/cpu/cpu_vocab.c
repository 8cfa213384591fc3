/* cpu_vocab.c — the CPU backend's kernels of vocabulary parallelism (backend.h's vocab_*): a
 * tensor-parallel rank's rows [v0, v0 + nv) of the token embedding and of the LM head, and the
 * pieces of the cross-entropy that the stage puts together around its all-reduces
 * (runtime/stage_fwd.c; Megatron-LM's vocab_parallel_cross_entropy,
 * megatron/core/tensor_parallel/cross_entropy.py). Same arithmetic as cpu_kernels.c's whole-
 * vocabulary kernels (the same row helpers of cpu_math.h), restricted to the rank's columns.
 * Plain C, fp32, one thread.
 */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_math.h"

static int in_range(int32_t tok, int v0, int nv)
{
    return tok >= v0 && tok < v0 + nv;
}

pp_status pp_cpu_vocab_embed_fwd(void *ctx, float *out, const int32_t *tok, const float *wte,
                                 int N, int C, int v0, int nv)
{
    (void)ctx;
    for (int i = 0; i < N; i++) {
        float *o = out + (size_t)i * C;
        if (in_range(tok[i], v0, nv))
            memcpy(o, wte + (size_t)(tok[i] - v0) * C, (size_t)C * sizeof(float));
        else
            memset(o, 0, (size_t)C * sizeof(float));
    }
    return PP_OK;
}

pp_status pp_cpu_vocab_embed_bwd(void *ctx, float *dwte, const float *dout, const int32_t *tok,
                                 int N, int C, int v0, int nv)
{
    (void)ctx;
    for (int i = 0; i < N; i++)
        if (in_range(tok[i], v0, nv))
            pp_row_add(dwte + (size_t)(tok[i] - v0) * C, dout + (size_t)i * C, (size_t)C);
    return PP_OK;
}

pp_status pp_cpu_vocab_xent_max(void *ctx, float *mx, const float *logits, int N, int Vl, int nv)
{
    (void)ctx;
    for (int i = 0; i < N; i++)
        mx[i] = nv > 0 ? pp_row_max(logits + (size_t)i * Vl, nv) : -INFINITY;
    return PP_OK;
}

pp_status pp_cpu_vocab_xent_exp(void *ctx, float *probs, float *stats, const float *mx, int t,
                                const int32_t *targets, int N, int Vl, int v0, int nv)
{
    (void)ctx;
    for (int i = 0; i < N; i++) {
        float *row = probs + (size_t)i * Vl, m = mx[i];
        for (int r = 1; r < t; r++)
            m = fmaxf(m, mx[(size_t)r * N + i]);
        stats[N + i] = in_range(targets[i], v0, nv) ? row[targets[i] - v0] - m : 0.0f;
        stats[i] = pp_row_exp_sum(row, nv, m);
        memset(row + nv, 0, (size_t)(Vl - nv) * sizeof(float)); /* padding: p = 0 */
    }
    return PP_OK;
}

pp_status pp_cpu_vocab_xent_norm(void *ctx, float *probs, const float *sums, int N, int Vl)
{
    (void)ctx;
    for (int i = 0; i < N; i++)
        pp_row_scale(probs + (size_t)i * Vl, Vl, 1.0f / sums[i]);
    return PP_OK;
}

pp_status pp_cpu_vocab_xent_bwd(void *ctx, float *probs, const int32_t *targets, int N, int Vl,
                                int v0, float scale)
{
    (void)ctx;
    for (int i = 0; i < N; i++) {
        float *row = probs + (size_t)i * Vl;
        if (in_range(targets[i], v0, Vl))
            row[targets[i] - v0] -= 1.0f;
        pp_row_scale(row, Vl, scale);
    }
    return PP_OK;
}
