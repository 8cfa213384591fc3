/* test_runtime_hfweights.c — pprun --load-weights / --save-weights (runtime/weights_hf.c):
 * parameters saved under one layout and loaded under another are bit for bit the same (the
 * files equal byte for byte after a step at --lr 0) and give the same loss, for the GPT and
 * Llama blocks, and for the mixture-of-experts ones under expert parallelism; a sharded checkpoint with its index (and BF16 tensors) loads; a missing, an
 * unexpected and a misshapen tensor are refused naming the tensor and the file (exit 2).
 * tests/py/test_hf_weights.py checks the same files against transformers itself. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pp_rt.h"
#include "pp_test_dir.h"
#include "pp_test_run.h"
#include "pprun_json.h"

PP_TEST_DIR(pp_hfw)

TestSuite(runtime_hfweights, .init = pp_hfw_dir_make, .fini = pp_hfw_dir_remove);

#define PPRUN PP_BINARY_DIR "/runtime/pprun"

static char *path_in(const char *name)
{
    return pp_test_path_in(g_dir, name);
}

/* Runs pprun with args (+ --json --quiet); returns its step-1 loss; exit 0 expected. */
static double run_loss(const char *args)
{
    pp_test_run_result r = pp_test_run(PPRUN " %s --json --quiet", args);
    cr_assert_eq(r.code, 0, "pprun %s: exit %d: %s", args, r.code, r.err);
    json_t *j = pp_test_parse_json(strchr(r.out, '{'), args);
    double loss = json_real_value(json_object_get(json_array_get(json_object_get(j, "per_step"),
                                                                 0),
                                                  "loss"));
    json_decref(j);
    pp_test_run_done(&r);
    return loss;
}

static void same_file(const char *a, const char *b)
{
    char *x = pp_test_slurp(a), *y = pp_test_slurp(b);
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    cr_assert(fa && fb, "%s or %s missing", a, b);
    fseek(fa, 0, SEEK_END), fseek(fb, 0, SEEK_END);
    long na = ftell(fa), nb = ftell(fb);
    fclose(fa), fclose(fb);
    cr_assert(na > 1000 && na == nb && memcmp(x, y, (size_t)na) == 0,
              "%s (%ld bytes) and %s (%ld bytes) differ: the parameters did not survive", a, na,
              b, nb);
    free(x), free(y);
}

/* Trains 2 steps under `from`, saves; loads under `to` (+ --lr 0: AdamW leaves the
 * parameters as they are), saves again, and that back under `from`: the files are byte for
 * byte equal. The loss of
 * one step on the loaded weights is the same under both layouts (fp32: 1e-5 relative; the
 * reductions run in another order; both layouts take the same 4 sequences a step: dp x
 * micro-batches) and differs from the untrained model's. */
static void round_trip(const char *model, const char *from, const char *to)
{
    char args[1024];
    const char *a = path_in("a.safetensors"), *b = path_in("b.safetensors");
    snprintf(args, sizeof args, "%s %s --steps 2 --lr 0.01 --save-weights %s", model, from, a);
    run_loss(args);
    snprintf(args, sizeof args, "%s %s --steps 1 --lr 0 --load-weights %s --save-weights %s",
             model, to, a, b);
    double l_to = run_loss(args);
    same_file(a, b);
    /* and back: b loaded under `from` saves as a again (a consistent mistake of one layout's
     * save or load would survive one way) */
    const char *c = path_in("c.safetensors");
    snprintf(args, sizeof args, "%s %s --steps 1 --lr 0 --load-weights %s --save-weights %s",
             model, from, b, c);
    double l_from = run_loss(args);
    same_file(a, c);
    cr_assert(fabs(l_to - l_from) <= 1e-5 * fabs(l_from),
              "%s: loss on the loaded weights %.9g under %s, %.9g under %s", model, l_to, to,
              l_from, from);
    snprintf(args, sizeof args, "%s %s --steps 1 --lr 0", model, from);
    double fresh = run_loss(args);
    cr_assert(fabs(fresh - l_from) > 1e-4, "%s: the loaded weights gave the untrained loss %.9g",
              model, fresh);
}

