/* fmt_svg.c — a Gantt chart of a simulated schedule, as SVG for a design document.
 *
 * Ranks are rows, time runs to the right. F blocks are filled with their micro-batch's colour
 * (ten colours, Tableau 10, repeating), B blocks with a darker shade of the same colour, so a
 * micro-batch can be followed across ranks (split backward: I as B, W the dark shade faded,
 * each labelled by its letter); pipe 1 (up) blocks are labelled in lower case and
 * edged with a dashed line. Idle time shows as the hatched row background. A REDUCE is a black
 * triangle where it is issued and, when it takes time, a black bar under the row until it
 * completes. Title (kind, D, N, v, makespan, both bubble definitions), time axis with ticks and
 * a legend complete it. SEND / RECV are not drawn (their cost appears as idle time).
 * At large sizes (blocks narrower than SVG_MIN_BLOCK px on average) rows are aggregated: touching
 * blocks of one kind merge into one bar coloured by kind (forward light, backward dark), idle
 * stays hatched, so D = 8, v = 4, N = 32 reads as phases instead of a barcode. The axis says
 * seconds when the caller's costs are (pp_sched_svg_opts.unit).
 * Plain SVG 1.1, no scripts or external fonts, so rsvg-convert and browsers agree.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "pp_sched.h"

#define SVG_LEFT 78.0   /* px: room for "rank 12" */
#define SVG_PLOT 960.0  /* px: width of the time axis */
#define SVG_RIGHT 40.0
#define SVG_TOP 64.0    /* px: title and subtitle */
#define SVG_ROW 28.0    /* px: height of one rank's bar */
#define SVG_GAP 10.0
#define SVG_CHAR 6.6    /* px: approximate width of one 11px sans-serif character */

static const unsigned palette[10] = {0x4e79a7, 0xf28e2b, 0xe15759, 0x76b7b2, 0x59a14f,
                                     0xedc948, 0xb07aa1, 0xff9da7, 0x9c755f, 0xbab0ac};

/* Colour of micro-batch m; backward blocks are darkened to 60 %. */
static unsigned mb_colour(int m, int backward)
{
    unsigned c = palette[(unsigned)m % 10];
    if (!backward)
        return c;
    unsigned r = (c >> 16) * 6 / 10, g = ((c >> 8) & 0xff) * 6 / 10, b = (c & 0xff) * 6 / 10;
    return r << 16 | g << 8 | b;
}

/* Dark text on light fills, white on dark ones (ITU-R BT.601 luma). */
static const char *text_colour(unsigned c)
{
    double y = 0.299 * (c >> 16) + 0.587 * ((c >> 8) & 0xff) + 0.114 * (c & 0xff);
    return y > 150 ? "#1a1a1a" : "#ffffff";
}

typedef struct {
    double x0, scale; /* x = x0 + t * scale */
    double makespan;
    int aggregate;    /* 1: rows drawn by kind (write_row_aggregated) */
    const char *unit; /* the axis label's unit */
} svg_axis;

#define SVG_MIN_BLOCK 6.0 /* px: narrower blocks on average switch to aggregated rows */
#define KIND_F 0x8fb3d9u  /* aggregated forward */
#define KIND_B 0x2c5282u  /* aggregated backward (and I/W) */
#define KIND_MIX 0x5b82b3u /* aggregated alternating forward and backward */

static double row_y(int r)
{
    return SVG_TOP + r * (SVG_ROW + SVG_GAP);
}

static void write_defs(FILE *fp)
{
    fputs("<defs>\n"
          "  <pattern id=\"idle\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
          "patternTransform=\"rotate(45)\">\n"
          "    <rect width=\"6\" height=\"6\" fill=\"#f4f4f4\"/>\n"
          "    <line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c8c8c8\" stroke-width=\"2\"/>\n"
          "  </pattern>\n"
          "</defs>\n",
          fp);
}

/* The kind comes from a file for parsed schedules: escape what XML reserves. */
static void xml_text(const char *str, FILE *fp)
{
    for (; *str; str++) {
        switch (*str) {
        case '<':
            fputs("&lt;", fp);
            break;
        case '>':
            fputs("&gt;", fp);
            break;
        case '&':
            fputs("&amp;", fp);
            break;
        case '"':
            fputs("&quot;", fp);
            break;
        default:
            fputc(*str, fp);
        }
    }
}

