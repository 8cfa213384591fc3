/* fmt_csv.c — PyTorch pipelining's CSV: the reader (the writers are fmt_csv_write.c).
 *
 * The format is torch.distributed.pipelining's (torch/distributed/pipelining/schedules.py, here
 * as torch 2.15 has it): _dump_csv writes one row per rank (row r is rank r, no header), each
 * cell one _Action as its __repr__ gives it: STAGE TYPE [MICROBATCH], e.g. "0F1", "1B0",
 * "0SEND_F3", "2RECV_B0", "3REDUCE_GRAD" (no micro-batch), "1WAIT_SEND_F0", or a compound action
 * "(SUB;SUB)TYPE", which ScheduleDualPipeV writes for its overlapped pairs:
 * "(0F3;7B2)OVERLAP_F_B"; _Action.from_str reads a cell back, and an empty cell is an idle step
 * (None). PyTorch has two forms, named by _load_csv's `format` argument:
 *   compute_only   F / B / I / W / OVERLAP_F_B only. PipelineScheduleMulti._load_csv and
 *                  _PipelineScheduleRuntime._load_csv(format="compute_only") read it; the
 *                  runtime then adds REDUCE_GRAD and WAIT_REDUCE_GRAD (_add_reduce_grad), FSDP's
 *                  UNSHARD/RESHARD, the SEND/RECV actions (_add_send_recv) and a WAIT_SEND_F /
 *                  WAIT_SEND_B per send (_add_wait_send) itself.
 *   compute_comms  the full program, read by _PipelineScheduleRuntime._load_csv(format=
 *                  "compute_comms") as given. Its runtime posts a RECV_F / RECV_B and waits on it
 *                  in the F / B of that (stage, micro-batch) unless the neighbour stage is on the
 *                  same rank (then there must be none), posts a SEND after the compute that
 *                  produces it and retires it at its WAIT_SEND_*, and runs one stage's
 *                  data-parallel reduce between REDUCE_GRAD and WAIT_REDUCE_GRAD; an
 *                  OVERLAP_F_B runs its parts in order (unless the user registers a function
 *                  for it, as torchtitan does to overlap them on the GPU).
 * Older files read too: torch before the WAIT actions (no WAIT_*, REDUCE_GRAD alone), and
 * pptune's before the overlapped pair had a cell (a pair as its two cells F, B: read as two
 * actions, no pair).
 *
 * Mapping. A stage index is pipe 0's stage; micro-batches are our global ids. PyTorch's format
 * has one pipeline. Reading (pp_sched_read_csv) takes either form: row r is rank r; a stage's
 * rank is the row it appears on (as PyTorch's _validate_schedule infers it); S = the largest
 * stage index + 1, which must be a multiple of the rows (v = S / D chunks per rank); N = the
 * largest micro-batch + 1. Empty cells are skipped; REDUCE_GRAD, WAIT_REDUCE_GRAD, WAIT_SEND_F,
 * WAIT_SEND_B, UNSHARD and RESHARD are dropped (pptune synchronises data-parallel gradients after
 * the step's last backward, a pptune SEND completes by itself, and pptune has no FSDP); I and W
 * (split backward) are read as they are; an OVERLAP_F_B cell of one F and one B is one
 * overlapped pair (pp_action.overlap), any other compound cell an error. A file without any
 * SEND/RECV is compute_only and is lowered with pp_sched_lower_comms; otherwise its SEND/RECV
 * cells are kept, peers implied by the placement, except that each RECV moves to just before
 * the F / B that consumes it (before the pair, for a pair's): PyTorch's RECV only posts the
 * receive and that compute waits for it, while pptune's RECV is the wait (the rank blocks
 * there), so this keeps PyTorch's meaning (and its timing in the simulation) for files whose
 * lowering posts receives early. The CSV holds no schedule kind, group or layer split: the
 * result is kind "csv", group 0, one layer per stage. The reader checks structure (numbers in
 * range, one rank per stage) and leaves correctness to pp_sched_check.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "pp_sched.h"

/* Bounds that keep a malformed file from asking for absurd allocations. */
#define CSV_MAX_STAGES (1 << 16)
#define CSV_MAX_MB (1 << 24)

