/* test_runtime_model.c — the model's numerics: the one-stage reference passes a finite-
 * difference gradient check, and any split into stages chained by hand reproduces its loss and
 * every gradient (tied embedding included). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"
#include "test_runtime_exec_equiv.h"

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        pp_status st_ = (expr);                                                                    \
        cr_assert_eq(st_, PP_OK, "%s failed: %s", #expr, pp_err_msg());                            \
    } while (0)

static void fill_tokens(int32_t *tok, int n, int vocab, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 12345u;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        tok[i] = (int32_t)((x >> 8) % (uint32_t)vocab);
    }
}

/* ---- finite differences on the one-stage reference ---- */

typedef struct {
    pp_backend *be;
    pp_rt_stage *st;
    int32_t *tok, *tgt;
} fd_ctx;

/* Mean loss of one micro-batch (forward + a backward to release the slot; the gradients it
 * accumulates are not used). */
static double fd_loss(fd_ctx *c)
{
    float loss = 0.0f;
    CHECK(pp_rt_stage_forward(c->st, 0, c->tok, NULL, c->tgt, NULL, &loss));
    CHECK(pp_rt_stage_backward(c->st, 0, NULL, NULL, 1.0f));
    return loss;
}

/* Central difference of the loss along direction dir (n entries of tensor t) with step h. */
static double fd_directional(fd_ctx *c, pp_rt_tensor *t, const float *dir, double h)
{
    float *save = malloc(t->n * sizeof(float));
    memcpy(save, t->data, t->n * sizeof(float));
    for (size_t i = 0; i < t->n; i++)
        t->data[i] = save[i] + (float)(h * dir[i]);
    double lp = fd_loss(c);
    for (size_t i = 0; i < t->n; i++)
        t->data[i] = save[i] - (float)(h * dir[i]);
    double lm = fd_loss(c);
    memcpy(t->data, save, t->n * sizeof(float));
    free(save);
    return (lp - lm) / (2.0 * h);
}

/* Step and tolerances. The test first moves the parameters to a generic point where every
 * gradient is O(1e-2) (see below). The loss comes back as a float near 6, so each evaluation is
 * quantised to ulp(6) = 4.8e-7; a central difference over 2h = 2e-2 therefore carries up to
 * ~2.4e-5 of absolute error per evaluation pair: FD_ATOL = 5e-5 covers two of those. The
 * truncation error h^2 f'''/6 of the central difference is ~1e-4 relative at h = 1e-2 (measured
 * on this configuration: <= 3e-4 along the gradient, <= 2e-3 on single entries), hence
 * DIR_RTOL = 2e-3 along the gradient's direction and ENT_RTOL = 1e-2 on single entries. A wrong
 * term in a backward kernel (a factor, a sign, an index) gives O(1) relative errors; a 1 %
 * error along the gradient is 5x the tolerance. */
#define FD_H 1e-2
#define FD_ATOL 5e-5
#define DIR_RTOL 2e-3
#define ENT_RTOL 1e-2

static void fd_check_tensor(fd_ctx *c, const char *name, const float *grad_all, size_t off)
{
    pp_rt_tensor *t = pp_rt_stage_tensor(c->st, name);
    cr_assert_not_null(t, "tensor %s missing", name);
    const float *g = grad_all + off;
    float *dir = calloc(t->n, sizeof(float));
    /* 1. along the analytic gradient's own direction u = g/|g| (the largest signal): the finite
     *    difference measures g_true . u, which equals |g| only if g is right in scale and
     *    direction together */
    double norm = 0.0;
    for (size_t i = 0; i < t->n; i++)
        norm += (double)g[i] * g[i];
    norm = sqrt(norm);
    cr_assert(norm > 0.0, "%s: zero gradient", name);
    for (size_t i = 0; i < t->n; i++)
        dir[i] = (float)(g[i] / norm);
    double fd = fd_directional(c, t, dir, FD_H);
    cr_expect(fabs(fd - norm) <= DIR_RTOL * norm + FD_ATOL,
              "%s: derivative along the gradient %.8g, finite difference %.8g", name, norm, fd);
    /* 2. the three entries with the largest gradient, one at a time */
    size_t taken[3];
    for (int k = 0; k < 3; k++) {
        size_t best = 0;
        double best_g = -1.0;
        for (size_t i = 0; i < t->n; i++) {
            int used = 0;
            for (int j = 0; j < k; j++)
                used |= taken[j] == i;
            if (!used && fabs((double)g[i]) > best_g)
                best = i, best_g = fabs((double)g[i]);
        }
        taken[k] = best;
        memset(dir, 0, t->n * sizeof(float));
        dir[best] = 1.0f;
        double e = fd_directional(c, t, dir, FD_H);
        cr_expect(fabs(e - g[best]) <= ENT_RTOL * fabs(g[best]) + FD_ATOL,
                  "%s[%zu]: analytic %.8g vs finite difference %.8g", name, best, (double)g[best],
                  e);
    }
    free(dir);
}

