/* cmd_search.c — `pptune --model M --nodes N` (also `pptune search ...`): the search, its
 * leaderboard, --explain, and the profile.
 *
 * The search itself, with its trials, recalibration and choice, is pp_tune_search
 * (search.c, search_trials.c); this file parses options, shows progress on stderr (the
 * search's callbacks, tune_trials_cli.c for the trials), prints the leaderboard and the
 * winner's per-rank memory, and writes the profile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "tune_cli.h"

#define CMD "search"

typedef struct {
    pp_cli_tune tune;
    const char *schedules;
    const char *for_target; /* --for FORMAT: the schedules that export target runs */
    char for_schedules[256];
    const char *out;
    const char *report; /* --report FILE.html, NULL: none */
    const char *hostfile; /* --hostfile FILE: trials with mpirun over its hosts */
    pp_tune_alloc alloc;  /* the allocation trials run in (launcher "": this machine) */
    int keep, show, explain, no_save, no_tp, max_b, max_t, progress, trials, trial_steps;
    int max_cp, max_ep, no_probe_nodes;
    double trial_timeout;
    int stdout_fd; /* -o -: the real stdout (the profile's), while fd 1 is stderr; else -1 */
    char self[4096]; /* this pptune, for the all-reduce probe of reduced trials; "" unknown */
} opts;

static char schedules_help[400]; /* the registry's names (help() fills it) */
static char for_help[400];       /* the export table's formats (help() fills it) */

enum { HELP = PP_CLI_LOCAL, EXPLAIN };
#define OFF(f) offsetof(opts, f)
/* clang-format off */
static const pp_opt rows[] = {
    {.kind = PP_OPT_SECTION, .help = "search:", .width = 25},
    {.name = "schedules", .kind = PP_OPT_STRING, .offset = OFF(schedules), .arg = "LIST",
     .help = schedules_help},
    {.name = "for", .kind = PP_OPT_STRING, .offset = OFF(for_target), .arg = "TARGET",
     .help = for_help},
    {.name = "max-b", .kind = PP_OPT_INT, .offset = OFF(max_b), .min = 1, .arg = "B",
     .help = "largest micro-batch size tried (default 16)"},
    {.name = "max-t", .kind = PP_OPT_INT, .offset = OFF(max_t), .min = 1, .arg = "T",
     .help = "largest tensor-parallel size (default: GPUs per node)"},
    {.name = "no-tp", .kind = PP_OPT_FLAG, .offset = OFF(no_tp), .help = "t = 1 only"},
    {.name = "keep", .kind = PP_OPT_INT, .offset = OFF(keep), .min = 1, .max = PP_TUNE_MAX_KEEP,
     .arg = "K",
     .help = "candidates ranked exactly", .show_default = 1},
    {.name = "top", .kind = PP_OPT_INT, .offset = OFF(show), .min = 1, .max = PP_TUNE_MAX_KEEP,
     .arg = "K",
     .help = "leaderboard rows shown (at most --keep: it grows to them)", .show_default = 1},
    {.name = "explain", .kind = PP_OPT_CODE, .code = EXPLAIN, .has_arg = optional_argument,
     .arg = "[=all]",
     .help = "why the others lost: rejections by reason, each schedule's\n"
             "best against #1 (time and memory), the Pareto front;\n"
             "=all: also every rejected candidate"},
    {.name = "max-cp", .kind = PP_OPT_INT, .offset = OFF(max_cp), .min = 1, .arg = "C",
     .help = "largest context parallelism tried (default 16)"},
    {.name = "max-ep", .kind = PP_OPT_INT, .offset = OFF(max_ep), .min = 1, .arg = "E",
     .help = "largest expert parallelism tried, MoE models (default 64)"},
    {.name = "trials", .kind = PP_OPT_INT, .offset = OFF(trials), .min = 0, .arg = "K",
     .help = "trial runs of the best K on a local cluster (0: none)", .show_default = 1},
    {.name = "trial-steps", .kind = PP_OPT_INT, .offset = OFF(trial_steps), .min = 1,
     .arg = "S", .help = "steps per trial, the first is warm-up", .show_default = 1},
    {.name = "trial-timeout", .kind = PP_OPT_DOUBLE, .offset = OFF(trial_timeout), .min = 0.1,
     .arg = "SEC", .help = "a trial running longer is killed (seconds)", .show_default = 1},
    {.name = "hostfile", .kind = PP_OPT_STRING, .offset = OFF(hostfile), .arg = "FILE",
     .help = "trials with mpirun over the hosts of this Open MPI host\n"
             "file; inside a Slurm allocation (SLURM_JOB_ID) trials are\n"
             "srun job steps over its nodes"},
    {.name = "no-probe-nodes", .kind = PP_OPT_FLAG, .offset = OFF(no_probe_nodes),
     .help = "with --cluster local in an allocation: probe this node\n"
             "only (it stands for every node) instead of one probe\n"
             "rank on every node, gathered (slowest figures planned)"},
    {.kind = PP_OPT_SECTION, .help = "output:"},
    {.letter = 'o', .kind = PP_OPT_STRING, .offset = OFF(out), .arg = "FILE",
     .help = "profile path (default $XDG_DATA_HOME/pptune/profiles/...);\n"
             "-o - writes the profile to stdout, the report to stderr"},
    {.name = "no-save", .kind = PP_OPT_FLAG, .offset = OFF(no_save),
     .help = "do not write a profile"},
    {.name = "report", .kind = PP_OPT_STRING, .offset = OFF(report), .arg = "FILE.html",
     .help = "also write the search as one self-contained HTML page"},
    {.name = "progress", .kind = PP_OPT_FLAG, .offset = OFF(progress),
     .help = "progress bar even when stderr is not a terminal"},
    {.name = "help", .letter = 'h', .kind = PP_OPT_CODE, .code = HELP},
};
/* clang-format on */
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

