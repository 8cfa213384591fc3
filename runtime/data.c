/* data.c — token streams for training, one row of the kinds table each: a text file's bytes
 * (vocabulary 256) in windows of T+1 tokens at offsets drawn from a splitmix64 generator
 * seeded by the caller; a synthetic stream derived from a seed; Megatron's indexed dataset
 * (data_megatron.c), read in order or shuffled by the seed. A run is reproducible.
 *
 * A text file is memory-mapped (read-only, private): a corpus of any size costs address space,
 * not a copy in memory, and only a regular file is accepted (a device or pipe is refused, so
 * `--data /dev/zero` cannot fill memory, and a FIFO cannot block the open).
 *
 * Not here: tokenizers beyond bytes, epochs and shuffling without replacement of a text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_impl.h"
#include "pp_rt.h"

typedef struct data_kind data_kind;

struct pp_rt_data {
    const data_kind *kind;
    int vocab;
    uint64_t rng, seed;
    /* text: the file's bytes, mapped */
    const unsigned char *text;
    size_t len;
    char *path; /* the file, for messages */
    /* synthetic: next[t] is the usual successor of token t; prev carries the stream on */
    int32_t *next;
    int32_t prev;
    /* megatron */
    pp_rt_mmidx *mm;
    int shuffle;
};

/* One kind of stream: its name (pp_rt_data_format) and how it fills a row of w tokens. */
struct data_kind {
    const char *name;
    pp_status (*row)(pp_rt_data *d, size_t w, int32_t *row);
};

/* splitmix64 (Steele, Lea, Flood 2014): a full-period 64-bit generator, good enough to pick
 * offsets and tokens. */
uint64_t pp_rt_data_splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
    return pp_rt_data_splitmix(s) % n;
}

static pp_status text_row(pp_rt_data *d, size_t w, int32_t *row)
{
    if (d->len < w)
        return PP_ERR(PP_ERR_INVALID,
                      "data file \"%s\" has %zu bytes, fewer than one window of T+1 = %zu tokens",
                      d->path, d->len, w);
    size_t off = (size_t)rng_below(&d->rng, (uint64_t)(d->len - w + 1));
    for (size_t i = 0; i < w; i++)
        row[i] = d->text[off + i];
    return PP_OK;
}

/* Three times in four the successor map, otherwise a uniform token: entropy well below
 * log(vocab), so a model that learns the map shows a falling loss. */
static pp_status synthetic_row(pp_rt_data *d, size_t w, int32_t *row)
{
    for (size_t i = 0; i < w; i++) {
        uint64_t r = pp_rt_data_splitmix(&d->rng);
        int32_t t = (r & 3) ? d->next[d->prev] : (int32_t)((r >> 2) % (uint64_t)d->vocab);
        d->prev = t;
        row[i] = t;
    }
    return PP_OK;
}

static pp_status megatron_row(pp_rt_data *d, size_t w, int32_t *row)
{
    return pp_rt_mmidx_row(d->mm, d->shuffle, d->seed, w, row);
}

static const data_kind kinds[] = {
    {"bytes", text_row},
    {"synthetic", synthetic_row},
    {"megatron", megatron_row},
};
enum { KIND_TEXT, KIND_SYNTHETIC, KIND_MEGATRON };

static pp_rt_data *data_new(int kind, int vocab, uint64_t seed)
{
    pp_rt_data *d = pp_calloc(1, sizeof *d);
    if (d) {
        d->kind = &kinds[kind];
        d->vocab = vocab;
        d->rng = d->seed = seed;
    }
    return d;
}

