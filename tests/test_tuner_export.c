/* test_tuner_export.c — `pptune export --format megatron` describes the model and the plan the
 * profile holds: every emitted flag is one of Megatron-LM's arguments with a value of its type
 * (tests/fixtures/megatron/arguments.txt, read from Megatron-LM's arguments.py), and parsing
 * the flags back (this file's own small parser) gives the profile's configuration and a model
 * whose parameter count, by the tuner's own formula, is the profile's. For the README's main
 * job (gpt-13b on 32 dgx-h100 nodes), llama3-70b on 16 and an uneven interleaved variant. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_profile.h"
#include "pp_sched.h"
#include "pp_tune.h"

#define PROF PP_FIXTURES_DIR "/profiles/"

/* ---- Megatron-LM's argument table ---------------------------------------------------------- */
typedef struct {
    char name[80], type[400];
} arg_row;
static arg_row g_args[1024];
static int g_n_args;

static void load_args(void)
{
    if (g_n_args)
        return;
    FILE *fp = fopen(PP_FIXTURES_DIR "/megatron/arguments.txt", "r");
    cr_assert_not_null(fp);
    char line[512];
    while (fgets(line, sizeof line, fp) && g_n_args < 1024) {
        if (line[0] == '#')
            continue;
        arg_row *r = &g_args[g_n_args];
        if (sscanf(line, "%79s %399s", r->name, r->type) == 2)
            g_n_args++;
    }
    fclose(fp);
    cr_assert_gt(g_n_args, 300, "the table has Megatron's arguments");
}

static const arg_row *arg_find(const char *name)
{
    for (int i = 0; i < g_n_args; i++)
        if (!strcmp(g_args[i].name, name))
            return &g_args[i];
    return NULL;
}

static int is_int(const char *s)
{
    char *end;
    if (!s || !*s)
        return 0;
    strtol(s, &end, 10);
    return *end == '\0';
}

static int is_num(const char *s)
{
    char *end;
    if (!s || !*s)
        return 0;
    strtod(s, &end);
    return *end == '\0';
}

/* value is of the table's type (NULL: the flag took no value) */
static int value_ok(const arg_row *a, const char *value)
{
    if (!strcmp(a->type, "flag"))
        return value == NULL;
    if (!value)
        return 0;
    if (!strcmp(a->type, "int"))
        return is_int(value);
    if (!strcmp(a->type, "float"))
        return is_num(value);
    if (!strcmp(a->type, "str"))
        return 1;
    if (!strncmp(a->type, "choice:", 7)) {
        char list[400];
        snprintf(list, sizeof list, "%s", a->type + 7);
        for (char *save, *t = strtok_r(list, "|", &save); t; t = strtok_r(NULL, "|", &save))
            if (!strcmp(t, value))
                return 1;
        return 0;
    }
    return 0;
}

/* ---- the emitted line, parsed back --------------------------------------------------------- */
#define MAX_FLAGS 96
typedef struct {
    int n;
    char *name[MAX_FLAGS], *value[MAX_FLAGS]; /* value NULL for a flag without one */
    char *buf;
} flags;

static void flags_parse(char *line, flags *f)
{
    memset(f, 0, sizeof *f);
    f->buf = line;
    char *save = NULL;
    line[strcspn(line, "\n")] = '\0';
    for (char *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (!strncmp(t, "--", 2)) {
            cr_assert_lt(f->n, MAX_FLAGS);
            f->name[f->n++] = t;
        } else {
            cr_assert_gt(f->n, 0, "a value before any flag: %s", t);
            cr_assert_null(f->value[f->n - 1], "two values for %s", f->name[f->n - 1]);
            f->value[f->n - 1] = t;
        }
    }
}

static const char *get(const flags *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->name[i], name))
            return f->value[i] ? f->value[i] : "";
    return NULL;
}

static int get_int(const flags *f, const char *name, int dflt)
{
    const char *v = get(f, name);
    return v ? atoi(v) : dflt;
}

static void check_against_table(const flags *f)
{
    load_args();
    for (int i = 0; i < f->n; i++) {
        const arg_row *a = arg_find(f->name[i]);
        cr_assert_not_null(a, "%s is not a Megatron-LM argument", f->name[i]);
        cr_assert(value_ok(a, f->value[i]), "%s %s: Megatron-LM takes %s", f->name[i],
                  f->value[i] ? f->value[i] : "(no value)", a->type);
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(f->name[i], f->name[j], "%s given twice", f->name[i]);
    }
}

/* The model the flags describe, in the tuner's terms (Megatron's defaults where a flag is
 * absent: LayerNorm, learned positions, tied head, biases, MHA, ffn 4 h). */
static void flags_model(const flags *f, pp_tune_model *m)
{
    memset(m, 0, sizeof *m);
    m->layers = get_int(f, "--num-layers", 0);
    m->hidden = get_int(f, "--hidden-size", 0);
    m->heads = get_int(f, "--num-attention-heads", 0);
    m->kv_heads = get(f, "--group-query-attention") ? get_int(f, "--num-query-groups", 1)
                                                    : m->heads;
    m->ffn = get_int(f, "--ffn-hidden-size", 4 * m->hidden);
    m->vocab = get_int(f, "--vocab-size", 0);
    m->seq = get_int(f, "--seq-length", 0);
    m->head_dim = get_int(f, "--kv-channels", 0);
    m->gated_mlp = get(f, "--swiglu") != NULL;
    const char *norm = get(f, "--normalization");
    m->norm_bias = !norm || !strcmp(norm, "LayerNorm");
    const char *pos = get(f, "--position-embedding-type");
    m->learned_pos = !pos || !strcmp(pos, "learned_absolute");
    m->tied_embed = get(f, "--untie-embeddings-and-output-weights") == NULL;
    m->linear_bias = get(f, "--disable-bias-linear") == NULL;
    m->qkv_bias = get(f, "--add-qkv-bias") != NULL;
    cr_assert_eq(get_int(f, "--make-vocab-size-divisible-by", 128), 1,
                 "the vocabulary is pptune's, not padded");
    cr_assert_eq(get_int(f, "--max-position-embeddings", 0), m->seq);
}

/* noinline: once inlined, GCC mistakes the memstream's buffer for this frame's (a false
 * dangling-pointer warning) */
__attribute__((noinline)) static char *export_line(const pp_profile *p,
                                                   const pp_export_target *fmt, pp_status *st)
{
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    *st = pp_profile_export(p, fmt, fp);
    fclose(fp);
    return text;
}

