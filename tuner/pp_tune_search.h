/* pp_tune_search.h — the search: enumerate, bound, simulate, rank, trial, recalibrate, choose
 * (search.c, search_trials.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_SEARCH_H
#define PP_TUNE_SEARCH_H

#include "pp_tune_predict.h"
#include "pp_tune_trial.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Search (search.c, search_trials.c) ------------------------------------------------------ */
/* The largest leaderboard --keep and --top ask for: each entry holds a prediction (about 1.4 KB)
 * and its schedule's figures, so a billion would be terabytes; 100000 is far past any search. */
#define PP_TUNE_MAX_KEEP 100000

typedef struct pp_tune_result pp_tune_result;

typedef struct {
    const pp_tune_model *model;
    const pp_tune_hw *hw;
    pp_tune_opts opts;
    /* The settings searched beside the layout (recompute, sequence parallelism, shard, cp):
     * PP_TUNE_SEARCHED (pp_tune_force_init) or a forced value each. A zeroed struct forces
     * every one to none / off / none and cp 0 is searched: call pp_tune_force_init. */
    pp_tune_force force;
    int max_cp;          /* largest context parallelism tried, 0 = 16 (a power of two) */
    int max_ep;          /* largest expert parallelism tried (MoE models), 0 = 64 */
    int global_batch;    /* sequences; 0 = the model's default */
    const char *schedules; /* comma list; NULL = the registry's default set (the rows not
                              opt_in: all eight, the zero-bubble family included) */
    int max_t;           /* 0 = gpus per node */
    int max_b;           /* largest micro-batch size tried, 0 = 16 */
    int allow_tp;        /* 0: t = 1 only */
    int keep;            /* leaderboard size kept (ranked), default 10, at most PP_TUNE_MAX_KEEP */
    /* 1 (--for pprun): a candidate with a setting pprun has no option for in the launch's
     * precision (pp_profile_pprun_unrun: ZeRO-2 with a schedule whose pipes share layers, ep
     * with tp, ...) breaks a rule, so the search keeps to what pprun runs. */
    int pprun_lines;
    /* Trials of the best `trials` candidates (any t: the runtime splits stages), only where the
     * cluster is this machine (hw->is_local) and the runtime runs the model
     * (model->pprun): then recalibration and choice (pp_tune_result). 0: none. */
    int trials;
    int trial_steps;        /* per trial, the first is warm-up; 0 = 5 */
    double trial_timeout_s; /* a trial running longer is killed; 0 = 60 */
    pp_tune_runner runner;  /* run NULL: pprun in a child process (pp_tune_runner_pprun) */
    const pp_tune_alloc *alloc; /* NULL: trials on this machine; else job steps over it; a
                                   node lost in one trial is excluded from the later ones */
    /* The pptune program, for the allocation's data-parallel all-reduce probe: a reduced trial
     * (fewer replicas than d) adds the probed full-size all-reduce in place of the one it ran
     * (pp_tune_dp_allreduce_probe). NULL: not probed (said in the trial's where). */
    const char *prober;
    /* Reports, all optional, each given progress_ctx: progress of the pass over the
     * candidates; its end (r: its counters; r->opts its options); the trials. */
    void (*progress)(void *ctx, long done, long total);
    void (*on_pass)(void *ctx, const pp_tune_result *r);
    void (*on_trial)(void *ctx, const pp_tune_trial_event *ev);
    void *progress_ctx;
} pp_tune_search_params;

#define PP_TUNE_REASON_MAX 200
typedef struct {
    pp_config cfg;
    const char *reason; /* why it was pruned or lost (at most PP_TUNE_REASON_MAX - 1
                           characters), kept by the result; "" for stage 3, whose text
                           pp_tune_reject_reason writes from the figures below (formatting one
                           per bound-skipped candidate was most of a large search's time) */
    int stage;        /* 0 rule, 1 memory, 2 outranked, 3 bound (not simulated: lower bound slower
                         than the kept ones) */
    double bound, kth, kind_best; /* stage 3: its lower bound, the keep-th best and its
                                     schedule's best step times then, s */
    int keep;                     /* stage 3: the leaderboard size */
} pp_tune_reject;

/* Why j lost, as text: j->reason, or for stage 3 the bound's sentence. Returns buf (or
 * j->reason). */
const char *pp_tune_reject_reason(const pp_tune_reject *j, char *buf, size_t n);

/* A simulated candidate kept beside the leaderboard (per-schedule bests, the Pareto front). */
typedef struct {
    pp_tune_prediction pred; /* its sched and mem are NULL */
    pp_tune_rank_mem worst;  /* the fullest rank's memory by category (pred.peak_rank) */
} pp_tune_candidate;

struct pp_tune_result {
    pp_tune_prediction *best; /* [n_best], fastest first (after trials: the fastest measured
                                 candidate that fits first); only fitting candidates */
    int n_best;
    pp_tune_reject *rejects;  /* every candidate that lost, with its reason */
    long n_rejects;
    long seen, pruned_rule, pruned_memory, simulated, bounded, trialled;
    long sim_cache_hits;
    long sim_passes, sim_lanes; /* simulator passes run for the simulated candidates, and the
                                   cost tables they carried (shared passes: search.c); lanes
                                   above `simulated` were candidates bound-skipped at their
                                   turn. Not printed: bench_search's work figures */
    double wall_s;
    int global_batch;
    double calibration; /* median measured / predicted step time over ok trials; 0 = none */
    pp_tune_opts opts;  /* the options the figures assume */
    pp_tune_force force; /* the settings the search was given forced (the rest searched) */
    /* [n_sched_best], in registry order: the fastest fitting candidate of each schedule
     * searched that has one (predicted figures). The bound skips a candidate only when it
     * can beat neither the leaderboard nor its own schedule's best, so each is exact. */
    pp_tune_candidate *sched_best;
    int n_sched_best;
    /* [n_pareto], by increasing peak memory: the simulated fitting candidates no other
     * simulated one beats in both step time and peak memory (the bound's skipped ones are not
     * among them: see `simulated`). */
    pp_tune_candidate *pareto;
    int n_pareto;
    int allow_tp;       /* t > 1 was searched (0 on CPU devices whatever was asked) */
    pp_sched **held;    /* private: the schedules best[i].sched point to */
    int n_held;
    char **texts;       /* private: blocks holding the rejects' reasons (a reason shared by
                           many, as the static-memory one, is kept once) */
    int n_texts;
    size_t text_used;   /* bytes used in the last block */
};

/* The options a search on hw uses: on CPU devices (the runtime's CPU backend) fp32 (tensor
 * and sequence parallelism as asked: the CPU backend runs both), else o and allow_tp as
 * given. pp_tune_search applies it; a program
 * that describes the options before searching calls it too. */
void pp_tune_search_adjust(const pp_tune_hw *hw, pp_tune_opts *o, int *allow_tp);

/* enumerate → bound → simulate (one pass, the settings searched with the layout) →
 * trials through the runner → recalibration → choice. *out (pp_tune_result_destroy frees it)
 * is the last pass's result, also when nothing fits (n_best = 0). Errors: allocation, or a
 * model inconsistency found while evaluating. */
pp_status pp_tune_search(const pp_tune_search_params *sp, pp_tune_result **out);
void pp_tune_result_destroy(pp_tune_result *r);

/* PP_OK when every name in the comma list (NULL: all) is a registry schedule, else
 * PP_ERR_INVALID naming the unknown one and the known ones. pp_tune_search checks it too. */
pp_status pp_tune_schedules_check(const char *list);

#ifdef __cplusplus
}
#endif
#endif
