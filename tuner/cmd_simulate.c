/* cmd_simulate.c — `pptune simulate`: predict one configuration on a cluster: step time and its
 * parts, throughput, bubble, memory per rank, and optionally the simulated timeline.
 * Uses the same models as the search (pp_tune_predict); prints, decides nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "cmd.h"
#include "tune_cli.h"

#define CMD "simulate"

typedef struct {
    pp_cli_tune tune;
    pp_config c;
    int timeline;
    int svg;            /* --format svg */
    int width;          /* --width, 0: fit the terminal */
    const char *output; /* -o FILE, NULL: stdout */
} opts;

static char schedule_help[400]; /* the registry's names (help() fills it) */
static const char *const FORMATS[] = {"ascii", "svg", NULL}; /* index = opts.svg */

enum { HELP = PP_CLI_LOCAL };
#define OFF(f) offsetof(opts, f)
/* clang-format off */
static const pp_opt rows[] = {
    {.kind = PP_OPT_SECTION, .help = "configuration:", .width = 25},
    {.name = "schedule", .kind = PP_OPT_STRING, .offset = OFF(c.schedule), .arg = "K",
     .help = schedule_help, .show_default = 1},
    {.letter = 'p', .kind = PP_OPT_INT, .offset = OFF(c.p), .min = 1, .arg = "P",
     .help = "pipeline ranks", .show_default = 1},
    {.letter = 'v', .kind = PP_OPT_INT, .offset = OFF(c.v), .min = 1, .arg = "V",
     .help = "chunks per rank (default: the schedule's own)"},
    {.letter = 'G', .kind = PP_OPT_INT, .offset = OFF(c.G), .min = 1, .arg = "G",
     .help = "interleaved micro-batch group (default p)"},
    {.letter = 'b', .kind = PP_OPT_INT, .offset = OFF(c.b), .min = 1, .arg = "B",
     .help = "micro-batch size", .show_default = 1},
    {.letter = 't', .kind = PP_OPT_INT, .offset = OFF(c.t), .min = 1, .arg = "T",
     .help = "tensor-parallel size", .show_default = 1},
    {.name = "uneven", .kind = PP_OPT_FLAG, .offset = OFF(c.uneven),
     .help = "Llama-3 split (one layer fewer on first and last stage)"},
    {.kind = PP_OPT_SECTION, .help = "timeline:"},
    {.name = "timeline", .kind = PP_OPT_FLAG, .offset = OFF(timeline),
     .help = "draw the simulated timeline with the predicted costs"},
    {.name = "format", .kind = PP_OPT_CHOICE, .offset = OFF(svg), .choices = FORMATS,
     .arg = "ascii|svg", .help = "the timeline's form (svg: a Gantt chart in seconds)",
     .show_default = 1},
    {.name = "width", .kind = PP_OPT_INT, .offset = OFF(width), .min = 1, .arg = "W",
     .help = "ascii columns (default: fit the terminal, $COLUMNS)"},
    {.letter = 'o', .kind = PP_OPT_STRING, .offset = OFF(output), .arg = "FILE",
     .help = "write the timeline to FILE (atomically) instead of stdout\n"
             "(-o -: stdout)"},
    {.name = "help", .letter = 'h', .kind = PP_OPT_CODE, .code = HELP},
};
/* clang-format on */
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

static void defaults(opts *o)
{
    memset(o, 0, sizeof *o);
    pp_cli_tune_init(&o->tune);
    pp_config_defaults(&o->c);
    o->c.schedule = PP_SCHED_DEFAULT;
    o->c.p = 1, o->c.v = 0, o->c.b = 1, o->c.t = 1;
}

static void help(void)
{
    printf("usage: pptune simulate --model M [--nodes N] --schedule K -p P [-v V] [-G G] [-b B]\n"
           "                       [-t T] [--uneven] [--timeline [--format ascii|svg] [--width W]\n"
           "                       [-o FILE]] [shared options]\n\n"
           "Predicts one configuration: d = GPUs / (p t cp), N = global batch / (b d); the\n"
           "settings (recompute, sequence parallelism, shard, cp) as given, else none.\n\n");
    char names[256];
    snprintf(schedule_help, sizeof schedule_help, "%s",
             pp_sched_names(PP_SCHED_MEGATRON_NONE, ", ", names, sizeof names));
    opts dflt;
    defaults(&dflt);
    pp_cli_tune_help_with(stdout, rows, N_ROWS, &dflt);
}

