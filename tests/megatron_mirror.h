/* megatron_mirror.h — a Megatron indexed dataset made in memory exactly as
 * megatron/core/datasets/indexed_dataset.py's IndexedDatasetBuilder writes it
 * (add_document per document, or add_item per sequence and end_document, then finalize), for
 * the tests and the fuzz seeds: .bin the token ids one sequence after another in the dtype's
 * little-endian bytes; .idx the magic "MMIDIDX\0\0", u64 version 1, u8 dtype code, u64
 * sequence count, u64 document-index count, int32 sequence lengths, int64 byte pointers,
 * int64 document indices (0, then the sequence count after each document).
 * tests/py/test_megatron.py checks pprun's reader against the real builder. Header-only. */
#ifndef PP_TEST_MEGATRON_MIRROR_H
#define PP_TEST_MEGATRON_MIRROR_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned char *idx, *bin; /* malloc'd */
    size_t idx_len, bin_len;
} pp_test_mmidx;

static inline void pp_test_put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* code: Megatron's DType code (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 8 uint16).
 * tokens: all sequences' ids in order; seq_len[n_seq]; doc_end[n_doc]: the number of
 * sequences after each document (as end_document appends len(sequence_lengths)). */
static inline pp_test_mmidx pp_test_mmidx_build(int code, const int64_t *tokens,
                                                const int32_t *seq_len, int n_seq,
                                                const int64_t *doc_end, int n_doc)
{
    static const int sizes[9] = {0, 1, 1, 2, 4, 8, 8, 4, 2};
    int size = sizes[code];
    size_t n_tok = 0;
    for (int j = 0; j < n_seq; j++)
        n_tok += (size_t)seq_len[j];
    pp_test_mmidx m = {0};
    m.bin_len = n_tok * (size_t)size;
    m.bin = malloc(m.bin_len ? m.bin_len : 1);
    for (size_t i = 0; i < n_tok; i++)
        pp_test_put_le(m.bin + i * (size_t)size, (uint64_t)tokens[i], size);
    m.idx_len = 34 + 12 * (size_t)n_seq + 8 * ((size_t)n_doc + 1);
    m.idx = calloc(1, m.idx_len);
    unsigned char *p = m.idx;
    memcpy(p, "MMIDIDX\0\0", 9);
    pp_test_put_le(p + 9, 1, 8);
    p[17] = (unsigned char)code;
    pp_test_put_le(p + 18, (uint64_t)n_seq, 8);
    pp_test_put_le(p + 26, (uint64_t)n_doc + 1, 8);
    p += 34;
    for (int j = 0; j < n_seq; j++, p += 4)
        pp_test_put_le(p, (uint64_t)(uint32_t)seq_len[j], 4);
    uint64_t ptr = 0;
    for (int j = 0; j < n_seq; j++, p += 8) {
        pp_test_put_le(p, ptr, 8);
        ptr += (uint64_t)seq_len[j] * (uint64_t)size;
    }
    pp_test_put_le(p, 0, 8); /* document_indices starts with 0 */
    p += 8;
    for (int k = 0; k < n_doc; k++, p += 8)
        pp_test_put_le(p, (uint64_t)doc_end[k], 8);
    return m;
}

/* Writes PREFIX.idx and PREFIX.bin; 0 on success. */
static inline int pp_test_mmidx_write(const pp_test_mmidx *m, const char *prefix)
{
    char path[1024];
    int rc = 0;
    const char *ext[2] = {".idx", ".bin"};
    const unsigned char *data[2] = {m->idx, m->bin};
    size_t len[2] = {m->idx_len, m->bin_len};
    for (int f = 0; f < 2; f++) {
        snprintf(path, sizeof path, "%s%s", prefix, ext[f]);
        FILE *fp = fopen(path, "wb");
        rc |= !fp || fwrite(data[f], 1, len[f], fp) != len[f];
        rc |= fp && fclose(fp) != 0;
    }
    return rc;
}

static inline void pp_test_mmidx_free(pp_test_mmidx *m)
{
    free(m->idx);
    free(m->bin);
    memset(m, 0, sizeof *m);
}

#endif
