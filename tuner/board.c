/* board.c — the search's leaderboard as a person reads it (pptune's stdout): readable column
 * headers and a legend, the figures in common/fmt.c's units (seconds to 4 significant digits,
 * grouped tokens/s, memory with its binary unit: GiB, MiB below 1 GiB, KiB), the per-rank
 * memory table. After trials the measured figures take the main columns and the prediction
 * sits beside them with the model's error. The HTML report (report.c) formats its own table
 * with the same formatters and pp_cli_measured. Decides nothing: the order is the search's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "tune_cli.h"

int pp_cli_measured(const pp_tune_prediction *p, pp_cli_measured_figures *out)
{
    memset(out, 0, sizeof *out);
    if (strcmp(p->trial_status, "ok") != 0 || p->measured_step <= 0)
        return 0;
    /* the same tokens and model FLOPs per step, in the measured time */
    double scale = p->step_time / p->measured_step;
    out->step = p->measured_step;
    out->tokens_per_s = p->tokens_per_s * scale;
    out->tflops_per_gpu = p->tflops_per_gpu * scale;
    out->mfu = p->mfu * scale;
    out->peak = p->measured_peak;
    out->error = (p->step_time - p->measured_step) / p->measured_step;
    return 1;
}

static void config_cols(char *buf, size_t n, const pp_config *c)
{
    char g[12] = "-", split[32], set[48];
    if (c->G)
        snprintf(g, sizeof g, "%d", c->G);
    snprintf(buf, n, "%-11s %3d %2d %4s %3d %5d %2d %2d %5d %-6s %-12s", c->schedule, c->p, c->v,
             g, c->b, c->d, c->t, c->cp, c->N, pp_config_split_str(c, split, sizeof split),
             pp_tune_axes_str(c, set, sizeof set));
}

static const char *CONFIG_HEAD =
    "schedule      p  v    G   b     d  t cp     N split  settings    ";

static void predicted_row(FILE *fp, int rank, const pp_tune_prediction *p)
{
    char cfg[96], tok[32], pk[16], cap[16], st[16];
    config_cols(cfg, sizeof cfg, &p->cfg);
    fprintf(fp, "%3d  %s %8s %12s %7.3g %5.1f%% %6.1f%% %9s / %s\n", rank, cfg,
            pp_fmt_seconds(p->step_time, st, sizeof st),
            pp_fmt_grouped(p->tokens_per_s, tok, sizeof tok), p->tflops_per_gpu, 100 * p->mfu,
            100 * p->bubble_ideal, pp_fmt_bytes(p->peak_mem, pk, sizeof pk),
            pp_fmt_bytes(p->capacity, cap, sizeof cap));
}

static void measured_row(FILE *fp, int rank, const pp_tune_prediction *p)
{
    char cfg[96], tok[32], main[96], g[3][16], s[2][16];
    config_cols(cfg, sizeof cfg, &p->cfg);
    pp_cli_measured_figures mf;
    if (pp_cli_measured(p, &mf))
        snprintf(main, sizeof main, "%8s %12s %7.3g %9s", pp_fmt_seconds(mf.step, s[0], 16),
                 pp_fmt_grouped(mf.tokens_per_s, tok, sizeof tok), mf.tflops_per_gpu,
                 pp_fmt_bytes(mf.peak, g[0], sizeof g[0]));
    else
        snprintf(main, sizeof main, "%8s %12s %7s %9s", "-", "-", "-", "-");
    char err[16] = "-";
    if (mf.step > 0)
        snprintf(err, sizeof err, "%+.0f%%", 100 * mf.error);
    const char *trial = p->trial_status[0] ? p->trial_status : "not run";
    fprintf(fp, "%3d  %s %s | %8s %6s %9s | %9s  %s\n", rank, cfg, main,
            pp_fmt_seconds(p->step_time, s[1], 16), err,
            pp_fmt_bytes(p->peak_mem, g[1], sizeof g[1]),
            pp_fmt_bytes(p->capacity, g[2], sizeof g[2]), trial);
}

/* A legend when a split-backward schedule (the zero-bubble family, the registry's
 * split_backward rows) is on the board: what its I and W are and who can run it. */
static void split_legend(FILE *fp, const pp_tune_result *r, int show)
{
    int any = 0, n;
    for (int i = 0; i < r->n_best && i < show; i++) {
        const pp_sched_desc *d = pp_sched_lookup(r->best[i].cfg.schedule);
        any |= d && d->split_backward;
    }
    if (!any)
        return;
    char names[128] = "";
    size_t len = 0;
    const pp_sched_desc *kinds = pp_sched_generators(&n);
    for (int k = 0; k < n && len < sizeof names; k++)
        if (kinds[k].split_backward)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "",
                                    kinds[k].name);
    pp_cli_wrapped(fp, 1,
                   "(%s: split backward, each backward run as I (the input gradient the previous "
                   "stage waits for) and W (the weight gradient, deferred into the bubble); "
                   "upstream Megatron-LM has no such schedule, PyTorch pipelining and torchtitan "
                   "run them: pptune export --format torchtitan)",
                   names);
}