/* The Megatron-LM export is a launch script whose pretrain_gpt.py flags are one line after
 * it ("  --... \"); the script is rewritten in place to that line, with its newline, and
 * returned (a refusal's empty text as it is). */
static char *megatron_flags_line(char *script)
{
    static const char head[] = "pretrain_gpt.py \\\n  ";
    char *at = strstr(script, head);
    if (!at)
        return script;
    at += strlen(head);
    size_t n = strcspn(at, "\n");
    cr_assert(n > 2 && !strncmp(at + n - 2, " \\", 2), "the flags line goes on: %.*s", (int)n, at);
    memmove(script, at, n - 2);
    memcpy(script + n - 2, "\n", 2);
    return script;
}

static char *megatron_export(const pp_profile *p, const pp_export_target *fmt, pp_status *st)
{
    return megatron_flags_line(export_line(p, fmt, st));
}

/* A profile of tests/fixtures/profiles, read (the caller destroys it). */
static pp_profile *fixture(const char *file)
{
    char path[512];
    snprintf(path, sizeof path, PROF "%s", file);
    pp_profile *p;
    cr_assert_eq(pp_profile_read(path, &p), PP_OK, "%s", pp_err_msg());
    return p;
}

/* Exports p, checks every flag against the table and parses the configuration and the model
 * back; preset: the tuner's model of that name, whose parameter count must be the same. */
