/* test_runtime_safetensors.c — HuggingFace safetensors checkpoints (pp_rt_safetensors.h):
 * round trips bit for bit; bf16 and f16 conversions exact where representable and rounded to
 * nearest even otherwise (against references computed here in double precision, and over
 * every 16-bit pattern); the reference writer's layout; a sharded checkpoint with its index,
 * split as huggingface_hub splits it, read as one; a wrong shape refused naming the file and
 * the tensor; and malformed files (the reference implementation's own refusals, and more)
 * refused naming what was wrong. tests/py/test_safetensors.py checks the same files against
 * the safetensors package itself. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pp_rt_safetensors.h"
#include "pp_test_dir.h"
#include "pp_test_ok.h"

PP_TEST_DIR(pp_st)

TestSuite(runtime_safetensors, .init = pp_st_dir_make, .fini = pp_st_dir_remove);

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t g_rng = 0x1234567;

static uint32_t rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}

static char *path_in(const char *name)
{
    return pp_test_path_in(g_dir, name);
}

/* F32 values of every kind (NaNs, infinities, subnormals, signed zeros) and BF16 / F16
 * tensors of values those types hold exactly: written, read back, equal bit for bit. */
Test(runtime_safetensors, round_trip_is_bit_identical)
{
    enum { N = 3000 };
    float *f = malloc(N * sizeof *f), *h = malloc(N * sizeof *h), *b = malloc(N * sizeof *b);
    for (int i = 0; i < N; i++) {
        f[i] = from_bits(rnd());
        do /* a bf16 value; not a NaN, which the conversion makes canonical */
            b[i] = from_bits(rnd() & 0xffff0000u);
        while (isnan(b[i]));
        uint16_t x;
        do
            x = (uint16_t)rnd();
        while ((x & 0x7c00u) == 0x7c00u && (x & 0x3ffu)); /* f16 NaNs change payload bits */
        h[i] = pp_st_f16_to_f32(x);
    }
    f[0] = -0.0f, f[1] = INFINITY, f[2] = from_bits(1), f[3] = from_bits(0x7fc00001u);
    int64_t s3[] = {10, 15, 20}, s1[] = {N}, s0[] = {0, 4}, sc[1] = {0};
    float one = 1.5f;
    pp_st_out t[] = {
        {"model.embed_tokens.weight", PP_ST_F32, 3, s3, f},
        {"bf16", PP_ST_BF16, 1, s1, b},
        {"f16", PP_ST_F16, 1, s1, h},
        {"empty", PP_ST_F32, 2, s0, NULL},
        {"scalar", PP_ST_BF16, 0, sc, &one},
    };
    pp_st_meta meta[] = {{"format", "pt"}};
    const char *file = path_in("rt.safetensors");
    OK(pp_st_write(file, t, 5, meta, 1));
    pp_st *st;
    OK(pp_st_open(file, &st));
    cr_assert_eq(pp_st_count(st), 5);
    cr_assert_str_eq(pp_st_metadata(st, "format"), "pt");
    cr_assert_null(pp_st_metadata(st, "other"));
    float *got = malloc(N * sizeof *got);
    for (int k = 0; k < 5; k++) {
        const pp_st_tensor *x;
        OK(pp_st_expect(st, t[k].name, t[k].ndim, t[k].shape, &x));
        cr_assert_eq(x->dtype, t[k].dtype);
        cr_assert_str_eq(x->file, file);
        OK(pp_st_load_f32(st, x, got));
        for (uint64_t i = 0; i < x->numel; i++)
            cr_assert_eq(bits(got[i]), bits(t[k].data[i]), "%s[%llu]: %08x, wrote %08x", t[k].name,
                         (unsigned long long)i, bits(got[i]), bits(t[k].data[i]));
    }
    /* a row range is the elements it names */
    const pp_st_tensor *e = pp_st_find(st, "model.embed_tokens.weight");
    OK(pp_st_load_f32_range(st, e, 2 * 300, 300, got));
    cr_assert(!memcmp(got, f + 600, 300 * sizeof *got));
    cr_assert_eq(pp_st_load_f32_range(st, e, 2999, 2, got), PP_ERR_INVALID);
    /* iteration in name order */
    const char *names[] = {"bf16", "empty", "f16", "model.embed_tokens.weight", "scalar"};
    for (size_t i = 0; i < 5; i++)
        cr_assert_str_eq(pp_st_at(st, i)->name, names[i]);
    cr_assert_null(pp_st_at(st, 5));
    pp_st_destroy(st);
    free(got), free(f), free(h), free(b);
}

