/* ref_attention.h — pieces of the float64 references shared by the GPT block's
 * (test_runtime_model_ref.c) and the Llama block's (test_runtime_llama.c): a stage's named
 * tensor, and causal softmax attention with any number of key/value heads. */
#ifndef PP_TEST_REF_ATTENTION_H
#define PP_TEST_REF_ATTENTION_H

#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>

#include "pp_rt.h"

/* The float data of the stage's tensor `name` (asserted to exist). */
static inline const float *pp_ref_tensor(pp_rt_stage *st, const char *name)
{
    pp_rt_tensor *t = pp_rt_stage_tensor(st, name);
    cr_assert_not_null(t, "tensor %s missing", name);
    return t->data;
}

/* y (B*T, NH*hd) = causal softmax(q k^T / sqrt(hd)) v per query head. qkv rows hold the NH query
 * heads, then the KV key heads, then the KV value heads, hd values each; query head h reads key
 * and value head kv_of[h] (h for multi-head attention; h / (NH/KV) for grouped-query). att: T
 * doubles of scratch. */
static inline void pp_ref_causal_attention(double *y, const double *qkv, double *att, int B, int T,
                                           int NH, int KV, int hd, const int *kv_of)
{
    size_t W3 = (size_t)(NH + 2 * KV) * hd, Q = (size_t)NH * hd;
    for (int b = 0; b < B; b++)
        for (int hq = 0; hq < NH; hq++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + (size_t)(b * T + t) * W3 + (size_t)hq * hd;
                size_t k0 = Q + (size_t)kv_of[hq] * hd, v0 = Q + (size_t)(KV + kv_of[hq]) * hd;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) { /* causal: keys up to t */
                    const double *k = qkv + (size_t)(b * T + j) * W3 + k0;
                    double s = 0;
                    for (int e = 0; e < hd; e++)
                        s += q[e] * k[e];
                    att[j] = s / sqrt((double)hd);
                    mx = fmax(mx, att[j]);
                }
                for (int j = 0; j <= t; j++)
                    sum += (att[j] = exp(att[j] - mx));
                for (int e = 0; e < hd; e++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++)
                        acc += att[j] / sum * qkv[(size_t)(b * T + j) * W3 + v0 + (size_t)e];
                    y[(size_t)(b * T + t) * Q + (size_t)hq * hd + e] = acc;
                }
            }
}

#endif
