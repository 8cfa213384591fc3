/* tune_cli.c — shared option parsing for the search and `pptune simulate` (program side: prints
 * and returns exit codes; the work is in the pp_tuner library). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tune_cli.h"

void pp_cli_tune_init(pp_cli_tune *c)
{
    memset(c, 0, sizeof *c);
    c->cluster = "dgx-h100";
    c->nodes = 1;
    pp_tune_opts_default(&c->opts);
    pp_tune_force_init(&c->force);
}

static const char *const GRAD_ACCUM[] = {"fused", "main", "autograd16", NULL};

#define OFF(f) offsetof(pp_cli_tune, f)
/* clang-format off */
static const pp_opt rows[] = {
    {.kind = PP_OPT_SECTION, .help = "model (one of):", .width = 25},
    {.name = "model", .kind = PP_OPT_STRING, .offset = OFF(model), .arg = "NAME",
     .help = "a preset (see 'pptune models')"},
    {.name = "model-config", .kind = PP_OPT_STRING, .offset = OFF(model_config), .arg = "FILE",
     .help = "a HuggingFace config.json: trials and the launch\n"
             "line give pprun --model-config with its absolute\n"
             "path; the profile records that and its SHA-256"},
    {.name = "model-file", .kind = PP_OPT_STRING, .offset = OFF(model_file), .arg = "FILE",
     .help = "pptune's model JSON (planned only: pprun does not\nread it)"},
    {.name = "layers", .kind = PP_OPT_INT, .offset = OFF(layers), .min = 1, .arg = "L",
     .help = "plan the model's first L blocks (same embedding, head\n"
             "and block; pprun --layers L): trials of a few layers\n"
             "of a big model; the profile records the cut"},
    {.name = "seq", .kind = PP_OPT_INT, .offset = OFF(seq), .min = 1, .arg = "S",
     .help = "sequence length (default: the model's)"},
    {.name = "global-batch", .kind = PP_OPT_INT, .offset = OFF(global_batch), .min = 1,
     .arg = "B", .help = "sequences per optimizer step (default: the model's)"},
    {.kind = PP_OPT_SECTION, .help = "cluster:"},
    {.name = "cluster", .kind = PP_OPT_STRING, .offset = OFF(cluster), .arg = "C",
     .help = "preset (dgx-a100-80g, dgx-h100, hgx-h200), a cluster file\n"
             "written by 'pptune probe -o', or 'local' (probe this\nmachine)",
     .show_default = 1},
    {.name = "nodes", .kind = PP_OPT_INT, .offset = OFF(nodes), .min = 1, .arg = "N",
     .help = "nodes of a preset", .show_default = 1},
    {.kind = PP_OPT_SECTION,
     .help = "settings (the search varies each; a flag forces its value; simulate: none, off,\n"
             "none, 1 unless given):", .width = 36},
    {.name = "recompute", .kind = PP_OPT_CHOICE, .offset = OFF(force.recompute),
     .choices = pp_recompute_names, .arg = "none|selective|full",
     .help = "activation recomputation (Megatron --recompute-granularity)"},
    {.name = "recompute-layers", .kind = PP_OPT_INT, .offset = OFF(force.recompute_layers),
     .min = 0, .arg = "K",
     .help = "with full: only the first K layers of each stage (Megatron\n"
             "--recompute-method block); 0 every layer"},
    {.name = "sequence-parallel", .kind = PP_OPT_FLAG, .offset = OFF(force.sequence_parallel),
     .help = "Megatron sequence parallelism (needs t > 1)"},
    {.name = "no-sequence-parallel", .kind = PP_OPT_CLEAR,
     .offset = OFF(force.sequence_parallel), .help = "without it"},
    {.name = "shard", .kind = PP_OPT_CHOICE, .offset = OFF(force.shard),
     .choices = pp_shard_names, .arg = "none|optimizer|gradients",
     .help = "over the d x cp replicas: ZeRO-1 (Adam state, 6+12/d B)\n"
             "or ZeRO-2 (and the fp32 gradients, 2+16/d B)"},
    {.name = "distributed-optimizer", .kind = PP_OPT_FLAG, .offset = OFF(force.shard),
     .help = "--shard optimizer (Megatron's flag)"},
    {.name = "cp", .kind = PP_OPT_INT, .offset = OFF(force.cp), .min = 1, .arg = "C",
     .help = "context parallelism: the sequence over C ranks (ring\n"
             "attention, 2C must divide it); d = GPUs / (p t C)"},
    {.name = "ep", .kind = PP_OPT_INT, .offset = OFF(force.ep), .min = 1, .arg = "E",
     .help = "expert parallelism (mixture-of-experts models): each\n"
             "expert over E ranks carved out of d x cp; E divides the\n"
             "experts and d x cp"},
    {.kind = PP_OPT_SECTION, .help = "memory and time models:"},
    {.name = "no-flash-attention", .kind = PP_OPT_CLEAR, .offset = OFF(opts.flash_attention),
     .help = "keep the s x s attention scores"},
    {.name = "grad-accum", .kind = PP_OPT_CHOICE, .offset = OFF(opts.grad_accum),
     .choices = GRAD_ACCUM, .arg = "fused|main|autograd16",
     .help = "gradient accumulation: in the wgrad GEMM, into the fp32\n"
             "main grad per micro-batch, or autograd's 16-bit (2021)",
     .show_default = 1},
    {.name = "moe-imbalance", .kind = PP_OPT_DOUBLE, .offset = OFF(opts.moe_imbalance),
     .min = 1, .arg = "F",
     .help = "MoE: the busiest expert rank's routed tokens over the\n"
             "mean (Switch Transformer's capacity factor)",
     .show_default = 1},
    {.name = "headroom", .kind = PP_OPT_DOUBLE, .offset = OFF(opts.headroom),
     .code = PP_CLI_HEADROOM, .arg = "F", .help = "fraction of device memory kept free",
     .show_default = 1},
    {.name = "gemm-efficiency", .kind = PP_OPT_DOUBLE, .offset = OFF(opts.gemm_efficiency),
     .code = PP_CLI_GEMM_EFF, .arg = "F",
     .help = "fraction of the cluster's GEMM rate layers reach", .show_default = 1},
};
/* clang-format on */