static void defaults(opts *o)
{
    memset(o, 0, sizeof *o);
    pp_cli_tune_init(&o->tune);
    o->keep = 10;
    o->show = 10;
    o->trials = 4;
    o->trial_steps = 5;
    o->trial_timeout = 60;
}

static void help(void)
{
    printf("usage: pptune --model M [--nodes N] [options]\n"
           "       pptune search --model M [--nodes N] [options]\n\n"
           "Searches schedule x pipeline size p x chunks v x group G x micro-batch b x tensor\n"
           "parallel t x context parallel cp (d = GPUs / (p t cp), N = global batch / (b d)) x\n"
           "the settings: recomputation (none, selective, full, full on the first k layers of\n"
           "each stage), sequence parallelism (t > 1), sharding over the d x cp replicas (none,\n"
           "optimizer = ZeRO-1, gradients = ZeRO-2); a settings flag below forces its value.\n"
           "Predicts each candidate's step time by simulating its schedule with costs from the\n"
           "cluster and its memory per rank, prints a leaderboard (the winner's settings in its\n"
           "#1 line; --explain: what did not fit and why) and writes the profile.\n\n");
    char names[256];
    snprintf(schedules_help, sizeof schedules_help,
             "comma list of the registry's schedules (all):\n%s",
             pp_sched_names(PP_SCHED_MEGATRON_NONE, ",", names, sizeof names));
    char formats[128];
    snprintf(for_help, sizeof for_help,
             "only the schedules that export target runs (the\n"
             "schedules pptune export --format TARGET accepts;\n"
             "pprun: sharding and CP only where --shard / --cp\n"
             "force them, as pprun runs them in fp32, not in a GPU\n"
             "cluster's bf16):\n%s",
             pp_profile_export_names(", ", formats, sizeof formats));
    opts dflt;
    defaults(&dflt);
    pp_cli_tune_help_with(stdout, rows, N_ROWS, &dflt);
}

/* --for FORMAT: the search keeps to the schedules the export table's row of FORMAT runs; with
 * --schedules too, each of those must be one of them. */