static void write_title(const pp_sched *s, const pp_sim_result *sim, FILE *fp)
{
    fprintf(fp, "<text x=\"%g\" y=\"24\" font-size=\"17\" font-weight=\"bold\">", SVG_LEFT);
    xml_text(s->kind, fp);
    fprintf(fp,
            ": D = %d ranks, N = %d micro-batches, v = %d chunk%s per rank%s</text>\n",
            s->ranks, s->microbatches, s->chunks, s->chunks == 1 ? "" : "s",
            s->n_pipes == 2 ? ", two pipes" : "");
    fprintf(fp,
            "<text x=\"%g\" y=\"44\" font-size=\"13\" fill=\"#333\">makespan %g, bubble %.1f%% "
            "of total time (idle / (D x makespan)), %.1f%% over ideal (idle / compute)</text>\n",
            SVG_LEFT, sim->makespan, 100 * sim->bubble_over_total, 100 * sim->bubble_over_ideal);
}

/* One F/B block with its label: "F3" (or "f3" on pipe 1), the micro-batch id alone where that
 * does not fit, nothing where nothing does; show_stage adds the stage as a subscript ("F3" over
 * stage 5 reads F3 with a small 5) where a rank holds several stages, space permitting. */
static void write_block(const pp_action *a, pp_span sp, double y, const svg_axis *ax,
                        int show_stage, FILE *fp)
{
    int bwd = a->op != PP_OP_F; /* B, I, W */
    char what[96]; /* the spelled-out action (needs no schedule: F/B carry no peer) */
    unsigned c = mb_colour(a->mb, bwd);
    double x = ax->x0 + sp.start * ax->scale, w = (sp.end - sp.start) * ax->scale;
    fprintf(fp,
            "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%g\" fill=\"#%06x\"%s "
            "stroke=\"#ffffff\" stroke-width=\"1\"%s><title>%s: %g .. %g</title></rect>\n",
            x, y, w, SVG_ROW, c, a->op == PP_OP_W ? " fill-opacity=\"0.6\"" : "",
            a->pipe ? " stroke-dasharray=\"3,2\"" : "",
            pp_action_str(NULL, a, what, sizeof what), sp.start, sp.end);
    char label[16], sub[16];
    int n = snprintf(label, sizeof label, "%c%d",
                     pp_op_name((pp_op_kind)a->op)[0] + (a->pipe ? 32 : 0), (int)a->mb);
    int k = snprintf(sub, sizeof sub, "%d", (int)a->stage);
    if (!show_stage || (n + 0.7 * k) * SVG_CHAR + 4 > w)
        k = 0;
    if (n * SVG_CHAR + 2 > w)
        n = SVG_CHAR + 2 <= w ? snprintf(label, sizeof label, "%d", (int)a->mb) : 0;
    if (n == 0 || n * SVG_CHAR + 2 > w)
        return;
    fprintf(fp,
            "<text x=\"%.2f\" y=\"%.2f\" font-size=\"11\" text-anchor=\"middle\" "
            "fill=\"%s\">%s",
            x + w / 2, y + SVG_ROW / 2 + 4, text_colour(c), label);
    if (k)
        fprintf(fp, "<tspan font-size=\"8\" dy=\"3\">%s</tspan>", sub);
    fputs("</text>\n", fp);
}

/* *last_x: where this row's previous marker went; markers closer than 11 px are moved right so
 * that syncs issued together (BitPipe's middle ranks) stay countable. */
static void write_reduce(const pp_action *a, pp_span sp, double y, const svg_axis *ax,
                         double *last_x, FILE *fp)
{
    double x = ax->x0 + sp.start * ax->scale;
    if (x < *last_x + 11)
        x = *last_x + 11;
    *last_x = x;
    fprintf(fp,
            "<path d=\"M%.2f %.2f l-5 -7 h10 z\" fill=\"#111\"><title>REDUCE %d issued at "
            "%g, done at %g</title></path>\n",
            x, y, (int)a->stage, sp.start, sp.end);
    if (sp.end > sp.start)
        fprintf(fp, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"3\" fill=\"#111\"/>\n",
                x, y + SVG_ROW + 1, (sp.end - sp.start) * ax->scale);
}