static void round_trip(const pp_profile *p, const char *preset)
{
    pp_status st;
    char *line = megatron_export(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    flags f;
    flags_parse(line, &f);
    check_against_table(&f);
    const pp_config *c = &p->chosen.config;
    /* the layout */
    cr_assert_eq(get_int(&f, "--tensor-model-parallel-size", 1), c->t);
    cr_assert_eq(get_int(&f, "--pipeline-model-parallel-size", 1), c->p);
    int L = get_int(&f, "--num-layers", 0);
    const pp_sched_desc *d = pp_sched_lookup(c->schedule);
    int want_v = d->chunks == 0 ? c->v : 1;
    /* the split as the schedules make it, stage by stage */
    pp_sched_split split = {.uneven = c->uneven, .first = c->first_layers, .last = c->last_layers};
    int begin[4097], S = c->p * want_v;
    cr_assert_eq(pp_sched_split_layers(L, S, &split, begin), PP_OK);
    const char *quoted = get(&f, "--pipeline-model-parallel-layout");
    char layout_buf[8192] = "", *layout = NULL;
    int v;
    if (quoted) {
        /* single-quoted for the shell (| and *) */
        size_t n = strlen(quoted);
        cr_assert(n >= 2 && quoted[0] == '\'' && quoted[n - 1] == '\'', "unquoted: %s", quoted);
        cr_assert_lt(n, sizeof layout_buf);
        memcpy(layout_buf, quoted + 1, n - 2);
        layout = layout_buf;
        /* Megatron-Core's layout: E, then each virtual stage's t*n separated by |, then L; its
         * stage count over p is the virtual pipeline size */
        cr_assert_eq(layout[0], 'E', "%s", layout);
        cr_assert_eq(layout[strlen(layout) - 1], 'L', "%s", layout);
        int k = 0;
        for (const char *q = layout + 1; *q && *q != 'L'; k++) {
            int n = 0, used = 0;
            cr_assert_eq(sscanf(q, "t*%d%n", &n, &used), 1, "stage %d of %s", k, layout);
            cr_assert(k < S, "%s has more than %d stages", layout, S);
            cr_assert_eq(n, begin[k + 1] - begin[k], "stage %d of %s", k, layout);
            q += used;
            if (*q == '|')
                q++;
        }
        cr_assert_eq(k, S, "%s: %d stages, want %d", layout, k, S);
        v = S / c->p;
        cr_assert_null(get(&f, "--num-virtual-stages-per-pipeline-rank"), "one of the three");
        cr_assert_null(get(&f, "--num-layers-per-virtual-pipeline-stage"), "one of the three");
        cr_assert_null(get(&f, "--decoder-first-pipeline-num-layers"));
    } else {
        int per_vstage = get_int(&f, "--num-layers-per-virtual-pipeline-stage", 0);
        v = per_vstage ? L / (c->p * per_vstage)
                       : get_int(&f, "--num-virtual-stages-per-pipeline-rank", 1);
        if (c->uneven || c->first_layers || c->last_layers) {
            cr_assert_eq(v, 1, "a split of virtual stages goes in the layout");
            cr_assert_eq(get_int(&f, "--decoder-first-pipeline-num-layers", 0), begin[1]);
            cr_assert_eq(get_int(&f, "--decoder-last-pipeline-num-layers", 0),
                         begin[S] - begin[S - 1]);
        } else {
            cr_assert_null(get(&f, "--decoder-first-pipeline-num-layers"));
        }
    }
    cr_assert_eq(v, want_v, "virtual stages per rank");
    if (v > 1)
        cr_assert_eq(get_int(&f, "--microbatch-group-size-per-virtual-pipeline-stage", 0), c->G);
    /* the batch: Megatron derives d from the world size, N from the batch */
    cr_assert_eq(get_int(&f, "--micro-batch-size", 0), c->b);
    cr_assert_eq(get_int(&f, "--global-batch-size", 0), p->global_batch);
    cr_assert_eq(p->global_batch / (c->b * c->d), c->N);
    /* precision and the settings (the candidate's config: its own since 1.2) */
    cr_assert_eq(get(&f, "--bf16") != NULL, p->options.bf16);
    cr_assert_eq(get(&f, "--sequence-parallel") != NULL, c->sequence_parallel && c->t > 1);
    cr_assert_eq(get(&f, "--use-distributed-optimizer") != NULL, c->shard == PP_SHARD_OPTIMIZER);
    const char *dps = get(&f, "--data-parallel-sharding-strategy");
    cr_assert_eq(dps != NULL, c->shard == PP_SHARD_GRADIENTS);
    if (dps) /* Megatron-FSDP's ZeRO-2: optimizer state and gradients, not the parameters */
        cr_assert(get(&f, "--use-megatron-fsdp") && !strcmp(dps, "optim_grads"), "%s", dps);
    cr_assert_eq(get_int(&f, "--context-parallel-size", 1), c->cp);
    const char *rg = get(&f, "--recompute-granularity");
    cr_assert_str_eq(rg ? rg : "none", pp_recompute_name(c->recompute));
    if (c->recompute == PP_RECOMPUTE_FULL) {
        cr_assert_str_eq(get(&f, "--recompute-method"),
                         c->recompute_layers ? "block" : "uniform");
        cr_assert_eq(get_int(&f, "--recompute-num-layers", 0),
                     c->recompute_layers ? c->recompute_layers : 1);
    }
    /* the model: same sizes and the same parameter count, by the tuner's formula */
    pp_tune_model m, ref;
    flags_model(&f, &m);
    cr_assert_eq(m.layers, p->model.layers);
    cr_assert_eq(m.hidden, p->model.hidden);
    cr_assert_eq(m.seq, p->model.seq);
    cr_assert_eq(m.vocab, p->model.vocab);
    pp_tune_params mine, theirs;
    pp_tune_model_params(&m, &mine);
    cr_assert_eq(pp_tune_model_preset(preset, &ref), PP_OK);
    pp_tune_model_params(&ref, &theirs);
    cr_assert_float_eq(mine.total, theirs.total, 0.5, "%s: the flags describe %.0f parameters, "
                       "pptune's model %.0f", preset, mine.total, theirs.total);
    /* the profile stores it with ten significant digits */
    cr_assert(fabs(mine.total - p->model.parameters) <= 1e-9 * p->model.parameters,
              "%.0f vs the profile's %.0f", mine.total, p->model.parameters);
    free(line);
}

Test(tuner_export, megatron_flags_of_the_readme_main_job_round_trip)
{
    pp_profile *p = fixture("gpt-13b-dgx-h100-x32-v1.1.json");
    cr_assert_eq(p->cluster.nodes, 32);
    cr_assert_eq(p->chosen.config.t, 2);
    round_trip(p, "gpt-13b");
    pp_profile_destroy(p);
}

Test(tuner_export, megatron_flags_of_llama3_70b_on_16_nodes_round_trip)
{
    pp_profile *p = fixture("llama3-70b-dgx-h100-x16.json");
    cr_assert_eq(p->cluster.nodes, 16);
    round_trip(p, "llama3-70b");
    pp_status st;
    char *line = megatron_export(p, pp_profile_export_find("megatron", NULL), &st);
    /* the Llama block, said explicitly */
    cr_assert(strstr(line, " --group-query-attention --num-query-groups 8 --swiglu "
                           "--normalization RMSNorm --position-embedding-type rope "
                           "--rotary-base 500000 --untie-embeddings-and-output-weights "
                           "--disable-bias-linear "),
              "%s", line);
    free(line);
    pp_profile_destroy(p);
}

/* A profile fixture with another chosen configuration. */
static pp_profile *profile_with(const char *file, const char *schedule, int p_, int v, int G,
                                int b, int N, int d, int t, const char *split)
{
    json_error_t e;
    char path[512];
    snprintf(path, sizeof path, PROF "%s", file);
    json_t *j = json_load_file(path, 0, &e);
    cr_assert_not_null(j, "%s", e.text);
    json_t *c = json_object_get(json_object_get(j, "chosen"), "config");
    json_object_set_new(c, "schedule", json_string(schedule));
    json_object_set_new(c, "p", json_integer(p_));
    json_object_set_new(c, "v", json_integer(v));
    json_object_set_new(c, "G", json_integer(G));
    json_object_set_new(c, "b", json_integer(b));
    json_object_set_new(c, "N", json_integer(N));
    json_object_set_new(c, "d", json_integer(d));
    json_object_set_new(c, "t", json_integer(t));
    json_object_set_new(c, "split", json_string(split));
    json_object_set_new(json_object_get(j, "options"), "sequence_parallel", json_true());
    json_object_set_new(json_object_get(j, "options"), "recompute", json_string("selective"));
    char *text = json_dumps(j, 0);
    json_decref(j);
    pp_profile *p;
    cr_assert_eq(pp_profile_parse(text, strlen(text), "variant.json", &p), PP_OK, "%s",
                 pp_err_msg());
    free(text);
    return p;
}

#define llama_with(...) profile_with("llama3-70b-dgx-h100-x16.json", __VA_ARGS__)

Test(tuner_export, uneven_splits_give_first_and_last_stage_layers)
{
    /* llama3-405b on 64 nodes: the search chose 1F1B with the Llama 3 split over 32 stages,
     * 126 + 2 = 128 = 32 x 4: first and last stage 3 layers, the others 4 */
    pp_profile *p = fixture("llama3-405b-dgx-h100-x64.json");
    cr_assert(p->chosen.config.uneven);
    round_trip(p, "llama3-405b");
    pp_status st;
    char *line = megatron_export(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert(strstr(line, "--decoder-first-pipeline-num-layers 3 "
                           "--decoder-last-pipeline-num-layers 3 "),
              "%s", line);
    free(line);
    pp_profile_destroy(p);
    /* interleaved p = 8 x v = 2 = 16 stages: 128 / 16 = 8, first and last virtual stage 7;
     * Megatron's first/last counts are a pipeline rank's (split evenly over its virtual
     * stages), so the split goes in --pipeline-model-parallel-layout, stage by stage */
    p = profile_with("llama3-405b-dgx-h100-x64.json", "interleaved", 8, 2, 8, 1, 128, 16, 4,
                     "uneven");
    round_trip(p, "llama3-405b");
    line = megatron_export(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert(strstr(line, "--pipeline-model-parallel-layout "
                           "'Et*7|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*8|t*7L' "
                           "--microbatch-group-size-per-virtual-pipeline-stage 8 "),
              "%s", line);
    cr_assert_null(strstr(line, "--decoder-first-pipeline-num-layers"), "%s", line);
    cr_assert(strstr(line, " --bf16 --sequence-parallel --use-distributed-optimizer "
                           "--recompute-granularity selective\n"),
              "%s", line);
    free(line);
    pp_profile_destroy(p);
}

/* The export is a script a user runs on every node: torchrun over the profile's nodes, and the
 * environment Megatron's validate_args demands (CUDA_DEVICE_MAX_CONNECTIONS=1 with tensor
 * parallelism, which it stops without; none without), the user's flags after pptune's. The
 * model's norm epsilon goes in as --norm-epsilon, in a form float() reads back exactly. */
Test(tuner_export, megatron_export_is_a_launch_script_with_what_validate_args_demands)
{
    pp_profile *p = fixture("llama3-70b-dgx-h100-x16.json");
    pp_status st;
    char *text = export_line(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(!strncmp(text, "#!/usr/bin/env bash\n", 20), "%s", text);
    cr_assert(strstr(text, "\nset -euo pipefail\n"), "%s", text);
    cr_assert(strstr(text, "\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n"), "t = 8: %s", text);
    cr_assert(strstr(text, "\nexec torchrun --nnodes 16 --nproc-per-node 8 "), "%s", text);
    cr_assert(strstr(text, "  pretrain_gpt.py \\\n  --tensor-model-parallel-size 8 "), "%s", text);
    size_t n = strlen(text);
    cr_assert(n > 7 && !strcmp(text + n - 7, "  \"$@\"\n"), "the user's flags last: %s", text);
    cr_assert_null(strstr(text, "--norm-epsilon"), "a profile without norm_eps: the default");
    free(text);
    pp_profile_destroy(p);
    p = llama_with("1f1b", 16, 1, 0, 1, 512, 1, 1, "even"); /* t = 1 */
    text = export_line(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert_null(strstr(text, "CUDA_DEVICE_MAX_CONNECTIONS"), "t = 1: %s", text);
    cr_assert(strstr(text, "torchrun --nnodes 2 --nproc-per-node 8 "), "16 GPUs: %s", text);
    free(text);
    pp_profile_destroy(p);
    /* Qwen2.5's rms_norm_eps */
    json_error_t e;
    json_t *j = json_load_file(PROF "llama3-70b-dgx-h100-x16.json", 0, &e);
    cr_assert_not_null(j, "%s", e.text);
    json_object_set_new(json_object_get(j, "model"), "norm_eps", json_real(1e-6));
    char *doc = json_dumps(j, 0);
    json_decref(j);
    cr_assert_eq(pp_profile_parse(doc, strlen(doc), "eps.json", &p), PP_OK, "%s", pp_err_msg());
    free(doc);
    cr_assert_float_eq(p->model.norm_eps, 1e-6, 1e-20);
    text = megatron_export(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(strstr(text, " --norm-epsilon 1.0e-06 "), "%s", text);
    flags f;
    flags_parse(text, &f);
    check_against_table(&f);
    cr_assert(strtod(get(&f, "--norm-epsilon"), NULL) == 1e-6);
    free(text);
    pp_profile_destroy(p);
}

Test(tuner_export, schedules_upstream_megatron_cannot_run_are_refused_with_the_reason)
{
    pp_status st;
    /* BitPipe: only its fork of Megatron, and only when asked for by name */
    pp_profile *p = llama_with("bitpipe", 4, 2, 0, 1, 128, 4, 8, "even"); /* 1 x 128 x 4 */
    char *line = megatron_export(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED);
    cr_assert(strstr(pp_err_text(), "upstream Megatron-LM has no BitPipe schedule"), "%s",
              pp_err_text());
    cr_assert(strstr(pp_err_text(), "--target bitpipe-fork"), "%s", pp_err_text());
    cr_assert_str_eq(line, "", "nothing is printed with a refusal");
    free(line);
    line = megatron_export(p, pp_profile_export_find("megatron", "bitpipe-fork"), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(strstr(line, " --enable-bitpipe-schedule\n"), "%s", line);
    flags f;
    flags_parse(line, &f);
    check_against_table(&f); /* the fork's flag is in the table, marked as the fork's */
    free(line);
    pp_profile_destroy(p);
    /* Chimera: no Megatron */
    p = llama_with("chimera", 4, 1, 0, 1, 128, 4, 8, "even");
    line = megatron_export(p, pp_profile_export_find("megatron", "bitpipe-fork"), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED);
    cr_assert(strstr(pp_err_text(), "Megatron-LM has no Chimera schedule"), "%s", pp_err_text());
    free(line);
    pp_profile_destroy(p);
    /* the fork's target for a schedule upstream runs is a mistake, said */
    p = llama_with("1f1b", 4, 1, 0, 1, 128, 4, 8, "even");
    line = megatron_export(p, pp_profile_export_find("megatron", "bitpipe-fork"), &st);
    cr_assert_eq(st, PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "drop --target"), "%s", pp_err_text());
    free(line);
    pp_profile_destroy(p);
}

Test(tuner_export, a_version_1_0_profile_reads_but_a_megatron_export_says_what_it_lacks)
{
    pp_profile *p = fixture("gpt-13b-dgx-h100-x32.json");
    cr_assert_eq(p->version_minor, 0);
    cr_assert_not(p->model.has_shape);
    cr_assert_eq(p->model.kv_heads, 40); /* what 1.0 did write is read */
    cr_assert(p->cluster.gpu, "a bf16 1.0 profile is a GPU profile");
    pp_status st;
    char *line = megatron_export(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED);
    cr_assert(strstr(pp_err_text(), "profile version 1.0 does not record the model's norm"), "%s",
              pp_err_text());
    cr_assert(strstr(pp_err_text(), "re-run the search"), "%s", pp_err_text());
    free(line);
    pp_profile_destroy(p);
}

/* ---- NeMo: every key is one NeMo's source reads (tests/fixtures/nemo/keys.txt) ------------- */

static int nemo_key_known(const char *section, const char *key)
{
    FILE *fp = fopen(PP_FIXTURES_DIR "/nemo/keys.txt", "r");
    cr_assert_not_null(fp);
    char line[256], s[32], k[200];
    int found = 0;
    while (!found && fgets(line, sizeof line, fp))
        found = line[0] != '#' && sscanf(line, "%31s %199s", s, k) == 2 &&
                !strcmp(s, section) && !strcmp(k, key);
    fclose(fp);
    return found;
}

/* The NeMo 1 YAML: each "key:" line's dotted path is a key of megatron_gpt_config or one the
 * model reads; returns how many keys were checked. */
static int check_nemo1_yaml(const char *text, const pp_profile *p)
{
    char path[3][80] = {{0}};
    int n = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        int indent = (int)strspn(l, " ");
        if (l[indent] == '#' || !strchr(l, ':'))
            continue;
        cr_assert(indent % 2 == 0 && indent <= 4, "indent: %s", l);
        int depth = indent / 2;
        snprintf(path[depth], sizeof path[depth], "%.*s", (int)(strchr(l, ':') - l - indent),
                 l + indent);
        char key[256] = "";
        for (int i = 0; i <= depth; i++)
            snprintf(key + strlen(key), sizeof key - strlen(key), "%s%s", i ? "." : "", path[i]);
        const char *value = strchr(l, ':') + 1;
        if (!*value) /* a section: trainer, model, model.optim */
            continue;
        cr_assert(nemo_key_known("yaml", key), "%s: not a key NeMo's megatron_gpt reads", key);
        n++;
        if (!strcmp(key, "model.num_layers"))
            cr_assert_eq(atoi(value), p->model.layers);
        if (!strcmp(key, "model.ffn_hidden_size"))
            cr_assert_eq(atoi(value), p->model.ffn);
    }
    free(copy);
    return n;
}

/* NeMo 2.0's Python: the keyword arguments of llm.GPTConfig( and nl.MegatronStrategy( are
 * names of those classes (NeMo's and Megatron-Core's source). */
static int check_nemo2_python(const char *text)
{
    const char *section = NULL;
    int n = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strstr(l, "= llm.GPTConfig("))
            section = "gptconfig";
        else if (strstr(l, "= nl.MegatronStrategy("))
            section = "strategy";
        else if (!strcmp(l, ")"))
            section = NULL;
        else if (section && !strncmp(l, "    ", 4) && strchr(l, '=')) {
            char key[80];
            snprintf(key, sizeof key, "%.*s", (int)(strchr(l, '=') - l - 4), l + 4);
            cr_assert(nemo_key_known(section, key), "%s: not a %s field in NeMo's source", key,
                      section);
            n++;
        }
    }
    free(copy);
    return n;
}

static int virtual_pipeline(const pp_profile *p)
{
    return pp_sched_lookup(p->chosen.config.schedule)->chunks == 0 && p->chosen.config.v > 1;
}

Test(tuner_export, nemo_yaml_and_nemo2_carry_the_whole_model_with_nemos_own_names)
{
    static const char *const files[] = {"gpt-13b-dgx-h100-x32-v1.1.json",
                                        "llama3-70b-dgx-h100-x16.json",
                                        "llama3-405b-dgx-h100-x64.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, PROF "%s", files[i]);
        pp_profile *p;
        cr_assert_eq(pp_profile_read(path, &p), PP_OK, "%s", pp_err_msg());
        pp_status st;
        char *y = export_line(p, pp_profile_export_find("nemo", NULL), &st);
        if (virtual_pipeline(p)) { /* NeMo 1 builds no virtual pipeline */
            cr_assert_eq(st, PP_ERR_UNSUPPORTED);
            cr_assert(strstr(pp_err_text(), "no longer supported for nemo 1.0"), "%s",
                      pp_err_text());
        } else {
            cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
            cr_assert_gt(check_nemo1_yaml(y, p), 25, "%s", y);
            cr_assert(strstr(y, "  precision: bf16\n"), "%s", y);
            if (p->chosen.config.uneven) /* Megatron-Core's first/last counts */
                cr_assert(strstr(y, "  num_layers_in_first_pipeline_stage: 3\n"
                                    "  num_layers_in_last_pipeline_stage: 3\n"),
                          "%s", y);
        }
        free(y);
        char *py = export_line(p, pp_profile_export_find("nemo2", NULL), &st);
        cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
        cr_assert_gt(check_nemo2_python(py), 20, "%s", py);
        char want[96];
        snprintf(want, sizeof want, "    num_layers=%d,\n", p->model.layers);
        cr_assert(strstr(py, want), "%s", py);
        snprintf(want, sizeof want, "    pipeline_model_parallel_size=%d,\n", p->chosen.config.p);
        cr_assert(strstr(py, want), "%s", py);
        if (p->chosen.config.uneven) /* the split NeMo 1's YAML cannot say */
            cr_assert(strstr(py, "    num_layers_in_first_pipeline_stage=3,\n"
                                 "    num_layers_in_last_pipeline_stage=3,\n"),
                      "%s", py);
        free(py);
        pp_profile_destroy(p);
    }
    /* the micro-batch group of an interleaved profile: NeMo 2.0 takes it; the vocabulary
     * padded to a multiple of t = 8 as Megatron pads it (128256 is one) */
    pp_profile *p = llama_with("interleaved", 4, 2, 8, 1, 128, 4, 8, "even");
    pp_status st;
    char *py = export_line(p, pp_profile_export_find("nemo2", NULL), &st);
    cr_assert(strstr(py, "    virtual_pipeline_model_parallel_size=2,\n"
                         "    microbatch_group_size_per_vp_stage=8,\n"),
              "%s", py);
    cr_assert_null(strstr(py, "pipeline_model_parallel_layout"), "80 = 4 x 2 x 10: %s", py);
    cr_assert(strstr(py, "    vocab_size=128256,"), "%s", py);
    check_nemo2_python(py);
    free(py);
    pp_profile_destroy(p);
    /* gpt-13b interleaved p = 2 x v = 7 uneven, t = 2: the split of virtual stages goes in
     * MegatronStrategy's layout (GPTConfig's chunk-count assert, 20 % 7, is skipped for one);
     * 50257 padded to 50258 */
    p = profile_with("gpt-13b-dgx-h100-x32-v1.1.json", "interleaved", 2, 7, 2, 1, 16, 64, 2,
                     "uneven");
    py = export_line(p, pp_profile_export_find("nemo2", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(strstr(py, "    pipeline_model_parallel_layout=\"Et*2|t*3|t*3|t*3|t*3|t*3|t*3|t*3|"
                         "t*3|t*3|t*3|t*3|t*3|t*2L\",\n"),
              "%s", py);
    cr_assert(strstr(py, "    vocab_size=50258,"), "%s", py);
    cr_assert_gt(check_nemo2_python(py), 20);
    free(py);
    pp_profile_destroy(p);
}

/* ---- torchtitan: its CLI's option names, the schedule CSV it loads ------------------------- */

static int torchtitan_option_known(const char *name)
{
    FILE *fp = fopen(PP_FIXTURES_DIR "/torchtitan/cli_options.txt", "r");
    cr_assert_not_null(fp);
    char line[256];
    int found = 0;
    while (!found && fgets(line, sizeof line, fp)) {
        line[strcspn(line, "\n")] = '\0';
        found = line[0] != '#' && !strcmp(line, name);
    }
    fclose(fp);
    return found;
}

/* Runs the "# schedule CSV first: pptune schedule ..." command a torchtitan export starts with
 * in a fresh directory, checks the CSV it writes with `pptune schedule --check`, then runs
 * `also` (a shell command) there. */
static void run_schedule_command(const char *text, const char *also)
{
    const char *cmd = strstr(text, "# schedule CSV first: pptune schedule ");
    cr_assert_not_null(cmd, "%s", text);
    cmd += strlen("# schedule CSV first: pptune");
    char dir[] = "/tmp/pptune_tt_XXXXXX", run[1024];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(run, sizeof run, "cd %s && %s/tuner/pptune%.*s && %s/tuner/pptune schedule --check "
                              "pptune-schedule.csv > /dev/null && %s",
             dir, PP_BINARY_DIR, (int)strcspn(cmd, "\n"), cmd, PP_BINARY_DIR, also);
    cr_assert_eq(system(run), 0, "%s", run);
    snprintf(run, sizeof run, "rm -rf %s", dir);
    cr_assert_eq(system(run), 0);
}

Test(tuner_export, torchtitan_overrides_and_the_schedule_csv_they_load)
{
    pp_profile *p = fixture("gpt-13b-dgx-h100-x32-v1.1.json");
    pp_status st;
    char *text = export_line(p, pp_profile_export_find("torchtitan", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(strstr(text, "data parallelism: replicated"), "%s", text);
    /* the last line: the overrides, each an option of torchtitan's CLI, then the activation
     * checkpointing the profile planned (none), as tyro's subcommand */
    char *last = strrchr(text, '\n');
    *last = '\0';
    last = strrchr(text, '\n') + 1;
    char *ac = strstr(last, " activation-checkpoint:");
    cr_assert_not_null(ac, "%s", last);
    cr_assert_str_eq(ac, " activation-checkpoint:none", "recompute none: %s", last);
    *ac = '\0';
    flags f;
    flags_parse(last, &f);
    cr_assert_gt(f.n, 10);
    for (int i = 0; i < f.n; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s", f.name[i] + 2);
        char *no = strstr(name, ".no_"); /* a boolean's negation */
        if (no)
            memmove(no + 1, no + 4, strlen(no + 4) + 1);
        cr_assert(torchtitan_option_known(name), "--%s is not a torchtitan option", name);
    }
    cr_assert_eq(get_int(&f, "--parallelism.pipeline_parallel_degree", 0), p->chosen.config.p);
    cr_assert_eq(get_int(&f, "--parallelism.tensor_parallel_degree", 0), p->chosen.config.t);
    cr_assert_eq(get_int(&f, "--parallelism.data_parallel_shard_degree", 0), 1);
    cr_assert_eq(get_int(&f, "--parallelism.data_parallel_replicate_degree", 0),
                 p->chosen.config.d);
    cr_assert_eq(get_int(&f, "--parallelism.num_pp_microbatches", 0), p->chosen.config.N);
    cr_assert_eq(get_int(&f, "--training.max_context_length", 0), p->model.seq);
    cr_assert_str_eq(get(&f, "--parallelism.pipeline_parallel_schedule_csv"),
                     "pptune-schedule.csv");
    /* with the CSV, torchtitan still asks get_schedule_class for the name, for its stage count
     * and placement: PyTorch's looped multi-stage class, never _PipelineScheduleRuntime; 40
     * layers over 8 x 5 stages; and no CUDA graphs with pipeline parallelism */
    cr_assert_str_eq(get(&f, "--parallelism.pipeline_parallel_schedule"), "Interleaved1F1B");
    cr_assert_eq(get_int(&f, "--parallelism.pipeline_parallel_layers_per_stage", 0), 1);
    cr_assert_eq(get_int(&f, "--parallelism.pipeline_parallel_first_stage_less_layers", -1), 0);
    cr_assert_eq(get_int(&f, "--parallelism.pipeline_parallel_last_stage_less_layers", -1), 0);
    cr_assert_not_null(get(&f, "--training.disable_cuda_graphs"));
    /* the schedule command the output starts with writes a CSV pptune reads back and checks,
     * in the compute_only form torchtitan's _load_csv(path) reads: no communication cells */
    run_schedule_command(text, "! grep -q 'SEND\\|RECV\\|REDUCE' pptune-schedule.csv");
    free(text);
    pp_profile_destroy(p);
    /* a bidirectional schedule has no form in PyTorch's CSV */
    p = llama_with("chimera", 4, 1, 0, 1, 128, 4, 8, "even");
    text = export_line(p, pp_profile_export_find("torchtitan", NULL), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED);
    cr_assert(strstr(pp_err_text(), "Chimera is bidirectional"), "%s", pp_err_text());
    free(text);
    pp_profile_destroy(p);
}

/* The settings a 1.3 profile's config carries: shard, cp, block recomputation. */
static pp_profile *with_settings(const char *shard, int cp, const char *recompute, int k)
{
    json_error_t e;
    json_t *j = json_load_file(PROF "llama3-70b-dgx-h100-x16.json", 0, &e);
    cr_assert_not_null(j, "%s", e.text);
    json_t *c = json_object_get(json_object_get(j, "chosen"), "config");
    /* 16 nodes x 8 = p 16 x t 8 x d 1: p 16 / cp x t 8 x cp */
    json_object_set_new(c, "p", json_integer(16 / cp));
    json_object_set_new(c, "shard", json_string(shard));
    json_object_set_new(c, "cp", json_integer(cp));
    json_object_set_new(c, "recompute", json_string(recompute));
    json_object_set_new(c, "recompute_layers", json_integer(k));
    json_object_set_new(j, "version_minor", json_integer(3));
    char *text = json_dumps(j, 0);
    json_decref(j);
    pp_profile *p;
    pp_status st = pp_profile_parse(text, strlen(text), "settings.json", &p);
    free(text);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    return p;
}

/* Every axis reaches every target: Megatron's flags checked against arguments.py's table and
 * parsed back (round_trip: sharding, cp, block recomputation), NeMo 2's keys against NeMo's,
 * torchtitan's options against its CLI; what a target cannot say is refused naming it. */
Test(tuner_export, every_setting_reaches_megatron_nemo2_and_torchtitan)
{
    pp_profile *p = with_settings("gradients", 2, "full", 3);
    cr_assert_eq(p->chosen.config.cp, 2);
    cr_assert_eq(p->chosen.config.shard, PP_SHARD_GRADIENTS);
    round_trip(p, "llama3-70b");
    pp_status st;
    char *text = export_line(p, pp_profile_export_find("nemo2", NULL), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED);
    cr_assert(strstr(pp_err_text(), "ZeRO-2") && strstr(pp_err_text(), "--shard optimizer"),
              "%s", pp_err_text());
    free(text);
    text = export_line(p, pp_profile_export_find("torchtitan", NULL), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED, "block recomputation has no torchtitan form");
    cr_assert(strstr(pp_err_text(), "first 3 layers"), "%s", pp_err_text());
    free(text);
    /* pprun runs recomputation, cp and ZeRO-2 (over d x cp), recomputation with cp too, all
     * in this profile's bf16: the line carries every one */
    text = export_line(p, pp_profile_export_find("pprun", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(strstr(text, " --cp 2 ") && strstr(text, " --shard gradients ") &&
                  strstr(text, " --recompute full ") && strstr(text, " --recompute-layers 3") &&
                  strstr(text, " --precision bf16"),
              "%s", text);
    free(text);
    pp_profile_destroy(p);

    p = with_settings("optimizer", 2, "full", 0);
    round_trip(p, "llama3-70b");
    text = export_line(p, pp_profile_export_find("nemo2", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(strstr(text, "    context_parallel_size=2,\n"), "%s", text);
    cr_assert(strstr(text, "recompute_method=\"uniform\""), "%s", text);
    cr_assert(strstr(text, "use_distributed_optimizer=True"), "%s", text);
    cr_assert(nemo_key_known("strategy", "context_parallel_size"));
    free(text);
    text = export_line(p, pp_profile_export_find("torchtitan", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    char *last = strrchr(text, '\n');
    *last = '\0';
    last = strrchr(text, '\n') + 1;
    flags f;
    flags_parse(last, &f);
    for (int i = 0; i < f.n; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s", f.name[i] + 2);
        char *no = strstr(name, ".no_");
        if (no)
            memmove(no + 1, no + 4, strlen(no + 4) + 1);
        cr_assert(torchtitan_option_known(name), "--%s is not a torchtitan option", name);
    }
    cr_assert_eq(get_int(&f, "--parallelism.context_parallel_degree", 0), 2);
    cr_assert_eq(get_int(&f, "--parallelism.data_parallel_shard_degree", 0), 1);
    cr_assert_str_eq(get(&f, "--parallelism.fsdp_reshard_after_forward"), "never");
    cr_assert(strstr(text, "activation checkpointing: full"), "%s", text);
    free(text);
    pp_profile_destroy(p);
}

/* A 1.2 profile's config says distributed_optimizer, which reads as shard "optimizer". */
Test(tuner_export, a_version_1_2_config_reads_its_distributed_optimizer_as_sharding)
{
    json_t *c = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:b, s:s, s:b}",
                          "schedule", "1f1b", "p", 2, "v", 1, "G", 0, "b", 1, "d", 4, "t", 1,
                          "N", 8, "split", "even", "sequence_parallel", 0, "recompute", "full",
                          "distributed_optimizer", 1);
    pp_config k;
    pp_config_defaults(&k);
    cr_assert_eq(pp_config_from_json(c, "old.json", "chosen.config", &k), PP_OK, "%s",
                 pp_err_msg());
    cr_assert_eq(k.shard, PP_SHARD_OPTIMIZER);
    cr_assert_eq(k.cp, 1);
    cr_assert_eq(k.recompute_layers, 0);
    json_object_set_new(c, "recompute", json_string("selective"));
    json_object_set_new(c, "recompute_layers", json_integer(2));
    cr_assert_eq(pp_config_from_json(c, "old.json", "chosen.config", &k), PP_ERR_PARSE);
    cr_assert(strstr(pp_err_text(), "chosen.config.recompute_layers"), "%s", pp_err_text());
    json_decref(c);
}

/* The zero-bubble family (split backward): upstream Megatron-LM has no flag for any of it, said
 * with the way out; torchtitan takes a one-chunk one (ZB-H1) as the CSV, with I and W cells
 * (PyTorch's class of it is multi-stage: not offered by name); a V-shaped one (ZB-V) by PyTorch's name, since torchtitan
 * places V stages only for its named V schedules. */
Test(tuner_export, split_backward_schedules_go_to_torchtitan_by_csv_or_by_name)
{
    pp_status st;
    pp_profile *p = llama_with("zbv", 4, 2, 0, 1, 128, 4, 8, "even");
    char *text = megatron_export(p, pp_profile_export_find("megatron", NULL), &st);
    cr_assert_eq(st, PP_ERR_UNSUPPORTED);
    cr_assert(strstr(pp_err_text(), "Megatron-LM has no ZB-V schedule (no upstream flag selects "
                                    "it)"),
              "%s", pp_err_text());
    cr_assert(strstr(pp_err_text(), "--format torchtitan"), "%s", pp_err_text());
    free(text);
    text = export_line(p, pp_profile_export_find("nemo", NULL), &st);
    cr_assert_neq(st, PP_OK, "NeMo runs Megatron-Core's schedules only");
    free(text);
    text = export_line(p, pp_profile_export_find("torchtitan", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(strstr(text, " --parallelism.pipeline_parallel_schedule ZBVZeroBubble "), "%s",
              text);
    cr_assert_null(strstr(text, "pipeline_parallel_schedule_csv"), "%s", text);
    cr_assert(strstr(text, "rank r holds stages r and 7 - r"), "%s", text);
    /* 80 layers over p x v = 8 stages */
    cr_assert(strstr(text, " --parallelism.pipeline_parallel_layers_per_stage 10 "), "%s", text);
    free(text);
    pp_profile_destroy(p);

    p = llama_with("zb-h1", 4, 1, 0, 1, 128, 4, 8, "even");
    text = export_line(p, pp_profile_export_find("torchtitan", NULL), &st);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    cr_assert(strstr(text, "--parallelism.pipeline_parallel_schedule_csv pptune-schedule.csv"),
              "%s", text);
    /* one stage per rank: PyTorch's InterleavedZeroBubble is multi-stage, which torchtitan
     * would refuse with these layers per stage, so only the CSV says ZB-H1 */
    cr_assert_null(strstr(text, "# or by name"), "%s", text);
    cr_assert(strstr(text, " --parallelism.pipeline_parallel_schedule 1F1B "), "%s", text);
    run_schedule_command(text, "grep -q '[0-9]I[0-9]' pptune-schedule.csv && "
                               "grep -q '[0-9]W[0-9]' pptune-schedule.csv");
    free(text);
    pp_profile_destroy(p);
}

/* The main job's profile picks a zero-bubble schedule, which Megatron-LM cannot run: the refusal
 * names the profile's fastest configuration it runs by its number on the leaderboard the search
 * printed (one numbering, issue 31 item 1: that row of the leaderboard is the same schedule and
 * p), `--rank K` exports that one (the flags of an interleaved or 1F1B layout), and a K the
 * profile does not have is bad input. */
Test(tuner_export, a_refused_winner_names_the_leaderboard_row_megatron_runs_and_exports_it)
{
    char dir[] = "/tmp/pptune_ru_XXXXXX", run[2048];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(run, sizeof run,
             "cd %s && %s/tuner/pptune --model gpt-13b --nodes 32 -o g.json > board 2>&1 && "
             "{ %s/tuner/pptune export --format megatron g.json > out 2> err; echo $? > rc; }",
             dir, PP_BINARY_DIR, PP_BINARY_DIR);
    cr_assert_eq(system(run), 0, "%s", run);
    char path[256], err[4096] = "", board[16384] = "";
    snprintf(path, sizeof path, "%s/err", dir);
    FILE *fp = fopen(path, "r");
    cr_assert_not_null(fp);
    size_t n = fread(err, 1, sizeof err - 1, fp);
    err[n] = '\0';
    fclose(fp);
    snprintf(path, sizeof path, "%s/board", dir);
    cr_assert_not_null(fp = fopen(path, "r"));
    n = fread(board, 1, sizeof board - 1, fp);
    board[n] = '\0';
    fclose(fp);
    const char *k = strstr(err, "export it with --rank ");
    cr_assert_not_null(k, "the refusal names no leaderboard row: %s", err);
    int K = atoi(k + strlen("export it with --rank "));
    cr_assert_gt(K, 1, "%s", err);
    cr_assert(strstr(err, "no upstream flag selects it"), "%s", err);
    /* "is #K, SCHEDULE p=P ..." against the board's row "  K  SCHEDULE   P ..." */
    char want[32], sched[32], row[32];
    int p = 0, rp = 0;
    snprintf(want, sizeof want, "is #%d, ", K);
    const char *at = strstr(err, want);
    cr_assert_not_null(at, "%s", err);
    cr_assert_eq(sscanf(at + strlen(want), "%31s p=%d", sched, &p), 2, "%s", err);
    snprintf(want, sizeof want, "\n%3d  ", K);
    at = strstr(board, want);
    cr_assert_not_null(at, "no row #%d on the leaderboard:\n%s", K, board);
    cr_assert_eq(sscanf(at + strlen(want), "%31s %d", row, &rp), 2, "%s", board);
    cr_expect_str_eq(row, sched, "the refusal's #%d is %s, the leaderboard's #%d is %s", K, sched,
                     K, row);
    cr_expect_eq(rp, p, "#%d: p=%d in the refusal, %d on the leaderboard", K, p, rp);
    snprintf(run, sizeof run,
             "cd %s && test \"$(cat rc)\" = 2 && %s/tuner/pptune export --format megatron "
             "--rank %d g.json > out 2> err && grep -q -- '--pipeline-model-parallel-size' "
             "out && grep -q '#%d, %s p=%d ' err && { %s/tuner/pptune export --format megatron "
             "--rank 1000 g.json > /dev/null 2>&1; test $? = 2; }",
             dir, PP_BINARY_DIR, K, K, sched, p, PP_BINARY_DIR);
    cr_assert_eq(system(run), 0, "%s (err: %s)", run, err);
    snprintf(run, sizeof run, "rm -rf %s", dir);
    cr_assert_eq(system(run), 0);
}

/* Every refusal is the row's: for each target and each schedule it does not run, the refusal
 * says so, and the schedules it tells a new search to keep to (--schedules) are ones the
 * target runs (upstream Megatron-LM's refusal once suggested BitPipe, which it refuses); the
 * targets it names as the way out run the schedule. `pptune export --help` lists each row. */
Test(tuner_export, refusals_come_from_the_rows_and_suggest_only_what_runs)
{
    static const struct {
        const char *schedule;
        int v;
    } chosen[] = {{"chimera", 1}, {"bitpipe", 2}, {"zb-h1", 1}, {"zbv", 2}, {"dualpipev", 2}};
    int n;
    const pp_export_target *t = pp_profile_export_targets(&n);
    int refused = 0;
    for (size_t k = 0; k < sizeof chosen / sizeof chosen[0]; k++) {
        pp_profile *p = llama_with(chosen[k].schedule, 4, chosen[k].v, 0, 1, 128, 4, 8, "even");
        const pp_sched_desc *d = pp_sched_lookup(chosen[k].schedule);
        for (int i = 0; i < n; i++) {
            pp_status st;
            char *text = export_line(p, &t[i], &st);
            int runs = !t[i].runs || t[i].runs(d);
            if (runs || st == PP_ERR_INVALID) { /* INVALID: a variant asked for its format's */
                free(text);
                continue;
            }
            cr_assert_eq(st, PP_ERR_UNSUPPORTED, "%s for %s", chosen[k].schedule, t[i].format);
            refused++;
            char msg[2048];
            snprintf(msg, sizeof msg, "%s", pp_err_text());
            const char *list = strstr(msg, "--schedules ");
            cr_assert_not_null(list, "%s", msg);
            char names[256];
            snprintf(names, sizeof names, "%s", list + strlen("--schedules "));
            for (char *s = strtok(names, ","); s; s = strtok(NULL, ",")) {
                const pp_sched_desc *r = pp_sched_lookup(s);
                cr_assert_not_null(r, "%s in %s", s, msg);
                int ok = !t[i].runs || t[i].runs(r);
                for (int j = 0; !ok && t[i].target && j < n; j++) /* a variant: its format's */
                    ok = !t[j].target && !strcmp(t[j].format, t[i].format) && t[j].runs(r);
                cr_assert(ok, "%s: suggests %s, which it refuses: %s", t[i].format, s, msg);
            }
            for (int j = 0; j < n; j++) {
                char way[96];
                snprintf(way, sizeof way, "--format %s%s%s (", t[j].format,
                         t[j].target ? " --target " : "", t[j].target ? t[j].target : "");
                if (&t[j] != &t[i] && strstr(msg, way))
                    cr_assert(!t[j].runs || t[j].runs(d), "names %s, which refuses %s: %s",
                              way, chosen[k].schedule, msg);
            }
            free(text);
        }
        pp_profile_destroy(p);
    }
    cr_assert_gt(refused, 10, "the cases refuse somewhere");
    char out[8192];
    FILE *fp = popen(PP_BINARY_DIR "/tuner/pptune export --help", "r");
    cr_assert_not_null(fp);
    size_t len = fread(out, 1, sizeof out - 1, fp);
    out[len] = '\0';
    cr_assert_eq(pclose(fp), 0);
    for (int i = 0; i < n; i++) {
        char label[64];
        snprintf(label, sizeof label, "  %s%s%s", t[i].format, t[i].target ? " --target " : "",
                 t[i].target ? t[i].target : "");
        cr_assert(strstr(out, label), "export --help lacks %s:\n%s", label, out);
    }
}
