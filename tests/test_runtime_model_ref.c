/* test_runtime_model_ref.c — the stage computes the model the issue specifies, checked against a
 * naive double-precision transcription of GPT-2 written here from the formulas (one loop per
 * equation, no blocking, no BLAS): embedding, one pre-LN block (causal multi-head attention with
 * 1/sqrt(head width), tanh GELU, residuals), final LN + tied head + mean cross-entropy.
 * The gradient check cannot see a wrong forward (a gradient consistent with a non-causal
 * attention still passes it); this can. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"
#include "ref_attention.h"

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        pp_status st_ = (expr);                                                                    \
        cr_assert_eq(st_, PP_OK, "%s failed: %s", #expr, pp_err_msg());                            \
    } while (0)

#define W pp_ref_tensor

/* y(N, C) = LayerNorm(x) with eps 1e-5 (biased variance, as PyTorch). */
static void ref_layernorm(double *y, const double *x, const float *g, const float *b, int N, int C)
{
    for (int i = 0; i < N; i++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++)
            m += x[i * C + c] / C;
        for (int c = 0; c < C; c++)
            v += (x[i * C + c] - m) * (x[i * C + c] - m) / C;
        for (int c = 0; c < C; c++)
            y[i * C + c] = (x[i * C + c] - m) / sqrt(v + 1e-5) * g[c] + b[c];
    }
}

/* y(N, out) = x(N, in) W(out, in)^T + bias */
static void ref_linear(double *y, const double *x, const float *w, const float *bias, int N, int in,
                       int out)
{
    for (int i = 0; i < N; i++)
        for (int o = 0; o < out; o++) {
            double s = bias[o];
            for (int k = 0; k < in; k++)
                s += x[i * in + k] * w[o * in + k];
            y[i * out + o] = s;
        }
}

/* One block on x (B*T, C) in place: x += attn(ln1(x)); x += mlp(ln2(x)). */
static void ref_block(pp_rt_stage *st, int l, double *x, const pp_model_cfg *m, int B, int T)
{
    int C = m->hidden, F = m->ffn, NH = m->heads, hs = C / NH, N = B * T;
    char nm[64];
#define P(s) (snprintf(nm, sizeof nm, "h%d.%s", l, s), W(st, nm))
    double *h = calloc((size_t)N * C, 8), *qkv = calloc((size_t)N * 3 * C, 8);
    double *y = calloc((size_t)N * C, 8), *o = calloc((size_t)N * C, 8);
    double *f = calloc((size_t)N * F, 8), *att = calloc((size_t)T, 8);
    ref_layernorm(h, x, P("ln1.g"), P("ln1.b"), N, C);
    ref_linear(qkv, h, P("attn.qkv.w"), P("attn.qkv.b"), N, C, 3 * C);
    int *kv_of = calloc((size_t)NH, sizeof *kv_of); /* multi-head: head h reads its own */
    cr_assert_not_null(kv_of);
    for (int h = 0; h < NH; h++)
        kv_of[h] = h;
    pp_ref_causal_attention(y, qkv, att, B, T, NH, NH, hs, kv_of);
    free(kv_of);
    ref_linear(o, y, P("attn.proj.w"), P("attn.proj.b"), N, C, C);
    for (size_t i = 0; i < (size_t)N * C; i++)
        x[i] += o[i];
    ref_layernorm(h, x, P("ln2.g"), P("ln2.b"), N, C);
    ref_linear(f, h, P("mlp.fc.w"), P("mlp.fc.b"), N, C, F);
    for (size_t i = 0; i < (size_t)N * F; i++) { /* GPT-2's tanh GELU */
        double v = f[i];
        f[i] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    }
    ref_linear(o, f, P("mlp.proj.w"), P("mlp.proj.b"), N, F, C);
    for (size_t i = 0; i < (size_t)N * C; i++)
        x[i] += o[i];
#undef P
    free(h), free(qkv), free(y), free(o), free(f), free(att);
}

/* Moves every parameter off its init value so biases and LN parameters matter. */
static void perturb(pp_rt_stage *st)
{
    int n;
    pp_rt_tensor *t = pp_rt_stage_tensors(st, &n);
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < t[i].n; j++)
            t[i].data[j] = t[i].data[j] * 6.0f + 0.1f * sinf((float)(j * 7 + i));
}

