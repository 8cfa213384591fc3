/* pp_tune_profile.h — the profile the search writes, and the pprun line that launches a candidate
 * (profile_write.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_PROFILE_H
#define PP_TUNE_PROFILE_H

#include "pp_tune_search.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Profile (profile_write.c) ------------------------------------------------------------ */
typedef struct {
    const pp_tune_model *model;
    const pp_tune_hw *hw;
    const pp_tune_opts *opts;
    const pp_tune_result *result;
    const char *command_line;  /* how pptune was invoked */
    int trials_run;            /* 0: figures are predicted only */
    const char *cluster_json;  /* the cluster description used (probes' JSON), or NULL when
                                  hw's preset name and nodes describe it */
    const pp_tune_alloc *alloc; /* NULL: trials (if any) on this machine; else the allocation
                                   they ran in ("allocation" in the profile) */
} pp_tune_profile_input;

#define PP_TUNE_PROFILE_VERSION 1

/* Writes the profile atomically to path; "-" writes it to stdout. */
pp_status pp_tune_profile_write(const pp_tune_profile_input *in, const char *path);
/* Default store path: the local store's (profiles/: $XDG_DATA_HOME/pptune/profiles, else
 * ~/.local/share/...) entry for the cluster's fingerprint and the model, directories created.
 * Caller frees. */
pp_status pp_tune_profile_default_path(const pp_tune_hw *hw, const pp_tune_model *m, char **out);
/* The pprun command line that launches configuration c (buf, n) as the search planned it under
 * options o (the result's precision; NULL: the defaults): on GPUs (hw not CPU cores) with the
 * CUDA backend in o's precision; the model as pp_tune_pprun_model gives it (--model NAME or
 * --model-config PATH). hw may be NULL (then the CPU's line). NULL, with the error saying
 * why, when pprun cannot train m (no line pprun would reject). */
char *pp_tune_launch_command(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                             const pp_tune_opts *o, char *buf, size_t n);
/* The precision (pp_precision) of that line: o's where hw's backend computes in it, else fp32. */
int pp_tune_launch_precision(const pp_tune_hw *hw, const pp_tune_opts *o);

#ifdef __cplusplus
}
#endif
#endif
