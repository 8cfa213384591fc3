/* test_runtime_llama.c — the Llama-family block (RMSNorm, SwiGLU, rotary positions with Llama
 * 3's scaling, grouped-query attention, untied head) in the runtime:
 *  - the stage computes what the issue specifies: its loss and block outputs equal a naive
 *    double-precision transcription written here from the formulas of transformers'
 *    modeling_llama.py (LlamaRMSNorm, rotate_half / apply_rotary_pos_emb, repeat_kv,
 *    LlamaMLP) and modeling_rope_utils.py (_compute_llama3_parameters), within 1e-5 relative;
 *    and the same comparison fails by far more when the reference's rotation is broken (no
 *    rotation, GPT-J's interleaved pairs instead of rotate_half, no Llama 3 scaling) or its
 *    KV-head sharing is (query head h reading KV head h % KV instead of h / (NH/KV)): the
 *    tolerance sits far below what those mistakes cost, so the test would catch them;
 *  - every schedule (split backward ones included), dp 2: loss and gradients equal the
 *    unpipelined run (test_runtime_exec_equiv.c's check, 1e-5 relative per tensor);
 *  - the model table, config.json import and the runtime's refusals (YaRN, t not dividing the
 *    KV heads). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_rt.h"
#include "pp_test_run.h"
#include "pprun_json.h"
#include "test_runtime_exec_equiv.h"
#include "ref_attention.h"

#include "pp_test_ok.h"

#define W pp_ref_tensor

/* ---- the double-precision reference ---- */

/* How the reference may be broken on purpose (to show the comparison would catch it). */
typedef enum {
    REF_RIGHT,
    REF_NO_ROPE,
    REF_INTERLEAVED,
    REF_NO_SCALING,
    REF_KV_MOD,
    REF_NO_QNORM,  /* Qwen3: k normalised, q not */
    REF_QK_SWAPPED /* Qwen3: q scaled by k_norm's weight and k by q_norm's */
} ref_mode;

/* LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * g */
static void ref_rmsnorm(double *y, const double *x, const float *g, int N, int C, double eps)
{
    for (int i = 0; i < N; i++) {
        double ms = 0;
        for (int c = 0; c < C; c++)
            ms += x[i * C + c] * x[i * C + c] / C;
        for (int c = 0; c < C; c++)
            y[i * C + c] = x[i * C + c] / sqrt(ms + eps) * g[c];
    }
}

static void ref_matmul(double *y, const double *x, const float *w, int N, int in, int out)
{
    for (int i = 0; i < N; i++)
        for (int o = 0; o < out; o++) {
            double s = 0;
            for (int k = 0; k < in; k++)
                s += x[(size_t)i * in + k] * w[(size_t)o * in + k];
            y[(size_t)i * out + o] = s;
        }
}

/* _compute_llama3_parameters, in double */
static double ref_inv_freq(const pp_model_cfg *m, int i, int hd, ref_mode mode)
{
    double inv = pow(m->rope_theta, -2.0 * i / hd);
    if (mode == REF_NO_SCALING || m->rope_scaling != PP_ROPE_LLAMA3)
        return inv;
    double f = m->rope_factor, lo = m->rope_low_freq, hi = m->rope_high_freq;
    double old = m->rope_orig_max, wl = 2 * M_PI / inv;
    if (wl > old / lo)
        return inv / f;
    if (wl < old / hi)
        return inv;
    double s = (old / wl - lo) / (hi - lo);
    return (1 - s) * inv / f + s * inv;
}

/* apply_rotary_pos_emb on one head vector v (hd) at position pos: rotate_half pairs (j, j +
 * hd/2), or GPT-J's (2j, 2j+1) when broken so. */
static void ref_rotate(double *v, int pos, int hd, const pp_model_cfg *m, ref_mode mode)
{
    if (mode == REF_NO_ROPE)
        return;
    int half = hd / 2;
    for (int j = 0; j < half; j++) {
        double a = pos * ref_inv_freq(m, j, hd, mode), c = cos(a), s = sin(a);
        int i1 = mode == REF_INTERLEAVED ? 2 * j : j, i2 = mode == REF_INTERLEAVED ? 2 * j + 1 : j + half;
        double x1 = v[i1], x2 = v[i2];
        v[i1] = x1 * c - x2 * s;
        v[i2] = x2 * c + x1 * s;
    }
}

