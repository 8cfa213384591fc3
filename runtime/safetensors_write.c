/* safetensors_write.c — writing safetensors files the way the reference writer lays them out
 * (safetensors/src/tensor.rs, prepare and serialize: tensors sorted by dtype alignment, largest
 * first, then by name; the header compact JSON as serde_json prints it, padded with spaces to a
 * multiple of 8 bytes), and sharded checkpoints the way huggingface_hub splits them
 * (serialization/_base.py, split_state_dict_into_shards_factory) for transformers'
 * save_pretrained. Each file is written atomically (pp_afile). Values are converted from fp32
 * here; nothing else about the tensors is assumed.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "safetensors_impl.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"

typedef struct {
    const pp_st_out *t;
    uint64_t nbytes;
} out_row;

/* The tensor's element count into *numel; PP_ERR_INVALID naming it when it is not writable. */
static pp_status check_out(const pp_st_out *t, uint64_t *numel)
{
    char shown[256];
    const char *name = t->name ? st_show(t->name, shown, sizeof shown) : "(no name)";
    if (!t->name)
        return PP_ERR(PP_ERR_INVALID, "a tensor to write has no name");
    if (!pp_st_dtype_is_float(t->dtype))
        return PP_ERR(PP_ERR_INVALID,
                      "tensor %s: dtype %s cannot be written from fp32 (F32, "
                      "BF16 or F16 can)",
                      name, pp_st_dtype_name(t->dtype));
    if (t->ndim < 0 || t->ndim > PP_ST_MAX_DIMS || (t->ndim && !t->shape))
        return PP_ERR(PP_ERR_INVALID, "tensor %s: %d dimensions (0..%d)", name, t->ndim,
                      PP_ST_MAX_DIMS);
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0 || (t->shape[i] && n > UINT64_MAX / 8 / (uint64_t)t->shape[i]))
            return PP_ERR(PP_ERR_INVALID, "tensor %s: dimension %d is %lld", name, i,
                          (long long)t->shape[i]);
        n *= (uint64_t)t->shape[i];
    }
    if (n && !t->data)
        return PP_ERR(PP_ERR_INVALID, "tensor %s: no data", name);
    *numel = n;
    return PP_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const out_row *)a)->t->name, ((const out_row *)b)->t->name);
}

/* The reference writer's order: dtype alignment descending (the Dtype enum's order), then
 * name. */
static int by_layout(const void *a, const void *b)
{
    const pp_st_out *x = ((const out_row *)a)->t, *y = ((const out_row *)b)->t;
    if (x->dtype != y->dtype)
        return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* A JSON string as serde_json writes it: ", \ and control characters escaped (\b \f \n \r \t,
 * else \u00xx in lower case), everything else (UTF-8 included) as it is. */
static void put_string(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const char *esc = *p == '"'    ? "\\\""
                          : *p == '\\' ? "\\\\"
                          : *p == '\b' ? "\\b"
                          : *p == '\f' ? "\\f"
                          : *p == '\n' ? "\\n"
                          : *p == '\r' ? "\\r"
                          : *p == '\t' ? "\\t"
                                       : NULL;
        if (esc)
            fputs(esc, fp);
        else if (*p < 0x20)
            fprintf(fp, "\\u%04x", *p);
        else
            fputc(*p, fp);
    }
    fputc('"', fp);
}

/* The header: {"__metadata__":{...},"name":{"dtype":..,"shape":[..],"data_offsets":[b,e]},...}
 * padded with spaces to a multiple of 8, into *text (malloc'd). */
static pp_status make_header(const out_row *rows, int n, const pp_st_meta *meta, int n_meta,
                             char **text, size_t *len)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *fp = open_memstream(&buf, &size);
    if (!fp)
        return PP_ERR_NOMEM;
    fputc('{', fp);
    if (n_meta > 0) {
        fputs("\"__metadata__\":{", fp);
        for (int i = 0; i < n_meta; i++) {
            fputs(i ? "," : "", fp);
            put_string(fp, meta[i].key);
            fputc(':', fp);
            put_string(fp, meta[i].value);
        }
        fputc('}', fp);
    }
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        const pp_st_out *t = rows[i].t;
        fputs(i || n_meta > 0 ? "," : "", fp);
        put_string(fp, t->name);
        fprintf(fp, ":{\"dtype\":\"%s\",\"shape\":[", pp_st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            fprintf(fp, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        fprintf(fp, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at,
                (unsigned long long)(at + rows[i].nbytes));
        at += rows[i].nbytes;
    }
    fputc('}', fp);
    while (ftell(fp) % 8)
        fputc(' ', fp);
    if (fclose(fp) != 0 || !buf) {
        free(buf);
        return PP_ERR_NOMEM;
    }
    if (size > PP_ST_MAX_HEADER) {
        free(buf);
        return PP_ERR(PP_ERR_INVALID,
                      "the header of %d tensors is %zu bytes, more than the %u "
                      "safetensors allows",
                      n, size, PP_ST_MAX_HEADER);
    }
    *text = buf;
    *len = size;
    return PP_OK;
}