static int for_target(opts *o)
{
    const pp_export_target *t = pp_profile_export_find(o->for_target, NULL);
    if (!t)
        return pp_cmd_usage_error(CMD, "--for: %s", pp_err_text());
    if (t->line_settings_only) { /* pprun: recomputation searched */
        pp_tune_force *f = &o->tune.force;
        /* sharding (ZeRO-1 or 2) only when asked for: pprun runs it (fp32 and bf16), but not
         * ZeRO-2 with a schedule whose pipes share layers (pp_config.h's pprun_cannot), which
         * the search would not avoid */
        if (f->shard == PP_TUNE_SEARCHED)
            f->shard = PP_SHARD_NONE;
        /* so is context parallelism, as when pprun ran it in fp32 only (searching both for
         * pprun now that it runs them in bf16 would change this search's space: not done) */
        if (f->cp == PP_TUNE_SEARCHED)
            f->cp = 1;
        f->ep = 1; /* pprun runs no mixture-of-experts model */
    }
    char list[256];
    pp_profile_export_schedules(t, ",", list, sizeof list);
    if (!o->schedules) {
        snprintf(o->for_schedules, sizeof o->for_schedules, "%s", list);
        o->schedules = o->for_schedules;
        return 0;
    }
    char names[256];
    snprintf(names, sizeof names, "%s", o->schedules);
    for (char *save, *s = strtok_r(names, ",", &save); s; s = strtok_r(NULL, ",", &save))
        if (!pp_profile_export_runs(t, s))
            return pp_cmd_usage_error(CMD, "--schedules %s: --for %s runs only %s", s,
                                      o->for_target, list);
    return 0;
}

/* a path's folder resolved, and its last component: what two spellings of one file share */
static void resolved(const char *path, char *buf, size_t n)
{
    const char *slash = strrchr(path, '/');
    char dir[4096], real[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
             slash ? path : ".");
    if (!realpath(dir, real))
        snprintf(real, sizeof real, "%s", dir);
    snprintf(buf, n, "%s/%s", real, slash ? slash + 1 : path);
}

/* 1: a and b name the same file (the same spelling, the same folder and name, or one inode). */
static int same_file(const char *a, const char *b)
{
    char ra[8200], rb[8200];
    struct stat sa, sb;
    if (!strcmp(a, b))
        return 1;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    resolved(a, ra, sizeof ra);
    resolved(b, rb, sizeof rb);
    return !strcmp(ra, rb);
}

static int parse(int argc, char **argv, opts *o)
{
    defaults(o);
    pp_cli p;
    pp_cli_tune_parse(&p, CMD, argc, argv, &o->tune, rows, N_ROWS, o);
    for (int c; (c = pp_cli_next(&p)) != -1;) {
        const char *v = p.arg;
        int r = c == PP_CLI_BAD ? -1 : pp_cli_tune_option(&p, c, &o->tune);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (c == HELP) {
            help();
            return -1;
        }
        if (c == EXPLAIN) {
            if (v && strcmp(v, "all") != 0)
                return pp_cmd_usage_error(CMD, "--explain= expects \"all\", got \"%s\"", v);
            o->explain = v ? 2 : 1;
        }
    }
    int rc = pp_cli_no_words(&p);
    if (rc >= 0)
        return rc;
    if (o->show > o->keep)
        o->keep = o->show;
    if (o->out && o->report && strcmp(o->out, "-") != 0 && same_file(o->out, o->report))
        return pp_cmd_usage_error(CMD,
                                  "-o %s and --report %s name one file: the report would "
                                  "overwrite the profile; give them different names",
                                  o->out, o->report);
    if (pp_tune_schedules_check(o->schedules) != PP_OK)
        return pp_cmd_fail(CMD, PP_ERR_INVALID);
    return o->for_target ? for_target(o) : 0;
}

static void progress_bar(void *ctx, long done, long total)
{
    const pp_cli_search_view *view = ctx;
    if (!view->progress)
        return;
    int width = 40, fill = total > 0 ? (int)(width * done / total) : width;
    fprintf(stderr, "\rsearching [%.*s%*s] %ld/%ld candidates", fill,
            "########################################", width - fill, "", done, total);
    if (done == total)
        fprintf(stderr, "\n");
    fflush(stderr);
}

static void pass_done(void *ctx, const pp_tune_result *r)
{
    (void)ctx;
    /* two lines that fit 100 columns, broken where no figure's width moves the break (each
     * wrapped further on a narrower terminal) */
    pp_cli_wrapped(stdout, 9,
                   "searched %ld candidates in %.2f s: %ld broke a rule, %ld did not fit, %ld "
                   "simulated,",
                   r->seen, r->wall_s, r->pruned_rule, r->pruned_memory, r->simulated);
    pp_cli_wrapped(stdout, 9, "         %ld skipped by the exact lower bound (schedule cache hits %ld)",
                   r->bounded, r->sim_cache_hits);
}

