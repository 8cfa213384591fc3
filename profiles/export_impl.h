/* export_impl.h — private to profiles/'s exporters: the helpers every target shares
 * (export_util.c) and each target's writer (export_<target>.c), which the table in export.c
 * names. A writer is called only for a profile with a chosen configuration that its row runs
 * (schedule) and, where its row says it builds the model, with the model's shape; it writes
 * nothing when it refuses. */
#ifndef PP_EXPORT_IMPL_H
#define PP_EXPORT_IMPL_H

#include <stdio.h>
#include <string.h>

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
/* Their count (pp_config_stages), PP_ERR_INVALID past PP_EXPORT_MAX_STAGES or the model's
 * layers: checked before any writer runs (pp_profile_export). */
pp_status pp_export_stages(const pp_profile *p, int *stages);
pp_status pp_export_stage_layers(const pp_profile *p, int *layers, int *stages);
/* Layers of the first and last of those stages. */
pp_status pp_export_edge_layers(const pp_profile *p, int *first, int *last);
/* 1 when Megatron-Core's own split says the chosen configuration's: without a virtual pipeline,
 * L over p evenly, or num_layers_in_first/last_pipeline_stage with the middle ranks' rest even;
 * with one, L over p x v evenly (its first/last counts are a pipeline rank's, split evenly over
 * its virtual stages). Otherwise the split needs pp_export_layout. */
int pp_export_megatron_split_says(const pp_profile *p);
/* Megatron-Core's PipelineParallelLayerLayout of the split: every stage in data-flow order, E
 * the embedding, t*n its transformer layers, L the loss ("Et*3|t*4|t*4|t*1L"), into buf (16
 * bytes a stage and 8 more always suffice). PP_ERR_INVALID when it does not fit. */
pp_status pp_export_layout(const pp_profile *p, char *buf, size_t n);
/* Megatron-Core's recomputation of full recompute: method "uniform" with 1 layer per checkpoint
 * (every layer, each keeping its input: pptune's model) or "block" with k (the first k layers of
 * each stage); the names are TransformerConfig's recompute_method / recompute_num_layers, which
 * Megatron-LM's flags, NeMo 1's YAML and NeMo 2's GPTConfig share. */
void pp_export_recompute_method(const pp_config *c, const char **method, int *layers);
/* PP_ERR_UNSUPPORTED naming the target and what it lacks when c shards gradients (ZeRO-2), which
 * `target` cannot express, with where it can be said; PP_OK otherwise. */
pp_status pp_export_no_zero2(const pp_profile *p, const char *target);
/* The model's MoE layer rule as Megatron-Core's moe_layer_freq (TransformerConfig, the flag
 * --moe-layer-freq): "N" (a MoE layer at l % N == 0) where the rule is that, else the
 * per-layer pattern as a Python expression of runs, "([0]*3+[1]*58)". Returns buf; *list 1
 * for the pattern. */
char *pp_export_moe_layer_freq(const pp_profile *p, char *buf, size_t n, int *list);
/* The router as Megatron-Core says it: *score "softmax" or "sigmoid"; *pre_softmax 1 where the
 * softmax over all experts is not renormalised over the top k (Megatron's default softmax is
 * over the top-k logits, which equals the renormalised one: moe_utils.py,
 * topk_softmax_with_capacity). PP_ERR_UNSUPPORTED for what Megatron-Core cannot express
 * (a sigmoid router without renormalisation), naming `target`. */
pp_status pp_export_moe_router(const pp_profile *p, const char *target, const char **score,
                               int *pre_softmax);
/* PP_ERR_UNSUPPORTED naming `target` when the profile's model has experts (or per-head q/k
 * norms): for a target that cannot build them. */
pp_status pp_export_no_moe(const pp_profile *p, const char *target, const char *why);
/* GPUs of the plan, and how they sit on nodes: devices per node and nodes. */
void pp_export_nodes(const pp_profile *p, int *devices, int *nodes);
/* x as the shortest decimal that reads back to the same double, with a mantissa point
 * ("1.0e-06", "0.5"): a float to Python, to a shell argument read by float() and to YAML 1.1
 * (PyYAML reads "1e-06" as a string). Returns buf. */
char *pp_export_float(double x, char *buf, size_t n);

/* The rest of a first comment line that names the profile's file, then a second one: its
 * cluster, nodes, fingerprint, model and schedule. Every string is printed with pp_fput_quoted
 * (pp_common.h), which holds no line break and is a literal of Python and YAML alike, so a
 * file name or a cluster name cannot end the comment in any target (Python, YAML, sh). */
void pp_export_provenance(const pp_profile *p, FILE *fp);

/* ---- the writers, one file each ---------------------------------------------------------------- */
pp_status pp_export_megatron(const pp_profile *p, FILE *fp);   /* export_megatron.c */
pp_status pp_export_nemo(const pp_profile *p, FILE *fp);       /* export_nemo.c */
pp_status pp_export_nemo2(const pp_profile *p, FILE *fp);      /* export_nemo2.c */
pp_status pp_export_torchtitan(const pp_profile *p, FILE *fp); /* export_torchtitan.c */
pp_status pp_export_pprun(const pp_profile *p, FILE *fp);      /* export_pprun.c */

#endif