/* The finite-difference check of the tensors `kinds` of the preset's one-stage reference;
 * qwen3: the preset's block with Qwen3's per-head q/k RMSNorm and heads 16 wide. */
static void fd_check_model(const char *preset, int qwen3, const char *const *kinds,
                           size_t n_kinds)
{
    pp_model_cfg m;
    CHECK(pp_model_preset(preset, &m));
    if (qwen3)
        m.qk_norm = 1, m.head_dim = 16;
    /* T = 300 spans a full and a partial block of the CPU attention's causal blocking (256 rows
     * per block), so the block edges are covered. */
    m.seq = 320;
    const int B = 2, T = 300;
    pp_backend *be;
    CHECK(pp_backend_cpu_create(&be));
    pp_rt_stage_params p = {.model = &m,
                            .layer_begin = 0,
                            .layer_end = m.layers,
                            .has_embed = 1,
                            .has_head = 1,
                            .micro_batch = B,
                            .seq = T,
                            .seed = 7};
    fd_ctx c = {.be = be};
    CHECK(pp_rt_stage_create(be, &p, &c.st));
    c.tok = malloc(sizeof(int32_t) * B * T);
    c.tgt = malloc(sizeof(int32_t) * B * T);
    fill_tokens(c.tok, B * T, m.vocab, 1);
    fill_tokens(c.tgt, B * T, m.vocab, 2);

    /* Move the parameters to a generic point with O(1) signals in every branch: at GPT-2 init
     * (std 0.02, biases 0, gains 1) most gradients are ~1e-5, below what a float loss can
     * resolve by finite differences. Matrices x8, biases and LN parameters off 0 / 1. */
    int n;
    pp_rt_tensor *ts = pp_rt_stage_tensors(c.st, &n);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(ts[i].name);
        char last = ts[i].name[len - 1];
        for (size_t j = 0; j < ts[i].n; j++) {
            if (last == 'b' || last == 'g')
                ts[i].data[j] += 0.2f * sinf(0.7f * (float)j + (float)i);
            else
                ts[i].data[j] *= 8.0f;
        }
    }
    pp_rt_stage_zero_grad(c.st);
    float loss;
    CHECK(pp_rt_stage_forward(c.st, 3, c.tok, NULL, c.tgt, NULL, &loss));
    cr_assert(fabsf(loss - logf((float)m.vocab)) < 0.5f, "initial loss %g far from ln V", loss);
    CHECK(pp_rt_stage_backward(c.st, 3, NULL, NULL, 1.0f));
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += ts[i].n;
    float *grad = malloc(total * sizeof(float));
    memcpy(grad, ts[0].grad, total * sizeof(float)); /* one carved allocation */

    for (size_t k = 0; k < n_kinds; k++) {
        pp_rt_tensor *t = pp_rt_stage_tensor(c.st, kinds[k]);
        cr_assert_not_null(t, "tensor %s missing", kinds[k]);
        fd_check_tensor(&c, kinds[k], grad, (size_t)(t->grad - ts[0].grad));
    }
    free(grad);
    free(c.tok);
    free(c.tgt);
    pp_rt_stage_destroy(c.st);
    pp_backend_destroy(be);
}

