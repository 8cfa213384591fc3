/* cmd.h — private to the pptune program: one function per subcommand, each in cmd_<name>.c.
 * A command returns the process exit code: 0 success, 1 the work failed, 2 bad usage or input. */
#ifndef PP_CMD_H
#define PP_CMD_H

#include <stdio.h>

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
} pp_cmd;

int pp_cmd_schedule(int argc, char **argv);
int pp_cmd_probe(int argc, char **argv);
int pp_cmd_search(int argc, char **argv);   /* also the bare form: argv[1] starts with "--" */
int pp_cmd_models(int argc, char **argv);
int pp_cmd_simulate(int argc, char **argv);
int pp_cmd_validate(int argc, char **argv); /* time model vs published runs (issue 15) */
/* profiles/ (issue 7): compare, export, and move profiles to and from a store */
int pp_cmd_diff(int argc, char **argv);
int pp_cmd_export(int argc, char **argv);
int pp_cmd_publish(int argc, char **argv);
int pp_cmd_fetch(int argc, char **argv);

/* Prints "pptune <cmd>: <message>" to stderr and returns 2 (usage) — for argument errors. */
int pp_cmd_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prints "pptune <cmd>: <pp_err_msg()>" and returns the exit code for the status (2 for
 * invalid input / parse / not found, 1 otherwise). */
int pp_cmd_fail(const char *cmd, int status);
/* Parses a base-10 int option value; on error prints which option and value, returns 0. */
int pp_cmd_parse_int(const char *cmd, const char *opt, const char *val, int min, int *out);
int pp_cmd_parse_double(const char *cmd, const char *opt, const char *val, double min,
                        double *out);

#endif
