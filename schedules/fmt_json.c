/* fmt_json.c — the JSON interchange form of a schedule (writer only).
 *
 * Written by hand with fprintf so that schedules/ needs no JSON library; the tuner reads it back
 * (tuner/sched_json.c, with jansson) for `pptune schedule --check`. Layout:
 *
 *   {
 *     "format": "pptune-schedule", "version": 1,
 *     "kind": "bitpipe", "ranks": D, "microbatches": N, "chunks": v, "group": G,
 *     "layers": L, "pipes": 1|2,
 *     "stages": [ [ {"rank": r, "layers": [begin, end]}, ... S per pipe ], ... one per pipe ],
 *     "mb_pipe": [0, 0, 1, 1, ...],                       pipe of every micro-batch
 *     "reduces": [ {"ranks": [0, 3], "stages": [[pipe, stage], ...]}, ... ],
 *     "makespan": ..., "bubble_over_ideal": ..., "bubble_over_total": ...,
 *     "busy": [per rank], "peak_activations": [per rank], "cross_rank_transfers": n,
 *     "peak_held_for_w": [per rank]                       only where the schedule has I / W
 *     "ops": [ [ {"op": "F", "pipe": 0, "stage": 0, "mb": 0},
 *                {"op": "SEND_F", "pipe": 0, "stage": 0, "mb": 0, "peer": 1},
 *                {"op": "F", ..., "overlap": true}       the F of an overlapped pair: the
 *                                                        next action is its B
 *                {"op": "REDUCE", "id": 0, "stages": [[0, 4], [1, 3]], "ranks": [0, 3]}, ... ],
 *              ... one array per rank ]
 *   }
 *
 * Everything is 0-based. Metrics come from the pp_sim_result the caller passes (NULL: no metric
 * fields are written); the reader ignores them and recomputes. Numbers are printed with the
 * fewest digits that read back to the same double.
 */
#include <stdlib.h>

#include "pp_sched.h"

static void json_string(const char *str, FILE *fp)
{
    fputc('"', fp);
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(fp, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(fp, "\\u%04x", *p);
        else
            fputc(*p, fp);
    }
    fputc('"', fp);
}

/* Shortest of %.15g / %.17g that reads back exactly (0.375, not 0.37500000000000000). */
static void json_number(double x, FILE *fp)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.15g", x);
    if (strtod(buf, NULL) != x)
        snprintf(buf, sizeof buf, "%.17g", x);
    fputs(buf, fp);
}

static void json_number_array(const double *x, int n, FILE *fp)
{
    fputc('[', fp);
    for (int i = 0; i < n; i++) {
        if (i)
            fputs(", ", fp);
        json_number(x[i], fp);
    }
    fputc(']', fp);
}

static void write_placement(const pp_sched *s, FILE *fp)
{
    fputs("  \"stages\": [", fp);
    for (int p = 0; p < s->n_pipes; p++) {
        fprintf(fp, "%s\n    [", p ? "," : "");
        for (int k = 0; k < s->stages_per_pipe; k++) {
            const pp_stage *g = pp_sched_stage(s, p, k);
            fprintf(fp, "%s{\"rank\": %d, \"layers\": [%d, %d]}", k ? ", " : "", g->rank,
                    g->layer_begin, g->layer_end);
        }
        fputc(']', fp);
    }
    fputs("\n  ],\n  \"mb_pipe\": [", fp);
    for (int m = 0; m < s->microbatches; m++)
        fprintf(fp, "%s%d", m ? ", " : "", s->mb_pipe[m]);
    fputs("],\n", fp);
}

static void write_reduce_body(const pp_reduce *rd, FILE *fp)
{
    fputs("\"stages\": [", fp);
    for (int i = 0; i < rd->n_stages; i++)
        fprintf(fp, "%s[%d, %d]", i ? ", " : "", rd->stages[i].pipe, rd->stages[i].stage);
    fputs("], \"ranks\": [", fp);
    for (int i = 0; i < rd->n_ranks; i++)
        fprintf(fp, "%s%d", i ? ", " : "", rd->ranks[i]);
    fputc(']', fp);
}