/* ---- Reading --------------------------------------------------------------------------------- */

/* One kept cell: an action of the IR, before the schedule exists. */
typedef struct {
    int rank, row_col; /* rank (row - 1) and 1-based column, for messages */
    int op, stage, mb;
    int overlap; /* the F of an overlapped pair: the next kept cell is its B */
} csv_cell;

typedef struct {
    const char *src;
    csv_cell *cells;
    int n, cap;
    int rows;
    int max_stage, max_mb, comms;
    int *stage_rank, *stage_col; /* [CSV_MAX_STAGES] first rank (and column) holding a stage */
} csv_reader;

static pp_status csv_error(const csv_reader *cr, int rank, int col, const char *tok,
                           const char *fmt, ...) PP_PRINTF(5, 6);

/* "FILE: row R (rank R-1), column C: "TOKEN": why" */
static pp_status csv_error(const csv_reader *cr, int rank, int col, const char *tok,
                           const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return PP_ERR(PP_ERR_PARSE, "%s: row %d (rank %d), column %d: \"%s\": %s", cr->src, rank + 1,
                  rank, col, tok, why);
}

/* PyTorch's _ComputationType values; longest first where one is a prefix of another. */
enum { T_DROP = -2 };
static const struct {
    const char *name;
    int op; /* pp_op_kind, or T_DROP (no IR action) */
    int mb; /* 1: a micro-batch follows, 0: none */
} types[] = {
    {"WAIT_REDUCE_GRAD", T_DROP, 0},
    {"WAIT_SEND_F", T_DROP, 1},
    {"WAIT_SEND_B", T_DROP, 1},
    {"REDUCE_GRAD", T_DROP, 0},
    {"UNSHARD", T_DROP, 0},
    {"RESHARD", T_DROP, 0},
    {"SEND_F", PP_OP_SEND_F, 1},
    {"RECV_F", PP_OP_RECV_F, 1},
    {"SEND_B", PP_OP_SEND_B, 1},
    {"RECV_B", PP_OP_RECV_B, 1},
    {"F", PP_OP_F, 1},
    {"B", PP_OP_B, 1},
    {"I", PP_OP_I, 1},
    {"W", PP_OP_W, 1},
};

/* Digits at *p (no sign) into *out, at most `max`; 0 if none or too large. */
static int scan_uint(const char **p, long max, int *out)
{
    return isdigit((unsigned char)**p) && pp_fmt_scan_int(p, 0, max, out);
}

#define CSV_EXPECTED                                                                               \
    "expected a PyTorch pipelining action STAGE TYPE [MICROBATCH] with TYPE one of F, B, I, W, "   \
    "SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, WAIT_SEND_B, REDUCE_GRAD, WAIT_REDUCE_GRAD, "    \
    "UNSHARD, RESHARD (e.g. 0F1, 1I0, 1SEND_F0, 2RECV_B3, 1WAIT_SEND_F0), or an overlapped pair "  \
    "(0F3;7B2)OVERLAP_F_B"

/* Parses one non-empty cell: *c filled, or c->op = T_DROP for a cell with no IR action. */
static pp_status parse_cell(csv_reader *cr, int rank, int col, const char *tok, csv_cell *c)
{
    const char *q = tok;
    int stage, mb = -1;
    if (!scan_uint(&q, CSV_MAX_STAGES - 1, &stage))
        return csv_error(cr, rank, col, tok, "%s", CSV_EXPECTED);
    size_t k, nt = sizeof types / sizeof types[0];
    for (k = 0; k < nt && strncmp(q, types[k].name, strlen(types[k].name)) != 0; k++)
        ;
    if (k == nt)
        return csv_error(cr, rank, col, tok, "%s", CSV_EXPECTED);
    q += strlen(types[k].name);
    if (types[k].mb && isalpha((unsigned char)*q))
        return csv_error(cr, rank, col, tok, "%s", CSV_EXPECTED);
    if (types[k].mb && !scan_uint(&q, CSV_MAX_MB - 1, &mb))
        return csv_error(cr, rank, col, tok, "%s needs a micro-batch index after it (e.g. %d%s0)",
                         types[k].name, stage, types[k].name);
    if (*q)
        return csv_error(cr, rank, col, tok, "%s", CSV_EXPECTED);
    *c = (csv_cell){.rank = rank, .row_col = col, .op = types[k].op, .stage = stage, .mb = mb};
    return PP_OK;
}

