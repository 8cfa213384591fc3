/* data_megatron.c — Megatron-LM's indexed dataset (PREFIX.idx + PREFIX.bin), as
 * megatron/core/datasets/indexed_dataset.py writes it (IndexedDatasetBuilder, _IndexWriter):
 *
 *   .idx  9 bytes magic "MMIDIDX\0\0", u64 version 1, u8 dtype code (DType: 1 uint8, 2 int8,
 *         3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16), u64 sequence count S,
 *         u64 document count D, int32 sequence_lengths[S], int64 sequence_pointers[S] (byte
 *         offsets into .bin), int64 document_indices[D] (0, then the sequence index ending each
 *         document), and int8 modes[S] only in multimodal datasets. All little-endian.
 *   .bin  the sequences' token ids, one after another.
 *
 * Samples are laid out as GPTDataset lays them out before it shuffles
 * (megatron/core/datasets/gpt_dataset.py with helpers.cpp build_sample_idx): the sequences
 * concatenated in order, sample i its tokens [i*s, i*s + s + 1) (s + 1 so that the targets are
 * the inputs shifted by one; consecutive samples share one token), the concatenation repeated
 * for further epochs. What differs from Megatron: it shuffles the document order per epoch and
 * the sample order (numpy RandomState), splits train/valid/test, blends datasets and pads the
 * last sample; here the order is sequential, or with shuffle a seeded permutation of each
 * epoch's (N-1)/s whole samples, and a sample that runs past the end wraps to the beginning.
 *
 * Both files are regular files mapped read-only; every count and offset of the index is
 * checked against the index's and the data's sizes before use, and every token against the
 * vocabulary as it is read. Not here: multimodal modes (accepted, ignored), writing datasets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data_impl.h"

#define MAGIC "MMIDIDX\0\0"
#define MAGIC_LEN 9
#define HEADER_LEN 34 /* magic 9 + version 8 + dtype 1 + sequence count 8 + document count 8 */

typedef struct {
    int code;
    const char *name;
    size_t size; /* bytes; 0: not token ids */
    int is_signed;
} token_type;

/* Megatron's DType enum (indexed_dataset.py). */
static const token_type types[] = {
    {1, "uint8", 1, 0}, {2, "int8", 1, 1},    {3, "int16", 2, 1},   {4, "int32", 4, 1},
    {5, "int64", 8, 1}, {6, "float64", 0, 0}, {7, "float32", 0, 0}, {8, "uint16", 2, 0},
};

struct pp_rt_mmidx {
    char *prefix, *idx_path, *bin_path;
    const unsigned char *idx, *bin; /* mapped */
    uint64_t idx_len, bin_len;
    const token_type *type;
    uint64_t n_seq, n_doc, n_tokens;
    int vocab;
    uint64_t sample, pos; /* the next sample (shuffle) and its first token (in order) */
};

static uint64_t rd_le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

static int64_t seq_len(const pp_rt_mmidx *m, uint64_t j)
{
    return (int32_t)(uint32_t)rd_le(m->idx + HEADER_LEN + 4 * j, 4);
}

static int64_t seq_ptr(const pp_rt_mmidx *m, uint64_t j)
{
    return (int64_t)rd_le(m->idx + HEADER_LEN + 4 * m->n_seq + 8 * j, 8);
}

static int64_t doc_idx(const pp_rt_mmidx *m, uint64_t k)
{
    return (int64_t)rd_le(m->idx + HEADER_LEN + 12 * m->n_seq + 8 * k, 8);
}

static pp_status map_file(const char *path, const unsigned char **map, uint64_t *len)
{
    int fd;
    PP_TRY(pp_file_open_regular(path, &fd, len));
    if (*len == 0) {
        close(fd);
        return PP_ERR(PP_ERR_PARSE, "%s: empty", path);
    }
    void *p = mmap(NULL, (size_t)*len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return PP_ERR(PP_ERR_IO, "%s: cannot map it for reading", path);
    *map = p;
    return PP_OK;
}

/* Magic, version, dtype, and the counts against the index's size. */
static pp_status check_header(pp_rt_mmidx *m)
{
    const char *f = m->idx_path;
    if (m->idx_len < HEADER_LEN || memcmp(m->idx, MAGIC, MAGIC_LEN))
        return PP_ERR(
            PP_ERR_PARSE,
            "%s: not a Megatron index: it does not start with the magic \"MMIDIDX\\0\\0\" "
            "and a 34-byte header (megatron/core/datasets/indexed_dataset.py)",
            f);
    uint64_t version = rd_le(m->idx + 9, 8);
    if (version != 1)
        return PP_ERR(PP_ERR_PARSE, "%s: version %llu, expected 1", f, (unsigned long long)version);
    int code = m->idx[17];
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].code == code)
            m->type = &types[i];
    if (!m->type || !m->type->size)
        return PP_ERR(PP_ERR_PARSE,
                      "%s: dtype code %d%s%s, expected token ids (1 uint8, 2 int8, "
                      "3 int16, 4 int32, 5 int64, 8 uint16)",
                      f, code, m->type ? " is " : "", m->type ? m->type->name : "");
    m->n_seq = rd_le(m->idx + 18, 8);
    m->n_doc = rd_le(m->idx + 26, 8);
    uint64_t room = m->idx_len - HEADER_LEN;
    if (m->n_seq > room / 12 || m->n_doc > (room - 12 * m->n_seq) / 8)
        return PP_ERR(PP_ERR_PARSE,
                      "%s: %llu bytes cannot hold the %llu sequences and %llu documents its "
                      "header counts",
                      f, (unsigned long long)m->idx_len, (unsigned long long)m->n_seq,
                      (unsigned long long)m->n_doc);
    uint64_t need = HEADER_LEN + 12 * m->n_seq + 8 * m->n_doc;
    if (m->idx_len != need && m->idx_len != need + m->n_seq)
        return PP_ERR(PP_ERR_PARSE,
                      "%s: %llu bytes; %llu sequences and %llu documents take %llu (or %llu with "
                      "multimodal modes)",
                      f, (unsigned long long)m->idx_len, (unsigned long long)m->n_seq,
                      (unsigned long long)m->n_doc, (unsigned long long)need,
                      (unsigned long long)(need + m->n_seq));
    if (m->n_doc < 1)
        return PP_ERR(PP_ERR_PARSE, "%s: 0 document indices; the list starts with 0", f);
    return PP_OK;
}

