/* cmd_schedule.c — `pptune schedule`: generate one pipeline schedule, or read one back with
 * --check; validate it, simulate it with unit costs and show it in one of the formats.
 *
 * The schedule work itself lives in schedules/ (generators, pp_sched_check, pp_sim_run, the
 * renderers) and reading JSON in sched_json.c; this file parses options, picks the output and
 * prints the summary a person wants at a terminal. -o writes atomically: the file appears
 * complete or not at all, and an existing one is left as it was when anything fails.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "cmd.h"
#include "pp_sched.h"
#include "sched_json.h"

#define CMD "schedule"

typedef struct {
    const char *kind;   /* generator; NULL with --check */
    pp_sched_params p;  /* ranks, microbatches, chunks, group, layers, uneven */
    double fb_ratio;    /* B = fb_ratio x F */
    const char *format; /* NULL: summary + ascii timeline */
    const char *output; /* -o FILE, or NULL for stdout */
    const char *check;  /* --check FILE */
    int width;          /* ascii columns, 0 = automatic */
} sched_opts;

static void usage(FILE *fp)
{
    int n;
    const pp_sched_desc *g = pp_sched_generators(&n);
    fprintf(fp,
            "usage: pptune schedule --kind K --ranks D --microbatches N [--chunks v] [--group G]\n"
            "                       [--layers L] [--uneven | --first-stage-layers A\n"
            "                       --last-stage-layers Z] [--fb-ratio R] [--format F]\n"
            "                       [--width W] [-o FILE]\n"
            "       pptune schedule --check FILE [--fb-ratio R] [--format F] [--width W] [-o FILE]\n"
            "\n"
            "Generates one pipeline schedule (or reads one with --check), validates it, simulates\n"
            "it with unit costs (F of L/D layers = 1, B = R x F, and for a split backward\n"
            "I = W = B / 2; links and gradient syncs free) and prints it. Without --format: a\n"
            "summary (makespan, both bubble definitions, peak activations, transfers) and a\n"
            "timeline.\n"
            "\nschedules (--kind):\n");
    for (int i = 0; i < n; i++)
        fprintf(fp, "  %-12s %s\n", g[i].name, g[i].summary);
    fprintf(fp,
            "\noptions:\n"
            "  --ranks D          pipeline ranks (D >= 1)\n"
            "  --microbatches N   micro-batches per iteration (N >= 1)\n"
            "  --chunks v         interleaved: model chunks per rank (default 2)\n"
            "  --group G          interleaved: micro-batch group size (default D)\n"
            "  --layers L         transformer layers (default: one per stage)\n"
            "  --uneven           one layer fewer on the first and last stage (Llama 3);\n"
            "                     needs --layers with L + 2 a multiple of the stages\n"
            "  --first-stage-layers A, --last-stage-layers Z\n"
            "                     layers of the first / last stage (interleaved: virtual\n"
            "                     stage), the others sharing the rest evenly; need --layers\n"
            "  --fb-ratio R       backward / forward time (default 2)\n"
            "  --format F         text (one line per rank, round-trips), json (the interchange\n"
            "                     form, read back by --check), ascii (timeline), svg (Gantt\n"
            "                     chart), or PyTorch pipelining's CSV (one pipeline only), in\n"
            "                     torch 2.15's grammar (cells STAGE TYPE [MICROBATCH]: 0F1,\n"
            "                     1B0, 0SEND_F3, 1WAIT_SEND_F0, 3REDUCE_GRAD, and a DualPipeV\n"
            "                     pair as one cell (0F3;7B2)OVERLAP_F_B):\n"
            "                     csv (its compute_comms form: every SEND/RECV with a\n"
            "                     WAIT_SEND_F / WAIT_SEND_B for each send, REDUCE_GRAD and\n"
            "                     its WAIT_REDUCE_GRAD after each stage's last backward; for\n"
            "                     _PipelineScheduleRuntime._load_csv(f, format=\"compute_comms\")),\n"
            "                     csv-compute (its compute_only form: F, B, I, W and\n"
            "                     OVERLAP_F_B cells; for _load_csv(f) / format=\"compute_only\",\n"
            "                     the form torchtitan loads)\n"
            "  --width W          columns of the ascii timeline (default: automatic, within\n"
            "                     the terminal's width: $COLUMNS, else the terminal's own)\n"
            "  -o FILE            write to FILE (atomically) instead of standard output (-o -:\n"
            "                     standard output)\n"
            "  --check FILE       read a schedule in the json, text or PyTorch CSV form\n"
            "                     (detected; CSV: either form, one row per rank, as torch\n"
            "                     2.15's _dump_csv writes it or as older releases did without\n"
            "                     the WAIT actions; WAIT_* cells are read and dropped),\n"
            "                     validate it, simulate it and print it as above; exit\n"
            "                     status 2 if it is malformed or invalid\n"
            "\nexit status: 0 ok, 1 the work failed (e.g. a write), 2 bad options or input.\n");
}

