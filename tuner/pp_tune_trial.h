/* pp_tune_trial.h — trials: one candidate run for a few steps with pprun in a child process (or a
 * job step), classified; the runner the search measures with (trials.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_TRIAL_H
#define PP_TUNE_TRIAL_H

#include "pp_config.h"
#include "pp_tune_alloc.h"
#include "pp_tune_hw.h"
#include "pp_tune_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Trials (trials.c) ---------------------------------------------------------------------- */
#define PP_TUNE_TRIAL_MAX_RANKS PP_TUNE_RANK_PEAKS

typedef struct {
    const pp_tune_model *model; /* what pprun trains: pp_tune_pprun_model */
    const pp_config *cfg;       /* t >= 1 (t > 1: pprun --tp t, with sequence_parallel
                                   --sequence-parallel) */
    const char *pprun;          /* path of the pprun program; the search passes NULL to a
                                   runner (the default runner fills in its own path) */
    int steps;                  /* >= 2: the first is warm-up */
    double timeout_s;           /* the child is killed past it */
    const pp_backend_row *backend; /* the ranks' backend (pp_tune_hw_backend): pprun --backend
                                      it, in bf16 where it computes in it; NULL: the CPU's */
    const pp_tune_alloc *alloc; /* NULL or launcher "": one child, ranks as threads; else a
                                   job step (srun) or mpirun over its nodes, MPI transport */
} pp_tune_trial_params;

typedef struct {
    char status[16];   /* "ok", "oom", "crash", "timeout", "hang", "mpi", "node-lost" */
    char detail[200];  /* the child's error line, signal, or time limit */
    double step_time;  /* s, pprun's median after warm-up ("ok" only) */
    double peak;       /* bytes, the fullest rank ("ok" only) */
    double peak_per_rank[PP_TUNE_TRIAL_MAX_RANKS]; /* replica 0's pipeline ranks */
    double wall_s;     /* the trial's own wall time */
    char where[512];   /* how it ran: "ranks as threads of one pprun on this machine", "srun on
                          2 nodes of n[1-4]", and a reduction when there was one */
    int d_run;         /* data-parallel replicas it ran: cfg->d, or fewer where the allocation
                          holds fewer ranks (a reduced trial, said in where) */
    char lost_node[64]; /* "node-lost": the node the launcher named ("" when it named none) */
    char model[400];    /* "ok": the model pprun's summary says it trained, "NAME: L layers, BLOCK"
                           (runtime/plan/model.c's pp_model_describe); its sizes are the
                           trial's model's, or the trial is a "crash" saying so */
} pp_tune_trial_result;

/* Runs pprun --json for the configuration in a child process. A crash, OOM or timeout of the
 * child is a result in *r (status), not an error; errors are failures to start it. */
pp_status pp_tune_trial(const pp_tune_trial_params *tp, pp_tune_trial_result *r);

/* A trial runner: how the search measures a candidate. run() fills *r like pp_tune_trial (a
 * failed run is a status, an error is a failure to start); ctx is the runner's own. The
 * default (run NULL in the search's parameters) runs pprun in a child process: pp_tune_trial
 * with tp->pprun = the path pp_tune_pprun_find gives. Tests pass a fake one. */
typedef struct {
    pp_status (*run)(void *ctx, const pp_tune_trial_params *tp, pp_tune_trial_result *r);
    void *ctx;
} pp_tune_runner;

/* The pprun program for trials: $PPTUNE_PPRUN, else beside the running program's build tree
 * (<dir>/../runtime/pprun) or directory (<dir>/pprun). PP_ERR_NOTFOUND (message says to set
 * PPTUNE_PPRUN) when none is executable. */
pp_status pp_tune_pprun_find(char *path, size_t n);
/* The running program's own path (/proc/self/exe): pptune, for the probes it starts over an
 * allocation (alloc_probe.c). PP_ERR_NOTFOUND when it cannot be read. */
pp_status pp_tune_self_path(char *path, size_t n);
/* The default runner's run(): ctx is the pprun path (const char *). */
pp_status pp_tune_runner_pprun(void *ctx, const pp_tune_trial_params *tp, pp_tune_trial_result *r);

/* What the search reports about its trials (pp_tune_search_params.on_trial). */
typedef enum {
    PP_TUNE_TRIAL_NO_RUNNER,   /* the default runner found no pprun: message; nothing runs */
    PP_TUNE_TRIAL_SKIPPED,     /* cfg not trialled: the runtime needs `need` bytes per GPU,
                                  `capacity` usable */
    PP_TUNE_TRIAL_START,       /* cfg starts; done of total trials ran before it */
    PP_TUNE_TRIAL_NOT_STARTED, /* the runner failed to start cfg: message */
    PP_TUNE_TRIAL_DONE,        /* cfg ran: result (its status may be a failure) */
    PP_TUNE_TRIAL_END          /* every trial is over: done = total */
} pp_tune_trial_event_kind;

typedef struct {
    pp_tune_trial_event_kind kind;
    const pp_config *cfg;
    int done, total;
    double need, capacity;              /* SKIPPED, bytes */
    const char *message;                /* NO_RUNNER, NOT_STARTED */
    const pp_tune_trial_result *result; /* DONE */
} pp_tune_trial_event;

#ifdef __cplusplus
}
#endif
#endif
