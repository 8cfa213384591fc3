/* config.c — the axis table of a configuration (pp_config.h): one row per field, with its JSON
 * key, its rule, its pprun flag and where pprun's line and pp_config_str carry it. The readers,
 * writers and command lines walk these rows; whether --chunks and --group apply is the schedule
 * registry's answer (a tunable chunk count), never a schedule name. Not here: what a search
 * varies (tuner/), how a program's other options parse (common/pp_opt.h). */
#include <string.h>

#include "pp_config.h"
#include "pp_sched.h"

const char *const pp_recompute_names[] = {"none", "selective", "full", NULL};

const char *pp_recompute_name(pp_recompute r)
{
    return r >= PP_RECOMPUTE_NONE && r <= PP_RECOMPUTE_FULL ? pp_recompute_names[r] : "none";
}


const char *const pp_shard_names[] = {"none", "optimizer", "gradients", NULL};

const char *pp_shard_name(pp_shard s)
{
    return s >= PP_SHARD_NONE && s <= PP_SHARD_GRADIENTS ? pp_shard_names[s] : "none";
}

int pp_config_sharded(const pp_config *c)
{
    return c->shard != PP_SHARD_NONE && c->d * (c->cp > 1 ? c->cp : 1) > 1;
}

/* pprun's line carries sharding only where there is some (a no-op over one replica). */
static int shard_set(const pp_config *c)
{
    return pp_config_sharded(c);
}

/* pprun runs ZeRO-1 and ZeRO-2 over the d x cp replicas, in fp32 and bf16 (a device's bf16
 * weight copies rewritten from the gathered parameters: runtime/executor_zero.c), ZeRO-2 not
 * with a schedule whose two pipes hold the same layers (its REDUCE sums whole gradients at the
 * step's end): runtime/executor.c says why. */
static const char *shard_pprun_cannot(const pp_config *c, int precision)
{
    (void)precision;
    if (!shard_set(c))
        return NULL;
    const pp_sched_desc *sd = c->schedule ? pp_sched_lookup(c->schedule) : NULL;
    if (c->shard == PP_SHARD_GRADIENTS && sd && sd->weight_replicas > 1)
        return " with a schedule whose pipes share layers";
    return NULL;
}

/* What pprun's expert parallelism does not run together with (runtime/executor.c's check_ep;
 * the MoE block itself runs on the CPU backend only, which the model check says). */
static const char *ep_pprun_cannot(const pp_config *c, int precision)
{
    (void)precision;
    if (c->ep <= 1)
        return NULL;
    return c->t > 1                                 ? " with tp"
           : c->cp > 1                              ? " with cp"
           : c->shard != PP_SHARD_NONE && c->d > 1 ? " with --shard"
                                                    : NULL;
}

/* pprun's line carries the recomputation only where there is one. */
static int recompute_set(const pp_config *c)
{
    return c->recompute != PP_RECOMPUTE_NONE;
}

static int recompute_layers_set(const pp_config *c)
{
    return c->recompute_layers > 0;
}

static const char *recompute_layers_rule(const pp_config *c)
{
    return c->recompute_layers > 0 && c->recompute != PP_RECOMPUTE_FULL
               ? "0 unless recompute is \"full\" (the first k layers of each stage)"
               : NULL;
}

static int tunable_chunks(const pp_config *c)
{
    const pp_sched_desc *d = pp_sched_lookup(c->schedule);
    return d && d->chunks == 0;
}

static int tensor_parallel(const pp_config *c)
{
    return c->t > 1;
}

static int context_parallel(const pp_config *c)
{
    return c->cp > 1;
}

static int expert_parallel(const pp_config *c)
{
    return c->ep > 1;
}

static int first_set(const pp_config *c)
{
    return c->first_layers != 0;
}

static int last_set(const pp_config *c)
{
    return c->last_layers != 0;
}

static const char *group_rule(const pp_config *c)
{
    const pp_sched_desc *d = pp_sched_lookup(c->schedule);
    return d && d->grouped && c->G < 1 ? "an integer >= 1 (the interleaved group size)" : NULL;
}

/* Megatron-Core builds the expert-parallel groups inside the data-parallel x context-parallel
 * ranks of one pipeline stage and tensor rank (parallel_state.py, its expert rank generator:
 * ep x expert-dp = dp x cp with expert tensor parallelism = t), so ep divides d x cp. Whether ep
 * divides the model's experts is the model's rule (tuner/axes.c: it needs the model). */