Test(runtime_hfweights, gpt_saved_on_pipeline_ranks_loads_on_tensor_and_dp_ranks)
{
    round_trip("--model tiny", "--ranks 2 --microbatches 4",
               "--ranks 1 --schedule gpipe --tp 2 --dp 2 --microbatches 2");
}

/* A vocabulary that t does not divide (61 over 4 tensor ranks: 16 + 16 + 16 + 13 rows of the
 * embedding and of the untied head, the rest padding): the pieces put together are the whole
 * tensors, the padding no part of the file, and loaded back they train as before. */
Test(runtime_hfweights, uneven_vocabulary_split_over_tensor_ranks_round_trips)
{
    const char *cfg = path_in("vocab61.json");
    FILE *f = fopen(cfg, "w");
    cr_assert(f);
    fputs("{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
          "\"hidden_size\": 32, \"intermediate_size\": 48, \"num_attention_heads\": 4, "
          "\"num_key_value_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 61, "
          "\"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, "
          "\"hidden_act\": \"silu\", \"tie_word_embeddings\": false}\n",
          f);
    fclose(f);
    char model[512];
    snprintf(model, sizeof model, "--model-config %s --seq 16", cfg);
    round_trip(model, "--ranks 2 --microbatches 4",
               "--ranks 1 --schedule gpipe --tp 4 --microbatches 4");
}

Test(runtime_hfweights, llama_saved_on_tensor_ranks_loads_on_pipeline_ranks)
{
    round_trip("--model tiny-llama", "--ranks 1 --schedule gpipe --tp 2 --microbatches 4",
               "--ranks 2 --schedule interleaved --chunks 2 --dp 2 --microbatches 2");
}

/* Mixture-of-experts models (tests/fixtures/hf: Mixtral's names, Qwen3-MoE's) under expert
 * parallelism: each expert rank reads only its experts from the file and the writer gathers
 * them, so weights trained under ep 1 load under ep 2 and 4 and save byte for byte the same,
 * and those trained under ep 2 load under ep 1 (round_trip both ways); loaded under ep 2 they
 * train as under ep 1: every step's loss of 3 within 1e-6 relative and the first step's
 * gradient norm too (the expert GEMMs take other row counts: fp32 rounding, which AdamW's
 * division by sqrt(v) amplifies in the later gradient norms: the trained Qwen3-MoE's third
 * differed by 3.8e-5 relative here, ep 1 on other layouts by 7.7e-6, its losses by 1.1e-7). */
Test(runtime_hfweights, moe_weights_round_trip_under_expert_parallelism)
{
    static const char *const models[] = {"tiny-mixtral.json", "tiny-qwen3-moe.json"};
    static const char *const ep1 = "--ranks 2 --dp 2 --microbatches 2",
                             *const ep2 = "--ranks 2 --dp 2 --ep 2 --microbatches 2",
                             *const ep4 = "--ranks 1 --dp 4 --ep 4 --microbatches 1";
    for (int i = 0; i < 2; i++) {
        char model[512], args[1024];
        snprintf(model, sizeof model, "--model-config %s/hf/%s --seq 16", PP_FIXTURES_DIR,
                 models[i]);
        round_trip(model, ep1, ep2);
        round_trip(model, ep2, ep1);
        round_trip(model, ep1, ep4);
        json_t *run[2];
        for (int e = 0; e < 2; e++) {
            snprintf(args, sizeof args, "%s %s --steps 3 --lr 0.01 --load-weights %s",
                     model, e ? ep2 : ep1, path_in("a.safetensors"));
            run[e] = pp_test_pprun_json(args);
        }
        for (size_t k = 0; k < 3; k++)
            for (int q = 0; q < (k ? 1 : 2); q++) {
                const char *key = q ? "grad_norm" : "loss";
                double x = json_real_value(json_object_get(
                           json_array_get(json_object_get(run[0], "per_step"), k), key)),
                       y = json_real_value(json_object_get(
                           json_array_get(json_object_get(run[1], "per_step"), k), key));
                cr_assert(fabs(x - y) <= 1e-6 * fabs(x), "%s step %zu: %s %.9g at ep 1, %.9g at "
                          "ep 2", models[i], k + 1, key, x, y);
            }
        json_decref(run[0]);
        json_decref(run[1]);
    }
}

