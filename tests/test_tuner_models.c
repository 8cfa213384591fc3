/* test_tuner_models.c — the tuner's model descriptions: preset sizes against published
 * parameter counts, the HuggingFace and pptune JSON readers, and the errors for bad files
 * (file, field, expectation). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_tune.h"

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/pptune_model_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    fputs(text, fp);
    fclose(fp);
    return path;
}

Test(tuner_models, gpt13b_preset_matches_the_reference_and_its_parameter_count)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-13b", &m), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(m.layers, 40);
    cr_assert_eq(m.hidden, 5120);
    cr_assert_eq(m.heads, 40);
    cr_assert_eq(m.seq, 2048);
    cr_assert_eq(m.vocab, 50257);
    cr_assert_eq(m.ffn, 20480);
    pp_tune_params pc;
    pp_tune_model_params(&m, &pc);
    /* GPT block: 12h^2 + 13h (QKV, projection, two MLP matrices, their biases, two LayerNorms);
     * embedding V h + s h; final LayerNorm 2h; head tied. */
    double h = 5120;
    double expect = 40 * (12 * h * h + 13 * h) + 50257 * h + 2048 * h + 2 * h;
    cr_assert_float_eq(pc.total, expect, 1.0, "%f vs %f", pc.total, expect);
    cr_assert(pc.total > 12.8e9 && pc.total < 12.9e9, "GPT-3 13B has ~12.85 B, got %g", pc.total);
}

Test(tuner_models, llama3_presets_have_their_published_sizes)
{
    const struct {
        const char *name;
        double billions;
    } want[] = {{"llama3-8b", 8.03}, {"llama3-70b", 70.55}, {"llama3-405b", 405.85}};
    for (size_t i = 0; i < 3; i++) {
        pp_tune_model m;
        cr_assert_eq(pp_tune_model_preset(want[i].name, &m), PP_OK);
        cr_assert_eq(m.kv_heads, 8);
        cr_assert_eq(m.vocab, 128256);
        cr_assert(m.gated_mlp && !m.tied_embed);
        pp_tune_params pc;
        pp_tune_model_params(&m, &pc);
        cr_assert(fabs(pc.total / 1e9 - want[i].billions) < 0.01, "%s: %.3f B", want[i].name,
                  pc.total / 1e9);
    }
}

Test(tuner_models, unknown_preset_lists_the_names)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-14b", &m), PP_ERR_NOTFOUND);
    cr_assert(strstr(pp_err_text(), "\"gpt-14b\""), "%s", pp_err_text());
    cr_assert(strstr(pp_err_text(), "llama3-405b"), "%s", pp_err_text());
}

Test(tuner_models, huggingface_llama_config_is_read)
{
    char *p = write_tmp("{\"model_type\": \"llama\", \"num_hidden_layers\": 32, "
                        "\"hidden_size\": 4096, \"num_attention_heads\": 32, "
                        "\"num_key_value_heads\": 8, \"intermediate_size\": 14336, "
                        "\"vocab_size\": 128256, \"max_position_embeddings\": 8192, "
                        "\"hidden_act\": \"silu\", \"tie_word_embeddings\": false}");
    pp_tune_model m, ref;
    cr_assert_eq(pp_tune_model_load_hf(p, &m), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_tune_model_preset("llama3-8b", &ref), PP_OK);
    pp_tune_params a, b;
    pp_tune_model_params(&m, &a);
    pp_tune_model_params(&ref, &b);
    cr_assert_float_eq(a.total, b.total, 1.0, "HF llama3-8b %g vs preset %g", a.total, b.total);
    unlink(p);
    free(p);
}

static void expect_parse_error(const char *text, int hf, const char *needle)
{
    char *p = write_tmp(text);
    pp_tune_model m;
    pp_status st = hf ? pp_tune_model_load_hf(p, &m) : pp_tune_model_load_json(p, &m);
    cr_assert_eq(st, PP_ERR_PARSE, "%s: status %d", text, st);
    cr_assert(strstr(pp_err_text(), p), "message names the file: %s", pp_err_text());
    cr_assert(strstr(pp_err_text(), needle), "expected \"%s\" in: %s", needle, pp_err_text());
    unlink(p);
    free(p);
}