/* The sequences lie one after another from byte 0 (what _IndexWriter._sequence_pointers
 * writes), and the data file holds exactly their tokens. */
static pp_status check_sequences(pp_rt_mmidx *m)
{
    uint64_t at = 0, size = m->type->size;
    for (uint64_t j = 0; j < m->n_seq; j++) {
        int64_t len = seq_len(m, j), ptr = seq_ptr(m, j);
        if (len < 0)
            return PP_ERR(PP_ERR_PARSE, "%s: sequence %llu: length %lld, expected >= 0",
                          m->idx_path, (unsigned long long)j, (long long)len);
        if (ptr < 0 || (uint64_t)ptr != at)
            return PP_ERR(PP_ERR_PARSE,
                          "%s: sequence %llu: pointer %lld, expected %llu (the sequences are "
                          "stored one after another)",
                          m->idx_path, (unsigned long long)j, (long long)ptr,
                          (unsigned long long)at);
        if ((uint64_t)len > (m->bin_len - at) / size)
            return PP_ERR(PP_ERR_PARSE,
                          "%s: %llu bytes, fewer than the index %s describes: sequence %llu "
                          "(%lld %s tokens at byte %llu) runs past its end (truncated?)",
                          m->bin_path, (unsigned long long)m->bin_len, m->idx_path,
                          (unsigned long long)j, (long long)len, m->type->name,
                          (unsigned long long)at);
        at += (uint64_t)len * size;
    }
    if (at != m->bin_len)
        return PP_ERR(PP_ERR_PARSE,
                      "%s: %llu bytes, the index %s describes %llu (%llu %s tokens): not the "
                      "data of this index",
                      m->bin_path, (unsigned long long)m->bin_len, m->idx_path,
                      (unsigned long long)at, (unsigned long long)(at / size), m->type->name);
    m->n_tokens = at / size;
    if (m->n_tokens == 0)
        return PP_ERR(PP_ERR_PARSE, "%s: no tokens", m->idx_path);
    return PP_OK;
}

/* document_indices: 0, non-decreasing, ending at the sequence count. */
static pp_status check_documents(const pp_rt_mmidx *m)
{
    int64_t prev = 0;
    for (uint64_t k = 0; k < m->n_doc; k++) {
        int64_t d = doc_idx(m, k);
        int bad = k == 0 ? d != 0 : d < prev || (uint64_t)d > m->n_seq;
        if (bad || (k == m->n_doc - 1 && (uint64_t)d != m->n_seq))
            return PP_ERR(PP_ERR_PARSE,
                          "%s: document index %llu is %lld; expected 0 first, then "
                          "non-decreasing sequence indices ending at %llu",
                          m->idx_path, (unsigned long long)k, (long long)d,
                          (unsigned long long)m->n_seq);
        prev = d;
    }
    return PP_OK;
}

void pp_rt_mmidx_destroy(pp_rt_mmidx *m)
{
    if (!m)
        return;
    if (m->idx)
        munmap((void *)m->idx, (size_t)m->idx_len);
    if (m->bin)
        munmap((void *)m->bin, (size_t)m->bin_len);
    free(m->prefix);
    free(m->idx_path);
    free(m->bin_path);
    free(m);
}