/* Aggregated rows (many actions per pixel): touching blocks merge into bars. A run of one kind
 * (forward or backward) wide enough to see keeps its kind's colour (warm-up forwards, cool-down
 * backwards); where narrow F and B alternate (the steady 1F1B phase) the bar is "mixed"; gaps
 * stay idle. */
enum { RUN_F, RUN_B, RUN_MIX };

typedef struct {
    int kind, mb_lo, mb_hi, n;
    double t0, t1;
} run;

static const unsigned RUN_COLOUR[] = {KIND_F, KIND_B, KIND_MIX};
static const char *RUN_NAME[] = {"forward", "backward", "alternating F/B"};

static void flush_run(const run *u, double y, const svg_axis *ax, FILE *fp)
{
    if (u->n == 0 || u->t1 <= u->t0)
        return;
    fprintf(fp,
            "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%g\" fill=\"#%06x\">"
            "<title>%d %s, micro-batches %d..%d: %g .. %g</title></rect>\n",
            ax->x0 + u->t0 * ax->scale, y, (u->t1 - u->t0) * ax->scale, SVG_ROW,
            RUN_COLOUR[u->kind], u->n, RUN_NAME[u->kind], u->mb_lo, u->mb_hi, u->t0, u->t1);
}

static void run_add(run *u, const pp_action *a, pp_span sp)
{
    u->t1 = sp.end > u->t1 ? sp.end : u->t1;
    u->mb_lo = a->mb < u->mb_lo ? a->mb : u->mb_lo;
    u->mb_hi = a->mb > u->mb_hi ? a->mb : u->mb_hi;
    u->n++;
}

static void write_row_aggregated(const pp_sched *s, const pp_sim_result *sim, int r, double y,
                                 const svg_axis *ax, FILE *fp)
{
    run u = {0}, streak = {0}; /* streak: the same-kind tail of a mixed run */
    for (int i = 0; i < s->n_ops[r]; i++) {
        const pp_action *a = &s->ops[r][i];
        if (!pp_op_is_compute(a->op))
            continue;
        pp_span sp = sim->spans[r][i];
        int kind = a->op == PP_OP_F ? RUN_F : RUN_B;
        run one = {.kind = kind, .mb_lo = a->mb, .mb_hi = a->mb, .n = 1, .t0 = sp.start,
                   .t1 = sp.end};
        int touches = u.n && (sp.start - u.t1) * ax->scale < 1.0;
        int narrow = (sp.end - sp.start) * ax->scale < SVG_MIN_BLOCK;
        if (touches && u.kind == kind) {
            run_add(&u, a, sp);
        } else if (touches && u.kind == RUN_MIX && narrow) {
            streak = streak.n && streak.kind == kind ? streak : (run){.kind = kind, .t0 = sp.start,
                                                                     .mb_lo = a->mb,
                                                                     .mb_hi = a->mb};
            run_add(&streak, a, sp);
            run_add(&u, a, sp);
            if ((streak.t1 - streak.t0) * ax->scale >= 3 * SVG_MIN_BLOCK) {
                u.t1 = streak.t0; /* a visible same-kind phase leaves the mixed bar */
                flush_run(&u, y, ax, fp);
                u = streak;
                streak.n = 0;
            }
        } else if (touches && narrow && (u.t1 - u.t0) * ax->scale < SVG_MIN_BLOCK) {
            u.kind = RUN_MIX;
            run_add(&u, a, sp);
            streak = one;
        } else {
            flush_run(&u, y, ax, fp);
            u = one;
            streak.n = 0;
        }
    }
    flush_run(&u, y, ax, fp);
}

/* Whether blocks would be too narrow to tell apart: under SVG_MIN_BLOCK px on average on the
 * rank with the most compute actions. */
static int crowded(const pp_sched *s)
{
    int most = 0;
    for (int r = 0; r < s->ranks; r++) {
        int n = 0;
        for (int i = 0; i < s->n_ops[r]; i++)
            n += pp_op_is_compute(s->ops[r][i].op);
        most = n > most ? n : most;
    }
    return most > 0 && SVG_PLOT / most < SVG_MIN_BLOCK;
}

