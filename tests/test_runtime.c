/* test_runtime.c — the runtime's model presets, deterministic initialisation, memory
 * accounting and AdamW. Numerics of forward/backward are in test_runtime_model.c; the executor
 * and transports in test_runtime_exec*.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        pp_status st_ = (expr);                                                                    \
        cr_assert_eq(st_, PP_OK, "%s failed: %s", #expr, pp_err_msg());                            \
    } while (0)

Test(runtime, presets_and_validation)
{
    pp_model_cfg m;
    CHECK(pp_model_preset("gpt-125m", &m));
    cr_expect_eq(m.layers, 12);
    cr_expect_eq(m.hidden, 768);
    cr_expect_eq(m.heads, 12);
    cr_expect_eq(m.ffn, 3072);
    cr_expect_eq(m.vocab, 50257);
    cr_expect_eq(m.seq, 2048);
    CHECK(pp_model_preset("tiny", &m));
    CHECK(pp_model_validate(&m));

    cr_expect_eq(pp_model_preset("gpt-9t", &m), PP_ERR_NOTFOUND);
    cr_expect(strstr(pp_err_text(), "gpt-9t") && strstr(pp_err_text(), "tiny"),
              "message should name the bad model and the presets: %s", pp_err_text());
    m.heads = 5;
    cr_expect_eq(pp_model_validate(&m), PP_ERR_INVALID);
    cr_expect(strstr(pp_err_text(), "heads"), "message: %s", pp_err_text());
    m.heads = 4;
    m.layers = -3;
    cr_expect_eq(pp_model_validate(&m), PP_ERR_INVALID);
    cr_expect(strstr(pp_err_text(), "\"layers\"") && strstr(pp_err_text(), "-3"), "message: %s",
              pp_err_text());
}

Test(runtime, bad_stage_parameters_are_rejected)
{
    pp_model_cfg m;
    CHECK(pp_model_preset("tiny", &m));
    pp_backend *be;
    CHECK(pp_backend_cpu_create(&be));
    pp_rt_stage *st = NULL;
    pp_rt_stage_params p = {
        .model = &m, .layer_begin = 2, .layer_end = 6, .micro_batch = 1, .seq = 8};
    cr_expect_eq(pp_rt_stage_create(be, &p, &st), PP_ERR_INVALID);
    cr_expect(strstr(pp_err_text(), "[2, 6)"), "message: %s", pp_err_text());
    p.layer_end = 3;
    p.seq = m.seq + 1;
    cr_expect_eq(pp_rt_stage_create(be, &p, &st), PP_ERR_INVALID);
    cr_expect_null(st);
    pp_mem_stats ms;
    pp_backend_mem_stats(be, &ms);
    cr_expect_eq(ms.current_total, 0, "a failed create leaked %zu bytes", ms.current_total);
    /* a token outside the vocabulary is refused before anything is computed */
    p = (pp_rt_stage_params){
        .model = &m, .layer_begin = 0, .layer_end = 1, .has_embed = 1, .micro_batch = 1, .seq = 4};
    CHECK(pp_rt_stage_create(be, &p, &st));
    int32_t tok[4] = {1, 2, 256, 3};
    float out[4 * 32];
    cr_expect_eq(pp_rt_stage_forward(st, 0, tok, NULL, NULL, out, NULL), PP_ERR_INVALID);
    cr_expect(strstr(pp_err_text(), "256"), "message: %s", pp_err_text());
    cr_expect_eq(pp_rt_stage_backward(st, 0, out, NULL, 1.0f), PP_ERR_INVALID,
                 "backward of a slot without forward must fail");
    pp_rt_stage_destroy(st);
    pp_backend_destroy(be);
}

/* A layer's tensors are bitwise equal wherever the layer sits; the head's tied copy starts equal
 * to the embedding; a different seed gives different weights. */