void pp_cli_tune_help(FILE *fp)
{
    pp_cli_tune dflt;
    pp_cli_tune_init(&dflt);
    pp_opt_help(fp, rows, (int)(sizeof rows / sizeof rows[0]), &dflt);
}

void pp_cli_tune_parse(pp_cli *p, const char *cmd, int argc, char **argv, pp_cli_tune *tune,
                       const pp_opt *own_rows, int n, void *own)
{
    pp_opt_group groups[] = {
        {.opts = rows, .n = (int)(sizeof rows / sizeof rows[0]), .target = tune},
        {.opts = own_rows, .n = n, .target = own}};
    pp_cli_init_opts(p, cmd, argc, argv, groups, 2);
}

void pp_cli_tune_help_with(FILE *fp, const pp_opt *own_rows, int n, const void *own_defaults)
{
    pp_cli_tune_help(fp);
    pp_opt_help(fp, own_rows, n, own_defaults);
}

/* The fractions: the table took a number >= 0; the headroom leaves some memory, the GEMM
 * efficiency is some of the rate. */
int pp_cli_tune_option(const pp_cli *p, int code, pp_cli_tune *c)
{
    if (code != PP_CLI_HEADROOM && code != PP_CLI_GEMM_EFF)
        return 0;
    if (c->opts.headroom >= 1.0 || c->opts.gemm_efficiency > 1.0 ||
        (code == PP_CLI_GEMM_EFF && c->opts.gemm_efficiency <= 0)) {
        pp_cmd_usage_error(p->cmd, "%s expects a fraction in (0, 1), got %s", p->name, p->arg);
        return -1;
    }
    return 1;
}