/* ---- rewriting a checkpoint ---- */

typedef struct {
    pp_st_out *out;
    float **data;
    int64_t (*shape)[PP_ST_MAX_DIMS];
    int n;
} tensors;

/* Every tensor of the file at path as fp32. */
static tensors read_all(const char *path)
{
    pp_st *st;
    cr_assert_eq(pp_st_open(path, &st), PP_OK, "%s", pp_err_msg());
    size_t n = pp_st_count(st);
    tensors t = {calloc(n + 1, sizeof(pp_st_out)), calloc(n + 1, sizeof(float *)),
                 calloc(n + 1, sizeof *t.shape), (int)n};
    for (size_t i = 0; i < n; i++) {
        const pp_st_tensor *x = pp_st_at(st, i);
        t.data[i] = malloc((x->numel + 1) * sizeof(float));
        cr_assert_eq(pp_st_load_f32(st, x, t.data[i]), PP_OK, "%s", pp_err_msg());
        memcpy(t.shape[i], x->shape, sizeof x->shape);
        t.out[i] = (pp_st_out){strdup(x->name), PP_ST_F32, x->ndim, t.shape[i], t.data[i]};
    }
    pp_st_destroy(st);
    return t;
}

static void free_all(tensors *t)
{
    for (int i = 0; i < t->n + 1; i++) {
        free(t->data[i]);
        if (i < t->n)
            free((char *)t->out[i].name);
    }
    free(t->out), free(t->data), free(t->shape);
}

static int find(const tensors *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->out[i].name, name))
            return i;
    cr_assert_fail("no tensor %s", name);
    return -1;
}

static const pp_st_meta META = {"format", "pt"};

/* tiny-llama after one step, saved at a, and its tensors. */
static tensors tiny_llama_file(const char *a)
{
    char args[1024];
    snprintf(args, sizeof args, "--model tiny-llama --ranks 2 --steps 1 --save-weights %s", a);
    run_loss(args);
    return read_all(a);
}

/* pprun's file written again as shards with an index (huggingface_hub's split, by a small
 * shard size), and in BF16: both load; the BF16 one gives the BF16-rounded parameters. */
Test(runtime_hfweights, sharded_and_bf16_checkpoints_load)
{
    const char *a = path_in("a.safetensors");
    char args[1024];
    tensors t = tiny_llama_file(a);
    const char *dir = path_in("sharded");
    cr_assert_eq(mkdir(dir, 0755), 0);
    int shards = 0;
    cr_assert_eq(pp_st_write_sharded(dir, t.out, t.n, &META, 1, 20000, &shards), PP_OK, "%s",
                 pp_err_msg());
    cr_assert_geq(shards, 3, "only %d shards", shards);
    const char *b = path_in("b.safetensors");
    snprintf(args, sizeof args,
             "--model tiny-llama --ranks 2 --tp 2 --steps 1 --lr 0 --load-weights %s "
             "--save-weights %s",
             dir, b);
    run_loss(args);
    same_file(a, b);

    for (int i = 0; i < t.n; i++)
        t.out[i].dtype = PP_ST_BF16;
    const char *h = path_in("bf16.safetensors"), *c = path_in("c.safetensors");
    cr_assert_eq(pp_st_write(h, t.out, t.n, &META, 1), PP_OK, "%s", pp_err_msg());
    snprintf(args, sizeof args,
             "--model tiny-llama --ranks 2 --steps 1 --lr 0 --load-weights %s --save-weights %s",
             h, c);
    run_loss(args);
    tensors back = read_all(c);
    cr_assert_eq(back.n, t.n);
    for (int i = 0; i < t.n; i++) {
        int j = find(&back, t.out[i].name);
        size_t n = 1;
        for (int d = 0; d < t.out[i].ndim; d++)
            n *= (size_t)t.shape[i][d];
        for (size_t e = 0; e < n; e++) {
            float want = pp_st_bf16_to_f32(pp_st_f32_to_bf16(t.data[i][e]));
            cr_assert(back.data[j][e] == want, "%s[%zu]: %.9g, the BF16 value %.9g",
                      t.out[i].name, e, back.data[j][e], want);
        }
    }
    free_all(&back);
    free_all(&t);
}