Test(runtime, init_is_placement_independent)
{
    pp_model_cfg m;
    CHECK(pp_model_preset("tiny", &m));
    pp_backend *be;
    CHECK(pp_backend_cpu_create(&be));
    pp_rt_stage *a, *b, *c, *d;
    pp_rt_stage_params pa = {.model = &m,
                             .layer_begin = 0,
                             .layer_end = 4,
                             .has_embed = 1,
                             .has_head = 1,
                             .micro_batch = 1,
                             .seq = 16,
                             .seed = 5};
    pp_rt_stage_params pb = pa;
    pb.layer_begin = 2, pb.layer_end = 3, pb.has_embed = 0, pb.has_head = 1;
    pp_rt_stage_params pc = pa;
    pc.layer_begin = 1, pc.layer_end = 3, pc.has_embed = 0, pc.has_head = 0;
    pp_rt_stage_params pd = pc;
    pd.seed = 6;
    CHECK(pp_rt_stage_create(be, &pa, &a));
    CHECK(pp_rt_stage_create(be, &pb, &b));
    CHECK(pp_rt_stage_create(be, &pc, &c));
    CHECK(pp_rt_stage_create(be, &pd, &d));
    const char *names[] = {"h2.ln1.g",    "h2.attn.qkv.w", "h2.attn.proj.w",
                           "h2.mlp.fc.w", "h2.mlp.proj.w", "h2.mlp.fc.b"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        pp_rt_tensor *ta = pp_rt_stage_tensor(a, names[i]), *tb = pp_rt_stage_tensor(b, names[i]),
                     *tc = pp_rt_stage_tensor(c, names[i]), *td = pp_rt_stage_tensor(d, names[i]);
        cr_assert(ta && tb && tc && td, "%s missing", names[i]);
        cr_expect(memcmp(ta->data, tb->data, ta->n * 4) == 0, "%s differs in stage b", names[i]);
        cr_expect(memcmp(ta->data, tc->data, ta->n * 4) == 0, "%s differs in stage c", names[i]);
    }
    pp_rt_tensor *w1 = pp_rt_stage_tensor(a, "h1.attn.qkv.w"),
                 *w2 = pp_rt_stage_tensor(a, "h2.attn.qkv.w");
    cr_expect(memcmp(w1->data, w2->data, w1->n * 4) != 0, "two layers got the same weights");
    cr_expect(memcmp(pp_rt_stage_tensor(c, "h2.mlp.fc.w")->data,
                     pp_rt_stage_tensor(d, "h2.mlp.fc.w")->data, w1->n * 4) != 0,
              "the seed does not change the weights");
    pp_rt_tensor *wte = pp_rt_stage_tensor(a, "wte"), *head = pp_rt_stage_tensor(b, "wte.head");
    cr_assert(wte && head && wte->n == head->n);
    cr_expect(memcmp(wte->data, head->data, wte->n * 4) == 0, "wte.head must start equal to wte");
    cr_expect_null(pp_rt_stage_tensor(a, "wte.head"), "a stage with embed and head shares one wte");

    /* GPT-2 init statistics: std 0.02, residual projections 0.02/sqrt(2L) */
    double s1 = 0, s2 = 0;
    pp_rt_tensor *fc = pp_rt_stage_tensor(a, "h0.mlp.fc.w"),
                 *pr = pp_rt_stage_tensor(a, "h0.mlp.proj.w");
    for (size_t i = 0; i < fc->n; i++)
        s1 += (double)fc->data[i] * fc->data[i];
    for (size_t i = 0; i < pr->n; i++)
        s2 += (double)pr->data[i] * pr->data[i];
    cr_expect(fabs(sqrt(s1 / fc->n) - 0.02) < 0.001, "fc std %g", sqrt(s1 / fc->n));
    cr_expect(fabs(sqrt(s2 / pr->n) - 0.02 / sqrt(8.0)) < 0.0005, "proj std %g", sqrt(s2 / pr->n));
    cr_expect_eq(pp_rt_stage_tensor(a, "h0.ln1.g")->data[3], 1.0f);
    cr_expect_eq(pp_rt_stage_tensor(a, "h0.attn.qkv.b")->data[3], 0.0f);
    pp_rt_stage_destroy(a);
    pp_rt_stage_destroy(b);
    pp_rt_stage_destroy(c);
    pp_rt_stage_destroy(d);
    pp_backend_destroy(be);
}

/* Saved activations, counted by hand from the model (fp32, N = B*T rows):
 *   per block: x, ln1, atty, res2, ln2 (5 NC) + qkv (3 NC) + fch, gelu (2 NF)
 *              + LN means and rstds (4 N) + attention probabilities (B NH T T)
 *   head:      xf, lnf (2 NC) + logits/probs (NV) + mean, rstd (2 N) + targets (N int32)
 *   embedding: tokens (N int32)                                                        */
static size_t hand_act_bytes(const pp_model_cfg *m, int layers, int embed, int head, int B, int T)
{
    size_t N = (size_t)B * T, C = m->hidden, F = m->ffn, V = m->vocab;
    size_t per_layer = N * (8 * C + 2 * F) + 4 * N + (size_t)B * m->heads * T * T;
    size_t h = head ? N * (2 * C + V) + 2 * N + N : 0;
    return 4 * (layers * per_layer + h + (embed ? N : 0));
}