static int save_profile(const opts *o, const pp_tune_model *m, const pp_tune_hw *hw,
                        const pp_tune_result *r, const char *cmdline, int trials_run,
                        const char *cluster_json)
{
    char *path = NULL;
    pp_status st = PP_OK;
    if (o->out)
        path = pp_strdup(o->out);
    else
        st = pp_tune_profile_default_path(hw, m, &path);
    if (st == PP_OK && !path)
        st = PP_ERR_NOMEM;
    pp_tune_profile_input in = {.model = m, .hw = hw, .opts = &r->opts, .result = r,
                                .command_line = cmdline, .trials_run = trials_run,
                                .cluster_json = cluster_json, .alloc = &o->alloc};
    if (st == PP_OK && o->stdout_fd >= 0) { /* -o -: the profile alone on the real stdout */
        fflush(stdout);
        if (dup2(o->stdout_fd, 1) < 0)
            st = PP_ERR(PP_ERR_IO, "-o -: cannot restore stdout");
    }
    if (st == PP_OK)
        st = pp_tune_profile_write(&in, path);
    if (st == PP_OK && o->stdout_fd >= 0)
        fprintf(stderr, "\nprofile: written to stdout\n");
    else if (st == PP_OK)
        printf("\nprofile: %s\n", path);
    free(path);
    return st == PP_OK ? 0 : pp_cmd_fail(CMD, st);
}

static void join_args(int argc, char **argv, char *buf, size_t n)
{
    snprintf(buf, n, "pptune");
    for (int i = 1; i < argc; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, " %s", argv[i]);
    }
}

/* The leaderboard's numbers (of the first `show`) whose trial ran (ran = 1) or did not,
 * "#1 to #4, #6", into buf; returns how many. */
static int rows_list(const pp_tune_result *r, int show, int ran, char *buf, size_t n)
{
    size_t len = 0;
    int count = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->n_best && i < show; i++) {
        if ((r->best[i].trial_status[0] != '\0') != ran)
            continue;
        int j = i;
        while (j + 1 < r->n_best && j + 1 < show &&
               (r->best[j + 1].trial_status[0] != '\0') == ran)
            j++;
        if (len < n)
            len += (size_t)snprintf(buf + len, n - len, j > i ? "%s#%d to #%d" : "%s#%d",
                                    count ? ", " : "", i + 1, j + 1);
        count += j - i + 1;
        i = j;
    }
    return count;
}

/* What the figures are based on: the trials pp_tune_search ran (which rows, why not the
 * others, what the calibration figure is), or why none ran. */
static int trials_note(const opts *o, const pp_tune_model *m, const pp_tune_hw *hw,
                       const pp_tune_result *r)
{
    int n = (int)r->trialled;
    /* the trials' backend and precision, as trials.c runs them */
    const pp_backend_row *be = pp_tune_hw_backend(hw);
    char how[64] = "";
    if (pp_backend_row_flag(be))
        snprintf(how, sizeof how, " --backend %s%s", be->name,
                 pp_backend_row_has_precision(be, PP_PREC_BF16) ? " --precision bf16" : "");
    char ran[256], rest[256];
    if (n > 0) {
        rows_list(r, o->show, 1, ran, sizeof ran);
        int others = rows_list(r, o->show, 0, rest, sizeof rest);
        pp_cli_wrapped(stdout, 8,
                       "trials: %s run with pprun%s %s%s (--trials %d: the %d fastest predicted, "
                       "the fastest tensor-parallel one among them)%s%s%s",
                       ran, how,
                       o->alloc.launcher[0] ? "under " : "on this machine",
                       o->alloc.launcher[0] ? o->alloc.launcher : "", o->trials, o->trials,
                       others ? "; " : "", rest,
                       others ? " not trialled (beyond --trials, or refused as said above; "
                                "raise --trials to run more)"
                              : "");
        pp_cli_wrapped(stdout, 8,
                       "calibration: the measured steps took %.3g x the predicted time (the "
                       "median of measured / predicted over the trials that ran ok; each row's "
                       "own error is in the table); #1 is the fastest measured candidate that "
                       "fits",
                       r->calibration);
    } else
        printf("figures are predicted from %s (no trials: %s)\n", hw->source,
               !hw->is_local          ? "the target is not this machine"
               : !m->pprun            ? m->pprun_why
               : o->trials == 0       ? "--trials 0"
                                      : "none could run: see the lines above");
    return n;
}

