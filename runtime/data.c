/* data.c — token streams for training: a text file's bytes (vocabulary 256) or a synthetic
 * stream derived from a seed. Windows of T+1 tokens start at offsets drawn from a splitmix64
 * generator seeded by the caller, so a run is reproducible.
 *
 * A text file is memory-mapped (read-only, private): a corpus of any size costs address space,
 * not a copy in memory, and only a regular file is accepted (a device or pipe is refused, so
 * `--data /dev/zero` cannot fill memory).
 *
 * Not here: tokenizers beyond bytes, sharded corpora, epochs and shuffling without replacement.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pp_rt.h"

struct pp_rt_data {
    int vocab;
    uint64_t rng;
    /* text: the file's bytes, mapped */
    const unsigned char *text;
    size_t len;
    char *path; /* the file, for messages */
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
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0)
        return PP_ERR(PP_ERR_IO, "cannot read the data file %s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return PP_ERR(PP_ERR_INVALID, "data file \"%s\" is not a regular file", path);
    }
    size_t len = (size_t)st.st_size;
    if (len < 2) {
        close(fd);
        return PP_ERR(PP_ERR_INVALID, "data file \"%s\" has %zu bytes; at least 2 are needed", path,
                      len);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED)
        return PP_ERR(PP_ERR_IO, "cannot read the data file %s: %s", path, strerror(err));
    pp_rt_data *d = pp_calloc(1, sizeof *d);
    if (d)
        d->path = pp_strdup(path);
    if (!d || !d->path) {
        free(d);
        munmap(map, len);
        return PP_ERR_NOMEM;
    }
    d->vocab = 256;
    d->rng = seed;
    d->text = map;
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
    if (d->text)
        munmap((void *)d->text, d->len);
    free(d->path);
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
                      "data file \"%s\" has %zu bytes, fewer than one window of T+1 = %zu tokens",
                      d->path, d->len, w);
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