/* One Llama block on x (B*T, C) in place: x += o(attn(rope(q), rope(k), v)); x += mlp(norm(x)) */
static void ref_block(pp_rt_stage *st, int l, double *x, const pp_model_cfg *m, int B, int T,
                      ref_mode mode)
{
    int C = m->hidden, F = m->ffn, NH = m->heads, KV = pp_model_kv(m), hd = pp_model_hd(m);
    int N = B * T, Q = NH * hd, W3 = (NH + 2 * KV) * hd, g = NH / KV;
    double eps = pp_model_eps(m);
    char nm[64];
#define P(s) (snprintf(nm, sizeof nm, "h%d.%s", l, s), W(st, nm))
    double *h = calloc((size_t)N * C, 8), *qkv = calloc((size_t)N * W3, 8);
    double *y = calloc((size_t)N * Q, 8), *o = calloc((size_t)N * C, 8);
    double *f = calloc((size_t)N * 2 * F, 8), *a = calloc((size_t)N * F, 8), *att = calloc(T, 8);
    ref_rmsnorm(h, x, P("ln1.g"), N, C, eps);
    ref_matmul(qkv, h, P("attn.qkv.w"), N, C, W3);
    if (m->qk_norm) { /* Qwen3Attention: q_norm, k_norm (Qwen3RMSNorm(head_dim)) per head */
        const float *gq = P("attn.q_norm.g"), *gk = P("attn.k_norm.g");
        if (mode == REF_QK_SWAPPED)
            gq = P("attn.k_norm.g"), gk = P("attn.q_norm.g");
        for (int n = 0; n < N; n++)
            for (int hh = mode == REF_NO_QNORM ? NH : 0; hh < NH + KV; hh++) {
                double *v = qkv + (size_t)n * W3 + (size_t)hh * hd;
                ref_rmsnorm(v, v, hh < NH ? gq : gk, 1, hd, eps);
            }
    }
    for (int n = 0; n < N; n++)
        for (int hh = 0; hh < NH + KV; hh++) /* the q heads, then the k heads */
            ref_rotate(qkv + (size_t)n * W3 + (size_t)hh * hd, n % T, hd, m, mode);
    int *kv_of = calloc((size_t)NH, sizeof *kv_of);
    cr_assert_not_null(kv_of);
    for (int hq = 0; hq < NH; hq++)
        kv_of[hq] = mode == REF_KV_MOD ? hq % KV : hq / g; /* repeat_kv */
    pp_ref_causal_attention(y, qkv, att, B, T, NH, KV, hd, kv_of);
    free(kv_of);
    ref_matmul(o, y, P("attn.proj.w"), N, Q, C);
    for (size_t i = 0; i < (size_t)N * C; i++)
        x[i] += o[i];
    ref_rmsnorm(h, x, P("ln2.g"), N, C, eps);
    ref_matmul(f, h, P("mlp.fc.w"), N, C, 2 * F); /* [gate_proj | up_proj] */
    for (int n = 0; n < N; n++)
        for (int j = 0; j < F; j++) {
            double gt = f[(size_t)n * 2 * F + j], up = f[(size_t)n * 2 * F + F + j];
            a[(size_t)n * F + j] = gt / (1 + exp(-gt)) * up; /* silu(gate) * up */
        }
    ref_matmul(o, a, P("mlp.proj.w"), N, F, C);
    for (size_t i = 0; i < (size_t)N * C; i++)
        x[i] += o[i];
#undef P
    free(h), free(qkv), free(y), free(o), free(f), free(a), free(att);
}