Test(runtime, forward_matches_naive_gpt2)
{
    pp_model_cfg m;
    CHECK(pp_model_preset("tiny", &m));
    m.layers = 2;
    const int B = 2, T = 40, C = m.hidden, V = m.vocab;
    const int N = B * T;
    pp_backend *be;
    CHECK(pp_backend_cpu_create(&be));
    pp_rt_stage *st;
    pp_rt_stage_params p = {.model = &m,
                            .layer_begin = 0,
                            .layer_end = 2,
                            .has_embed = 1,
                            .has_head = 1,
                            .micro_batch = B,
                            .seq = T,
                            .seed = 17};
    CHECK(pp_rt_stage_create(be, &p, &st));
    perturb(st);
    int32_t tok[2 * 40], tgt[2 * 40];
    for (int i = 0; i < N; i++)
        tok[i] = (i * 37 + 11) % V, tgt[i] = (i * 53 + 5) % V;
    float loss;
    CHECK(pp_rt_stage_forward(st, 0, tok, NULL, tgt, NULL, &loss));
    CHECK(pp_rt_stage_backward(st, 0, NULL, NULL, 1.0f));

    const float *wte = W(st, "wte"), *wpe = W(st, "wpe");
    double *x = calloc((size_t)N * C, 8), *h = calloc((size_t)N * C, 8);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            x[i * C + c] = (double)wte[tok[i] * C + c] + wpe[(i % T) * C + c];
    for (int l = 0; l < 2; l++)
        ref_block(st, l, x, &m, B, T);
    /* the blocks' output, element by element, from the same model without its head (the same
     * seed and perturbation give the same weights) */
    pp_rt_stage *body;
    p.has_head = 0;
    CHECK(pp_rt_stage_create(be, &p, &body));
    perturb(body);
    float *xo = malloc(sizeof(float) * N * C);
    CHECK(pp_rt_stage_forward(body, 0, tok, NULL, NULL, xo, NULL));
    double err = 0, scale = 0;
    for (int i = 0; i < N * C; i++) {
        err = fmax(err, fabs(xo[i] - x[i]));
        scale = fmax(scale, fabs(x[i]));
    }
    cr_expect(err <= 1e-5 * scale, "block outputs differ from naive GPT-2 by %g (scale %g)", err,
              scale);
    free(xo);
    pp_rt_stage_destroy(body);
    ref_layernorm(h, x, W(st, "lnf.g"), W(st, "lnf.b"), N, C);
    double total = 0;
    for (int i = 0; i < N; i++) {
        double mx = -INFINITY, sum = 0, lt = 0;
        double *logit = malloc(sizeof(double) * V);
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int c = 0; c < C; c++)
                s += h[i * C + c] * wte[v * C + c]; /* tied head */
            logit[v] = s;
            mx = fmax(mx, s);
        }
        for (int v = 0; v < V; v++)
            sum += exp(logit[v] - mx);
        lt = logit[tgt[i]] - mx;
        total += log(sum) - lt;
        free(logit);
    }
    double want = total / N;
    cr_expect(fabs(want - loss) <= 1e-5 * fabs(want), "loss %.9g, naive GPT-2 %.9g", loss, want);
    cr_expect(fabs(want - log((double)V)) > 0.05,
              "the perturbed model should be far from uniform (loss %g)", want);
    free(x), free(h);
    pp_rt_stage_destroy(st);
    pp_backend_destroy(be);
}

/* Causality on the stage's output directly: changing the input at position t changes no output
 * before t. */
Test(runtime, attention_is_causal)
{
    pp_model_cfg m;
    CHECK(pp_model_preset("tiny", &m));
    const int B = 1, T = 48, C = m.hidden;
    pp_backend *be;
    CHECK(pp_backend_cpu_create(&be));
    pp_rt_stage *st;
    pp_rt_stage_params p = {
        .model = &m, .layer_begin = 0, .layer_end = 4, .micro_batch = B, .seq = T, .seed = 2};
    CHECK(pp_rt_stage_create(be, &p, &st));
    perturb(st);
    size_t n = (size_t)B * T * C;
    float *x = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4), *d = calloc(n, 4);
    for (size_t i = 0; i < n; i++)
        x[i] = sinf(0.1f * (float)i);
    CHECK(pp_rt_stage_forward(st, 0, NULL, x, NULL, y1, NULL));
    CHECK(pp_rt_stage_backward(st, 0, d, d, 1.0f));
    const int t = 30;
    for (int c = 0; c < C; c++)
        x[t * C + c] += 1.0f;
    CHECK(pp_rt_stage_forward(st, 0, NULL, x, NULL, y2, NULL));
    CHECK(pp_rt_stage_backward(st, 0, d, d, 1.0f));
    double before = 0, at = 0;
    for (int i = 0; i < T; i++)
        for (int c = 0; c < C; c++) {
            double e = fabs((double)y1[i * C + c] - y2[i * C + c]);
            if (i < t)
                before = fmax(before, e);
            else if (i == t)
                at = fmax(at, e);
        }
    cr_expect(before <= 1e-6, "outputs before position %d moved by %g", t, before);
    cr_expect(at > 0.1, "the output at position %d should change (moved %g)", t, at);
    free(x), free(y1), free(y2), free(d);
    pp_rt_stage_destroy(st);
    pp_backend_destroy(be);
}
