/* profile.c — pprun --profile: train with the configuration a pptune profile chose (the
 * profile's reader, profiles/pp_profile.h, validates the file). The profile decides the
 * model, schedule, ranks, micro-batches and their size, chunks, group, data-parallel
 * replicas, tensor-parallel ranks, sequence length and split; giving one of those flags too is refused rather than
 * silently overridden. Training options (--steps, --lr, --data, ...) stay pprun's. */
#include <stdio.h>
#include <string.h>

#include "pp_profile.h"
#include "pprun.h"

static pp_profile *g_profile;

static const char *const CONFIG_FLAGS[] = {
    "--model", "--schedule", "--ranks", "--microbatches", "--micro-batch-size", "--chunks",
    "--group", "--dp",       "--seq",   "--uneven",       "--layers",           "--tp",
    NULL};

/* The first configuration flag on the command line, or NULL. */
static const char *config_flag(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        for (int k = 0; CONFIG_FLAGS[k]; k++) {
            size_t n = strlen(CONFIG_FLAGS[k]);
            if (!strncmp(argv[i], CONFIG_FLAGS[k], n) && (argv[i][n] == '\0' || argv[i][n] == '='))
                return CONFIG_FLAGS[k];
        }
    return NULL;
}

int pprun_apply_profile(pprun_opts *o, int argc, char **argv)
{
    if (!o->profile)
        return -1;
    const char *clash = config_flag(argc, argv);
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
    if (p->options.sequence_parallel) {
        /* running it without would train another configuration than the profile measured */
        fprintf(stderr,
                "pprun: --profile %s: options.sequence_parallel is true, and pprun does not run "
                "sequence parallelism yet (tensor parallelism runs without it): tune again "
                "without it\n",
                o->profile);
        return 2;
    }
    const pp_profile_config *c = &p->chosen.config;
    o->model_name = p->model.name;
    o->schedule = c->schedule;
    o->ranks = c->p;
    o->microbatches = c->N;
    o->micro_batch = c->b;
    const pp_sched_desc *d = pp_sched_lookup(c->schedule); /* the reader checked the name */
    o->chunks = d->chunks == 0 ? c->v : 0; /* tunable chunks: the profile's; else the row's */
    o->group = d->grouped ? c->G : 0;
    o->dp = c->d;
    o->dp_set = 1;
    o->tp = c->t > 1 ? c->t : 1; /* the runtime splits each stage over t ranks (Megatron) */
    o->seq = p->model.seq;
    o->uneven = c->uneven;
    return -1;
}

void pprun_profile_release(void)
{
    pp_profile_destroy(g_profile);
    g_profile = NULL;
}
