/* cmd.h — private to the pptune program: one function per subcommand, each in cmd_<name>.c.
 * A command returns the process exit code: 0 success, 1 the work failed, 2 bad usage or input. */
#ifndef PP_CMD_H
#define PP_CMD_H

#include <stdio.h>

#include "cli.h" /* the messages, exit codes and option parsing every command uses */

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
    /* optional: the summary generated from a table (buf, n bytes), in place of `summary` */
    char *(*describe)(char *buf, size_t n);
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
/* "a profile as Megatron-LM flags, NeMo 1 YAML, ... or pprun flags": export's targets. */
char *pp_cmd_export_summary(char *buf, size_t n);
int pp_cmd_publish(int argc, char **argv);
int pp_cmd_fetch(int argc, char **argv);

#endif
