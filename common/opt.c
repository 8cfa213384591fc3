/* opt.c — the option tables of pp_opt.h over getopt_long. getopt itself prints nothing
 * (opterr = 0); what went wrong is left in the parser for the program to say. Not here: any
 * program's wording of a message, or what an option means. */
#include "pp_opt.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LONG_CODE 0x1000 /* longopts[i].val = LONG_CODE + i */

static int takes_value(const pp_opt *o)
{
    switch (o->kind) {
    case PP_OPT_CODE: return o->has_arg;
    case PP_OPT_FLAG:
    case PP_OPT_CLEAR:
    case PP_OPT_SECTION: return no_argument;
    default: return required_argument;
    }
}

static void add_row(pp_opt_parser *p, const pp_opt *o, const pp_opt_group *g)
{
    int arg = takes_value(o);
    if (o->letter && strlen(p->optstring) + 3 < sizeof p->optstring) {
        size_t len = strlen(p->optstring);
        snprintf(p->optstring + len, sizeof p->optstring - len, "%c%s", o->letter,
                 arg == required_argument ? ":" : arg == optional_argument ? "::" : "");
    }
    if (o->name && p->n_long < PP_OPT_MAX) {
        int i = p->n_long++;
        p->longopts[i] = (struct option){o->name, arg, NULL, LONG_CODE + i};
        p->rows[i] = o;
        p->row_group[i] = g;
    }
}

void pp_opt_init(pp_opt_parser *p, const pp_opt_group *groups, int n_groups, int argc,
                 char **argv)
{
    memset(p, 0, sizeof *p);
    n_groups = n_groups < PP_OPT_GROUPS ? n_groups : PP_OPT_GROUPS;
    memcpy(p->groups, groups, (size_t)n_groups * sizeof *groups);
    p->n_groups = n_groups;
    p->argc = argc;
    p->argv = argv;
    p->int_max = INT_MAX;
    p->optstring[0] = ':'; /* a missing value is ':', told from an unknown option '?' */
    for (int g = 0; g < n_groups; g++)
        for (int i = 0; i < p->groups[g].n; i++)
            if (p->groups[g].opts[i].kind != PP_OPT_SECTION)
                add_row(p, &p->groups[g].opts[i], &p->groups[g]);
    optind = 0; /* glibc: 0 resets the whole scan (a second parse in one process) */
}

/* The word getopt just read: "-p" for a short option (possibly inside "-p8"), else the word
 * itself, e.g. "--bogus" or "--explain=1". */
static void name_read(pp_opt_parser *p, int c)
{
    const char *w = optind > 0 && optind <= p->argc ? p->argv[optind - 1] : "";
    if (c > 0 && c < 0x100 && w[0] == '-' && w[1] != '-')
        snprintf(p->name, sizeof p->name, "-%c", c);
    else
        snprintf(p->name, sizeof p->name, "%s", w);
}

/* strtol and strtod skip leading white space: "--nodes ' 8'" is a typo to say, not 8 */
static int starts_blank(const char *s)
{
    return s && isspace((unsigned char)*s);
}

int pp_opt_int(const char *s, long min, long max, int *out)
{
    char *end;
    errno = 0;
    long v = s && !starts_blank(s) ? strtol(s, &end, 10) : 0;
    if (!s || starts_blank(s) || errno || end == s || *end || v < min || v > max || v > INT_MAX)
        return 0;
    *out = (int)v;
    return 1;
}

int pp_opt_double(const char *s, double min, double max, double *out)
{
    char *end;
    double v = s && !starts_blank(s) ? strtod(s, &end) : 0;
    if (!s || starts_blank(s) || end == s || *end || !(v >= min) || !isfinite(v) || v > 1e300 || (max && v > max))
        return 0; /* NaN fails v >= min; "inf" is no figure (--lr inf) */
    *out = v;
    return 1;
}

