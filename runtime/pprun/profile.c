/* profile.c — pprun --profile: train with the configuration a pptune profile chose (the
 * profile's reader, profiles/pp_profile.h, validates the file). The profile decides the
 * model, schedule, micro-batches and their size, chunks, group, sequence length, split, backend,
 * precision and the layout (pipeline ranks, data-parallel replicas, tensor parallelism); giving
 * one of the model or schedule flags too is refused rather than silently overridden.
 *
 * The launch is checked against the layout the profile planned: the processes the launcher
 * started (one per GPU of the plan, or one process of rank threads where the plan fits one
 * node), how many it put on a node where it says, and the backend. A mismatch is refused in
 * one line saying what the profile needs and what was found (the README's main job, 256 GPUs, must not start 256 CPU rank threads). Giving
 * a layout flag (--ranks, --dp, --tp) overrides the profile's layout explicitly and skips the
 * check. Training options (--steps, --lr, --data, ...) stay pprun's. A profile of a config.json
 * model (model.origin, profile 1.4) trains that file, refused when its SHA-256 is not the one
 * the search recorded. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_profile.h"
#include "pprun.h"

static pp_profile *g_profile;

/* What the profile fixes beside its configuration's axes (PP_CONFIG_PROFILE_FIXED): a clash is
 * refused. */
static const char *const MODEL_FLAGS[] = {"--model", "--model-config", "--seq", "--layers", NULL};

/* argv[i] is the option `flag`, alone or as --flag=value. */
static int is_flag(const char *word, const char *flag)
{
    size_t n = strlen(flag);
    return !strncmp(word, flag, n) && (word[n] == '\0' || word[n] == '=');
}

/* The first option on the command line that is one of `extra` or the flag of an axis with
 * `role`, or NULL. */
static const char *find_flag(pp_config_profile_role role, const char *const *extra, int argc,
                             char **argv)
{
    int n;
    const pp_config_axis *axes = pp_config_axes(&n);
    for (int i = 1; i < argc; i++) {
        for (int k = 0; extra && extra[k]; k++)
            if (is_flag(argv[i], extra[k]))
                return extra[k];
        for (int k = 0; k < n; k++)
            if (axes[k].flag && axes[k].profile_role == role && is_flag(argv[i], axes[k].flag))
                return axes[k].flag;
    }
    return NULL;
}

/* Processes per node as the launcher says (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, else the
 * first count of Slurm's SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE, "8(x32)"), 0 when it
 * does not. */
static int launcher_per_node(void)
{
    static const char *const VARS[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE",
                                       "SLURM_TASKS_PER_NODE", NULL};
    for (int i = 0; VARS[i]; i++) {
        const char *v = getenv(VARS[i]);
        long n = v ? strtol(v, NULL, 10) : 0;
        if (n > 0 && n < 1 << 20)
            return (int)n;
    }
    return 0;
}

/* The processes a launch of the profile's layout takes: one per device of the plan, or one
 * (rank threads) when the plan fits on one node. */