static const char *ep_rule(const pp_config *c)
{
    long dcp = (long)c->d * (c->cp > 1 ? c->cp : 1);
    return c->ep > 1 && dcp % c->ep
               ? "a divisor of d x cp (expert-parallel ranks are carved out of the data- and "
                 "context-parallel ranks, as Megatron-Core builds its expert groups)"
               : NULL;
}

#define OFF(f) offsetof(pp_config, f)
/* clang-format off */
static const pp_config_axis axes[] = {
    {.key = "schedule", .kind = PP_CONFIG_SCHEDULE, .offset = OFF(schedule), .shown = 1,
     .flag = "--schedule", .arg = "K", .line = 10},
    {.key = "p", .kind = PP_CONFIG_INT, .offset = OFF(p), .min = 1, .shown = 1,
     .flag = "--ranks", .arg = "D", .help = "pipeline ranks", .flag_min = 1,
     .profile_role = PP_CONFIG_PROFILE_LAYOUT, .line = 20},
    {.key = "v", .kind = PP_CONFIG_INT, .offset = OFF(v), .min = 1, .shown = 1,
     .flag = "--chunks", .arg = "v",
     .help = "stages per rank per pipe, interleaved (default: the\nschedule's own)",
     .flag_min = 1, .on_line = tunable_chunks, .line = 50},
    {.key = "G", .kind = PP_CONFIG_INT, .offset = OFF(G), .min = 0, .shown = 1,
     .rule = group_rule, .flag = "--group", .arg = "G",
     .help = "interleaved micro-batch group size (default D)", .flag_min = 1,
     .on_line = tunable_chunks,
     .line = 60},
    {.key = "b", .kind = PP_CONFIG_INT, .offset = OFF(b), .min = 1, .shown = 1,
     .flag = "--micro-batch-size", .arg = "b", .help = "sequences per micro-batch",
     .flag_min = 1, .line = 40},
    {.key = "d", .kind = PP_CONFIG_INT, .offset = OFF(d), .min = 1, .shown = 1,
     .flag = "--dp", .arg = "d", .help = "data-parallel pipeline replicas", .flag_min = 1,
     .profile_role = PP_CONFIG_PROFILE_LAYOUT, .line = 70},
    {.key = "t", .kind = PP_CONFIG_INT, .offset = OFF(t), .min = 1, .shown = 1,
     .flag = "--tp", .arg = "t",
     .help = "tensor-parallel ranks per pipeline rank, Megatron-style\n"
             "(t must divide the heads, KV heads and the MLP width;\n"
             "the embedding and LM head split over the vocabulary)",
     .flag_min = 1, .profile_role = PP_CONFIG_PROFILE_LAYOUT, .on_line = tensor_parallel,
     .line = 80},
    {.key = "N", .kind = PP_CONFIG_INT, .offset = OFF(N), .min = 1, .shown = 1,
     .flag = "--microbatches", .arg = "N", .help = "micro-batches per step and replica",
     .flag_min = 1, .line = 30},
    {.key = "split", .kind = PP_CONFIG_SPLIT, .offset = OFF(uneven), .shown = 1,
     .flag = "--uneven",
     .help = "Llama-3 split: one layer fewer on the first and last stage", .line = 100},
    {.key = "first_stage_layers", .kind = PP_CONFIG_SPLIT_LAYERS, .offset = OFF(first_layers),
     .flag = "--first-stage-layers", .arg = "A",
     .help = "layers of each pipe's first stage (it also holds the\n"
             "embedding); the stages not given share the rest evenly",
     .flag_min = 1, .on_line = first_set, .line = 110},
    {.key = "last_stage_layers", .kind = PP_CONFIG_SPLIT_LAYERS, .offset = OFF(last_layers),
     .flag = "--last-stage-layers", .arg = "Z",
     .help = "layers of each pipe's last stage (it also holds the head\n"
             "and the loss), as Megatron's --decoder-last-pipeline-\n"
             "num-layers; interleaved: the first/last virtual stage",
     .flag_min = 1, .on_line = last_set, .line = 120},
    {.key = "sequence_parallel", .kind = PP_CONFIG_BOOL, .offset = OFF(sequence_parallel),
     .optional_minor = 2, .flag = "--sequence-parallel",
     .help = "with --tp t > 1: LayerNorms and residuals on seq/t tokens\n"
             "per tensor rank (Megatron; t must divide --seq)",
     .profile_role = PP_CONFIG_PROFILE_FOLLOWS, .on_line = tensor_parallel, .line = 90},
    {.key = "recompute", .kind = PP_CONFIG_ENUM, .offset = OFF(recompute),
     .names = pp_recompute_names, .optional_minor = 2, .flag = "--recompute", .arg = "MODE",
     .help = "activation recomputation: none (default) | selective\n"
             "(each block's attention probabilities) | full (each\n"
             "block keeps its input, its forward rerun in backward)",
     .profile_role = PP_CONFIG_PROFILE_FOLLOWS, .on_line = recompute_set, .line = 130},
    {.key = "recompute_layers", .kind = PP_CONFIG_INT, .offset = OFF(recompute_layers),
     .min = 0, .optional_minor = 3, .rule = recompute_layers_rule, .flag = "--recompute-layers",
     .arg = "k", .help = "with --recompute full: only the first k blocks of each\n"
                         "stage (Megatron's block method; default all)",
     .flag_min = 1, .profile_role = PP_CONFIG_PROFILE_FOLLOWS, .on_line = recompute_layers_set,
     .line = 140},
    /* 1.2 wrote "distributed_optimizer" (true: "optimizer"); config_json.c still reads it */
    {.key = "shard", .kind = PP_CONFIG_ENUM, .offset = OFF(shard), .names = pp_shard_names,
     .optional_minor = 3, .flag = "--shard", .arg = "WHAT",
     .help = "over the --dp x --cp replicas: none (default) |\n"
             "optimizer (ZeRO-1: gradients reduce-scattered, AdamW on\n"
             "1/dp each, parameters all-gathered) | gradients (ZeRO-2:\n"
             "each micro-batch's gradient reduce-scattered into 1/dp\n"
             "shards, then as ZeRO-1; not with chimera or bitpipe);\n"
             "fp32 and bf16 (cuda: bf16 weight copies refreshed)",
     .profile_role = PP_CONFIG_PROFILE_FOLLOWS, .on_line = shard_set,
     .pprun_cannot = shard_pprun_cannot, .line = 75},
    {.key = "cp", .kind = PP_CONFIG_INT, .offset = OFF(cp), .min = 1, .dflt = 1,
     .optional_minor = 3, .shown = 2, .flag = "--cp", .arg = "c",
     .help = "context-parallel ranks sharing each sequence (Megatron's\n"
             "--context-parallel-size: rank i holds chunks i and 2c-1-i\n"
             "of 2c; ring attention: K/V passed around the group;\n"
             "2c must divide --seq)",
     .flag_min = 1, .profile_role = PP_CONFIG_PROFILE_LAYOUT, .on_line = context_parallel,
     .line = 85},
    {.key = "ep", .kind = PP_CONFIG_INT, .offset = OFF(ep), .min = 1, .dflt = 1,
     .optional_minor = 5, .shown = 2, .rule = ep_rule, .flag = "--ep", .arg = "e",
     .help = "expert-parallel ranks of a mixture-of-experts model,\n"
             "carved out of the --dp replicas (Megatron-Core's\n"
             "--expert-model-parallel-size): each holds experts/e of\n"
             "every MoE layer, tokens sent by all-to-all; e divides\n"
             "dp and the experts; cpu backend, not with tp, cp or\n"
             "--shard)",
     .flag_min = 1, .profile_role = PP_CONFIG_PROFILE_LAYOUT, .on_line = expert_parallel,
     .pprun_cannot = ep_pprun_cannot, .line = 87},
};
/* clang-format on */
#define N_AXES ((int)(sizeof axes / sizeof axes[0]))

