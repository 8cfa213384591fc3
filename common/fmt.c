/* fmt.c — one formatter per quantity a person reads, used by every command, the report and
 * pprun, so the same figure reads the same everywhere:
 *   seconds     4 significant digits, trailing zeros kept: "1.520", "0.01234", "12.00"
 *   bytes       binary units with the unit: "66.6 GiB", "1.71 GiB", "512 MiB", "3.00 KiB"
 *   integers    thousands grouped: "1,581,229" (tokens/s, counts)
 *   parameters  "13.0 B", "406 B", "61.1 K": with B (10^9), M (10^6), K (10^3)
 * and text wrapped to a width (the terminal's, or 100 columns when not a terminal). Nothing
 * here decides what to print; it only writes figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

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

char *pp_fmt_bytes(double bytes, char *buf, size_t n)
{
    static const char *unit[] = {"KiB", "MiB", "GiB", "TiB"};
    double a = bytes < 0 ? -bytes : bytes;
    if (a < 1024) {
        snprintf(buf, n, "%.0f B", bytes);
        return buf;
    }
    int k = 0;
    double v = bytes / 1024;
    while (k < 3 && (v >= 1024 || v <= -1024))
        v /= 1024, k++;
    three_digits(v, unit[k], buf, n);
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

int pp_term_width(int fd)
{
    struct winsize ws;
    if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
        return ws.ws_col;
    return 100;
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
