/* main.c — pprun: train a model with a pipeline schedule on the CPU backend, every rank a
 * thread (the in-process transport) or, under mpirun / srun, a process (the MPI transport,
 * launch.c), and report loss, step times and per-rank memory; optionally a JSON summary and a
 * Chrome trace. The tuner runs it for its trials. Under MPI every process trains its rank and
 * rank 0 reports: progress, the JSON (with every rank's memory) and the trace.
 *
 * Exit codes: 0 done, 1 the run failed, 2 bad options or input (unknown model or schedule, a
 * schedule that does not fit the model, a sequence longer than the model allows, an
 * unreadable data file, a bad launch): one line on stderr saying what was wrong (under MPI
 * from rank 0 for input errors, which every process shares, else from the failing rank).
 * --profile (profile.c) takes the configuration from a pptune profile; --save-every and
 * --resume (resume.c) write and restore checkpoints.
 * --backend cuda gives every rank a CUDA backend (--precision fp32 | bf16); under MPI the
 * ranks then talk over NCCL (bootstrapped over the MPI transport), each process on the device
 * of its local rank. Without CUDA or without a device: one line, exit 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pprun.h"

/* This process's rank under MPI (0 with threads): input errors are printed by rank 0 only. */
static int g_rank;

/* Input errors (2) versus failures of the run (1). */
static int fail(pp_status st, const char *context)
{
    int input = st == PP_ERR_INVALID || st == PP_ERR_NOTFOUND || st == PP_ERR_PARSE ||
                st == PP_ERR_IO || st == PP_ERR_CHECK || st == PP_ERR_DEADLOCK ||
                st == PP_ERR_UNSUPPORTED;
    if (input && g_rank == 0)
        fprintf(stderr, "pprun: %s%s\n", context, pp_err_text());
    else if (!input && g_rank == 0)
        fprintf(stderr, "pprun: %s%s\n", context, pp_err_msg());
    else if (!input)
        fprintf(stderr, "pprun: rank %d: %s%s\n", g_rank, context, pp_err_msg());
    return input ? 2 : 1;
}

/* A writer's failure (the trace): exit 1 as every other writer's, where a file that cannot be
 * read (PP_ERR_IO in fail) is bad input. */
static int fail_write(pp_status st, const char *context)
{
    int rc = fail(st, context);
    return st == PP_ERR_IO ? 1 : rc;
}

typedef struct {
    pp_transport *tp;   /* NULL: ranks are threads */
    pp_transport *nccl; /* --backend cuda under MPI: the ranks' transport (tp boots it) */
    pp_sched *sched;
    pp_rt_data *data;
    pp_rt_executor *ex;
    pp_rt_trace *trace;
    int32_t *batch;
    pprun_record rec;
    int agreed; /* train's exit code is every process's (no job abort needed) */
} run_state;

static void cleanup(run_state *s)
{
    pp_rt_trace_abort(s->trace);
    pp_rt_executor_destroy(s->ex);
    pp_transport_destroy(s->nccl); /* before tp, which it borrowed */
    pp_rt_data_destroy(s->data);
    pp_sched_destroy(s->sched);
    pp_transport_destroy(s->tp); /* after the executor: it finalises MPI */
    free(s->batch);
    free(s->rec.steps);
    free(s->rec.mem);
    free(s->rec.tp_seconds);
    free(s->rec.tp_bytes);
}

/* --load-weights into every stage of this process (-1: done or not asked; else the exit
 * code). Under MPI each process reads the file for its own stages. */
static int load_weights(const pprun_opts *o, run_state *s)
{
    if (!o->load_weights)
        return -1;
    int skipped = 0;
    pp_status st = pp_rt_weights_load(s->ex, o->load_weights, o->layers > 0, &skipped);
    if (st != PP_OK)
        return fail(st, "--load-weights: ");
    if (!o->quiet && g_rank == 0)
        fprintf(stderr, "pprun: loaded %s%s\n", o->load_weights,
                skipped ? " (its blocks past --layers skipped)" : "");
    return -1;
}

/* Ranks as threads on the CPU: the memory plan of every rank (pp_rt_plan.h, what the backends
 * will count) against this machine's memory, so that a configuration sized for a GPU cluster
 * (a gpt-13b profile of 256 ranks) is refused in one line instead of swapping the machine to
 * a halt. -1 to go on, 2 when it cannot fit, the plan's error otherwise. */
