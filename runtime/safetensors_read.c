/* safetensors_read.c — one safetensors file: its header read and checked the way the
 * reference implementation checks it (safetensors/src/tensor.rs, SafeTensors::read_metadata
 * and Metadata::validate), and tensor data read at offsets and converted to fp32.
 *
 * Every size from the file is checked before it is used: the header length against the limit
 * and the file's size before anything is allocated for it, each shape's product and byte count
 * for overflow, the offsets against each other and the data's length. Not here: opening
 * folders and sharded indexes (safetensors_open.c), writing (safetensors_write.c).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_json.h"
#include "safetensors_impl.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader copies it as the host's"
#endif

const char *st_show(const char *s, char *buf, size_t n)
{
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (; *p && o + 8 < n; p++) {
        if (*p < 0x20 || *p == 0x7f)
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", *p);
        else
            buf[o++] = (char)*p;
    }
    snprintf(buf + o, n - o, "%s", *p ? "..." : "");
    return buf;
}

static uint64_t le64(const unsigned char b[8])
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

/* "[a, b, c]" */
static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < n)
        snprintf(buf + o, n - o, "]");
    return buf;
}

/* "BOOL, U8, ..." for the message about an unknown dtype. */
static const char *dtype_list(char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int d = 0; d < PP_ST_N_DTYPES && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s", d ? ", " : "",
                              pp_st_dtype_name((pp_st_dtype)d));
    return buf;
}

static pp_status add_entry(pp_st *st, st_entry **out)
{
    size_t cap = pp_grow(&st->e, st->n, st->cap, sizeof *st->e, 64);
    if (!cap)
        return PP_ERR_NOMEM;
    st->cap = cap;
    *out = &st->e[st->n];
    memset(*out, 0, sizeof **out);
    return PP_OK;
}

/* shape: an array of at most PP_ST_MAX_DIMS integers >= 0 (the schema's size_t). */
static pp_status parse_shape(const pp_json_src *src, const json_t *v, pp_st_tensor *t)
{
    if (!json_is_array(v) || json_array_size(v) > PP_ST_MAX_DIMS)
        return pp_json_bad(src, "shape", "an array of at most 8 integers >= 0", v);
    t->ndim = (int)json_array_size(v);
    t->numel = 1;
    int overflow = 0; /* as the reference: a product past 64 bits is refused, zeros or not */
    for (int i = 0; i < t->ndim; i++) {
        const json_t *d = json_array_get(v, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return pp_json_bad(src, "shape", "an array of at most 8 integers >= 0", v);
        t->shape[i] = (int64_t)json_integer_value(d);
        uint64_t dim = (uint64_t)t->shape[i];
        if (dim && t->numel > UINT64_MAX / dim)
            overflow = 1;
        t->numel *= dim;
    }
    size_t size = pp_st_dtype_size(t->dtype);
    if (overflow || t->numel > UINT64_MAX / size) {
        char s[256];
        return pp_json_fail(src, "shape", "%s: the byte count overflows 64 bits",
                            shape_str(t->ndim, t->shape, s, sizeof s));
    }
    t->nbytes = t->numel * size;
    return PP_OK;
}

/* One tensor's entry {"dtype", "shape", "data_offsets"} and nothing else. */
static pp_status parse_tensor(const st_file *f, int fi, const char *name, const json_t *v,
                              pp_st *st)
{
    char who[512], shown[256];
    snprintf(who, sizeof who, "%s: tensor %s", f->path, st_show(name, shown, sizeof shown));
    pp_json_src src = {.file = who, .bare_paths = 1};
    if (!json_is_object(v))
        return pp_json_bad(&src, "entry", "an object {dtype, shape, data_offsets}", v);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return pp_json_fail(&src, st_show(key, shown, sizeof shown),
                                "unexpected key (a tensor has dtype, shape and data_offsets)");
    }
    st_entry *e;
    PP_TRY(add_entry(st, &e));
    pp_st_tensor *t = &e->t;
    const char *dt;
    char list[256];
    PP_TRY(pp_json_str(&src, v, "", "dtype", &dt));
    if (!pp_st_dtype_parse(dt, &t->dtype))
        return pp_json_fail(&src, "dtype", "\"%s\" is not supported (%s)",
                            st_show(dt, shown, sizeof shown), dtype_list(list, sizeof list));
    PP_TRY(parse_shape(&src, json_object_get(v, "shape"), t));
    const json_t *off = json_object_get(v, "data_offsets");
    const json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(b) ||
        !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < json_integer_value(b))
        return pp_json_bad(&src, "data_offsets", "[BEGIN, END] with 0 <= BEGIN <= END", off);
    e->begin = (uint64_t)json_integer_value(b);
    uint64_t len = (uint64_t)json_integer_value(en) - e->begin;
    if (len != t->nbytes) {
        char s[256];
        return pp_json_fail(
            &src, "data_offsets", "[%llu, %llu] hold %llu bytes; dtype %s shape %s needs %llu",
            (unsigned long long)e->begin, (unsigned long long)json_integer_value(en),
            (unsigned long long)len, dt, shape_str(t->ndim, t->shape, s, sizeof s),
            (unsigned long long)t->nbytes);
    }
    t->name = pp_strdup(name);
    if (!t->name)
        return PP_ERR_NOMEM;
    t->file = f->path;
    e->file = fi;
    st->n++;
    return PP_OK;
}

