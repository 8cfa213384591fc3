/* cli.h — private to the pptune program: every subcommand reads its options through
 * getopt_long (so `--opt=value` works as well as `--opt value`), with pptune's own messages
 * and exit code 2 instead of getopt's:
 *
 *     pptune schedule: unknown option "--bogus"
 *     pptune schedule: --ranks needs a value
 *
 * Options are read in order and the first bad one stops the parse; words that are not
 * options are moved after them (getopt's permutation) and left at argv[optind..] for the
 * command. Long-only options use codes from PP_CLI_CODE up; the shared groups (tune_cli.h,
 * store_opts.h) have their own ranges below the commands' PP_CLI_LOCAL. */
#ifndef PP_CLI_H
#define PP_CLI_H

#include <getopt.h>

enum {
    PP_CLI_BAD = -2,            /* pp_cli_next: bad option, message printed: exit 2 */
    PP_CLI_CODE = 0x100,        /* first code of the long-only options of tune_cli.h */
    PP_CLI_STORE = 0x140,       /* first code of store_opts.h's */
    PP_CLI_LOCAL = 0x200,       /* first code of a command's own long-only options */
};

typedef struct {
    const char *cmd;               /* "pptune CMD: ..." in messages */
    int argc;
    char **argv;
    char optstring[64];            /* ':' and the short options */
    const struct option *longopts; /* ends with a zero entry */
    char name[64];                 /* the option just read as written: "--ranks", "-p" */
    const char *arg;               /* its value; NULL when it takes none */
    const char *unknown;           /* "unknown option" (set after pp_cli_init to change it) */
    const char *value;             /* "a value", in "--opt needs a value" */
} pp_cli;

/* Starts a parse of argv[1..argc) (getopt_long's state is reset). */
void pp_cli_init(pp_cli *p, const char *cmd, int argc, char **argv, const char *shortopts,
                 const struct option *longopts);
/* The next option's code (the short letter or the long option's val), -1 when none is left
 * (the other words are at argv[optind..argc)), or PP_CLI_BAD after printing the message. */
int pp_cli_next(pp_cli *p);
/* -1 when no word is left after the options, else prints `unknown option "WORD"` and returns
 * 2: for commands that take no file. */
int pp_cli_no_words(const pp_cli *p);

/* The terminal's width for output to stdout: $COLUMNS when it is a positive number, else the
 * terminal's own (TIOCGWINSZ) when stdout is one, else 0 (unknown: not a terminal). */
int pp_cli_terminal_columns(void);

#endif