static int fits_this_machine(const pp_rt_exec_params *ep)
{
    if (ep->transport || pp_backend_row_of(ep->backend)->device_memory)
        return -1; /* a process per rank, or device memory: the backend finds out */
    pp_rt_plan_params pp = {.model = ep->model, .sched = ep->sched, .micro_batch = ep->micro_batch,
                            .seq = ep->seq, .dp = ep->dp, .backend = ep->backend,
                            .tp = ep->tp, .sequence_parallel = ep->sequence_parallel,
                            .recompute = ep->recompute,
                            .recompute_layers = ep->recompute_layers,
                            .shard = ep->shard,
                            .cp = ep->cp,
                            .ep = ep->ep};
    int D = ep->sched->ranks;
    pp_rt_plan_rank *plan = calloc((size_t)D, sizeof *plan);
    if (!plan)
        return 1;
    int cp = ep->cp > 1 ? ep->cp : 1, ranks = D * ep->dp * cp * (ep->tp > 1 ? ep->tp : 1);
    pp.dp *= cp; /* the plan counts every cp rank as a replica (pp_rt_plan_params.cp) */
    pp_status st = pp_rt_plan_compute(&pp, plan);
    double need = 0;
    for (int r = 0; st == PP_OK && r < D; r++)
        need += (double)plan[r].peak_total;
    free(plan);
    if (st != PP_OK)
        return fail(st, "");
    need *= (double)ranks / D;
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (have > 0 && need > have) {
        fprintf(stderr,
                "pprun: this configuration needs %.1f GiB for its %d ranks (the runtime's memory "
                "plan), this machine has %.1f GiB\n",
                need / (1 << 30), ranks, have / (1 << 30));
        return 2;
    }
    return -1;
}

/* The model: --model-config's file, the profile's shape, or the preset --model names; then
 * --layers, and the runtime's check that it computes the block. */
static int model_of(const pprun_opts *o, pp_model_cfg *m)
{
    pp_status st;
    if (o->model_config) {
        pp_model_hf_pos pos;
        if ((st = pp_model_load_hf(o->model_config, m, &pos)) != PP_OK)
            return fail(st, "--model-config: ");
    } else if (o->has_profile_model) {
        *m = o->profile_model;
    } else if ((st = pp_model_preset(o->model_name, m)) != PP_OK) {
        return fail(st, "");
    }
    if (o->layers)
        m->layers = o->layers;
    if ((st = pp_model_check_runnable(m)) != PP_OK)
        return fail(st, o->model_config ? "--model-config: " : "");
    return -1;
}

