/* pprun.h — private to the pprun program: its options, the run's record, and the three
 * pieces main.c strings together (parse options, train, write the JSON summary). */
#ifndef PP_PPRUN_H
#define PP_PPRUN_H

#include <stdint.h>

#include "pp_config.h"
#include "pp_rt.h"

typedef struct {
    const char *model_name;
    const char *model_config; /* --model-config: a HuggingFace config.json, NULL: none */
    int model_set;            /* --model was given (refused with --model-config) */
    /* the profile's model shape (profile.c; has_profile_model 0: none), trained instead of
     * the preset named model_name */
    pp_model_cfg profile_model;
    int has_profile_model;
    /* The configuration (profiles/pp_config.h, whose axes give its flags): schedule, p
     * (--ranks), N (--microbatches), b (--micro-batch-size), v (--chunks; 0: the schedule's
     * own), G (--group; 0: p), d (--dp), t (--tp), the split, sequence parallelism (with
     * t > 1; a no-op at t = 1) — or the profile's (--profile). */
    pp_config cfg;
    int seq, steps;
    int layers; /* 0: the preset's */
    int threads; /* --threads: BLAS threads per rank; 0: OPENBLAS_NUM_THREADS, else cores / ranks
                    of this process */
    int kernel_threads; /* --kernel-threads: the CPU kernels' threads per rank; 0: as BLAS's */
    double lr, clip, weight_decay;
    double watchdog_s; /* --watchdog: an MPI wait without progress this long ends the job */
    const char *data; /* NULL: synthetic */
    int shuffle;      /* --shuffle: a Megatron dataset's samples in a seeded order */
    uint64_t seed;
    int json, quiet;
    const char *trace;     /* NULL: no trace */
    const char *transport; /* "auto" (MPI when a launcher started several processes), "thread",
                              "mpi" */
    int dp_set;            /* --dp was given (else under MPI it is processes / ranks) */
    /* profiles and checkpoints (profile.c, resume.c) */
    const char *profile;    /* --profile FILE, NULL: none */
    int save_every;         /* steps between checkpoints, 0: none */
    const char *checkpoint; /* NULL: "pprun.ckpt" */
    int resume;
    const char *load_weights; /* --load-weights: a HuggingFace safetensors checkpoint, NULL */
    const char *save_weights; /* --save-weights: written after the last step, NULL: none */
    const char *backend_name; /* --backend NAME: a row's (common/pp_backends.h) */
    int backend;              /* pp_rt_backend_kind: the kind of the row named backend_name */
    pp_precision precision; /* --precision fp32 (default) | bf16 */
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
    double *tp_seconds, *tp_bytes; /* [n_ranks] tensor-parallel all-reduces, summed over the
                                      steps (this process's rank only under MPI) */
    int n_ranks;
    int tp;                  /* tensor-parallel ranks per pipeline rank */
    uint64_t param_checksum; /* pp_rt_executor_param_checksum after the last step */
    const char *transport;   /* "thread" or "mpi" */
    int processes;           /* 1, or the MPI world size */
    int threads;              /* BLAS threads per rank, as OpenBLAS reports them (0: not CPU) */
    const char *threads_from; /* "--threads", "OPENBLAS_NUM_THREADS", "cores / ranks", ... */
    int kernel_threads;       /* the CPU kernels' threads per rank (0: not CPU) */
} pprun_record;

/* Returns -1 to go on, or the exit code (0 after --help, 2 for a bad option). */
int pprun_parse(int argc, char **argv, pprun_opts *o);
/* The settings' checks (recompute layers without full, a value pprun has the flag for but
 * does not run), for the flags and for a profile's: -1 to go on, else the exit status (2)
 * after one line on stderr. */
int pprun_check_settings(const pprun_opts *o);
/* launch.c: the transport --transport and the launcher ask for. *tp NULL: ranks as threads.
 * Under MPI checks the world size against --ranks (and --dp, or sets o->dp to world / ranks);
 * *rank is this process's rank (0 without MPI). -1 to go on, or the exit code (2: a bad
 * launch, said in one line on rank 0). */
int pprun_open_transport(pprun_opts *o, pp_transport **tp, int *rank);
/* Under MPI: whether every process got here with rc < 0 (a float all-reduce of the failures).
 * Returns rc, or 1 when another process failed (it printed why). Without MPI: rc. */
int pprun_agree(pp_transport *tp, int rank, int rc);
/* Under MPI: the exit code every process ends with when any failed: 2 where one returned 2,
 * else 1 where one failed, else -1 (to go on). Without MPI: rc. */
int pprun_agree_code(pp_transport *tp, int rank, int rc);
/* The end-of-run summary for a person (without --json): the run, final loss, median step,
 * tokens/s, model TFLOP/s, each rank's peak memory in GiB. -1 done, 1 write error. */
int pprun_write_summary(const pprun_opts *o, const pprun_record *rec, FILE *fp);
/* threads.c: sets the BLAS threads per rank (--threads, else OPENBLAS_NUM_THREADS, else the
 * usable cores / the ranks of this process, or / the node's processes under MPI) before any
 * backend exists, and records what OpenBLAS took in rec. Returns -1. */
int pprun_choose_threads(const pprun_opts *o, pp_transport *tp, pprun_record *rec);
/* Prints the JSON summary to stdout. */
int pprun_write_json(const pprun_opts *o, const pprun_record *rec);
/* Median of the steps after warm-up, and how many steps counted as warm-up. */
double pprun_median_step(const pprun_record *rec, int *warmup);

/* profile.c: with --profile, sets the configuration options from the profile's chosen
 * candidate (argv: to refuse flags that would contradict it). -1 to go on, or the exit code
 * (2, said in one line). The profile's strings stay valid until pprun_profile_release. */
int pprun_apply_profile(pprun_opts *o, int argc, char **argv);
void pprun_profile_release(void);
/* resume.c: with --save-every or --resume, locks the checkpoint (one run per file; under MPI
 * process 0 does, every process takes part: tp, rank as pprun_open_transport gave); with
 * --resume, restores the checkpoint (if there is one) into ex, the history
 * into rec and replays the data stream to where the checkpoint was taken (batch: a buffer of
 * one step's tokens); *first = the next step to run (0 without a checkpoint). With
 * --save-every, pprun_save_if_due writes one after `done` steps when due (every K, and the
 * last step). Both return -1 to go on, or the exit code (message printed, once). Under MPI
 * pprun_resume's exit code is every process's (they stop together, no job abort needed). */
int pprun_resume(const pprun_opts *o, pp_rt_executor *ex, pp_rt_data *data, int32_t *batch, int seq,
                 pprun_record *rec, int *first, pp_transport *tp, int rank);
int pprun_save_if_due(const pprun_opts *o, pp_rt_executor *ex, const pprun_record *rec, int done);

#endif
