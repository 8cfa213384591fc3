/* fmt_text.c — the text form of a schedule: header lines plus one line per rank; round-trips.
 *
 * Example (1F1B, D = 2, N = 2):
 *
 *     # pptune schedule, text form (schedules/fmt_text.c)
 *     schedule 1f1b ranks 2 microbatches 2 chunks 1 pipes 1 group 0 layers 2
 *     place d: 0 1
 *     layers d: 0-1 1-2
 *     rank 0: F0.0 SF0.0 F1.0 SF1.0 RB0.0 B0.0 RB1.0 B1.0
 *     rank 1: RF0.1 F0.1 B0.1 SB0.1 RF1.1 F1.1 B1.1 SB1.1
 *
 * Lines (a '#' starts a comment that runs to the end of the line; blank lines are ignored):
 *   schedule KIND key value ...   first line; keys ranks, microbatches (required), chunks (v,
 *                                 default 1), pipes (1|2, default 1), group (default 0),
 *                                 layers (L, default S = v*D). KIND is one word.
 *   place P: r0 r1 ...            rank of every stage of pipe P along its data flow ('-' unplaced)
 *   layers P: b-e b-e ...         every stage's layer range [b, e) along pipe P
 *   mb-pipe: dduu...              pipe of every micro-batch, one letter each (two pipes only)
 *   reduce K: ranks 0 3 stages d4 u3          REDUCE descriptor K (numbered 0, 1, ... in order):
 *                                 its ranks and the (pipe, stage) pairs whose gradients it reduces
 *   rank R: TOKEN TOKEN ...       rank R's actions in order
 * Pipes are written d (pipe 0: the only pipeline, or "down") and u (pipe 1: "up").
 *
 * Action tokens are the action grammar of pp_sched.h (action.c: pp_action_format /
 * pp_action_parse): OP [PIPE] MB . STAGE [@PEER], or ARk for REDUCE with descriptor k; e.g.
 * "Fd1.0" is the forward of micro-batch 1 through stage 0 of the down pipe (schedules.md's
 * notation, except micro-batches count from 0 here). I and W (split backward) are tokens like
 * the others: "Id3.2" is the input-gradient backward of micro-batch 3 through stage 2. An
 * overlapped pair (DualPipeV's, PyTorch's OVERLAP_F_B) is one token, its F and its B joined by
 * '+': "F7.0+B3.7".
 *
 * The parser checks structure (every number in range, every reduce id defined) so that the
 * result is safe to hand to pp_sched_check, which judges whether the schedule is correct. It does
 * not check the schedule itself and does not read files: the caller passes the text.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "pp_sched.h"

/* Upper bounds that keep a malformed header from asking for absurd allocations. */
#define TEXT_MAX_RANKS 65536
#define TEXT_MAX_MB (1 << 24)
#define TEXT_MAX_STAGES (1 << 20)

static char pipe_letter(int pipe)
{
    return pipe ? 'u' : 'd';
}

static void write_action(const pp_sched *s, const pp_action *a, FILE *fp)
{
    char tok[64];
    fputs(pp_action_format(s, a, PP_ACTION_TOKEN, tok, sizeof tok), fp);
}

static int kind_is_word(const char *k)
{
    if (!*k)
        return 0;
    for (; *k; k++)
        if (isspace((unsigned char)*k) || *k == '#')
            return 0;
    return 1;
}