/* t's values, converted to its dtype, to fp. */
static int put_data(FILE *fp, const pp_st_out *t, uint64_t numel)
{
    if (t->dtype == PP_ST_F32)
        return numel == 0 || fwrite(t->data, 4, (size_t)numel, fp) == numel;
    uint16_t (*conv)(float) = t->dtype == PP_ST_BF16 ? pp_st_f32_to_bf16 : pp_st_f32_to_f16;
    enum { CHUNK = 16384 };
    uint16_t buf[CHUNK];
    for (uint64_t done = 0; done < numel;) {
        size_t k = numel - done < CHUNK ? (size_t)(numel - done) : CHUNK;
        for (size_t i = 0; i < k; i++)
            buf[i] = conv(t->data[done + i]);
        if (fwrite(buf, 2, k, fp) != k)
            return 0;
        done += k;
    }
    return 1;
}

/* rows[0..n) checked, sized and put in the reference's order. */
static pp_status prepare(const pp_st_out *t, int n, out_row **out)
{
    out_row *rows = pp_calloc(n > 0 ? (size_t)n : 1, sizeof *rows);
    if (!rows)
        return PP_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        uint64_t numel = 0;
        pp_status s = check_out(&t[i], &numel);
        if (s != PP_OK) {
            free(rows);
            return s;
        }
        rows[i] = (out_row){&t[i], numel * pp_st_dtype_size(t[i].dtype)};
    }
    qsort(rows, (size_t)n, sizeof *rows, by_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(rows[i].t->name, rows[i - 1].t->name)) {
            char shown[256];
            pp_status s = PP_ERR(PP_ERR_INVALID, "tensor %s is given twice",
                                 st_show(rows[i].t->name, shown, sizeof shown));
            free(rows);
            return s;
        }
    qsort(rows, (size_t)n, sizeof *rows, by_layout);
    *out = rows;
    return PP_OK;
}

pp_status pp_st_write(const char *path, const pp_st_out *t, int n, const pp_st_meta *meta,
                      int n_meta)
{
    out_row *rows;
    PP_TRY(prepare(t, n, &rows));
    char *header = NULL;
    size_t len = 0;
    pp_status s = make_header(rows, n, meta, n_meta, &header, &len);
    pp_afile af;
    if (s == PP_OK)
        s = pp_afile_open(&af, path);
    if (s != PP_OK) {
        free(rows);
        free(header);
        return pp_err_trace(s, __FILE__, __LINE__);
    }
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)((uint64_t)len >> (8 * i));
    int ok = fwrite(le, 1, 8, af.fp) == 8 && fwrite(header, 1, len, af.fp) == len;
    for (int i = 0; ok && i < n; i++)
        ok = put_data(af.fp, rows[i].t, rows[i].nbytes / pp_st_dtype_size(rows[i].t->dtype));
    free(rows);
    free(header);
    if (!ok) {
        pp_afile_abort(&af);
        return PP_ERR(PP_ERR_IO, "%s: write failed", path);
    }
    PP_TRY(pp_afile_commit(&af));
    return PP_OK;
}

/* ---- sharded ---- */

/* shard[i] for every tensor, numbered as huggingface_hub numbers them: in the order the shards
 * are closed (an oversized tensor's own shard is closed at once, the current one when the
 * next tensor would overflow it or at the end). Returns the number of shards. */
static int split_shards(const pp_st_out *t, int n, uint64_t max, int *shard, uint64_t *total)
{
    int *group = pp_calloc((size_t)n + 1, sizeof *group); /* provisional group -> shard */
    int n_groups = 0, closed = 0, cur = -1;
    uint64_t cur_size = 0;
    *total = 0;
    if (!group)
        return -1;
    for (int i = 0; i < n; i++) {
        uint64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++)
            numel *= (uint64_t)t[i].shape[d];
        uint64_t size = numel * pp_st_dtype_size(t[i].dtype);
        *total += size;
        if (size > max) {
            shard[i] = n_groups;
            group[n_groups++] = closed++;
            continue;
        }
        if (cur >= 0 && cur_size + size > max) {
            group[cur] = closed++;
            cur = -1;
        }
        if (cur < 0) {
            cur = n_groups++;
            cur_size = 0;
        }
        shard[i] = cur;
        cur_size += size;
    }
    if (cur >= 0)
        group[cur] = closed++;
    for (int i = 0; i < n; i++)
        shard[i] = group[shard[i]];
    free(group);
    return closed;
}

