/* sched_json.c — reads the JSON form of a schedule (schedules/fmt_json.c describes it) back into
 * a pp_sched for `pptune schedule --check`.
 *
 * It checks the file's structure and nothing more: every field of the right type and in range,
 * so the schedule it returns can be handed to pp_sched_check, which decides whether the schedule
 * is correct. Metric fields are ignored. A REDUCE action names its descriptor by "id" (an index
 * into the top-level "reduces"); a hand-written file may instead give only the action's "stages"
 * and "ranks", and equal descriptors are shared. "peer" may be left out of SEND/RECV actions:
 * the placement implies it. It does not open files: the caller passes the text.
 */
#include "sched_json.h"

#include <stdlib.h>
#include <string.h>

#include "pp_json.h"

#define JS_MAX_RANKS 65536
#define JS_MAX_MB (1 << 24)
#define JS_MAX_STAGES (1 << 20)

typedef struct {
    pp_json_src js; /* the source's name; paths bare: ops[1][4].op */
    pp_sched *s;
} js_reader;

/* An integer in [lo, hi]; `def` when the value is absent and `required` is 0. */
static pp_status js_int(const js_reader *jr, const json_t *v, const char *path, long lo, long hi,
                        int required, int def, int *out)
{
    char want[64];
    if (!v && !required) {
        *out = def;
        return PP_OK;
    }
    snprintf(want, sizeof want, "an integer in %ld..%ld", lo, hi);
    return pp_json_int(&jr->js, v, path, NULL, lo, hi, want, out);
}

static pp_status js_array(const js_reader *jr, const json_t *v, const char *path, size_t n,
                          const char *what)
{
    if (!json_is_array(v) || (n && json_array_size(v) != n)) {
        char want[128];
        if (n)
            snprintf(want, sizeof want, "an array of %zu %s", n, what);
        else
            snprintf(want, sizeof want, "an array of %s", what);
        return pp_json_bad(&jr->js, path, want, v);
    }
    return PP_OK;
}

/* kind, ranks, microbatches, chunks, pipes, group, layers -> an empty schedule of that shape. */
static pp_status js_shape(js_reader *jr, const json_t *root)
{
    const json_t *kv = json_object_get(root, "kind");
    char want[64];
    snprintf(want, sizeof want, "a schedule name of 1..%zu characters", sizeof jr->s->kind - 1);
    if (kv && (!json_is_string(kv) || json_string_length(kv) == 0 ||
               json_string_length(kv) >= sizeof jr->s->kind))
        return pp_json_bad(&jr->js, "kind", want, kv);
    int D, N, v, P, G, L;
    PP_TRY(js_int(jr, json_object_get(root, "ranks"), "ranks", 1, JS_MAX_RANKS, 1, 0, &D));
    PP_TRY(js_int(jr, json_object_get(root, "microbatches"), "microbatches", 1, JS_MAX_MB, 1, 0,
                  &N));
    PP_TRY(js_int(jr, json_object_get(root, "chunks"), "chunks", 1, JS_MAX_STAGES, 0, 1, &v));
    PP_TRY(js_int(jr, json_object_get(root, "pipes"), "pipes", 1, 2, 0, 1, &P));
    PP_TRY(js_int(jr, json_object_get(root, "group"), "group", 0, JS_MAX_MB, 0, 0, &G));
    PP_TRY(js_int(jr, json_object_get(root, "layers"), "layers", 0, 1 << 30, 0, 0, &L));
    if ((long)v * D > JS_MAX_STAGES)
        return pp_json_fail(&jr->js, "chunks", "chunks x ranks = %ld stages is more than %d",
                            (long)v * D, JS_MAX_STAGES);
    if (L && L < v * D)
        return pp_json_fail(&jr->js, "layers", "%d layers cannot fill %d stages (chunks x ranks)",
                            L, v * D);
    /* layers = 0: one per stage, which always splits; the "stages" ranges then set the real ones */
    PP_TRY(pp_sched_create(kv ? json_string_value(kv) : "custom", D, N, v, P, 0, 0, &jr->s));
    jr->s->group = G;
    if (L)
        jr->s->layers = L;
    return PP_OK;
}

