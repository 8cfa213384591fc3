/* bench_sched.c — how fast the schedules module generates, checks and simulates large schedules.
 *
 * For interleaved 1F1B (D = 64, v = 4, N = 512), BitPipe (D = 32, N = 256) and ZB-V (D = 64,
 * N = 512, split backward): generate and lower,
 * check, simulate with unit costs, and simulate with a cost table of an H100-like cluster (8 GPUs
 * per node on NVLink, InfiniBand between nodes). Prints actions, the best wall time of several
 * repetitions, and actions simulated per second (issue 2's target: >= 2 million per second on the
 * 2-core development machine). A program that prints figures: it asserts nothing about time.
 *
 * usage: bench_sched [repetitions]   (default 5) */
#include <stdio.h>
#include <stdlib.h>

#include "pp_sched.h"

/* The cluster of the non-trivial cost table. Figures are round public numbers, not a probe. */
#define GPUS_PER_NODE 8
#define NVLINK_BYTES_PER_S 300e9 /* per direction, one GPU pair */
#define NVLINK_LATENCY_S 5e-6
#define IB_BYTES_PER_S 25e9 /* 200 Gb/s per GPU */
#define IB_LATENCY_S 15e-6
#define F_SECONDS_PER_LAYER 2e-3 /* forward of one micro-batch through one layer */
#define ACT_BYTES 32e6           /* activation (and gradient) tensor between stages */
#define REDUCE_SECONDS 20e-3

typedef struct {
    double gen, check, sim_unit, sim_cost; /* best seconds of the repetitions */
    double makespan_unit, bubble_unit, makespan_cost, bubble_cost;
    long actions;
} figures;

static void fail(const char *what)
{
    fprintf(stderr, "bench_sched: %s: %s\n", what, pp_err_msg());
    exit(1);
}

static pp_status cost_cluster(pp_cost *c, const pp_sched *s)
{
    PP_TRY(pp_cost_init_unit(c, s, 2.0));
    int D = s->ranks;
    size_t n = (size_t)s->n_pipes * s->stages_per_pipe;
    c->send_bytes_f = pp_calloc(n, sizeof(double));
    c->send_bytes_b = pp_calloc(n, sizeof(double));
    c->latency = pp_calloc((size_t)D * D, sizeof(double));
    c->inv_bw = pp_calloc((size_t)D * D, sizeof(double));
    c->reduce = pp_calloc((size_t)s->n_reduces + 1, sizeof(double));
    if (!c->send_bytes_f || !c->send_bytes_b || !c->latency || !c->inv_bw || !c->reduce)
        return PP_ERR_NOMEM;
    double layers_per_unit = (double)s->layers / D;
    for (size_t i = 0; i < n; i++) {
        c->f[i] *= F_SECONDS_PER_LAYER * layers_per_unit;
        c->b[i] *= F_SECONDS_PER_LAYER * layers_per_unit;
        c->i[i] *= F_SECONDS_PER_LAYER * layers_per_unit; /* I = W = B / 2 */
        c->w[i] *= F_SECONDS_PER_LAYER * layers_per_unit;
        c->send_bytes_f[i] = c->send_bytes_b[i] = ACT_BYTES;
    }
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++) {
            int same_node = a / GPUS_PER_NODE == b / GPUS_PER_NODE;
            c->latency[a * D + b] = same_node ? NVLINK_LATENCY_S : IB_LATENCY_S;
            c->inv_bw[a * D + b] = 1.0 / (same_node ? NVLINK_BYTES_PER_S : IB_BYTES_PER_S);
        }
    for (int id = 0; id < s->n_reduces; id++)
        c->reduce[id] = REDUCE_SECONDS;
    return PP_OK;
}

static double min_d(double a, double b)
{
    return a < b ? a : b;
}

/* One simulation, timed; keeps the figures of the last one. */
static double time_sim(const pp_sched *s, const pp_cost *c, double *makespan, double *bubble)
{
    pp_sim_result r;
    double t0 = pp_now();
    if (pp_sim_run(s, c, 0, &r) != PP_OK)
        fail("simulate");
    double t = pp_now() - t0;
    *makespan = r.makespan;
    *bubble = r.bubble_over_total;
    pp_sim_result_fini(&r);
    return t;
}

static int run_case(const char *kind, pp_sched_params p, int reps, figures *f)
{
    *f = (figures){1e30, 1e30, 1e30, 1e30, 0, 0, 0, 0, 0};
    for (int k = 0; k < reps; k++) {
        pp_sched *s;
        double t0 = pp_now();
        pp_status st = pp_sched_generate(kind, &p, &s);
        if (st == PP_ERR_UNSUPPORTED || st == PP_ERR_NOTFOUND)
            return 0;
        if (st != PP_OK)
            fail(kind);
        f->gen = min_d(f->gen, pp_now() - t0);
        t0 = pp_now();
        if (pp_sched_check(s) != PP_OK)
            fail("check");
        f->check = min_d(f->check, pp_now() - t0);
        pp_cost unit, cl;
        if (pp_cost_init_unit(&unit, s, 2.0) != PP_OK || cost_cluster(&cl, s) != PP_OK)
            fail("cost table");
        f->sim_unit = min_d(f->sim_unit, time_sim(s, &unit, &f->makespan_unit, &f->bubble_unit));
        f->sim_cost = min_d(f->sim_cost, time_sim(s, &cl, &f->makespan_cost, &f->bubble_cost));
        f->actions = 0;
        for (int r = 0; r < s->ranks; r++)
            f->actions += s->n_ops[r];
        pp_cost_fini(&unit);
        pp_cost_fini(&cl);
        pp_sched_destroy(s);
    }
    return 1;
}

static void report(const char *name, const figures *f)
{
    printf("%s: %ld actions\n", name, f->actions);
    printf("  generate+lower %8.2f ms   check %8.2f ms\n", 1e3 * f->gen, 1e3 * f->check);
    printf("  simulate, unit costs    %8.2f ms  %6.1f M actions/s  makespan %.4g units, "
           "bubble/total %.4f\n",
           1e3 * f->sim_unit, f->actions / f->sim_unit / 1e6, f->makespan_unit, f->bubble_unit);
    printf("  simulate, cluster costs %8.2f ms  %6.1f M actions/s  makespan %.4g s, "
           "bubble/total %.4f\n",
           1e3 * f->sim_cost, f->actions / f->sim_cost / 1e6, f->makespan_cost, f->bubble_cost);
    printf("  check                             %6.1f M actions/s\n", f->actions / f->check / 1e6);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1) {
        fprintf(stderr, "usage: bench_sched [repetitions >= 1]\n");
        return 2;
    }
    printf("bench_sched: best of %d repetitions\n", reps);
    figures f;
    pp_sched_params inter = {.ranks = 64, .microbatches = 512, .chunks = 4};
    if (!run_case("interleaved", inter, reps, &f))
        fail("interleaved");
    report("interleaved D=64 v=4 N=512", &f);
    pp_sched_params bit = {.ranks = 32, .microbatches = 256};
    if (run_case("bitpipe", bit, reps, &f))
        report("bitpipe D=32 N=256", &f);
    else
        printf("bitpipe D=32 N=256: skipped, the generator is not available (%s)\n", pp_err_text());
    pp_sched_params zbv = {.ranks = 64, .microbatches = 512};
    if (!run_case("zbv", zbv, reps, &f))
        fail("zbv");
    report("zbv D=64 N=512", &f);
    return 0;
}