/* The nearest bf16 / f16 of x by exhaustive reasoning in double precision: among the two
 * neighbours the truncation gives, the nearer, ties to the even pattern. */
static uint16_t ref_bf16(float x)
{
    uint32_t u = bits(x);
    uint16_t lo = (uint16_t)(u >> 16);
    if (isnan(x))
        return 0x7fc0;
    if (isinf(x))
        return lo;
    /* past the largest finite bf16 the next step up is 2^128 (IEEE 754 rounds as if the
     * exponent were unbounded, then overflows to infinity) */
    int top = (lo & 0x7fffu) == 0x7f7fu;
    double a = fabs((double)x), dl = fabs((double)pp_st_bf16_to_f32(lo)),
           dh = top ? ldexp(1.0, 128) : fabs((double)pp_st_bf16_to_f32((uint16_t)(lo + 1)));
    if (a - dl < dh - a || (a - dl == dh - a && !(lo & 1)))
        return lo;
    return (uint16_t)(lo + 1);
}

static uint16_t ref_f16(float x)
{
    static double table[0x7c01]; /* |value| of every finite half pattern, and infinity */
    if (table[1] == 0)
        for (uint32_t k = 0; k <= 0x7c00; k++)
            table[k] = (double)pp_st_f16_to_f32((uint16_t)k);
    uint16_t sign = (uint16_t)((bits(x) >> 16) & 0x8000u);
    double a = fabs((double)x);
    if (a >= 65520.0) /* halfway between 65504 and the next step, 65536, and up */
        return sign | 0x7c00u;
    uint32_t lo = 0, hi = 0x7bff; /* the largest pattern <= a */
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (table[mid] <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    double dl = a - table[lo], dh = table[lo + 1] - a;
    uint32_t k = dl < dh || (dl == dh && !(lo & 1)) ? lo : lo + 1;
    return (uint16_t)(sign | k);
}

Test(runtime_safetensors, bf16_and_f16_round_to_nearest_even)
{
    /* every pattern that is a number converts to fp32 and back unchanged */
    for (uint32_t p = 0; p < 0x10000; p++) {
        uint16_t x = (uint16_t)p;
        if ((x & 0x7f80u) != 0x7f80u || !(x & 0x7fu))
            cr_assert_eq(pp_st_f32_to_bf16(pp_st_bf16_to_f32(x)), x, "bf16 %04x", x);
        if ((x & 0x7c00u) != 0x7c00u || !(x & 0x3ffu))
            cr_assert_eq(pp_st_f32_to_f16(pp_st_f16_to_f32(x)), x, "f16 %04x", x);
    }
    /* ties: 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7 and goes to the even 1; 1 + 3*2^-8
     * goes up to the even 1 + 2^-6; a hair past a tie goes up */
    cr_assert_eq(pp_st_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    cr_assert_eq(pp_st_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    cr_assert_eq(pp_st_f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
    cr_assert_eq(pp_st_f32_to_bf16(-1.0f - 0x1p-8f), 0xbf80);
    cr_assert_eq(pp_st_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80); /* FLT_MAX -> inf */
    cr_assert_eq(pp_st_f32_to_bf16(NAN), 0x7fc0);
    /* f16: 2049 ties between 2048 and 2050 to 2048; 2051 to 2052; 65519 stays finite, 65520
     * is the first to round to infinity; 2^-25 ties to zero, a hair more is the least
     * subnormal 2^-24 */
    cr_assert_eq(pp_st_f16_to_f32(pp_st_f32_to_f16(2049.0f)), 2048.0f);
    cr_assert_eq(pp_st_f16_to_f32(pp_st_f32_to_f16(2051.0f)), 2052.0f);
    cr_assert_eq(pp_st_f32_to_f16(65519.0f), 0x7bff);
    cr_assert_eq(pp_st_f32_to_f16(65520.0f), 0x7c00);
    cr_assert_eq(pp_st_f32_to_f16(-0x1p-25f), 0x8000);
    cr_assert_eq(pp_st_f32_to_f16(from_bits(0x33000001u)), 0x0001);
    cr_assert_eq(pp_st_f32_to_f16(0x1p-14f), 0x0400);
    uint16_t nan = pp_st_f32_to_f16(NAN);
    cr_assert((nan & 0x7c00u) == 0x7c00u && (nan & 0x3ffu), "NaN became %04x", nan);
    /* random fp32 values of every magnitude against the double-precision reference */
    for (int i = 0; i < 200000; i++) {
        float x = from_bits(rnd());
        if (i % 2) /* half of them in f16's range (2^-27 .. 2^18), where its rounding happens */
            x = from_bits((rnd() & 0x807fffffu) | (100u + rnd() % 46u) << 23);
        cr_assert_eq(pp_st_f32_to_bf16(x), ref_bf16(x), "bf16 of %a (%08x)", (double)x, bits(x));
        if (!isnan(x))
            cr_assert_eq(pp_st_f32_to_f16(x), ref_f16(x), "f16 of %a (%08x)", (double)x, bits(x));
    }
}

/* The bytes the reference writer produces: F32 before BF16 (alignment order), then names in
 * order; serde_json's compact header padded with spaces to 8; the data in that order. */
Test(runtime_safetensors, layout_is_the_reference_writers)
{
    int64_t s2[] = {2}, s3[] = {3};
    float a[] = {1, 2, 3}, b[] = {4, 5};
    pp_st_out t[] = {{"a\"q", PP_ST_BF16, 1, s3, a}, {"b", PP_ST_F32, 1, s2, b}};
    pp_st_meta meta[] = {{"format", "pt"}};
    const char *file = path_in("layout.safetensors");
    OK(pp_st_write(file, t, 2, meta, 1));
    char *text;
    size_t len;
    OK(pp_file_read(file, &text, &len));
    const char *want =
        "{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F32\",\"shape\":[2],"
        "\"data_offsets\":[0,8]},\"a\\\"q\":{\"dtype\":\"BF16\",\"shape\":[3],"
        "\"data_offsets\":[8,14]}}";
    size_t n = strlen(want), padded = (n + 7) / 8 * 8;
    uint64_t hl = 0;
    memcpy(&hl, text, 8);
    cr_assert_eq(hl, padded);
    cr_assert(!memcmp(text + 8, want, n), "header %.*s", (int)padded, text + 8);
    for (size_t i = n; i < padded; i++)
        cr_assert_eq(text[8 + i], ' ');
    cr_assert_eq(len, 8 + padded + 8 + 6);
    float b0;
    memcpy(&b0, text + 8 + padded, 4);
    cr_assert_eq(b0, 4.0f);
    uint16_t a2;
    memcpy(&a2, text + 8 + padded + 8 + 4, 2);
    cr_assert_eq(a2, 0x4040); /* 3.0 in bf16 */
    free(text);
}

static void fill(float *p, size_t n, float base)
{
    for (size_t i = 0; i < n; i++)
        p[i] = base + (float)i * 0.25f;
}

static char *slurp(const char *path)
{
    char *text;
    size_t len;
    OK(pp_file_read(path, &text, &len));
    return text;
}

/* huggingface_hub's own example (split_state_dict_into_shards_factory): tensors of 6, 6, 2,
 * 6, 2, 2 units with a limit of 10 shard as [6], [6+2], [6+2+2]; a tensor past the limit gets
 * a shard of its own, numbered when it is made. Read back as one through the folder and
 * through the index. */
Test(runtime_safetensors, sharded_checkpoint_reads_as_one)
{
    enum { U = 64 }; /* floats per unit */
    float *v = malloc(40 * U * sizeof *v);
    fill(v, 40 * U, -3.0f);
    int64_t sh[6][1] = {{6 * U}, {6 * U}, {2 * U}, {6 * U}, {2 * U}, {2 * U}};
    pp_st_out t[6];
    char names[6][64];
    for (int i = 0; i < 6; i++) {
        snprintf(names[i], sizeof names[i], "model.layers.%d.mlp.up_proj.weight", i);
        t[i] = (pp_st_out){names[i], PP_ST_F32, 1, sh[i], v + i * 6 * U};
    }
    /* a stale single file and a stale shard of an earlier save are removed */
    const char *stale = path_in("model.safetensors");
    const char *old = path_in("model-00001-of-00009.safetensors");
    OK(pp_st_write(stale, t, 1, NULL, 0));
    OK(pp_st_write(old, t, 1, NULL, 0));
    int k;
    OK(pp_st_write_sharded(g_dir, t, 6, NULL, 0, 10 * U * 4, &k));
    cr_assert_eq(k, 3);
    struct stat sb;
    cr_assert_neq(stat(stale, &sb), 0, "the stale model.safetensors is still there");
    cr_assert_neq(stat(old, &sb), 0, "the stale shard is still there");
    json_t *idx = json_loads(slurp(path_in("model.safetensors.index.json")), 0, NULL);
    cr_assert(idx);
    cr_assert_eq(
        json_integer_value(json_object_get(json_object_get(idx, "metadata"), "total_size")),
        24 * U * 4);
    json_t *map = json_object_get(idx, "weight_map");
    const char *want[] = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                          "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
                          "model-00003-of-00003.safetensors", "model-00003-of-00003.safetensors"};
    for (int i = 0; i < 6; i++)
        cr_assert_str_eq(json_string_value(json_object_get(map, names[i])), want[i]);
    json_decref(idx);
    const char *paths[] = {g_dir, path_in("model.safetensors.index.json")};
    for (int p = 0; p < 2; p++) {
        pp_st *st;
        OK(pp_st_open(paths[p], &st));
        cr_assert_eq(pp_st_count(st), 6);
        float *got = malloc(6 * U * sizeof *got);
        for (int i = 0; i < 6; i++) {
            OK(pp_st_load_named_f32(st, names[i], 1, sh[i], got));
            cr_assert(!memcmp(got, t[i].data, (size_t)sh[i][0] * 4), "%s", names[i]);
            cr_assert(strstr(pp_st_find(st, names[i])->file, want[i]));
        }
        free(got);
        pp_st_destroy(st);
    }
    /* a tensor past the limit: a shard of its own, numbered when made (before the open one) */
    int64_t big[1] = {12 * U};
    pp_st_out u[] = {{"a", PP_ST_F32, 1, sh[2], v},
                     {"big", PP_ST_F32, 1, big, v},
                     {"c", PP_ST_F32, 1, sh[2], v}};
    OK(pp_st_write_sharded(g_dir, u, 3, NULL, 0, 10 * U * 4, &k));
    cr_assert_eq(k, 2);
    pp_st *st;
    OK(pp_st_open(g_dir, &st));
    cr_assert(strstr(pp_st_find(st, "big")->file, "model-00001-of-00002.safetensors"));
    cr_assert(strstr(pp_st_find(st, "a")->file, "model-00002-of-00002.safetensors"));
    cr_assert(strstr(pp_st_find(st, "c")->file, "model-00002-of-00002.safetensors"));
    cr_assert_null(pp_st_find(st, names[0]), "a tensor of the earlier save is still read");
    pp_st_destroy(st);
    /* everything in one shard: model.safetensors and no index */
    OK(pp_st_write_sharded(g_dir, u, 3, NULL, 0, 1 << 20, &k));
    cr_assert_eq(k, 1);
    cr_assert_eq(stat(path_in("model.safetensors"), &sb), 0);
    cr_assert_neq(stat(path_in("model.safetensors.index.json"), &sb), 0);
    free(v);
}

/* The mismatch a weight loader reports: the shard's file, the tensor, both shapes. */
Test(runtime_safetensors, wrong_shape_is_refused_naming_the_tensor)
{
    float v[14 * 8];
    fill(v, 14 * 8, 0);
    int64_t s[] = {14, 8};
    pp_st_out t[4];
    char names[4][64];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "model.layers.%d.mlp.up_proj.weight", i + 2);
        t[i] = (pp_st_out){names[i], PP_ST_BF16, 2, s, v};
    }
    int k;
    OK(pp_st_write_sharded(g_dir, t, 4, NULL, 0, 14 * 8 * 2, &k));
    cr_assert_eq(k, 4);
    pp_st *st;
    OK(pp_st_open(g_dir, &st));
    int64_t want[] = {11, 8};
    float out[14 * 8];
    cr_assert_eq(pp_st_load_named_f32(st, "model.layers.3.mlp.up_proj.weight", 2, want, out),
                 PP_ERR_INVALID);
    char msg[512];
    snprintf(msg, sizeof msg,
             "%s/model-00002-of-00004.safetensors: tensor model.layers.3.mlp.up_proj.weight: "
             "shape [14, 8] expected [11, 8]",
             g_dir);
    cr_assert_str_eq(pp_err_text(), msg);
    int64_t flat[] = {14 * 8};
    cr_assert_eq(pp_st_expect(st, "model.layers.3.mlp.up_proj.weight", 1, flat, NULL),
                 PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "shape [14, 8] expected [112]"), "%s", pp_err_text());
    cr_assert_eq(pp_st_expect(st, "model.layers.9.mlp.up_proj.weight", 2, s, NULL),
                 PP_ERR_NOTFOUND);
    cr_assert(strstr(pp_err_text(), ": no tensor model.layers.9.mlp.up_proj.weight (it holds 4 "
                                    "tensors)"),
              "%s", pp_err_text());
    pp_st_destroy(st);
}

