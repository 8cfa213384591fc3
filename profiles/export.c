/* export.c — the table of export targets: one row per target (its name, what it can express,
 * its writer), like the schedule registry. The dispatcher checks a profile against the row
 * before the writer runs (a chosen configuration, a schedule the target runs, the model's shape
 * where it builds the model) and says a refusal the same way for every target: the reason,
 * the fastest row of the profile's leaderboard the target runs (by its #), the other targets
 * that run the schedule, and the --schedules list that keeps a new search to what the target
 * runs. `pptune export --help`
 * and `pptune --help` describe the rows. Adding a target: its writer (export_<name>.c,
 * declared in export_impl.h) and one row here. Not here: any target's syntax. */
#include <string.h>

#include "export_impl.h"

/* ---- what each target runs (the registry's rows, never a schedule's name) ------------------ */

static int megatron_upstream(const pp_sched_desc *d)
{
    return d->megatron == PP_SCHED_MEGATRON_UPSTREAM;
}

static int megatron_fork_only(const pp_sched_desc *d)
{
    return d->megatron == PP_SCHED_MEGATRON_FORK;
}

/* NeMo 1 builds Megatron-Core's models without a virtual pipeline: one chunk per rank */
static int nemo1_runs(const pp_sched_desc *d)
{
    return megatron_upstream(d) && d->chunks == 1;
}

static int one_pipeline(const pp_sched_desc *d)
{
    return d->pipes == 1;
}

static void megatron_why_not(const pp_sched_desc *d, char *buf, size_t n)
{
    if (d->megatron == PP_SCHED_MEGATRON_FORK)
        snprintf(buf, n,
                 "upstream Megatron-LM has no %s schedule (only the fork switched on by %s runs "
                 "it)",
                 d->title, d->megatron_flag);
    else
        snprintf(buf, n, "Megatron-LM has no %s schedule (no upstream flag selects it)", d->title);
}

static void fork_why_not(const pp_sched_desc *d, char *buf, size_t n)
{
    snprintf(buf, n, "Megatron-LM has no %s schedule (neither upstream nor its BitPipe fork)",
             d->title);
}

static void nemo_why_not(const pp_sched_desc *d, char *buf, size_t n)
{
    snprintf(buf, n, "NeMo runs Megatron-Core's schedules, which have no %s schedule", d->title);
}

static void nemo1_why_not(const pp_sched_desc *d, char *buf, size_t n)
{
    if (megatron_upstream(d))
        snprintf(buf, n,
                 "NeMo 1 runs no virtual pipeline, which %s needs (megatron_gpt_model.py: "
                 "\"Virtual pipeline model parallel size is no longer supported for nemo 1.0\")",
                 d->title);
    else
        nemo_why_not(d, buf, n);
}

static void bidirectional_why_not(const pp_sched_desc *d, char *buf, size_t n)
{
    snprintf(buf, n,
             "%s is bidirectional (two pipelines over the same ranks), which PyTorch "
             "pipelining's schedule CSV and torchtitan's pipeline stages cannot express (one "
             "pipeline only)",
             d->title);
}

/* clang-format off */
static const pp_export_target targets[] = {
    {.format = "megatron", .title = "upstream Megatron-LM", .output = "a Megatron-LM launch script",
     .help = "a Megatron-LM launch script (bash): the environment validate_args\n"
             "demands, torchrun over the nodes, pretrain_gpt.py's flags on one line:\n"
             "layout (tensor, pipeline, virtual pipeline and its micro-batch group,\n"
             "the layer split), batch, the model (sizes, attention, MLP, norm and its\n"
             "epsilon, positions, head, biases), precision and memory options",
     .suggest = 1, .builds = "a Megatron-LM command", .runs = megatron_upstream,
     .why_not = megatron_why_not, .write = pp_export_megatron},
    {.format = "megatron", .target = "bitpipe-fork", .title = "Megatron-LM's BitPipe fork",
     .help = "the same for the fork of Megatron-LM that runs BitPipe\n"
             "(github.com/wuhouming/BitPipe), with its flag",
     .suggest = 1, .builds = "a Megatron-LM command", .runs = megatron_fork_only,
     .why_not = fork_why_not, .write = pp_export_megatron},
    {.format = "nemo", .title = "NeMo", .output = "NeMo 1 YAML",
     .help = "NeMo 1 megatron_gpt_config.yaml keys (trainer.*, model.*), the model",
     .suggest = 1, .builds = "a NeMo model configuration", .runs = nemo1_runs,
     .why_not = nemo1_why_not, .write = pp_export_nemo},
    {.format = "nemo2", .title = "NeMo 2.0", .output = "NeMo 2 Python",
     .help = "NeMo 2.0 Python: llm.GPTConfig, nl.MegatronStrategy, nl.Trainer",
     .suggest = 1, .builds = "a NeMo 2.0 model configuration", .runs = megatron_upstream,
     .why_not = nemo_why_not, .write = pp_export_nemo2},
    {.format = "torchtitan", .title = "torchtitan", .output = "torchtitan flags",
     .help = "--parallelism.* / --training.* overrides and the `pptune schedule\n"
             "--format csv` command writing the schedule they load",
     .suggest = 1, .runs = one_pipeline, .why_not = bidirectional_why_not,
     .write = pp_export_torchtitan},
    {.format = "pprun", .title = "pprun", .output = "pprun flags",
     .help = "pprun's flags on one line (the model as --model NAME or --model-config\n"
             "PATH: refused with the reason where pprun does not train it or the\n"
             "config.json changed; backend, precision, --tp, --sequence-parallel)",
     .line_settings_only = 1, .pprun_model = 1, .write = pp_export_pprun},
};
/* clang-format on */
#define N_TARGETS ((int)(sizeof targets / sizeof targets[0]))

