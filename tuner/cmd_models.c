/* cmd_models.c — `pptune models`: the model presets with their sizes and parameter counts, or
 * one model (a preset, --model-config, --model-file) in detail. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"
#include "pp_tune.h"

#define CMD "models"

static void row(const pp_tune_model *m)
{
    pp_tune_params pc;
    pp_tune_model_params(m, &pc);
    char block[384], params[16], total[32], active[32];
    printf("%-12s %10s %4d %6d %4d %3d %6d %7d %5d %6d  %s%s\n", m->name,
           pp_fmt_params(pc.total, params, sizeof params),
           m->layers, m->hidden, m->heads, m->kv_heads, m->ffn, m->vocab, m->seq,
           m->global_batch, pp_tune_model_block(m, block, sizeof block),
           m->pprun ? " [runs on pprun]" : "");
    if (pc.moe_layers) /* exact counts: the published totals are stated to the parameter */
        printf("  experts  %s parameters in all, %s active per token (%d of the %d layers have "
               "experts)\n",
               pp_fmt_grouped(pc.total, total, sizeof total),
               pp_fmt_grouped(pc.active, active, sizeof active), pc.moe_layers, m->layers);
    if (m->seq_note[0])
        printf("  sequence %s\n", m->seq_note);
}

static const char *header =
    "name         parameters    L hidden  hds  kv    ffn   vocab   seq  batch  block\n";

int pp_cmd_models(int argc, char **argv)
{
    const char *cfg = NULL, *file = NULL;
    enum { MODEL_CONFIG = PP_CLI_LOCAL, MODEL_FILE };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"model-config", required_argument, NULL, MODEL_CONFIG},
        {"model-file", required_argument, NULL, MODEL_FILE},
        {0},
    };
    pp_cli p;
    pp_cli_init(&p, CMD, argc, argv, "h", longopts);
    p.value = "a file";
    for (int c; (c = pp_cli_next(&p)) != -1;) {
        if (c == PP_CLI_BAD)
            return 2;
        if (c == 'h') {
            printf("usage: pptune models [--model-config FILE | --model-file FILE]\n\n"
                   "Lists the model presets (parameters in billions, layers, hidden, heads, KV "
                   "heads, FFN,\nvocabulary, sequence, default global batch in sequences), or "
                   "shows one model read\nfrom a HuggingFace config.json or a pptune model "
                   "JSON.\n");
            return 0;
        }
        *(c == MODEL_CONFIG ? &cfg : &file) = p.arg;
    }
    int rc = pp_cli_no_words(&p);
    if (rc >= 0)
        return rc;
    pp_tune_model m;
    if (cfg || file) {
        pp_status st = cfg ? pp_tune_model_load_hf(cfg, &m) : pp_tune_model_load_json(file, &m);
        if (st != PP_OK)
            return pp_cmd_fail(CMD, st);
        printf("%s", header);
        row(&m);
        return 0;
    }
    int n;
    const char *const *names = pp_tune_model_names(&n);
    printf("%s", header);
    for (int i = 0; i < n; i++) {
        if (pp_tune_model_preset(names[i], &m) != PP_OK)
            return pp_cmd_fail(CMD, PP_ERR_NOTFOUND);
        row(&m);
    }
    return 0;
}