/* A file of an 8-byte length n and the header text (padded with spaces to n), then data. */
static const char *craft(const char *name, uint64_t n, const char *header, const void *data,
                         size_t data_len)
{
    const char *path = path_in(name);
    FILE *fp = fopen(path, "wb");
    cr_assert(fp);
    fwrite(&n, 8, 1, fp);
    size_t h = strlen(header);
    fwrite(header, 1, h < n ? h : (size_t)n, fp);
    for (size_t i = h; i < n && n < 4096; i++) /* a huge length is not padded out */
        fputc(' ', fp);
    if (data_len)
        fwrite(data, 1, data_len, fp);
    fclose(fp);
    return path;
}

static void refused(const char *path, pp_status want, const char *says)
{
    pp_st *st = (pp_st *)1;
    pp_status s = pp_st_open(path, &st);
    cr_assert_eq(s, want, "%s: status %d, expected %d: %s", says, s, want, pp_err_text());
    cr_assert_null(st);
    cr_assert(strstr(pp_err_text(), says), "\"%s\" lacks \"%s\"", pp_err_text(), says);
}

#define T16 "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}"

/* What the reference's tests refuse (safetensors/src/tensor.rs, mod tests), and the schema. */
Test(runtime_safetensors, malformed_files_are_refused)
{
    static const char zeros[64];
    static const struct {
        const char *name;
        uint64_t n; /* the header length written */
        const char *header;
        const char *data;
        size_t data_len;
        const char *says;
    } cases[] = {
        {"large", 0xffffff0000003cull, T16, zeros, 16,
         "header length 72057589742960700 is more than the 100000000 bytes"},
        {"utf8", 1, "\xff", NULL, 0, "not valid JSON"},
        {"json", 1, "{", NULL, 0, "not valid JSON"},
        {"array", 2, "[]", NULL, 0, "the header is not a JSON object"},
        {"dup", 120,
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4,8]}}",
         zeros, 8, "duplicate object key"},
        {"dtype", 64, "{\"t\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", zeros, 1,
         "tensor t: dtype: \"F4\" is not supported"},
        {"info", 64, "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,4]}}", zeros,
         4, "tensor test: data_offsets: [0, 4] hold 4 bytes; dtype I32 shape [2, 2] needs 16"},
        {"incomplete", 64, T16, "0123456789abcdef-extra-polyglot", 31,
         "the file holds 31 bytes of data after its header"},
        {"missing", 64, T16, zeros, 14,
         "the tensors' data ends at byte 16, but the file holds 14 bytes"},
        {"overflow", 128,
         "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,9223372036854775807],\"data_offsets\":[0,16]}}",
         zeros, 16, "shape: [2, 9223372036854775807]: the byte count overflows 64 bits"},
        {"overlap", 128,
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         zeros, 12, "tensor b: data_offsets [4, 12] overlap the previous tensor"},
        {"hole", 128,
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
         zeros, 20, "tensor b: data_offsets [12, 20] leave a hole"},
        {"extra", 96, "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"x\":1}}",
         zeros, 4, "tensor a: x: unexpected key"},
        {"meta", 64, "{\"__metadata__\":{\"format\":1}}", NULL, 0,
         "__metadata__.format: expected a string"},
        {"neg", 64, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", NULL, 0,
         "tensor a: shape: expected an array of at most 8 integers >= 0"},
        {"dims", 128,
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", zeros,
         4, "at most 8 integers"},
        /* a name with a terminal escape is shown escaped */
        {"ctrl", 64, "{\"a\\u001b[2J\":{\"dtype\":\"F4\",\"shape\":[],\"data_offsets\":[0,1]}}",
         zeros, 1, "tensor a\\x1b[2J: dtype"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        refused(craft(cases[i].name, cases[i].n, cases[i].header, cases[i].data, cases[i].data_len),
                PP_ERR_PARSE, cases[i].says);
    const char *p = craft("small", 0, "", NULL, 0);
    cr_assert_eq(truncate(p, 5), 0);
    refused(p, PP_ERR_PARSE, "5 bytes: too short for a safetensors file");
    p = craft("past", 200, T16, NULL, 0);
    cr_assert_eq(truncate(p, 60), 0);
    refused(p, PP_ERR_PARSE, "header length 200 runs past the end of the file (60 bytes)");
    refused("/dev/zero", PP_ERR_INVALID, "/dev/zero: not a regular file (a device)");
    const char *fifo = path_in("fifo.safetensors");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    refused(fifo, PP_ERR_INVALID, "not a regular file (a FIFO)");
    refused(path_in("none.safetensors"), PP_ERR_NOTFOUND, "none.safetensors: cannot open");
    refused(g_dir, PP_ERR_NOTFOUND, "a folder with neither model.safetensors nor");
}

