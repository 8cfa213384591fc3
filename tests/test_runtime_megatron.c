/* test_runtime_megatron.c — Megatron's indexed dataset (PREFIX.idx + PREFIX.bin) as pprun reads
 * it: datasets written here in IndexedDatasetBuilder's layout (megatron_mirror.h; the real
 * builder is checked against the reader in tests/py/test_megatron.py) read back sample by
 * sample for every token type, in order and shuffled; malformed and truncated files refused
 * naming the file; and pprun training from one, its first steps' losses equal to the executor
 * run on the samples the layout says step k takes. */
#include <criterion/criterion.h>
#include <math.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "megatron_mirror.h"
#include "pp_rt.h"
#include "pp_test_dir.h"
#include "pp_test_ok.h"
#include "pp_test_run.h"

#define PPRUN PP_BINARY_DIR "/runtime/pprun"

PP_TEST_DIR(pp_megatron)

TestSuite(runtime_megatron, .init = pp_megatron_dir_make, .fini = pp_megatron_dir_remove);

/* Five documents of 7, 1, 12, 3 and 9 tokens (the fourth stored as two sequences, 1 + 2, as
 * add_item + end_document stores them), token t = (31 t + 5) mod vocab. */
enum { N_TOK = 32 };
static const int32_t seq_len[] = {7, 1, 12, 1, 2, 9};
static const int64_t doc_end[] = {1, 2, 3, 5, 6};

static void tokens(int64_t *t, int vocab)
{
    for (int i = 0; i < N_TOK; i++)
        t[i] = (31 * i + 5) % vocab;
}

static void write_set(const char *name, int code, const int64_t *t, char *prefix, size_t n)
{
    snprintf(prefix, n, "%s/%s", g_dir, name);
    pp_test_mmidx m = pp_test_mmidx_build(code, t, seq_len, 6, doc_end, 5);
    cr_assert_eq(pp_test_mmidx_write(&m, prefix), 0);
    pp_test_mmidx_free(&m);
}

/* Sample i is tokens [i*s, i*s + s + 1) of the documents concatenated, wrapping past the end:
 * drawn one at a time and in batches, for every integer type Megatron writes. */
Test(runtime_megatron, samples_are_the_documents_concatenated)
{
    static const struct {
        int code, vocab;
    } types[] = {{1, 200}, {2, 100}, {3, 3000}, {4, 128256}, {5, 50000}, {8, 50257}};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        int64_t t[N_TOK];
        tokens(t, types[k].vocab);
        char prefix[256];
        write_set("set", types[k].code, t, prefix, sizeof prefix);
        pp_rt_data *d, *e;
        OK(pp_rt_data_open_megatron(prefix, types[k].vocab, 1, 0, &d));
        OK(pp_rt_data_open(prefix, types[k].vocab, 1, 0, &e));
        cr_assert_str_eq(pp_rt_data_format(d), "megatron");
        cr_assert_eq(pp_rt_data_vocab(d), types[k].vocab);
        enum { S = 5, K = 14 }; /* 14 samples of 6 tokens: 70 tokens, past the 32 twice */
        int32_t one[S + 1], batch[K][S + 1];
        OK(pp_rt_data_next(e, K, S, &batch[0][0]));
        for (int i = 0; i < K; i++) {
            OK(pp_rt_data_next(d, 1, S, one));
            for (int j = 0; j <= S; j++) {
                int64_t want = t[(i * S + j) % N_TOK];
                cr_assert_eq(one[j], want, "dtype %d, sample %d, token %d: %d, expected %lld",
                             types[k].code, i, j, one[j], (long long)want);
                cr_assert_eq(batch[i][j], want);
            }
        }
        char what[256];
        pp_rt_data_describe(d, what, sizeof what);
        cr_assert(strstr(what, "32 in 6 sequences, 5 documents"), "%s", what);
        pp_rt_data_destroy(d);
        pp_rt_data_destroy(e);
    }
}

/* --shuffle: each epoch of (N-1)/s whole samples drawn once each, in an order that depends on
 * the seed and changes from epoch to epoch. */