pp_status pp_sched_write_text(const pp_sched *s, FILE *fp)
{
    if (!kind_is_word(s->kind))
        return PP_ERR(PP_ERR_INVALID,
                      "the text form needs a one-word schedule kind, got \"%s\"", s->kind);
    int S = s->stages_per_pipe;
    fprintf(fp, "# pptune schedule, text form (schedules/fmt_text.c)\n");
    fprintf(fp, "schedule %s ranks %d microbatches %d chunks %d pipes %d group %d layers %d\n",
            s->kind, s->ranks, s->microbatches, s->chunks, s->n_pipes, s->group, s->layers);
    for (int p = 0; p < s->n_pipes; p++) {
        fprintf(fp, "place %c:", pipe_letter(p));
        for (int k = 0; k < S; k++) {
            int r = pp_sched_stage(s, p, k)->rank;
            if (r < 0)
                fprintf(fp, " -");
            else
                fprintf(fp, " %d", r);
        }
        fprintf(fp, "\nlayers %c:", pipe_letter(p));
        for (int k = 0; k < S; k++) {
            const pp_stage *g = pp_sched_stage(s, p, k);
            fprintf(fp, " %d-%d", g->layer_begin, g->layer_end);
        }
        fputc('\n', fp);
    }
    if (s->n_pipes == 2) {
        fprintf(fp, "mb-pipe: ");
        for (int m = 0; m < s->microbatches; m++)
            fputc(pipe_letter(s->mb_pipe[m]), fp);
        fputc('\n', fp);
    }
    for (int k = 0; k < s->n_reduces; k++) {
        const pp_reduce *rd = &s->reduces[k];
        fprintf(fp, "reduce %d: ranks", k);
        for (int i = 0; i < rd->n_ranks; i++)
            fprintf(fp, " %d", rd->ranks[i]);
        fprintf(fp, " stages");
        for (int i = 0; i < rd->n_stages; i++)
            fprintf(fp, " %c%d", pipe_letter(rd->stages[i].pipe), rd->stages[i].stage);
        fputc('\n', fp);
    }
    for (int r = 0; r < s->ranks; r++) {
        fprintf(fp, "rank %d:", r);
        for (int i = 0; i < s->n_ops[r]; i++) {
            if (i == 0 || !s->ops[r][i - 1].overlap) /* a pair is one token: F3.0+B2.7 */
                fputc(' ', fp);
            write_action(s, &s->ops[r][i], fp);
        }
        fputc('\n', fp);
    }
    if (ferror(fp))
        return PP_ERR(PP_ERR_IO, "writing the text form of the schedule failed");
    return PP_OK;
}

/* ---- Parsing ---------------------------------------------------------------------------------- */

typedef struct {
    const char *src; /* name for messages */
    int line;        /* 1-based line number */
    char *cur;       /* position in the current line (mutable copy) */
    pp_sched *s;
    char *seen_rank; /* [ranks] a "rank R:" line was read */
    int *reduce_use; /* largest reduce id used by an action + 1 */
} text_parser;

#define TP_ERR(tp, ...) text_error((tp), __FILE__, __LINE__, __VA_ARGS__)

static pp_status text_error(const text_parser *tp, const char *file, int line, const char *fmt,
                            ...) PP_PRINTF(4, 5);

static pp_status text_error(const text_parser *tp, const char *file, int line, const char *fmt,
                            ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pp_err_set(PP_ERR_PARSE, file, line, "%s:%d: %s", tp->src, tp->line, msg);
}

/* Next whitespace-separated token of the line, NUL-terminated in place; NULL at the end. */
static char *next_token(text_parser *tp)
{
    char *p = tp->cur;
    while (*p && isspace((unsigned char)*p))
        p++;
    if (!*p) {
        tp->cur = p;
        return NULL;
    }
    char *t = p;
    while (*p && !isspace((unsigned char)*p))
        p++;
    if (*p)
        *p++ = '\0';
    tp->cur = p;
    return t;
}

/* A whole token that must be an integer in [lo, hi]. */
static pp_status token_int(text_parser *tp, const char *what, long lo, long hi, int *out)
{
    char *t = next_token(tp);
    const char *p = t;
    if (!t)
        return TP_ERR(tp, "%s: expected an integer in %ld..%ld, got the end of the line", what, lo,
                      hi);
    if (!pp_fmt_scan_int(&p, lo, hi, out) || *p)
        return TP_ERR(tp, "%s: expected an integer in %ld..%ld, got \"%s\"", what, lo, hi, t);
    return PP_OK;
}

static int parse_pipe_letter(char c)
{
    return c == 'd' ? 0 : c == 'u' ? 1 : -1;
}