/* What the reference accepts, this reader does too. */
Test(runtime_safetensors, padded_empty_and_scalar_headers_are_read)
{
    pp_st *st;
    OK(pp_st_open(craft("ws", 6, "\t\n{}\r ", NULL, 0), &st));
    cr_assert_eq(pp_st_count(st), 0);
    pp_st_destroy(st);
    OK(pp_st_open(craft("zero", 64,
                        "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,0],"
                        "\"data_offsets\":[0, 0]}}",
                        NULL, 0),
                  &st));
    const pp_st_tensor *t = pp_st_find(st, "test");
    cr_assert(t && t->numel == 0 && t->ndim == 2 && t->shape[1] == 0 && t->dtype == PP_ST_I32);
    float f;
    cr_assert_eq(pp_st_load_f32(st, t, &f), PP_ERR_INVALID); /* I32 is not loaded as fp32 */
    cr_assert(strstr(pp_err_text(), "tensor test: dtype I32 cannot be loaded as fp32"));
    pp_st_destroy(st);
    uint16_t half = 0x3c00; /* 1.0 */
    OK(pp_st_open(craft("scalar", 56,
                        "{\"s\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[0,2]}}", &half,
                        2),
                  &st));
    OK(pp_st_load_f32(st, pp_st_find(st, "s"), &f));
    cr_assert_eq(f, 1.0f);
    pp_st_destroy(st);
}

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    cr_assert(fp);
    fputs(text, fp);
    fclose(fp);
}

