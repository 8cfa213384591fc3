/* pprun.h — private to the pprun program: its options, the run's record, and the three
 * pieces main.c strings together (parse options, train, write the JSON summary). */
#ifndef PP_PPRUN_H
#define PP_PPRUN_H

#include <stdint.h>

#include "pp_rt.h"

typedef struct {
    const char *model_name;
    const char *schedule;
    int ranks, microbatches, micro_batch, chunks, group, uneven, dp, seq, steps;
    double lr, clip, weight_decay;
    const char *data; /* NULL: synthetic */
    uint64_t seed;
    int json, quiet;
    const char *trace; /* NULL: no trace */
} pprun_opts;

typedef struct {
    double loss, grad_norm, seconds;
} pprun_step;

typedef struct {
    pp_model_cfg model;
    const pp_sched *sched; /* the executor's */
    pprun_step *steps;     /* [opts.steps] */
    int n_steps;
    pp_mem_stats *mem; /* [n_ranks] per global rank, at the end */
    int n_ranks;
} pprun_record;

/* Returns -1 to go on, or the exit code (0 after --help, 2 for a bad option). */
int pprun_parse(int argc, char **argv, pprun_opts *o);
/* Prints the JSON summary to stdout. */
int pprun_write_json(const pprun_opts *o, const pprun_record *rec);
/* Median of the steps after warm-up, and how many steps counted as warm-up. */
double pprun_median_step(const pprun_record *rec, int *warmup);

#endif