/* "stages": one array per pipe of {"rank": r, "layers": [begin, end]}. */
static pp_status js_stages(js_reader *jr, const json_t *root)
{
    pp_sched *s = jr->s;
    const json_t *pipes = json_object_get(root, "stages");
    char path[96];
    PP_TRY(js_array(jr, pipes, "stages", (size_t)s->n_pipes, "arrays (one per pipe)"));
    for (int p = 0; p < s->n_pipes; p++) {
        const json_t *arr = json_array_get(pipes, (size_t)p);
        snprintf(path, sizeof path, "stages[%d]", p);
        PP_TRY(js_array(jr, arr, path, (size_t)s->stages_per_pipe, "stages (chunks x ranks)"));
        for (int k = 0; k < s->stages_per_pipe; k++) {
            const json_t *st = json_array_get(arr, (size_t)k);
            pp_stage *g = pp_sched_stage(s, p, k);
            snprintf(path, sizeof path, "stages[%d][%d].rank", p, k);
            PP_TRY(js_int(jr, json_object_get(st, "rank"), path, -1, s->ranks - 1, 1, 0, &g->rank));
            const json_t *lr = json_object_get(st, "layers");
            snprintf(path, sizeof path, "stages[%d][%d].layers", p, k);
            PP_TRY(js_array(jr, lr, path, 2, "layer indices [begin, end)"));
            PP_TRY(js_int(jr, json_array_get(lr, 0), path, 0, s->layers - 1, 1, 0, &g->layer_begin));
            PP_TRY(js_int(jr, json_array_get(lr, 1), path, g->layer_begin + 1, s->layers, 1, 0,
                          &g->layer_end));
        }
    }
    const json_t *mp = json_object_get(root, "mb_pipe");
    if (!mp && s->n_pipes == 1)
        return PP_OK;
    PP_TRY(js_array(jr, mp, "mb_pipe", (size_t)s->microbatches, "pipe numbers (one per mb)"));
    for (int m = 0; m < s->microbatches; m++) {
        int p;
        snprintf(path, sizeof path, "mb_pipe[%d]", m);
        PP_TRY(js_int(jr, json_array_get(mp, (size_t)m), path, 0, s->n_pipes - 1, 1, 0, &p));
        s->mb_pipe[m] = (uint8_t)p;
    }
    return PP_OK;
}

/* {"stages": [[pipe, stage], ...], "ranks": [...]} at `path` -> a descriptor (not yet added). */
static pp_status js_reduce_body(const js_reader *jr, const json_t *o, const char *path,
                                pp_reduce *rd)
{
    const pp_sched *s = jr->s;
    char p2[128];
    const json_t *st = json_object_get(o, "stages"), *rk = json_object_get(o, "ranks");
    memset(rd, 0, sizeof *rd);
    snprintf(p2, sizeof p2, "%s.stages", path);
    PP_TRY(js_array(jr, st, p2, 0, "[pipe, stage] pairs"));
    if (json_array_size(st) < 1 || json_array_size(st) > PP_REDUCE_MAX_STAGES)
        return pp_json_fail(&jr->js, p2, "expected 1..%d [pipe, stage] pairs, got %zu",
                            PP_REDUCE_MAX_STAGES, json_array_size(st));
    rd->n_stages = (int)json_array_size(st);
    for (int i = 0; i < rd->n_stages; i++) {
        const json_t *pr = json_array_get(st, (size_t)i);
        snprintf(p2, sizeof p2, "%s.stages[%d]", path, i);
        PP_TRY(js_array(jr, pr, p2, 2, "numbers [pipe, stage]"));
        PP_TRY(js_int(jr, json_array_get(pr, 0), p2, 0, s->n_pipes - 1, 1, 0,
                      &rd->stages[i].pipe));
        PP_TRY(js_int(jr, json_array_get(pr, 1), p2, 0, s->stages_per_pipe - 1, 1, 0,
                      &rd->stages[i].stage));
    }
    snprintf(p2, sizeof p2, "%s.ranks", path);
    PP_TRY(js_array(jr, rk, p2, 0, "ranks"));
    if (json_array_size(rk) < 1 || json_array_size(rk) > PP_REDUCE_MAX_RANKS)
        return pp_json_fail(&jr->js, p2, "expected 1..%d ranks, got %zu", PP_REDUCE_MAX_RANKS,
                            json_array_size(rk));
    rd->n_ranks = (int)json_array_size(rk);
    for (int i = 0; i < rd->n_ranks; i++) {
        snprintf(p2, sizeof p2, "%s.ranks[%d]", path, i);
        PP_TRY(js_int(jr, json_array_get(rk, (size_t)i), p2, 0, s->ranks - 1, 1, 0,
                      &rd->ranks[i]));
    }
    return PP_OK;
}

