/* data_impl.h — private to the runtime's data streams: Megatron's indexed dataset
 * (data_megatron.c), which data.c serves through pp_rt_data. */
#ifndef PP_DATA_IMPL_H
#define PP_DATA_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "pp_common.h"

typedef struct pp_rt_mmidx pp_rt_mmidx;

/* Opens PREFIX.idx and PREFIX.bin and checks them whole (no token read yet): the header,
 * the counts against the index's size, every sequence's pointer, the document indices, the
 * data file's size against the tokens the index describes. */
pp_status pp_rt_mmidx_open(const char *prefix, int vocab, pp_rt_mmidx **out);
void pp_rt_mmidx_destroy(pp_rt_mmidx *m);
/* The next sample: w = s + 1 tokens into row (s = w - 1, the sequence length). Without
 * shuffle the k-th call gives tokens [k*s, k*s + s + 1) of the sequences concatenated, the
 * concatenation repeated past its end; with shuffle, sample permute_e(j) of epoch e (j = k mod
 * the samples per epoch). PP_ERR_INVALID for a token outside 0..vocab-1 (naming the file, the
 * sequence, the position and the id) or fewer than w tokens in all. */
pp_status pp_rt_mmidx_row(pp_rt_mmidx *m, int shuffle, uint64_t seed, size_t w, int32_t *row);
/* "megatron dataset PREFIX (uint16 tokens: 1,234 in 10 sequences, 10 documents)" into buf. */
void pp_rt_mmidx_describe(const pp_rt_mmidx *m, char *buf, size_t n);

/* splitmix64 (Steele, Lea, Flood 2014), shared by data.c and data_megatron.c. */
uint64_t pp_rt_data_splitmix(uint64_t *s);

#endif