static int load_model(const char *cmd, const pp_cli_tune *c, pp_tune_model *m)
{
    int given = !!c->model + !!c->model_config + !!c->model_file;
    if (given != 1)
        return pp_cmd_usage_error(cmd, "give exactly one of --model, --model-config, "
                                       "--model-file (got %d)", given);
    pp_status st = c->model          ? pp_tune_model_preset(c->model, m)
                   : c->model_config ? pp_tune_model_load_hf(c->model_config, m)
                                     : pp_tune_model_load_json(c->model_file, m);
    if (st != PP_OK)
        return pp_cmd_fail(cmd, st);
    if (c->seq > PP_TUNE_MAX_SEQ)
        return pp_cmd_usage_error(cmd, "--seq: expected at most %d, got %d", PP_TUNE_MAX_SEQ,
                                  c->seq);
    if (c->global_batch > PP_TUNE_MAX_GLOBAL_BATCH)
        return pp_cmd_usage_error(cmd, "--global-batch: expected at most %d, got %d",
                                  PP_TUNE_MAX_GLOBAL_BATCH, c->global_batch);
    if (c->layers > PP_TUNE_MAX_LAYERS)
        return pp_cmd_usage_error(cmd, "--layers: expected at most %d, got %d",
                                  PP_TUNE_MAX_LAYERS, c->layers);
    if (c->layers && c->layers != m->layers) /* pprun --layers: the first L blocks */
        m->origin_layers = m->layers, m->layers = c->layers, pp_tune_model_pprun_note(m);
    if (c->seq && m->seq_note[0])
        snprintf(m->seq_note, sizeof m->seq_note, "s=%d from --seq", c->seq);
    if (c->seq)
        m->seq = c->seq, pp_tune_model_pprun_note(m); /* pprun's positions may be fewer */
    if (c->global_batch)
        m->global_batch = c->global_batch;
    return 0;
}

int pp_cli_cluster_is_file(const char *cluster)
{
    return strchr(cluster, '/') || strstr(cluster, ".json");
}

static pp_status open_cluster(const char *cmd, const pp_cli_tune *c, pp_cluster **cl,
                              char *source, size_t n)
{
    if (!strcmp(c->cluster, "local") && c->probe_nodes) {
        const pp_tune_alloc *a = c->probe_nodes;
        char self[4096];
        PP_TRY(pp_tune_self_path(self, sizeof self));
        fprintf(stderr, "pptune %s: probing every node of the allocation (%s, one %s rank each, "
                        "quick)...\n",
                cmd, a->nodes, a->launcher);
        PP_TRY(pp_tune_probe_nodes(a, self, 1, PP_TUNE_PROBE_NODES_TIMEOUT_S, cl, source, n));
        printf("%s\n", source);
        return PP_OK;
    }
    if (!strcmp(c->cluster, "local")) {
        pp_probe_opts po = {.quick = 1};
        fprintf(stderr, "pptune %s: probing this machine (quick)...\n", cmd);
        snprintf(source, n, "probed: this machine (quick)");
        return pp_probe_run(&po, cl);
    }
    if (pp_cli_cluster_is_file(c->cluster)) {
        snprintf(source, n, "%s", c->cluster);
        return pp_cluster_read(c->cluster, cl);
    }
    snprintf(source, n, "preset %s x %d nodes", c->cluster, c->nodes);
    return pp_cluster_load_preset(c->cluster, c->nodes, cl);
}

