/* safetensors_open.c — what pp_st_open accepts: one .safetensors file, a sharded checkpoint's
 * index (model.safetensors.index.json: {"metadata": {"total_size": N}, "weight_map": {tensor:
 * shard file}}, as transformers' save_pretrained and huggingface_hub's
 * split_torch_state_dict_into_shards write it), or a folder holding either; and the lookups.
 *
 * A shard is named relative to the index's folder and must be a plain file name (no '/', not
 * "." or ".."): an index cannot send the reader elsewhere. metadata.total_size is read as an
 * integer but not compared with the data: writers disagree on what it counts (tensor bytes,
 * or the files' sizes).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pp_json.h"
#include "safetensors_impl.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define INDEX_MAX ((uint64_t)64 << 20) /* bytes; Llama 3.1 405B's index is about 100 KB */

void pp_st_destroy(pp_st *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n_files; i++) {
        st_file *f = &st->files[i];
        if (f->fd >= 0)
            close(f->fd);
        for (size_t k = 0; k < 2 * f->n_meta; k++)
            free(f->meta[k]);
        free(f->meta);
        free(f->path);
    }
    for (size_t i = 0; i < st->n; i++)
        free((char *)st->e[i].t.name);
    free(st->files);
    free(st->e);
    free(st->source);
    free(st);
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

/* The index's text (a regular file of at most INDEX_MAX bytes), NUL-terminated. */
static pp_status read_index(const char *path, char **text, size_t *len)
{
    int fd;
    uint64_t size;
    *text = NULL;
    PP_TRY(pp_file_open_regular(path, &fd, &size));
    if (size > INDEX_MAX) {
        close(fd);
        return PP_ERR(PP_ERR_INVALID, "%s: %llu bytes, more than the %llu MiB an index may have",
                      path, (unsigned long long)size, (unsigned long long)(INDEX_MAX >> 20));
    }
    char *buf = malloc((size_t)size + 1);
    pp_status s = buf ? pp_file_pread(fd, path, buf, (size_t)size, 0) : PP_ERR_NOMEM;
    close(fd);
    if (s != PP_OK) {
        free(buf);
        return s;
    }
    buf[size] = '\0';
    *text = buf;
    *len = (size_t)size;
    return PP_OK;
}

static int plain_name(const char *s)
{
    return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every tensor of file fi is in the weight map, under that file's name. */
static pp_status check_shard(const pp_st *st, const char *index, const json_t *map, int fi,
                             const char *shard)
{
    for (size_t i = 0; i < st->n; i++) {
        const st_entry *e = &st->e[i];
        if (e->file != fi)
            continue;
        const char *where = json_string_value(json_object_get(map, e->t.name));
        char a[256], b[256];
        if (!where)
            return PP_ERR(PP_ERR_PARSE, "%s: tensor %s is not in the weight_map of %s",
                          st->files[fi].path, st_show(e->t.name, a, sizeof a), index);
        if (strcmp(where, shard))
            return PP_ERR(PP_ERR_PARSE,
                          "%s: holds tensor %s, which the weight_map of %s puts in %s",
                          st->files[fi].path, st_show(e->t.name, a, sizeof a), index,
                          st_show(where, b, sizeof b));
    }
    return PP_OK;
}

/* The shards weight_map names (sorted, each once) into *names (pointers into map). */
static pp_status shard_names(const pp_json_src *src, const json_t *map, const char ***names,
                             size_t *n)
{
    size_t k = 0, total = json_object_size(map);
    const char **v = pp_calloc(total ? total : 1, sizeof *v);
    if (!v)
        return PP_ERR_NOMEM;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)map, key, val)
    {
        char field[300], shown[256];
        snprintf(field, sizeof field, "weight_map.%s", st_show(key, shown, sizeof shown));
        if (!json_is_string(val) || !plain_name(json_string_value(val))) {
            free(v);
            return pp_json_bad(src, field, "a shard's file name in the index's folder", val);
        }
        v[k++] = json_string_value(val);
    }
    qsort(v, k, sizeof *v, by_str);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (!u || strcmp(v[u - 1], v[i]))
            v[u++] = v[i];
    *names = v;
    *n = u;
    return PP_OK;
}