/* Records where a stage lives: the first rank it appears on; another rank is an error. */
static pp_status place(csv_reader *cr, const csv_cell *c, const char *tok)
{
    int *r = &cr->stage_rank[c->stage];
    if (*r < 0) {
        *r = c->rank;
        cr->stage_col[c->stage] = c->row_col;
    } else if (*r != c->rank) {
        return csv_error(cr, c->rank, c->row_col, tok,
                         "stage %d is already on rank %d (row %d, column %d); a stage lives on "
                         "one rank",
                         c->stage, *r, *r + 1, cr->stage_col[c->stage]);
    }
    if (c->stage > cr->max_stage)
        cr->max_stage = c->stage;
    return PP_OK;
}

static pp_status keep(csv_reader *cr, const csv_cell *c)
{
    size_t cap = pp_grow(&cr->cells, (size_t)cr->n, (size_t)cr->cap, sizeof *cr->cells, 256);
    if (!cap)
        return PP_ERR_NOMEM;
    cr->cap = (int)cap;
    cr->cells[cr->n++] = *c;
    if (c->mb > cr->max_mb)
        cr->max_mb = c->mb;
    cr->comms |= pp_op_is_comm(c->op);
    return PP_OK;
}

/* Trims blanks and one pair of double quotes (csv.writer's quoting) in place. */
static char *trim(char *t)
{
    while (*t == ' ' || *t == '\t')
        t++;
    size_t n = strlen(t);
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\t' || t[n - 1] == '\r'))
        t[--n] = '\0';
    if (n >= 2 && t[0] == '"' && t[n - 1] == '"') {
        t[n - 1] = '\0';
        t++;
    }
    return t;
}

/* The sub-actions of "(SUB;SUB)OVERLAP_F_B", which must be one F and then one B (the pair
 * ScheduleDualPipeV writes): kept as an overlapped pair. */
static pp_status read_pair(csv_reader *cr, int rank, int col, const char *tok, char *inner)
{
    csv_cell c[2];
    int n = 0;
    for (char *p = inner; p;) {
        char *semi = strchr(p, ';');
        if (semi)
            *semi = '\0';
        char *sub = trim(p);
        p = semi ? semi + 1 : NULL;
        if (n == 2)
            return csv_error(cr, rank, col, tok,
                             "an OVERLAP_F_B pair holds two actions, a forward and a full "
                             "backward (e.g. (0F3;7B2)OVERLAP_F_B), got a third, \"%s\"",
                             sub);
        PP_TRY(parse_cell(cr, rank, col, sub, &c[n]));
        if (c[n].op != (n == 0 ? PP_OP_F : PP_OP_B))
            return csv_error(cr, rank, col, tok,
                             "an OVERLAP_F_B pair is a forward and then a full backward (e.g. "
                             "(0F3;7B2)OVERLAP_F_B), got \"%s\" as its %s",
                             sub, n == 0 ? "first" : "second");
        PP_TRY(place(cr, &c[n], tok));
        n++;
    }
    if (n != 2)
        return csv_error(cr, rank, col, tok,
                         "an OVERLAP_F_B pair holds a forward and a full backward (e.g. "
                         "(0F3;7B2)OVERLAP_F_B), got %d action",
                         n);
    c[0].overlap = 1;
    PP_TRY(keep(cr, &c[0]));
    return keep(cr, &c[1]);
}

/* One cell: an action, or PyTorch's compound "(SUB;SUB)OVERLAP_F_B" (ScheduleDualPipeV's
 * forward of one micro-batch overlapped with the backward of another), read as one overlapped
 * pair. */