static int report(const opts *o, const pp_tune_model *m, const pp_tune_hw *hw, pp_tune_result *r,
                  const char *cluster_json, int argc, char **argv)
{
    int trials_run = trials_note(o, m, hw, r);
    pp_cli_board_print(stdout, r, o->show);
    pp_cli_winner_print(stdout, &r->best[0]);
    pp_cli_rank_memory_print(stdout, &r->best[0], o->explain > 1);
    char cmd[PP_PROFILE_PPRUN_LINE_LEN];
    if (pp_tune_launch_command(m, hw, &r->best[0].cfg, &r->opts, cmd, sizeof cmd))
        printf("\nlaunch: %s\n", cmd);
    else /* never a line pprun rejects (pp_tune_pprun_model) */
        printf("\n"), pp_cli_wrapped(stdout, 8,
                       "launch: none with pprun: %s; the Megatron-LM, NeMo and torchtitan "
                       "exports (pptune export) build the model themselves",
                       pp_err_text());
    pp_err_clear();
    char unrun[128];
    if (pp_profile_pprun_unrun(&r->best[0].cfg, pp_tune_launch_precision(hw, &r->opts), unrun,
                               sizeof unrun))
        pp_cli_wrapped(stdout, 8,
                       "        (pprun has no option for %s yet: this line trains #1 without "
                       "it, in more memory than predicted; the Megatron-LM, NeMo and "
                       "torchtitan exports carry it where they run the schedule)",
                       unrun);
    if (o->explain)
        pp_cli_explain_print(stdout, m, hw, r, o->explain > 1);
    if (o->report) {
        pp_status st = pp_cli_report_write(o->report, m, hw, r);
        if (st != PP_OK)
            return pp_cmd_fail(CMD, st);
        printf("\nreport: %s\n", o->report);
    }
    if (o->no_save)
        return 0;
    char cmdline[1024];
    join_args(argc, argv, cmdline, sizeof cmdline);
    return save_profile(o, m, hw, r, cmdline, trials_run, cluster_json);
}

static int search_and_report(opts *o, const pp_tune_model *m, const pp_tune_hw *hw,
                             const char *cluster_json, int argc, char **argv)
{
    if (o->max_b > m->global_batch) /* b x d of a larger one wrapped (issue 18, finding 4) */
        return pp_cmd_usage_error(CMD, "--max-b: expected at most the global batch (%d), got %d",
                                  m->global_batch, o->max_b);
    int allow_tp = !o->no_tp;
    pp_tune_search_adjust(hw, &o->tune.opts, &allow_tp);
    o->no_tp = !allow_tp;
    pp_cli_tune_describe(stdout, m, hw, &o->tune.opts, &o->tune.force, m->global_batch);
    pp_cli_search_view view = {.progress = o->progress || isatty(2)};
    pp_tune_search_params sp = {.model = m, .hw = hw, .opts = o->tune.opts,
                                .force = o->tune.force, .max_cp = o->max_cp, .max_ep = o->max_ep,
                                .global_batch = m->global_batch, .schedules = o->schedules,
                                .max_t = o->max_t, .max_b = o->max_b, .allow_tp = allow_tp,
                                .keep = o->keep,
                                .trials = o->trials, .trial_steps = o->trial_steps,
                                .trial_timeout_s = o->trial_timeout, .progress = progress_bar,
                                .alloc = o->alloc.launcher[0] ? &o->alloc : NULL,
                                .prober = o->self[0] ? o->self : NULL,
                                .on_pass = pass_done,
                                .on_trial = pp_cli_trial_event, .progress_ctx = &view};
    pp_tune_result *r = NULL;
    pp_status st = pp_tune_search(&sp, &r);
    if (st != PP_OK)
        return pp_cmd_fail(CMD, st);
    int rc = 1;
    if (r->n_best > 0) {
        rc = report(o, m, hw, r, cluster_json, argc, argv);
    } else {
        /* a failure: the verdict and its reasons on stderr, the exit status 1 */
        fflush(stdout);
        if (r->pruned_memory == 0)
            fprintf(stderr, "pptune search: no candidate satisfies the rules (divisibility of the "
                            "global batch %d, layers, heads; schedule constraints)\n",
                    r->global_batch);
        else
            fprintf(stderr, "pptune search: no candidate fits, with every setting searched "
                            "(recomputation, sharding, sequence and context parallelism); more "
                            "--nodes, or see why (--explain):\n");
        pp_cli_reasons_print(stderr, r, 8);
        if (o->explain)
            pp_cli_explain_print(stdout, m, hw, r, o->explain > 1);
    }
    pp_tune_result_destroy(r);
    return rc;
}