const pp_export_target *pp_profile_export_targets(int *n)
{
    *n = N_TARGETS;
    return targets;
}

static int runs(const pp_export_target *t, const pp_sched_desc *d)
{
    return !t->runs || t->runs(d);
}

static const pp_export_target *row(const char *format, const char *target)
{
    for (int i = 0; format && i < N_TARGETS; i++)
        if (!strcmp(targets[i].format, format) &&
            (target ? targets[i].target && !strcmp(targets[i].target, target)
                    : !targets[i].target))
            return &targets[i];
    return NULL;
}

char *pp_profile_export_names(const char *sep, char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = '\0';
    for (int i = 0; i < N_TARGETS && len < n; i++)
        if (!targets[i].target)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? sep : "",
                                    targets[i].format);
    return buf;
}

/* "megatron, nemo, nemo2, torchtitan or pprun" */
static char *names_or(char *buf, size_t n)
{
    pp_profile_export_names(", ", buf, n);
    char *last = strrchr(buf, ',');
    if (last) {
        char tail[64];
        snprintf(tail, sizeof tail, "%s", last + 1);
        snprintf(last, n - (size_t)(last - buf), " or%s", tail);
    }
    return buf;
}

/* "bitpipe-fork, with --format megatron" for every variant row */
static char *variants(char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = '\0';
    for (int i = 0; i < N_TARGETS && len < n; i++)
        if (targets[i].target)
            len += (size_t)snprintf(buf + len, n - len, "%s%s, with --format %s",
                                    len ? "; " : "", targets[i].target, targets[i].format);
    return buf;
}

const pp_export_target *pp_profile_export_find(const char *format, const char *target)
{
    char known[256];
    if (!row(format, NULL))
        return PP_ERR(PP_ERR_INVALID, "export format \"%s\": expected %s", format ? format : "",
                      names_or(known, sizeof known)),
               NULL;
    const pp_export_target *t = row(format, target);
    if (!t)
        PP_ERR(PP_ERR_INVALID, "--target \"%s\": expected %s", target,
               variants(known, sizeof known));
    return t;
}

/* The registry's schedules t runs (with `also`, when not NULL, those it runs too), joined by
 * sep. */
static char *runs_list(const pp_export_target *t, const pp_export_target *also, const char *sep,
                       char *buf, size_t n)
{
    int k;
    const pp_sched_desc *s = pp_sched_generators(&k);
    size_t len = 0;
    if (n)
        buf[0] = '\0';
    for (int i = 0; i < k && len < n; i++)
        if (runs(t, &s[i]) || (also && runs(also, &s[i])))
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? sep : "", s[i].name);
    return buf;
}

char *pp_profile_export_schedules(const pp_export_target *t, const char *sep, char *buf,
                                  size_t n)
{
    return runs_list(t, NULL, sep, buf, n);
}

int pp_profile_export_runs(const pp_export_target *t, const char *name)
{
    const pp_sched_desc *d = pp_sched_lookup(name);
    return d && runs(t, d);
}

void pp_profile_export_help(FILE *fp)
{
    for (int i = 0; i < N_TARGETS; i++) {
        const pp_export_target *t = &targets[i];
        char label[64], list[256];
        snprintf(label, sizeof label, "%s%s%s", t->format, t->target ? " --target " : "",
                 t->target ? t->target : "");
        /* the label, then the help's lines in a column after it (below a long label) */
        fprintf(fp, "  %-10s", label);
        if (strlen(label) > 10)
            fprintf(fp, "\n  %-10s", "");
        for (const char *h = t->help; *h;) {
            size_t len = strcspn(h, "\n");
            fprintf(fp, " %.*s\n", (int)len, h);
            h += len + (h[len] == '\n');
            if (*h)
                fprintf(fp, "  %-10s", "");
        }
        fprintf(fp, "  %-10s runs: %s\n", "",
                t->runs ? runs_list(t, NULL, ", ", list, sizeof list) : "every schedule");
    }
}

