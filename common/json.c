/* json.c — field readers over jansson with one message form (pp_json.h). They check type and
 * range only, and that a string is printable text (pp_text_ok); what a value means is the calling
 * reader's business. */
#include "pp_json.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define SHOW_MAX 60 /* characters of a value shown in a message */
/* what a kept string must be (pp_text_ok) */
#define TEXT_WANT "printable text (no control characters or line breaks, at most 4096 bytes)"

const char *pp_json_path(char *buf, size_t n, const char *prefix, const char *key)
{
    snprintf(buf, n, "%s%s%s", prefix, *prefix ? "." : "", key);
    return buf;
}

const char *pp_json_path_at(char *buf, size_t n, const char *prefix, const char *key, size_t i)
{
    snprintf(buf, n, "%s%s%s[%zu]", prefix, *prefix ? "." : "", key, i);
    return buf;
}

const char *pp_json_show(const json_t *v, char *buf, size_t n)
{
    if (!v) {
        snprintf(buf, n, "nothing (missing)");
        return buf;
    }
    /* ASCII only: jansson escapes controls and writes non-ASCII as \uXXXX, so a message never
     * carries a terminal's escape sequences (C1 ones included) */
    char *d = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_ENSURE_ASCII);
    if (!d)
        snprintf(buf, n, "an unprintable value");
    else if (strlen(d) > SHOW_MAX)
        snprintf(buf, n, "%.*s...", SHOW_MAX - 3, d);
    else
        snprintf(buf, n, "%s", d);
    free(d);
    return buf;
}

pp_status pp_json_fail(const pp_json_src *s, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (s->bare_paths)
        return PP_ERR(PP_ERR_PARSE, "%s: %s: %s", s->file, field, msg);
    return PP_ERR(PP_ERR_PARSE, "%s: field \"%s\": %s", s->file, field, msg);
}

pp_status pp_json_bad(const pp_json_src *s, const char *field, const char *expected,
                      const json_t *got)
{
    char g[SHOW_MAX + 8];
    return pp_json_fail(s, field, "expected %s, got %s", expected, pp_json_show(got, g, sizeof g));
}

/* o[key], or o itself when key is NULL; the field's path into f. */
static const json_t *field(const json_t *o, const char *prefix, const char *key, char *f, size_t n)
{
    if (!key) {
        snprintf(f, n, "%s", prefix);
        return o;
    }
    pp_json_path(f, n, prefix, key);
    return json_object_get(o, key);
}

pp_status pp_json_int(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                      long lo, long hi, const char *want, int *out)
{
    char f[192], w[64];
    const json_t *v = field(o, prefix, key, f, sizeof f);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        /* the upper bound is said only to a value past it (it is rarely the point) */
        if (!want && json_is_integer(v) && json_integer_value(v) > hi)
            snprintf(w, sizeof w, "an integer >= %ld and <= %ld", lo, hi);
        else if (!want)
            snprintf(w, sizeof w, "an integer >= %ld", lo);
        return pp_json_bad(s, f, want ? want : w, v);
    }
    *out = (int)json_integer_value(v);
    return PP_OK;
}

pp_status pp_json_range(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                        double min, double max, int zero_ok, double *out)
{
    char f[192], w[96];
    const json_t *v = field(o, prefix, key, f, sizeof f);
    double x = json_is_number(v) ? json_number_value(v) : -1;
    if (!json_is_number(v) || !((x >= min && x <= max) || (zero_ok && x == 0))) {
        if (max < PP_JSON_HUGE)
            snprintf(w, sizeof w, "%sa number in %g..%g", zero_ok ? "0 or " : "", min, max);
        else
            snprintf(w, sizeof w, "%sa number >= %g", zero_ok ? "0 or " : "", min);
        return pp_json_bad(s, f, w, v);
    }
    *out = x;
    return PP_OK;
}

pp_status pp_json_num(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                      double min, double *out)
{
    char f[192], w[48];
    const json_t *v = field(o, prefix, key, f, sizeof f);
    if (!json_is_number(v) || !(json_number_value(v) >= min)) {
        snprintf(w, sizeof w, "a number >= %g", min);
        return pp_json_bad(s, f, w, v);
    }
    *out = json_number_value(v);
    return PP_OK;
}

pp_status pp_json_bool(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                       int *out)
{
    char f[192];
    const json_t *v = field(o, prefix, key, f, sizeof f);
    if (!json_is_boolean(v))
        return pp_json_bad(s, f, "true or false", v);
    *out = json_is_true(v);
    return PP_OK;
}