static int u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = starts_blank(s) ? 0 : strtoull(s, &end, 0);
    if (starts_blank(s) || errno || end == s || *end || s[0] == '-')
        return 0;
    *out = v;
    return 1;
}

/* "a, b or c" */
static char *choices_text(const char *const *c, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; c && c[k] && len < n; k++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", k == 0 ? "" : c[k + 1] ? ", " : " or ",
                                c[k]);
    return buf;
}

char *pp_opt_want(const pp_opt *o, char *buf, size_t n)
{
    switch (o->kind) {
    case PP_OPT_INT:
        if (o->max)
            snprintf(buf, n, "an integer >= %.0f and <= %.0f", o->min, o->max);
        else
            snprintf(buf, n, "an integer >= %.0f", o->min);
        break;
    case PP_OPT_DOUBLE:
        if (o->max)
            snprintf(buf, n, "a finite number in %g..%g", o->min, o->max);
        else
            snprintf(buf, n, "a finite number >= %g", o->min);
        break;
    case PP_OPT_U64: snprintf(buf, n, "a non-negative integer"); break;
    case PP_OPT_CHOICE:
    case PP_OPT_NAME: choices_text(o->choices, buf, n); break;
    default: snprintf(buf, n, "a value"); break;
    }
    return buf;
}

static int choice(const pp_opt *o, const char *v)
{
    for (int k = 0; v && o->choices && o->choices[k]; k++)
        if (!strcmp(o->choices[k], v))
            return k;
    return -1;
}

/* Stores the value of row o into its field of target; 0 when the value is not one it takes. */
static int apply(pp_opt_parser *p, const pp_opt *o, void *target)
{
    char *f = (char *)target + o->offset;
    const char *v = p->arg;
    int i, k;
    double d;
    uint64_t u;
    switch (o->kind) {
    case PP_OPT_FLAG: i = 1; memcpy(f, &i, sizeof i); return 1;
    case PP_OPT_CLEAR: i = 0; memcpy(f, &i, sizeof i); return 1;
    case PP_OPT_INT:
        if (!pp_opt_int(v, (long)o->min, o->max ? (long)o->max : p->int_max, &i))
            return 0;
        memcpy(f, &i, sizeof i);
        return 1;
    case PP_OPT_DOUBLE:
        if (!pp_opt_double(v, o->min, o->max, &d))
            return 0;
        memcpy(f, &d, sizeof d);
        return 1;
    case PP_OPT_U64:
        if (!u64(v, &u))
            return 0;
        memcpy(f, &u, sizeof u);
        return 1;
    case PP_OPT_STRING: memcpy(f, &v, sizeof v); return 1;
    case PP_OPT_CHOICE:
        if ((k = choice(o, v)) < 0)
            return 0;
        memcpy(f, &k, sizeof k);
        return 1;
    case PP_OPT_NAME:
        if ((k = choice(o, v)) < 0)
            return 0;
        memcpy(f, &o->choices[k], sizeof o->choices[k]);
        return 1;
    default: return 1; /* CODE: the caller's */
    }
}

/* The row of getopt's answer c (a long option's code, or a short letter) and its group. */
static const pp_opt *row_of(const pp_opt_parser *p, int c, const pp_opt_group **g)
{
    if (c >= LONG_CODE && c < LONG_CODE + p->n_long) {
        *g = p->row_group[c - LONG_CODE];
        return p->rows[c - LONG_CODE];
    }
    for (int k = 0; k < p->n_groups; k++)
        for (int i = 0; i < p->groups[k].n; i++)
            if (p->groups[k].opts[i].letter == c && p->groups[k].opts[i].kind != PP_OPT_SECTION) {
                *g = &p->groups[k];
                return &p->groups[k].opts[i];
            }
    return NULL;
}