Test(tuner_models, bad_files_name_file_field_and_expectation)
{
    expect_parse_error("{\"hidden_size\": 64}", 1,
                       "field \"num_hidden_layers\": missing, expected a positive integer");
    expect_parse_error("{\"num_hidden_layers\": \"forty\", \"hidden_size\": 64}", 1,
                       "field \"num_hidden_layers\": expected a positive integer, got \"forty\"");
    expect_parse_error("{\"num_hidden_layers\": 4, \"hidden_size\": 64, "
                       "\"num_attention_heads\": 5, \"intermediate_size\": 256, "
                       "\"vocab_size\": 100, \"max_position_embeddings\": 16}",
                       1, "field \"heads\": expected a divisor of hidden (64), got 5");
    expect_parse_error("{\"layers\": 4", 0, "not valid JSON");
    expect_parse_error("{\"format\": \"pptune-model\", \"version\": 1, \"layers\": -3, "
                       "\"hidden\": 64, \"heads\": 4, \"vocab\": 100, \"seq\": 16}",
                       0, "field \"layers\": expected a positive integer, got -3");
    expect_parse_error("{\"format\": \"something\"}", 0,
                       "field \"format\": expected \"pptune-model\"");
    expect_parse_error("{\"format\": \"pptune-model\", \"version\": 1, \"layers\": 4, "
                       "\"hidden\": 64, \"heads\": 4, \"vocab\": 100, \"seq\": 16, "
                       "\"gated_mlp\": 1}",
                       0, "field \"gated_mlp\": expected true or false");
}

Test(tuner_models, pptune_model_json_with_defaults)
{
    char *p = write_tmp("{\"format\": \"pptune-model\", \"version\": 1, \"name\": \"mini\", "
                        "\"layers\": 4, \"hidden\": 64, \"heads\": 4, \"vocab\": 100, "
                        "\"seq\": 16}");
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_load_json(p, &m), PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(m.name, "mini");
    cr_assert_eq(m.ffn, 256);
    cr_assert_eq(m.kv_heads, 4);
    cr_assert(m.tied_embed && !m.gated_mlp);
    unlink(p);
    free(p);
}

Test(tuner_models, missing_file_is_not_found_naming_it)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_load_hf("/nonexistent/config.json", &m), PP_ERR_NOTFOUND);
    cr_assert(strstr(pp_err_text(), "/nonexistent/config.json"), "%s", pp_err_text());
}

/* issue 18, finding 12: "my model" got a sanitized file name but the raw name in the profile,
 * which export, diff, publish and pprun then refused */
Test(tuner_models, a_model_name_the_profile_reader_would_refuse_is_refused_where_it_enters)
{
    const char *names[] = {"my model", "../evil", "mod\\u00e8le", "a/b", ".."};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "{\"format\": \"pptune-model\", \"version\": 1, \"name\": \"%s\", "
                 "\"layers\": 4, \"hidden\": 64, \"heads\": 4, \"vocab\": 100, \"seq\": 16}",
                 names[i]);
        expect_parse_error(text, 0, "field \"name\": expected letters, digits and . _ - only");
    }
}

Test(tuner_models, a_name_taken_from_the_file_name_is_one_the_profile_reader_accepts)
{
    char dir[] = "/tmp/pptune_models_XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/my model.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("{\"num_hidden_layers\": 4, \"hidden_size\": 64, \"num_attention_heads\": 4, "
          "\"intermediate_size\": 256, \"vocab_size\": 100, \"max_position_embeddings\": 16}",
          f);
    fclose(f);
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_load_hf(path, &m), PP_OK, "%s", pp_err_msg());
    cr_expect_str_eq(m.name, "my_model");
    unlink(path);
    rmdir(dir);
}

/* issue 18, finding 12: nodes of 8 and 1 devices were planned as 2 x 8 */
Test(tuner_models, a_cluster_of_unlike_nodes_is_refused)
{
    pp_cluster *c = NULL;
    cr_assert_eq(pp_cluster_load_preset("dgx-h100", 2, &c), PP_OK, "%s", pp_err_msg());
    int keep = c->nodes[1].n_devices;
    c->nodes[1].n_devices = 1;
    pp_tune_hw hw;
    cr_expect_eq(pp_tune_hw_from_cluster(c, "c.json", &hw), PP_ERR_INVALID);
    cr_expect(strstr(pp_err_text(), "node 0 has 8 devices, node 1 has 1"), "%s", pp_err_text());
    c->nodes[1].n_devices = keep;
    pp_cluster_destroy(c);
}

/* ---- published HuggingFace configs (tests/fixtures/hf/, as their repositories publish them) */

#define HF PP_FIXTURES_DIR "/hf/"

