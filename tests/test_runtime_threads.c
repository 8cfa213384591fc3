/* test_runtime_threads.c — the CPU backend's own kernels on several threads (issue 26, "every
 * core"): each kernel on 2 and 3 threads gives bit for bit what one thread gives, on sizes that
 * split unevenly (rows, columns and (batch, head) units not divisible by the thread count, the
 * attention crossing its 256-row block); and pprun with --kernel-threads 1, 2, 3 trains the GPT
 * and the Llama-shaped tiny models to the same losses, gradient norms and parameters. The BLAS
 * threads stay at 1 there: OpenBLAS 0.3.21's sgemm itself rounds differently with 1, 2 or 3
 * threads (pprun --threads 2 and 3 differ from --threads 1 on main as well), so only the
 * kernels' count varies. Speed is the benchmark's business (scripts/bench-vs-torch.sh). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "pp_rt.h"
#include "pp_test_ok.h"
#include "pp_test_run.h"
#include "pprun_json.h"


/* Sizes: 397 rows of 72 (split 2 and 3 ways at the kernels' minimum part: rows, and columns in
 * 16-float grains 16 | 32 | 24), 24613 elements, vocabulary 333; attention 2 x 300 (across the
 * 256-row block) x 6 heads over 2 KV heads, and 3 x 40 x 4 heads over 1 (backward: 3 units). */
enum { N = 397, C = 72, V = 333, F = 36 };
#define NEL ((size_t)3 * 8192 + 37)

static float *filled(size_t n, unsigned seed, float scale)
{
    float *x = malloc(n * sizeof *x);
    cr_assert(x);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = scale * ((float)(seed >> 8) / 16777216.0f - 0.5f);
    }
    return x;
}