/* Mean cross-entropy of the model on tok -> tgt, every block by the reference. */
static double ref_loss(pp_rt_stage *st, const pp_model_cfg *m, const int32_t *tok,
                       const int32_t *tgt, int B, int T, ref_mode mode, double *xout)
{
    int C = m->hidden, V = m->vocab, N = B * T;
    const float *wte = W(st, "wte"), *head = W(st, "head.w");
    double *x = calloc((size_t)N * C, 8), *h = calloc((size_t)N * C, 8), *logit = malloc(8 * V);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            x[i * C + c] = wte[tok[i] * C + c]; /* no position table */
    for (int l = 0; l < m->layers; l++)
        ref_block(st, l, x, m, B, T, mode);
    if (xout)
        memcpy(xout, x, sizeof(double) * N * C);
    ref_rmsnorm(h, x, W(st, "lnf.g"), N, C, pp_model_eps(m));
    double total = 0;
    for (int i = 0; i < N; i++) {
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int c = 0; c < C; c++)
                s += h[i * C + c] * head[v * C + c]; /* untied head */
            logit[v] = s;
            mx = fmax(mx, s);
        }
        for (int v = 0; v < V; v++)
            sum += exp(logit[v] - mx);
        total += log(sum) - (logit[tgt[i]] - mx);
    }
    free(x), free(h), free(logit);
    return total / N;
}

/* Moves every parameter off its init value so every term matters. */
static void perturb(pp_rt_stage *st)
{
    int n;
    pp_rt_tensor *t = pp_rt_stage_tensors(st, &n);
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < t[i].n; j++)
            t[i].data[j] = t[i].data[j] * 6.0f + 0.1f * sinf((float)(j * 7 + i));
}

/* tiny-llama with a rotary setting whose 4 frequencies (head width 8) fall in all three of
 * Llama 3's bands: wavelengths 6.3 (kept), 63 (interpolated), 628 and 6283 (divided). */
static pp_model_cfg ref_model(void)
{
    pp_model_cfg m;
    OK(pp_model_preset("tiny-llama", &m));
    m.layers = 2, m.rope_theta = 10000, m.rope_orig_max = 64;
    return m;
}

typedef struct {
    ref_mode mode;
    const char *what;
} ref_broken;

/* The stage's loss and block outputs against the naive model m; each of the nb broken
 * references must miss the stage's loss by 100x the tolerance. */
static void check_against_naive(pp_model_cfg m, const ref_broken *broken, size_t nb)
{
    const int B = 2, T = 40, C = m.hidden, V = m.vocab, N = B * T;
    pp_backend *be;
    OK(pp_backend_cpu_create(&be));
    pp_rt_stage_params p = {.model = &m, .layer_begin = 0, .layer_end = m.layers,
                            .has_embed = 1, .has_head = 1, .micro_batch = B, .seq = T,
                            .seed = 17};
    pp_rt_stage *st, *body;
    OK(pp_rt_stage_create(be, &p, &st));
    perturb(st);
    int32_t tok[2 * 40], tgt[2 * 40];
    for (int i = 0; i < N; i++)
        tok[i] = (i * 37 + 11) % V, tgt[i] = (i * 53 + 5) % V;
    float loss;
    OK(pp_rt_stage_forward(st, 0, tok, NULL, tgt, NULL, &loss));
    OK(pp_rt_stage_backward(st, 0, NULL, NULL, 1.0f));
    double *x = malloc(sizeof(double) * N * C);
    double want = ref_loss(st, &m, tok, tgt, B, T, REF_RIGHT, x);
    cr_expect(fabs(want - loss) <= 1e-5 * fabs(want), "loss %.9g, naive Llama %.9g", loss, want);
    cr_expect(fabs(want - log((double)V)) > 0.05, "the perturbed model is near uniform (%g)",
              want);
    /* the blocks' outputs, element by element (same seed and perturbation: same weights) */
    p.has_head = 0;
    OK(pp_rt_stage_create(be, &p, &body));
    perturb(body);
    float *xo = malloc(sizeof(float) * N * C);
    OK(pp_rt_stage_forward(body, 0, tok, NULL, NULL, xo, NULL));
    double err = 0, scale = 0;
    for (int i = 0; i < N * C; i++)
        err = fmax(err, fabs(xo[i] - x[i])), scale = fmax(scale, fabs(x[i]));
    cr_expect(err <= 1e-5 * scale, "block outputs differ from naive Llama by %g (scale %g)", err,
              scale);
    /* each mistake costs far more than the tolerance: in the loss, or in the block outputs
     * (the q/k norm's mistakes move the outputs by 2e-2 to 2e-1 of their scale, the loss by
     * 4e-4 to 7e-4 of itself) */
    for (size_t k = 0; k < nb; k++) {
        double bad = ref_loss(st, &m, tok, tgt, B, T, broken[k].mode, x), berr = 0;
        for (int i = 0; i < N * C; i++)
            berr = fmax(berr, fabs(xo[i] - x[i]));
        cr_expect(fabs(bad - loss) > 100 * 1e-5 * fabs(want) || berr > 100 * 1e-5 * scale,
                  "a reference with %s (loss %.9g, outputs off by %g of %g) should be far from "
                  "the stage's loss %.9g",
                  broken[k].what, bad, berr, scale, loss);
    }
    free(x), free(xo);
    pp_rt_stage_destroy(body);
    pp_rt_stage_destroy(st);
    pp_backend_destroy(be);
}