/* "__metadata__": a map of strings to strings. */
static pp_status parse_meta(st_file *f, const json_t *v)
{
    pp_json_src src = {.file = f->path, .bare_paths = 1};
    if (!json_is_object(v))
        return pp_json_bad(&src, "__metadata__", "an object of strings", v);
    size_t n = json_object_size(v);
    f->meta = pp_calloc(2 * n + 1, sizeof *f->meta);
    if (!f->meta)
        return PP_ERR_NOMEM;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        char field[300], shown[256];
        snprintf(field, sizeof field, "__metadata__.%s", st_show(key, shown, sizeof shown));
        if (!json_is_string(val))
            return pp_json_bad(&src, field, "a string (metadata values are strings)", val);
        f->meta[2 * f->n_meta] = pp_strdup(key);
        f->meta[2 * f->n_meta + 1] = pp_strdup(json_string_value(val));
        f->n_meta++;
        if (!f->meta[2 * f->n_meta - 2] || !f->meta[2 * f->n_meta - 1])
            return PP_ERR_NOMEM;
    }
    return PP_OK;
}

typedef struct {
    uint64_t begin, end;
    size_t i; /* into st->e */
} span;

static int by_offsets(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The tensors first..st->n of file f, in offset order, cover its data exactly: the first
 * starts at 0, each where the previous ends, the last at the end of the file (no holes, no
 * overlaps: the reference's InvalidOffset and MetadataIncompleteBuffer). */
static pp_status check_coverage(const pp_st *st, size_t first, const st_file *f)
{
    size_t n = st->n - first;
    span *order = pp_calloc(n ? n : 1, sizeof *order);
    if (!order)
        return PP_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const st_entry *e = &st->e[first + i];
        order[i] = (span){e->begin, e->begin + e->t.nbytes, first + i};
    }
    qsort(order, n, sizeof *order, by_offsets);
    uint64_t at = 0, data = f->size - f->data_start;
    pp_status s = PP_OK;
    for (size_t i = 0; i < n && s == PP_OK; i++) {
        const st_entry *e = &st->e[order[i].i];
        char shown[256];
        if (e->begin != at)
            s = PP_ERR(PP_ERR_PARSE,
                       "%s: tensor %s: data_offsets [%llu, %llu] %s byte %llu (tensors must "
                       "cover the data without holes or overlaps)",
                       f->path, st_show(e->t.name, shown, sizeof shown),
                       (unsigned long long)e->begin, (unsigned long long)order[i].end,
                       e->begin > at ? "leave a hole: expected to start at"
                                     : "overlap the previous tensor: expected to start at",
                       (unsigned long long)at);
        at = order[i].end;
    }
    free(order);
    if (s == PP_OK && at != data)
        s = PP_ERR(PP_ERR_PARSE,
                   "%s: the tensors' data ends at byte %llu, but the file holds %llu bytes of "
                   "data after its header (truncated, or bytes no tensor covers)",
                   f->path, (unsigned long long)at, (unsigned long long)data);
    return s;
}

static pp_status parse_header(pp_st *st, int fi, const char *text, size_t len)
{
    st_file *f = &st->files[fi];
    json_t *root = NULL;
    PP_TRY(pp_json_load(text, len, f->path, JSON_REJECT_DUPLICATES, &root));
    pp_status s = PP_OK;
    if (!json_is_object(root))
        s = PP_ERR(PP_ERR_PARSE,
                   "%s: the header is not a JSON object {name: {dtype, shape, "
                   "data_offsets}, ...}",
                   f->path);
    size_t first = st->n;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (s != PP_OK)
            break;
        s = !strcmp(key, "__metadata__") ? parse_meta(f, v) : parse_tensor(f, fi, key, v, st);
    }
    if (s == PP_OK)
        s = check_coverage(st, first, f);
    json_decref(root);
    return s;
}

