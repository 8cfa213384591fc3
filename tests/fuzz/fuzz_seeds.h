/* fuzz_seeds.h — the well-formed inputs of each fuzzed format (fuzz_seeds.c). */
#ifndef PP_FUZZ_SEEDS_H
#define PP_FUZZ_SEEDS_H

#include <stddef.h>

#include "pp_common.h"

#define PP_FUZZ_MAX_SEEDS 16

typedef struct {
    int n;
    char *data[PP_FUZZ_MAX_SEEDS]; /* NUL-terminated, owned */
    size_t len[PP_FUZZ_MAX_SEEDS];
} pp_fuzz_seeds;

/* Fills s with the seeds of `format` (a pp_fuzz_targets name; none for an unknown one).
 * pprun: the built pprun, which writes the checkpoint seed (NULL: no checkpoint seed); work: a
 * folder for its file. Release with pp_fuzz_seeds_fini. */
void pp_fuzz_seeds_load(const char *format, const char *pprun, const char *work, pp_fuzz_seeds *s);
void pp_fuzz_seeds_fini(pp_fuzz_seeds *s);

#endif