static int setup(const pprun_opts *o, run_state *s)
{
    pp_model_cfg *m = &s->rec.model;
    int rc = model_of(o, m);
    if (rc >= 0)
        return rc;
    pp_status st;
    int seq = o->seq ? o->seq : (m->seq < 64 ? m->seq : 64);
    if (seq > m->seq) {
        if (g_rank == 0)
            fprintf(stderr, "pprun: --seq %d is longer than model %s allows (at most %d)\n", seq,
                    o->model_name, m->seq);
        return 2;
    }
    pp_sched_params sp;
    pp_config_sched_params(&o->cfg, m->layers, &sp);
    if ((st = pp_sched_generate(o->cfg.schedule, &sp, &s->sched)) != PP_OK) {
        char ctx[160];
        snprintf(ctx, sizeof ctx, "--schedule %s, --ranks %d, model %s (%d layers): ", o->cfg.schedule,
                 o->cfg.p, o->model_name, m->layers);
        return fail(st, pp_sched_find(o->cfg.schedule) ? ctx : "");
    }
    if (o->data)
        st = pp_rt_data_open(o->data, m->vocab, o->seed, o->shuffle, &s->data);
    else if (o->shuffle)
        st = PP_ERR(PP_ERR_INVALID, "--shuffle needs --data with a Megatron dataset");
    else
        st = pp_rt_data_synthetic(m->vocab, o->seed, &s->data);
    if (st != PP_OK)
        return fail(st, "--data: ");
    if (!o->quiet && g_rank == 0 && o->data) {
        char what[512];
        pp_rt_data_describe(s->data, what, sizeof what);
        fprintf(stderr, "pprun: data: %s\n", what);
    }
    if (pp_rt_data_vocab(s->data) > m->vocab) {
        if (g_rank == 0)
            fprintf(stderr,
                    "pprun: byte-level data needs a vocabulary of at least 256; model %s has %d\n",
                    o->model_name, m->vocab);
        return 2;
    }
    int device = 0;
    const pp_backend_row *be = pp_backend_row_of(o->backend);
    char be_prefix[48]; /* "--backend cuda: " before a device backend's failures */
    snprintf(be_prefix, sizeof be_prefix, "--backend %s: ", be->name);
    if (be->device_collectives && s->tp) {
        /* one process per GPU: the device of this process's local rank, NCCL between them */
        pp_launch_info li;
        if ((st = pp_launch_detect(&li)) != PP_OK ||
            (st = pp_launch_local_rank(&li, &device)) != PP_OK)
            return fail(st, be_prefix);
        if ((st = pp_transport_nccl_create(s->tp, device, &s->nccl)) != PP_OK)
            return fail(st, be_prefix);
        pp_transport_set_watchdog(s->nccl, o->watchdog_s); /* a stalled peer ends the job */
    }
    pp_rt_exec_params ep = {
        .model = m,
        .backend = o->backend,
        .precision = o->precision,
        .device = device,
        .sched = s->sched,
        .micro_batch = o->cfg.b,
        .seq = seq,
        .dp = o->cfg.d,
        .tp = o->cfg.t,
        .cp = o->cfg.cp,
        .ep = o->cfg.ep,
        .sequence_parallel = o->cfg.sequence_parallel,
        .recompute = (int)o->cfg.recompute, /* pp_recompute's values are PP_RT_RC_*'s */
        .recompute_layers = o->cfg.recompute_layers,
        .shard = (int)o->cfg.shard, /* pp_shard's values are PP_RT_SHARD_*'s */
        .seed = o->seed,
        .clip = (float)o->clip,
        .transport = s->nccl ? s->nccl : s->tp,
        .adamw = {.lr = (float)o->lr,
                  .beta1 = 0.9f,
                  .beta2 = 0.95f,
                  .eps = 1e-8f,
                  .weight_decay = (float)o->weight_decay},
    };
    rc = fits_this_machine(&ep);
    if (rc >= 0)
        return rc;
    if ((st = pp_rt_executor_create(&ep, &s->ex)) != PP_OK)
        return fail(st, be->device_memory && st == PP_ERR_UNSUPPORTED ? be_prefix : "");
    if ((rc = load_weights(o, s)) >= 0)
        return rc;
    if (o->trace && g_rank == 0 && (st = pp_rt_trace_open(o->trace, s->ex, &s->trace)) != PP_OK)
        return fail(st, "--trace: ");
    size_t rows = (size_t)pp_rt_executor_batch_rows(s->ex);
    s->batch = calloc(rows * ((size_t)seq + 1), sizeof *s->batch);
    s->rec.steps = calloc((size_t)o->steps, sizeof *s->rec.steps);
    s->rec.n_ranks = pp_rt_executor_ranks(s->ex);
    s->rec.mem = calloc((size_t)s->rec.n_ranks, sizeof *s->rec.mem);
    s->rec.tp_seconds = calloc((size_t)s->rec.n_ranks, sizeof *s->rec.tp_seconds);
    s->rec.tp_bytes = calloc((size_t)s->rec.n_ranks, sizeof *s->rec.tp_bytes);
    if (!s->batch || !s->rec.steps || !s->rec.mem || !s->rec.tp_seconds || !s->rec.tp_bytes) {
        fputs("pprun: out of host memory for the batch\n", stderr);
        return 1;
    }
    s->rec.sched = pp_rt_executor_sched(s->ex);
    s->rec.tp = pp_rt_executor_tp(s->ex);
    s->rec.transport = s->nccl ? pp_transport_name(s->nccl)
                       : s->tp ? pp_transport_name(s->tp)
                               : "thread";
    s->rec.processes = s->tp ? pp_transport_ranks(s->tp) : 1;
    return -1;
}