void pp_cli_board_print(FILE *fp, const pp_tune_result *r, int show)
{
    int trials = r->trialled > 0;
    if (!trials)
        fprintf(fp, "\n  #  %s  step s     tokens/s TFLOP/s   MFU  bubble      peak / usable\n",
                CONFIG_HEAD);
    else
        fprintf(fp, "\n     %*s measured:                             | predicted:              |\n"
                    "  #  %s  step s     tokens/s TFLOP/s      peak |   step s  error      peak | "
                    "   usable  trial\n",
                (int)strlen(CONFIG_HEAD), "", CONFIG_HEAD);
    for (int i = 0; i < r->n_best && i < show; i++)
        (trials ? measured_row : predicted_row)(fp, i + 1, &r->best[i]);
    pp_cli_wrapped(fp, 1,
                   "(p pipeline ranks, v chunks per rank, G interleaving group, b micro-batch "
                   "size, d data-parallel replicas, t tensor-parallel size, cp context-parallel "
                   "size, N micro-batches per step; split: the layers per stage, even, uneven "
                   "(Llama 3's: the first and last stage one layer fewer) or F/L (the first "
                   "stage holds F layers, the last L, the rest even; - the even count); "
                   "settings: recompute - none, sel selective, full every layer, full-k the "
                   "first k layers of each stage; sp sequence parallel; z1 optimizer state "
                   "sharded over d x cp, z2 and gradients; GiB = 2^30 bytes, MiB = 2^20)");
    int ep = 0;
    for (int i = 0; i < r->n_best && i < show; i++)
        ep |= r->best[i].cfg.ep > 1;
    if (ep)
        pp_cli_wrapped(fp, 1, "(epE: each MoE layer's routed experts split over E "
                              "expert-parallel ranks carved out of the d x cp ones, tokens "
                              "dispatched and combined by all-to-alls)");
    if (trials)
        pp_cli_wrapped(fp, 1,
                       "(measured: pprun's median step after warm-up and its fullest rank's "
                       "peak; error = (predicted - measured) / measured step; TFLOP/s: model "
                       "FLOPs per device in the measured time)");
    else
        pp_cli_wrapped(fp, 1,
                       "(step = simulated pipeline, each rank's data-parallel all-reduce after "
                       "its last backward, optimizer: predicted; TFLOP/s and MFU: model FLOPs per "
                       "device (Narayanan) vs its peak; bubble = idle / busy; peak = fullest "
                       "rank's predicted bytes vs usable memory after headroom)");
    split_legend(fp, r, show);
    int steady = 0;
    for (int i = 0; i < r->n_best && i < show; i++)
        steady += r->best[i].cfg.N > pp_tune_steady_budget();
    if (steady)
        fprintf(fp, "(N above %d: predicted from the steady state of bounded prefixes, not "
                    "simulated whole)\n",
                pp_tune_steady_budget());
}

/* The ranks a table shows: all of them when there are few or `all`; else the first and the
 * last, the fullest (*hi) and the emptiest (*lo) by total, in rank order. Fills show[] (P
 * entries, 1: shown) and returns how many are shown. */
static int ranks_shown(const pp_tune_rank_mem *mem, int P, int all, char *show, int *hi, int *lo)
{
    int few = all || P <= PP_CLI_RANKS_SHOWN, n = 0;
    *hi = *lo = 0;
    for (int r = 1; r < P; r++) {
        *hi = mem[r].total > mem[*hi].total ? r : *hi;
        *lo = mem[r].total < mem[*lo].total ? r : *lo;
    }
    for (int r = 0; r < P; r++)
        n += show[r] = few || r == 0 || r == P - 1 || r == *hi || r == *lo;
    return n;
}

void pp_cli_rank_memory_table(FILE *fp, const pp_tune_rank_mem *mem, int P, int all)
{
    char *show = calloc((size_t)P, 1);
    if (!show)
        return;
    int hi, lo, n = ranks_shown(mem, P, all, show, &hi, &lo);
    fprintf(fp, "  rank   weights     grads     optim      acts in-flight      comm workspace "
                "    total\n");
    for (int r = 0, last = -1; r < P; r++) {
        if (!show[r])
            continue;
        if (last >= 0 && r > last + 1)
            fprintf(fp, "   ...  (%d ranks between)\n", r - last - 1);
        last = r;
        char b[7][16];
        fprintf(fp, "  %4d %9s %9s %9s %9s %9.3g %9s %9s %9s%s\n", r,
                pp_fmt_bytes(mem[r].weights, b[0], 16), pp_fmt_bytes(mem[r].grads, b[1], 16),
                pp_fmt_bytes(mem[r].optim, b[2], 16), pp_fmt_bytes(mem[r].acts, b[3], 16),
                mem[r].peak_units, pp_fmt_bytes(mem[r].comm, b[4], 16),
                pp_fmt_bytes(mem[r].workspace, b[5], 16), pp_fmt_bytes(mem[r].total, b[6], 16),
                n < P && r == hi ? "  fullest" : n < P && r == lo ? "  emptiest" : "");
    }
    if (n < P)
        fprintf(fp, "  (%d of %d ranks: the first, the last, the fullest and the emptiest; "
                    "--explain=all shows every rank)\n",
                n, P);
    free(show);
}

void pp_cli_winner_print(FILE *fp, const pp_tune_prediction *best)
{
    char cb[160], ab[200];
    fprintf(fp, "\n#1 %s: %s\n", pp_config_str(&best->cfg, cb, sizeof cb),
            pp_tune_axes_describe(&best->cfg, ab, sizeof ab));
}

void pp_cli_rank_memory_print(FILE *fp, const pp_tune_prediction *best, int all)
{
    const pp_tune_rank_mem *mem = best->mem; /* the search's, for its schedule */
    if (!mem)
        return;
    fprintf(fp, "\npredicted memory per pipeline rank of #1 (in flight: micro-batches x L/p "
                "layers)\n");
    pp_cli_rank_memory_table(fp, mem, best->cfg.p, all);
}
