/* cli.c — pptune's wording around the option tables (common/pp_opt.h), and the messages and
 * exit codes every command shares. Names the option as the user wrote it. Calls nothing of
 * the program above it (main.c, the commands). */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define INT_OPTION_MAX 1000000000L /* pptune's integer options: at most 1e9 */

static void start(pp_cli *p, const char *cmd, int argc, char **argv, const pp_opt_group *g,
                  int n_groups)
{
    p->cmd = cmd;
    p->argc = argc;
    p->argv = argv;
    p->unknown = "unknown option";
    p->value = "a value";
    pp_opt_init(&p->parser, g, n_groups, argc, argv);
    p->parser.int_max = INT_OPTION_MAX;
}

void pp_cli_init_opts(pp_cli *p, const char *cmd, int argc, char **argv,
                      const pp_opt_group *groups, int n_groups)
{
    memset(p, 0, sizeof *p);
    start(p, cmd, argc, argv, groups, n_groups);
}

/* A short letter's argument in getopt's optstring: "p:" required, "p::" optional. */
static int letter_arg(const char *shortopts, int c)
{
    const char *at = c > 0 && c < 0x100 ? strchr(shortopts, c) : NULL;
    if (!at || c == ':')
        return -1;
    return at[1] != ':' ? no_argument : at[2] == ':' ? optional_argument : required_argument;
}

void pp_cli_init(pp_cli *p, const char *cmd, int argc, char **argv, const char *shortopts,
                 const struct option *longopts)
{
    memset(p, 0, sizeof *p);
    int n = 0;
    /* every option a row handing back its code; a short letter joins its long option */
    for (int i = 0; longopts[i].name && n < PP_OPT_MAX; i++) {
        int c = longopts[i].val;
        p->rows[n++] = (pp_opt){.name = longopts[i].name, .kind = PP_OPT_CODE, .code = c,
                                .has_arg = longopts[i].has_arg,
                                .letter = letter_arg(shortopts, c) >= 0 ? (char)c : 0};
    }
    for (const char *s = shortopts; *s && n < PP_OPT_MAX; s++) {
        int arg = letter_arg(shortopts, *s), joined = 0;
        for (int i = 0; i < n; i++)
            joined |= p->rows[i].letter == *s;
        if (arg >= 0 && !joined)
            p->rows[n++] = (pp_opt){.letter = *s, .kind = PP_OPT_CODE, .code = *s,
                                    .has_arg = arg};
        while (s[1] == ':')
            s++;
    }
    pp_opt_group g = {.opts = p->rows, .n = n, .target = NULL};
    start(p, cmd, argc, argv, &g, 1);
}

int pp_cli_next(pp_cli *p)
{
    int c;
    do
        c = pp_opt_next(&p->parser);
    while (c == 0); /* a row that filled its field: the next */
    snprintf(p->name, sizeof p->name, "%s", p->parser.name);
    p->arg = p->parser.arg;
    if (c != PP_OPT_BAD)
        return c;
    switch (p->parser.error) {
    case PP_OPT_ERR_MISSING:
        return pp_cmd_usage_error(p->cmd, "%s needs %s", p->name, p->value), PP_CLI_BAD;
    case PP_OPT_ERR_VALUE:
        return pp_cmd_usage_error(p->cmd, "%s expects %s, got \"%s\"", p->name, p->parser.want,
                                  p->arg),
               PP_CLI_BAD;
    default: return pp_cmd_usage_error(p->cmd, "%s \"%s\"", p->unknown, p->name), PP_CLI_BAD;
    }
}

int pp_cli_no_words(const pp_cli *p)
{
    if (optind >= p->argc)
        return -1;
    return pp_cmd_usage_error(p->cmd, "%s \"%s\"", p->unknown, p->argv[optind]);
}

int pp_cli_text_width(void)
{
    int w = pp_cli_terminal_columns();
    return w >= 40 ? w : w > 0 ? 40 : 100;
}

void pp_cli_wrapped(FILE *fp, int indent, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pp_fputs_wrapped(fp, buf, pp_cli_text_width(), indent);
    fputc('\n', fp);
}

const char *pp_cli_output_path(const char *path)
{
    return path && !strcmp(path, "-") ? NULL : path;
}

int pp_cli_terminal_columns(void)
{
    const char *env = getenv("COLUMNS");
    char *end;
    long n = env ? strtol(env, &end, 10) : 0;
    if (env && *env && *end == '\0' && n > 0 && n < 100000)
        return (int)n;
    struct winsize ws;
    if (isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 0;
}

int pp_cmd_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "pptune %s: ", cmd);
    pp_fputs_escaped(msg, stderr); /* arguments echoed in it stay on one line */
    fprintf(stderr, "\n(see 'pptune %s --help')\n", cmd);
    return 2;
}

int pp_cmd_fail(const char *cmd, int status)
{
    const char *verbose = getenv("PPTUNE_DEBUG");
    fprintf(stderr, "pptune %s: ", cmd);
    pp_fputs_escaped(verbose && *verbose ? pp_err_msg() : pp_err_text(), stderr);
    fputc('\n', stderr);
    switch (status) {
    case PP_ERR_INVALID:
    case PP_ERR_PARSE:
    case PP_ERR_NOTFOUND:
    case PP_ERR_CHECK:
    case PP_ERR_DEADLOCK:
        return 2;
    default:
        return 1;
    }
}

int pp_cmd_parse_int(const char *cmd, const char *opt, const char *val, int min, int *out)
{
    if (!val) {
        pp_cmd_usage_error(cmd, "%s needs a value", opt);
        return 0;
    }
    if (!pp_opt_int(val, min, INT_OPTION_MAX, out)) {
        pp_cmd_usage_error(cmd, "%s expects an integer >= %d, got \"%s\"", opt, min, val);
        return 0;
    }
    return 1;
}

int pp_cmd_parse_double(const char *cmd, const char *opt, const char *val, double min,
                        double *out)
{
    if (!val) {
        pp_cmd_usage_error(cmd, "%s needs a value", opt);
        return 0;
    }
    if (!pp_opt_double(val, min, 0, out)) {
        pp_cmd_usage_error(cmd, "%s expects a number >= %g, got \"%s\"", opt, min, val);
        return 0;
    }
    return 1;
}
