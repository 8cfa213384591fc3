/* fmt_ascii.c — a terminal timeline of a simulated schedule: one row per rank, time to the right.
 *
 *     time 0 .. 12, 1 column = 0.25
 *     F/B forward/backward, micro-batch after the letter where it fits
 *     - and = continue an F and a B, . idle
 * (f/b: pipe 1 of a bidirectional schedule; with several chunks per rank each chunk has its
 * own fill characters, listed in the legend; R: a gradient sync issued; I and W, split backward:
 * I fills like B, W has its own fill, and the legend says so only where the schedule has them)
 *              0         5         10
 *              +----+----+----+----+----+----+----+----
 *     rank 0   F0--F1--........B0======B1======   idle 33%
 *
 * Time is scaled to `width` columns (width <= 0: the smallest compute gets two columns where the
 * whole fits in 160). An action covers the columns whose left edges round into [start, end).
 * SEND / RECV are not drawn: with the links modelled they show as the idle they cause. This file
 * reads the simulation's spans; it computes nothing about the schedule itself.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "pp_sched.h"

#define ASCII_MAX_AUTO 160
#define ASCII_MIN_AUTO 40

static int auto_width(const pp_sched *s, const pp_sim_result *sim)
{
    double shortest = sim->makespan;
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->n_ops[r]; i++) {
            int op = s->ops[r][i].op;
            double d = sim->spans[r][i].end - sim->spans[r][i].start;
            if (pp_op_is_compute(op) && d > 0 && d < shortest)
                shortest = d;
        }
    double w = shortest > 0 ? 2.0 * sim->makespan / shortest : ASCII_MAX_AUTO;
    if (w > ASCII_MAX_AUTO)
        w = ASCII_MAX_AUTO;
    if (w < ASCII_MIN_AUTO)
        w = ASCII_MIN_AUTO;
    return (int)ceil(w);
}

static int column(double t, double makespan, int width)
{
    if (makespan <= 0)
        return 0;
    int c = (int)floor(t / makespan * width + 0.5);
    return c < 0 ? 0 : c > width ? width : c;
}

/* Fill characters of forward / backward blocks by chunk (the k-th stage a rank holds on a
 * pipe), so interleaved chunks look different; they repeat after ASCII_CHUNK_FILLS. */
#define ASCII_CHUNK_FILLS 4
static const char FILL_F[ASCII_CHUNK_FILLS] = {'-', '~', ':', '+'};
static const char FILL_B[ASCII_CHUNK_FILLS] = {'=', '#', '%', '@'}; /* B and I */
static const char FILL_W[ASCII_CHUNK_FILLS] = {'_', '^', ';', '*'};

static int chunk_of(const pp_sched *s, const pp_action *a)
{
    return s->stages_per_pipe > s->ranks ? (int)(a->stage / s->ranks) % ASCII_CHUNK_FILLS : 0;
}

/* Draws one compute block into row[c0..c1): letter and micro-batch id where both fit (F12),
 * else the id alone when the block still shows a fill character after it (12-- reads as a
 * forward by its fill), else the letter; then the chunk's fill. */
static void draw_block(char *row, int c0, int c1, const pp_action *a, int chunk)
{
    static const char LETTER[PP_OP__COUNT] = {
        [PP_OP_F] = 'F', [PP_OP_B] = 'B', [PP_OP_I] = 'I', [PP_OP_W] = 'W'};
    char letter = (char)(LETTER[a->op] + (a->pipe ? 'a' - 'A' : 0));
    char fill = a->op == PP_OP_F   ? FILL_F[chunk]
                : a->op == PP_OP_W ? FILL_W[chunk]
                                   : FILL_B[chunk];
    if (c1 <= c0) { /* too short for a column: show it only where nothing else is */
        if (row[c0] == '.')
            row[c0] = letter;
        return;
    }
    char label[16];
    int n = snprintf(label, sizeof label, "%c%d", letter, (int)a->mb);
    if (n > c1 - c0) {
        n = snprintf(label, sizeof label, "%d", (int)a->mb);
        if (n + 1 > c1 - c0)
            n = snprintf(label, sizeof label, "%c", letter);
    }
    for (int c = c0; c < c1; c++)
        row[c] = c - c0 < n ? label[c - c0] : fill;
}

/* Fills row (width + extra + 1 bytes): compute blocks, idle dots, then REDUCE markers in the
 * first free column at or after their issue time; the `extra` columns past the end hold the
 * markers of syncs issued when the rank has finished. */
static void draw_rank(const pp_sched *s, const pp_sim_result *sim, int r, int width, int extra,
                      char *row)
{
    memset(row, '.', (size_t)width);
    memset(row + width, ' ', (size_t)extra);
    row[width + extra] = '\0';
    for (int i = 0; i < s->n_ops[r]; i++) {
        const pp_action *a = &s->ops[r][i];
        if (!pp_op_is_compute(a->op))
            continue;
        pp_span sp = sim->spans[r][i];
        draw_block(row, column(sp.start, sim->makespan, width),
                   column(sp.end, sim->makespan, width), a, chunk_of(s, a));
    }
    for (int i = 0; i < s->n_ops[r]; i++) {
        if (s->ops[r][i].op != PP_OP_REDUCE)
            continue;
        int c = column(sim->spans[r][i].start, sim->makespan, width);
        while (c < width + extra - 1 && row[c] != '.' && row[c] != ' ')
            c++;
        row[c] = 'R';
    }
}