pp_status pp_json_str(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                      const char **out)
{
    char f[192];
    const json_t *v = field(o, prefix, key, f, sizeof f);
    if (!json_is_string(v))
        return pp_json_bad(s, f, "a string", v);
    if (!pp_text_ok(json_string_value(v), json_string_length(v)))
        return pp_json_bad(s, f, TEXT_WANT, v);
    *out = json_string_value(v);
    return PP_OK;
}

pp_status pp_json_str_copy(const pp_json_src *s, const json_t *o, const char *prefix,
                           const char *key, char *buf, size_t n)
{
    char f[192], w[64];
    const json_t *v = field(o, prefix, key, f, sizeof f);
    if (!json_is_string(v) || json_string_length(v) >= n) {
        snprintf(w, sizeof w, "a string of at most %zu characters", n - 1);
        return pp_json_bad(s, f, w, v);
    }
    if (!pp_text_ok(json_string_value(v), json_string_length(v)))
        return pp_json_bad(s, f, TEXT_WANT, v);
    snprintf(buf, n, "%s", json_string_value(v));
    return PP_OK;
}

pp_status pp_json_enum(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                       const char *const *allowed, const char *want, const char **out)
{
    char f[192];
    const json_t *v = field(o, prefix, key, f, sizeof f);
    if (json_is_string(v))
        for (int i = 0; allowed[i]; i++)
            if (!strcmp(json_string_value(v), allowed[i])) {
                *out = json_string_value(v);
                return PP_OK;
            }
    return pp_json_bad(s, f, want, v);
}

static pp_status kind(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                      int is_array, int null_ok, json_t **out)
{
    char f[192];
    const json_t *v = field(o, prefix, key, f, sizeof f);
    *out = NULL;
    if (null_ok && json_is_null(v))
        return PP_OK;
    if (is_array ? !json_is_array(v) : !json_is_object(v))
        return pp_json_bad(s, f,
                           is_array ? (null_ok ? "an array or null" : "an array")
                                    : (null_ok ? "an object or null" : "an object"),
                           v);
    *out = (json_t *)v; /* jansson's getters take json_t *: the caller owns the document */
    return PP_OK;
}

pp_status pp_json_obj(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                      int null_ok, json_t **out)
{
    return kind(s, o, prefix, key, 0, null_ok, out);
}

pp_status pp_json_arr(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                      int null_ok, json_t **out)
{
    return kind(s, o, prefix, key, 1, null_ok, out);
}

pp_status pp_json_load(const char *text, size_t len, const char *name, size_t flags, json_t **out)
{
    json_error_t e;
    *out = json_loadb(text, len, flags, &e);
    if (!*out) {
        /* jansson quotes the text near the error ("... near 'TEXT'"): at most a short prefix of
         * it, escaped, so that a file or a server's answer reaches no terminal raw */
        char *near = strstr(e.text, " near '");
        char shown[16 + 8] = "";
        if (near) {
            char prefix[17];
            snprintf(prefix, sizeof prefix, "%s", near + 7);
            size_t k = strlen(prefix);
            if (k && prefix[k - 1] == '\'')
                prefix[k - 1] = '\0';
            pp_text_show(prefix, shown, sizeof shown);
            *near = '\0';
        }
        return PP_ERR(PP_ERR_PARSE, "%s:%d:%d: not valid JSON: %s%s%s%s", name, e.line, e.column,
                      e.text, near ? " near \"" : "", shown, near ? "\"" : "");
    }
    return PP_OK;
}

pp_status pp_json_load_object_file(const char *path, json_t **out)
{
    char *text;
    size_t len;
    PP_TRY(pp_file_read(path, &text, &len));
    json_t *root;
    pp_status st = pp_json_load(text, len, path, 0, &root);
    free(text);
    PP_TRY(st);
    if (!json_is_object(root)) {
        json_decref(root);
        return PP_ERR(PP_ERR_PARSE, "%s: expected a JSON object at the top level", path);
    }
    *out = root;
    return PP_OK;
}

pp_status pp_json_file_int(json_t *o, const char *path, const char *field, int required, int *v)
{
    const pp_json_src s = {.file = path};
    if (!json_object_get(o, field))
        return required ? pp_json_fail(&s, field, "missing, expected a positive integer") : PP_OK;
    return pp_json_int(&s, o, "", field, 1, 1 << 30, "a positive integer", v);
}

pp_status pp_json_file_bool(json_t *o, const char *path, const char *field, int *v)
{
    const pp_json_src s = {.file = path};
    return json_object_get(o, field) ? pp_json_bool(&s, o, "", field, v) : PP_OK;
}