/* "schedule KIND ranks D microbatches N ..." -> an empty schedule of that shape. */
static pp_status parse_header(text_parser *tp, pp_sched **out)
{
    char *kind = next_token(tp);
    if (!kind)
        return TP_ERR(tp, "schedule: expected the kind after \"schedule\"");
    if (strlen(kind) >= sizeof((pp_sched *)0)->kind)
        return TP_ERR(tp, "schedule: expected a kind of at most %zu characters, got \"%s\"",
                      sizeof((pp_sched *)0)->kind - 1, kind);
    int D = -1, N = -1, v = 1, P = 1, G = 0, L = 0;
    char *key;
    while ((key = next_token(tp))) {
        struct {
            const char *name;
            int *dst;
            long lo, hi;
        } keys[] = {{"ranks", &D, 1, TEXT_MAX_RANKS},      {"microbatches", &N, 1, TEXT_MAX_MB},
                    {"chunks", &v, 1, TEXT_MAX_STAGES},    {"pipes", &P, 1, 2},
                    {"group", &G, 0, TEXT_MAX_MB},         {"layers", &L, 0, INT_MAX / 2}};
        int k, nk = (int)(sizeof keys / sizeof keys[0]);
        for (k = 0; k < nk && strcmp(key, keys[k].name) != 0; k++)
            ;
        if (k == nk)
            return TP_ERR(tp,
                          "schedule: expected one of ranks, microbatches, chunks, pipes, group, "
                          "layers, got \"%s\"",
                          key);
        PP_TRY(token_int(tp, key, keys[k].lo, keys[k].hi, keys[k].dst));
    }
    if (D < 0 || N < 0)
        return TP_ERR(tp, "schedule: \"ranks\" and \"microbatches\" are required");
    if ((long)v * D > TEXT_MAX_STAGES)
        return TP_ERR(tp, "schedule: chunks x ranks = %ld stages is more than %d",
                      (long)v * D, TEXT_MAX_STAGES);
    if (pp_sched_budget_check(D, N, v) != PP_OK) { /* before any allocation (finding 6) */
        char why[200];
        snprintf(why, sizeof why, "%s", pp_err_text());
        return TP_ERR(tp, "schedule: %s", why);
    }
    if (L && L < v * D)
        return TP_ERR(tp, "schedule: %d layers cannot fill %d stages", L, v * D);
    /* Layers 0 gives one layer per stage, which always splits; the real ranges follow in the
     * "layers" lines, and s->layers is set to what the file says. */
    PP_TRY(pp_sched_create(kind, D, N, v, P, 0, 0, out));
    (*out)->group = G;
    if (L)
        (*out)->layers = L;
    return PP_OK;
}

/* "d:" or "u:" after place/layers; returns the pipe. */
static pp_status parse_pipe_colon(text_parser *tp, const char *what, int *pipe)
{
    char *t = next_token(tp);
    if (!t || strlen(t) != 2 || t[1] != ':' || parse_pipe_letter(t[0]) < 0)
        return TP_ERR(tp, "%s: expected \"d:\" or \"u:\", got \"%s\"", what, t ? t : "");
    *pipe = parse_pipe_letter(t[0]);
    if (*pipe >= tp->s->n_pipes)
        return TP_ERR(tp, "%s: pipe u given, but the schedule has one pipe", what);
    return PP_OK;
}

/* After the S entries of a place/layers line: nothing more. */
static pp_status expect_end(text_parser *tp, const char *what, int pipe)
{
    char *extra = next_token(tp);
    if (extra)
        return TP_ERR(tp, "%s %c: expected %d entries (one per stage), got more: \"%s\"", what,
                      pipe_letter(pipe), tp->s->stages_per_pipe, extra);
    return PP_OK;
}

static pp_status parse_place(text_parser *tp)
{
    pp_sched *s = tp->s;
    int p;
    PP_TRY(parse_pipe_colon(tp, "place", &p));
    for (int k = 0; k < s->stages_per_pipe; k++) {
        char *t = next_token(tp);
        const char *q = t;
        int r;
        if (t && strcmp(t, "-") == 0)
            r = -1;
        else if (!t || !pp_fmt_scan_int(&q, 0, s->ranks - 1, &r) || *q)
            return TP_ERR(tp, "place %c, stage %d: expected a rank in 0..%d, got \"%s\"",
                          pipe_letter(p), k, s->ranks - 1, t ? t : "");
        pp_sched_stage(s, p, k)->rank = r;
    }
    return expect_end(tp, "place", p);
}