const pp_config_axis *pp_config_axes(int *n)
{
    *n = N_AXES;
    return axes;
}

int pp_config_axes_by_line(const pp_config_axis **out, int max)
{
    int m = 0;
    for (int i = 0; i < N_AXES && m < max; i++) {
        if (!axes[i].flag)
            continue;
        int k = m++; /* insertion sort of the few rows */
        for (; k > 0 && out[k - 1]->line > axes[i].line; k--)
            out[k] = out[k - 1];
        out[k] = &axes[i];
    }
    return m;
}

const pp_config_axis *pp_config_axis_find(const char *key)
{
    for (int i = 0; key && i < N_AXES; i++)
        if (!strcmp(axes[i].key, key))
            return &axes[i];
    return NULL;
}

void pp_config_defaults(pp_config *c)
{
    *c = (pp_config){0};
    for (int i = 0; i < N_AXES; i++)
        pp_config_set(c, &axes[i], axes[i].dflt);
}

int pp_config_get(const pp_config *c, const pp_config_axis *a)
{
    if (a->kind == PP_CONFIG_SCHEDULE)
        return 0;
    int v;
    memcpy(&v, (const char *)c + a->offset, sizeof v); /* every other field is an int (enums:
                                                          int-sized, checked below) */
    return v;
}

