/* summary.c — pprun's --json summary (jansson): the configuration, every step's loss, gradient
 * norm and time, the median step time after warm-up, tokens per second, each rank's peak
 * bytes by category as its backend counted them, the transport, and "param_checksum" (the
 * parameters after the last step, bit for bit, as 16 hex digits: equal across transports when
 * the arithmetic is the same); and without --json the same run in a few human lines
 * (pprun_write_summary: tokens/s, model TFLOP/s, every rank's peak memory). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt_place.h"
#include "pprun.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The first step pays for first-touch page faults and the optimizer state's allocation:
 * steps before it are warm-up when there are at least two. */
double pprun_median_step(const pprun_record *rec, int *warmup)
{
    int w = rec->n_steps >= 2 ? 1 : 0, n = rec->n_steps - w;
    *warmup = w;
    if (n <= 0)
        return 0;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return 0;
    for (int i = 0; i < n; i++)
        t[i] = rec->steps[w + i].seconds;
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return med;
}

static json_t *model_json(const pprun_opts *o, const pp_model_cfg *m)
{
    char block[256];
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s}", "name", o->model_name,
                     "layers", m->layers, "hidden", m->hidden, "heads", m->heads, "kv_heads",
                     pp_model_kv(m), "head_dim", pp_model_hd(m), "ffn", m->ffn, "vocab", m->vocab,
                     "max_seq", m->seq, "block", pp_model_describe(m, block, sizeof block));
}

static json_t *schedule_json(const pprun_opts *o, const pp_sched *s)
{
    json_t *layers = json_array(); /* per stage of a pipe (every pipe has the same split) */
    for (int k = 0; k < s->stages_per_pipe; k++)
        json_array_append_new(layers, json_integer(pp_sched_stage_layers(s, 0, k)));
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:o, s:i}", "kind", s->kind, "ranks",
                     s->ranks, "microbatches", s->microbatches, "chunks", s->chunks, "group",
                     s->group, "pipes", s->n_pipes, "stages_per_pipe", s->stages_per_pipe, "uneven",
                     o->cfg.uneven, "stage_layers", layers, "dp", o->cfg.d);
}

/* A rank's tensor-parallel communication over the run: its collectives' wall seconds (the
 * all-reduces, and with sequence parallelism the all-gathers and reduce-scatters) and the
 * bytes it contributed (zero without tensor parallelism). */
static json_t *tp_comm_json(const pprun_record *rec, int g)
{
    return json_pack("{s:f, s:f}", "seconds", rec->tp_seconds[g], "bytes", rec->tp_bytes[g]);
}

static json_t *ranks_json(const pprun_record *rec, int cp)
{
    cp = cp > 1 ? cp : 1;
    json_t *a = json_array();
    pp_rt_place pl = {.t = rec->tp, .p = rec->sched->ranks, .dp = 1};
    for (int g = 0; g < rec->n_ranks; g++) {
        json_t *peak = json_object();
        for (int c = 0; c < PP_MEM__COUNT; c++)
            json_object_set_new(peak, pp_mem_category_name((pp_mem_category)c),
                                json_integer((json_int_t)rec->mem[g].peak[c]));
        json_object_set_new(peak, "total", json_integer((json_int_t)rec->mem[g].peak_total));
        /* arena_bytes: the memory the step's buffers are carved from (the plan's placement),
         * held from the executor's creation; peak_bytes counts those buffers by category, so
         * the rank holds peak_bytes plus what the arena's placement leaves unused */
        json_array_append_new(
            /* the executor's replicas are dp x cp, cp rank innermost (pp_rt_exec_params.cp) */
            a, json_pack("{s:i, s:i, s:i, s:i, s:i, s:o, s:I, s:o}", "rank", g, "replica",
                         pp_rt_place_dp(&pl, g) / cp, "cp_rank", pp_rt_place_dp(&pl, g) % cp,
                         "pipeline_rank", pp_rt_place_pp(&pl, g),
                         "tensor_rank", pp_rt_place_tp(&pl, g), "peak_bytes", peak,
                         "arena_bytes", (json_int_t)rec->mem[g].reserved, "tp_comm",
                         tp_comm_json(rec, g)));
    }
    return a;
}