/* Most REDUCE actions on one rank: how many marker columns the rows may need past the end. */
static int max_reduces(const pp_sched *s)
{
    int most = 0;
    for (int r = 0; r < s->ranks; r++) {
        int n = 0;
        for (int i = 0; i < s->n_ops[r]; i++)
            n += s->ops[r][i].op == PP_OP_REDUCE;
        most = n > most ? n : most;
    }
    return most;
}

static void write_axis(const pp_sim_result *sim, int width, int indent, FILE *fp)
{
    char *labels = malloc((size_t)width + 32), *axis = malloc((size_t)width + 2);
    if (!labels || !axis) {
        free(labels);
        free(axis);
        return;
    }
    memset(labels, ' ', (size_t)width + 31);
    labels[width + 31] = '\0';
    memset(axis, '-', (size_t)width + 1);
    axis[width + 1] = '\0';
    double step = pp_fmt_tick_step(sim->makespan, 8);
    int free_from = 0;
    for (int k = 0; k * step <= sim->makespan * (1 + 1e-9); k++) {
        int c = column(k * step, sim->makespan, width);
        axis[c] = '+';
        char num[32];
        int n = snprintf(num, sizeof num, "%g", k * step);
        if (c >= free_from && c + n <= width + 30) {
            memcpy(labels + c, num, (size_t)n);
            free_from = c + n + 1;
        }
    }
    int end = width + 30;
    while (end > 0 && labels[end - 1] == ' ')
        end--;
    labels[end] = '\0';
    fprintf(fp, "%*s%s\n%*s%s\n", indent, "", labels, indent, "", axis);
    free(labels);
    free(axis);
}

/* Columns a row takes besides its timeline: "rank D-1  " before, syncs past the end, and
 * "  idle 100%" after. */
static int row_overhead(const pp_sched *s)
{
    char name[32];
    return snprintf(name, sizeof name, "rank %d", s->ranks - 1) + 2 + max_reduces(s) + 1 + 11;
}

pp_status pp_sched_write_ascii_fit(const pp_sched *s, const pp_sim_result *sim, int line_width,
                                   FILE *fp)
{
    if (!sim || !sim->spans)
        return pp_sched_write_ascii(s, sim, 0, fp); /* its message */
    int width = auto_width(s, sim), room = line_width - row_overhead(s);
    if (line_width > 0 && width > room)
        width = room > 20 ? room : 20;
    return pp_sched_write_ascii(s, sim, width, fp);
}

pp_status pp_sched_write_ascii(const pp_sched *s, const pp_sim_result *sim, int width, FILE *fp)
{
    if (!sim || !sim->spans)
        return PP_ERR(PP_ERR_INVALID,
                      "the ascii timeline needs a simulation run with want_spans = 1");
    if (width > PP_SCHED_ASCII_MAX_WIDTH)
        return PP_ERR(PP_ERR_INVALID, "width: expected at most %d columns, got %d",
                      PP_SCHED_ASCII_MAX_WIDTH, width);
    if (width <= 0)
        width = auto_width(s, sim);
    int extra = max_reduces(s) + 1;
    char *row = malloc((size_t)width + (size_t)extra + 1);
    if (!row)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for a %d-column timeline", width);
    char name[32];
    int indent = snprintf(name, sizeof name, "rank %d", s->ranks - 1) + 2;
    /* short lines: the legend fits an 80-column terminal like the rows */
    fprintf(fp, "time 0 .. %g, 1 column = %.3g\n", sim->makespan, sim->makespan / width);
    int split = pp_sched_has_split_backward(s);
    fprintf(fp, "%s%s, micro-batch after the letter where it fits\n",
            s->n_pipes == 2 ? "F/B pipe 0 (down), f/b pipe 1 (up)" : "F/B forward/backward",
            split ? ", I/W input/weight gradient" : "");
    if (s->stages_per_pipe > s->ranks && split)
        fprintf(fp, "chunk fills (F/B,I/W): 0 -/=/_, 1 ~/#/^, 2 :/%%/;, 3 +/@/*; . idle%s\n",
                s->n_reduces ? ", R gradient sync" : "");
    else if (s->stages_per_pipe > s->ranks) /* several chunks per rank: say which fill is which */
        fprintf(fp, "chunk fills (F/B): 0 -/=, 1 ~/#, 2 :/%%, 3 +/@; . idle%s\n",
                s->n_reduces ? ", R gradient sync" : "");
    else if (split)
        fprintf(fp, "- = _ continue an F, a B or I, a W; . idle%s\n",
                s->n_reduces ? ", R gradient sync (REDUCE) issued" : "");
    else
        fprintf(fp, "- and = continue an F and a B, . idle%s\n",
                s->n_reduces ? ", R gradient sync (REDUCE) issued" : "");
    write_axis(sim, width, indent, fp);
    for (int r = 0; r < s->ranks; r++) {
        draw_rank(s, sim, r, width, extra, row);
        snprintf(name, sizeof name, "rank %d", r);
        double idle = sim->makespan > 0 ? 100.0 * sim->idle[r] / sim->makespan : 0;
        fprintf(fp, "%-*s%s  idle %.0f%%\n", indent, name, row, idle);
    }
    free(row);
    if (ferror(fp))
        return PP_ERR(PP_ERR_IO, "writing the ascii timeline failed");
    return PP_OK;
}