Test(runtime_megatron, shuffle_draws_every_sample_once_per_epoch)
{
    int64_t t[N_TOK];
    tokens(t, 50257);
    char prefix[256];
    write_set("shuf", 8, t, prefix, sizeof prefix);
    enum { S = 3, PER = (N_TOK - 1) / S }; /* 10 samples an epoch */
    int orders[2][3][PER];
    for (int seed = 0; seed < 2; seed++) {
        pp_rt_data *d;
        OK(pp_rt_data_open_megatron(prefix, 50257, 11 + (uint64_t)seed, 1, &d));
        for (int ep = 0; ep < 3; ep++) {
            int seen[PER] = {0};
            for (int k = 0; k < PER; k++) {
                int32_t row[S + 1];
                OK(pp_rt_data_next(d, 1, S, row));
                int i = -1; /* which sample: its first token says */
                for (int c = 0; c < PER; c++)
                    if (row[0] == t[c * S] && row[S] == t[c * S + S])
                        i = c;
                cr_assert_geq(i, 0, "epoch %d draw %d is no sample", ep, k);
                for (int j = 0; j <= S; j++)
                    cr_assert_eq(row[j], t[i * S + j]);
                seen[i]++;
                orders[seed][ep][k] = i;
            }
            for (int c = 0; c < PER; c++)
                cr_assert_eq(seen[c], 1, "seed %d epoch %d drew sample %d %d times", seed, ep, c,
                             seen[c]);
        }
        pp_rt_data_destroy(d);
    }
    cr_assert(memcmp(orders[0][0], orders[0][1], sizeof orders[0][0]),
              "epochs 1 and 2 in the same order");
    cr_assert(memcmp(orders[0][0], orders[1][0], sizeof orders[0][0]),
              "seeds 11 and 12 in the same order");
    int in_order = 1;
    for (int k = 0; k < PER; k++)
        in_order &= orders[0][0][k] == k;
    cr_assert(!in_order, "the shuffled epoch is in order");
}

static void expect_refused(const char *prefix, int vocab, pp_status want, const char *says)
{
    pp_rt_data *d = NULL;
    pp_status st = pp_rt_data_open_megatron(prefix, vocab, 1, 0, &d);
    if (st == PP_OK) { /* some faults show when the token is read */
        int32_t row[64 * 9];
        st = pp_rt_data_next(d, 64, 8, row);
        pp_rt_data_destroy(d);
    }
    cr_assert_eq(st, want, "%s: status %d, expected %d (%s)", says, st, want, pp_err_text());
    cr_assert(strstr(pp_err_text(), says), "\"%s\" lacks \"%s\"", pp_err_text(), says);
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    cr_assert(fp && fwrite(p, 1, n, fp) == n && fclose(fp) == 0);
}

/* A damaged index at PREFIX.idx: the good one with n bytes at off replaced. */
static void patched(const pp_test_mmidx *m, const char *prefix, size_t off, uint64_t v, int n)
{
    cr_assert_eq(pp_test_mmidx_write(m, prefix), 0);
    unsigned char *idx = malloc(m->idx_len);
    memcpy(idx, m->idx, m->idx_len);
    pp_test_put_le(idx + off, v, n);
    char path[300];
    snprintf(path, sizeof path, "%s.idx", prefix);
    write_bytes(path, idx, m->idx_len);
    free(idx);
}

