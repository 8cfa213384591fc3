/* cli.h — private to the pptune program: every subcommand reads its options through the option
 * tables of common/pp_opt.h (pprun's too), so `--opt=value` works as well as `--opt value`,
 * with pptune's own messages and exit code 2:
 *
 *     pptune schedule: unknown option "--bogus"
 *     pptune schedule: --ranks needs a value
 *     pptune simulate: --nodes expects an integer >= 1, got "0"
 *
 * A command gives its rows (pp_cli_init_opts: rows that fill their fields, with their help),
 * or getopt_long's struct option array and short letters (pp_cli_init: every option is handed
 * back by its code). Options are read in order and the first bad one stops the parse; words
 * that are not options are moved after them and left at argv[optind..] for the command.
 * Long-only codes start at PP_CLI_CODE; the shared groups (tune_cli.h, store_opts.h) have their
 * own ranges below the commands' PP_CLI_LOCAL.
 *
 * Also here, at the bottom of the program's files (they call nothing above them): the
 * messages and exit codes of every command (pp_cmd_usage_error, pp_cmd_fail) and the value
 * checks of the options a command reads by code. */
#ifndef PP_CLI_H
#define PP_CLI_H

#include <getopt.h>

#include "pp_common.h"
#include "pp_opt.h"

enum {
    PP_CLI_BAD = -2,            /* pp_cli_next: bad option, message printed: exit 2 */
    PP_CLI_CODE = 0x100,        /* first code of the long-only options of tune_cli.h */
    PP_CLI_STORE = 0x140,       /* first code of store_opts.h's */
    PP_CLI_LOCAL = 0x200,       /* first code of a command's own long-only options */
};

typedef struct {
    const char *cmd;       /* "pptune CMD: ..." in messages */
    int argc;
    char **argv;
    pp_opt_parser parser;
    pp_opt rows[PP_OPT_MAX]; /* pp_cli_init: the struct option array as rows */
    char name[64];         /* the option just read as written: "--ranks", "-p" */
    const char *arg;       /* its value; NULL when it takes none */
    const char *unknown;   /* "unknown option" (set after pp_cli_init to change it) */
    const char *value;     /* "a value", in "--opt needs a value" */
} pp_cli;

/* Starts a parse of argv[1..argc) over the groups' rows (getopt_long's state is reset). */
void pp_cli_init_opts(pp_cli *p, const char *cmd, int argc, char **argv,
                      const pp_opt_group *groups, int n_groups);
/* The same for getopt_long's options and short letters ("ho:"): every option is returned by
 * its code (a long option's val, a short letter). */
void pp_cli_init(pp_cli *p, const char *cmd, int argc, char **argv, const char *shortopts,
                 const struct option *longopts);
/* The next option's code (a row's code, a short letter or a long option's val: rows without
 * a code are applied and skipped), -1 when none is left (the other words are at
 * argv[optind..argc)), or PP_CLI_BAD after printing the message. */
int pp_cli_next(pp_cli *p);
/* -1 when no word is left after the options, else prints `unknown option "WORD"` and returns
 * 2: for commands that take no file. */
int pp_cli_no_words(const pp_cli *p);

/* The terminal's width for output to stdout: $COLUMNS when it is a positive number, else the
 * terminal's own (TIOCGWINSZ) when stdout is one, else 0 (unknown: not a terminal). */
int pp_cli_terminal_columns(void);
/* The width pptune wraps its prose lines to: pp_cli_terminal_columns(), 100 when unknown. */
int pp_cli_text_width(void);
/* printf-formatted text as lines wrapped to pp_cli_text_width() (continuation lines indented
 * by `indent`), ended with a newline. */
void pp_cli_wrapped(FILE *fp, int indent, const char *fmt, ...) PP_PRINTF(3, 4);
/* -o's argument for a writer: NULL (standard output) for "-", as every -o of pptune honours
 * it, else path itself. */
const char *pp_cli_output_path(const char *path);

/* ---- messages and exit codes of the commands --------------------------------------------------- */
/* Prints "pptune <cmd>: <message>" and "(see 'pptune <cmd> --help')" to stderr and returns 2
 * (usage) — for argument errors. */
int pp_cmd_usage_error(const char *cmd, const char *fmt, ...) PP_PRINTF(2, 3);
/* Prints "pptune <cmd>: <pp_err_msg()>" and returns the exit code for the status (2 for
 * invalid input / parse / not found, 1 otherwise). */
int pp_cmd_fail(const char *cmd, int status);
/* Parses a base-10 int option value (at most 1e9); on error prints which option and value,
 * returns 0. */
int pp_cmd_parse_int(const char *cmd, const char *opt, const char *val, int min, int *out);
int pp_cmd_parse_double(const char *cmd, const char *opt, const char *val, double min,
                        double *out);

#endif