Test(runtime, reference_gradients_match_finite_differences)
{
    static const char *const kinds[] = {
        "wte",           "wpe",           "h0.ln1.g",       "h1.ln1.b",
        "h2.attn.qkv.w", "h3.attn.qkv.b", "h1.attn.proj.w", "h2.attn.proj.b",
        "h3.ln2.g",      "h0.ln2.b",      "h2.mlp.fc.w",    "h1.mlp.fc.b",
        "h0.mlp.proj.w", "h3.mlp.proj.b", "lnf.g",          "lnf.b"};
    fd_check_model("tiny", 0, kinds, sizeof kinds / sizeof kinds[0]);
}

/* The Llama block's backward (RMSNorm, SwiGLU, the rotation's inverse, grouped-query
 * attention's summed dk and dv, the untied head) by the same check. */
Test(runtime, llama_reference_gradients_match_finite_differences)
{
    static const char *const kinds[] = {"wte",           "h0.ln1.g",       "h2.attn.qkv.w",
                                        "h1.attn.proj.w", "h3.ln2.g",      "h2.mlp.fc.w",
                                        "h0.mlp.proj.w", "lnf.g",          "head.w"};
    fd_check_model("tiny-llama", 0, kinds, sizeof kinds / sizeof kinds[0]);
}

/* Qwen3's q/k norm's backward (headnorm_bwd: the inputs' gradient through the per-head norm,
 * the two weights' gradients summed over rows and heads) by the same check, head_dim 16 where
 * hidden / heads is 8. */
Test(runtime, qwen3_reference_gradients_match_finite_differences)
{
    static const char *const kinds[] = {"h0.attn.q_norm.g", "h1.attn.k_norm.g",
                                        "h3.attn.q_norm.g", "h2.attn.qkv.w", "h0.attn.proj.w",
                                        "h1.ln1.g"};
    fd_check_model("tiny-llama", 1, kinds, sizeof kinds / sizeof kinds[0]);
}

/* ---- split equivalence ---- */

#define MB 2 /* micro-batches per step */

typedef struct {
    pp_backend *be;
    pp_rt_stage *st[4];
    int n;
} chain;

static void chain_create(chain *ch, const pp_model_cfg *m, const int *bounds, int n_stages, int B,
                         int T)
{
    CHECK(pp_backend_cpu_create(&ch->be));
    ch->n = n_stages;
    for (int s = 0; s < n_stages; s++) {
        pp_rt_stage_params p = {.model = m,
                                .layer_begin = bounds[s],
                                .layer_end = bounds[s + 1],
                                .has_embed = s == 0,
                                .has_head = s == n_stages - 1,
                                .micro_batch = B,
                                .seq = T,
                                .seed = 42};
        CHECK(pp_rt_stage_create(ch->be, &p, &ch->st[s]));
    }
}

static void chain_destroy(chain *ch)
{
    for (int s = 0; s < ch->n; s++)
        pp_rt_stage_destroy(ch->st[s]);
    pp_backend_destroy(ch->be);
}

/* GPipe order by hand: all forwards, then the backwards in reverse micro-batch order (so slots
 * are released out of allocation order). Returns the mean loss over the micro-batches. */
static double chain_step(chain *ch, const int32_t *tok, const int32_t *tgt, int B, int T, int C)
{
    size_t N = (size_t)B * T;
    float *act[5][MB], *grad[5];
    for (int s = 0; s <= ch->n; s++) {
        for (int mb = 0; mb < MB; mb++)
            act[s][mb] = calloc(N * C, sizeof(float));
        grad[s] = calloc(N * C, sizeof(float));
    }
    double loss = 0.0;
    for (int mb = 0; mb < MB; mb++)
        for (int s = 0; s < ch->n; s++) {
            float l = 0.0f;
            int first = s == 0, last = s == ch->n - 1;
            CHECK(pp_rt_stage_forward(ch->st[s], mb, first ? tok + mb * N : NULL,
                                      first ? NULL : act[s][mb], last ? tgt + mb * N : NULL,
                                      last ? NULL : act[s + 1][mb], last ? &l : NULL));
            loss += l / MB;
        }
    for (int mb = MB - 1; mb >= 0; mb--)
        for (int s = ch->n - 1; s >= 0; s--) {
            int first = s == 0, last = s == ch->n - 1;
            CHECK(pp_rt_stage_backward(ch->st[s], mb, last ? NULL : grad[s + 1],
                                       first ? NULL : grad[s], 1.0f / MB));
        }
    for (int s = 0; s <= ch->n; s++) {
        for (int mb = 0; mb < MB; mb++)
            free(act[s][mb]);
        free(grad[s]);
    }
    return loss;
}

