/* trace.c — Chrome trace output (the JSON "traceEvents" format that Perfetto and
 * chrome://tracing open): one track (tid) per global rank named after its replica and pipeline
 * rank, one complete ("ph":"X") event per action with its pipe, stage and micro-batch in args,
 * one for the gradient sync and one for the optimizer, and a "steps" track with each step's
 * span and loss, and a flow arrow from every SEND to its RECV. Timestamps are microseconds
 * from the start of the run.
 *
 * Events are streamed to PATH.tmp.<pid> (pp_afile) and renamed on commit, so a reader never
 * sees a half-written trace. The trace reads the executor's schedule: commit it before the
 * executor is destroyed. Not here: counters (memory over time).
 */
#include <stdlib.h>

#include "executor.h"

struct pp_rt_trace {
    pp_afile af;
    const pp_rt_executor *ex;
    int n_events;
};

static void sep(pp_rt_trace *tr)
{
    fputs(tr->n_events++ ? ",\n" : "\n", tr->af.fp);
}

pp_status pp_rt_trace_open(const char *path, const pp_rt_executor *ex, pp_rt_trace **out)
{
    *out = NULL;
    pp_rt_trace *tr = pp_calloc(1, sizeof *tr);
    if (!tr)
        return PP_ERR_NOMEM;
    pp_status st = pp_afile_open(&tr->af, path);
    if (st != PP_OK) {
        free(tr);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    tr->ex = ex;
    FILE *fp = tr->af.fp;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", fp);
    sep(tr);
    fprintf(fp,
            "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"pprun %s "
            "D=%d N=%d dp=%d tp=%d\"}}",
            ex->sched->kind, ex->D, ex->N, ex->dp, ex->TP);
    for (int g = 0; g <= ex->G; g++) {
        sep(tr);
        if (g < ex->G)
            fprintf(fp,
                    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                    "\"args\":{\"name\":\"rank %d (replica %d, pipeline rank %d, tensor rank "
                    "%d)\"}}",
                    g, g, pp_rt_place_dp(&ex->place, g), ex_pp(ex, g),
                    pp_rt_place_tp(&ex->place, g));
        else
            fprintf(fp,
                    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                    "\"args\":{\"name\":\"steps\"}}",
                    g);
    }
    *out = tr;
    return PP_OK;
}

/* A flow arrow from a SEND to its RECV (Chrome trace flow events "s" / "f", bound to the
 * slices they sit in): both ends compute the same id from (step, replica, tensor rank,
 * hop). */
static void flow(pp_rt_trace *tr, int step, int g, const pp_action *a, double t0, pp_rt_span sp)
{
    const pp_rt_executor *ex = tr->ex;
    int send = pp_op_is_send(a->op);
    int fwd = pp_op_dir(a->op) > 0;
    int stage = send ? pp_action_peer_stage(a) : a->stage; /* the receiving stage */
    unsigned long long id =
        ((((unsigned long long)step * ex->dp * ex->TP + (unsigned long long)(g % ex->TP) +
            (unsigned long long)ex->TP * pp_rt_place_dp(&ex->place, g)) *
               ex->P + a->pipe) * ex->S + stage) *
            ex->N * 2 +
        (unsigned long long)a->mb * 2 + !fwd;
    sep(tr);
    fprintf(tr->af.fp,
            "{\"name\":\"%s%d\",\"cat\":\"hop\",\"ph\":\"%s\",%s\"id\":%llu,\"pid\":0,"
            "\"tid\":%d,\"ts\":%.3f}",
            fwd ? "F" : "B", (int)a->mb, send ? "s" : "f", send ? "" : "\"bp\":\"e\",", id, g,
            (t0 + 0.5 * (sp.start + sp.end)) * 1e6);
}

static void event(pp_rt_trace *tr, const char *name, const char *cat, int tid, double t0,
                  pp_rt_span sp, int step)
{
    sep(tr);
    fprintf(tr->af.fp,
            "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,"
            "\"dur\":%.3f,\"args\":{\"step\":%d}}",
            name, cat, tid, (t0 + sp.start) * 1e6, (sp.end - sp.start) * 1e6, step);
}

pp_status pp_rt_trace_add_step(pp_rt_trace *tr, int step, double t0, const pp_rt_step_result *r)
{
    const pp_rt_executor *ex = tr->ex;
    const pp_sched *s = ex->sched;
    FILE *fp = tr->af.fp;
    for (int g = 0; g < r->n_ranks; g++) {
        int rank = ex_pp(ex, g);
        for (int i = 0; i < s->n_ops[rank]; i++) {
            const pp_action *a = &s->ops[rank][i];
            pp_rt_span sp = r->spans[g][i];
            char name[64];
            sep(tr);
            fprintf(fp, "{\"name\":\"%s\",\"cat\":\"%s\"",
                    pp_action_format(s, a, PP_ACTION_TOKEN, name, sizeof name),
                    pp_op_name((pp_op_kind)a->op));
            fprintf(fp,
                    ",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                    "\"args\":{\"step\":%d,\"pipe\":%d,\"stage\":%d,\"mb\":%d,\"peer\":%d}}",
                    g, (t0 + sp.start) * 1e6, (sp.end - sp.start) * 1e6, step, a->pipe,
                    (int)a->stage, (int)a->mb, (int)a->peer);
            if (pp_op_is_comm(a->op))
                flow(tr, step, g, a, t0, sp);
        }
        event(tr, "grad sync", "sync", g, t0, r->sync[g], step);
        event(tr, "AdamW", "optim", g, t0, r->optim[g], step);
        if (ex->TP > 1) { /* the step's tensor-parallel collectives, inside its F and B spans */
            sep(tr);
            fprintf(fp,
                    "{\"name\":\"tp comm\",\"cat\":\"tp\",\"ph\":\"C\",\"pid\":0,\"tid\":%d,"
                    "\"ts\":%.3f,\"args\":{\"seconds\":%.9f,\"bytes\":%.0f}}",
                    g, (t0 + r->optim[g].end) * 1e6, r->tp_seconds[g], r->tp_bytes[g]);
        }
    }
    sep(tr);
    fprintf(fp,
            "{\"name\":\"step %d\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,"
            "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"loss\":%.6f,\"grad_norm\":%.6f}}",
            step, r->n_ranks, t0 * 1e6, r->seconds * 1e6, r->loss, r->grad_norm);
    if (ferror(fp))
        return PP_ERR(PP_ERR_IO, "%s: write failed", tr->af.path);
    return PP_OK;
}

pp_status pp_rt_trace_commit(pp_rt_trace *tr)
{
    fputs("\n]}\n", tr->af.fp);
    pp_status st = pp_afile_commit(&tr->af);
    free(tr);
    return st;
}

void pp_rt_trace_abort(pp_rt_trace *tr)
{
    if (!tr)
        return;
    pp_afile_abort(&tr->af);
    free(tr);
}
