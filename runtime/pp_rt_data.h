/* pp_rt_data.h — token streams for training: a text file's bytes or a synthetic stream.
 * Part of the runtime's public headers (pp_rt.h includes them all); stands alone.
 */
#ifndef PP_RT_DATA_H
#define PP_RT_DATA_H

#include <stdint.h>

#include "pp_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Token streams for training: the bytes of a text file (vocabulary 256), or a deterministic
 * synthetic stream from a seed. A batch is `rows` windows of T+1 consecutive tokens (inputs
 * are the first T, targets the last T), each window starting at an offset drawn from the seed. */
typedef struct pp_rt_data pp_rt_data;

/* Opens the bytes of the file at path as a stream into *out (the whole file is read now: the
 * stream owns its copy), freed with pp_rt_data_destroy. Returns PP_OK; PP_ERR_IO when the
 * file cannot be read, PP_ERR_INVALID when it is shorter than 2 bytes. */
pp_status pp_rt_data_open_text(const char *path, uint64_t seed, pp_rt_data **out);
/* A stream over vocab tokens in which each token usually follows from the previous one by a
 * fixed random map (a learnable bigram structure), sometimes not. Creates it into *out,
 * freed with pp_rt_data_destroy. Returns PP_OK, or PP_ERR_INVALID for vocab < 2. */
pp_status pp_rt_data_synthetic(int vocab, uint64_t seed, pp_rt_data **out);
/* Frees the stream. NULL is a no-op. */
void pp_rt_data_destroy(pp_rt_data *d);
/* Returns the stream's vocabulary (256 for a text). */
int pp_rt_data_vocab(const pp_rt_data *d);
/* Fills out[rows][T+1] (the caller's). Returns PP_OK; PP_ERR_INVALID for rows or T < 1, or a
 * text shorter than T+1 tokens. */
pp_status pp_rt_data_next(pp_rt_data *d, int rows, int T, int32_t *out);

#ifdef __cplusplus
}
#endif
#endif