static pp_status js_reduces(js_reader *jr, const json_t *root)
{
    const json_t *arr = json_object_get(root, "reduces");
    if (!arr)
        return PP_OK;
    PP_TRY(js_array(jr, arr, "reduces", 0, "reduce descriptors"));
    char path[64];
    for (size_t k = 0; k < json_array_size(arr); k++) {
        pp_reduce rd;
        snprintf(path, sizeof path, "reduces[%zu]", k);
        PP_TRY(js_reduce_body(jr, json_array_get(arr, k), path, &rd));
        PP_TRY(pp_sched_add_reduce(jr->s, rd.ranks, rd.n_ranks, rd.stages, rd.n_stages, NULL));
    }
    return PP_OK;
}

/* A REDUCE action: its descriptor id, by "id" or by finding/adding its stages and ranks. */
static pp_status js_reduce_action(js_reader *jr, const json_t *o, const char *path, int *id)
{
    pp_sched *s = jr->s;
    const json_t *iv = json_object_get(o, "id");
    char p2[128];
    if (iv) {
        snprintf(p2, sizeof p2, "%s.id", path);
        if (s->n_reduces == 0)
            return pp_json_fail(&jr->js, p2,
                                "names a reduce descriptor, but \"reduces\" defines none");
        return js_int(jr, iv, p2, 0, s->n_reduces - 1, 1, 0, id);
    }
    pp_reduce rd;
    PP_TRY(js_reduce_body(jr, o, path, &rd));
    /* pp_sched_add_reduce sorts ranks: compare in that form */
    for (int i = 1; i < rd.n_ranks; i++)
        for (int j = i; j > 0 && rd.ranks[j - 1] > rd.ranks[j]; j--) {
            int t = rd.ranks[j];
            rd.ranks[j] = rd.ranks[j - 1];
            rd.ranks[j - 1] = t;
        }
    /* Descriptors are zeroed before filling (here and in pp_sched_add_reduce), so equal
     * descriptors are equal bytes. */
    for (int k = 0; k < s->n_reduces; k++)
        if (memcmp(&s->reduces[k], &rd, sizeof rd) == 0) {
            *id = k;
            return PP_OK;
        }
    return pp_sched_add_reduce(s, rd.ranks, rd.n_ranks, rd.stages, rd.n_stages, id);
}