Test(runtime, memory_accounting_is_exact)
{
    pp_model_cfg m;
    CHECK(pp_model_preset("tiny", &m));
    const int B = 2, T = 24, K = 3;
    size_t N = (size_t)B * T, C = m.hidden, F = m.ffn, V = m.vocab;
    pp_backend *be;
    CHECK(pp_backend_cpu_create(&be));
    cr_expect_str_eq(pp_backend_name(be), "cpu");
    cr_expect_str_eq(pp_mem_category_name(PP_MEM_ACTS), "acts");
    pp_rt_stage *st;
    /* the last stage of a pipeline: layers 1..3, LN + head (its own copy of wte) */
    pp_rt_stage_params p = {.model = &m,
                            .layer_begin = 1,
                            .layer_end = 3,
                            .has_head = 1,
                            .micro_batch = B,
                            .seq = T,
                            .seed = 1};
    CHECK(pp_rt_stage_create(be, &p, &st));
    size_t per_layer_params = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + F * C + F + C * F + C;
    size_t wbytes = 4 * (2 * per_layer_params + 2 * C + V * C);
    pp_mem_stats ms;
    pp_backend_mem_stats(be, &ms);
    cr_expect_eq(ms.current[PP_MEM_WEIGHTS], wbytes, "weights %zu, expected %zu",
                 ms.current[PP_MEM_WEIGHTS], wbytes);
    cr_expect_eq(ms.current[PP_MEM_GRADS], wbytes);
    cr_expect_eq(ms.current_total, 2 * wbytes);

    size_t act = hand_act_bytes(&m, 2, 0, 1, B, T);
    cr_expect_eq(pp_rt_stage_act_bytes(st), act, "slot bytes %zu, by hand %zu",
                 pp_rt_stage_act_bytes(st), act);
    cr_expect_eq(pp_rt_stage_io_bytes(st), 4 * N * C);

    float *x = calloc(N * C, 4), *dx = calloc(N * C, 4);
    int32_t *tgt = calloc(N, 4);
    for (size_t i = 0; i < N * C; i++)
        x[i] = sinf((float)i);
    for (int k = 0; k < K; k++) {
        float loss;
        CHECK(pp_rt_stage_forward(st, 10 + k, NULL, x, tgt, NULL, &loss));
    }
    pp_backend_mem_stats(be, &ms);
    cr_expect_eq(ms.current[PP_MEM_ACTS], K * act, "%d slots hold %zu bytes, expected %zu", K,
                 ms.current[PP_MEM_ACTS], K * act);
    cr_expect_eq(ms.peak_total, 2 * wbytes + K * act);
    for (int k = 0; k < K; k++)
        CHECK(pp_rt_stage_backward(st, 10 + k, NULL, dx, 1.0f / K));
    pp_backend_mem_stats(be, &ms);
    /* backward scratch: dres, dln (2 NC), dbig (N max(F, 3C)), attention dS (T T) */
    size_t ws = 4 * (2 * N * C + N * (F > 3 * C ? F : 3 * C) + (size_t)T * T);
    cr_expect_eq(ms.peak[PP_MEM_WORKSPACE], ws, "workspace peak %zu, expected %zu",
                 ms.peak[PP_MEM_WORKSPACE], ws);
    cr_expect_eq(ms.peak_total, 2 * wbytes + K * act + ws, "peak %zu, expected %zu", ms.peak_total,
                 2 * wbytes + K * act + ws);
    cr_expect_eq(ms.peak[PP_MEM_ACTS], K * act);
    cr_expect_eq(ms.current[PP_MEM_ACTS], 0);
    cr_expect_eq(ms.current[PP_MEM_WORKSPACE], 0);
    cr_expect_eq(ms.current_total, 2 * wbytes, "after the backwards %zu bytes held, expected %zu",
                 ms.current_total, 2 * wbytes);

    pp_backend_mem_reset_peak(be);
    pp_backend_mem_stats(be, &ms);
    cr_expect_eq(ms.peak_total, 2 * wbytes);
    pp_adamw hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    CHECK(pp_rt_stage_adamw(st, &hp, 1, 1.0f));
    pp_backend_mem_stats(be, &ms);
    cr_expect_eq(ms.current[PP_MEM_OPTIM], 2 * wbytes);
    cr_expect_eq(ms.current_total, 4 * wbytes);
    free(x);
    free(dx);
    free(tgt);
    pp_rt_stage_destroy(st);
    pp_backend_mem_stats(be, &ms);
    cr_expect_eq(ms.current_total, 0, "destroy left %zu bytes", ms.current_total);
    pp_backend_destroy(be);
}