static int parse(int argc, char **argv, opts *o)
{
    defaults(o);
    pp_cli p;
    pp_cli_tune_parse(&p, CMD, argc, argv, &o->tune, rows, N_ROWS, o);
    for (int c; (c = pp_cli_next(&p)) != -1;) {
        int r = c == PP_CLI_BAD ? -1 : pp_cli_tune_option(&p, c, &o->tune);
        if (r < 0)
            return 2;
        if (c == HELP) {
            help();
            return -1;
        }
    }
    if (pp_cli_no_words(&p) >= 0)
        return 2;
    if (o->width > PP_SCHED_ASCII_MAX_WIDTH)
        return pp_cmd_usage_error(CMD, "--width: expected at most %d columns, got %d",
                                  PP_SCHED_ASCII_MAX_WIDTH, o->width);
    if ((o->svg || o->output || o->width) && !o->timeline)
        o->timeline = 1; /* asking for the timeline's form asks for the timeline */
    return 0;
}

/* Fills d, N, v and G from the cluster and batch; returns 0 or an exit code. */
static int complete(opts *o, const pp_tune_model *m, const pp_tune_hw *hw)
{
    pp_config *c = &o->c;
    pp_tune_force_apply(&o->tune.force, c); /* the settings: as given, else none / off / 1 */
    char why[200];
    if (pp_tune_axes_rule(m, c, why, sizeof why))
        return pp_cmd_usage_error(CMD, "%s", why);
    long long gpus = (long long)hw->nodes * hw->gpus_per_node;
    /* 64 bits: 65536 x 65536 wrapped to 0 (SIGFPE) */
    long long pt = (long long)c->p * c->t * c->cp;
    if (pt > gpus || gpus % pt != 0)
        return pp_cmd_usage_error(CMD, "-p x -t x --cp = %d x %d x %d does not divide the %lld "
                                       "devices",
                                  c->p, c->t, c->cp, gpus);
    c->d = (int)(gpus / pt);
    long long bd = (long long)c->b * c->d;
    if (c->b > m->global_batch || m->global_batch % bd != 0)
        return pp_cmd_usage_error(CMD, "global batch %d is not a multiple of -b x d = %d x %d",
                                  m->global_batch, c->b, c->d);
    c->N = (int)(m->global_batch / bd);
    const pp_sched_desc *d = pp_sched_find(c->schedule);
    if (!d)
        return pp_cmd_usage_error(CMD, "%s", pp_err_text());
    if (!c->v)
        c->v = pp_sched_desc_chunks(d, 0);
    c->G = pp_sched_desc_group(d, c->p, c->G);
    return 0;
}

static void print_prediction(const pp_tune_prediction *p, const pp_tune_rank_mem *mem)
{
    char cb[160], ab[200];
    printf("configuration  %s\n", pp_config_str(&p->cfg, cb, sizeof cb));
    printf("settings       %s\n", pp_tune_axes_describe(&p->cfg, ab, sizeof ab));
    char s[3][16];
    pp_cli_wrapped(stdout, 15,
                   "step time      %s s (pipeline %s s, then the data-parallel all-reduce, begun "
                   "on each rank after its last backward, and the optimizer: +%s s)",
                   pp_fmt_seconds(p->step_time, s[0], 16),
                   pp_fmt_seconds(p->pipeline_time, s[1], 16),
                   pp_fmt_seconds(p->step_time - p->pipeline_time, s[2], 16));
    char tok[32];
    printf("throughput     %s tokens/s, %.1f model TFLOP/s per GPU, MFU %.1f %%\n",
           pp_fmt_grouped(p->tokens_per_s, tok, sizeof tok), p->tflops_per_gpu, 100 * p->mfu);
    printf("bubble         %.1f %% of ideal compute (%.1f %% of the step)\n",
           100 * p->bubble_ideal, 100 * p->bubble_total);
    char pk[16], cap[16];
    printf("memory         fullest rank %d: %s of %s usable: %s\n", p->peak_rank,
           pp_fmt_bytes(p->peak_mem, pk, sizeof pk), pp_fmt_bytes(p->capacity, cap, sizeof cap),
           p->fits ? "fits" : "DOES NOT FIT");
    printf("\n(in flight: micro-batches x L/p layers)\n");
    pp_cli_rank_memory_table(stdout, mem, p->cfg.p, 1);
}