/* Two shards, s1.safetensors with tensor a and s2.safetensors with b, written into the test's
 * folder (with both in s1 when both_in_s1); returns the index's path there, not yet written. */
static const char *two_shards(int both_in_s1)
{
    static float v[4] = {1, 2, 3, 4};
    static const int64_t s[] = {4};
    pp_st_out t[] = {{"a", PP_ST_F32, 1, s, v}, {"b", PP_ST_F32, 1, s, v}};
    OK(pp_st_write(path_in("s1.safetensors"), t, both_in_s1 ? 2 : 1, NULL, 0));
    OK(pp_st_write(path_in("s2.safetensors"), t + 1, 1, NULL, 0));
    return path_in("model.safetensors.index.json");
}

/* An index cannot send the reader out of its folder, and must agree with its shards. */
Test(runtime_safetensors, index_must_match_its_shards)
{
    const char *index = two_shards(0);
    write_text(index, "{\"weight_map\": {\"a\": \"../etc/passwd\"}}");
    refused(index, PP_ERR_PARSE,
            "weight_map.a: expected a shard's file name in the index's folder");
    write_text(index, "{\"weight_map\": {\"a\": \"/etc/passwd\"}}");
    refused(index, PP_ERR_PARSE, "weight_map.a: expected a shard's file name");
    write_text(index, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\"}, "
                      "\"weight_map\": {}}");
    refused(index, PP_ERR_PARSE, "duplicate object key");
    write_text(index, "{\"weight_map\": {\"a\": \"s2.safetensors\"}}");
    refused(index, PP_ERR_PARSE, "s2.safetensors: tensor b is not in the weight_map of");
}

