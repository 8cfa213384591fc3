/* cmd_validate.c — `pptune validate`: the time model's predictions for the bundled published
 * end-to-end runs (validate.c), with each row's error and the median, so a user sees how far to
 * trust a prediction for that hardware class. Prints; decides nothing. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "pp_tune.h"

#define CMD "validate"

static void help(void)
{
    printf("usage: pptune validate [--without LIST]\n\n"
           "Predicts the step time of published end-to-end training runs (bundled with their\n"
           "sources: Megatron-LM's weak-scaling table, Narayanan et al. SC'21) with the same\n"
           "time model and constants as every other command, and prints predicted vs published\n"
           "per row, the error, and the median and largest |error|. Each row runs the paper's\n"
           "layout (t = min(8, t.p), p = t.p / t, full recompute, no flash attention) with\n"
           "the micro-batch size and chunks per rank of the scripts that produced the table\n"
           "(Megatron-LM examples/sc21/run_table_1.sh); a row that publishes none gets the\n"
           "ones the model predicts fastest among those that fit.\n\n"
           "options:\n"
           "  --without LIST   switch effects of the time model off, to see each one's share\n"
           "                   (comma list of):");
    for (int i = 0; pp_tune_fx_name(i); i++)
        printf("%s%s", i % 5 ? ", " : "\n                     ", pp_tune_fx_name(i));
    printf("\n  -h, --help       this text\n");
}

static int parse_without(const char *list, unsigned *out)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int i = 0;
        while (pp_tune_fx_name(i) && strcmp(pp_tune_fx_name(i), tok) != 0)
            i++;
        if (!pp_tune_fx_name(i))
            return pp_cmd_usage_error(CMD, "--without: unknown effect \"%s\"", tok), 0;
        *out |= 1u << i;
    }
    return 1;
}

static void print(const pp_tune_validation *v, unsigned without)
{
    printf("time model vs published end-to-end step times\n");
    printf("source: %s\n", v->rows[0].row->source);
    printf("figures from: cluster preset %s (%s)\n", v->rows[0].row->cluster, v->hw_note);
    if (without) {
        printf("effects off:");
        for (int i = 0; pp_tune_fx_name(i); i++)
            if (without & (1u << i))
                printf(" %s", pp_tune_fx_name(i));
        printf("\n");
    }
    printf("\n  %-7s %5s %4s %5s  %-44s %12s %12s %8s\n", "model", "t.p", "GPUs", "batch",
           "layout (the run's b, v)", "published(s)", "predicted(s)", "error");
    for (int i = 0; i < v->n; i++) {
        const pp_tune_check *c = &v->rows[i];
        char cb[160];
        pp_config_str(&c->cfg, cb, sizeof cb);
        printf("  %-7s %5d %4d %5d  %-44s %12.2f %12.2f %+7.1f%%\n", c->row->name,
               c->row->model_parallel, c->row->gpus, c->row->global_batch, cb, c->published_step,
               c->predicted_step, 100 * c->error);
    }

    printf("\nmedian |error| %.1f %%, largest %.1f %% (%d rows)\n", 100 * v->median_abs,
           100 * v->max_abs, v->n);
    printf("\neach row's prediction, reproduced by pptune simulate%s:\n",
           without ? " (without the effects switched off here: --without is validate's)" : "");
    for (int i = 0; i < v->n; i++) {
        char line[400];
        printf("  %s\n", pp_tune_check_simulate_line(&v->rows[i], line, sizeof line));
    }
}

int pp_cmd_validate(int argc, char **argv)
{
    unsigned without = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            help();
            return 0;
        }
        if (!strcmp(argv[i], "--without")) {
            if (i + 1 >= argc)
                return pp_cmd_usage_error(CMD, "--without needs a value");
            if (!parse_without(argv[++i], &without))
                return 2;
            continue;
        }
        return pp_cmd_usage_error(CMD, "unknown argument \"%s\"", argv[i]);
    }
    pp_tune_validation v;
    pp_status st = pp_tune_validate(without, &v);
    if (st != PP_OK)
        return pp_cmd_fail(CMD, st);
    print(&v, without);
    return 0;
}
