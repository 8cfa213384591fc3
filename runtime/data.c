/* data.c — token streams for training: a text file's bytes (vocabulary 256) or a synthetic
 * stream derived from a seed. Windows of T+1 tokens start at offsets drawn from a splitmix64
 * generator seeded by the caller, so a run is reproducible.
 *
 * Not here: tokenizers beyond bytes, sharded or memory-mapped corpora, epochs and shuffling
 * without replacement.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"

struct pp_rt_data {
    int vocab;
    uint64_t rng;
    /* text: the file's bytes */
    unsigned char *text;
    size_t len;
    /* synthetic: next[t] is the usual successor of token t; prev carries the stream on */
    int32_t *next;
    int32_t prev;
};

/* splitmix64 (Steele, Lea, Flood 2014): a full-period 64-bit generator, good enough to pick
 * offsets and tokens. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
    return rng_next(s) % n;
}

pp_status pp_rt_data_open_text(const char *path, uint64_t seed, pp_rt_data **out)
{
    *out = NULL;
    char *bytes = NULL;
    size_t len = 0;
    pp_status st = pp_file_read(path, &bytes, &len);
    if (st != PP_OK) {
        char why[256]; /* copied: PP_ERR below rewrites the message pp_err_text points to */
        snprintf(why, sizeof why, "%s", pp_err_text());
        return PP_ERR(PP_ERR_IO, "cannot read the data file %s", why);
    }
    if (len < 2) {
        free(bytes);
        return PP_ERR(PP_ERR_INVALID, "data file \"%s\" has %zu bytes; at least 2 are needed", path,
                      len);
    }
    pp_rt_data *d = pp_calloc(1, sizeof *d);
    if (!d) {
        free(bytes);
        return PP_ERR_NOMEM;
    }
    d->vocab = 256;
    d->rng = seed;
    d->text = (unsigned char *)bytes;
    d->len = len;
    *out = d;
    return PP_OK;
}

pp_status pp_rt_data_synthetic(int vocab, uint64_t seed, pp_rt_data **out)
{
    *out = NULL;
    if (vocab < 2)
        return PP_ERR(PP_ERR_INVALID, "synthetic data needs a vocabulary of at least 2, got %d",
                      vocab);
    pp_rt_data *d = pp_calloc(1, sizeof *d);
    if (d)
        d->next = pp_calloc((size_t)vocab, sizeof *d->next);
    if (!d || !d->next) {
        free(d);
        return PP_ERR_NOMEM;
    }
    d->vocab = vocab;
    d->rng = seed;
    for (int t = 0; t < vocab; t++)
        d->next[t] = (int32_t)rng_below(&d->rng, (uint64_t)vocab);
    d->prev = (int32_t)rng_below(&d->rng, (uint64_t)vocab);
    *out = d;
    return PP_OK;
}

void pp_rt_data_destroy(pp_rt_data *d)
{
    if (!d)
        return;
    free(d->text);
    free(d->next);
    free(d);
}

int pp_rt_data_vocab(const pp_rt_data *d)
{
    return d->vocab;
}

/* Three times in four the successor map, otherwise a uniform token: entropy well below
 * log(vocab), so a model that learns the map shows a falling loss. */
static int32_t synthetic_token(pp_rt_data *d)
{
    uint64_t r = rng_next(&d->rng);
    int32_t t = (r & 3) ? d->next[d->prev] : (int32_t)((r >> 2) % (uint64_t)d->vocab);
    d->prev = t;
    return t;
}

pp_status pp_rt_data_next(pp_rt_data *d, int rows, int T, int32_t *out)
{
    if (rows < 1 || T < 1)
        return PP_ERR(PP_ERR_INVALID, "a batch needs rows >= 1 and T >= 1, got %d and %d", rows, T);
    size_t w = (size_t)T + 1;
    if (d->text && d->len < w)
        return PP_ERR(PP_ERR_INVALID,
                      "the data file has %zu bytes, fewer than one window of T+1 = %zu tokens",
                      d->len, w);
    for (int r = 0; r < rows; r++) {
        int32_t *row = out + (size_t)r * w;
        if (d->text) {
            size_t off = (size_t)rng_below(&d->rng, (uint64_t)(d->len - w + 1));
            for (size_t i = 0; i < w; i++)
                row[i] = d->text[off + i];
        } else {
            for (size_t i = 0; i < w; i++)
                row[i] = synthetic_token(d);
        }
    }
    return PP_OK;
}