void pp_config_set(pp_config *c, const pp_config_axis *a, int value)
{
    if (a->kind != PP_CONFIG_SCHEDULE)
        memcpy((char *)c + a->offset, &value, sizeof value);
}

_Static_assert(sizeof(pp_recompute) == sizeof(int) && sizeof(pp_shard) == sizeof(int),
               "enum axes are stored as int");

const char *pp_config_enum_name(const pp_config_axis *axis, int v)
{
    for (int k = 0; axis->names && axis->names[k]; k++)
        if (k == v)
            return axis->names[k];
    return "?";
}

int pp_config_axis_differs(const pp_config *a, const pp_config *b, const pp_config_axis *axis)
{
    if (axis->kind != PP_CONFIG_SCHEDULE)
        return pp_config_get(a, axis) != pp_config_get(b, axis);
    return strcmp(a->schedule ? a->schedule : "", b->schedule ? b->schedule : "") != 0;
}

int pp_config_equal(const pp_config *a, const pp_config *b)
{
    for (int i = 0; i < N_AXES; i++)
        if (pp_config_axis_differs(a, b, &axes[i]))
            return 0;
    return 1;
}

char *pp_config_value_str(const pp_config *c, const pp_config_axis *axis, char *buf, size_t n)
{
    int v = pp_config_get(c, axis);
    switch (axis->kind) {
    case PP_CONFIG_SCHEDULE: snprintf(buf, n, "%s", c->schedule ? c->schedule : ""); break;
    case PP_CONFIG_BOOL: snprintf(buf, n, "%s", v ? "true" : "false"); break;
    case PP_CONFIG_ENUM: snprintf(buf, n, "%s", pp_config_enum_name(axis, v)); break;
    case PP_CONFIG_SPLIT:
        snprintf(buf, n, "%s",
                 c->first_layers || c->last_layers ? "first-last" : v ? "uneven" : "even");
        break;
    default: snprintf(buf, n, "%d", v); break;
    }
    return buf;
}

void pp_config_sched_params(const pp_config *c, int layers, pp_sched_params *out)
{
    *out = (pp_sched_params){.ranks = c->p, .microbatches = c->N, .chunks = c->v, .group = c->G,
                             .layers = layers, .uneven = c->uneven,
                             .first_layers = c->first_layers, .last_layers = c->last_layers};
}

long long pp_config_stages(const pp_config *c)
{
    const pp_sched_desc *d = pp_sched_lookup(c->schedule);
    return (long long)c->p * (d && d->pipes == 2 ? 1 : c->v);
}

char *pp_config_split_str(const pp_config *c, char *buf, size_t n)
{
    char a[12] = "-", z[12] = "-";
    if (c->first_layers)
        snprintf(a, sizeof a, "%d", c->first_layers);
    if (c->last_layers)
        snprintf(z, sizeof z, "%d", c->last_layers);
    if (c->first_layers || c->last_layers)
        snprintf(buf, n, "%s/%s", a, z);
    else
        snprintf(buf, n, "%s", c->uneven ? "uneven" : "even");
    return buf;
}

char *pp_config_str(const pp_config *c, char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = '\0';
    for (int i = 0; i < N_AXES && len < n; i++) {
        const pp_config_axis *a = &axes[i];
        char split[32];
        const char *sep = len ? " " : "";
        if (!a->shown || (a->shown == 2 && pp_config_get(c, a) == a->dflt))
            continue;
        if (a->kind == PP_CONFIG_SCHEDULE)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", sep,
                                    c->schedule ? c->schedule : "?");
        else if (a->kind == PP_CONFIG_SPLIT)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", sep,
                                    pp_config_split_str(c, split, sizeof split));
        else if (a->min > 0 || pp_config_get(c, a)) /* a field that may be 0: only where set */
            len += (size_t)snprintf(buf + len, n - len, "%s%s=%d", sep, a->key,
                                    pp_config_get(c, a));
    }
    return buf;
}