static pp_status js_action(js_reader *jr, int r, int i, const json_t *o)
{
    pp_sched *s = jr->s;
    char path[64], p2[96];
    snprintf(path, sizeof path, "ops[%d][%d]", r, i);
    if (!json_is_object(o))
        return pp_json_bad(&jr->js, path, "an action object {\"op\": ..., ...}", o);
    const json_t *ov = json_object_get(o, "op");
    int op = json_is_string(ov) ? pp_op_parse(json_string_value(ov)) : -1;
    snprintf(p2, sizeof p2, "%s.op", path);
    if (op < 0)
        return pp_json_bad(&jr->js, p2,
                           "one of F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, REDUCE", ov);
    if (op == PP_OP_REDUCE) {
        int id;
        PP_TRY(js_reduce_action(jr, o, path, &id));
        return pp_sched_push(s, r, PP_OP_REDUCE, 0, id, -1);
    }
    int pipe, stage, mb, peer;
    snprintf(p2, sizeof p2, "%s.pipe", path);
    PP_TRY(js_int(jr, json_object_get(o, "pipe"), p2, 0, s->n_pipes - 1, 0, 0, &pipe));
    snprintf(p2, sizeof p2, "%s.stage", path);
    PP_TRY(js_int(jr, json_object_get(o, "stage"), p2, 0, s->stages_per_pipe - 1, 1, 0, &stage));
    snprintf(p2, sizeof p2, "%s.mb", path);
    PP_TRY(js_int(jr, json_object_get(o, "mb"), p2, 0, s->microbatches - 1, 1, 0, &mb));
    PP_TRY(pp_sched_push(s, r, (pp_op_kind)op, pipe, stage, mb));
    pp_action *a = &s->ops[r][s->n_ops[r] - 1];
    snprintf(p2, sizeof p2, "%s.peer", path);
    PP_TRY(js_int(jr, json_object_get(o, "peer"), p2, -1, s->ranks - 1, 0,
                  pp_sched_implied_peer(s, a), &peer));
    a->peer = peer;
    const json_t *olap = json_object_get(o, "overlap"); /* the F of an overlapped pair */
    snprintf(p2, sizeof p2, "%s.overlap", path);
    if (olap && !json_is_boolean(olap))
        return pp_json_bad(&jr->js, p2, "true or false", olap);
    a->overlap = json_is_true(olap);
    return PP_OK;
}

static pp_status js_ops(js_reader *jr, const json_t *root)
{
    pp_sched *s = jr->s;
    const json_t *ops = json_object_get(root, "ops");
    char path[64];
    PP_TRY(js_array(jr, ops, "ops", (size_t)s->ranks, "arrays of actions (one per rank)"));
    for (int r = 0; r < s->ranks; r++) {
        const json_t *arr = json_array_get(ops, (size_t)r);
        snprintf(path, sizeof path, "ops[%d]", r);
        PP_TRY(js_array(jr, arr, path, 0, "actions"));
        for (size_t i = 0; i < json_array_size(arr); i++)
            PP_TRY(js_action(jr, r, (int)i, json_array_get(arr, i)));
    }
    return PP_OK;
}

static pp_status js_read(js_reader *jr, const json_t *root)
{
    char got[64];
    if (!json_is_object(root))
        return pp_err_set(PP_ERR_PARSE, __FILE__, __LINE__,
                          "%s: expected a JSON object (a schedule), got %s", jr->js.file,
                          pp_json_show(root, got, sizeof got));
    PP_TRY(js_shape(jr, root));
    PP_TRY(js_stages(jr, root));
    PP_TRY(js_reduces(jr, root));
    PP_TRY(js_ops(jr, root));
    return PP_OK;
}

pp_status pp_sched_read_json(const char *text, const char *source_name, pp_sched **out)
{
    *out = NULL;
    js_reader jr = {.js = {.file = source_name ? source_name : "<json>", .bare_paths = 1}};
    json_t *root;
    PP_TRY(pp_json_load(text, strlen(text), jr.js.file, 0, &root));
    pp_status st = js_read(&jr, root);
    json_decref(root);
    if (st != PP_OK) {
        pp_sched_destroy(jr.s);
        return st;
    }
    *out = jr.s;
    return PP_OK;
}