static void write_rows(const pp_sched *s, const pp_sim_result *sim, const svg_axis *ax, FILE *fp)
{
    int show_stage = s->n_pipes * s->stages_per_pipe > s->ranks;
    for (int r = 0; r < s->ranks; r++) {
        double y = row_y(r);
        fprintf(fp,
                "<text x=\"%g\" y=\"%.2f\" font-size=\"13\" text-anchor=\"end\">rank %d</text>\n"
                "<rect x=\"%g\" y=\"%.2f\" width=\"%g\" height=\"%g\" fill=\"url(#idle)\"/>\n",
                SVG_LEFT - 8, y + SVG_ROW / 2 + 4, r, ax->x0, y, ax->makespan * ax->scale,
                SVG_ROW);
        for (int i = 0; !ax->aggregate && i < s->n_ops[r]; i++) {
            const pp_action *a = &s->ops[r][i];
            if (pp_op_is_compute(a->op))
                write_block(a, sim->spans[r][i], y, ax, show_stage, fp);
        }
        if (ax->aggregate)
            write_row_aggregated(s, sim, r, y, ax, fp);
        double last_x = -1e9;
        for (int i = 0; i < s->n_ops[r]; i++)
            if (s->ops[r][i].op == PP_OP_REDUCE)
                write_reduce(&s->ops[r][i], sim->spans[r][i], y, ax, &last_x, fp);
    }
}

/* Time axis under the rows, with a light grid line at every tick. Returns the y below it. */
static double write_axis(const pp_sched *s, const svg_axis *ax, FILE *fp)
{
    double top = SVG_TOP - 4, bottom = row_y(s->ranks) - SVG_GAP + 6;
    fprintf(fp, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#333\"/>\n", ax->x0,
            bottom, ax->x0 + ax->makespan * ax->scale, bottom);
    double step = pp_fmt_tick_step(ax->makespan, 10);
    for (int k = 0; k * step <= ax->makespan * (1 + 1e-9); k++) {
        double x = ax->x0 + k * step * ax->scale;
        fprintf(fp,
                "<line x1=\"%.2f\" y1=\"%g\" x2=\"%.2f\" y2=\"%g\" stroke=\"#999\" "
                "stroke-opacity=\"0.45\" stroke-dasharray=\"2,3\"/>\n"
                "<line x1=\"%.2f\" y1=\"%g\" x2=\"%.2f\" y2=\"%g\" stroke=\"#333\"/>\n"
                "<text x=\"%.2f\" y=\"%g\" font-size=\"12\" text-anchor=\"middle\">%g</text>\n",
                x, top, x, bottom, x, bottom, x, bottom + 5, x, bottom + 19, k * step);
    }
    fprintf(fp,
            "<text x=\"%g\" y=\"%g\" font-size=\"12\" text-anchor=\"middle\" fill=\"#333\">time "
            "(%s)</text>\n",
            ax->x0 + ax->makespan * ax->scale / 2, bottom + 36, ax->unit);
    return bottom + 52;
}

static void swatch(double x, double y, const char *fill, const char *label, FILE *fp)
{
    fprintf(fp,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"14\" fill=\"%s\" stroke=\"#888\" "
            "stroke-width=\"0.5\"/>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n",
            x, y, fill, x + 21, y + 11, label);
}

/* Legend: one F/B pair per micro-batch colour, then idle and REDUCE. Returns the y below it. */
static double write_legend_aggregated(const pp_sched *s, double y, FILE *fp)
{
    char f[8], b[8];
    snprintf(f, sizeof f, "#%06x", KIND_F);
    snprintf(b, sizeof b, "#%06x", KIND_B);
    swatch(SVG_LEFT, y, f, "forward", fp);
    int dx = pp_sched_has_split_backward(s) ? 60 : 0; /* room for the longer backward label */
    swatch(SVG_LEFT + 100, y, b, dx ? "backward (B, I, W)" : "backward", fp);
    char m[8];
    snprintf(m, sizeof m, "#%06x", KIND_MIX);
    swatch(SVG_LEFT + 210 + dx, y, m, "alternating F/B", fp);
    swatch(SVG_LEFT + 360 + dx, y, "url(#idle)", "idle", fp);
    fprintf(fp, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%d micro-batches x %d stages: "
                "touching blocks merged (hover a bar for its micro-batches)</text>\n",
            SVG_LEFT + 440 + dx, y + 11, s->microbatches, s->n_pipes * s->stages_per_pipe);
    return y + 52;
}