pp_status pp_rt_mmidx_open(const char *prefix, int vocab, pp_rt_mmidx **out)
{
    *out = NULL;
    if (vocab < 1)
        return PP_ERR(PP_ERR_INVALID, "a vocabulary of %d tokens", vocab);
    pp_rt_mmidx *m = pp_calloc(1, sizeof *m);
    if (!m)
        return PP_ERR_NOMEM;
    m->vocab = vocab;
    m->prefix = pp_strdup(prefix);
    m->idx_path = pp_strjoin(prefix, ".idx", "");
    m->bin_path = pp_strjoin(prefix, ".bin", "");
    pp_status s = m->prefix && m->idx_path && m->bin_path ? PP_OK : PP_ERR_NOMEM;
    if (s == PP_OK)
        s = map_file(m->idx_path, &m->idx, &m->idx_len);
    if (s == PP_OK)
        s = check_header(m);
    if (s == PP_OK)
        s = map_file(m->bin_path, &m->bin, &m->bin_len);
    if (s == PP_OK)
        s = check_sequences(m);
    if (s == PP_OK)
        s = check_documents(m);
    if (s != PP_OK) {
        pp_rt_mmidx_destroy(m);
        return pp_err_trace(s, __FILE__, __LINE__);
    }
    *out = m;
    return PP_OK;
}

/* The sequence holding token position pos (binary search over the pointers). */
static uint64_t sequence_of(const pp_rt_mmidx *m, uint64_t pos)
{
    uint64_t lo = 0, hi = m->n_seq, byte = pos * m->type->size;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)seq_ptr(m, mid) <= byte)
            lo = mid;
        else
            hi = mid;
    }
    return lo; /* the last with a pointer <= byte: an empty sequence before it shares its pointer */
}

static pp_status token(const pp_rt_mmidx *m, uint64_t pos, int32_t *out)
{
    size_t size = m->type->size;
    uint64_t u = rd_le(m->bin + pos * size, size);
    int64_t v = (int64_t)u;
    if (m->type->is_signed && size < 8 && (u >> (8 * size - 1)) & 1)
        v = (int64_t)(u | ~((UINT64_C(1) << (8 * size)) - 1)); /* sign-extend */
    if (v < 0 || v >= m->vocab) {
        uint64_t j = sequence_of(m, pos);
        return PP_ERR(PP_ERR_INVALID,
                      "%s: token id %lld at position %llu (sequence %llu, its token %llu) is not "
                      "below the model's vocabulary of %d",
                      m->bin_path, (long long)v, (unsigned long long)pos, (unsigned long long)j,
                      (unsigned long long)(pos - (uint64_t)seq_ptr(m, j) / size), m->vocab);
    }
    *out = (int32_t)v;
    return PP_OK;
}

/* A bijection of [0, n): a 4-round Feistel network on the smallest even number of bits that
 * covers n, walking the cycle until the image falls below n (Black and Rogaway 2002, "Ciphers
 * with arbitrary finite domains"). No table: any epoch of any size costs nothing to set up. */
static uint64_t permute(uint64_t j, uint64_t n, uint64_t key)
{
    if (n <= 1)
        return 0;
    int bits = 64 - __builtin_clzll(n - 1);
    bits += bits & 1;
    int half = bits / 2;
    uint64_t mask = half == 32 ? 0xffffffffu : (UINT64_C(1) << half) - 1;
    do {
        uint64_t l = j >> half, r = j & mask;
        for (uint64_t round = 0; round < 4; round++) {
            uint64_t s = key ^ (round << 56) ^ r;
            uint64_t f = pp_rt_data_splitmix(&s) & mask, t = r;
            r = l ^ f;
            l = t;
        }
        j = l << half | r;
    } while (j >= n);
    return j;
}

pp_status pp_rt_mmidx_row(pp_rt_mmidx *m, int shuffle, uint64_t seed, size_t w, int32_t *row)
{
    uint64_t n = m->n_tokens, s = w - 1;
    if (w < 2 || n < w)
        return PP_ERR(PP_ERR_INVALID,
                      "%s: %llu tokens, fewer than one sample of s+1 = %zu (--seq %zu)", m->prefix,
                      (unsigned long long)n, w, w - 1);
    uint64_t start;
    if (shuffle) {
        uint64_t per_epoch = (n - 1) / s, epoch = m->sample / per_epoch;
        uint64_t k = seed ^ (epoch * 0x9e3779b97f4a7c15ull);
        start = permute(m->sample % per_epoch, per_epoch, pp_rt_data_splitmix(&k)) * s;
    } else {
        start = m->pos;
        m->pos = (m->pos + s % n) % n;
    }
    m->sample++;
    for (size_t i = 0; i < w; i++) {
        uint64_t p = start + i < n ? start + i : (start + i) % n;
        PP_TRY(token(m, p, &row[i]));
    }
    return PP_OK;
}

void pp_rt_mmidx_describe(const pp_rt_mmidx *m, char *buf, size_t n)
{
    char t[32];
    snprintf(buf, n, "Megatron dataset %s (%s tokens: %s in %llu sequences, %llu documents)",
             m->prefix, m->type->name, pp_fmt_grouped((double)m->n_tokens, t, sizeof t),
             (unsigned long long)m->n_seq, (unsigned long long)(m->n_doc - 1));
}
