/* export_impl.h — private to profiles/'s exporters: the helpers every target shares
 * (export_util.c) and each target's writer (export_<target>.c), which the table in export.c
 * names. A writer is called only for a profile with a chosen configuration that its row runs
 * (schedule) and, where its row says it builds the model, with the model's shape; it writes
 * nothing when it refuses. */
#ifndef PP_EXPORT_IMPL_H
#define PP_EXPORT_IMPL_H

#include <stdio.h>

#include "pp_profile.h"
#include "pp_sched.h"

/* ---- shared (export_util.c) ------------------------------------------------------------------ */
/* The chosen schedule's registry row (the reader accepted only registry names). */
const pp_sched_desc *pp_export_desc(const pp_config *c);
/* Tunable chunks (interleaved) with more than one per rank: Megatron's virtual pipeline. */
int pp_export_virtual(const pp_config *c);
/* 1: the chosen configuration splits its layers evenly (no uneven or first/last split). */
int pp_export_split_even(const pp_config *c);
/* Layers of each of the chosen configuration's stages (p x v for a one-pipe schedule: the
 * virtual stages of an interleaved or V-shaped one; p per pipe for a bidirectional one), in
 * data-flow order, as the schedule splits them (pp_sched_split_layers) into
 * layers[PP_EXPORT_MAX_STAGES]; *stages receives the count. PP_ERR_INVALID for a split the
 * schedules refuse. */
#define PP_EXPORT_MAX_STAGES 4096
pp_status pp_export_stage_layers(const pp_profile *p, int *layers, int *stages);
/* Layers of the first and last of those stages. */
pp_status pp_export_edge_layers(const pp_profile *p, int *first, int *last);
/* Megatron-Core's recomputation of full recompute: method "uniform" with 1 layer per checkpoint
 * (every layer, each keeping its input: pptune's model) or "block" with k (the first k layers of
 * each stage); the names are TransformerConfig's recompute_method / recompute_num_layers, which
 * Megatron-LM's flags, NeMo 1's YAML and NeMo 2's GPTConfig share. */
void pp_export_recompute_method(const pp_config *c, const char **method, int *layers);
/* PP_ERR_UNSUPPORTED naming the target and what it lacks when c shards gradients (ZeRO-2), which
 * `target` cannot express, with where it can be said; PP_OK otherwise. */
pp_status pp_export_no_zero2(const pp_profile *p, const char *target);
/* GPUs of the plan, and how they sit on nodes: devices per node and nodes. */
void pp_export_nodes(const pp_profile *p, int *devices, int *nodes);

/* ---- the writers, one file each ---------------------------------------------------------------- */
pp_status pp_export_megatron(const pp_profile *p, FILE *fp);   /* export_megatron.c */
pp_status pp_export_nemo(const pp_profile *p, FILE *fp);       /* export_nemo.c */
pp_status pp_export_nemo2(const pp_profile *p, FILE *fp);      /* export_nemo2.c */
pp_status pp_export_torchtitan(const pp_profile *p, FILE *fp); /* export_torchtitan.c */
pp_status pp_export_pprun(const pp_profile *p, FILE *fp);      /* export_pprun.c */

#endif