Test(runtime_megatron, bad_files_are_refused_naming_the_file)
{
    int64_t t[N_TOK];
    tokens(t, 50257);
    char prefix[256], path[300];
    snprintf(prefix, sizeof prefix, "%s/bad", g_dir);
    pp_test_mmidx m = pp_test_mmidx_build(8, t, seq_len, 6, doc_end, 5);
    /* truncated .bin: the sequence that runs past its end is named */
    cr_assert_eq(pp_test_mmidx_write(&m, prefix), 0);
    snprintf(path, sizeof path, "%s.bin", prefix);
    cr_assert_eq(truncate(path, (off_t)m.bin_len - 2), 0);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "bad.bin: 62 bytes, fewer than the index");
    expect_refused(prefix, 50257, PP_ERR_PARSE, "sequence 5 (9 uint16 tokens at byte 46)");
    /* a .bin with bytes the index does not describe */
    cr_assert_eq(truncate(path, (off_t)m.bin_len + 4), 0);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "bad.bin: 68 bytes, the index");
    /* the header's fields */
    patched(&m, prefix, 0, 'X', 1);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "bad.idx: not a Megatron index");
    patched(&m, prefix, 9, 2, 8);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "bad.idx: version 2, expected 1");
    patched(&m, prefix, 17, 7, 1);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "dtype code 7 is float32, expected token ids");
    patched(&m, prefix, 17, 9, 1);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "dtype code 9, expected token ids");
    /* counts that would overflow or overrun: refused before anything is read past the header */
    patched(&m, prefix, 18, UINT64_C(1) << 62, 8);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "cannot hold the 4611686018427387904 sequences");
    patched(&m, prefix, 26, 1000, 8);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "1000 documents its header counts");
    /* a length, a pointer, a document index */
    patched(&m, prefix, 34 + 4 * 2, (uint32_t)-3, 4);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "sequence 2: length -3, expected >= 0");
    patched(&m, prefix, 34 + 4 * 6 + 8 * 3, 7, 8);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "sequence 3: pointer 7, expected 40");
    patched(&m, prefix, 34 + 12 * 6 + 8 * 5, 5, 8);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "document index 5 is 5");
    patched(&m, prefix, 34 + 12 * 6, 1, 8);
    expect_refused(prefix, 50257, PP_ERR_PARSE, "document index 0 is 1");
    /* a token the model's vocabulary does not have: the file, the position and the id */
    cr_assert_eq(pp_test_mmidx_write(&m, prefix), 0);
    expect_refused(prefix, 100, PP_ERR_INVALID,
                   "bad.bin: token id 129 at position 4 (sequence 0, its token 4) is not below "
                   "the model's vocabulary of 100");
    /* too few tokens for one sample */
    pp_rt_data *d;
    OK(pp_rt_data_open_megatron(prefix, 50257, 1, 0, &d));
    int32_t row[40];
    cr_assert_eq(pp_rt_data_next(d, 1, 32, row), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "32 tokens, fewer than one sample of s+1 = 33"), "%s",
              pp_err_text());
    pp_rt_data_destroy(d);
    /* a missing .bin, a FIFO in place of the index (refused at once, not waited on) */
    snprintf(path, sizeof path, "%s.bin", prefix);
    cr_assert_eq(remove(path), 0);
    expect_refused(prefix, 50257, PP_ERR_NOTFOUND, "bad.bin: cannot open");
    snprintf(path, sizeof path, "%s/fifo.idx", g_dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/fifo", g_dir);
    expect_refused(path, 50257, PP_ERR_INVALID, "fifo.idx: not a regular file (a FIFO)");
    /* signed ids below zero */
    int64_t neg[N_TOK];
    tokens(neg, 100);
    neg[9] = -2;
    write_set("neg", 2, neg, prefix, sizeof prefix);
    expect_refused(prefix, 100, PP_ERR_INVALID,
                   "token id -2 at position 9 (sequence 2, its token 1)");
    pp_test_mmidx_free(&m);
}

/* --data PATH: the prefix, or the .idx or .bin of the pair; else a text; --shuffle only for a
 * dataset. */
Test(runtime_megatron, data_path_finds_the_pair)
{
    int64_t t[N_TOK];
    tokens(t, 50257);
    char prefix[256], path[300];
    write_set("pair", 8, t, prefix, sizeof prefix);
    const char *ext[] = {"", ".idx", ".bin"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s%s", prefix, ext[i]);
        pp_rt_data *d;
        OK(pp_rt_data_open(path, 50257, 1, 0, &d));
        cr_assert_str_eq(pp_rt_data_format(d), "megatron", "%s", path);
        pp_rt_data_destroy(d);
    }
    snprintf(path, sizeof path, "%s/prose.txt", g_dir);
    write_bytes(path, "plain text, read as bytes", 25);
    pp_rt_data *d;
    OK(pp_rt_data_open(path, 50257, 1, 0, &d));
    cr_assert_str_eq(pp_rt_data_format(d), "bytes");
    cr_assert_eq(pp_rt_data_vocab(d), 256);
    pp_rt_data_destroy(d);
    cr_assert_eq(pp_rt_data_open(path, 50257, 1, 1, &d), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "shuffling is for a Megatron dataset"), "%s", pp_err_text());
}

/* ---- pprun trains from a dataset: step k takes samples k*B .. (k+1)*B - 1 ---- */

static double step_loss(json_t *j, size_t k)
{
    return json_real_value(
        json_object_get(json_array_get(json_object_get(j, "per_step"), k), "loss"));
}

/* The losses of two steps of the executor pprun builds for these options (tiny model, one
 * layer, seq 8, 1F1B over 2 ranks, N = 2, b = 2, dp = 2, seed 3) on the given batches. */