Test(runtime_llama, forward_matches_naive_llama_and_would_catch_rope_and_kv_mistakes)
{
    const ref_broken broken[] = {{REF_NO_ROPE, "no rotation"},
                                 {REF_INTERLEAVED, "interleaved (GPT-J) pairs"},
                                 {REF_NO_SCALING, "no Llama 3 scaling"},
                                 {REF_KV_MOD, "KV head h % KV"}};
    check_against_naive(ref_model(), broken, sizeof broken / sizeof broken[0]);
}

/* Qwen3's block: the per-head q/k RMSNorm before the rotation (modeling_qwen3.py's
 * Qwen3Attention), head_dim 16 where hidden / heads is 8, 2 KV heads for 4, no scaling. */
Test(runtime_llama, forward_matches_naive_qwen3_and_would_catch_q_k_norm_mistakes)
{
    pp_model_cfg m = ref_model();
    m.qk_norm = 1, m.head_dim = 16, m.rope_scaling = PP_ROPE_NONE, m.rope_theta = 1000000;
    m.rope_scaling_name[0] = 0, m.norm_eps = 1e-6;
    const ref_broken broken[] = {{REF_NO_QNORM, "q not normalised"},
                                 {REF_QK_SWAPPED, "q_norm and k_norm swapped"},
                                 {REF_KV_MOD, "KV head h % KV"},
                                 {REF_NO_ROPE, "no rotation"}};
    check_against_naive(m, broken, sizeof broken / sizeof broken[0]);
}

/* ---- every schedule against the unpipelined run (test_runtime_exec_equiv.c) ---- */

/* One case: the block (exec_llama's EXEC_*) through the schedule, against the unpipelined run
 * (1e-5 relative per tensor). */