static int check_launch(const pprun_opts *o, const pp_profile *p)
{
    const pp_config *c = &p->chosen.config;
    /* the reader bounded it by the cluster's */
    long devices = (long)c->p * c->t * c->cp * c->d;
    int nodes = (int)((devices + p->cluster.gpus_per_node - 1) / p->cluster.gpus_per_node);
    pp_launch_info li;
    if (pp_launch_detect(&li) != PP_OK) {
        fprintf(stderr, "pprun: bad launcher environment: %s\n", pp_err_text());
        return 2;
    }
    int threads = !strcmp(o->transport, "thread") || li.size == 1;
    const char *kind = p->cluster.gpu ? "GPU" : "device";
    int want_per_node = (int)(devices < p->cluster.gpus_per_node ? devices
                                                                 : p->cluster.gpus_per_node);
    int per_node = threads ? 0 : launcher_per_node();
    if (!threads && li.size == devices && per_node && per_node != want_per_node) {
        fprintf(stderr,
                "pprun: --profile %s needs %d processes per node, one per %s of a %s node; the "
                "launcher (%s) put %d on a node; --ranks/--dp/--tp override the layout\n",
                o->profile, want_per_node, kind, p->cluster.name, li.launcher, per_node);
        return 2;
    }
    if (threads ? nodes == 1 : li.size == devices) {
        /* the processes are right: this node must also show the GPUs they take, one each
         * (all of them for rank threads); a GPU profile on a machine without them is refused
         * here, not as a CUDA failure later */
        int here = threads ? (int)devices : (per_node ? per_node : want_per_node);
        const pp_backend_row *be = pp_backend_row_for_device(p->cluster.gpu ? "gpu" : "cpu");
        int seen = be && be->device_memory ? pp_backend_device_count(pp_backend_kind(be)) : here;
        if (seen < here) {
            fprintf(stderr,
                    "pprun: --profile %s needs %d GPUs on this node, one per rank (%s %s); "
                    "found %d%s; --ranks/--dp/--tp override the layout\n",
                    o->profile, here, p->cluster.name, p->cluster.device, seen,
                    seen ? "" : " (no CUDA device, or pprun built without CUDA)");
            return 2;
        }
        return -1;
    }
    if (threads)
        fprintf(stderr,
                "pprun: --profile %s needs %ld processes, one per %s (%d nodes x %d %ss of %s, "
                "p=%d t=%d d=%d: e.g. srun -N %d --ntasks-per-node %d pprun --profile %s); found "
                "1 process (launcher %s)%s; --ranks/--dp/--tp override the layout\n",
                o->profile, devices, kind, nodes,
                want_per_node, kind, p->cluster.name, c->p, c->t, c->d, nodes, want_per_node,
                o->profile, li.launcher, strcmp(o->transport, "thread") ? "" : " (--transport thread)");
    else
        fprintf(stderr,
                "pprun: --profile %s needs %ld processes, one per %s (p=%d t=%d d=%d on %d "
                "nodes of %s); found %d processes (launcher %s); --ranks/--dp/--tp override the "
                "layout\n",
                o->profile, devices, kind, c->p, c->t, c->d, nodes, p->cluster.name, li.size,
                li.launcher);
    return 2;
}

/* The model the profile was planned for. A config.json (model.origin, 1.4) is read again, as
 * the search read it: the same bytes (its SHA-256 checked) or refused. Else its shape (profiles
 * since 1.1) over the model table's row of the same name, which gives what a profile does not
 * record (norm epsilon, the rotary scaling's factors); a 1.0 profile names a preset only.
 * Either way the profile's layer count: a search of a few blocks of a big model (pptune
 * --layers, origin.layers) trains those. -1 done, 2 refused. */
static int profile_model(pprun_opts *o, const struct pp_profile_model *pm)
{
    o->model_name = pm->name;
    const char *kind = pm->origin_kind ? pm->origin_kind : "preset";
    if (!strcmp(kind, "config.json")) {
        char who[PATH_MAX + 16];
        snprintf(who, sizeof who, "--profile %s", o->profile);
        if (pp_profile_model_config_check(who, pm->origin_path, pm->origin_sha256) != PP_OK) {
            fprintf(stderr, "pprun: %s\n", pp_err_text());
            return 2;
        }
        o->model_config = pm->origin_path; /* main.c reads it (model_hf.c, as the search did) */
        o->layers = pm->layers; /* the blocks planned: all, or its first (origin.layers, 1.6) */
        return -1;
    }
    if (strcmp(kind, "preset") != 0) {
        fprintf(stderr,
                "pprun: --profile %s: model %s was read from pptune's model JSON %s, which pprun "
                "does not read: train a preset or a HuggingFace config.json\n",
                o->profile, pm->name, pm->origin_path);
        return 2;
    }
    if (!pm->has_shape)
        return -1; /* the preset by name, as before */
    const pp_model_row *row = pp_model_row_find(pm->name);
    pp_model_cfg m = row ? row->cfg : (pp_model_cfg){0};
    m.layers = pm->layers, m.hidden = pm->hidden, m.heads = pm->heads, m.vocab = pm->vocab;
    m.ffn = pm->ffn, m.seq = m.seq > pm->seq ? m.seq : pm->seq;
    m.kv_heads = pm->kv_heads == pm->heads ? 0 : pm->kv_heads;
    m.head_dim = pm->head_dim * pm->heads == pm->hidden ? 0 : pm->head_dim;
    m.qk_norm = pm->qk_norm;
    m.mlp = pm->gated_mlp ? PP_MLP_SWIGLU : PP_MLP_GELU;
    m.norm = pm->norm_bias ? PP_NORM_LAYERNORM : PP_NORM_RMSNORM;
    m.pos = pm->learned_pos ? PP_POS_LEARNED : PP_POS_ROPE;
    m.rope_theta = pm->learned_pos ? 0 : pm->rope_theta;
    int lin = PP_NOBIAS_QKV | PP_NOBIAS_OUT | PP_NOBIAS_MLP;
    m.nobias = (pm->norm_bias ? 0 : PP_NOBIAS_NORM) |
               (pm->linear_bias ? 0 : pm->qkv_bias ? PP_NOBIAS_OUT | PP_NOBIAS_MLP : lin);
    m.untied = !pm->tied_embeddings;
    const char *sc = pm->rope_scaling ? pm->rope_scaling : "";
    if (strcmp(sc, row ? row->cfg.rope_scaling_name : "") != 0 && strcmp(sc, "default") != 0) {
        fprintf(stderr,
                "pprun: --profile %s: model %s has rope_scaling \"%s\", which the profile records "
                "by name only (not its factors): train it with --model-config config.json and "
                "the profile's layout flags\n",
                o->profile, pm->name, sc);
        return 2;
    }
    o->profile_model = m;
    o->has_profile_model = 1;
    return -1;
}