/* The allocation pptune runs in (a Slurm job, or the --hostfile): with --cluster local every
 * node of it is probed (unless --no-probe-nodes). A bad host file or Slurm variable is bad
 * input (exit 2). */
static int detect_allocation(opts *o)
{
    pp_status st = pp_tune_alloc_detect(o->hostfile, &o->alloc);
    if (st != PP_OK) {
        int rc = pp_cmd_fail(CMD, st);
        return st == PP_ERR_IO ? 2 : rc;
    }
    if (o->alloc.launcher[0] && !o->no_probe_nodes && !strcmp(o->tune.cluster, "local"))
        o->tune.probe_nodes = &o->alloc;
    return 0;
}

/* The allocation is the cluster: trials run over its nodes. A probed node (--cluster local
 * --no-probe-nodes) stands for every node of it. */
static int use_allocation(opts *o, pp_tune_hw *hw)
{
    if (!o->alloc.launcher[0])
        return 0;
    if (!hw->is_local) {
        printf("allocation: %s over %s ignored: the cluster is %s, not the probed allocation "
               "(--cluster local)\n",
               o->alloc.launcher, o->alloc.nodes, hw->source);
        o->alloc.launcher[0] = '\0';
        return 0;
    }
    /* one probed node stands for the allocation's nodes; a description of more nodes (probed
     * under srun on a larger allocation) is kept: its candidates run reduced (trials.c) */
    if (hw->nodes == 1) {
        hw->nodes = o->alloc.n_nodes;
        if (o->alloc.slots / o->alloc.n_nodes < hw->gpus_per_node)
            hw->gpus_per_node = o->alloc.slots / o->alloc.n_nodes;
    }
    printf("allocation: %d node%s (%s), %d ranks, trials as %s job steps%s\n", o->alloc.n_nodes,
           o->alloc.n_nodes > 1 ? "s" : "", o->alloc.nodes, o->alloc.slots, o->alloc.launcher,
           hw->nodes * hw->gpus_per_node > o->alloc.slots
               ? " (fewer ranks than the cluster: larger candidates run with fewer "
                 "data-parallel replicas)"
               : "");
    return 0;
}

int pp_cmd_search(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    o.stdout_fd = -1;
    if (o.out && !strcmp(o.out, "-") && !o.no_save) {
        /* -o -: stdout carries the profile only, so everything else goes to stderr */
        fflush(stdout);
        o.stdout_fd = dup(1);
        if (o.stdout_fd < 0 || dup2(2, 1) < 0)
            return pp_cmd_usage_error(CMD, "-o -: cannot redirect the report to stderr");
    }
    pp_tune_model m;
    pp_tune_hw hw;
    char *cluster_json = NULL;
    if ((rc = detect_allocation(&o)) != 0)
        return rc;
    if ((rc = pp_cli_tune_load(CMD, &o.tune, &m, &hw, &cluster_json)) != 0)
        return rc;
    const pp_export_target *for_t =
        o.for_target ? pp_profile_export_find(o.for_target, NULL) : NULL;
    if (for_t && for_t->pprun_model && !m.pprun) { /* a search for a line pprun rejects */
        free(cluster_json);
        return pp_cmd_usage_error(CMD, "--for %s: %s", o.for_target, m.pprun_why);
    }
    if ((rc = use_allocation(&o, &hw)) != 0) {
        free(cluster_json);
        return rc;
    }
    if (o.alloc.launcher[0] && pp_tune_self_path(o.self, sizeof o.self) != PP_OK)
        pp_err_clear(); /* reduced trials then say their all-reduce was not measured */
    rc = search_and_report(&o, &m, &hw, cluster_json, argc, argv);
    free(cluster_json);
    if (o.stdout_fd >= 0)
        close(o.stdout_fd);
    return rc;
}