static float *copy_of(const float *x, size_t n)
{
    float *y = malloc(n * sizeof *y);
    cr_assert(y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

/* Every output of every kernel, one after the other, computed by backend `be`. */
typedef struct {
    float *buf[32];
    size_t n[32];
    const char *what[32];
    int count;
    float loss;
} outputs;

static void keep(outputs *o, const char *what, float *x, size_t n)
{
    cr_assert_lt(o->count, 32);
    o->what[o->count] = what, o->buf[o->count] = x, o->n[o->count++] = n;
}

static void attention(const pp_backend_ops *k, void *c, outputs *o, int B, int T, int NH,
                      int NKV, int HD)
{
    size_t W = (size_t)(NH + 2 * NKV) * HD, nq = (size_t)B * T * W;
    size_t na = (size_t)B * NH * T * T, ny = (size_t)B * T * NH * HD;
    float *qkv = filled(nq, 23, 2.0f), *att = calloc(na, sizeof *att);
    float *ya = malloc(ny * sizeof *ya), *dya = filled(ny, 24, 1.0f);
    float *dqkv = malloc(nq * sizeof *dqkv);
    float *scratch = malloc(k->attention_scratch_bytes(c, B, T, NH * HD, NH));
    cr_assert(att && ya && dqkv && scratch);
    OK(k->attention_fwd(c, ya, att, qkv, B, T, NH, NKV, HD));
    OK(k->attention_bwd(c, dqkv, scratch, dya, att, qkv, B, T, NH, NKV, HD));
    keep(o, "attention_fwd", ya, ny), keep(o, "attention_bwd", dqkv, nq);
    free(qkv), free(att), free(dya), free(scratch);
}

static void run_kernels(pp_backend *be, outputs *o)
{
    const pp_backend_ops *k = be->ops;
    void *c = be->ctx;
    const size_t NC = (size_t)N * C;
    memset(o, 0, sizeof *o);
    float *x = filled(NC, 1, 4.0f), *g = filled(C, 2, 2.0f), *b = filled(C, 3, 1.0f);
    float *dy = filled(NC, 4, 1.0f);
    /* add_bias, bias_grad, add */
    float *y = copy_of(x, NC), *db = filled(C, 5, 1.0f);
    OK(k->add_bias(c, y, b, N, C));
    OK(k->bias_grad(c, db, dy, N, C));
    keep(o, "add_bias", y, NC), keep(o, "bias_grad", db, C);
    float *e1 = filled(NEL, 6, 1.0f), *e2 = filled(NEL, 7, 1.0f);
    OK(k->add(c, e1, e2, NEL));
    keep(o, "add", e1, NEL);
    /* encoder: 397 tokens of a 50-word vocabulary (repeats accumulate), positions T = 397 */
    int32_t tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (i * 37 + 11) % 50;
    float *wte = filled((size_t)50 * C, 8, 1.0f), *wpe = filled(NC, 9, 1.0f);
    float *eo = malloc(NC * sizeof *eo), *dwte = filled((size_t)50 * C, 10, 1.0f);
    float *dwpe = filled(NC, 11, 1.0f);
    OK(k->encoder_fwd(c, eo, tok, wte, wpe, 1, N, C));
    OK(k->encoder_bwd(c, dwte, dwpe, dy, tok, 1, N, C));
    keep(o, "encoder_fwd", eo, NC), keep(o, "encoder_bwd dwte", dwte, (size_t)50 * C);
    keep(o, "encoder_bwd dwpe", dwpe, NC);
    /* LayerNorm, RMSNorm */
    float *ln = malloc(NC * sizeof *ln), *mean = malloc(N * sizeof *mean);
    float *rstd = malloc(N * sizeof *rstd), *dx = filled(NC, 12, 1.0f);
    float *dg = filled(C, 13, 1.0f), *dbn = filled(C, 14, 1.0f);
    OK(k->layernorm_fwd(c, ln, mean, rstd, x, g, b, N, C, 1e-5f));
    OK(k->layernorm_bwd(c, dx, dg, dbn, dy, x, g, mean, rstd, N, C));
    keep(o, "layernorm_fwd", ln, NC), keep(o, "layernorm_bwd dx", dx, NC);
    keep(o, "layernorm_bwd dg", dg, C), keep(o, "layernorm_bwd db", dbn, C);
    free(mean), free(rstd);
    float *rn = malloc(NC * sizeof *rn), *rr = malloc(N * sizeof *rr);
    float *rdx = filled(NC, 15, 1.0f), *rdg = filled(C, 16, 1.0f);
    OK(k->rmsnorm_fwd(c, rn, rr, x, g, N, C, 1e-5f));
    OK(k->rmsnorm_bwd(c, rdx, rdg, dy, x, g, rr, N, C));
    keep(o, "rmsnorm_fwd", rn, NC), keep(o, "rmsnorm_bwd dx", rdx, NC);
    keep(o, "rmsnorm_bwd dg", rdg, C);
    free(rr);
    /* GELU, SwiGLU (2F = C), rotary on 3 heads of 24 in rows of 72 */
    float *ge = malloc(NEL * sizeof *ge), *gd = filled(NEL, 17, 1.0f);
    float *gx = filled(NEL, 18, 6.0f);
    OK(k->gelu_fwd(c, ge, gx, NEL));
    OK(k->gelu_bwd(c, gd, gx, gd, NEL));
    keep(o, "gelu_fwd", ge, NEL), keep(o, "gelu_bwd", gd, NEL);
    float *sw = malloc((size_t)N * F * sizeof *sw), *sdx = malloc(NC * sizeof *sdx);
    OK(k->swiglu_fwd(c, sw, x, N, F));
    OK(k->swiglu_bwd(c, sdx, x, dy, F, N, F));
    keep(o, "swiglu_fwd", sw, (size_t)N * F), keep(o, "swiglu_bwd", sdx, NC);
    float *ro = copy_of(x, NC);
    pp_rope r = {.theta = 10000.0f, .kind = PP_ROPE_NONE, .factor = 1.0f};
    OK(k->rope(c, ro, N, 61, 2, 24, C, &r, 1));
    keep(o, "rope", ro, NC);
    /* Qwen3's q/k norm: 2 query and 1 key heads of 16 in rows of C (the rest untouched), then
     * its backward in place with both weights' gradients */
    float *hn = copy_of(x, NC), *hin = malloc((size_t)N * 48 * sizeof *hin);
    float *hr = malloc((size_t)N * 3 * sizeof *hr), *hdy = copy_of(dy, NC);
    float *hgq = filled(16, 25, 1.0f), *hgk = filled(16, 26, 1.0f);
    OK(k->headnorm_fwd(c, hn, hin, hr, g, g + 16, N, 2, 1, 16, C, 1e-6f));
    OK(k->headnorm_bwd(c, hdy, hgq, hgk, hin, hr, g, g + 16, N, 2, 1, 16, C));
    keep(o, "headnorm_fwd", hn, NC), keep(o, "headnorm_bwd dx", hdy, NC);
    keep(o, "headnorm_bwd dgq", hgq, 16), keep(o, "headnorm_bwd dgk", hgk, 16);
    free(hin), free(hr);
    /* cross-entropy */
    float *pr = filled((size_t)N * V, 19, 8.0f);
    int32_t tgt[N];
    for (int i = 0; i < N; i++)
        tgt[i] = (i * 53 + 5) % V;
    OK(k->xent_fwd(c, pr, tgt, N, V, &o->loss));
    float *pb = copy_of(pr, (size_t)N * V);
    OK(k->xent_bwd(c, pb, tgt, N, V, 1.0f / N));
    keep(o, "xent_fwd probs", pr, (size_t)N * V), keep(o, "xent_bwd", pb, (size_t)N * V);
    /* AdamW */
    float *w = filled(NEL, 20, 1.0f), *m = filled(NEL, 21, 0.1f), *v = filled(NEL, 22, 0.1f);
    for (size_t i = 0; i < NEL; i++)
        v[i] = fabsf(v[i]);
    pp_adamw_scalars s = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                          .weight_decay = 0.1f, .bc1 = 0.1f, .bc2 = 0.05f, .grad_scale = 0.5f};
    OK(k->adamw(c, w, e2, m, v, NEL, &s));
    keep(o, "adamw w", w, NEL), keep(o, "adamw m", m, NEL);
    free(v);
    /* attention: units in parallel (T = 40) and, T = 300 with 2 BLAS threads, units in turn
     * with their softmax rows split */
    attention(k, c, o, 2, 300, 6, 2, 8);
    attention(k, c, o, 3, 40, 4, 1, 8);
    free(x), free(g), free(b), free(dy), free(e2), free(wte), free(wpe), free(gx);
}

static void free_outputs(outputs *o)
{
    for (int i = 0; i < o->count; i++)
        free(o->buf[i]);
}

Test(runtime_threads, every_kernel_is_bit_identical_on_2_and_3_threads)
{
    pp_backend *one;
    pp_backend_cpu_set_threads(2); /* OpenBLAS's, the same for every kernel count below */
    OK(pp_backend_cpu_create_threads(1, &one));
    outputs ref;
    run_kernels(one, &ref);
    for (int t = 2; t <= 3; t++) {
        pp_backend *be;
        OK(pp_backend_cpu_create_threads(t, &be));
        outputs got;
        run_kernels(be, &got);
        cr_assert_eq(got.count, ref.count);
        for (int i = 0; i < ref.count; i++)
            for (size_t j = 0; j < ref.n[i]; j++)
                cr_assert(memcmp(&got.buf[i][j], &ref.buf[i][j], sizeof(float)) == 0,
                          "%s on %d threads: element %zu is %.9g, on one thread %.9g",
                          ref.what[i], t, j, got.buf[i][j], ref.buf[i][j]);
        cr_assert(memcmp(&got.loss, &ref.loss, sizeof(float)) == 0,
                  "xent_fwd's mean loss on %d threads %.9g, on one %.9g", t, got.loss, ref.loss);
        free_outputs(&got);
        pp_backend_destroy(be);
    }
    free_outputs(&ref);
    pp_backend_destroy(one);
}

Test(runtime_threads, a_thread_count_out_of_range_is_refused)
{
    pp_backend *be = (pp_backend *)1;
    cr_assert_eq(pp_backend_cpu_create_threads(0, &be), PP_ERR_INVALID);
    cr_assert_null(be);
    cr_assert(strstr(pp_err_msg(), "0 kernel threads; expected 1 to"), "%s", pp_err_msg());
}

/* 12 sequences of 64 tokens per micro-batch: 768 rows, enough for the norms (width 32) to
 * split 3 ways; two pipeline ranks so that both the embedding's and the head's stage run.
 * Four steps: AdamW's first update is about lr sign(g), blind to the last bits of g (a norm
 * gain's gradient summed in another order showed in the parameters at step 4, not 2). */
static void same_training_on_1_2_3_kernel_threads(const char *model)
{
    char args[256];
    json_t *ref = NULL;
    for (int k = 1; k <= 3; k++) {
        snprintf(args, sizeof args,
                 "--model %s --ranks 2 --microbatches 2 --micro-batch-size 12 --seq 64 "
                 "--steps 4 --threads 1 --kernel-threads %d",
                 model, k);
        json_t *j = pp_test_pprun_json(args);
        cr_assert_eq(json_integer_value(json_object_get(j, "kernel_threads_per_rank")), k, "%s",
                     args);
        if (!ref) {
            ref = j;
            continue;
        }
        pp_test_expect_same_training(ref, j, args, "more kernel threads");
        json_decref(j);
    }
    json_decref(ref);
}

Test(runtime_threads, pprun_gpt_trains_bit_identically_on_1_2_3_kernel_threads)
{
    same_training_on_1_2_3_kernel_threads("tiny");
}

Test(runtime_threads, pprun_llama_trains_bit_identically_on_1_2_3_kernel_threads)
{
    same_training_on_1_2_3_kernel_threads("tiny-llama");
}