static int train(const pprun_opts *o, run_state *s, int seq)
{
    double t_run = pp_now();
    int rows = pp_rt_executor_batch_rows(s->ex);
    int first = 0, rc = pprun_resume(o, s->ex, s->data, s->batch, seq, &s->rec, &first, s->tp,
                                      g_rank);
    if (rc >= 0) {
        s->agreed = 1; /* every process stops here with rc */
        return rc;
    }
    for (int i = first; i < o->steps; i++) {
        pp_status st = pp_rt_data_next(s->data, rows, seq, s->batch);
        if (st != PP_OK)
            return fail(st, "");
        double t0 = pp_now() - t_run;
        pp_rt_step_result r;
        if (pp_rt_executor_step(s->ex, s->batch, 1, &r) != PP_OK) {
            if (s->tp)
                fprintf(stderr, "pprun: rank %d: step %d failed: %s\n", g_rank, i + 1,
                        pp_err_msg());
            else
                fprintf(stderr, "pprun: step %d failed: %s\n", i + 1, pp_err_msg());
            return 1;
        }
        s->rec.steps[i] = (pprun_step){r.loss, r.grad_norm, r.seconds};
        s->rec.n_steps = i + 1;
        for (int g = 0; g < r.n_ranks; g++) {
            s->rec.tp_seconds[g] += r.tp_seconds[g];
            s->rec.tp_bytes[g] += r.tp_bytes[g];
        }
        if (!o->quiet && g_rank == 0)
            fprintf(stderr, "pprun: step %d/%d  loss %.4f  grad-norm %.3f  %.2f ms\n", i + 1,
                    o->steps, r.loss, r.grad_norm, r.seconds * 1e3);
        if (s->trace && (st = pp_rt_trace_add_step(s->trace, i + 1, t0, &r)) != PP_OK)
            return fail_write(st, "--trace: ");
        if ((rc = pprun_save_if_due(o, s->ex, &s->rec, i + 1)) >= 0)
            return rc;
    }
    if (!o->quiet && g_rank == 0 && s->rec.threads)
        fprintf(stderr, "pprun: %d BLAS thread%s per rank (%s), %d kernel thread%s\n",
                s->rec.threads, s->rec.threads == 1 ? "" : "s", s->rec.threads_from,
                s->rec.kernel_threads, s->rec.kernel_threads == 1 ? "" : "s");
    pp_status st; /* --save-weights: every process takes part, rank 0 writes */
    if (o->save_weights && (st = pp_rt_weights_save(s->ex, o->save_weights, PP_ST_F32)) != PP_OK)
        return fail_write(st, "--save-weights: ");
    if (o->save_weights && !o->quiet && g_rank == 0)
        fprintf(stderr, "pprun: wrote %s\n", o->save_weights);
    /* both gather on rank 0 under MPI: every process takes part */
    st = pp_rt_executor_mem_stats(s->ex, s->rec.mem);
    if (st == PP_OK)
        st = pp_rt_executor_param_checksum(s->ex, &s->rec.param_checksum);
    return st == PP_OK ? -1 : fail(st, "");
}

int main(int argc, char **argv)
{
    pprun_opts o;
    int rc = pprun_parse(argc, argv, &o);
    if (rc < 0)
        rc = pprun_apply_profile(&o, argc, argv);
    if (rc < 0 && o.model_config)
        o.model_name = o.model_config; /* the model's name in messages and the summary */
    if (rc >= 0)
        return rc;
    run_state s;
    memset(&s, 0, sizeof s);
    rc = pprun_open_transport(&o, &s.tp, &g_rank);
    if (rc < 0)
        rc = pprun_choose_threads(&o, s.tp, &s.rec);
    if (rc < 0)
        rc = setup(&o, &s);
    /* under MPI no process starts training unless every one is ready */
    if (s.tp)
        rc = pprun_agree(s.tp, g_rank, rc);
    int seq = o.seq ? o.seq : (s.rec.model.seq < 64 ? s.rec.model.seq : 64);
    if (rc < 0) {
        rc = train(&o, &s, seq);
        /* a process that failed mid-run ends the job (it printed why): its peers may be
         * blocked waiting for it */
        if (rc >= 0 && s.tp && !s.agreed)
            pp_transport_abort(s.tp);
    }
    if (rc < 0 && s.trace) {
        pp_rt_trace *tr = s.trace;
        s.trace = NULL;
        pp_status st = pp_rt_trace_commit(tr);
        if (st != PP_OK)
            rc = fail_write(st, "--trace: ");
    }
    if (rc < 0 && o.json && g_rank == 0)
        rc = pprun_write_json(&o, &s.rec);
    else if (rc < 0 && g_rank == 0)
        rc = pprun_write_summary(&o, &s.rec, stdout);
    cleanup(&s);
    pprun_profile_release();
    return rc < 0 ? 0 : rc;
}