static int load_cluster(const char *cmd, const pp_cli_tune *c, pp_tune_hw *hw, char **json)
{
    pp_cluster *cl = NULL;
    char source[300];
    pp_status st = open_cluster(cmd, c, &cl, source, sizeof source);
    char why[300];
    if (st == PP_OK && pp_tune_nodes_differ(cl, PP_TUNE_NODES_TOLERANCE, why, sizeof why))
        fprintf(stderr, "pptune %s: warning: the nodes differ: %s; planning with the slowest "
                        "and smallest\n",
                cmd, why);
    if (st == PP_OK)
        st = pp_tune_hw_from_cluster(cl, source, hw);
    if (st == PP_OK && !strncmp(source, "preset ", 7))
        snprintf(hw->name, sizeof hw->name, "%s", c->cluster);
    if (st == PP_OK && json && cl->n_devices <= 64)
        st = pp_cluster_to_json(cl, json);
    pp_cluster_destroy(cl);
    if (st == PP_OK)
        return 0;
    int rc = pp_cmd_fail(cmd, st);
    /* a cluster file that cannot be read is bad input, like a malformed one (exit 2) */
    return st == PP_ERR_IO && pp_cli_cluster_is_file(c->cluster) ? 2 : rc;
}

int pp_cli_tune_load(const char *cmd, const pp_cli_tune *c, pp_tune_model *m, pp_tune_hw *hw,
                     char **cluster_json)
{
    if (cluster_json)
        *cluster_json = NULL;
    int rc = load_model(cmd, c, m);
    return rc ? rc : load_cluster(cmd, c, hw, cluster_json);
}

void pp_cli_tune_describe(FILE *fp, const pp_tune_model *m, const pp_tune_hw *hw,
                          const pp_tune_opts *o, const pp_tune_force *f, int global_batch)
{
    pp_tune_params pc;
    pp_tune_model_params(m, &pc);
    char params[16], mem[16], tokens[32];
    /* lines wrapped to the terminal (100 columns when not one), continued under the text */
    pp_cli_wrapped(fp, 9, "model    %s (%s): %s parameters, L=%d h=%d heads=%d/%d ffn=%d V=%d s=%d",
                   m->name, m->source, pp_fmt_params(pc.total, params, sizeof params), m->layers,
                   m->hidden, m->heads, m->kv_heads, m->ffn, m->vocab, m->seq);
    if (m->origin_layers) /* --layers: a cut of the model (or more of its block) */
        pp_cli_wrapped(fp, 9,
                       "         layers L=%d from --layers (the model has %d; pprun --layers %d)",
                       m->layers, m->origin_layers, m->layers);
    if (m->seq_note[0]) /* an imported model: where its sequence length came from */
        pp_cli_wrapped(fp, 9, "         sequence %s", m->seq_note);
    pp_cli_wrapped(fp, 9,
                   "cluster  %s: %d nodes x %d %s = %d devices, %s each, %.3g TFLOP/s GEMM "
                   "(peak %.3g), links %.3g GB/s intra / %.3g GB/s inter per device",
                   hw->source, hw->nodes, hw->gpus_per_node, hw->device,
                   hw->nodes * hw->gpus_per_node, pp_fmt_bytes(hw->mem_bytes, mem, sizeof mem),
                   hw->gemm_flops / 1e12, hw->peak_flops / 1e12, hw->intra_bw / 1e9,
                   hw->inter_bw / 1e9);
    pp_cli_wrapped(fp, 9, "         %s", hw->note);
    pp_cli_wrapped(fp, 9,
                   "training global batch %d sequences (%s tokens); %s; %s attention; "
                   "headroom %.0f %%",
                   global_batch, pp_fmt_grouped(global_batch * (double)m->seq, tokens, sizeof tokens),
            o->precision == PP_PREC_FP32 ? "fp32 (16 B/param)"
                                              : "bf16 + fp32 main grads + Adam (18 B/param)",
            o->flash_attention ? "flash" : "plain", 100 * o->headroom);
    if (!f) /* simulate: its own "settings" line says them */
        return;
    char forced[160];
    pp_tune_force_flags(f, forced, sizeof forced);
    pp_cli_wrapped(fp, 9,
                   "settings recompute, sequence parallelism, sharding, context parallelism%s: "
                   "%s%s",
                   m->block.moe.experts > 0 ? ", expert parallelism" : "",
                   forced[0] ? "searched except " : "searched", forced);
}
