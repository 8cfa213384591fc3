/* cli.c — getopt_long behind pptune's option messages (cli.h). getopt itself prints nothing
 * (opterr = 0); what went wrong is said here, naming the option as the user wrote it. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cmd.h"

void pp_cli_init(pp_cli *p, const char *cmd, int argc, char **argv, const char *shortopts,
                 const struct option *longopts)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->argc = argc;
    p->argv = argv;
    snprintf(p->optstring, sizeof p->optstring, ":%s", shortopts);
    p->longopts = longopts;
    p->unknown = "unknown option";
    p->value = "a value";
    optind = 0; /* glibc: 0 resets the whole scan (a second parse in one process) */
}

/* The word getopt just read: "-p" for a short option (possibly inside "-p8"), else the word
 * itself, e.g. "--bogus" or "--explain=1". */
static void name_read(pp_cli *p, int c)
{
    const char *w = optind > 0 && optind <= p->argc ? p->argv[optind - 1] : "";
    if (c > 0 && c < 0x100 && w[0] == '-' && w[1] != '-')
        snprintf(p->name, sizeof p->name, "-%c", c);
    else
        snprintf(p->name, sizeof p->name, "%s", w);
}

int pp_cli_next(pp_cli *p)
{
    int idx = -1;
    opterr = 0;
    int c = getopt_long(p->argc, p->argv, p->optstring, p->longopts, &idx);
    p->arg = optarg;
    if (c == -1)
        return -1;
    if (c == '?') {
        name_read(p, optopt);
        return pp_cmd_usage_error(p->cmd, "%s \"%s\"", p->unknown, p->name), PP_CLI_BAD;
    }
    if (c == ':') {
        name_read(p, optopt);
        char *eq = strchr(p->name, '=');
        if (eq)
            *eq = '\0';
        return pp_cmd_usage_error(p->cmd, "%s needs %s", p->name, p->value), PP_CLI_BAD;
    }
    if (idx >= 0)
        snprintf(p->name, sizeof p->name, "--%s", p->longopts[idx].name);
    else
        name_read(p, c);
    return c;
}

int pp_cli_no_words(const pp_cli *p)
{
    if (optind >= p->argc)
        return -1;
    return pp_cmd_usage_error(p->cmd, "%s \"%s\"", p->unknown, p->argv[optind]);
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