static void write_reduces(const pp_sched *s, FILE *fp)
{
    fputs("  \"reduces\": [", fp);
    for (int k = 0; k < s->n_reduces; k++) {
        fprintf(fp, "%s\n    {", k ? "," : "");
        write_reduce_body(&s->reduces[k], fp);
        fputc('}', fp);
    }
    fputs(s->n_reduces ? "\n  ],\n" : "],\n", fp);
}

static void write_metrics(const pp_sched *s, const pp_sim_result *sim, FILE *fp)
{
    fputs("  \"makespan\": ", fp);
    json_number(sim->makespan, fp);
    fputs(",\n  \"bubble_over_ideal\": ", fp);
    json_number(sim->bubble_over_ideal, fp);
    fputs(",\n  \"bubble_over_total\": ", fp);
    json_number(sim->bubble_over_total, fp);
    fputs(",\n  \"busy\": ", fp);
    json_number_array(sim->busy, s->ranks, fp);
    fputs(",\n  \"peak_activations\": ", fp);
    json_number_array(sim->peak_activations, s->ranks, fp);
    if (pp_sched_has_split_backward(s)) {
        fputs(",\n  \"peak_held_for_w\": ", fp);
        json_number_array(sim->peak_held_for_w, s->ranks, fp);
    }
    fprintf(fp, ",\n  \"cross_rank_transfers\": %ld,\n", sim->cross_rank_transfers);
}

static pp_status write_action(const pp_sched *s, int r, const pp_action *a, FILE *fp)
{
    if (a->op == PP_OP_REDUCE) {
        if (a->stage < 0 || a->stage >= s->n_reduces)
            return PP_ERR(PP_ERR_INVALID,
                          "rank %d: REDUCE %d, but the schedule has %d reduce descriptors", r,
                          (int)a->stage, s->n_reduces);
        fprintf(fp, "{\"op\": \"REDUCE\", \"id\": %d, ", (int)a->stage);
        write_reduce_body(&s->reduces[a->stage], fp);
        fputc('}', fp);
        return PP_OK;
    }
    fprintf(fp, "{\"op\": \"%s\", \"pipe\": %d, \"stage\": %d, \"mb\": %d",
            pp_op_name((pp_op_kind)a->op), a->pipe, (int)a->stage, (int)a->mb);
    if (pp_op_is_comm(a->op))
        fprintf(fp, ", \"peer\": %d", (int)a->peer);
    if (a->overlap)
        fputs(", \"overlap\": true", fp);
    fputc('}', fp);
    return PP_OK;
}

static pp_status write_ops(const pp_sched *s, FILE *fp)
{
    fputs("  \"ops\": [", fp);
    for (int r = 0; r < s->ranks; r++) {
        fprintf(fp, "%s\n    [", r ? "," : "");
        for (int i = 0; i < s->n_ops[r]; i++) {
            fputs(i ? ",\n     " : "", fp);
            PP_TRY(write_action(s, r, &s->ops[r][i], fp));
        }
        fputc(']', fp);
    }
    fputs("\n  ]\n", fp);
    return PP_OK;
}

pp_status pp_sched_write_json(const pp_sched *s, const pp_sim_result *sim, FILE *fp)
{
    fputs("{\n  \"format\": \"pptune-schedule\",\n  \"version\": 1,\n  \"kind\": ", fp);
    json_string(s->kind, fp);
    fprintf(fp,
            ",\n  \"ranks\": %d,\n  \"microbatches\": %d,\n  \"chunks\": %d,\n  \"group\": %d,\n"
            "  \"layers\": %d,\n  \"pipes\": %d,\n",
            s->ranks, s->microbatches, s->chunks, s->group, s->layers, s->n_pipes);
    write_placement(s, fp);
    write_reduces(s, fp);
    if (sim)
        write_metrics(s, sim, fp);
    PP_TRY(write_ops(s, fp));
    fputs("}\n", fp);
    if (ferror(fp))
        return PP_ERR(PP_ERR_IO, "writing the JSON form of the schedule failed");
    return PP_OK;
}
