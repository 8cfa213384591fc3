/* fmt.c — one formatter per quantity a person reads, used by every command, the report and
 * pprun, so the same figure reads the same everywhere:
 *   seconds     4 significant digits, trailing zeros kept: "1.520", "0.01234", "12.00"
 *   bytes       binary units with the unit: "66.6 GiB", "1.71 GiB", "512 MiB", "3.00 KiB"
 *   integers    thousands grouped: "1,581,229" (tokens/s, counts)
 *   parameters  "13.0 B", "406 B", "61.1 K": with B (10^9), M (10^6), K (10^3)
 * and text wrapped to a width (pptune's: the terminal's, or 100 columns when not one). Nothing
 * here decides what to print; it only writes figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_common.h"
#include "pp_version.h"

const char *pp_version(void)
{
    return PP_GIT_REVISION[0] ? PP_VERSION " (git " PP_GIT_REVISION ")" : PP_VERSION;
}

char *pp_fmt_grouped(double x, char *buf, size_t n)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", x < 0 ? -x : x);
    size_t len = strlen(digits), o = 0;
    if (n == 0)
        return buf;
    if (x <= -0.5 && o + 1 < n)
        buf[o++] = '-';
    for (size_t i = 0; i < len && o + 1 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0 && o + 2 < n)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

char *pp_fmt_seconds(double s, char *buf, size_t n)
{
    if (s >= 1e4 || s <= -1e4) /* no exponent for long runs: whole seconds */
        snprintf(buf, n, "%.0f", s);
    else if (s == 0)
        snprintf(buf, n, "0");
    else if (s < 1e-4 && s > -1e-4) /* no exponent: seven decimals (down to 0.1 us) */
        snprintf(buf, n, "%.7f", s);
    else
        snprintf(buf, n, "%#.4g", s);
    return buf;
}

/* v (already in its unit, below 1,000 or so) with three significant digits. */
static void three_digits(double v, const char *unit, char *buf, size_t n)
{
    double a = v < 0 ? -v : v;
    snprintf(buf, n, a >= 99.95 ? "%.0f %s" : a >= 9.995 ? "%.1f %s" : "%.2f %s", v, unit);
}

const char *pp_fmt_bytes_unit(double ref, double *scale)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double a = ref < 0 ? -ref : ref, s = 1;
    int k = 0;
    /* 1023.96 KiB would round to "1024 KiB": the next unit from where three digits round up */
    while (k < 4 && a >= s * 1024 * 0.99995)
        s *= 1024, k++;
    *scale = s;
    return unit[k];
}

char *pp_fmt_bytes(double bytes, char *buf, size_t n)
{
    double s;
    const char *unit = pp_fmt_bytes_unit(bytes, &s);
    if (s == 1)
        snprintf(buf, n, "%.0f B", bytes);
    else
        three_digits(bytes / s, unit, buf, n);
    return buf;
}

char *pp_fmt_params(double count, char *buf, size_t n)
{
    if (count >= 1e9)
        three_digits(count / 1e9, "B", buf, n);
    else if (count >= 1e6)
        three_digits(count / 1e6, "M", buf, n);
    else if (count >= 1e3)
        three_digits(count / 1e3, "K", buf, n);
    else
        snprintf(buf, n, "%.0f", count);
    return buf;
}

void pp_fputs_wrapped(FILE *fp, const char *text, int width, int indent)
{
    int col = 0;
    for (const char *p = text; *p;) {
        if (*p == '\n') {
            fputc('\n', fp), col = 0, p++;
            continue;
        }
        size_t sp = strspn(p, " "), word = strcspn(p + sp, " \n");
        /* a unit stays with its number: "70 %", "74.5 GiB", "0.11 s:" move as one word */
        const char *w = p + sp, *u = w + word;
        size_t ulen = u[0] == ' ' && u[1] ? strcspn(u + 1, " \n") : 0;
        if (word && w[word - 1] >= '0' && w[word - 1] <= '9' && ulen && ulen <= 3 &&
            strchr("%BKMGTs", u[1]))
            word += 1 + ulen;
        if (col > 0 && col + (int)(sp + word) > width) { /* the word to the next line */
            fprintf(fp, "\n%*s", indent, "");
            col = indent;
            p += sp;
            sp = 0;
        }
        fprintf(fp, "%.*s", (int)(sp + word), p);
        col += (int)(sp + word);
        p += sp + word;
    }
}
