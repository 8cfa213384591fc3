/* cmd_models.c — `pptune models`: the model presets with their sizes and parameter counts, or
 * one model (a preset, --model-config, --model-file) in detail. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "pp_tune.h"

#define CMD "models"

static void row(const pp_tune_model *m)
{
    pp_tune_params pc;
    pp_tune_model_params(m, &pc);
    printf("%-12s %8.3f B %4d %6d %4d %3d %6d %7d %5d %6d  %s%s\n", m->name, pc.total / 1e9,
           m->layers, m->hidden, m->heads, m->kv_heads, m->ffn, m->vocab, m->seq,
           m->global_batch, m->gated_mlp ? "gated MLP, RMSNorm, rotary, untied head"
                                         : "GeLU MLP, LayerNorm, learned positions, tied head",
           m->runtime_model[0] ? " [runs on pprun]" : "");
}

static const char *header =
    "name         parameters    L hidden  hds  kv    ffn   vocab   seq  batch  block\n";

int pp_cmd_models(int argc, char **argv)
{
    const char *cfg = NULL, *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: pptune models [--model-config FILE | --model-file FILE]\n\n"
                   "Lists the model presets (parameters in billions, layers, hidden, heads, KV "
                   "heads, FFN,\nvocabulary, sequence, default global batch in sequences), or "
                   "shows one model read\nfrom a HuggingFace config.json or a pptune model "
                   "JSON.\n");
            return 0;
        }
        const char **dst = !strcmp(argv[i], "--model-config") ? &cfg
                           : !strcmp(argv[i], "--model-file") ? &file
                                                               : NULL;
        if (!dst)
            return pp_cmd_usage_error(CMD, "unknown option \"%s\"", argv[i]);
        if (i + 1 >= argc)
            return pp_cmd_usage_error(CMD, "%s needs a file", argv[i]);
        *dst = argv[++i];
    }
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