static const char *const formats[] = {"text", "json", "csv", "csv-compute", "ascii", "svg"};

static int is_csv_format(const char *f)
{
    return f && (!strcmp(f, "csv") || !strcmp(f, "csv-compute"));
}

static int known_format(const char *f)
{
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(f, formats[i]) == 0)
            return 1;
    return 0;
}

enum { RANKS = PP_CLI_LOCAL, MICROBATCHES, CHUNKS, GROUP, LAYERS, WIDTH, KIND, FORMAT, CHECK,
       FB_RATIO, UNEVEN, FIRST, LAST };

/* Applies one option. Returns -1 to go on, or the exit code to return (0 after --help). */
static int parse_opt(const pp_cli *p, int c, sched_opts *o)
{
    const char *a = p->name, *v = p->arg;
    int *num = c == RANKS          ? &o->p.ranks
               : c == MICROBATCHES ? &o->p.microbatches
               : c == CHUNKS       ? &o->p.chunks
               : c == GROUP        ? &o->p.group
               : c == LAYERS       ? &o->p.layers
               : c == WIDTH        ? &o->width
               : c == FIRST        ? &o->p.first_layers
               : c == LAST         ? &o->p.last_layers
                                   : NULL;
    if (num)
        return pp_cmd_parse_int(CMD, a, v, c == WIDTH ? 10 : 1, num) ? -1 : 2;
    switch (c) {
    case 'h': usage(stdout); return 0;
    case UNEVEN: o->p.uneven = 1; return -1;
    case KIND: o->kind = v; return -1;
    case FORMAT: o->format = v; return -1;
    case 'o': o->output = pp_cli_output_path(v); return -1;
    case CHECK: o->check = v; return -1;
    case FB_RATIO:
        if (!pp_cmd_parse_double(CMD, a, v, 0, &o->fb_ratio))
            return 2;
        if (!(o->fb_ratio > 0))
            return pp_cmd_usage_error(CMD, "--fb-ratio expects a number > 0, got \"%s\"", v);
        return -1;
    }
    return 2; /* PP_CLI_BAD: said */
}

/* Rules between options. Returns -1 if consistent, else the exit code. */
static int validate_opts(const sched_opts *o)
{
    if (o->width > PP_SCHED_ASCII_MAX_WIDTH)
        return pp_cmd_usage_error(CMD, "--width: expected at most %d columns, got %d",
                                  PP_SCHED_ASCII_MAX_WIDTH, o->width);
    if (o->format && !known_format(o->format))
        return pp_cmd_usage_error(CMD,
                                  "--format expects one of text, json, csv, ascii, svg, got \"%s\" "
                                  "(or csv-compute: PyTorch's compute-only CSV)",
                                  o->format);
    if (o->check) {
        if (o->kind || o->p.ranks || o->p.microbatches || o->p.chunks || o->p.group ||
            o->p.layers || o->p.uneven || o->p.first_layers || o->p.last_layers)
            return pp_cmd_usage_error(CMD, "--check reads the schedule from the file: it takes "
                                           "no --kind, --ranks, --microbatches, --chunks, "
                                           "--group, --layers, --uneven or a first/last-"
                                           "stage split");
        return -1;
    }
    if (!o->kind)
        return pp_cmd_usage_error(CMD, "needs --kind (gpipe, 1f1b, interleaved, chimera, "
                                       "bitpipe) or --check FILE");
    if (!o->p.ranks || !o->p.microbatches)
        return pp_cmd_usage_error(CMD, "needs --ranks D and --microbatches N");
    if (o->p.uneven && !o->p.layers)
        return pp_cmd_usage_error(CMD, "--uneven needs --layers L (one layer fewer on the first "
                                       "and last stage of L)");
    if ((o->p.first_layers || o->p.last_layers) && !o->p.layers)
        return pp_cmd_usage_error(CMD, "--first-stage-layers / --last-stage-layers need "
                                       "--layers L");
    const pp_sched_desc *d = pp_sched_lookup(o->kind);
    if (pp_sched_chunks_option(d, o->p.chunks) != PP_OK)
        return pp_cmd_usage_error(CMD, "%s", pp_err_text());
    if (d && d->pipes == 2 && is_csv_format(o->format))
        return pp_cmd_usage_error(CMD,
                                  "--format %s: %s is bidirectional (2 pipes), and PyTorch "
                                  "pipelining's CSV holds one pipeline; use --format text or json",
                                  o->format, o->kind);
    return -1;
}

