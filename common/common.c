/* common.c — error trail, checked allocation, clock. No module logic lives here (files: file.c). */
#include "pp_common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PP_ERR_CAP 2048

static _Thread_local char err_buf[PP_ERR_CAP];
static _Thread_local size_t err_text_len; /* length of the message before the trail */

const char *pp_status_name(pp_status st)
{
    switch (st) {
    case PP_OK: return "ok";
    case PP_ERR_INVALID: return "invalid";
    case PP_ERR_NOMEM: return "out of host memory";
    case PP_ERR_IO: return "i/o";
    case PP_ERR_PARSE: return "parse";
    case PP_ERR_CHECK: return "check";
    case PP_ERR_DEADLOCK: return "deadlock";
    case PP_ERR_UNSUPPORTED: return "unsupported";
    case PP_ERR_DEVICE: return "device";
    case PP_ERR_OOM: return "out of memory";
    case PP_ERR_TIMEOUT: return "timeout";
    case PP_ERR_NOTFOUND: return "not found";
    }
    return "unknown";
}

static const char *short_file(const char *file)
{
    /* keep "module/file.c": the two last path components */
    const char *last = strrchr(file, '/');
    if (!last)
        return file;
    const char *p = last;
    while (p > file && p[-1] != '/')
        p--;
    return p;
}

pp_status pp_err_set(pp_status st, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err_buf, PP_ERR_CAP, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    err_text_len = (size_t)n < PP_ERR_CAP ? (size_t)n : PP_ERR_CAP - 1;
    size_t len = err_text_len;
    snprintf(err_buf + len, PP_ERR_CAP - len, " [%s:%d]", short_file(file), line);
    return st;
}

pp_status pp_err_trace(pp_status st, const char *file, int line)
{
    size_t len = strlen(err_buf);
    if (len == 0) { /* a failure nobody described: still say where */
        err_text_len = (size_t)snprintf(err_buf, PP_ERR_CAP, "%s error", pp_status_name(st));
        snprintf(err_buf + err_text_len, PP_ERR_CAP - err_text_len, " [%s:%d]", short_file(file),
                 line);
        return st;
    }
    if (len >= 1 && err_buf[len - 1] == ']' && len + 1 < PP_ERR_CAP)
        snprintf(err_buf + len - 1, PP_ERR_CAP - (len - 1), " < %s:%d]", short_file(file), line);
    return st;
}

const char *pp_err_msg(void) { return err_buf; }

const char *pp_err_text(void)
{
    static _Thread_local char text[PP_ERR_CAP];
    memcpy(text, err_buf, err_text_len);
    text[err_text_len] = '\0';
    return text;
}

pp_status pp_err_restore(pp_status st, const char *msg, size_t text_len)
{
    snprintf(err_buf, PP_ERR_CAP, "%s", msg);
    size_t len = strlen(err_buf);
    err_text_len = text_len < len ? text_len : len;
    return st;
}

void pp_err_clear(void)
{
    err_buf[0] = '\0';
    err_text_len = 0;
}

void *pp_calloc(size_t n, size_t size)
{
    if (n == 0 || size == 0)
        n = size = 1;
    void *p = calloc(n, size);
    if (!p)
        PP_ERR(PP_ERR_NOMEM, "out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *pp_realloc_array(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        PP_ERR(PP_ERR_NOMEM, "allocation of %zu x %zu bytes overflows", n, size);
        return NULL;
    }
    void *q = realloc(p, n && size ? n * size : 1);
    if (!q)
        PP_ERR(PP_ERR_NOMEM, "out of host memory allocating %zu x %zu bytes", n, size);
    return q;
}

size_t pp_grow(void *arr_ptr, size_t n, size_t cap, size_t size, size_t first)
{
    return pp_grow_max(arr_ptr, n, cap, size, first, SIZE_MAX);
}

size_t pp_grow_max(void *arr_ptr, size_t n, size_t cap, size_t size, size_t first, size_t max)
{
    if (n < cap)
        return cap;
    if (n >= max) {
        (void)PP_ERR(PP_ERR_INVALID, "element %zu of a buffer of at most %zu", n, max);
        return 0;
    }
    size_t c = cap ? 2 * cap : (first ? first : 1);
    if (c <= n) /* doubling overflowed, or n was past cap */
        c = n + 1;
    if (c > max)
        c = max;
    void *p;
    memcpy(&p, arr_ptr, sizeof p); /* arr_ptr is a T **: same representation as void * */
    p = pp_realloc_array(p, c, size);
    if (!p)
        return 0;
    memcpy(arr_ptr, &p, sizeof p);
    return c;
}

char *pp_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = pp_calloc(n, 1);
    if (d)
        memcpy(d, s, n);
    return d;
}

char *pp_strjoin(const char *a, const char *b, const char *c)
{
    size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
    char *d = pp_calloc(na + nb + nc + 1, 1);
    if (d) {
        memcpy(d, a, na);
        memcpy(d + na, b, nb);
        memcpy(d + na + nb, c, nc);
    }
    return d;
}

double pp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void pp_fputs_escaped(const char *s, FILE *fp)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n')
            fputs("\\n", fp);
        else if (*p == '\r')
            fputs("\\r", fp);
        else if (*p == '\t')
            fputs("\\t", fp);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(fp, "\\x%02x", *p);
        else
            fputc(*p, fp);
    }
}

