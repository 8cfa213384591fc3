/* text.c — text that came from outside (a profile, a cluster file, a store, a file name) on its
 * way into something that interprets it: a string a reader may keep (pp_text_ok), the one quoted
 * form the exporters print it in for Python and YAML (pp_fput_quoted), a shell word
 * (pp_fput_sh_word), and a message's quotation of it (pp_text_show). pp_common.h says what each
 * guarantees. Not here: which fields a reader checks (the readers), what an exporter prints. */
#include "pp_common.h"

#include <string.h>

/* The code point of the UTF-8 sequence at s (n bytes left) into *cp, its length returned; 0 when
 * the bytes there are not UTF-8 (truncated, overlong, a surrogate, past U+10FFFF). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
    if (len == 0 || s[0] > 0xF4 || len > n)
        return 0;
    uint32_t c = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return len;
}

/* Characters a kept string must not hold: C0 and C1 controls, DEL, and the line and paragraph
 * separators (U+2028, U+2029) that YAML and JavaScript read as line breaks. */
static int unsafe_cp(uint32_t c)
{
    return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x2028 || c == 0x2029;
}

int pp_text_ok(const char *s, size_t len)
{
    if (len > PP_TEXT_MAX)
        return 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        size_t k = utf8_next(u + i, len - i, &c);
        if (k == 0 || unsafe_cp(c))
            return 0;
        i += k;
    }
    return 1;
}

/* Writes the escaped body of s (no quotes) through put(ctx, text); what pp_fput_quoted and
 * pp_text_show share. */
typedef void (*put_fn)(void *ctx, const char *text);

static void escape(const char *s, put_fn put, void *ctx)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        char e[16];
        uint32_t c;
        size_t k = utf8_next(u + i, n - i, &c);
        if (k == 0) { /* not UTF-8: the byte itself, as U+00NN (both targets read \xNN so) */
            snprintf(e, sizeof e, "\\x%02x", u[i]);
            k = 1;
        } else if (c == '\\' || c == '"') {
            snprintf(e, sizeof e, "\\%c", (char)c);
        } else if (c == '\n' || c == '\r' || c == '\t') {
            snprintf(e, sizeof e, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
        } else if (c < 0x20 || c == 0x7F) {
            snprintf(e, sizeof e, "\\x%02x", (unsigned)c);
        } else if (c < 0x80) {
            e[0] = (char)c, e[1] = '\0';
        } else if (c <= 0xFFFF) {
            snprintf(e, sizeof e, "\\u%04x", (unsigned)c);
        } else {
            snprintf(e, sizeof e, "\\U%08x", (unsigned)c);
        }
        put(ctx, e);
        i += k;
    }
}

static void put_file(void *ctx, const char *text)
{
    fputs(text, (FILE *)ctx);
}

void pp_fput_quoted(FILE *fp, const char *s)
{
    fputc('"', fp);
    escape(s, put_file, fp);
    fputc('"', fp);
}

/* Characters a shell word may hold unquoted: none of them is special to sh anywhere in a word. */
static int sh_plain(const char *s)
{
    if (!*s)
        return 0;
    for (const char *k = s; *k; k++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-", *k))
            return 0;
    return 1;
}

void pp_fput_sh_word(FILE *fp, const char *s)
{
    if (sh_plain(s)) {
        fputs(s, fp);
        return;
    }
    fputc('\'', fp);
    for (const char *k = s; *k; k++)
        if (*k == '\'')
            fputs("'\\''", fp);
        else
            fputc(*k, fp);
    fputc('\'', fp);
}

typedef struct {
    char *buf;
    size_t n, len;
    int cut;
} show_ctx;

static void put_show(void *ctx, const char *text)
{
    show_ctx *c = ctx;
    size_t k = strlen(text);
    if (c->cut || c->len + k + 4 > c->n) { /* room kept for "..." and the NUL */
        c->cut = 1;
        return;
    }
    memcpy(c->buf + c->len, text, k);
    c->len += k;
}

const char *pp_text_show(const char *s, char *buf, size_t n)
{
    if (n < 4) {
        if (n)
            buf[0] = '\0';
        return buf;
    }
    show_ctx c = {buf, n, 0, 0};
    escape(s ? s : "", put_show, &c);
    if (c.cut)
        memcpy(buf + c.len, "...", 3), c.len += 3;
    buf[c.len] = '\0';
    return buf;
}
