/* tune_cli.h — private to the pptune program: the options the search (`pptune --model ...`) and
 * `pptune simulate` share: which model, which cluster, and the memory-model switches. */
#ifndef PP_TUNE_CLI_H
#define PP_TUNE_CLI_H

#include "cli.h"
#include "pp_tune.h"

typedef struct {
    const char *model, *model_config, *model_file; /* exactly one */
    const char *cluster;                          /* preset name, cluster file, or "local" */
    int nodes;
    int layers;       /* 0 = the model's; else its first `layers` blocks */
    int seq;          /* 0 = the model's */
    int global_batch; /* 0 = the model's */
    pp_tune_opts opts;
    pp_tune_force force; /* the settings forced by flags (PP_TUNE_SEARCHED: not) */
    /* cluster "local" inside this allocation: every node of it probed, one rank each
     * (pp_tune_probe_nodes, the program's own pptune); NULL: this machine only */
    const pp_tune_alloc *probe_nodes;
} pp_cli_tune;

/* The codes of the shared options checked further (pp_cli_tune_option); the rows are
 * tune_cli.c's, fields of pp_cli_tune (pp_cli_tune_parse gives them to a command). */
enum { PP_CLI_HEADROOM = PP_CLI_CODE, PP_CLI_GEMM_EFF };

void pp_cli_tune_init(pp_cli_tune *c);
/* Checks option `code` just read by pp_cli_next(p) when it is a shared option (its field is
 * set): returns 1 when it is, 0 not a shared option, -1 bad value (the message is printed;
 * exit with 2). */
int pp_cli_tune_option(const pp_cli *p, int code, pp_cli_tune *c);
/* Help text lines for the shared options (their rows). */
void pp_cli_tune_help(FILE *fp);
/* A command of the shared options and its own rows (their fields in `own`): starts the parse
 * (pp_cli_init_opts over both groups), and prints the help of both (own_defaults: `own` as
 * its defaults hold it, for the rows that state theirs). */
void pp_cli_tune_parse(pp_cli *p, const char *cmd, int argc, char **argv, pp_cli_tune *tune,
                       const pp_opt *rows, int n, void *own);
void pp_cli_tune_help_with(FILE *fp, const pp_opt *rows, int n, const void *own_defaults);
/* Loads the model and the hardware summary; returns 0 or the exit code (message printed).
 * cluster_json (may be NULL): receives the cluster description as JSON (caller frees) when it
 * has at most 64 devices (a probed machine or a small file); NULL for larger ones, whose
 * preset name and node count in hw describe them. */
int pp_cli_tune_load(const char *cmd, const pp_cli_tune *c, pp_tune_model *m, pp_tune_hw *hw,
                     char **cluster_json);
/* 1 when --cluster names a file (a '/' or ".json" in it), 0 for a preset or "local". */
int pp_cli_cluster_is_file(const char *cluster);
/* One line each: model, cluster, options (what the figures are based on). */
void pp_cli_tune_describe(FILE *fp, const pp_tune_model *m, const pp_tune_hw *hw,
                          const pp_tune_opts *o, const pp_tune_force *f, int global_batch);
/* (f: the settings forced on a search, said in a "settings" line; NULL: no such line) */

/* What the search's callbacks print to (their progress_ctx). */
typedef struct {
    int progress; /* 1: progress bars on stderr */
} pp_cli_search_view;

/* Trials (tune_trials_cli.c): prints pp_tune_search's trial events (ctx: pp_cli_search_view):
 * a progress bar, and a line on stderr for each candidate not trialled, not started or
 * failed. */
void pp_cli_trial_event(void *ctx, const pp_tune_trial_event *ev);

/* ---- What the search prints (board.c, explain.c) ------------------------------------------- */
/* (Figures are written with common/fmt.c's pp_fmt_seconds, pp_fmt_bytes, pp_fmt_grouped and
 * pp_fmt_params, the same in every command.) */

/* A trialled candidate's figures in its measured time. */
typedef struct {
    double step;           /* s, pprun's median */
    double tokens_per_s;
    double tflops_per_gpu; /* model FLOPs per device in the measured step */
    double mfu;
    double peak;           /* bytes, the fullest rank */
    double error;          /* (predicted - measured) / measured step time */
} pp_cli_measured_figures;
/* 1 and *out filled when p's trial ran ("ok"), else 0 (out zeroed). */
int pp_cli_measured(const pp_tune_prediction *p, pp_cli_measured_figures *out);

/* The leaderboard's first `show` rows with headers and legend; after trials measured figures
 * in the main columns and the prediction beside them. */
void pp_cli_board_print(FILE *fp, const pp_tune_result *r, int show);
/* Ranks a per-rank table shows whole; beyond, only the first, the last, the fullest and the
 * emptiest (all: every rank). */
#define PP_CLI_RANKS_SHOWN 8
/* The memory model's per-rank table of a leaderboard entry (nothing when it has none). */
void pp_cli_rank_memory_print(FILE *fp, const pp_tune_prediction *best, int all);
/* The table itself, P ranks of mem (simulate's too). */
void pp_cli_rank_memory_table(FILE *fp, const pp_tune_rank_mem *mem, int P, int all);
/* "#1 <config>: recompute ...; sequence parallelism ...; ...": the winner's settings. */
void pp_cli_winner_print(FILE *fp, const pp_tune_prediction *best);
/* --explain: rejections by reason, each schedule's best against #1 with time and memory
 * breakdowns, the Pareto front; all: also every rejected candidate. */
void pp_cli_explain_print(FILE *fp, const pp_tune_model *m, const pp_tune_hw *hw,
                          const pp_tune_result *r, int all);
/* simulate's "step's parts" line: the time breakdown in seconds. */
void pp_cli_step_parts_print(FILE *fp, const pp_tune_time_parts *t);
/* --report: the search as one self-contained HTML page (report.c), written atomically. */
pp_status pp_cli_report_write(const char *path, const pp_tune_model *m, const pp_tune_hw *hw,
                              const pp_tune_result *r);
/* The rejections grouped by reason (numbers in a reason do not split it), commonest first,
 * of schedule `kind` (NULL: all): *n groups, each its count and one example (caller frees the
 * array; NULL and *n = 0 when there are none). */
typedef struct {
    long count;
    const pp_tune_reject *example;
} pp_cli_reason;
pp_cli_reason *pp_cli_reasons(const pp_tune_result *r, const char *kind, int *n);
/* "rule", "memory", "outranked", "bound": a reject's stage as --explain names it. */
const char *pp_cli_reason_stage(int stage);
/* One line per most common reason (at most `max`), for "nothing fits" on stderr. */
void pp_cli_reasons_print(FILE *fp, const pp_tune_result *r, int max);

#endif