int pp_opt_next(pp_opt_parser *p)
{
    int idx = -1;
    opterr = 0;
    int c = getopt_long(p->argc, p->argv, p->optstring, p->longopts, &idx);
    p->arg = optarg;
    p->opt = NULL;
    p->error = PP_OPT_ERR_NONE;
    p->want[0] = '\0';
    if (c == -1)
        return -1;
    if (c == '?' || c == ':') {
        name_read(p, optopt);
        char *eq = c == ':' ? strchr(p->name, '=') : NULL;
        if (eq)
            *eq = '\0';
        p->error = c == '?' ? PP_OPT_ERR_UNKNOWN : PP_OPT_ERR_MISSING;
        return PP_OPT_BAD;
    }
    const pp_opt_group *g = NULL;
    const pp_opt *o = row_of(p, c, &g);
    if (!o) { /* cannot happen: getopt returns only what the table gave it */
        name_read(p, c);
        p->error = PP_OPT_ERR_UNKNOWN;
        return PP_OPT_BAD;
    }
    p->opt = o;
    if (idx >= 0)
        snprintf(p->name, sizeof p->name, "--%s", o->name);
    else /* a short option, also when its value was the next word ("-p x") */
        snprintf(p->name, sizeof p->name, "-%c", c);
    if (!apply(p, o, g->target)) {
        p->error = PP_OPT_ERR_VALUE;
        pp_opt_want(o, p->want, sizeof p->want);
        return PP_OPT_BAD;
    }
    return o->code;
}

/* " (default X)" of row o from the defaults struct, into buf ("" when it has none to say). */
static const char *default_text(const pp_opt *o, const void *defaults, char *buf, size_t n)
{
    buf[0] = '\0';
    if (!o->show_default || !defaults)
        return buf;
    const char *f = (const char *)defaults + o->offset;
    int i;
    double d;
    uint64_t u;
    const char *s;
    switch (o->kind) {
    case PP_OPT_INT: memcpy(&i, f, sizeof i); snprintf(buf, n, " (default %d)", i); break;
    case PP_OPT_DOUBLE: memcpy(&d, f, sizeof d); snprintf(buf, n, " (default %g)", d); break;
    case PP_OPT_U64:
        memcpy(&u, f, sizeof u);
        snprintf(buf, n, " (default %llu)", (unsigned long long)u);
        break;
    case PP_OPT_CHOICE:
        memcpy(&i, f, sizeof i);
        snprintf(buf, n, " (default %s)", o->choices[i]);
        break;
    case PP_OPT_STRING:
    case PP_OPT_NAME:
        memcpy(&s, f, sizeof s);
        if (s)
            snprintf(buf, n, " (default %s)", s);
        break;
    default: break;
    }
    return buf;
}

void pp_opt_help(FILE *fp, const pp_opt *opts, int n, const void *defaults)
{
    int col = 24;
    for (int i = 0; i < n; i++) {
        const pp_opt *o = &opts[i];
        if (o->kind == PP_OPT_SECTION) {
            if (o->help)
                fprintf(fp, "%s\n", o->help);
            col = o->width ? o->width : col;
            continue;
        }
        if (!o->help)
            continue;
        char label[96], dflt[96];
        /* "--name ARG", "-l ARG", "--name[=VALUE]" (an optional value) */
        const char *sep = !o->arg ? "" : o->arg[0] == '[' ? "" : " ";
        if (o->name)
            snprintf(label, sizeof label, "--%s%s%s", o->name, sep, o->arg ? o->arg : "");
        else
            snprintf(label, sizeof label, "-%c%s%s", o->letter, sep, o->arg ? o->arg : "");
        int pad = col - 2;
        if ((int)strlen(label) >= pad) /* past the column: the help below it */
            fprintf(fp, "  %s\n%*s", label, col, "");
        else
            fprintf(fp, "  %-*s", pad, label);
        default_text(o, defaults, dflt, sizeof dflt);
        for (const char *h = o->help; *h;) {
            size_t len = strcspn(h, "\n");
            fprintf(fp, "%.*s", (int)len, h);
            h += len;
            if (*h == '\n' && *++h)
                fprintf(fp, "\n%*s", col, "");
        }
        fprintf(fp, "%s\n", dflt);
    }
}
