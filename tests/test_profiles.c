/* test_profiles.c — the profile reader (validation messages, version rules, unknown fields kept),
 * SHA-256 against FIPS 180-4 vectors, store keys, diff and the exporters. */
#include <jansson.h>

#include "profiles_test.h"

static json_t *load_fixture(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, FIX "%s", name);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    cr_assert_not_null(j, "%s: %s", path, e.text);
    return j;
}

/* Parses a JSON value as a profile named "variant.json". */
static pp_status parse_json(json_t *j, pp_profile **out)
{
    char *text = json_dumps(j, JSON_INDENT(2));
    pp_status st = pp_profile_parse(text, strlen(text), "variant.json", out);
    free(text);
    return st;
}

static json_t *at(json_t *root, const char *a, const char *b)
{
    json_t *x = json_object_get(root, a);
    return b ? json_object_get(x, b) : x;
}

Test(profiles_sha256, fips_180_4_vectors)
{
    char hex[65];
    pp_sha256_hex("abc", 3, hex);
    cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    pp_sha256_hex("", 0, hex);
    cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 448 bits */
    pp_sha256_hex(two, strlen(two), hex);
    cr_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* one million 'a': many blocks */
    char *m = malloc(1000000);
    memset(m, 'a', 1000000);
    pp_sha256_hex(m, 1000000, hex);
    free(m);
    cr_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* 55, 56 and 64 bytes: the padding boundaries (length spills into a second block) */
    char buf[64];
    memset(buf, 'x', sizeof buf);
    pp_sha256_hex(buf, 55, hex);
    cr_assert_str_eq(hex, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
    pp_sha256_hex(buf, 56, hex);
    cr_assert_str_eq(hex, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
    pp_sha256_hex(buf, 64, hex);
    cr_assert_str_eq(hex, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
}

Test(profiles_read, split_text_is_one_form_for_board_and_diff)
{
    char b[32];
#define SPLIT(A, Z, U, n)                                                                          \
    pp_config_split_str(&(pp_config){.first_layers = A, .last_layers = Z, .uneven = U}, b, n)
    cr_assert_str_eq(SPLIT(5, 3, 0, sizeof b), "5/3");
    cr_assert_str_eq(SPLIT(5, 0, 0, sizeof b), "5/-");
    cr_assert_str_eq(SPLIT(0, 2, 1, sizeof b), "-/2");
    cr_assert_str_eq(SPLIT(0, 0, 1, sizeof b), "uneven");
    cr_assert_str_eq(SPLIT(0, 0, 0, sizeof b), "even");
    cr_assert_str_eq(SPLIT(123, 456, 0, 4), "123"); /* truncated, terminated */
#undef SPLIT
}

Test(profiles_read, the_tuners_profile_reads_with_its_figures)
{
    pp_profile *p;
    cr_assert_eq(pp_profile_read(FIX "gpt-13b-dgx-h100-x32.json", &p), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(p->version_major, 1);
    cr_assert_eq(p->version_minor, 0);
    cr_assert_str_eq(p->cluster.fingerprint, "fnv1a64:b79c73af88c5178f");
    cr_assert_eq(p->cluster.nodes, 32);
    cr_assert_str_eq(p->model.name, "gpt-13b");
    cr_assert_eq(p->model.layers, 40);
    cr_assert_eq(p->global_batch, 1024);
    cr_assert(p->has_chosen);
    cr_assert_str_eq(p->chosen.config.schedule, "interleaved");
    cr_assert_eq(p->chosen.config.p, 8);
    cr_assert_eq(p->chosen.config.v, 5);
    cr_assert_eq(p->chosen.config.G, 16);
    cr_assert_eq(p->chosen.config.t, 2);
    cr_assert_eq(p->chosen.config.b * p->chosen.config.N * p->chosen.config.d, 1024);
    cr_assert_eq(p->n_runners_up, 2);
    cr_assert_not(p->chosen.has_measured);
    pp_profile_destroy(p);
}

Test(profiles_read, measured_figures_give_measured_tokens_per_second)
{
    pp_profile *p;
    cr_assert_eq(pp_profile_read(FIX "tiny-local.json", &p), PP_OK, "%s", pp_err_msg());
    cr_assert(p->chosen.has_measured);
    cr_assert_str_eq(p->chosen.measured_status, "ok");
    double want = (double)p->global_batch * p->model.seq / p->chosen.measured_step_time_s;
    cr_assert_float_eq(pp_profile_measured_tokens_per_s(p, &p->chosen), want, 1e-9 * want);
    pp_profile_destroy(p);
}

/* Each broken field: the message names the file, the field's path and the expectation. */
static void expect_field_error(json_t *j, const char *want_in_message)
{
    pp_profile *p = NULL;
    pp_status st = parse_json(j, &p);
    cr_assert_eq(st, PP_ERR_PARSE, "status %d for \"%s\"", st, want_in_message);
    cr_assert_null(p);
    cr_assert(strstr(pp_err_text(), "variant.json") != NULL, "no file name in: %s", pp_err_text());
    cr_assert(strstr(pp_err_text(), want_in_message) != NULL, "expected \"%s\" in: %s",
              want_in_message, pp_err_text());
}

Test(profiles_read, errors_name_file_field_and_expectation)
{
    json_t *j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_object_set_new(at(j, "chosen", "config"), "p", json_string("eight"));
    expect_field_error(j, "field \"chosen.config.p\": expected an integer >= 1, got \"eight\"");
    json_decref(j);

    j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_object_del(at(j, "cluster", NULL), "fingerprint");
    expect_field_error(j, "field \"cluster.fingerprint\": expected a string, got nothing");
    json_decref(j);

    j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_object_set_new(at(j, "chosen", "config"), "schedule", json_string("zigzag"));
    expect_field_error(j, "field \"chosen.config.schedule\": expected one of gpipe");
    json_decref(j);

    j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_t *ru = json_array_get(json_object_get(j, "runners_up"), 1);
    json_object_set_new(json_object_get(ru, "predicted"), "fits", json_integer(1));
    expect_field_error(j, "field \"runners_up[1].predicted.fits\": expected true or false");
    json_decref(j);

    /* b * N * d must be the global batch */
    j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_object_set_new(at(j, "chosen", "config"), "N", json_integer(63));
    expect_field_error(j, "b * N * d = search.global_batch (1024)");
    json_decref(j);

    j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_object_set_new(j, "schema", json_string("something-else"));
    expect_field_error(j, "field \"schema\": expected \"pptune-profile\"");
    json_decref(j);

    /* a fingerprint that could escape the store directory */
    j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_object_set_new(at(j, "cluster", NULL), "fingerprint", json_string("../../etc"));
    expect_field_error(j, "field \"cluster.fingerprint\"");
    json_decref(j);
}

Test(profiles_read, not_json_says_line_and_column)
{
    pp_profile *p = NULL;
    const char *text = "{\n  \"schema\": \"pptune-profile\",\n  \"version\": 1,,\n}";
    cr_assert_eq(pp_profile_parse(text, strlen(text), "broken.json", &p), PP_ERR_PARSE);
    cr_assert(strstr(pp_err_text(), "broken.json:3:") != NULL, "%s", pp_err_text());
}

Test(profiles_read, newer_major_version_is_refused_clearly)
{
    json_t *j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_object_set_new(j, "version", json_integer(2));
    json_object_set_new(j, "version_minor", json_integer(1));
    /* a version 2 file may have dropped or renamed fields: the version is what is reported */
    json_object_del(j, "chosen");
    pp_profile *p = NULL;
    cr_assert_eq(parse_json(j, &p), PP_ERR_UNSUPPORTED);
    cr_assert_null(p);
    cr_assert(strstr(pp_err_text(), "profile version 2.1 is newer than this pptune reads (1.x)"),
              "%s", pp_err_text());
    json_decref(j);
}

Test(profiles_read, newer_minor_version_keeps_unknown_fields_on_write)
{
    json_t *j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_object_set_new(j, "version_minor", json_integer(7));
    json_object_set_new(j, "energy",
                        json_pack("{s:f, s:s}", "joules_per_step", 812.5, "source", "nvml"));
    json_object_set_new(at(j, "chosen", "config"), "ep", json_integer(2)); /* not a 1.3 key */
    pp_profile *p;
    cr_assert_eq(parse_json(j, &p), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(p->version_minor, 7);
    char dir[64], path[128];
    pt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/round.json", dir);
    cr_assert_eq(pp_profile_write(p, path), PP_OK, "%s", pp_err_msg());
    pp_profile_destroy(p);
    json_error_t e;
    json_t *back = json_load_file(path, 0, &e);
    cr_assert_not_null(back);
    cr_assert(json_equal(back, j), "the written document differs from the one read");
    cr_assert_eq(json_integer_value(json_object_get(back, "version_minor")), 7);
    cr_assert_float_eq(json_real_value(at(back, "energy", "joules_per_step")), 812.5, 1e-9);
    cr_assert_eq(json_integer_value(json_object_get(at(back, "chosen", "config"), "ep")), 2);
    json_decref(back);
    json_decref(j);
}

Test(profiles_read, nothing_fitted_reads_without_a_chosen_candidate)
{
    json_t *j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_object_set_new(j, "chosen", json_null());
    pp_profile *p;
    cr_assert_eq(parse_json(j, &p), PP_OK, "%s", pp_err_msg());
    cr_assert_not(p->has_chosen);
    cr_assert_eq(pp_profile_export(p, pp_profile_export_find("megatron", NULL), stdout), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "no chosen configuration"), "%s", pp_err_text());
    pp_profile_destroy(p);
    json_decref(j);
}

Test(profiles_store, old_fnv_and_new_sha256_fingerprints_both_key_the_store)
{
    /* a profile written before the fingerprint became SHA-256 reads, keyed as it was */
    pp_profile *old, *now;
    cr_assert_eq(pp_profile_read(FIX "gpt-13b-dgx-h100-x32.json", &old), PP_OK, "%s",
                 pp_err_msg());
    cr_assert_eq(pp_profile_read(FIX "gpt-13b-dgx-h100-x32-v1.1.json", &now), PP_OK, "%s",
                 pp_err_msg());
    char key[256];
    cr_assert_eq(pp_profile_store_key(old->cluster.fingerprint, "gpt-13b", key, sizeof key),
                 PP_OK);
    cr_assert_str_eq(key, "fnv1a64-b79c73af88c5178f/gpt-13b.json");
    cr_assert_eq(strncmp(now->cluster.fingerprint, "sha256:", 7), 0, "%s",
                 now->cluster.fingerprint);
    cr_assert_eq(pp_profile_store_key(now->cluster.fingerprint, "gpt-13b", key, sizeof key),
                 PP_OK);
    cr_assert_eq(strncmp(key, "sha256-", 7), 0, "%s", key);
    cr_assert_eq(strlen(key), 7 + 64 + strlen("/gpt-13b.json"), "%s", key);
    pp_profile_destroy(old);
    pp_profile_destroy(now);
}

Test(profiles_store, keys_are_safe_paths)
{
    char key[128];
    cr_assert_eq(pp_profile_store_key("fnv1a64:b79c73af88c5178f", "gpt-13b", key, sizeof key),
                 PP_OK);
    cr_assert_str_eq(key, "fnv1a64-b79c73af88c5178f/gpt-13b.json");
    cr_assert_eq(pp_profile_store_key("fnv1a64:ab", "../x", key, sizeof key), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "model name \"../x\" has the character '/'"), "%s",
              pp_err_text());
    cr_assert_eq(pp_profile_store_key("..", "m", key, sizeof key), PP_ERR_INVALID);
    cr_assert_eq(pp_profile_store_key("a b", "m", key, sizeof key), PP_ERR_INVALID);
    cr_assert_eq(pp_profile_store_key("", "m", key, sizeof key), PP_ERR_INVALID);
}

Test(profiles_store, default_directory_follows_xdg)
{
    char *d;
    setenv("XDG_DATA_HOME", "/srv/data", 1);
    cr_assert_eq(pp_profile_store_dir(&d), PP_OK);
    cr_assert_str_eq(d, "/srv/data/pptune/profiles");
    free(d);
    setenv("XDG_DATA_HOME", "", 1); /* empty means unset (XDG Base Directory) */
    setenv("HOME", "/home/u", 1);
    cr_assert_eq(pp_profile_store_dir(&d), PP_OK);
    cr_assert_str_eq(d, "/home/u/.local/share/pptune/profiles");
    free(d);
}

/* ---- diff ---------------------------------------------------------------------------------- */

static pp_profile *with_tokens(double factor, double peak_factor)
{
    json_t *j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_t *pr = at(j, "chosen", "predicted");
    double t = json_number_value(json_object_get(pr, "tokens_per_s"));
    double m = json_number_value(json_object_get(pr, "peak_bytes_per_rank_max"));
    json_object_set_new(pr, "tokens_per_s", json_real(t * factor));
    json_object_set_new(pr, "peak_bytes_per_rank_max", json_real(m * peak_factor));
    pp_profile *p;
    cr_assert_eq(parse_json(j, &p), PP_OK, "%s", pp_err_msg());
    json_decref(j);
    return p;
}

Test(profiles_diff, a_drop_beyond_the_threshold_is_a_regression)
{
    pp_profile *a = with_tokens(1.0, 1.0), *b = with_tokens(0.93, 1.1);
    pp_profile_diff d;
    cr_assert_eq(pp_profile_diff_run(a, b, 0.05, NULL, &d), PP_OK);
    cr_assert(d.regression);
    cr_assert_not(d.measured_basis);
    cr_assert_float_eq(d.throughput_change, -0.07, 1e-9);
    cr_assert_float_eq(d.peak_bytes_change, 0.1 * a->chosen.peak_bytes, 1e-3);
    cr_assert_not(d.config_changed);
    /* within the threshold, or faster: not a regression */
    cr_assert_eq(pp_profile_diff_run(a, b, 0.08, NULL, &d), PP_OK);
    cr_assert_not(d.regression);
    cr_assert_eq(pp_profile_diff_run(b, a, 0.0, NULL, &d), PP_OK);
    cr_assert_not(d.regression);
    pp_profile_destroy(a);
    pp_profile_destroy(b);
}

Test(profiles_diff, measured_figures_win_over_predicted_ones)
{
    /* tiny-local.json was trialled: a copy whose measured step is 20 % slower regresses even
     * though its prediction is unchanged */
    json_t *j = load_fixture("tiny-local.json");
    json_t *me = at(j, "chosen", "measured");
    double s = json_number_value(json_object_get(me, "step_time_s"));
    json_object_set_new(me, "step_time_s", json_real(s * 1.25));
    json_object_set_new(at(j, "chosen", "config"), "schedule", json_string("1f1b"));
    pp_profile *a, *b;
    cr_assert_eq(pp_profile_read(FIX "tiny-local.json", &a), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(parse_json(j, &b), PP_OK, "%s", pp_err_msg());
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    pp_profile_diff d;
    cr_assert_eq(pp_profile_diff_run(a, b, 0.05, fp, &d), PP_OK);
    fclose(fp);
    cr_assert(d.measured_basis);
    cr_assert(d.config_changed);
    cr_assert(d.regression);
    cr_assert_float_eq(d.throughput_change, 1 / 1.25 - 1, 1e-9);
    cr_assert(strstr(text, "schedule  gpipe -> 1f1b"), "%s", text);
    cr_assert(strstr(text, "throughput (measured): -20.00 %"), "%s", text);
    cr_assert(strstr(text, "REGRESSION"), "%s", text);
    free(text);
    pp_profile_destroy(a);
    pp_profile_destroy(b);
    json_decref(j);
}

/* ---- export -------------------------------------------------------------------------------- */

static char *export_text(pp_profile *p, const pp_export_target *f, pp_status *st)
{
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    *st = pp_profile_export(p, f, fp);
    fclose(fp);
    return text;
}

Test(profiles_export, megatron_flags_of_an_interleaved_profile)
{
    pp_profile *p;
    cr_assert_eq(pp_profile_read(FIX "gpt-13b-dgx-h100-x32-v1.1.json", &p), PP_OK, "%s",
                 pp_err_msg());
    pp_status st;
    char *t = export_text(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    /* p = 8, v = 5, 40 layers: 40 / (8 * 5) = 1 layer per virtual stage; G = 16; b = 1 */
    cr_assert(strstr(t, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 8 "
                        "--num-layers-per-virtual-pipeline-stage 1 "
                        "--microbatch-group-size-per-virtual-pipeline-stage 16 "),
              "%s", t);
    cr_assert(strstr(t, "--micro-batch-size 1 --global-batch-size 1024 "), "%s", t);
    /* the model and the precision (before 1.1: none of it, Megatron's defaults and fp32) */
    cr_assert(strstr(t, " --num-layers 40 --hidden-size 5120 --num-attention-heads 40 "
                        "--ffn-hidden-size 20480 --seq-length 2048 "),
              "%s", t);
    cr_assert(strstr(t, " --bf16"), "%s", t);
    cr_assert_null(strstr(t, "--enable-bitpipe-schedule"));
    free(t);
    /* NeMo 1 builds no virtual pipeline: refused with NeMo's reason, nothing printed; NeMo 2
     * takes it */
    t = export_text(p, pp_profile_export_find("nemo", NULL), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED);
    cr_assert(strstr(pp_err_text(), "Virtual pipeline model parallel size is no longer "
                                    "supported for nemo 1.0"),
              "%s", pp_err_text());
    cr_assert(strstr(pp_err_text(), "--format nemo2 (NeMo 2.0 runs it)"), "%s", pp_err_text());
    cr_assert_str_eq(t, "");
    free(t);
    t = export_text(p, pp_profile_export_find("nemo2", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(strstr(t, "    pipeline_model_parallel_size=8,\n"), "%s", t);
    cr_assert(strstr(t, "    virtual_pipeline_model_parallel_size=5,\n"), "%s", t);
    cr_assert(strstr(t, "    tensor_model_parallel_size=2,\n"), "%s", t);
    cr_assert(strstr(t, "num_nodes=32,\n"), "%s", t);
    free(t);
    /* pprun: the backend, precision and tensor parallelism the profile planned */
    t = export_text(p, pp_profile_export_find("pprun", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(t, "--model gpt-13b --schedule interleaved --ranks 8 --microbatches 64 "
                        "--micro-batch-size 1 --chunks 5 --group 16 --dp 16 --tp 2 --seq 2048 "
                        "--backend cuda --precision bf16\n");
    free(t);
    pp_profile_destroy(p);
}

static pp_profile *with_config(const char *schedule, int p_, int v, int G, int b, int N, int d,
                               const char *split)
{
    json_t *j = load_fixture("gpt-13b-dgx-h100-x32-v1.1.json");
    json_t *c = at(j, "chosen", "config");
    json_object_set_new(c, "schedule", json_string(schedule));
    json_object_set_new(c, "p", json_integer(p_));
    json_object_set_new(c, "v", json_integer(v));
    json_object_set_new(c, "G", json_integer(G));
    json_object_set_new(c, "b", json_integer(b));
    json_object_set_new(c, "N", json_integer(N));
    json_object_set_new(c, "d", json_integer(d));
    json_object_set_new(c, "t", json_integer(1));
    json_object_set_new(c, "split", json_string(split));
    pp_profile *p;
    cr_assert_eq(parse_json(j, &p), PP_OK, "%s", pp_err_msg());
    json_decref(j);
    return p;
}

Test(profiles_export, bitpipe_chimera_and_uneven)
{
    pp_status st;
    pp_profile *p = with_config("bitpipe", 4, 1, 0, 2, 8, 64, "even"); /* 2 * 8 * 64 = 1024 */
    char *t = export_text(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED, "upstream Megatron-LM has no BitPipe");
    free(t);
    t = export_text(p, pp_profile_export_find("megatron", "bitpipe-fork"), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(strstr(t, "--pipeline-model-parallel-size 4 "), "%s", t);
    cr_assert(strstr(t, " --enable-bitpipe-schedule \\\n"), "the flags line's end: %s", t);
    cr_assert_null(strstr(t, "virtual"), "%s", t);
    free(t);
    t = export_text(p, pp_profile_export_find("nemo", NULL), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED);
    free(t);
    t = export_text(p, pp_profile_export_find("pprun", NULL), &st);
    cr_assert_eq(st, PP_OK);
    cr_assert_str_eq(t, "--model gpt-13b --schedule bitpipe --ranks 4 --microbatches 8 "
                        "--micro-batch-size 2 --dp 64 --seq 2048 --backend cuda --precision "
                        "bf16\n");
    free(t);
    pp_profile_destroy(p);

    p = with_config("chimera", 4, 1, 0, 1, 16, 64, "even");
    t = export_text(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED);
    cr_assert(strstr(pp_err_text(), "Megatron-LM has no Chimera schedule"), "%s", pp_err_text());
    free(t);
    pp_profile_destroy(p);

    /* 40 layers, Llama 3 split over 2 x 7 = 14 stages: 42 / 14 = 3, first and last 2 */
    p = with_config("interleaved", 2, 7, 8, 1, 16, 64, "uneven");
    t = export_text(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    /* a split of virtual stages: Megatron's first/last counts are a pipeline rank's, so it
     * goes in the layout, stage by stage */
    cr_assert(strstr(t, "--pipeline-model-parallel-layout "
                        "'Et*2|t*3|t*3|t*3|t*3|t*3|t*3|t*3|t*3|t*3|t*3|t*3|t*3|t*2L' "
                        "--microbatch-group-size-per-virtual-pipeline-stage 8 "),
              "%s", t);
    cr_assert_null(strstr(t, "--decoder-first-pipeline-num-layers"), "%s", t);
    free(t);
    t = export_text(p, pp_profile_export_find("pprun", NULL), &st);
    cr_assert_eq(st, PP_OK);
    cr_assert_str_eq(t, "--model gpt-13b --schedule interleaved --ranks 2 --microbatches 16 "
                        "--micro-batch-size 1 --chunks 7 --group 8 --dp 64 --seq 2048 --uneven "
                        "--backend cuda --precision bf16\n");
    free(t);
    pp_profile_destroy(p);
}

/* issue 20: a first/last-stage split ("split": "first-last") reaches pprun and Megatron */
Test(profiles_export, first_last_stage_split)
{
    pp_status st;
    pp_profile *p;
    json_t *j = load_fixture("gpt-13b-dgx-h100-x32-v1.1.json"); /* 1.1: Megatron needs the shape */
    json_t *c = at(j, "chosen", "config");
    json_object_set_new(c, "schedule", json_string("1f1b"));
    json_object_set_new(c, "p", json_integer(4));
    json_object_set_new(c, "v", json_integer(1));
    json_object_set_new(c, "G", json_integer(0));
    json_object_set_new(c, "t", json_integer(1));
    json_object_set_new(c, "split", json_string("first-last"));
    st = parse_json(j, &p); /* the counts are required */
    cr_assert_eq(st, PP_ERR_PARSE, "%d %s", st, pp_err_text());
    cr_assert(strstr(pp_err_text(), "first_stage_layers"), "%s", pp_err_text());
    json_object_set_new(c, "first_stage_layers", json_integer(12));
    json_object_set_new(c, "last_stage_layers", json_integer(8));
    cr_assert_eq(parse_json(j, &p), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(p->chosen.config.first_layers, 12);
    cr_assert_eq(p->chosen.config.last_layers, 8);
    char *t = export_text(p, pp_profile_export_find("pprun", NULL), &st);
    cr_assert_eq(st, PP_OK);
    cr_assert(strstr(t, " --first-stage-layers 12 --last-stage-layers 8"), "%s", t);
    free(t);
    t = export_text(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_text());
    cr_assert(strstr(t, " --decoder-first-pipeline-num-layers 12 "
                        "--decoder-last-pipeline-num-layers 8"),
              "%s", t);
    free(t);
    /* torchtitan takes layers off the edges only: a 12-layer first stage beside 10-layer middle
     * stages is refused with the reason */
    t = export_text(p, pp_profile_export_find("torchtitan", NULL), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED, "%s", t);
    cr_assert(strstr(pp_err_text(), "the first stage 12, the last 8 and the middle stages 10"),
              "%s", pp_err_text());
    free(t);
    /* NeMo 1 and 2 take Megatron-Core's first/last counts */
    t = export_text(p, pp_profile_export_find("nemo", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_text());
    cr_assert(strstr(t, "  num_layers_in_first_pipeline_stage: 12\n"
                        "  num_layers_in_last_pipeline_stage: 8\n"),
              "%s", t);
    free(t);
    pp_profile_destroy(p);
    json_object_set_new(c, "last_stage_layers", json_integer(-1));
    st = parse_json(j, &p);
    cr_assert_eq(st, PP_ERR_PARSE, "%d %s", st, pp_err_text());
    cr_assert(strstr(pp_err_text(), "last_stage_layers"), "%s", pp_err_text());
    json_decref(j);
}

Test(profiles_read, products_that_wrap_cannot_pass_the_checks)
{
    /* b N d = 1024 only modulo 2^64: 1024 x 18139745 x 993089953 = 1024 (1 + 2^54), which the
     * old 64-bit product wrapped onto the global batch; then p t d beyond the cluster's 256 */
    json_t *j = load_fixture("gpt-13b-dgx-h100-x32.json");
    json_t *c = at(j, "chosen", "config");
    json_object_set_new(c, "b", json_integer(1024));
    json_object_set_new(c, "N", json_integer(18139745));
    json_object_set_new(c, "d", json_integer(993089953));
    expect_field_error(j, "field \"chosen.config\": expected b * N * d = search.global_batch");
    json_decref(j);

    j = load_fixture("gpt-13b-dgx-h100-x32.json");
    c = at(j, "chosen", "config");
    json_object_set_new(c, "b", json_integer(1));
    json_object_set_new(c, "N", json_integer(1));
    json_object_set_new(c, "d", json_integer(1024));
    expect_field_error(j, "expected p * t * cp * d <= the cluster's 256 devices, got p=8 t=2 "
                          "cp=1 d=1024");
    json_decref(j);
}

/* Profile 1.4's model.origin: a config.json by path and SHA-256 reads, and the pprun export
 * gives pprun that file (--model-config); a bad digest or kind is refused naming the field; a
 * profile without it (1.3 and before) names a preset, as --model. */
Test(profiles_read, model_origin_reads_and_the_pprun_export_gives_its_file)
{
    const char *sha = "4e61d5f850d2ff4ae3b57bcd88686caa22d6030476f30f75f2beb28d60d80b8b";
    json_t *j = load_fixture("gpt-13b-dgx-h100-x32.json");
    pp_profile *p = NULL;
    cr_assert_eq(parse_json(j, &p), PP_OK, "%s", pp_err_msg());
    cr_assert_null(p->model.origin_kind, "no origin before 1.4");
    pp_status st;
    char *text = export_text(p, pp_profile_export_find("pprun", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(!strncmp(text, "--model gpt-13b ", 16), "%s", text);
    free(text);
    pp_profile_destroy(p);

    json_t *o = json_pack("{s:s, s:s, s:s}", "kind", "config.json", "path",
                          "/shared/llama/config.json", "sha256", sha);
    json_object_set_new(json_object_get(j, "model"), "origin", o);
    cr_assert_eq(parse_json(j, &p), PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(p->model.origin_kind, "config.json");
    cr_assert_str_eq(p->model.origin_path, "/shared/llama/config.json");
    cr_assert_str_eq(p->model.origin_sha256, sha);
    text = export_text(p, pp_profile_export_find("pprun", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(!strncmp(text, "--model-config /shared/llama/config.json --schedule ", 52), "%s",
              text);
    free(text);
    pp_profile_destroy(p);

    json_object_set_new(o, "sha256", json_string("4E61"));
    expect_field_error(j, "field \"model.origin.sha256\": expected 64 lowercase hex digits");
    json_object_set_new(o, "sha256", json_string(sha));
    json_object_set_new(o, "kind", json_string("safetensors"));
    expect_field_error(j, "field \"model.origin.kind\": expected \"preset\", \"config.json\"");
    json_decref(j);
}
