/* pp_json.h — reading fields of a JSON document (jansson) with the one error form every
 * pptune reader uses:
 *
 *     FILE: field "devices[1].mem_bytes": expected a number >= 0, got "80GB"
 *
 * (or `FILE: ops[1][4].op: expected ..., got ...` for a reader whose paths are bare), where
 * "got" shows the offending value in compact JSON, cut at 60 characters, or "nothing
 * (missing)". Every failure is PP_ERR_PARSE. Library pp_json (common/json.c), linked by the
 * modules that read JSON files: probes/ (cluster files), profiles/ (profiles), tuner/ (model
 * files, schedule JSON). schedules/ stays free of jansson and does not link it.
 *
 * Readers take the object o, the path of o ("" at the top level) and the key to read; with
 * key NULL, o is itself the value and prefix its whole path (array elements, for instance).
 * Strings returned through const char ** point into the document: valid while it lives.
 */
#ifndef PP_JSON_H
#define PP_JSON_H

#include <jansson.h>

#include "pp_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *file; /* the input's name, first in every message */
    int bare_paths;   /* 0: field "a.b[2]"; 1: a.b[2] */
} pp_json_src;

/* Paths for messages: "PREFIX.KEY" ("KEY" when prefix is empty), "PREFIX.KEY[i]". A path
 * longer than n is cut, which only shortens the message. Both return buf. */
const char *pp_json_path(char *buf, size_t n, const char *prefix, const char *key);
const char *pp_json_path_at(char *buf, size_t n, const char *prefix, const char *key, size_t i);

/* v in compact JSON, cut to 57 characters and "..." past 60; "nothing (missing)" for NULL. */
const char *pp_json_show(const json_t *v, char *buf, size_t n);

/* "FILE: FIELD: <message>": for checks that are not one value against one expectation. */
pp_status pp_json_fail(const pp_json_src *s, const char *field, const char *fmt, ...)
    PP_PRINTF(3, 4);
/* "FILE: FIELD: expected EXPECTED, got <got shown>". */
pp_status pp_json_bad(const pp_json_src *s, const char *field, const char *expected,
                      const json_t *got);

/* An integer in lo..hi; want says so in the message (NULL: "an integer >= lo"). */
pp_status pp_json_int(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                      long lo, long hi, const char *want, int *out);
/* A number in [min, max], or exactly 0 when zero_ok (a figure not measured): "a number in
 * MIN..MAX", or "a number >= MIN" when max >= PP_JSON_HUGE (a cap past any real figure, there
 * to keep products finite, is not worth a reader's attention); "0 or " first with zero_ok. */
#define PP_JSON_HUGE 1e18
pp_status pp_json_range(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                        double min, double max, int zero_ok, double *out);
/* A number >= min (NaN never is). */
pp_status pp_json_num(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                      double min, double *out);
pp_status pp_json_bool(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                       int *out);
/* A string of printable text (pp_text_ok: no control characters or line breaks, at most
 * PP_TEXT_MAX bytes): every string a reader keeps from a file or a server is one. */
pp_status pp_json_str(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                      const char **out);
/* A string of printable text that fits buf with its NUL ("a string of at most n-1
 * characters"), copied. */
pp_status pp_json_str_copy(const pp_json_src *s, const json_t *o, const char *prefix,
                           const char *key, char *buf, size_t n);
/* A string among the NULL-terminated `allowed`; want describes them for the message. */
pp_status pp_json_enum(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                       const char *const *allowed, const char *want, const char **out);
/* An object / an array; with null_ok a null value gives *out = NULL and PP_OK. */
pp_status pp_json_obj(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                      int null_ok, json_t **out);
pp_status pp_json_arr(const pp_json_src *s, const json_t *o, const char *prefix, const char *key,
                      int null_ok, json_t **out);

/* Parses len bytes of text (jansson flags, e.g. JSON_REJECT_DUPLICATES) into *out, which the
 * caller json_decref's; "NAME:LINE:COLUMN: not valid JSON: REASON" otherwise, where REASON
 * quotes at most 16 bytes of the text, escaped (pp_text_show). */
pp_status pp_json_load(const char *text, size_t len, const char *name, size_t flags, json_t **out);
/* The file at path (a bounded read: PP_ERR_NOTFOUND names a missing file) parsed into *out, which
 * must be an object ("PATH: expected a JSON object at the top level" otherwise); the caller
 * json_decref's it. */
pp_status pp_json_load_object_file(const char *path, json_t **out);
/* Field `field` of the top-level object o of file path: a positive integer (below 2^30) into *v,
 * "missing, expected a positive integer" when absent and required, else *v is left as it is;
 * a boolean into *v when present. */
pp_status pp_json_file_int(json_t *o, const char *path, const char *field, int required, int *v);
pp_status pp_json_file_bool(json_t *o, const char *path, const char *field, int *v);

#ifdef __cplusplus
}
#endif
#endif