#define BLOCK_CASE(block, name, ...)                                                               \
    Test(runtime_llama, name##_equals_reference)                                                   \
    {                                                                                              \
        exec_llama = block;                                                                        \
        exec_case c = {__VA_ARGS__};                                                               \
        exec_check_case(&c);                                                                       \
    }
/* Every schedule (split backward ones included), dp 2, and an uneven split; names prefix##... */
#define EVERY_SCHEDULE(block, prefix)                                                              \
    BLOCK_CASE(block, prefix##gpipe, .kind = "gpipe", .D = 2, .N = 4, .dp = 2)                     \
    BLOCK_CASE(block, prefix##onef1b_dp2, .kind = "1f1b", .D = 2, .N = 4, .dp = 2)                 \
    BLOCK_CASE(block, prefix##interleaved, .kind = "interleaved", .D = 2, .N = 4, .v = 2, .dp = 2) \
    BLOCK_CASE(block, prefix##chimera, .kind = "chimera", .D = 2, .N = 4, .dp = 2)                 \
    BLOCK_CASE(block, prefix##bitpipe, .kind = "bitpipe", .D = 2, .N = 4, .dp = 2)                 \
    BLOCK_CASE(block, prefix##zb_h1, .kind = "zb-h1", .D = 2, .N = 4, .dp = 2)                     \
    BLOCK_CASE(block, prefix##zbv, .kind = "zbv", .D = 2, .N = 4, .dp = 2)                         \
    BLOCK_CASE(block, prefix##dualpipev, .kind = "dualpipev", .D = 2, .N = 4, .dp = 2)             \
    BLOCK_CASE(block, prefix##uneven, .kind = "1f1b", .D = 3, .N = 6, .uneven = 1, .dp = 1)
EVERY_SCHEDULE(EXEC_LLAMA, )
BLOCK_CASE(EXEC_LLAMA, onef1b, .kind = "1f1b", .D = 4, .N = 8, .dp = 1)
/* Qwen3's block (the per-head q/k RMSNorm, head_dim 8 where hidden / heads is 4) */
EVERY_SCHEDULE(EXEC_QWEN3, qwen3_)

/* ---- the description's checks ---- */

Test(runtime_llama, tensor_parallelism_refuses_kv_heads_it_does_not_divide)
{
    pp_model_cfg m;
    OK(pp_model_preset("tiny-llama", &m)); /* 4 query heads, 2 KV heads */
    cr_assert_eq(pp_model_check_tp(&m, 2), PP_OK);
    cr_assert_eq(pp_model_check_tp(&m, 4), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "--tp 4 must divide the model's 2 KV heads"), "%s",
              pp_err_text());
}

static char *write_tmp(const char *text)
{
    char *p = strdup("/tmp/pp_llama_XXXXXX");
    int fd = mkstemp(p);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return p;
}

Test(runtime_llama, config_json_gives_the_llama_block_and_yarn_is_refused_by_name)
{
    pp_model_cfg m, ref;
    pp_model_hf_pos pos;
    OK(pp_model_load_hf(PP_FIXTURES_DIR "/hf/llama-3.1-8b.json", &m, &pos));
    OK(pp_model_preset("llama3-8b", &ref));
    cr_assert(m.layers == 32 && m.hidden == 4096 && pp_model_kv(&m) == 8 && m.ffn == 14336 &&
              m.vocab == 128256 && m.untied && m.norm == PP_NORM_RMSNORM &&
              m.mlp == PP_MLP_SWIGLU && m.pos == PP_POS_ROPE && m.nobias == PP_NOBIAS_ALL);
    cr_assert(m.rope_scaling == PP_ROPE_LLAMA3 && m.rope_factor == 8 && m.rope_low_freq == 1 &&
              m.rope_high_freq == 4 && m.rope_orig_max == 8192 && m.rope_theta == 500000);
    cr_assert_eq(pos.max, 131072);
    OK(pp_model_check_runnable(&m));
    char *p = write_tmp("{\"model_type\": \"llama\", \"num_hidden_layers\": 2, "
                        "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                        "\"intermediate_size\": 128, \"vocab_size\": 100, "
                        "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}");
    OK(pp_model_load_hf(p, &m, &pos)); /* the tuner plans it */
    cr_assert_eq(pp_model_check_runnable(&m), PP_ERR_UNSUPPORTED);
    cr_assert(strstr(pp_err_text(), "rope_scaling \"yarn\" is not implemented"), "%s",
              pp_err_text());
    unlink(p);
    free(p);
}

/* transformers 5 writes rope_theta and the scaling as one "rope_parameters" object (its
 * save_pretrained of LlamaConfig); read as rope_theta + rope_scaling, "default" = none. */
Test(runtime_llama, config_json_rope_parameters_of_transformers_5_are_read)
{
    pp_model_cfg m;
    pp_model_hf_pos pos;
    char *p = write_tmp("{\"model_type\": \"llama\", \"num_hidden_layers\": 2, "
                        "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                        "\"intermediate_size\": 128, \"vocab_size\": 100, "
                        "\"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": "
                        "500000.0, \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                        "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 16}}");
    OK(pp_model_load_hf(p, &m, &pos));
    cr_assert(m.rope_scaling == PP_ROPE_LLAMA3 && m.rope_factor == 8 && m.rope_orig_max == 16 &&
              m.rope_high_freq == 4 && m.rope_theta == 500000);
    unlink(p);
    free(p);
    p = write_tmp("{\"model_type\": \"llama\", \"num_hidden_layers\": 2, "
                  "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                  "\"intermediate_size\": 128, \"vocab_size\": 100, "
                  "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}");
    OK(pp_model_load_hf(p, &m, &pos));
    cr_assert(m.rope_scaling == PP_ROPE_NONE && m.rope_theta == 1e6);
    unlink(p);
    free(p);
}

/* ---- pprun --model-config ---- */

#define PPRUN PP_BINARY_DIR "/runtime/pprun"

/* tiny-llama's block as transformers would write its config.json */
static const char *const TINY_LLAMA_JSON =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
    "\"hidden_act\": \"silu\", \"hidden_size\": 32, \"intermediate_size\": 96, "
    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_hidden_layers\": 4, "
    "\"vocab_size\": 256, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-05, "
    "\"rope_theta\": 500000.0, \"attention_bias\": false, \"mlp_bias\": false, "
    "\"tie_word_embeddings\": false, \"rope_scaling\": {\"factor\": 8.0, "
    "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
    "\"original_max_position_embeddings\": 16, \"rope_type\": \"llama3\"}}";

/* The config.json of tiny-llama trains as --model tiny-llama does (bit for bit), over 2
 * pipeline ranks x 2 tensor ranks; --layers still cuts it to a few layers. */
Test(runtime_llama, pprun_model_config_trains_the_config_s_model)
{
    char *cfg = write_tmp(TINY_LLAMA_JSON), args[512];
    const char *layout = "--ranks 2 --tp 2 --microbatches 4 --steps 2 --seq 32";
    snprintf(args, sizeof args, "--model-config %s %s", cfg, layout);
    json_t *a = pp_test_pprun_json(args);
    snprintf(args, sizeof args, "--model tiny-llama %s", layout);
    json_t *b = pp_test_pprun_json(args);
    pp_test_expect_same_training(b, a, args, "--model-config");
    json_t *m = json_object_get(a, "model");
    cr_assert_eq(json_integer_value(json_object_get(m, "kv_heads")), 2);
    cr_assert(strstr(json_string_value(json_object_get(m, "block")), "RMSNorm"), "%s",
              json_string_value(json_object_get(m, "block")));
    json_decref(a);
    json_decref(b);
    snprintf(args, sizeof args, "--model-config %s --layers 2 --ranks 2 --steps 1", cfg);
    a = pp_test_pprun_json(args);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(a, "model"), "layers")), 2);
    json_decref(a);
    unlink(cfg);
    free(cfg);
}

Test(runtime_llama, pprun_refuses_what_it_does_not_compute_naming_it)
{
    char *cfg = write_tmp("{\"model_type\": \"llama\", \"num_hidden_layers\": 2, "
                          "\"hidden_size\": 32, \"num_attention_heads\": 4, "
                          "\"intermediate_size\": 64, \"vocab_size\": 256, "
                          "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}");
    pp_test_run_result r = pp_test_run(PPRUN " --model-config %s --steps 1", cfg);
    cr_assert_eq(r.code, 2, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.err, "--model-config: model: rope_scaling \"yarn\" is not implemented"),
              "%s", r.err);
    pp_test_run_done(&r);
    unlink(cfg);
    free(cfg);
    r = pp_test_run(PPRUN " --model tiny-llama --tp 4 --steps 1");
    cr_assert_eq(r.code, 2, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.err, "must divide the model's 2 KV heads"), "%s", r.err);
    pp_test_run_done(&r);
    r = pp_test_run(PPRUN " --model bert-large --steps 1");
    cr_assert_eq(r.code, 2, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.err, "planned by pptune but not run by pprun"), "%s", r.err);
    pp_test_run_done(&r);
}