Test(tuner_models, published_hf_configs_give_the_published_parameter_counts)
{
    static const struct {
        const char *file;
        double params; /* published total (the safetensors parameter count of its repository) */
        double tol;
        const char *block;
    } cases[] = {
        {"llama-3.1-8b.json", 8030261248, 0.5,
         "gated MLP, RMSNorm, rotary, untied head, llama3 rope scaling"},
        {"llama-3.1-70b.json", 70553706496, 0.5, NULL},
        {"llama-3.1-405b.json", 405853388800, 0.5, NULL},
        {"mistral-7b-v0.1.json", 7241732096, 0.5, "gated MLP, RMSNorm, rotary, untied head"},
        {"qwen2.5-7b.json", 7615616512, 0.5,
         "gated MLP, RMSNorm, rotary, untied head, QKV biases"},
        {"gpt2.json", 124439808, 0.5, "GeLU MLP, LayerNorm, learned positions, tied head"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_tune_model m;
        char path[512];
        snprintf(path, sizeof path, HF "%s", cases[i].file);
        cr_assert_eq(pp_tune_model_load_hf(path, &m), PP_OK, "%s: %s", path, pp_err_msg());
        pp_tune_params pc;
        pp_tune_model_params(&m, &pc);
        cr_expect(fabs(pc.total - cases[i].params) <= cases[i].tol, "%s: %.0f parameters, published %.0f",
                  cases[i].file, pc.total, cases[i].params);
        char block[160];
        if (cases[i].block)
            cr_expect_str_eq(pp_tune_model_block(&m, block, sizeof block), cases[i].block, "%s",
                             cases[i].file);
    }
}

Test(tuner_models, hf_sequence_is_a_stated_default_not_the_position_limit)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_load_hf(HF "llama-3.1-8b.json", &m), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(m.seq, PP_TUNE_HF_DEFAULT_SEQ); /* not 131072 */
    cr_assert(strstr(m.seq_note, "max_position_embeddings 131072"), "%s", m.seq_note);
    cr_assert(strstr(m.seq_note, "--seq"), "%s", m.seq_note);
    cr_assert_float_eq(m.rope_theta, 500000.0, 0.5);
    cr_assert_str_eq(m.rope_scaling, "llama3");
    cr_assert_not(m.tied_embed);
    /* GPT-2's 1024 positions are less than the default: capped, and said */
    cr_assert_eq(pp_tune_model_load_hf(HF "gpt2.json", &m), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(m.seq, 1024);
    cr_assert(strstr(m.seq_note, "capped"), "%s", m.seq_note);
    cr_assert_eq(m.layers, 12);
    cr_assert_eq(m.ffn, 4 * 768); /* n_inner absent: 4 h */
    cr_assert(m.linear_bias && m.learned_pos && m.tied_embed && m.norm_bias);
}

/* The norms' epsilon, which the exporters carry (Qwen2.5's 1e-6 would otherwise become their
 * default 1e-5): each config's own, under the names of each family, and refused when not a
 * positive number. */
Test(tuner_models, hf_norm_epsilon_is_the_configs_own)
{
    static const struct {
        const char *file;
        double eps;
    } cases[] = {{"qwen2.5-7b.json", 1e-6}, {"llama-3.1-8b.json", 1e-5}, {"gpt2.json", 1e-5}};
    pp_tune_model m;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, HF "%s", cases[i].file);
        cr_assert_eq(pp_tune_model_load_hf(path, &m), PP_OK, "%s: %s", path, pp_err_msg());
        cr_expect(m.norm_eps == cases[i].eps, "%s: norm_eps %g, want %g", cases[i].file,
                  m.norm_eps, cases[i].eps);
    }
    char *p = write_tmp("{\"model_type\": \"llama\", \"num_hidden_layers\": 4, "
                        "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                        "\"intermediate_size\": 256, \"vocab_size\": 100, "
                        "\"rms_norm_eps\": -1}");
    cr_assert_eq(pp_tune_model_load_hf(p, &m), PP_ERR_PARSE);
    cr_assert(strstr(pp_err_text(), "\"rms_norm_eps\""), "%s", pp_err_text());
    unlink(p);
    free(p);
    cr_assert_eq(pp_tune_model_preset("llama3-70b", &m), PP_OK);
    cr_assert(m.norm_eps == 1e-5, "Llama 3's released rms_norm_eps");
}

/* Mixtral and Qwen3-MoE read with their experts: the parameter counts equal the published
 * safetensors totals exactly (Mixtral-8x7B-v0.1 46,702,792,704; Qwen3-30B-A3B 30,532,122,624,
 * with Qwen3's per-head q/k norms and head_dim 128 != 2048 / 32), and the active counts the
 * releases state as 12.9 B and 3.3 B. */