static int parse_args(int argc, char **argv, sched_opts *o)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"uneven", no_argument, NULL, UNEVEN},
        {"first-stage-layers", required_argument, NULL, FIRST},
        {"last-stage-layers", required_argument, NULL, LAST},
        {"ranks", required_argument, NULL, RANKS},
        {"microbatches", required_argument, NULL, MICROBATCHES},
        {"chunks", required_argument, NULL, CHUNKS},
        {"group", required_argument, NULL, GROUP},
        {"layers", required_argument, NULL, LAYERS},
        {"width", required_argument, NULL, WIDTH},
        {"kind", required_argument, NULL, KIND},
        {"format", required_argument, NULL, FORMAT},
        {"output", required_argument, NULL, 'o'},
        {"check", required_argument, NULL, CHECK},
        {"fb-ratio", required_argument, NULL, FB_RATIO},
        {0},
    };
    pp_cli p;
    pp_cli_init(&p, CMD, argc, argv, "ho:", longopts);
    for (int c; (c = pp_cli_next(&p)) != -1;) {
        int rc = parse_opt(&p, c, o);
        if (rc >= 0)
            return rc;
    }
    int rc = pp_cli_no_words(&p);
    return rc >= 0 ? rc : validate_opts(o);
}

/* Re-records the current message with "FILE: " in front (the checker does not know the file). */
static pp_status prefix_error(pp_status st, const char *path)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", pp_err_text());
    return PP_ERR(st, "%s: %s", path, msg);
}

/* PyTorch's CSV: a .csv name, or a first cell that starts like one of its actions ("0F0") or
 * is empty (an idle step). The text form starts with "schedule" or a comment. */
static int looks_like_csv(const char *path, const char *first)
{
    size_t n = strlen(path);
    if (n >= 4 && !strcasecmp(path + n - 4, ".csv"))
        return 1;
    return isdigit((unsigned char)*first) || *first == ',' || *first == '"' || *first == '(';
}

static pp_status load_schedule(const char *path, pp_sched **out)
{
    char *text;
    pp_status st = pp_file_read(path, &text, NULL);
    if (st != PP_OK) /* a file the user named that cannot be read is bad input, not a failure */
        return PP_ERR(PP_ERR_NOTFOUND, "%s", pp_err_text());
    const char *p = text;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    if (*p == '{')
        st = pp_sched_read_json(text, path, out);
    else if (looks_like_csv(path, p))
        st = pp_sched_read_csv(text, path, out);
    else
        st = pp_sched_parse_text(text, path, out);
    free(text);
    if (st == PP_OK && (st = pp_sched_check(*out)) != PP_OK) {
        pp_sched_destroy(*out);
        *out = NULL;
        return prefix_error(st, path);
    }
    return st;
}

static pp_status obtain_schedule(const sched_opts *o, pp_sched **out)
{
    if (o->check)
        return load_schedule(o->check, out);
    PP_TRY(pp_sched_generate(o->kind, &o->p, out));
    return PP_OK;
}

static void print_per_rank(const char *label, const double *x, int n, const char *unit, FILE *fp)
{
    fprintf(fp, "%-22s", label);
    for (int r = 0; r < n; r++)
        fprintf(fp, "%s%g", r ? " " : "", x[r]);
    fprintf(fp, "  (ranks 0..%d; %s)\n", n - 1, unit);
}

/* --width W as given; else automatic, narrowed to the terminal when it is stdout. */
static pp_status ascii(const sched_opts *o, const pp_sched *s, const pp_sim_result *sim,
                       FILE *fp)
{
    if (o->width > 0)
        return pp_sched_write_ascii(s, sim, o->width, fp);
    return pp_sched_write_ascii_fit(s, sim, o->output ? 0 : pp_cli_terminal_columns(), fp);
}