Test(runtime_safetensors, index_names_tensors_its_shards_hold)
{
    const char *index = two_shards(0);
    write_text(index, "{\"metadata\": {\"total_size\": 32}, \"weight_map\": {\"a\": "
                      "\"s1.safetensors\", \"b\": \"s2.safetensors\"}}");
    pp_st *st;
    OK(pp_st_open(index, &st));
    cr_assert_eq(pp_st_count(st), 2);
    pp_st_destroy(st);
    write_text(index, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\"}}");
    refused(index, PP_ERR_PARSE,
            "weight_map puts tensor b in s1.safetensors, which does not hold it");
    write_text(index, "{\"weight_map\": {\"a\": \"s1.safetensors\"}}");
    index = two_shards(1);
    refused(index, PP_ERR_PARSE, "s1.safetensors: tensor b is not in the weight_map");
    write_text(index, "{\"weight_map\": {}}");
    refused(index, PP_ERR_PARSE, "weight_map: names no tensor");
    write_text(index,
               "{\"metadata\": {\"total_size\": -1}, \"weight_map\": {\"a\": \"s1.safetensors\"}}");
    refused(index, PP_ERR_PARSE, "metadata.total_size: expected an integer >= 0");
}

/* The writer refuses what it cannot write, and writes nothing then. */
Test(runtime_safetensors, writer_refuses_bad_tensors)
{
    float v[2] = {1, 2};
    int64_t s[] = {2}, neg[] = {-2};
    const char *file = path_in("w.safetensors");
    /* the same name under two dtypes, another tensor between them in the writer's order */
    pp_st_out dup[] = {
        {"x", PP_ST_F32, 1, s, v}, {"y", PP_ST_BF16, 1, s, v}, {"x", PP_ST_F16, 1, s, v}};
    cr_assert_eq(pp_st_write(file, dup, 3, NULL, 0), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "tensor x is given twice"), "%s", pp_err_text());
    pp_st_out i32[] = {{"x", PP_ST_I32, 1, s, v}};
    cr_assert_eq(pp_st_write(file, i32, 1, NULL, 0), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "dtype I32 cannot be written from fp32"));
    pp_st_out bad[] = {{"x", PP_ST_F32, 1, neg, v}};
    cr_assert_eq(pp_st_write(file, bad, 1, NULL, 0), PP_ERR_INVALID);
    struct stat sb;
    cr_assert_neq(stat(file, &sb), 0, "a refused write left a file");
}