Test(tuner_models, mixture_of_experts_configs_count_every_parameter)
{
    static const struct {
        const char *file;
        int experts, top_k, ffn, moe_layers;
        double total, active;
    } cases[] = {
        {"mixtral-8x7b-v0.1.json", 8, 2, 14336, 32, 46702792704.0, 12879925248.0},
        {"qwen3-30b-a3b.json", 128, 8, 768, 48, 30532122624.0, 3353032704.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, HF "%s", cases[i].file);
        pp_tune_model m;
        cr_assert_eq(pp_tune_model_load_hf(path, &m), PP_OK, "%s: %s", path, pp_err_msg());
        const pp_moe_cfg *e = &m.block.moe;
        cr_expect_eq(e->experts, cases[i].experts, "%s", path);
        cr_expect_eq(e->top_k, cases[i].top_k, "%s", path);
        cr_expect_eq(e->ffn, cases[i].ffn, "%s", path);
        cr_expect_eq(e->norm_topk, 1, "%s: both renormalise the top-k weights", path);
        pp_tune_params pc;
        pp_tune_model_params(&m, &pc);
        cr_expect_eq(pc.moe_layers, cases[i].moe_layers, "%s", path);
        cr_expect(pc.total == cases[i].total, "%s: %.0f parameters, published %.0f", path,
                  pc.total, cases[i].total);
        cr_expect(pc.active == cases[i].active, "%s: %.0f active, want %.0f", path, pc.active,
                  cases[i].active);
    }
}

/* The load-balancing loss as transformers trains a file: MixtralForCausalLM and
 * Qwen3MoeForCausalLM add router_aux_loss_coef x the aux loss only where output_router_logits
 * is true; the published files say false (and both configs default to it). */
Test(tuner_models, moe_aux_loss_is_trained_only_with_output_router_logits)
{
    static const struct {
        const char *file;
        double coef;
    } cases[] = {
        {"mixtral-8x7b-v0.1.json", 0}, /* false, router_aux_loss_coef 0.02 unused */
        {"qwen3-30b-a3b.json", 0},     /* false, 0.001 unused */
        {"tiny-mixtral.json", 0.02},   /* true */
        {"tiny-qwen3-moe.json", 0.02}, /* true */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, HF "%s", cases[i].file);
        pp_tune_model m;
        cr_assert_eq(pp_tune_model_load_hf(path, &m), PP_OK, "%s: %s", path, pp_err_msg());
        cr_expect(m.block.moe.aux_coef == cases[i].coef, "%s: aux coefficient %g, want %g",
                  path, m.block.moe.aux_coef, cases[i].coef);
    }
    /* absent: transformers' default false */
    char *p = write_tmp("{\"model_type\": \"mixtral\", \"num_hidden_layers\": 2, "
                        "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                        "\"intermediate_size\": 128, \"vocab_size\": 100, "
                        "\"num_local_experts\": 4, \"num_experts_per_tok\": 2, "
                        "\"router_aux_loss_coef\": 0.5}");
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_load_hf(p, &m), PP_OK, "%s", pp_err_msg());
    cr_expect(m.block.moe.aux_coef == 0, "%g", m.block.moe.aux_coef);
    unlink(p);
    free(p);
}

/* The layer rule: Qwen's decoder_sparse_step k makes layers k-1, 2k-1, ... sparse
 * (modeling_qwen3_moe.py: (layer_idx + 1) % decoder_sparse_step == 0); a non-empty
 * mlp_only_layers, which the rule cannot say, is refused naming the field. */
