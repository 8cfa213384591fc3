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