static pp_status write_summary(const sched_opts *o, const pp_sched *s, const pp_sim_result *sim,
                               FILE *fp)
{
    double fb = o->fb_ratio;
    fprintf(fp, "%s: D = %d ranks, N = %d micro-batches, v = %d chunk%s per rank", s->kind,
            s->ranks, s->microbatches, s->chunks, s->chunks == 1 ? "" : "s");
    if (s->group)
        fprintf(fp, ", G = %d", s->group);
    fprintf(fp, ", %d pipe%s, L = %d layers\n", s->n_pipes, s->n_pipes == 1 ? "" : "s", s->layers);
    int split = pp_sched_has_split_backward(s);
    if (split) /* pp_cost_init_unit: I = W = B / 2 */
        fprintf(fp, "costs: unit (F of L/D layers = 1, B = %g x F, I = W = %g x F, links and "
                    "gradient syncs free)\n",
                fb, fb / 2);
    else
        fprintf(fp, "costs: unit (F of L/D layers = 1, B = %g x F, links and gradient syncs "
                    "free)\n",
                fb);
    fprintf(fp, "%-22s%g\n", "makespan", sim->makespan);
    fprintf(fp, "%-22s%.6g  (idle / compute time: Megatron-LM, Llama 3)\n", "bubble over ideal",
            sim->bubble_over_ideal);
    fprintf(fp, "%-22s%.6g  (idle / (D x makespan): Chimera, BitPipe papers)\n",
            "bubble over total", sim->bubble_over_total);
    print_per_rank("peak activations", sim->peak_activations, s->ranks,
                   split ? "micro-batches x L/D layers, held from F to W"
                         : "micro-batches x L/D layers",
                   fp);
    if (split)
        print_per_rank("held for W", sim->peak_held_for_w, s->ranks,
                       "of those, the most between an I and its W", fp);
    fprintf(fp, "%-22s%ld\n\n", "cross-rank transfers", sim->cross_rank_transfers);
    PP_TRY(ascii(o, s, sim, fp));
    return PP_OK;
}

static pp_status render(const sched_opts *o, const pp_sched *s, const pp_sim_result *sim,
                        FILE *fp)
{
    const char *f = o->format;
    if (!f)
        return write_summary(o, s, sim, fp);
    if (!strcmp(f, "text"))
        return pp_sched_write_text(s, fp);
    if (!strcmp(f, "json"))
        return pp_sched_write_json(s, sim, fp);
    if (!strcmp(f, "csv"))
        return pp_sched_write_csv(s, fp);
    if (!strcmp(f, "csv-compute"))
        return pp_sched_write_csv_compute(s, fp);
    if (!strcmp(f, "ascii"))
        return ascii(o, s, sim, fp);
    return pp_sched_write_svg(s, sim, fp);
}

/* Obtains, simulates and renders into fp. */
static pp_status run(const sched_opts *o, FILE *fp)
{
    pp_sched *s = NULL;
    pp_cost cost = {0};
    pp_sim_result sim = {0};
    pp_status st = obtain_schedule(o, &s);
    if (st == PP_OK)
        st = pp_cost_init_unit(&cost, s, o->fb_ratio);
    if (st == PP_OK)
        st = pp_sim_run(s, &cost, 1, &sim);
    if (st == PP_OK)
        st = render(o, s, &sim, fp);
    pp_sim_result_fini(&sim);
    pp_cost_fini(&cost);
    pp_sched_destroy(s);
    return st;
}

int pp_cmd_schedule(int argc, char **argv)
{
    sched_opts o = {.fb_ratio = 2.0};
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (!o.output) {
        pp_status st = run(&o, stdout);
        if (st == PP_OK && fflush(stdout) != 0)
            st = PP_ERR(PP_ERR_IO, "writing to standard output failed");
        return st == PP_OK ? 0 : pp_cmd_fail(CMD, st);
    }
    /* Opened first so that a failure anywhere later leaves no file and the old one intact. */
    pp_afile af;
    pp_status st = pp_afile_open(&af, o.output);
    if (st != PP_OK)
        return pp_cmd_fail(CMD, st);
    st = run(&o, af.fp);
    if (st != PP_OK) {
        pp_afile_abort(&af);
        return pp_cmd_fail(CMD, st);
    }
    st = pp_afile_commit(&af);
    return st == PP_OK ? 0 : pp_cmd_fail(CMD, st);
}