static pp_status read_cell(csv_reader *cr, int rank, int col, char *tok)
{
    static const char tail[] = ")OVERLAP_F_B";
    size_t n = strlen(tok), nt = sizeof tail - 1;
    if (tok[0] != '(' && !strstr(tok, "OVERLAP_F_B")) {
        csv_cell c;
        PP_TRY(parse_cell(cr, rank, col, tok, &c));
        PP_TRY(place(cr, &c, tok));
        return c.op != T_DROP ? keep(cr, &c) : PP_OK;
    }
    if (tok[0] != '(' || n <= nt + 1 || strcmp(tok + n - nt, tail) != 0)
        return csv_error(cr, rank, col, tok,
                         "expected an overlapped pair (SUB;SUB)OVERLAP_F_B of compute actions, "
                         "e.g. (0F3;7B2)OVERLAP_F_B");
    char inner[256];
    snprintf(inner, sizeof inner, "%.*s", (int)(n - nt - 1), tok + 1);
    return read_pair(cr, rank, col, tok, inner);
}

/* One line: rank `rank`'s cells. */
static pp_status read_row(csv_reader *cr, int rank, char *line)
{
    int col = 1;
    for (char *p = line; p; col++) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        char *tok = trim(p);
        p = comma ? comma + 1 : NULL;
        if (!*tok)
            continue; /* an idle step */
        PP_TRY(read_cell(cr, rank, col, tok));
    }
    return PP_OK;
}

/* Splits the text into lines (\n or \r\n; trailing blank lines ignored) and reads each. */
static pp_status read_rows(csv_reader *cr, char *buf)
{
    size_t len = strlen(buf);
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    if (!len)
        return PP_ERR(PP_ERR_PARSE, "%s: empty: a PyTorch pipelining CSV has one row per rank",
                      cr->src);
    for (char *line = buf; line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        PP_TRY(read_row(cr, cr->rows++, line));
        line = nl ? nl + 1 : NULL;
    }
    return PP_OK;
}

/* Key of the (stage, micro-batch, direction) a RECV brings and its F / B consumes. */
static size_t recv_key(const pp_sched *s, const pp_action *a)
{
    return ((size_t)a->stage * (size_t)s->microbatches + (size_t)a->mb) * 2 +
           (pp_op_dir(a->op) < 0);
}

/* A compute that consumes what a RECV brings (F, B, I). */
static int is_consumer(int op)
{
    return pp_op_recv_of(op) >= 0;
}

/* PyTorch's RECV_F / RECV_B posts the receive and the F / B of that (stage, micro-batch) waits
 * for it; pptune's RECV is the wait itself (the rank blocks there). So each RECV that comes
 * before its consumer moves to just before it (before its F, for the B of an overlapped pair,
 * which starts with both inputs there), PyTorch's wait point; everything else keeps its order,
 * and a RECV after its consumer (or without one) stays for pp_sched_check to report. */
static pp_status recvs_to_wait_points(pp_sched *s)
{
    size_t nk = (size_t)s->stages_per_pipe * (size_t)s->microbatches * 2;
    int *consumer = malloc(nk * sizeof *consumer);
    pp_action *held = malloc(nk * sizeof *held);
    uint8_t *holding = pp_calloc(nk, 1);
    pp_action *row = NULL;
    pp_status st = consumer && held && holding ? PP_OK : PP_ERR_NOMEM;
    for (int r = 0; r < s->ranks && st == PP_OK; r++) {
        int n = s->n_ops[r], k = 0;
        pp_action *ops = s->ops[r], *grown = pp_realloc_array(row, (size_t)n + 1, sizeof *row);
        if (!grown) {
            st = PP_ERR_NOMEM;
            break;
        }
        row = grown;
        for (int i = 0; i < n; i++)
            if (pp_op_is_recv(ops[i].op))
                consumer[recv_key(s, &ops[i])] = -1;
        for (int i = 0; i < n; i++) /* a pair's B waits where the pair starts, at its F */
            if (is_consumer(ops[i].op))
                consumer[recv_key(s, &ops[i])] = i > 0 && ops[i - 1].overlap ? i - 1 : i;
        for (int i = 0; i < n; i++) {
            const pp_action *a = &ops[i];
            if (pp_op_is_recv(a->op) && consumer[recv_key(s, a)] > i && !holding[recv_key(s, a)]) {
                held[recv_key(s, a)] = *a;
                holding[recv_key(s, a)] = 1;
                continue;
            }
            for (int j = i; j <= i + (a->overlap && i + 1 < n); j++)
                if (is_consumer(ops[j].op) && holding[recv_key(s, &ops[j])]) {
                    row[k++] = held[recv_key(s, &ops[j])];
                    holding[recv_key(s, &ops[j])] = 0;
                }
            row[k++] = *a;
        }
        if (k) /* k == n: every held RECV was emitted; an empty row has no ops array at all */
            memcpy(ops, row, (size_t)k * sizeof *row);
    }
    free(consumer);
    free(held);
    free(holding);
    free(row);
    return st;
}