/* The configuration pprun runs: the profile's, with the schedule's own chunks and group where
 * they are not tunable; with a layout flag the layout axes (and those that follow it) keep the
 * flags' values. */
static void take_config(pprun_opts *o, const pp_config *c, int layout_given)
{
    pp_config flags = o->cfg;
    o->cfg = *c;
    const pp_sched_desc *d = pp_sched_lookup(c->schedule); /* the reader checked the name */
    o->cfg.v = d->chunks == 0 ? c->v : 0; /* tunable chunks: the profile's; else the row's */
    o->cfg.G = d->grouped ? c->G : 0;
    o->cfg.sequence_parallel = c->sequence_parallel && c->t > 1;
    int n;
    const pp_config_axis *axes = pp_config_axes(&n);
    for (int k = 0; layout_given && k < n; k++)
        if (axes[k].profile_role != PP_CONFIG_PROFILE_FIXED)
            pp_config_set(&o->cfg, &axes[k], pp_config_get(&flags, &axes[k]));
}

int pprun_apply_profile(pprun_opts *o, int argc, char **argv)
{
    if (!o->profile)
        return -1;
    const char *clash = find_flag(PP_CONFIG_PROFILE_FIXED, MODEL_FLAGS, argc, argv);
    if (clash) {
        fprintf(stderr,
                "pprun: %s and --profile: the profile sets the configuration; give one "
                "or the other\n",
                clash);
        return 2;
    }
    pp_status st = pp_profile_read(o->profile, &g_profile);
    if (st != PP_OK) {
        fprintf(stderr, "pprun: --profile: %s\n", pp_err_text());
        return 2;
    }
    const pp_profile *p = g_profile;
    if (!p->has_chosen) {
        fprintf(stderr, "pprun: --profile %s: no configuration was chosen (nothing fitted)\n",
                o->profile);
        return 2;
    }
    const pp_config *c = &p->chosen.config;
    const char *layout = find_flag(PP_CONFIG_PROFILE_LAYOUT, NULL, argc, argv);
    if (!layout) {
        int rc = check_launch(o, p);
        if (rc >= 0)
            return rc;
        o->dp_set = 1;
        /* the backend and precision the profile planned for (the export's --backend cuda
         * --precision bf16) */
        const pp_backend_row *be = pp_backend_row_for_device(p->cluster.gpu ? "gpu" : "cpu");
        o->backend = be ? pp_backend_kind(be) : PP_RT_BACKEND_CPU;
        o->precision = p->options.bf16 && pp_backend_row_has_precision(be, PP_PREC_BF16)
                           ? PP_PREC_BF16
                           : PP_PREC_FP32;
    } else {
        fprintf(stderr,
                "pprun: --profile %s: %s given, so the layout is yours, not the profile's "
                "(p=%d t=%d d=%d)\n",
                o->profile, layout, c->p, c->t, c->d);
    }
    take_config(o, c, layout != NULL); /* the runtime splits each stage over t ranks (Megatron) */
    int rc = pprun_check_settings(o); /* the profile's settings, as the flags' */
    if (rc >= 0)
        return rc;
    o->seq = p->model.seq;
    return profile_model(o, &p->model);
}

void pprun_profile_release(void)
{
    pp_profile_destroy(g_profile);
    g_profile = NULL;
}
