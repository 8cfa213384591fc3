/* io_tool.c — pp_io_tool: the runtime's file-format readers and writers as a command, for the
 * tests that hold them against the Python packages of the formats (tests/py/): safetensors
 * files copied through pp_st_open and pp_st_write (the copy of a file the reference wrote must
 * be that file again), a shape check, a listing; Megatron datasets read sample by sample with
 * pprun's reader.
 *
 *   pp_io_tool st-copy IN OUT [--as keep|f32|bf16|f16] [--shard BYTES] [--meta KEY=VALUE]...
 *       IN a file, folder or index; OUT a file, or with --shard a folder of shards (made if
 *       missing); tensors in name order, each stored as its own dtype (keep) or the one given
 *   pp_io_tool st-list IN            "NAME DTYPE [D0, D1] FILE" per tensor
 *   pp_io_tool st-expect IN NAME D0,D1,...
 *   pp_io_tool data-samples PATH VOCAB SEQ COUNT [--shuffle SEED]
 *       COUNT samples of SEQ+1 token ids, one line each, as pprun --data PATH draws them
 *
 * Exit 0; 2 with one line on stderr for bad input (what the library says); 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pp_rt.h"

static int fail(pp_status st)
{
    fprintf(stderr, "pp_io_tool: %s\n", pp_err_text());
    return st == PP_ERR_NOMEM || st == PP_ERR_IO ? 1 : 2;
}

static int usage(void)
{
    fputs("usage: pp_io_tool st-copy IN OUT [--as keep|f32|bf16|f16] [--shard BYTES] "
          "[--meta K=V]... | st-list IN | st-expect IN NAME D0,D1,... | data-samples PATH VOCAB "
          "SEQ COUNT [--shuffle SEED]\n",
          stderr);
    return 2;
}

static int parse_as(const char *s, pp_st_dtype *d, int *keep)
{
    *keep = !strcmp(s, "keep");
    if (*keep)
        return 1;
    *d = !strcmp(s, "f32") ? PP_ST_F32 : !strcmp(s, "bf16") ? PP_ST_BF16 : PP_ST_F16;
    return !strcmp(s, "f32") || !strcmp(s, "bf16") || !strcmp(s, "f16");
}

static int st_copy(int argc, char **argv)
{
    if (argc < 4)
        return usage();
    const char *in = argv[2], *out = argv[3];
    pp_st_dtype as = PP_ST_F32;
    int keep = 1, n_meta = 0;
    unsigned long long shard = 0;
    pp_st_meta meta[16];
    for (int i = 4; i < argc; i += 2) {
        if (i + 1 >= argc)
            return usage();
        if (!strcmp(argv[i], "--as") && parse_as(argv[i + 1], &as, &keep))
            continue;
        if (!strcmp(argv[i], "--shard") && (shard = strtoull(argv[i + 1], NULL, 10)) > 0)
            continue;
        char *eq = strchr(argv[i + 1], '=');
        if (strcmp(argv[i], "--meta") || !eq || n_meta == 16)
            return usage();
        *eq = '\0';
        meta[n_meta++] = (pp_st_meta){argv[i + 1], eq + 1};
    }
    pp_st *st;
    pp_status s = pp_st_open(in, &st);
    if (s != PP_OK)
        return fail(s);
    size_t n = pp_st_count(st);
    pp_st_out *t = calloc(n ? n : 1, sizeof *t);
    float **data = calloc(n ? n : 1, sizeof *data);
    for (size_t i = 0; s == PP_OK && i < n; i++) {
        const pp_st_tensor *x = pp_st_at(st, i);
        data[i] = malloc(x->numel ? x->numel * sizeof(float) : 1);
        s = data[i] ? pp_st_load_f32(st, x, data[i]) : PP_ERR_NOMEM;
        t[i] = (pp_st_out){x->name, keep ? x->dtype : as, x->ndim, x->shape, data[i]};
    }
    if (s == PP_OK && shard) {
        mkdir(out, 0755);
        s = pp_st_write_sharded(out, t, (int)n, meta, n_meta, shard, NULL);
    } else if (s == PP_OK) {
        s = pp_st_write(out, t, (int)n, meta, n_meta);
    }
    for (size_t i = 0; i < n; i++)
        free(data[i]);
    free(data);
    free(t);
    int rc = s == PP_OK ? 0 : fail(s);
    pp_st_destroy(st);
    return rc;
}

static int st_list(const char *in)
{
    pp_st *st;
    pp_status s = pp_st_open(in, &st);
    if (s != PP_OK)
        return fail(s);
    for (size_t i = 0; i < pp_st_count(st); i++) {
        const pp_st_tensor *t = pp_st_at(st, i);
        printf("%s %s [", t->name, pp_st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            printf("%s%lld", d ? ", " : "", (long long)t->shape[d]);
        printf("] %s\n", t->file);
    }
    pp_st_destroy(st);
    return 0;
}

static int st_expect(const char *in, const char *name, const char *dims)
{
    int64_t shape[PP_ST_MAX_DIMS];
    int nd = 0;
    for (const char *p = dims; *p;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || nd == PP_ST_MAX_DIMS || (*end && *end != ','))
            return usage();
        shape[nd++] = v;
        p = *end ? end + 1 : end;
    }
    pp_st *st;
    pp_status s = pp_st_open(in, &st);
    if (s == PP_OK)
        s = pp_st_expect(st, name, nd, shape, NULL);
    int rc = s == PP_OK ? 0 : fail(s);
    pp_st_destroy(st);
    return rc;
}

static int data_samples(int argc, char **argv)
{
    if (argc != 6 && argc != 8)
        return usage();
    int vocab = atoi(argv[3]), seq = atoi(argv[4]), count = atoi(argv[5]);
    int shuffle = argc == 8 && !strcmp(argv[6], "--shuffle");
    uint64_t seed = shuffle ? strtoull(argv[7], NULL, 10) : 1;
    if (vocab < 1 || seq < 1 || count < 0 || (argc == 8 && !shuffle))
        return usage();
    pp_rt_data *d;
    pp_status s = pp_rt_data_open(argv[2], vocab, seed, shuffle, &d);
    if (s != PP_OK)
        return fail(s);
    int32_t *row = malloc(((size_t)seq + 1) * sizeof *row);
    for (int i = 0; s == PP_OK && i < count; i++) {
        s = pp_rt_data_next(d, 1, seq, row);
        for (int j = 0; s == PP_OK && j <= seq; j++)
            printf("%s%d", j ? " " : "", row[j]);
        if (s == PP_OK)
            putchar('\n');
    }
    free(row);
    pp_rt_data_destroy(d);
    return s == PP_OK ? 0 : fail(s);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    const char *cmd = argv[1];
    if (!strcmp(cmd, "st-copy"))
        return st_copy(argc, argv);
    if (!strcmp(cmd, "st-list") && argc == 3)
        return st_list(argv[2]);
    if (!strcmp(cmd, "st-expect") && argc == 5)
        return st_expect(argv[2], argv[3], argv[4]);
    if (!strcmp(cmd, "data-samples"))
        return data_samples(argc, argv);
    return usage();
}