static pp_status parse_layers(text_parser *tp)
{
    pp_sched *s = tp->s;
    int p;
    PP_TRY(parse_pipe_colon(tp, "layers", &p));
    for (int k = 0; k < s->stages_per_pipe; k++) {
        char *t = next_token(tp);
        const char *q = t;
        int b, e;
        if (!t || !pp_fmt_scan_int(&q, 0, s->layers, &b) || *q++ != '-' ||
            !pp_fmt_scan_int(&q, 0, s->layers, &e) || *q || e <= b)
            return TP_ERR(tp,
                          "layers %c, stage %d: expected a range b-e with 0 <= b < e <= %d, got "
                          "\"%s\"",
                          pipe_letter(p), k, s->layers, t ? t : "");
        pp_sched_stage(s, p, k)->layer_begin = b;
        pp_sched_stage(s, p, k)->layer_end = e;
    }
    return expect_end(tp, "layers", p);
}

static pp_status parse_mb_pipe(text_parser *tp)
{
    pp_sched *s = tp->s;
    char *t = next_token(tp);
    if (!t || (int)strlen(t) != s->microbatches)
        return TP_ERR(tp, "mb-pipe: expected %d letters d/u (one per micro-batch), got \"%s\"",
                      s->microbatches, t ? t : "");
    for (int m = 0; m < s->microbatches; m++) {
        int p = parse_pipe_letter(t[m]);
        if (p < 0 || p >= s->n_pipes)
            return TP_ERR(tp, "mb-pipe, micro-batch %d: expected %s, got '%c'", m,
                          s->n_pipes == 2 ? "d or u" : "d", t[m]);
        s->mb_pipe[m] = (uint8_t)p;
    }
    if (next_token(tp))
        return TP_ERR(tp, "mb-pipe: expected one word of d/u letters");
    return PP_OK;
}

static pp_status parse_reduce(text_parser *tp, const char *idtok)
{
    pp_sched *s = tp->s;
    const char *q = idtok;
    int id;
    if (!pp_fmt_scan_int(&q, 0, INT_MAX, &id) || strcmp(q, ":") != 0 || id != s->n_reduces)
        return TP_ERR(tp, "reduce: expected \"%d:\" (descriptors are numbered in order), got \"%s\"",
                      s->n_reduces, idtok);
    char *t = next_token(tp);
    if (!t || strcmp(t, "ranks") != 0)
        return TP_ERR(tp, "reduce %d: expected \"ranks\", got \"%s\"", id, t ? t : "");
    int ranks[PP_REDUCE_MAX_RANKS], nr = 0;
    pp_stage_ref st[PP_REDUCE_MAX_STAGES];
    int ns = 0;
    while ((t = next_token(tp)) && strcmp(t, "stages") != 0) {
        q = t;
        if (nr == PP_REDUCE_MAX_RANKS || !pp_fmt_scan_int(&q, 0, s->ranks - 1, &ranks[nr]) ||
            *q)
            return TP_ERR(tp, "reduce %d: expected up to %d ranks in 0..%d, got \"%s\"", id,
                          PP_REDUCE_MAX_RANKS, s->ranks - 1, t);
        nr++;
    }
    if (!t)
        return TP_ERR(tp, "reduce %d: expected \"stages\" after the ranks", id);
    while ((t = next_token(tp))) {
        int p = parse_pipe_letter(t[0]);
        q = t + 1;
        if (ns == PP_REDUCE_MAX_STAGES || p < 0 || p >= s->n_pipes ||
            !pp_fmt_scan_int(&q, 0, s->stages_per_pipe - 1, &st[ns].stage) || *q)
            return TP_ERR(tp,
                          "reduce %d: expected up to %d stages like d%d or u0 (pipe letter, stage "
                          "0..%d), got \"%s\"",
                          id, PP_REDUCE_MAX_STAGES, s->stages_per_pipe - 1,
                          s->stages_per_pipe - 1, t);
        st[ns++].pipe = p;
    }
    if (nr == 0 || ns == 0)
        return TP_ERR(tp, "reduce %d: expected at least one rank and one stage", id);
    PP_TRY(pp_sched_add_reduce(s, ranks, nr, st, ns, NULL));
    return PP_OK;
}

/* One action token, or an overlapped pair's (pp_action_parse_pair); peers are filled in after
 * all lines are read. */