static void shard_name(char *buf, size_t n, int k, int of)
{
    if (of == 1)
        snprintf(buf, n, SINGLE_NAME);
    else
        snprintf(buf, n, "model-%05d-of-%05d.safetensors", k + 1, of);
}

/* 1 for "model-DDDDD-of-DDDDD.safetensors". */
static int is_shard_name(const char *s)
{
    static const char pat[] = "model-#####-of-#####.safetensors";
    if (strlen(s) != sizeof pat - 1)
        return 0;
    for (size_t i = 0; pat[i]; i++)
        if (pat[i] == '#' ? (s[i] < '0' || s[i] > '9') : s[i] != pat[i])
            return 0;
    return 1;
}

/* Removes what an earlier save left that this one (of n_shards files) did not write: shards
 * of another count, and the index or single file of the other layout. Regular files only. */
static void remove_stale(const char *dir, int n_shards)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char keep[64];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        int ours = 0;
        for (int k = 0; k < n_shards && !ours && n_shards > 1; k++) {
            shard_name(keep, sizeof keep, k, n_shards);
            ours = !strcmp(name, keep);
        }
        int stale = (is_shard_name(name) && !ours) ||
                    (n_shards == 1 && !strcmp(name, INDEX_NAME)) ||
                    (n_shards > 1 && !strcmp(name, SINGLE_NAME));
        struct stat st;
        if (stale && fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            (void)unlinkat(dirfd(d), name, 0);
    }
    closedir(d);
}

static pp_status write_index(const char *dir, const pp_st_out *t, int n, const int *shard,
                             int n_shards, uint64_t total)
{
    json_t *root = json_object(), *map = json_object(), *meta = json_object();
    pp_status s = root && map && meta ? PP_OK : PP_ERR_NOMEM;
    char name[64];
    for (int i = 0; s == PP_OK && i < n; i++) {
        shard_name(name, sizeof name, shard[i], n_shards);
        if (json_object_set_new(map, t[i].name, json_string(name)) != 0)
            s = PP_ERR(PP_ERR_INVALID, "tensor names must be UTF-8");
    }
    if (s == PP_OK &&
        (json_object_set_new(meta, "total_size", json_integer((json_int_t)total)) ||
         json_object_set(root, "metadata", meta) || json_object_set(root, "weight_map", map)))
        s = PP_ERR_NOMEM;
    char *text = s == PP_OK ? json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (s == PP_OK && !text)
        s = PP_ERR_NOMEM;
    json_decref(root);
    json_decref(map);
    json_decref(meta);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, INDEX_NAME);
    if (s == PP_OK) {
        size_t len = strlen(text);
        text[len] = '\n'; /* json_dumps' NUL becomes the final newline transformers writes */
        s = pp_file_write_atomic(path, text, len + 1);
    }
    free(text);
    return s;
}

pp_status pp_st_write_sharded(const char *dir, const pp_st_out *t, int n, const pp_st_meta *meta,
                              int n_meta, uint64_t max_shard_bytes, int *n_shards)
{
    if (n_shards)
        *n_shards = 0;
    out_row *rows;
    PP_TRY(prepare(t, n, &rows)); /* every tensor checked before anything is written */
    free(rows);
    if (max_shard_bytes == 0)
        return PP_ERR(PP_ERR_INVALID, "a shard size of 0 bytes");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return PP_ERR(PP_ERR_NOTFOUND, "%s: not a folder (the checkpoint's shards go in one)", dir);
    int *shard = pp_calloc(n > 0 ? (size_t)n : 1, sizeof *shard);
    pp_st_out *part = pp_calloc(n > 0 ? (size_t)n : 1, sizeof *part);
    uint64_t total = 0;
    int k = shard && part ? split_shards(t, n, max_shard_bytes, shard, &total) : -1;
    pp_status s = k >= 0 ? PP_OK : PP_ERR_NOMEM;
    if (k == 0)
        k = 1; /* no tensors: one empty model.safetensors */
    for (int f = 0; s == PP_OK && f < k; f++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (shard[i] == f)
                part[m++] = t[i];
        char name[64], path[4096];
        shard_name(name, sizeof name, f, k);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        s = pp_st_write(path, part, m, meta, n_meta);
    }
    if (s == PP_OK && k > 1)
        s = write_index(dir, t, n, shard, k, total);
    if (s == PP_OK)
        remove_stale(dir, k);
    free(shard);
    free(part);
    if (s == PP_OK && n_shards)
        *n_shards = k;
    return s == PP_OK ? PP_OK : pp_err_trace(s, __FILE__, __LINE__);
}
