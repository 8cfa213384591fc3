/* pp_config.h — one parallel training configuration, the one type of it in pptune: the search's
 * candidates, a profile's chosen and runner-up configurations, what the exporters translate,
 * what `pprun` runs and its command line says.
 *
 * Each axis of a configuration is one field of pp_config and one row of the axis table
 * (config.c): its JSON key in a profile's "config" object, its pprun flag, its rule with the
 * reason, and where it shows. The JSON reader and writer (config_json.c), the pprun command
 * line (pprun_line.c), pprun's option parsing and --help (runtime/pprun/options.c) and
 * pp_config_str walk the rows; adding an axis is a field here and a row there.
 *
 * Vocabulary: p pipeline ranks (D in the schedules' papers), v model chunks per rank, G the
 * interleaved micro-batch group, b micro-batch size, d data-parallel replicas, t
 * tensor-parallel size, N micro-batches per step and replica = global batch / (b d)
 * (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
 * Megatron-LM", SC'21, arXiv:2104.04473).
 *
 * Plain values: a pp_config may be copied freely (its schedule name is static storage, or a
 * caller's string not yet checked against the registry).
 */
#ifndef PP_CONFIG_H
#define PP_CONFIG_H

#include <stddef.h>

#include "pp_common.h"
#include "pp_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Activation recomputation (Korthikanti et al., "Reducing Activation Recomputation in Large
 * Transformer Models", arXiv:2205.05198): none; selective (the attention core recomputed);
 * full (each layer's input kept, its forward recomputed in the backward). */
typedef enum { PP_RECOMPUTE_NONE = 0, PP_RECOMPUTE_SELECTIVE, PP_RECOMPUTE_FULL } pp_recompute;
/* "none", "selective", "full" (NULL-terminated, index = value). */
extern const char *const pp_recompute_names[];
/* Its name; "none" for a value out of range. */
const char *pp_recompute_name(pp_recompute r);

/* Optimizer-state and gradient sharding over the d data-parallel replicas (Rajbhandari et al.,
 * "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC'20): none (every
 * replica holds everything; the gradients all-reduced); optimizer (ZeRO-1, Megatron's
 * --use-distributed-optimizer: Adam's fp32 state 1/d per rank, the gradients reduce-scattered
 * once per step, the 16-bit weights all-gathered after the step); gradients (ZeRO-2: the fp32
 * main gradient 1/d per rank too, so each micro-batch's gradients are reduce-scattered as its
 * backward produces them; the weights stay whole: FSDP without resharding parameters). */
typedef enum { PP_SHARD_NONE = 0, PP_SHARD_OPTIMIZER, PP_SHARD_GRADIENTS } pp_shard;
/* "none", "optimizer", "gradients" (NULL-terminated, index = value). */
extern const char *const pp_shard_names[];
const char *pp_shard_name(pp_shard s);

typedef struct {
    const char *schedule; /* a name in the schedules' registry (its row's name: static storage),
                             or a name from a command line not yet checked; NULL: none yet */
    int p;                /* pipeline ranks per pipeline */
    int v;                /* model chunks (virtual stages) per rank; 1 unless the schedule has
                             several (interleaved: tunable; bitpipe, zbv, dualpipev: 2). pprun
                             reads 0 as "the schedule's own" */
    int G;                /* interleaved micro-batch group (Megatron's
                             microbatch_group_size_per_vp_stage); 0 where it does not apply
                             (pprun reads 0 as p) */
    int b;                /* micro-batch size, sequences */
    int d;                /* data-parallel replicas of the pipeline */
    int t;                /* tensor-parallel size */
    int N;                /* micro-batches per step and replica */
    int uneven;           /* 1: Llama 3's split, the first and last stage one layer fewer */
    int first_layers;     /* layers of a pipe's first stage (it also holds the embedding);
                             0: as the others (Megatron's --decoder-first-pipeline-num-layers) */
    int last_layers;      /* layers of a pipe's last stage (head and loss); 0: as the others */
    /* Settings of the run, searched like the layout (tuner/axes.c says which values each
     * candidate takes); the memory and time models read them here, the profile records them
     * per candidate, the exporters translate them. */
    int sequence_parallel;     /* Megatron sequence parallelism; needs t > 1 (a no-op at 1) */
    pp_recompute recompute;
    int recompute_layers;      /* with recompute full: 0 every layer of a stage; k > 0 only the
                                  first k layers of each stage (each model chunk), the others
                                  keep their activations (Megatron --recompute-method block
                                  --recompute-num-layers k; one k for every stage, as that flag
                                  gives) */
    pp_shard shard;            /* over d; a no-op at d = 1 */
    int cp;                    /* context-parallel ranks: the sequence split over cp ranks, K/V
                                  passed around a ring (Megatron --context-parallel-size);
                                  d = GPUs / (p t cp); 1: none */
    int ep;                    /* expert-parallel ranks of a mixture-of-experts model: each
                                  holds experts/ep of every MoE layer's routed experts, tokens
                                  dispatched to them by all-to-all; carved out of the d x cp
                                  ranks that hold the same dense weights (Megatron-Core's
                                  --expert-model-parallel-size, expert tensor parallelism = t);
                                  1: every rank holds every expert */
} pp_config;

/* 1: c shards something (shard not none over d x cp > 1 replicas). */
int pp_config_sharded(const pp_config *c);

/* ---- the axis table ------------------------------------------------------------------------- */

typedef enum {
    PP_CONFIG_SCHEDULE, /* const char *: a registry name */
    PP_CONFIG_INT,      /* int >= min */
    PP_CONFIG_BOOL,     /* int, 0 or 1; a flag without a value on pprun's line */
    PP_CONFIG_ENUM,     /* int, an index into names */
    PP_CONFIG_SPLIT,    /* int uneven, as the profile's "split": "even", "uneven", or
                           "first-last" when a SPLIT_LAYERS field is set */
    PP_CONFIG_SPLIT_LAYERS, /* int >= 0, in a profile only with split "first-last" */
} pp_config_kind;

/* What `pprun --profile FILE` does with the axis's flag given beside it. */
typedef enum {
    PP_CONFIG_PROFILE_FIXED = 0, /* the profile sets it: the flag is refused */
    PP_CONFIG_PROFILE_LAYOUT,    /* the flag makes the layout the user's (no launch check) */
    PP_CONFIG_PROFILE_FOLLOWS,   /* the profile's, unless a layout flag made the layout the
                                    user's: then the flag's */
} pp_config_profile_role;

typedef struct pp_config_axis {
    const char *key;    /* JSON key in a profile's "config"; also the name pp_config_str shows
                           ("p=4") and messages use */
    pp_config_kind kind;
    size_t offset;      /* of the field in pp_config */
    int min;            /* INT: the smallest value a profile may hold */
    const char *const *names; /* ENUM: the values' names, index = value, NULL-terminated */
    int dflt;           /* the value where nothing sets it (pp_config_defaults): what a
                           configuration has before a search varies the axis */
    int optional_minor; /* > 0: the profile's minor version that added the key; an older profile
                           without it keeps the reader's default (dflt, or its "options") */
    int shown;          /* 1: pp_config_str shows it; 2: only where it is not dflt */
    /* The rule beyond min, read from a profile: NULL when c satisfies it, else what the field
     * must be ("an integer >= 1 (the interleaved group size)"). NULL: no rule. */
    const char *(*rule)(const pp_config *c);
    /* pprun: its option (NULL: pprun has none), the value's name in --help (NULL: a flag
     * without a value), the help text, the smallest value it takes, what --profile does with
     * it; on_line: whether pprun's line carries it (NULL: always; a BOOL only when set). */
    const char *flag;
    const char *arg;
    const char *help;
    int flag_min;
    pp_config_profile_role profile_role;
    int (*on_line)(const pp_config *c);
    /* NULL where pprun runs c's value of the axis (the field NULL: every value), else what
     * qualifies the refusal ("" or " in bf16": precision is the run's pp_precision):
     * pp_profile_pprun_unrun names it, pprun refuses it */
    const char *(*pprun_cannot)(const pp_config *c, int precision);
    int line; /* its place on pprun's line, ascending (the words outside the configuration:
                 PP_CONFIG_LINE_*) */
} pp_config_axis;

/* Places of pprun's other words on its line, between the axes' `line` values. */
enum { PP_CONFIG_LINE_MODEL = 0, PP_CONFIG_LINE_SEQ = 95, PP_CONFIG_LINE_BACKEND = 200 };

/* The rows, in the order a profile's "config" and pp_config_str list them; *n their count.
 * Static storage. */
const pp_config_axis *pp_config_axes(int *n);
/* The rows that have a pprun flag, in their order on pprun's line (ascending `line`), into
 * out[0..max); returns their count. */
int pp_config_axes_by_line(const pp_config_axis **out, int max);
/* The row of JSON key `key`, or NULL. */
const pp_config_axis *pp_config_axis_find(const char *key);
/* Every axis at its row's dflt (the schedule NULL): where a configuration starts. */
void pp_config_defaults(pp_config *c);
/* The axis's field in c, as an int (a SCHEDULE or SPLIT row: 0), and setting it. */
int pp_config_get(const pp_config *c, const pp_config_axis *a);
void pp_config_set(pp_config *c, const pp_config_axis *a, int value);

/* An ENUM row's name of value v ("?" out of range). */
const char *pp_config_enum_name(const pp_config_axis *axis, int v);
/* 1 when the axis's value differs between a and b (schedules by name). */
int pp_config_axis_differs(const pp_config *a, const pp_config *b, const pp_config_axis *axis);
/* 1 when every axis is equal. */
int pp_config_equal(const pp_config *a, const pp_config *b);

/* The schedule generator's parameters for c on a model of `layers` layers (schedules/: ranks p,
 * micro-batches N, chunks v as given (0: the schedule's own; the registry refuses a count a
 * schedule cannot take), group G, the split). The one mapping from a configuration to them. */
void pp_config_sched_params(const pp_config *c, int layers, pp_sched_params *out);
/* The stages c splits its layers into, one pipe's: p x v for a one-pipe schedule (interleaved,
 * V-shaped), p for a two-pipe one; a 64-bit product, so that no profile's p and v can wrap it
 * (the profile reader refuses more than the model's layers, the exporters trust it). */
long long pp_config_stages(const pp_config *c);

/* ---- text ----------------------------------------------------------------------------------- */

/* The layer split as leaderboards, explanations and diffs show it: "even", "uneven" (Llama 3),
 * or "A/Z" (first- and last-stage layers, the rest even; "-" for one not given). Writes at most
 * n bytes into buf (NUL-terminated when n > 0); returns buf. */
char *pp_config_split_str(const pp_config *c, char *buf, size_t n);
/* One axis's value as a profile writes it ("interleaved", "4", "uneven", "true", "full"; a
 * SPLIT row shows "even", "uneven" or "first-last"). Returns buf. */
char *pp_config_value_str(const pp_config *c, const pp_config_axis *axis, char *buf, size_t n);
/* The configuration in one line, its shown axes in table order:
 * "interleaved p=4 v=2 G=4 b=1 d=8 t=8 N=32 even" (G only where it applies). Returns buf. */
char *pp_config_str(const pp_config *c, char *buf, size_t n);

/* ---- JSON (config_json.c) --------------------------------------------------------------------- */

struct json_t;
/* The configuration as a profile's "config" object (every axis's key, in table order). Returns
 * a new jansson object (json_t *, the caller's), NULL when out of memory. */
struct json_t *pp_config_to_json(const pp_config *c);
/* Reads a profile's "config" object o (its path `path`, "chosen.config", for messages; `file`
 * names the input) into *c, checking each axis's type, range and rule. A key that an older
 * minor version lacks (optional_minor) keeps *c's value: fill *c with the defaults first.
 * Errors: PP_ERR_PARSE `FILE: field "PATH.KEY": expected ..., got ...`. */
pp_status pp_config_from_json(const struct json_t *o, const char *file, const char *path,
                              pp_config *c);

#ifdef __cplusplus
}
#endif
#endif