/* max |a - b| / max |b|: relative to the tensor's scale, so tiny entries that differ only by
 * summation order do not dominate. */
double exec_max_rel_diff(const float *a, const float *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return den > 0.0 ? num / den : num;
}

static void check_split(const int *bounds, int n_stages)
{
    pp_model_cfg m;
    CHECK(pp_model_preset("tiny", &m));
    const int B = 2, T = 32;
    size_t N = (size_t)B * T;
    int32_t *tok = malloc(sizeof(int32_t) * N * MB), *tgt = malloc(sizeof(int32_t) * N * MB);
    fill_tokens(tok, (int)N * MB, m.vocab, 11);
    fill_tokens(tgt, (int)N * MB, m.vocab, 12);

    const int ref_bounds[2] = {0, m.layers};
    chain ref, sp;
    chain_create(&ref, &m, ref_bounds, 1, B, T);
    chain_create(&sp, &m, bounds, n_stages, B, T);
    double lr = chain_step(&ref, tok, tgt, B, T, m.hidden);
    double ls = chain_step(&sp, tok, tgt, B, T, m.hidden);
    cr_expect(fabs(lr - ls) <= 1e-5 * fabs(lr), "loss: reference %.9g, split %.9g", lr, ls);

    pp_rt_tensor *wte = pp_rt_stage_tensor(sp.st[0], "wte");
    pp_rt_tensor *head = pp_rt_stage_tensor(sp.st[n_stages - 1], "wte.head");
    cr_assert(n_stages == 1 || head != NULL, "last stage has no wte.head");
    int checked = 0;
    for (int s = 0; s < n_stages; s++) {
        int n;
        pp_rt_tensor *t = pp_rt_stage_tensors(sp.st[s], &n);
        for (int i = 0; i < n; i++) {
            if (strcmp(t[i].name, "wte.head") == 0)
                continue;
            pp_rt_tensor *r = pp_rt_stage_tensor(ref.st[0], t[i].name);
            cr_assert_not_null(r, "split tensor %s not in the reference", t[i].name);
            cr_assert_eq(r->n, t[i].n);
            cr_expect(memcmp(r->data, t[i].data, r->n * sizeof(float)) == 0,
                      "%s: weights differ from the reference", t[i].name);
            const float *g = t[i].grad;
            float *sum = NULL;
            if (&t[i] == wte) { /* tied embedding: both ends' gradients summed, as Megatron */
                sum = malloc(t[i].n * sizeof(float));
                for (size_t j = 0; j < t[i].n; j++)
                    sum[j] = t[i].grad[j] + head->grad[j];
                g = sum;
            }
            double d = exec_max_rel_diff(g, r->grad, r->n);
            cr_expect(d <= 1e-5, "%s (stage %d): gradient differs by %.3g relative", t[i].name, s,
                      d);
            free(sum);
            checked++;
        }
    }
    int nref;
    pp_rt_stage_tensors(ref.st[0], &nref);
    cr_expect_eq(checked, nref, "split holds %d tensors, reference %d", checked, nref);
    chain_destroy(&ref);
    chain_destroy(&sp);
    free(tok);
    free(tgt);
}

Test(runtime, two_even_stages_equal_reference)
{
    const int b[] = {0, 2, 4};
    check_split(b, 2);
}

Test(runtime, two_uneven_stages_equal_reference)
{
    const int b[] = {0, 3, 4};
    check_split(b, 2);
}

Test(runtime, three_uneven_stages_equal_reference)
{
    const int b[] = {0, 1, 3, 4};
    check_split(b, 3);
}

Test(runtime, embedding_and_head_only_stages_equal_reference)
{
    const int b[] = {0, 0, 4, 4}; /* stage 0 embeds only, stage 2 is LN + head + loss only */
    check_split(b, 3);
}
