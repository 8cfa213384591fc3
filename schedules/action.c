/* action.c — the action grammar (see pp_sched.h): the op names, the one token form with its
 * parser (an overlapped pair F...+B... included), and the spelled-out form messages use. One table
 * below says how each op is written; the text format (fmt_text.c), the traces (runtime/trace.c) and
 * every message naming an action go through these functions.
 *
 * Not here: PyTorch's CSV cells ("1F0", "0SEND_F3"), which are PyTorch's grammar (fmt_csv.c),
 * and whole-schedule parsing (lines, headers, placement: fmt_text.c).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "pp_sched.h"

/* Per op: its name (pp_op_name, JSON, messages) and its token prefix. */
static const struct {
    const char *name, *token;
} ops[PP_OP__COUNT] = {
    [PP_OP_F] = {"F", "F"},
    [PP_OP_B] = {"B", "B"},
    [PP_OP_SEND_F] = {"SEND_F", "SF"},
    [PP_OP_RECV_F] = {"RECV_F", "RF"},
    [PP_OP_SEND_B] = {"SEND_B", "SB"},
    [PP_OP_RECV_B] = {"RECV_B", "RB"},
    [PP_OP_REDUCE] = {"REDUCE", "AR"},
    [PP_OP_I] = {"I", "I"},
    [PP_OP_W] = {"W", "W"},
};

const char *pp_op_name(pp_op_kind k)
{
    return (unsigned)k < PP_OP__COUNT ? ops[k].name : "?";
}

int pp_op_parse(const char *name)
{
    for (int k = 0; k < PP_OP__COUNT; k++)
        if (strcmp(name, ops[k].name) == 0)
            return k;
    return -1;
}

static int has_peer(const pp_action *a)
{
    return pp_op_is_comm(a->op);
}

char *pp_action_format(const pp_sched *s, const pp_action *a, pp_action_style style, char *buf,
                       size_t n)
{
    if (!n)
        return buf;
    if (a->op >= PP_OP__COUNT) {
        snprintf(buf, n, "op%d?", (int)a->op);
        return buf;
    }
    if (style == PP_ACTION_WORDS) {
        if (a->op == PP_OP_REDUCE)
            snprintf(buf, n, "REDUCE #%d", (int)a->stage);
        else if (!has_peer(a))
            snprintf(buf, n, "%s pipe %d stage %d mb %d%s", ops[a->op].name, a->pipe, (int)a->stage,
                     (int)a->mb, a->overlap ? " overlapped with the next B" : "");
        else
            snprintf(buf, n, "%s pipe %d stage %d mb %d peer %d", ops[a->op].name, a->pipe,
                     (int)a->stage, (int)a->mb, (int)a->peer);
        return buf;
    }
    if (a->op == PP_OP_REDUCE) {
        snprintf(buf, n, "AR%d", (int)a->stage);
        return buf;
    }
    const char *pipe = s && s->n_pipes == 2 ? (a->pipe ? "u" : "d") : "";
    int len = snprintf(buf, n, "%s%s%d.%d%s", ops[a->op].token, pipe, (int)a->mb, (int)a->stage,
                       a->overlap ? "+" : "");
    if (has_peer(a) && (!s || a->peer != pp_sched_implied_peer(s, a)) && len >= 0 &&
        (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, "@%d", (int)a->peer);
    return buf;
}

char *pp_action_str(const pp_sched *s, const pp_action *a, char *buf, size_t n)
{
    return pp_action_format(s, a, PP_ACTION_WORDS, buf, n);
}

/* fmt.h */
int pp_fmt_scan_int(const char **p, long lo, long hi, int *out)
{
    const char *q = *p;
    if (!isdigit((unsigned char)*q) && !(*q == '-' && isdigit((unsigned char)q[1])))
        return 0;
    errno = 0;
    char *end;
    long v = strtol(q, &end, 10);
    if (errno || v < lo || v > hi)
        return 0;
    *out = (int)v;
    *p = end;
    return 1;
}

/* The op whose token prefix starts t, longest first ("SF" before "F"); -1 if none. */
static int token_op(const char *t, const char **rest)
{
    int best = -1;
    size_t best_len = 0;
    for (int k = 0; k < PP_OP__COUNT; k++) {
        size_t len = strlen(ops[k].token);
        if (len > best_len && strncmp(t, ops[k].token, len) == 0) {
            best = k;
            best_len = len;
        }
    }
    *rest = t + best_len;
    return best;
}

pp_status pp_action_parse(const pp_sched *s, const char *t, pp_action *out)
{
    const char *q;
    int op = token_op(t, &q);
    pp_action a = {.op = 0, .pipe = 0, .stage = 0, .mb = -1, .peer = -1};
    int ok = op >= 0;
    if (ok && op == PP_OP_REDUCE) {
        int id;
        ok = pp_fmt_scan_int(&q, 0, INT_MAX, &id) && !*q;
        a.stage = id;
    } else if (ok) {
        int p = *q == 'd' ? 0 : *q == 'u' ? 1 : -1;
        if (p >= 0)
            q++;
        else
            p = 0;
        int mb = 0, st = 0, peer = PP_ACTION_PEER_IMPLIED;
        ok = p < s->n_pipes && pp_fmt_scan_int(&q, 0, s->microbatches - 1, &mb) && *q++ == '.' &&
             pp_fmt_scan_int(&q, 0, s->stages_per_pipe - 1, &st);
        if (ok && *q == '@') {
            q++;
            ok = pp_op_is_comm(op) && pp_fmt_scan_int(&q, -1, s->ranks - 1, &peer);
        }
        if (ok && *q == '+' && op == PP_OP_F) { /* the F of an overlapped pair */
            q++;
            a.overlap = 1;
        }
        ok = ok && !*q;
        a.pipe = (uint8_t)p;
        a.stage = st;
        a.mb = mb;
        a.peer = pp_op_is_comm(op) ? peer : -1;
    }
    if (!ok)
        return PP_ERR(PP_ERR_PARSE,
                      "expected F, B, SF, RF, SB, RB, I or W with [pipe d|u] micro-batch 0..%d "
                      "'.' stage 0..%d (e.g. F%d.0, RB0.%d), ARk, or an overlapped pair F...+B... "
                      "(e.g. F0.0+B0.%d), got \"%s\"",
                      s->microbatches - 1, s->stages_per_pipe - 1, s->microbatches - 1,
                      s->stages_per_pipe - 1, s->stages_per_pipe - 1, t);
    a.op = (uint8_t)op;
    *out = a;
    return PP_OK;
}

pp_status pp_action_parse_pair(const pp_sched *s, const char *t, pp_action out[2], int *n)
{
    const char *plus = strchr(t, '+');
    *n = 1;
    if (!plus || !plus[1])
        return pp_action_parse(s, t, &out[0]);
    char head[64];
    int ok = (size_t)(plus - t) + 2 <= sizeof head;
    if (ok) {
        snprintf(head, sizeof head, "%.*s", (int)(plus - t) + 1, t); /* "F3.0+" */
        ok = pp_action_parse(s, head, &out[0]) == PP_OK &&
             pp_action_parse(s, plus + 1, &out[1]) == PP_OK && out[0].overlap &&
             out[1].op == PP_OP_B && !out[1].overlap;
    }
    if (!ok)
        return PP_ERR(PP_ERR_PARSE,
                      "an overlapped pair is a forward and a full backward joined by '+', "
                      "F...+B... (e.g. F0.0+B0.%d), got \"%s\"",
                      s->stages_per_pipe - 1, t);
    *n = 2;
    return PP_OK;
}