pp_status st_add_file(pp_st *st, const char *path)
{
    st_file *files = pp_realloc_array(st->files, (size_t)st->n_files + 1, sizeof *files);
    if (!files)
        return PP_ERR_NOMEM;
    st->files = files;
    int fi = st->n_files++;
    st_file *f = &files[fi];
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (!(f->path = pp_strdup(path)))
        return PP_ERR_NOMEM;
    PP_TRY(pp_file_open_regular(path, &f->fd, &f->size));
    unsigned char head[8];
    if (f->size < 8)
        return PP_ERR(PP_ERR_PARSE,
                      "%s: %llu bytes: too short for a safetensors file (8 bytes of header "
                      "length come first)",
                      path, (unsigned long long)f->size);
    PP_TRY(pp_file_pread(f->fd, path, head, 8, 0));
    uint64_t n = le64(head);
    if (n > PP_ST_MAX_HEADER)
        return PP_ERR(PP_ERR_PARSE,
                      "%s: header length %llu is more than the %u bytes safetensors allows (not "
                      "a safetensors file?)",
                      path, (unsigned long long)n, PP_ST_MAX_HEADER);
    if (n > f->size - 8)
        return PP_ERR(PP_ERR_PARSE,
                      "%s: header length %llu runs past the end of the file (%llu "
                      "bytes)",
                      path, (unsigned long long)n, (unsigned long long)f->size);
    f->data_start = 8 + n;
    char *text = malloc((size_t)n + 1);
    if (!text)
        return PP_ERR(PP_ERR_NOMEM, "%s: no memory for its %llu-byte header", path,
                      (unsigned long long)n);
    pp_status s = pp_file_pread(f->fd, path, text, (size_t)n, 8);
    if (s == PP_OK)
        s = parse_header(st, fi, text, (size_t)n);
    free(text);
    return s == PP_OK ? PP_OK : pp_err_trace(s, __FILE__, __LINE__);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const st_entry *)a)->t.name, ((const st_entry *)b)->t.name);
}

pp_status st_finish(pp_st *st)
{
    if (st->n > 1) /* e is NULL for a checkpoint without tensors */
        qsort(st->e, st->n, sizeof *st->e, by_name);
    for (size_t i = 1; i < st->n; i++)
        if (!strcmp(st->e[i].t.name, st->e[i - 1].t.name)) {
            char shown[256];
            return PP_ERR(PP_ERR_PARSE, "%s: tensor %s is in both %s and %s", st->source,
                          st_show(st->e[i].t.name, shown, sizeof shown),
                          st->files[st->e[i - 1].file].path, st->files[st->e[i].file].path);
        }
    return PP_OK;
}

st_entry *st_lookup(const pp_st *st, const char *name)
{
    st_entry key = {.t = {.name = name}};
    return st->n ? bsearch(&key, st->e, st->n, sizeof *st->e, by_name) : NULL;
}

/* ---- the tensor data ---- */

static const st_entry *entry_of(const pp_st *st, const pp_st_tensor *t)
{
    const st_entry *e = (const st_entry *)t;
    return e >= st->e && e < st->e + st->n ? e : NULL;
}