Test(tuner_models, qwen_moe_layer_rule_follows_decoder_sparse_step)
{
    pp_tune_model m;
    char *p = write_tmp("{\"model_type\": \"qwen3_moe\", \"num_hidden_layers\": 6, "
                        "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                        "\"intermediate_size\": 256, \"moe_intermediate_size\": 32, "
                        "\"vocab_size\": 100, \"num_experts\": 4, \"num_experts_per_tok\": 2, "
                        "\"decoder_sparse_step\": 2}");
    cr_assert_eq(pp_tune_model_load_hf(p, &m), PP_OK, "%s", pp_err_msg());
    pp_model_cfg c;
    pp_tune_model_cfg(&m, &c);
    int want[] = {0, 1, 0, 1, 0, 1};
    for (int l = 0; l < 6; l++)
        cr_expect_eq(pp_model_layer_moe(&c, l), want[l], "layer %d", l);
    pp_tune_params pc;
    pp_tune_model_params(&m, &pc);
    cr_expect_eq(pc.moe_layers, 3);
    cr_expect_eq(m.block.moe.norm_topk, 0, "Qwen3MoeConfig's norm_topk_prob default: false");
    unlink(p);
    free(p);
    p = write_tmp("{\"model_type\": \"qwen3_moe\", \"num_hidden_layers\": 6, "
                  "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                  "\"intermediate_size\": 256, \"moe_intermediate_size\": 32, "
                  "\"vocab_size\": 100, \"num_experts\": 4, \"num_experts_per_tok\": 2, "
                  "\"mlp_only_layers\": [0, 5]}");
    cr_assert_eq(pp_tune_model_load_hf(p, &m), PP_ERR_PARSE);
    cr_assert(strstr(pp_err_text(), "\"mlp_only_layers\""), "%s", pp_err_text());
    unlink(p);
    free(p);
}

/* What pptune's model does not describe is refused naming the field: DeepSeek-V3's latent
 * attention (kv_lora_rank), and a MoE type it does not read (here one with n_routed_experts). */
Test(tuner_models, mixture_of_experts_it_cannot_describe_are_refused_naming_the_field)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_load_hf(HF "deepseek-v3.json", &m), PP_ERR_PARSE);
    cr_assert(strstr(pp_err_text(), "field \"n_routed_experts\": 256") &&
                  strstr(pp_err_text(), "\"kv_lora_rank\""),
              "%s", pp_err_text());
    char *p = write_tmp("{\"model_type\": \"olmoe\", \"num_hidden_layers\": 4, "
                        "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                        "\"intermediate_size\": 256, \"vocab_size\": 100, "
                        "\"num_experts\": 64}");
    cr_assert_eq(pp_tune_model_load_hf(p, &m), PP_ERR_PARSE);
    cr_assert(strstr(pp_err_text(), "field \"num_experts\": 64") &&
                  strstr(pp_err_text(), "\"olmoe\""),
              "%s", pp_err_text());
    unlink(p);
    free(p);
    p = write_tmp("{\"model_type\": \"mixtral\", \"num_hidden_layers\": 4, "
                  "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                  "\"intermediate_size\": 256, \"vocab_size\": 100, "
                  "\"num_local_experts\": 4, \"num_experts_per_tok\": 5}");
    cr_assert_eq(pp_tune_model_load_hf(p, &m), PP_ERR_PARSE);
    cr_assert(strstr(pp_err_text(), "\"num_experts_per_tok\""), "%s", pp_err_text());
    unlink(p);
    free(p);
}

Test(tuner_models, hf_head_dim_and_biases_are_read)
{
    /* head_dim wider than hidden / heads (Gemma-style): attention widths follow it */
    char *p = write_tmp("{\"model_type\": \"llama\", \"num_hidden_layers\": 2, "
                        "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                        "\"num_key_value_heads\": 2, \"head_dim\": 32, "
                        "\"intermediate_size\": 128, \"vocab_size\": 100, "
                        "\"attention_bias\": true, \"mlp_bias\": true, "
                        "\"tie_word_embeddings\": true}");
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_load_hf(p, &m), PP_OK, "%s", pp_err_msg());
    pp_tune_params pc;
    pp_tune_model_params(&m, &pc);
    /* q 64x128 + k,v 64x64 each + o 128x64, biases 128 + 2x64 + 64; MLP 3 x 64x128, biases
     * 2x128 + 64; two RMSNorms of 64 */
    double attn = 64 * 128 + 2 * 64 * 64 + 128 * 64 + 128 + 2 * 64 + 64;
    double mlp = 3 * 64 * 128 + 2 * 128 + 64;
    cr_assert_float_eq(pc.per_layer, attn + mlp + 2 * 64, 0.5, "%g", pc.per_layer);
    cr_assert(m.linear_bias && m.tied_embed);
    unlink(p);
    free(p);
    p = write_tmp("{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
                  "\"num_attention_heads\": 4, \"intermediate_size\": 128, \"vocab_size\": 100, "
                  "\"attention_bias\": true, \"mlp_bias\": false}");
    cr_assert_eq(pp_tune_model_load_hf(p, &m), PP_ERR_PARSE);
    cr_assert(strstr(pp_err_text(), "field \"mlp_bias\": expected the same as attention_bias"),
              "%s", pp_err_text());
    unlink(p);
    free(p);
}