static pp_status open_shards(pp_st *st, const char *path, const json_t *map)
{
    pp_json_src src = {.file = path, .bare_paths = 1};
    const char **names = NULL;
    size_t n = 0;
    PP_TRY(shard_names(&src, map, &names, &n));
    char *dir = pp_strdup(path);
    pp_status s = dir ? PP_OK : PP_ERR_NOMEM;
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash)
        *slash = '\0';
    for (size_t i = 0; s == PP_OK && i < n; i++) {
        char *shard = slash ? pp_strjoin(dir, "/", names[i]) : pp_strdup(names[i]);
        s = shard ? st_add_file(st, shard) : PP_ERR_NOMEM;
        if (s == PP_OK)
            s = check_shard(st, path, map, st->n_files - 1, names[i]);
        free(shard);
    }
    free(dir);
    free(names);
    PP_TRY(s);
    PP_TRY(st_finish(st));
    /* and every tensor the map names is where it says */
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)map, key, val)
    {
        const st_entry *e = st_lookup(st, key);
        char a[256], b[256];
        if (!e)
            return PP_ERR(PP_ERR_PARSE,
                          "%s: weight_map puts tensor %s in %s, which does not hold it", path,
                          st_show(key, a, sizeof a), st_show(json_string_value(val), b, sizeof b));
    }
    return PP_OK;
}

static pp_status open_index(pp_st *st, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    PP_TRY(read_index(path, &text, &len));
    json_t *root = NULL;
    pp_status s = pp_json_load(text, len, path, JSON_REJECT_DUPLICATES, &root);
    free(text);
    PP_TRY(s);
    pp_json_src src = {.file = path, .bare_paths = 1};
    json_t *map = NULL, *meta = NULL;
    if (!json_is_object(root))
        s = PP_ERR(PP_ERR_PARSE, "%s: not a JSON object {\"metadata\": ..., \"weight_map\": ...}",
                   path);
    if (s == PP_OK)
        s = pp_json_obj(&src, root, "", "weight_map", 0, &map);
    if (s == PP_OK && json_object_size(map) == 0)
        s = pp_json_fail(&src, "weight_map", "names no tensor");
    if (s == PP_OK && json_object_get(root, "metadata")) /* optional */
        s = pp_json_obj(&src, root, "", "metadata", 1, &meta);
    if (s == PP_OK && meta && json_object_get(meta, "total_size")) {
        const json_t *t = json_object_get(meta, "total_size");
        if (!json_is_integer(t) || json_integer_value(t) < 0)
            s = pp_json_bad(&src, "metadata.total_size", "an integer >= 0 (bytes)", t);
    }
    if (s == PP_OK)
        s = open_shards(st, path, map);
    json_decref(root);
    return s;
}

/* A folder: its single file if there is one, else its index (the order of transformers'
 * from_pretrained). */
static pp_status open_folder(pp_st *st, const char *dir)
{
    char *index = pp_strjoin(dir, "/", INDEX_NAME), *single = pp_strjoin(dir, "/", SINGLE_NAME);
    pp_status s = index && single ? PP_OK : PP_ERR_NOMEM;
    struct stat sb;
    if (s == PP_OK && stat(single, &sb) == 0) {
        if ((s = st_add_file(st, single)) == PP_OK)
            s = st_finish(st);
    } else if (s == PP_OK && stat(index, &sb) == 0)
        s = open_index(st, index);
    else if (s == PP_OK)
        s = PP_ERR(PP_ERR_NOTFOUND, "%s: a folder with neither %s nor %s in it", dir, SINGLE_NAME,
                   INDEX_NAME);
    free(index);
    free(single);
    return s;
}

pp_status pp_st_open(const char *path, pp_st **out)
{
    *out = NULL;
    pp_st *st = pp_calloc(1, sizeof *st);
    if (!st || !(st->source = pp_strdup(path))) {
        free(st);
        return PP_ERR_NOMEM;
    }
    struct stat sb;
    pp_status s;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        s = open_folder(st, path);
    else if (ends_with(path, ".json"))
        s = open_index(st, path);
    else if ((s = st_add_file(st, path)) == PP_OK)
        s = st_finish(st);
    if (s != PP_OK) {
        pp_st_destroy(st);
        return pp_err_trace(s, __FILE__, __LINE__);
    }
    *out = st;
    return PP_OK;
}

size_t pp_st_count(const pp_st *st)
{
    return st->n;
}

const pp_st_tensor *pp_st_at(const pp_st *st, size_t i)
{
    return i < st->n ? &st->e[i].t : NULL;
}

const pp_st_tensor *pp_st_find(const pp_st *st, const char *name)
{
    const st_entry *e = st_lookup(st, name);
    return e ? &e->t : NULL;
}

const char *pp_st_metadata(const pp_st *st, const char *key)
{
    if (st->n_files == 0)
        return NULL;
    const st_file *f = &st->files[0]; /* shards are opened in name order */
    for (size_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[2 * i], key))
            return f->meta[2 * i + 1];
    return NULL;
}