int pprun_write_json(const pprun_opts *o, const pprun_record *rec)
{
    json_t *steps = json_array();
    for (int i = 0; i < rec->n_steps; i++)
        json_array_append_new(steps,
                              json_pack("{s:i, s:f, s:f, s:f}", "step", i + 1, "loss",
                                        rec->steps[i].loss, "grad_norm", rec->steps[i].grad_norm,
                                        "seconds", rec->steps[i].seconds));
    int warmup;
    double med = pprun_median_step(rec, &warmup);
    int seq = o->seq ? o->seq : (rec->model.seq < 64 ? rec->model.seq : 64);
    double tokens = (double)o->cfg.d * o->cfg.N * o->cfg.b * seq;
    json_t *root = json_pack(
        "{s:o, s:o, s:i, s:i, s:i, s:I, s:f, s:f, s:f, s:s, s:o, s:i, s:f, s:f, s:f, s:o}", "model",
        model_json(o, &rec->model), "schedule", schedule_json(o, rec->sched), "micro_batch_size",
        o->cfg.b, "seq", seq, "steps", rec->n_steps, "seed", (json_int_t)o->seed, "lr", o->lr,
        "clip", o->clip, "weight_decay", o->weight_decay, "data", o->data ? o->data : "synthetic",
        "per_step", steps, "warmup_steps", warmup, "median_step_seconds", med, "tokens_per_step",
        tokens, "tokens_per_second", med > 0 ? tokens / med : 0.0, "ranks",
        ranks_json(rec, o->cfg.cp));
    char sum[24];
    snprintf(sum, sizeof sum, "%016llx", (unsigned long long)rec->param_checksum);
    if (root && (json_object_update_new(
                    root, json_pack("{s:s, s:i, s:i, s:i, s:s, s:s, s:i, s:b, s:s, s:i, s:s}",
                                    "transport", rec->transport ? rec->transport : "thread",
                                    "processes", rec->processes, "threads_per_rank", rec->threads,
                                    "kernel_threads_per_rank", rec->kernel_threads,
                                    "threads_from", rec->threads_from ? rec->threads_from : "",
                                    "param_checksum", sum, "tp", rec->tp, "sequence_parallel",
                                    o->cfg.sequence_parallel && rec->tp > 1, "recompute",
                                    pp_recompute_name(o->cfg.recompute), "recompute_layers",
                                    o->cfg.recompute_layers, "shard",
                                    pp_shard_name(pp_config_sharded(&o->cfg)
                                                      ? o->cfg.shard
                                                      : PP_SHARD_NONE))) != 0 ||
                 json_object_set_new(root, "cp", json_integer(o->cfg.cp > 1 ? o->cfg.cp : 1)) !=
                     0)) {
        json_decref(root);
        root = NULL;
    }
    if (!root) {
        fputs("pprun: cannot build the JSON summary\n", stderr);
        return 1;
    }
    int rc = json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 ? -1 : 1;
    fputc('\n', stdout);
    json_decref(root);
    return rc;
}

int pprun_write_summary(const pprun_opts *o, const pprun_record *rec, FILE *fp)
{
    int warmup;
    double med = pprun_median_step(rec, &warmup);
    int seq = o->seq ? o->seq : (rec->model.seq < 64 ? rec->model.seq : 64);
    double tokens = (double)o->cfg.d * o->cfg.N * o->cfg.b * seq;
    double flops = pp_model_step_flops(&rec->model, seq, tokens / seq);
    int devices = rec->n_ranks > 0 ? rec->n_ranks : 1;
    char tok[32], sec[16];
    char cp[24] = "", ep[24] = "";
    if (o->cfg.cp > 1)
        snprintf(cp, sizeof cp, " x cp %d", o->cfg.cp);
    if (o->cfg.ep > 1) /* carved out of the dp replicas */
        snprintf(ep, sizeof ep, " (ep %d)", o->cfg.ep);
    fprintf(fp, "pprun: %d steps of %s on %d ranks%s x dp %d%s (%s transport, %s backend, %s): "
                "final loss %.4f\n",
            rec->n_steps, rec->sched->kind, rec->sched->ranks, cp, o->cfg.d, ep,
            rec->transport ? rec->transport : "thread", pp_backend_row_of(o->backend)->name,
            o->precision == PP_PREC_BF16 ? "bf16" : "fp32",
            rec->n_steps ? rec->steps[rec->n_steps - 1].loss : 0.0);
    if (med > 0)
        fprintf(fp, "  median step %s s (%d warm-up step%s not counted): %s tokens/s, %.3g model "
                    "TFLOP/s in all, %.3g per rank (Narayanan's model FLOPs)\n",
                pp_fmt_seconds(med, sec, sizeof sec), warmup, warmup == 1 ? "" : "s", pp_fmt_grouped(tokens / med, tok, sizeof tok),
                flops / med / 1e12, flops / med / 1e12 / devices);
    fprintf(fp, "  peak memory per rank (as the backend counted it):");
    for (int g = 0; g < rec->n_ranks; g++) {
        char b[16];
        fprintf(fp, "%s rank %d %s", g ? "," : "", g,
                pp_fmt_bytes((double)rec->mem[g].peak_total, b, sizeof b));
    }
    fprintf(fp, "\n");
    return ferror(fp) ? 1 : -1;
}
