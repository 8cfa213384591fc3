/* pp_rt_data.h — token streams for training: a text file's bytes, a synthetic stream, or
 * Megatron's indexed dataset (PREFIX.idx + PREFIX.bin). Part of the runtime's public headers
 * (pp_rt.h includes them all); stands alone.
 */
#ifndef PP_RT_DATA_H
#define PP_RT_DATA_H

#include <stdint.h>

#include "pp_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Token streams for training: the bytes of a text file (vocabulary 256), a deterministic
 * synthetic stream from a seed, or the token ids of a Megatron indexed dataset (the model's
 * vocabulary). A batch is `rows` windows of T+1 consecutive tokens (inputs are the first T,
 * targets the last T): for a text each window starts at an offset drawn from the seed; for a
 * Megatron dataset the k-th window drawn is its sample k (below). */
typedef struct pp_rt_data pp_rt_data;

/* Opens the bytes of the file at path as a stream into *out (the file is mapped read-only),
 * freed with pp_rt_data_destroy. Returns PP_OK; PP_ERR_NOTFOUND when there is no such file,
 * PP_ERR_IO when it cannot be read, PP_ERR_INVALID when it is not a regular file or is
 * shorter than 2 bytes. */
pp_status pp_rt_data_open_text(const char *path, uint64_t seed, pp_rt_data **out);
/* A stream over vocab tokens in which each token usually follows from the previous one by a
 * fixed random map (a learnable bigram structure), sometimes not. Creates it into *out,
 * freed with pp_rt_data_destroy. Returns PP_OK, or PP_ERR_INVALID for vocab < 2. */
pp_status pp_rt_data_synthetic(int vocab, uint64_t seed, pp_rt_data **out);
/* Megatron's indexed dataset at PREFIX (PREFIX.idx and PREFIX.bin, as
 * megatron/core/datasets/indexed_dataset.py's IndexedDatasetBuilder writes them: uint8, int8,
 * int16, uint16, int32 or int64 token ids) into *out, both files checked whole now. Samples
 * are GPTDataset's before its shuffle: the sequences concatenated, sample i = tokens
 * [i*s, i*s + s + 1) (s = T), repeating from the start past the end; the k-th window drawn is
 * sample k. With shuffle, epoch e (each of (N-1)/s whole samples, N tokens) is drawn in an
 * order permuted by (seed, e) instead, every sample once per epoch. A token id outside
 * 0..vocab-1 is refused when it is drawn (PP_ERR_INVALID naming the file, position and id).
 * Returns PP_OK; PP_ERR_NOTFOUND for a missing file; PP_ERR_PARSE naming the file and field
 * for a malformed or truncated one; PP_ERR_INVALID for a FIFO or device. */
pp_status pp_rt_data_open_megatron(const char *prefix, int vocab, uint64_t seed, int shuffle,
                                   pp_rt_data **out);
/* What `pprun --data PATH` opens: a Megatron dataset when PATH.idx exists (or PATH is a
 * dataset's .idx or .bin itself, its prefix's .idx existing), else the bytes of PATH.
 * shuffle is for Megatron datasets only (PP_ERR_INVALID for a text). */
pp_status pp_rt_data_open(const char *path, int vocab, uint64_t seed, int shuffle,
                          pp_rt_data **out);
/* "bytes", "synthetic" or "megatron". */
const char *pp_rt_data_format(const pp_rt_data *d);
/* One line on what the stream reads ("Megatron dataset PREFIX (uint16 tokens: 1,234 in 10
 * sequences, 10 documents)") into buf. */
void pp_rt_data_describe(const pp_rt_data *d, char *buf, size_t n);
/* Frees the stream. NULL is a no-op. */
void pp_rt_data_destroy(pp_rt_data *d);
/* Returns the stream's vocabulary (256 for a text). */
int pp_rt_data_vocab(const pp_rt_data *d);
/* Fills out[rows][T+1] (the caller's). Returns PP_OK; PP_ERR_INVALID for rows or T < 1, a
 * text or dataset shorter than T+1 tokens, or a dataset's token outside the vocabulary. */
pp_status pp_rt_data_next(pp_rt_data *d, int rows, int T, int32_t *out);

#ifdef __cplusplus
}
#endif
#endif