/* One tensor, two steps, by hand in double (Loshchilov & Hutter 2019, Algorithm 2). */
static double adamw_by_hand(double w, double g, int steps, double lr, double b1, double b2,
                            double eps, double wd)
{
    double m = 0, v = 0;
    for (int t = 1; t <= steps; t++) {
        m = b1 * m + (1 - b1) * g;
        v = b2 * v + (1 - b2) * g * g;
        double mh = m / (1 - pow(b1, t)), vh = v / (1 - pow(b2, t));
        w -= lr * (mh / (sqrt(vh) + eps) + wd * w);
    }
    return w;
}

Test(runtime, adamw_matches_hand_computation)
{
    pp_model_cfg m;
    CHECK(pp_model_preset("tiny", &m));
    pp_backend *be;
    CHECK(pp_backend_cpu_create(&be));
    pp_rt_stage *st;
    pp_rt_stage_params p = {.model = &m,
                            .layer_begin = 0,
                            .layer_end = 1,
                            .has_head = 1,
                            .micro_batch = 1,
                            .seq = 4,
                            .seed = 3};
    CHECK(pp_rt_stage_create(be, &p, &st));
    int n;
    pp_rt_tensor *t = pp_rt_stage_tensors(st, &n);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += t[i].n;
    float *w0 = malloc(total * 4);
    memcpy(w0, t[0].data, total * 4);
    for (size_t j = 0; j < total; j++)
        t[0].grad[j] = 0.01f * cosf(0.37f * (float)j) + (j % 7 == 0 ? 0.0f : 1e-4f);
    const pp_adamw hp = {
        .lr = 0.05f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-6f, .weight_decay = 0.2f};
    const float scale = 0.5f;
    CHECK(pp_rt_stage_adamw(st, &hp, 1, scale));
    CHECK(pp_rt_stage_adamw(st, &hp, 2, scale));
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(t[i].name);
        /* decay on matrices only, never on LayerNorm or biases */
        int decayed = t[i].name[len - 1] == 'w' || strcmp(t[i].name, "wte.head") == 0;
        size_t off = (size_t)(t[i].data - t[0].data);
        for (size_t j = 0; j < t[i].n; j++) {
            double g = (double)t[0].grad[off + j] * scale;
            double want = adamw_by_hand(w0[off + j], g, 2, hp.lr, hp.beta1, hp.beta2, hp.eps,
                                        decayed ? hp.weight_decay : 0.0);
            double err = fabs(want - t[i].data[j]) / fmax(fabs(want), 1e-3);
            if (err > worst)
                worst = err;
            cr_assert(err < 1e-5, "%s[%zu]: AdamW gave %.9g, by hand %.9g", t[i].name, j,
                      (double)t[i].data[j], want);
        }
    }
    cr_expect_eq(pp_rt_stage_adamw(st, &hp, 0, 1.0f), PP_ERR_INVALID);
    free(w0);
    pp_rt_stage_destroy(st);
    pp_backend_destroy(be);
}

/* A stage may hold no block at all (a pipe's stage that only embeds, or a pass-through): the
 * activation and its gradient go through unchanged, and it holds no memory between calls. */
Test(runtime, empty_stage_passes_through)
{
    pp_model_cfg m;
    CHECK(pp_model_preset("small", &m));
    CHECK(pp_model_validate(&m));
    pp_backend *be;
    CHECK(pp_backend_cpu_create(&be));
    pp_rt_stage *st;
    pp_rt_stage_params p = {
        .model = &m, .layer_begin = 3, .layer_end = 3, .micro_batch = 2, .seq = 5, .seed = 9};
    CHECK(pp_rt_stage_create(be, &p, &st));
    int n = -1;
    pp_rt_stage_tensors(st, &n);
    cr_expect_eq(n, 0, "a stage without blocks, embedding or head holds %d tensors", n);
    size_t N = 2 * 5 * (size_t)m.hidden;
    float *x = malloc(N * 4), *y = malloc(N * 4), *dy = malloc(N * 4), *dx = malloc(N * 4);
    for (size_t i = 0; i < N; i++)
        x[i] = (float)i, dy[i] = -(float)i;
    CHECK(pp_rt_stage_forward(st, 1, NULL, x, NULL, y, NULL));
    CHECK(pp_rt_stage_backward(st, 1, dy, dx, 1.0f));
    cr_expect(memcmp(x, y, N * 4) == 0 && memcmp(dy, dx, N * 4) == 0);
    pp_mem_stats ms;
    pp_backend_mem_stats(be, &ms);
    cr_expect_eq(ms.current_total, 0);
    free(x), free(y), free(dy), free(dx);
    pp_rt_stage_destroy(st);
    pp_backend_destroy(be);
}