/* The timeline of schedule s (the one the prediction used) with the time model's costs. */
static pp_status draw(const pp_tune_model *m, const pp_tune_hw *hw, const opts *o,
                      const pp_sched *s, FILE *fp)
{
    pp_tune_step_extra extra = {.dp_rank = NULL};
    pp_sim_result sim;
    PP_TRY(pp_tune_simulate(m, hw, &o->c, &o->tune.opts, s, &extra, &sim));
    pp_sched_svg_opts so = {.unit = "s", .aggregate = -1};
    pp_status st = o->svg          ? pp_sched_write_svg_opts(s, &sim, &so, fp)
                   : o->width > 0 ? pp_sched_write_ascii(s, &sim, o->width, fp)
                                  : pp_sched_write_ascii_fit(
                                        s, &sim, o->output ? 0 : pp_cli_terminal_columns(), fp);
    pp_sim_result_fini(&sim);
    return st;
}

/* To stdout, or built in memory and written atomically to -o FILE. */
static pp_status timeline(const pp_tune_model *m, const pp_tune_hw *hw, const opts *o,
                          const pp_sched *s)
{
    if (!pp_cli_output_path(o->output)) { /* none, or -o - */
        printf("\n");
        return draw(m, hw, o, s, stdout);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    if (!fp)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the timeline");
    pp_status st = draw(m, hw, o, s, fp);
    if (fclose(fp) != 0 && st == PP_OK)
        st = PP_ERR(PP_ERR_NOMEM, "out of memory for the timeline");
    if (st == PP_OK)
        st = pp_file_write_atomic(o->output, buf, len);
    free(buf);
    if (st == PP_OK)
        printf("\ntimeline: %s\n", o->output);
    return st;
}

int pp_cmd_simulate(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    pp_tune_model m;
    pp_tune_hw hw;
    if ((rc = pp_cli_tune_load(CMD, &o.tune, &m, &hw, NULL)) != 0)
        return rc;
    if ((rc = complete(&o, &m, &hw)) != 0)
        return rc;
    pp_cli_tune_describe(stdout, &m, &hw, &o.tune.opts, NULL, m.global_batch);
    pp_tune_rank_mem *mem = calloc((size_t)o.c.p, sizeof *mem);
    if (!mem)
        return pp_cmd_fail(CMD, PP_ERR_NOMEM);
    /* one schedule for the prediction and the timeline (generated once); above the budget the
     * steady state of bounded prefixes, and the timeline is the longest prefix's */
    pp_sched *s = NULL;
    pp_tune_prediction p;
    pp_status st = PP_OK;
    int steady = o.c.N > pp_tune_steady_budget();
    if (steady) {
        st = pp_tune_predict_steady(&m, &hw, &o.c, &o.tune.opts, &p, mem, &s);
    } else {
        pp_sched_params sp;
        pp_tune_sched_params(&m, &o.c, &sp);
        st = pp_sched_generate(o.c.schedule, &sp, &s);
        if (st == PP_OK)
            st = pp_tune_evaluate(&m, &hw, &o.c, &o.tune.opts, s, &p, mem);
    }
    if (st == PP_OK) {
        printf("\n");
        print_prediction(&p, mem);
        pp_tune_time_parts t;
        st = pp_tune_breakdown(&m, &hw, &p, &o.tune.opts, &t);
        if (st == PP_OK)
            pp_cli_step_parts_print(stdout, &t);
        if (st == PP_OK && steady)
            printf("steady state   N = %d is above the simulation budget of %d: figures "
                   "extrapolated from prefixes of the same N mod the schedule's period\n",
                   o.c.N, pp_tune_steady_budget());
        if (st == PP_OK && o.timeline) {
            if (steady)
                printf("\ntimeline of the longest prefix simulated, N = %d of the %d micro-batches "
                       "(the whole schedule is not built)\n",
                       s->microbatches, o.c.N);
            st = timeline(&m, &hw, &o, s);
        }
    }
    pp_sched_destroy(s);
    free(mem);
    return st == PP_OK ? 0 : pp_cmd_fail(CMD, st);
}