static void executor_losses(const int32_t *batch, size_t rows, float loss[2])
{
    pp_model_cfg m;
    OK(pp_model_preset("tiny", &m));
    m.layers = 2;
    pp_sched_params sp = {.ranks = 2, .microbatches = 2, .layers = 2};
    pp_sched *s;
    OK(pp_sched_generate("1f1b", &sp, &s));
    pp_rt_exec_params ep = {.model = &m,
                            .sched = s,
                            .micro_batch = 2,
                            .seq = 8,
                            .dp = 2,
                            .tp = 1,
                            .seed = 3,
                            .clip = 1.0f,
                            .adamw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f}};
    pp_rt_executor *ex;
    OK(pp_rt_executor_create(&ep, &ex));
    cr_assert_eq((size_t)pp_rt_executor_batch_rows(ex), rows);
    for (int k = 0; k < 2; k++) {
        pp_rt_step_result r;
        OK(pp_rt_executor_step(ex, batch + (size_t)k * rows * 9, 1, &r));
        loss[k] = r.loss;
    }
    pp_rt_executor_destroy(ex);
    pp_sched_destroy(s);
}

Test(runtime_megatron, pprun_trains_on_it_step_k_taking_samples_kB, .timeout = 300)
{
    enum { V = 256, ROWS = 8, S = 8, TOK = 200 };
    int64_t t[TOK];
    for (int i = 0; i < TOK; i++)
        t[i] = (i * i * 7 + 3 * i + 1) % V;
    static const int32_t lens[] = {50, 1, 70, 79};
    static const int64_t ends[] = {1, 2, 3, 4};
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/train", g_dir);
    pp_test_mmidx m = pp_test_mmidx_build(8, t, lens, 4, ends, 4);
    cr_assert_eq(pp_test_mmidx_write(&m, prefix), 0);
    pp_test_mmidx_free(&m);
    pp_test_run_result r = pp_test_run(
        PPRUN " --model tiny --layers 2 --seq 8 --schedule 1f1b --ranks 2 --microbatches 2 "
              "--micro-batch-size 2 --dp 2 --steps 2 --seed 3 --threads 1 --json --data %s",
        prefix);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.err, "Megatron dataset"), "%s", r.err);
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    cr_assert(j, "not JSON: %s", r.out);
    /* the samples the layout says: step k, row r = sample k*ROWS + r; and, as a control, the
     * same rows one sample later, which must give other losses */
    int32_t want[2 * ROWS][S + 1], late[2 * ROWS][S + 1];
    for (int i = 0; i < 2 * ROWS; i++)
        for (int c = 0; c <= S; c++) {
            want[i][c] = (int32_t)t[(i * S + c) % TOK];
            late[i][c] = (int32_t)t[((i + 1) * S + c) % TOK];
        }
    pp_backend_cpu_set_threads(1); /* pprun --threads 1 */
    float loss[2], other[2];
    executor_losses(&want[0][0], ROWS, loss);
    executor_losses(&late[0][0], ROWS, other);
    /* Equal to two float ulps (2e-7 relative), not bit for bit: with OPENBLAS_CORETYPE=Haswell
     * on an AVX-512 machine pprun's process and this one got step 2's loss 2e-8 apart
     * (5.59329855 vs 5.59329844), the same GEMMs rounding differently in the two processes.
     * The samples one later (the control) move this near-uniform tiny model's loss by 6e-5;
     * a control within 2e-6 would say the check cannot tell samples apart. */
    for (int k = 0; k < 2; k++) {
        double got = step_loss(j, (size_t)k), rel = fabs(got - loss[k]) / fabs((double)loss[k]);
        cr_assert_lt(rel, 2e-7,
                     "step %d: pprun's loss %.9g, the executor's on samples %d..%d %.9g", k + 1,
                     got, (double)loss[k], k * ROWS, k * ROWS + ROWS - 1);
        cr_assert_gt(fabs(got - other[k]) / fabs((double)other[k]), 2e-6,
                     "step %d: the control (samples one later) %.9g", k + 1, (double)other[k]);
    }
    json_decref(j);
    pp_test_run_done(&r);
    /* a token past the model's vocabulary: exit 2, naming the file, position and id */
    t[120] = 300;
    pp_test_mmidx big = pp_test_mmidx_build(8, t, lens, 4, ends, 4);
    cr_assert_eq(pp_test_mmidx_write(&big, prefix), 0);
    pp_test_mmidx_free(&big);
    r = pp_test_run(PPRUN " --model tiny --layers 2 --seq 8 --ranks 2 --microbatches 2 "
                          "--micro-batch-size 2 --dp 2 --steps 2 --quiet --data %s",
                    prefix);
    cr_assert_eq(r.code, 2, "stderr: %s", r.err);
    cr_assert(strstr(r.err, "train.bin: token id 300 at position 120 (sequence 2, its token 69) "
                            "is not below the model's vocabulary of 256"),
              "%s", r.err);
    pp_test_run_done(&r);
}
