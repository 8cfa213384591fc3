/* main.c — the pptune program: dispatches to one subcommand per file (cmd_*.c). Only that:
 * the messages, exit codes and option parsing the commands share are cli.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "pp_common.h"

static const pp_cmd commands[] = {
    {.name = "schedule", .summary = "generate, check and show one pipeline schedule",
     .run = pp_cmd_schedule},
    {.name = "probe",
     .summary = "describe the cluster: probe this machine (all nodes under mpirun) or a preset",
     .run = pp_cmd_probe},
    {.name = "search",
     .summary = "find the fastest configuration (the bare form: pptune --model M --nodes N)",
     .run = pp_cmd_search},
    {.name = "models", .summary = "list the model presets with their sizes", .run = pp_cmd_models},
    {.name = "simulate",
     .summary = "predict one configuration: step time, memory per rank, timeline",
     .run = pp_cmd_simulate},
    {.name = "validate",
     .summary = "the time model against published end-to-end runs: error per row, median",
     .run = pp_cmd_validate},
    {.name = "diff",
     .summary = "compare two profiles; exit 3 when throughput dropped past a threshold",
     .run = pp_cmd_diff},
    {.name = "export", .run = pp_cmd_export, .describe = pp_cmd_export_summary},
    {.name = "publish", .summary = "put a profile in the HTTP store (or the local one)",
     .run = pp_cmd_publish},
    {.name = "fetch", .summary = "get this cluster's profile of a model from the HTTP store",
     .run = pp_cmd_fetch},
};
#define N_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void usage(FILE *fp)
{
    fprintf(fp, "usage: pptune <command> [options]\n\n"
                "pptune finds the fastest pipeline-parallel training configuration for a model\n"
                "on a GPU cluster.\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++) {
        char buf[256];
        const pp_cmd *c = &commands[i];
        fprintf(fp, "  %-10s %s\n", c->name,
                c->describe ? c->describe(buf, sizeof buf) : c->summary);
    }
    fprintf(fp, "\n'pptune <command> --help' describes each command.\n"
                "The search: pptune --model M --nodes N (see 'pptune search --help').\n"
                "'pptune --version' prints the version and git revision.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("pptune %s\n", pp_version());
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