pp_status pp_st_read_raw(const pp_st *st, const pp_st_tensor *t, void *dst)
{
    const st_entry *e = entry_of(st, t);
    if (!e)
        return PP_ERR(PP_ERR_INVALID, "%s: that tensor is not one of this checkpoint's",
                      st->source);
    const st_file *f = &st->files[e->file];
    return pp_file_pread(f->fd, f->path, dst, (size_t)t->nbytes, f->data_start + e->begin);
}

pp_status pp_st_load_f32_range(const pp_st *st, const pp_st_tensor *t, uint64_t first,
                               uint64_t count, float *dst)
{
    const st_entry *e = entry_of(st, t);
    char shown[256];
    if (!e)
        return PP_ERR(PP_ERR_INVALID, "%s: that tensor is not one of this checkpoint's",
                      st->source);
    const st_file *f = &st->files[e->file];
    if (!pp_st_dtype_is_float(t->dtype))
        return PP_ERR(PP_ERR_INVALID,
                      "%s: tensor %s: dtype %s cannot be loaded as fp32 (F32, "
                      "BF16 or F16 can)",
                      f->path, st_show(t->name, shown, sizeof shown), pp_st_dtype_name(t->dtype));
    if (first > t->numel || count > t->numel - first)
        return PP_ERR(PP_ERR_INVALID, "%s: tensor %s: elements [%llu, +%llu) asked, it has %llu",
                      f->path, st_show(t->name, shown, sizeof shown), (unsigned long long)first,
                      (unsigned long long)count, (unsigned long long)t->numel);
    size_t size = pp_st_dtype_size(t->dtype);
    uint64_t off = f->data_start + e->begin + first * size;
    if (t->dtype == PP_ST_F32)
        return pp_file_pread(f->fd, f->path, dst, (size_t)count * 4, off);
    enum { CHUNK = 16384 };
    uint16_t *buf = pp_calloc(CHUNK, sizeof *buf);
    if (!buf)
        return PP_ERR_NOMEM;
    float (*conv)(uint16_t) = t->dtype == PP_ST_BF16 ? pp_st_bf16_to_f32 : pp_st_f16_to_f32;
    pp_status s = PP_OK;
    for (uint64_t done = 0; done < count && s == PP_OK;) {
        size_t k = count - done < CHUNK ? (size_t)(count - done) : CHUNK;
        s = pp_file_pread(f->fd, f->path, buf, k * 2, off + done * 2);
        for (size_t i = 0; s == PP_OK && i < k; i++)
            dst[done + i] = conv(buf[i]);
        done += k;
    }
    free(buf);
    return s;
}

pp_status pp_st_load_f32(const pp_st *st, const pp_st_tensor *t, float *dst)
{
    return pp_st_load_f32_range(st, t, 0, t->numel, dst);
}

pp_status pp_st_expect(const pp_st *st, const char *name, int ndim, const int64_t *shape,
                       const pp_st_tensor **out)
{
    if (out)
        *out = NULL;
    const st_entry *e = st_lookup(st, name);
    char shown[256];
    if (!e)
        return PP_ERR(PP_ERR_NOTFOUND, "%s: no tensor %s (it holds %zu tensors)", st->source,
                      st_show(name, shown, sizeof shown), st->n);
    int same = e->t.ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = e->t.shape[i] == shape[i];
    if (!same) {
        char a[256], b[256];
        return PP_ERR(PP_ERR_INVALID, "%s: tensor %s: shape %s expected %s", e->t.file,
                      st_show(name, shown, sizeof shown),
                      shape_str(e->t.ndim, e->t.shape, a, sizeof a),
                      shape_str(ndim, shape, b, sizeof b));
    }
    if (out)
        *out = &e->t;
    return PP_OK;
}

pp_status pp_st_load_named_f32(const pp_st *st, const char *name, int ndim, const int64_t *shape,
                               float *dst)
{
    const pp_st_tensor *t;
    PP_TRY(pp_st_expect(st, name, ndim, shape, &t));
    PP_TRY(pp_st_load_f32(st, t, dst));
    return PP_OK;
}