/* Loads path into the model (pprun's model flags; "": tiny-llama); exit 2 with a message
 * naming the file and saying `says`. */
static void refused(const char *path, const char *model, const char *says)
{
    pp_test_run_result r = pp_test_run(PPRUN " %s --ranks 2 --steps 1 --quiet --load-weights %s",
                                       *model ? model : "--model tiny-llama", path);
    cr_assert_eq(r.code, 2, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.err, says) && strstr(r.err, path), "expected \"%s\" naming %s: %s", says,
              path, r.err);
    pp_test_run_done(&r);
}

Test(runtime_hfweights, missing_unexpected_and_misshapen_tensors_are_refused_naming_them)
{
    const char *a = path_in("a.safetensors");
    char args[1024];
    tensors t = tiny_llama_file(a);
    int up = find(&t, "model.layers.1.mlp.up_proj.weight");

    /* missing: written without it */
    pp_st_out keep = t.out[up];
    t.out[up] = t.out[t.n - 1];
    const char *miss = path_in("missing.safetensors");
    cr_assert_eq(pp_st_write(miss, t.out, t.n - 1, &META, 1), PP_OK, "%s", pp_err_msg());
    refused(miss, "", "no tensor model.layers.1.mlp.up_proj.weight");
    t.out[up] = keep;

    /* misshapen: k_proj (16, 32) stored as (32, 16) */
    int k = find(&t, "model.layers.0.self_attn.k_proj.weight");
    t.shape[k][0] = 32, t.shape[k][1] = 16;
    const char *shape = path_in("shape.safetensors");
    cr_assert_eq(pp_st_write(shape, t.out, t.n, &META, 1), PP_OK, "%s", pp_err_msg());
    refused(shape, "", "tensor model.layers.0.self_attn.k_proj.weight: shape [32, 16] expected [16, 32]");
    t.shape[k][0] = 16, t.shape[k][1] = 32;

    /* unexpected: one more tensor (a bias tiny-llama does not have) */
    pp_st_out *more = calloc((size_t)t.n + 1, sizeof *more);
    memcpy(more, t.out, (size_t)t.n * sizeof *more);
    int64_t C = 32;
    more[t.n] = (pp_st_out){"model.layers.0.self_attn.o_proj.bias", PP_ST_F32, 1, &C, t.data[0]};
    const char *extra = path_in("extra.safetensors");
    cr_assert_eq(pp_st_write(extra, more, t.n + 1, &META, 1), PP_OK, "%s", pp_err_msg());
    refused(extra, "", "tensor model.layers.0.self_attn.o_proj.bias: not a tensor of this model");
    free(more);

    /* a checkpoint with more layers than the model: refused as unexpected (a config.json of
     * 2 layers), loaded with --layers 2 (the first 2 blocks) */
    const char *cfg = path_in("config.json");
    FILE *fp = fopen(cfg, "w");
    cr_assert(fp);
    fputs("{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 96, "
          "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_hidden_layers\": 2, "
          "\"vocab_size\": 256, \"max_position_embeddings\": 64, \"rope_theta\": 500000.0, "
          "\"tie_word_embeddings\": false, \"rope_scaling\": {\"factor\": 8.0, "
          "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
          "\"original_max_position_embeddings\": 16, \"rope_type\": \"llama3\"}}",
          fp);
    fclose(fp);
    snprintf(args, sizeof args, "--model-config %s", cfg);
    refused(a, args, "tensor model.layers.2.input_layernorm.weight: not a tensor of this model");
    snprintf(args, sizeof args, "--model tiny-llama --layers 2 --steps 1 --load-weights %s", a);
    run_loss(args);
    free_all(&t);
}
