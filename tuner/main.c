/* main.c — the pptune program: dispatches to one subcommand per file (cmd_*.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "pp_common.h"

static const pp_cmd commands[] = {
    {"schedule", "generate, check and show one pipeline schedule", pp_cmd_schedule},
    {"probe", "describe the cluster: probe this machine (all nodes under mpirun) or a preset",
     pp_cmd_probe},
    {"search", "find the fastest configuration (the bare form: pptune --model M --nodes N)",
     pp_cmd_search},
    {"models", "list the model presets with their sizes", pp_cmd_models},
    {"simulate", "predict one configuration: step time, memory per rank, timeline",
     pp_cmd_simulate},
    {"validate", "the time model against published end-to-end runs: error per row, median",
     pp_cmd_validate},
    {"diff", "compare two profiles; exit 3 when throughput dropped past a threshold",
     pp_cmd_diff},
    {"export", "a profile as Megatron-LM flags, NeMo YAML or pprun flags", pp_cmd_export},
    {"publish", "put a profile in the HTTP store (or the local one)", pp_cmd_publish},
    {"fetch", "get this cluster's profile of a model from the HTTP store", pp_cmd_fetch},
};
#define N_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void usage(FILE *fp)
{
    fprintf(fp, "usage: pptune <command> [options]\n\n"
                "pptune finds the fastest pipeline-parallel training configuration for a model\n"
                "on a GPU cluster.\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++)
        fprintf(fp, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(fp, "\n'pptune <command> --help' describes each command.\n"
                "The search: pptune --model M --nodes N (see 'pptune search --help').\n");
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
    char *end;
    if (!val) {
        pp_cmd_usage_error(cmd, "%s needs a value", opt);
        return 0;
    }
    long v = strtol(val, &end, 10);
    if (end == val || *end != '\0' || v < min || v > 1000000000L) {
        pp_cmd_usage_error(cmd, "%s expects an integer >= %d, got \"%s\"", opt, min, val);
        return 0;
    }
    *out = (int)v;
    return 1;
}

int pp_cmd_parse_double(const char *cmd, const char *opt, const char *val, double min,
                        double *out)
{
    char *end;
    if (!val) {
        pp_cmd_usage_error(cmd, "%s needs a value", opt);
        return 0;
    }
    double v = strtod(val, &end);
    if (end == val || *end != '\0' || !(v >= min) || v > 1e300) {
        pp_cmd_usage_error(cmd, "%s expects a number >= %g, got \"%s\"", opt, min, val);
        return 0;
    }
    *out = v;
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("pptune 0.1.0\n");
        return 0;
    }
    /* The bare form `pptune --model M --nodes N` is the search. */
    if (strncmp(argv[1], "--", 2) == 0)
        return pp_cmd_search(argc, argv);
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "pptune: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