/* "; the profile's fastest configuration it runs is #K, CONFIG (predicted S s per step, X %
 * slower: export it with --rank K)", or "" when none fits and runs on t. K is the
 * leaderboard's number (#1 the chosen one, so the runner-up i is #i + 2). */
static char *runner_up_hint(const pp_profile *p, const pp_export_target *t, char *buf, size_t n)
{
    snprintf(buf, n, "%s", "");
    for (int i = 0; i < p->n_runners_up; i++) {
        const pp_profile_candidate *r = &p->runners_up[i];
        if (!r->fits || !runs(t, pp_export_desc(&r->config)))
            continue;
        char text[160], sec[16];
        double slower = p->chosen.step_time_s > 0
                            ? 100 * (r->step_time_s / p->chosen.step_time_s - 1)
                            : 0;
        snprintf(buf, n,
                 "; the profile's fastest configuration it runs is #%d, %s (predicted %s s per "
                 "step, %.1f %% slower: export it with --rank %d)",
                 i + 2, pp_config_str(&r->config, text, sizeof text),
                 pp_fmt_seconds(r->step_time_s, sec, sizeof sec), slower, i + 2);
        break;
    }
    return buf;
}

/* "export it with --format megatron --target bitpipe-fork (Megatron-LM's BitPipe fork runs
 * it), or ": the other targets named as ways out that run d; "" when none does. */
static char *ways_out(const pp_export_target *t, const pp_sched_desc *d, char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = '\0';
    for (int i = 0; i < N_TARGETS && len < n; i++) {
        const pp_export_target *o = &targets[i];
        if (o == t || !o->suggest || !runs(o, d))
            continue;
        len += (size_t)snprintf(buf + len, n - len, "%s--format %s%s%s (%s runs it)",
                                len ? " or " : "export it with ", o->format,
                                o->target ? " --target " : "", o->target ? o->target : "",
                                o->title);
    }
    if (len && len < n)
        snprintf(buf + len, n - len, ", or ");
    return buf;
}

static pp_status refuse_schedule(const pp_profile *p, const pp_export_target *t,
                                 const pp_sched_desc *d)
{
    char list[256];
    const pp_export_target *base = t->target ? row(t->format, NULL) : NULL;
    if (base && runs(base, d)) /* a variant asked for what its format runs itself */
        return PP_ERR(PP_ERR_INVALID,
                      "%s: --target %s is for a profile of a schedule only %s runs (%s); this "
                      "one (%s) runs on %s: drop --target",
                      p->name, t->target, t->title, runs_list(t, NULL, ", ", list, sizeof list),
                      d->name, base->title);
    /* a new search for the target: what it runs (a variant: and what its format runs, which
     * the variant's format exports without --target) */
    char why[320], hint[320], ways[320], with_for[64] = "";
    t->why_not(d, why, sizeof why);
    if (!t->target) /* a format's own row: pptune --for FORMAT keeps a search to it */
        snprintf(with_for, sizeof with_for, "--for %s or ", t->format);
    return PP_ERR(PP_ERR_UNSUPPORTED, "%s: %s%s; %sre-run the search with %s--schedules %s",
                  p->name, why, runner_up_hint(p, t, hint, sizeof hint),
                  ways_out(t, d, ways, sizeof ways), with_for,
                  runs_list(t, base, ",", list, sizeof list));
}

/* A target that builds the model needs the shape a 1.1 profile records. */
static pp_status need_shape(const pp_profile *p, const pp_export_target *t)
{
    if (!t->builds || p->model.has_shape)
        return PP_OK;
    return PP_ERR(PP_ERR_UNSUPPORTED,
                  "%s: profile version %d.%d does not record the model's norm, biases, "
                  "positions and head width (model.norm, model.linear_bias, model.position, "
                  "model.head_dim: profile 1.1), which %s needs to build the same model; "
                  "re-run the search with this pptune to write them",
                  p->name, p->version_major, p->version_minor, t->builds);
}

pp_status pp_profile_export(const pp_profile *p, const pp_export_target *t, FILE *fp)
{
    if (!p->has_chosen)
        return PP_ERR(PP_ERR_INVALID,
                      "%s has no chosen configuration (nothing fitted the "
                      "memory): nothing to export",
                      p->name);
    const pp_sched_desc *d = pp_export_desc(&p->chosen.config);
    if (!runs(t, d))
        return refuse_schedule(p, t, d);
    PP_TRY(need_shape(p, t));
    int stages;
    PP_TRY(pp_export_stages(p, &stages)); /* the bound every writer relies on */
    PP_TRY(t->write(p, fp));
    return PP_OK;
}