static pp_status parse_action(text_parser *tp, int rank, const char *t)
{
    pp_sched *s = tp->s;
    pp_action a[2];
    int n;
    if (pp_action_parse_pair(s, t, a, &n) != PP_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", pp_err_text());
        return TP_ERR(tp, "rank %d, action %d: %s", rank, s->n_ops[rank], why);
    }
    for (int k = 0; k < n; k++) {
        if (a[k].op == PP_OP_REDUCE && a[k].stage >= *tp->reduce_use)
            *tp->reduce_use = a[k].stage + 1;
        PP_TRY(pp_sched_push(s, rank, (pp_op_kind)a[k].op, a[k].pipe, a[k].stage, a[k].mb));
        pp_action *b = &s->ops[rank][s->n_ops[rank] - 1];
        b->peer = a[k].peer;
        b->overlap = a[k].overlap;
    }
    return PP_OK;
}

static pp_status parse_rank(text_parser *tp, const char *rtok)
{
    pp_sched *s = tp->s;
    const char *q = rtok;
    int r;
    if (!pp_fmt_scan_int(&q, 0, s->ranks - 1, &r) || strcmp(q, ":") != 0)
        return TP_ERR(tp, "rank: expected \"R:\" with R in 0..%d, got \"%s\"", s->ranks - 1, rtok);
    if (tp->seen_rank[r])
        return TP_ERR(tp, "rank %d: a second line for the same rank", r);
    tp->seen_rank[r] = 1;
    char *t;
    while ((t = next_token(tp)))
        PP_TRY(parse_action(tp, r, t));
    return PP_OK;
}

static pp_status parse_line(text_parser *tp, char *line)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    tp->cur = line;
    char *word = next_token(tp);
    if (!word)
        return PP_OK;
    if (!tp->s) {
        if (strcmp(word, "schedule") != 0)
            return TP_ERR(tp, "expected the \"schedule KIND ranks D microbatches N ...\" line "
                              "first, got \"%s\"", word);
        PP_TRY(parse_header(tp, &tp->s));
        tp->seen_rank = pp_calloc((size_t)tp->s->ranks, 1);
        return tp->seen_rank ? PP_OK : PP_ERR_NOMEM;
    }
    if (strcmp(word, "place") == 0)
        return parse_place(tp);
    if (strcmp(word, "layers") == 0)
        return parse_layers(tp);
    if (strcmp(word, "mb-pipe:") == 0)
        return parse_mb_pipe(tp);
    char *arg = next_token(tp);
    if (strcmp(word, "reduce") == 0)
        return parse_reduce(tp, arg ? arg : "");
    if (strcmp(word, "rank") == 0)
        return parse_rank(tp, arg ? arg : "");
    return TP_ERR(tp, "expected a line starting with place, layers, mb-pipe:, reduce or rank, "
                      "got \"%s\"", word);
}

/* Resolves peers left implied and checks reduce ids, once placement and reduces are known. */
static pp_status finish(text_parser *tp, int reduce_use)
{
    pp_sched *s = tp->s;
    if (reduce_use > s->n_reduces)
        return pp_err_set(PP_ERR_PARSE, __FILE__, __LINE__,
                          "%s: action AR%d names a reduce descriptor, but %d are defined "
                          "(\"reduce K: ...\" lines)",
                          tp->src, reduce_use - 1, s->n_reduces);
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->n_ops[r]; i++) {
            pp_action *a = &s->ops[r][i];
            if (a->peer == PP_ACTION_PEER_IMPLIED)
                a->peer = pp_sched_implied_peer(s, a);
        }
    return PP_OK;
}

pp_status pp_sched_parse_text(const char *text, const char *source_name, pp_sched **out)
{
    *out = NULL;
    char *buf = pp_strdup(text);
    if (!buf)
        return PP_ERR_NOMEM;
    text_parser tp = {.src = source_name ? source_name : "<text>", .line = 0};
    int reduce_use = 0;
    tp.reduce_use = &reduce_use;
    pp_status st = PP_OK;
    char *line = buf;
    while (line && st == PP_OK) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        tp.line++;
        st = parse_line(&tp, line);
        line = nl ? nl + 1 : NULL;
    }
    if (st == PP_OK && !tp.s)
        st = pp_err_set(PP_ERR_PARSE, __FILE__, __LINE__,
                        "%s: no \"schedule KIND ranks D microbatches N\" line: not a schedule in "
                        "the text form",
                        tp.src);
    if (st == PP_OK)
        st = finish(&tp, reduce_use);
    free(buf);
    free(tp.seen_rank);
    if (st != PP_OK) {
        pp_sched_destroy(tp.s);
        return st;
    }
    *out = tp.s;
    return PP_OK;
}
