/* export_impl.h — private to profiles/'s exporters (profile_export.c, export_nemo.c): the
 * helpers each target shares. */
#ifndef PP_EXPORT_IMPL_H
#define PP_EXPORT_IMPL_H

#include <stdio.h>

#include "pp_profile.h"
#include "pp_sched.h"

/* The chosen schedule's registry row (the reader accepted only registry names). */
const pp_sched_desc *pp_export_desc(const pp_profile_config *c);
/* Tunable chunks (interleaved) with more than one per rank: Megatron's virtual pipeline. */
int pp_export_virtual(const pp_profile_config *c);
/* PP_OK when the profile records the model's shape (1.1), else PP_ERR_UNSUPPORTED saying what
 * is missing and that `target` needs it. */
pp_status pp_export_need_shape(const pp_profile *p, const char *target);
/* 1: the chosen configuration splits its layers evenly (no uneven or first/last split). */
int pp_export_split_even(const pp_profile_config *c);
/* Layers of each of the chosen configuration's stages (p x v for a one-pipe schedule: the
 * virtual stages of an interleaved or V-shaped one; p per pipe for a bidirectional one), in
 * data-flow order, as the schedule splits them (pp_sched_split_layers) into
 * layers[PP_EXPORT_MAX_STAGES]; *stages receives the count. PP_ERR_INVALID for a split the
 * schedules refuse. */
#define PP_EXPORT_MAX_STAGES 4096
pp_status pp_export_stage_layers(const pp_profile *p, int *layers, int *stages);
/* Layers of the first and last of those stages. */
pp_status pp_export_edge_layers(const pp_profile *p, int *first, int *last);
/* GPUs of the plan, and how they sit on nodes: devices per node and nodes. */
void pp_export_nodes(const pp_profile *p, int *devices, int *nodes);

/* For a refusal of the chosen schedule: the profile's fastest fitting runner-up whose schedule
 * Megatron-LM runs at most as `at_most` (upstream, or the fork too), written into buf as
 * "; the profile's fastest configuration it runs is runner-up #K, CONFIG (predicted S s per
 * step, X % slower: export it with --runner-up K)", or "" when none is; returns buf. */
char *pp_export_runner_up_hint(const pp_profile *p, pp_sched_megatron at_most, char *buf,
                               size_t n);

pp_status pp_export_nemo(const pp_profile *p, FILE *fp);
pp_status pp_export_nemo2(const pp_profile *p, FILE *fp);
pp_status pp_export_torchtitan(const pp_profile *p, FILE *fp);

#endif