static double write_legend(const pp_sched *s, double y, FILE *fp)
{
    int n = s->microbatches < 10 ? s->microbatches : 10;
    double x = SVG_LEFT;
    for (int m = 0; m < n; m++) {
        char fill[8], label[48];
        snprintf(fill, sizeof fill, "#%06x", mb_colour(m, 0));
        snprintf(label, sizeof label, "mb %d", m);
        fprintf(fp, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"14\" fill=\"#%06x\"/>\n",
                x + 8, y, mb_colour(m, 1));
        swatch(x, y, fill, "", fp);
        fprintf(fp, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n", x + 21, y + 11,
                label);
        x += 21 + SVG_CHAR * (double)strlen(label) + 14;
    }
    if (s->microbatches > 10)
        fprintf(fp, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">(colours repeat every 10 "
                    "micro-batches)</text>\n",
                x, y + 11);
    y += 24;
    x = SVG_LEFT;
    static const char split_text[] = "; I input gradient (dark), W weight gradient (faded)";
    int split = pp_sched_has_split_backward(s);
    fprintf(fp,
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">F forward (light), B backward "
            "(dark)%s%s%s</text>\n",
            x, y + 11, split ? split_text : "",
            s->n_pipes == 2 ? "; f / b, dashed edge: pipe 1 (up)" : "",
            s->n_pipes * s->stages_per_pipe > s->ranks ? "; small number: stage" : "");
    x += SVG_CHAR * ((s->n_pipes == 2 ? 70 : 37) +
                     (s->n_pipes * s->stages_per_pipe > s->ranks ? 22 : 0) +
                     (split ? (double)sizeof split_text - 1 : 0)) +
         16;
    swatch(x, y, "url(#idle)", "idle", fp);
    x += 70;
    if (s->n_reduces) {
        fprintf(fp, "<path d=\"M%.1f %.1f l-5 -7 h10 z\" fill=\"#111\"/>\n", x + 8, y + 12);
        fprintf(fp, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">gradient sync issued "
                    "(REDUCE)</text>\n",
                x + 21, y + 11);
    }
    return y + 28;
}

pp_status pp_sched_write_svg(const pp_sched *s, const pp_sim_result *sim, FILE *fp)
{
    pp_sched_svg_opts o = {.unit = NULL, .aggregate = -1};
    return pp_sched_write_svg_opts(s, sim, &o, fp);
}

pp_status pp_sched_write_svg_opts(const pp_sched *s, const pp_sim_result *sim,
                                  const pp_sched_svg_opts *o, FILE *fp)
{
    if (!sim || !sim->spans)
        return PP_ERR(PP_ERR_INVALID, "the SVG chart needs a simulation run with want_spans = 1");
    if (!(sim->makespan > 0))
        return PP_ERR(PP_ERR_INVALID, "the SVG chart needs a positive makespan, got %g",
                      sim->makespan);
    svg_axis ax = {.x0 = SVG_LEFT, .scale = SVG_PLOT / sim->makespan, .makespan = sim->makespan,
                   .aggregate = o->aggregate < 0 ? crowded(s) : o->aggregate,
                   .unit = o->unit ? o->unit : "units of the cost table"};
    double width = SVG_LEFT + SVG_PLOT + SVG_RIGHT;
    /* Height: rows, axis (52 px), legend (two lines, 52 px). */
    double height = row_y(s->ranks) - SVG_GAP + 6 + 52 + 52 + 8;
    fprintf(fp,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 "
            "%g %g\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
            width, height, width, height);
    write_defs(fp);
    write_title(s, sim, fp);
    write_rows(s, sim, &ax, fp);
    double y = write_axis(s, &ax, fp);
    if (ax.aggregate)
        write_legend_aggregated(s, y, fp);
    else
        write_legend(s, y, fp);
    fputs("</svg>\n", fp);
    if (ferror(fp))
        return PP_ERR(PP_ERR_IO, "writing the SVG chart failed");
    return PP_OK;
}