/* The schedule the cells describe; see the file comment. */
static pp_status build(const csv_reader *cr, pp_sched **out)
{
    int D = cr->rows, S = cr->max_stage + 1;
    if (cr->max_mb < 0)
        return PP_ERR(PP_ERR_PARSE, "%s: no forward or backward in any row: not a schedule",
                      cr->src);
    for (int k = 0; k < S; k++)
        if (cr->stage_rank[k] < 0)
            return PP_ERR(PP_ERR_PARSE,
                          "%s: stage %d appears in no row, but stage %d does: stages are "
                          "numbered 0..S-1 with no gap",
                          cr->src, k, S - 1);
    if (S % D != 0)
        return PP_ERR(PP_ERR_PARSE,
                      "%s: %d stages over %d ranks (rows): pptune's schedules hold the same "
                      "number of stages on every rank, so the stages must be a multiple of "
                      "the rows",
                      cr->src, S, D);
    PP_TRY(pp_sched_create("csv", D, cr->max_mb + 1, S / D, 1, 0, 0, out));
    pp_sched *s = *out;
    for (int k = 0; k < S; k++)
        pp_sched_stage(s, 0, k)->rank = cr->stage_rank[k];
    pp_status st = PP_OK;
    for (int i = 0; i < cr->n && st == PP_OK; i++) {
        const csv_cell *c = &cr->cells[i];
        st = pp_sched_push(s, c->rank, (pp_op_kind)c->op, 0, c->stage, c->mb);
        pp_action *a = &s->ops[c->rank][s->n_ops[c->rank] - 1];
        if (st == PP_OK) {
            a->peer = pp_sched_implied_peer(s, a);
            a->overlap = (uint8_t)c->overlap;
        }
    }
    if (st == PP_OK && !cr->comms)
        st = pp_sched_lower_comms(s); /* compute_only: add the SEND/RECV as PyTorch would */
    else if (st == PP_OK)
        st = recvs_to_wait_points(s);
    if (st != PP_OK) {
        pp_sched_destroy(s);
        *out = NULL;
    }
    return st;
}

pp_status pp_sched_read_csv(const char *text, const char *source_name, pp_sched **out)
{
    *out = NULL;
    csv_reader cr = {.src = source_name ? source_name : "<csv>", .max_stage = -1, .max_mb = -1};
    char *buf = pp_strdup(text);
    cr.stage_rank = malloc(CSV_MAX_STAGES * sizeof *cr.stage_rank);
    cr.stage_col = pp_calloc(CSV_MAX_STAGES, sizeof *cr.stage_col);
    pp_status st = PP_ERR_NOMEM;
    if (buf && cr.stage_rank && cr.stage_col) {
        memset(cr.stage_rank, 0xff, CSV_MAX_STAGES * sizeof *cr.stage_rank); /* all -1 */
        st = read_rows(&cr, buf);
        if (st == PP_OK)
            st = build(&cr, out);
    }
    free(buf);
    free(cr.cells);
    free(cr.stage_rank);
    free(cr.stage_col);
    return st;
}
