/* pp_tune_predict.h — one configuration's prediction: simulated step, memory, figures; the steady
 * state of huge N; where the step goes (predict.c, breakdown.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_PREDICT_H
#define PP_TUNE_PREDICT_H

#include "pp_tune_time.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Prediction of one configuration ----------------------------------------------------- */
typedef struct {
    pp_config cfg;
    double step_time;       /* s: max over ranks of (its last compute or reduce in the simulated
                               schedule + its DP all-reduce), + the optimizer step */
    double pipeline_time;   /* s: simulated makespan */
    double tokens_per_s;
    double tflops_per_gpu;  /* model TFLOP/s per GPU (Narayanan) */
    double mfu;             /* model FLOPs / (step_time * GPUs * peak) in [0, 1] */
    double bubble_ideal;    /* idle / busy (Megatron's definition) */
    double bubble_total;    /* idle / (D * makespan) */
    double peak_mem;        /* bytes, the fullest rank */
    int peak_rank;
    double capacity;        /* bytes usable per device */
    int fits;
    double measured_step;   /* s from a trial, 0 when none */
    double measured_peak;   /* bytes, 0 when none */
    char trial_status[16];  /* "", "ok", "crash", "oom", "timeout" */
    char trial_detail[200]; /* the failed trial's error line, signal or time limit */
    char trial_where[512];  /* the trial's launcher and nodes (pp_tune_trial_result.where) */
    char trial_model[400];  /* what pprun said it trained (pp_tune_trial_result.model) */
    double measured_rank_peak[PP_TUNE_RANK_PEAKS]; /* bytes per pipeline rank (first
                                                       PP_TUNE_RANK_PEAKS), trials only */
    int predicted_only;     /* not runnable by the runtime (its model) or not on this machine */
    /* In a pp_tune_result's best list (owned by the result, valid until
     * pp_tune_result_destroy): the schedule the candidate was evaluated on and the memory
     * model's [cfg.p] entries for it, shared by the leaderboard, the profile and the trials.
     * NULL in a prediction from pp_tune_evaluate / pp_tune_predict. For N above the steady-state
     * budget (pp_tune_predict_steady) sched is the simulated prefix: sched->microbatches <
     * cfg.N, and what is drawn from it is the prefix's timeline. */
    const pp_sched *sched;
    const pp_tune_rank_mem *mem;
} pp_tune_prediction;

/* Costs schedule s with the time model (pp_tune_costs, extra as there) and simulates it with
 * spans recorded: on PP_OK *sim holds the result (pp_sim_result_fini frees it). */
pp_status pp_tune_simulate(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                           const pp_tune_opts *o, const pp_sched *s, pp_tune_step_extra *extra,
                           pp_sim_result *sim);
/* Evaluates configuration c on an already generated schedule s (its kind, D, N, v, G and split
 * must be c's): applies the memory model once (into mem, D entries, when not NULL), simulates
 * with the time model's costs. */
pp_status pp_tune_evaluate(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                           const pp_tune_opts *o, const pp_sched *s, pp_tune_prediction *out,
                           pp_tune_rank_mem *mem);
/* The same with the memory model's D entries for (c, s) already computed (not recomputed). */
pp_status pp_tune_evaluate_mem(const pp_tune_model *m, const pp_tune_hw *hw,
                               const pp_config *c, const pp_tune_opts *o, const pp_sched *s,
                               const pp_tune_rank_mem *mem, pp_tune_prediction *out);
/* pp_tune_evaluate_mem of k configurations c[0..k-1] that share the schedule s (the settings of
 * one layout), simulated in one pass (pp_sim_run_lanes): out[i] equals, to the bit,
 * pp_tune_evaluate_mem(m, hw, &c[i], o, s, mem[i], &out[i]). 1 <= k <= PP_SIM_MAX_LANES. */
pp_status pp_tune_evaluate_lanes(const pp_tune_model *m, const pp_tune_hw *hw,
                                 const pp_config *c, const pp_tune_opts *o, const pp_sched *s,
                                 const pp_tune_rank_mem *const *mem, int k,
                                 pp_tune_prediction *out);
/* Schedule parameters of c. */
void pp_tune_sched_params(const pp_tune_model *m, const pp_config *c, pp_sched_params *out);
/* Generates the schedule, simulates it with the time model and applies the memory model.
 * mem (optional) receives D per-rank entries the caller allocated. */
pp_status pp_tune_predict(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                          const pp_tune_opts *o, pp_tune_prediction *out, pp_tune_rank_mem *mem);

/* ---- Huge N: the steady state (predict.c) ------------------------------------------------
 * A configuration with more micro-batches than the simulation budget (PP_TUNE_MAX_MICROBATCHES
 * unless a test sets another) is not simulated whole: three prefixes N1 < N2 < N3 <= budget
 * (N3 about max(1024, 16 D v, 4 periods), N1 about N3 / 2)
 * with N's remainder modulo the schedule's period (pp_sched_desc_period) and equal steps are,
 * and makespan, every rank's step end, busy and idle time (the bubble) and every rank's memory
 * (in-flight activations included) are extrapolated linearly to N after checking that they grow
 * by the same amount over both steps (relative 1e-9). pp_tune_predict takes this path by itself
 * for N above the budget. */
int pp_tune_steady_budget(void);
/* Test-only knob: the budget in micro-batches (n <= 0: back to PP_TUNE_MAX_MICROBATCHES). */
void pp_tune_steady_budget_set(int n);
/* The three prefixes for c into n[0..2]; PP_ERR_UNSUPPORTED saying why when the budget holds
 * too few periods (a group larger than the budget), PP_ERR_INVALID when a prefix breaks a rule
 * of the schedule. */
pp_status pp_tune_steady_prefixes(const pp_tune_model *m, const pp_config *c, int n[3]);
/* The prediction of c (its real N) from the prefixes, mem (c->p entries, may be NULL) the
 * extrapolated memory; *prefix (prefix may be NULL; the caller destroys it) the N3 prefix's
 * schedule, the one a timeline can show. PP_ERR_UNSUPPORTED naming the figure when the prefixes
 * are not in a steady state. */
pp_status pp_tune_predict_steady(const pp_tune_model *m, const pp_tune_hw *hw,
                                 const pp_config *c, const pp_tune_opts *o,
                                 pp_tune_prediction *out, pp_tune_rank_mem *mem,
                                 pp_sched **prefix);

/* ---- Where the step goes (breakdown.c) ------------------------------------------------ */
/* Where a prediction's step time goes (breakdown.c), s; the parts add up to p->step_time. */
typedef struct {
    double compute;   /* the busiest rank's compute, without its tensor-parallel all-reduces */
    double tp;        /* that rank's tensor-parallel all-reduces (inside its F and B) */
    double bubble;    /* pipeline makespan with free links - that rank's compute: idle time */
    double p2p;       /* makespan - makespan with free links: exposed point-to-point transfers
                         and weight-replica syncs (bidirectional schedules) */
    double dp;        /* exposed data-parallel gradient sync after the pipeline */
    double optimizer; /* the optimizer step */
} pp_tune_time_parts;

/* Regenerates p->cfg's schedule, simulates it with and without link costs under options o
 * (the search's: pp_tune_result.opts) and fills *out. For N above the steady-state budget the
 * two longest prefixes of pp_tune_steady_prefixes are, and their parts extrapolated to N. */
pp_status pp_tune_breakdown(const pp_tune_model *m, const pp_tune_hw *hw,
                            const pp_tune_prediction *p, const pp_tune_opts *o,
                            pp_tune_time_parts *out);

#ifdef __cplusplus
}
#endif
#endif