pp_status pp_rt_data_open_text(const char *path, uint64_t seed, pp_rt_data **out)
{
    *out = NULL;
    int fd;
    uint64_t size;
    pp_status st = pp_file_open_regular(path, &fd, &size);
    if (st != PP_OK) {
        char why[512]; /* the message is rewritten below: copy it out first */
        snprintf(why, sizeof why, "%s", pp_err_text());
        return PP_ERR(st, "cannot read the data file %s", why);
    }
    size_t len = (size_t)size;
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
    pp_rt_data *d = data_new(KIND_TEXT, 256, seed);
    if (d)
        d->path = pp_strdup(path);
    if (!d || !d->path) {
        free(d);
        munmap(map, len);
        return PP_ERR_NOMEM;
    }
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
    pp_rt_data *d = data_new(KIND_SYNTHETIC, vocab, seed);
    if (d)
        d->next = pp_calloc((size_t)vocab, sizeof *d->next);
    if (!d || !d->next) {
        free(d);
        return PP_ERR_NOMEM;
    }
    for (int t = 0; t < vocab; t++)
        d->next[t] = (int32_t)rng_below(&d->rng, (uint64_t)vocab);
    d->prev = (int32_t)rng_below(&d->rng, (uint64_t)vocab);
    *out = d;
    return PP_OK;
}

pp_status pp_rt_data_open_megatron(const char *prefix, int vocab, uint64_t seed, int shuffle,
                                   pp_rt_data **out)
{
    *out = NULL;
    pp_rt_mmidx *mm;
    PP_TRY(pp_rt_mmidx_open(prefix, vocab, &mm));
    pp_rt_data *d = data_new(KIND_MEGATRON, vocab, seed);
    if (!d) {
        pp_rt_mmidx_destroy(mm);
        return PP_ERR_NOMEM;
    }
    d->mm = mm;
    d->shuffle = shuffle;
    *out = d;
    return PP_OK;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

pp_status pp_rt_data_open(const char *path, int vocab, uint64_t seed, int shuffle, pp_rt_data **out)
{
    *out = NULL;
    size_t n = strlen(path);
    char *prefix = pp_calloc(n + 5, 1);
    if (!prefix)
        return PP_ERR_NOMEM;
    /* PATH.idx beside PATH.bin; or PATH naming one of the pair itself */
    snprintf(prefix, n + 5, "%s.idx", path);
    int megatron = exists(prefix);
    memcpy(prefix, path, n + 1);
    if (!megatron && n > 4 && (!strcmp(path + n - 4, ".idx") || !strcmp(path + n - 4, ".bin"))) {
        memcpy(prefix + n - 4, ".idx", 5);
        megatron = exists(prefix);
        prefix[n - 4] = '\0';
    }
    pp_status st;
    if (megatron)
        st = pp_rt_data_open_megatron(prefix, vocab, seed, shuffle, out);
    else if (shuffle)
        st = PP_ERR(PP_ERR_INVALID,
                    "shuffling is for a Megatron dataset (no %s.idx); the windows of a text file "
                    "start at offsets drawn from the seed already",
                    path);
    else
        st = pp_rt_data_open_text(path, seed, out);
    free(prefix);
    return st;
}

void pp_rt_data_destroy(pp_rt_data *d)
{
    if (!d)
        return;
    if (d->text)
        munmap((void *)d->text, d->len);
    pp_rt_mmidx_destroy(d->mm);
    free(d->path);
    free(d->next);
    free(d);
}

int pp_rt_data_vocab(const pp_rt_data *d)
{
    return d->vocab;
}

const char *pp_rt_data_format(const pp_rt_data *d)
{
    return d->kind->name;
}

void pp_rt_data_describe(const pp_rt_data *d, char *buf, size_t n)
{
    if (d->mm)
        pp_rt_mmidx_describe(d->mm, buf, n);
    else if (d->text)
        snprintf(buf, n, "the bytes of %s (%zu)", d->path, d->len);
    else
        snprintf(buf, n, "a synthetic stream over %d tokens", d->vocab);
}

pp_status pp_rt_data_next(pp_rt_data *d, int rows, int T, int32_t *out)
{
    if (rows < 1 || T < 1)
        return PP_ERR(PP_ERR_INVALID, "a batch needs rows >= 1 and T >= 1, got %d and %d", rows, T);
    size_t w = (size_t)T + 1;
    for (int r = 0; r < rows; r++)
        PP_TRY(d->kind->row(d, w, out + (size_t)r * w));
    return PP_OK;
}
