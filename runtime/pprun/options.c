/* options.c — pprun's command line as one table of options (common/pp_opt.h): its own rows and,
 * in their place, the configuration's, one per axis with a flag (profiles/pp_config.h: name,
 * field, smallest value, help), so that --help is the rows and the flags fill pprun_opts.cfg,
 * the one configuration type. Value checks name the option and the value; combination checks
 * (ranks vs layers, seq vs the model) are left to the library, which knows the rules; main.c
 * turns its errors into exit code 2. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_opt.h"
#include "pp_sched.h"
#include "pprun.h"

/* The most transformer blocks --layers may ask for (as the tuner's model bound). */
#define PPRUN_MAX_LAYERS 4096
#define PPRUN_MAX_THREADS 1024

#define OFF(f) offsetof(pprun_opts, f)
enum { O_HELP = 1, O_DP, O_VERSION, O_MODEL };

static const char *const TRANSPORTS[] = {"auto", "thread", "mpi", NULL};
static const char *const PRECISIONS[] = {"fp32", "bf16", NULL}; /* pp_precision order */

/* clang-format off */
static const pp_opt head[] = {
    {.kind = PP_OPT_SECTION, .help = "the model:", .width = 28},
    {.name = "model", .kind = PP_OPT_STRING, .offset = OFF(model_name), .arg = "NAME",
     .code = O_MODEL,
     .help = "a preset of the model table: tiny | small | tiny-llama |\n"
             "gpt-125m ... gpt-175b | llama3-8b | llama3-70b | llama3-405b", .show_default = 1},
    {.name = "model-config", .kind = PP_OPT_STRING, .offset = OFF(model_config),
     .arg = "config.json",
     .help = "the model of a HuggingFace config.json (Llama, Mistral,\n"
             "Qwen2, Qwen3, GPT-2 blocks) instead of a preset; not with\n"
             "--model"},
    {.name = "layers", .kind = PP_OPT_INT, .offset = OFF(layers), .min = 1,
     .max = PPRUN_MAX_LAYERS, .arg = "L",
     .help = "override the model's number of transformer blocks"},
    {.kind = PP_OPT_SECTION,
     .help = "the configuration (what a pptune profile sets; pptune export --format pprun):"},
};

static const pp_opt tail[] = {
    {.kind = PP_OPT_SECTION, .help = "training:"},
    {.name = "seq", .kind = PP_OPT_INT, .offset = OFF(seq), .min = 1, .arg = "s",
     .help = "tokens per sequence (default: min(model maximum, 64))"},
    {.name = "steps", .kind = PP_OPT_INT, .offset = OFF(steps), .min = 1, .arg = "S",
     .help = "training steps", .show_default = 1},
    {.name = "lr", .kind = PP_OPT_DOUBLE, .offset = OFF(lr), .arg = "X",
     .help = "AdamW learning rate, at most 10", .show_default = 1},
    {.name = "weight-decay", .kind = PP_OPT_DOUBLE, .offset = OFF(weight_decay), .arg = "X",
     .help = "AdamW weight decay, at most 10", .show_default = 1},
    {.name = "clip", .kind = PP_OPT_DOUBLE, .offset = OFF(clip), .arg = "X",
     .help = "clip the global gradient norm to X; 0 = off", .show_default = 1},
    {.name = "data", .kind = PP_OPT_STRING, .offset = OFF(data), .arg = "PATH",
     .help = "train on Megatron's indexed dataset PATH.idx + PATH.bin\n"
             "(token ids below the model's vocabulary; step k takes\n"
             "samples k*B .. (k+1)*B-1, B = dp*N*b, sample i being\n"
             "tokens [i*s, i*s+s+1) of the documents concatenated),\n"
             "else on the bytes of the file PATH (vocabulary 256, at\n"
             "offsets drawn from the seed); default: a synthetic\n"
             "stream from the seed"},
    {.name = "shuffle", .kind = PP_OPT_FLAG, .offset = OFF(shuffle),
     .help = "a Megatron dataset's samples in an order drawn from the\n"
             "seed, each sample once per epoch"},
    {.name = "seed", .kind = PP_OPT_U64, .offset = OFF(seed), .arg = "X",
     .help = "parameters and data order", .show_default = 1},
    {.name = "threads", .kind = PP_OPT_INT, .offset = OFF(threads), .min = 1,
     .max = PPRUN_MAX_THREADS, .arg = "T",
     .help = "BLAS threads per rank (default: OPENBLAS_NUM_THREADS if\n"
             "set, else this machine's cores / the ranks on it)"},
    {.name = "kernel-threads", .kind = PP_OPT_INT, .offset = OFF(kernel_threads), .min = 1,
     .max = PPRUN_MAX_THREADS, .arg = "K",
     .help = "threads per rank of the runtime's own CPU kernels (norms,\n"
             "attention, activations, cross-entropy, AdamW; default:\n"
             "the BLAS threads'); results are bit-identical for any K"},
    {.kind = PP_OPT_SECTION, .help = "output:"},
    {.name = "json", .kind = PP_OPT_FLAG, .offset = OFF(json),
     .help = "print a JSON summary on stdout"},
    {.name = "trace", .kind = PP_OPT_STRING, .offset = OFF(trace), .arg = "FILE",
     .help = "write a Chrome trace (Perfetto) of every action"},
    {.name = "quiet", .kind = PP_OPT_FLAG, .offset = OFF(quiet),
     .help = "no per-step progress on stderr"},
    {.kind = PP_OPT_SECTION, .help = "launch:"},
    {.name = "transport", .kind = PP_OPT_NAME, .offset = OFF(transport), .choices = TRANSPORTS,
     .arg = "K",
     .help = "auto | thread | mpi; auto: MPI when started by mpirun /\n"
             "srun as several processes, one pipeline rank per process\n"
             "and D x dp processes (rank 0 reports); thread: every rank\n"
             "in this process, even under a launcher",
     .show_default = 1},
    {.name = "watchdog", .kind = PP_OPT_DOUBLE, .offset = OFF(watchdog_s), .arg = "S",
     .help = "under MPI, a rank that waits S seconds for a peer\n"
             "without progress (a stopped or frozen process) ends the\n"
             "job with a message naming that peer; 0: never",
     .show_default = 1},
    /* choices and help from the backend rows (rows() below) */
    {.name = "backend", .kind = PP_OPT_NAME, .offset = OFF(backend_name), .arg = "K"},
    {.name = "precision", .kind = PP_OPT_CHOICE, .offset = OFF(precision), .choices = PRECISIONS,
     .arg = "P", .show_default = 1},
    {.kind = PP_OPT_SECTION, .help = "profiles and checkpoints:"},
    {.name = "profile", .kind = PP_OPT_STRING, .offset = OFF(profile), .arg = "FILE",
     .help = "the configuration of a pptune profile (model, schedule,\n"
             "ranks, micro-batches and size, chunks, group, dp, seq,\n"
             "split); not together with those flags"},
    {.name = "save-every", .kind = PP_OPT_INT, .offset = OFF(save_every), .min = 1, .arg = "K",
     .help = "write a checkpoint every K steps and at the end\n"
             "(atomically: parameters, AdamW state, step, data position;\n"
             "a sharded state is written gathered, as an unsharded one)"},
    {.name = "checkpoint", .kind = PP_OPT_STRING, .offset = OFF(checkpoint), .arg = "FILE",
     .help = "the checkpoint file (default pprun.ckpt)"},
    {.name = "resume", .kind = PP_OPT_FLAG, .offset = OFF(resume),
     .help = "continue from the checkpoint when there is one; the run\n"
             "ends with the same parameters, bit for bit, as one that\n"
             "never stopped (threads or MPI: process 0 reads and writes\n"
             "the file)"},
    {.name = "load-weights", .kind = PP_OPT_STRING, .offset = OFF(load_weights),
     .arg = "PATH",
     .help = "start from a HuggingFace checkpoint: a .safetensors file,\n"
             "or a folder with model.safetensors or a sharded one\n"
             "(model.safetensors.index.json); transformers' names:\n"
             "LlamaForCausalLM (Mistral, Qwen2, Qwen3) for the Llama\n"
             "block, MixtralForCausalLM and Qwen3MoeForCausalLM for\n"
             "their MoE blocks,\n"
             "GPT2LMHeadModel for GPT's; F32/BF16/F16; a missing,\n"
             "unexpected or misshapen tensor is refused; with --layers\n"
             "a checkpoint's blocks past the first L are skipped"},
    {.name = "save-weights", .kind = PP_OPT_STRING, .offset = OFF(save_weights),
     .arg = "FILE",
     .help = "after the last step, write the parameters as one\n"
             "safetensors file with transformers' names (fp32,\n"
             "atomically), loadable by from_pretrained with the\n"
             "model's config.json (under MPI rank 0 writes it)"},
    {.name = "help", .kind = PP_OPT_CODE, .code = O_HELP, .help = "this text"},
    {.name = "version", .kind = PP_OPT_CODE, .code = O_VERSION,
     .help = "pprun's version and git revision"},
};
/* clang-format on */
#define N_HEAD ((int)(sizeof head / sizeof head[0]))
#define N_TAIL ((int)(sizeof tail / sizeof tail[0]))

static void defaults(pprun_opts *o)
{
    *o = (pprun_opts){.model_name = "tiny",
                      .steps = 10,
                      .lr = 1e-3,
                      .clip = 1.0,
                      .seed = 1,
                      .transport = "auto",
                      .backend_name = pp_backend_row_default()->name,
                      .watchdog_s = PP_TRANSPORT_WATCHDOG_S};
    pp_config_defaults(&o->cfg); /* every axis, then pprun's own defaults of some */
    o->cfg.schedule = PP_SCHED_DEFAULT;
    o->cfg.p = 2, o->cfg.N = 4, o->cfg.b = 1, o->cfg.d = 1, o->cfg.t = 1;
}

/* The row of a configuration axis's flag: its field in cfg, its smallest value, its help. */
static pp_opt axis_row(const pp_config_axis *a, const pprun_opts *dflt)
{
    static char schedules[400]; /* the registry's names: every schedule pprun can run */
    pp_opt o = {.name = a->flag + 2, .offset = OFF(cfg) + a->offset, .min = a->flag_min,
                .arg = a->arg, .help = a->help};
    char names[256];
    switch (a->kind) {
    case PP_CONFIG_SCHEDULE:
        snprintf(schedules, sizeof schedules, "%s\n(default %s)",
                 pp_sched_names(PP_SCHED_MEGATRON_NONE, " | ", names, sizeof names),
                 PP_SCHED_DEFAULT);
        o.kind = PP_OPT_STRING, o.help = schedules;
        break;
    case PP_CONFIG_INT:
    case PP_CONFIG_SPLIT_LAYERS:
        o.kind = PP_OPT_INT, o.show_default = pp_config_get(&dflt->cfg, a) != 0;
        break;
    case PP_CONFIG_BOOL:
    case PP_CONFIG_SPLIT: o.kind = PP_OPT_FLAG; break;
    case PP_CONFIG_ENUM: o.kind = PP_OPT_CHOICE, o.choices = a->names; break;
    }
    if (a == pp_config_axis_find("d"))
        o.code = O_DP; /* --dp given: under MPI it is checked against the processes */
    return o;
}

/* A help text built from the backend rows (what does not fit is cut). */
typedef struct {
    char s[1024];
    size_t n;
} help_text;

static void add(help_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(help_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (t->n < sizeof t->s)
        t->n += (size_t)vsnprintf(t->s + t->n, sizeof t->s - t->n, fmt, ap);
    va_end(ap);
}

/* Appends the names joined by " | "; with precision >= 0 (names: backends) only those of the
 * backends that compute in it. */
static void add_names(help_text *t, const char *const *names, int precision)
{
    for (int i = 0, k = 0; names[i]; i++)
        if (precision < 0 || pp_backend_row_has_precision(pp_backend_row_named(names[i]), precision))
            add(t, "%s%s", k++ ? " | " : "", names[i]);
}

/* --backend's help: the choices and a line each, from the backend rows (common/pp_backends.h),
 * so that a new backend is listed without a line here. */
static const char *backend_help(void)
{
    static help_text t;
    t.n = 0;
    const char *const *names = pp_backend_choices();
    add_names(&t, names, -1);
    add(&t, " (default %s)", pp_backend_row_default()->name);
    for (int i = 0; names[i]; i++)
        add(&t, "\n%s: %s", names[i], pp_backend_row_named(names[i])->help);
    add(&t, "\na device backend: rank g on device g mod the devices\n"
            "(ranks as threads), else the launch's local rank");
    return t.s;
}

/* --precision's help: the precisions, and which backends compute in each one that not every
 * backend does (the rows'). */
static const char *precision_help(void)
{
    static help_text t;
    t.n = 0;
    const char *const *names = pp_backend_choices();
    add_names(&t, PRECISIONS, -1);
    for (int p = 0; PRECISIONS[p]; p++) {
        int all = 1;
        for (int i = 0; names[i]; i++)
            all &= pp_backend_row_has_precision(pp_backend_row_named(names[i]), p);
        if (all)
            continue;
        add(&t, " (%s needs --backend ", PRECISIONS[p]);
        add_names(&t, names, p);
        add(&t, ")");
    }
    return t.s;
}

/* pprun's rows: its own, and the configuration's flags in their order on pprun's line. */
static int rows(pp_opt *out, int max)
{
    pprun_opts dflt;
    defaults(&dflt);
    const pp_config_axis *axes[64];
    int n = 0, n_axes = pp_config_axes_by_line(axes, 64);
    for (int i = 0; i < N_HEAD && n < max; i++)
        out[n++] = head[i];
    for (int i = 0; i < n_axes && n < max; i++)
        out[n++] = axis_row(axes[i], &dflt);
    for (int i = 0; i < N_TAIL && n < max; i++) {
        out[n] = tail[i];
        const char *name = out[n].name ? out[n].name : "";
        if (!strcmp(name, "backend"))
            out[n].choices = pp_backend_choices(), out[n].help = backend_help();
        if (!strcmp(name, "precision"))
            out[n].help = precision_help();
        n++;
    }
    return n;
}

static void usage(FILE *fp, const pp_opt *opts, int n)
{
    fputs("usage: pprun [options]\n"
          "Trains a decoder (a GPT or Llama-family block, from a preset or a HuggingFace\n"
          "config.json) with a pipeline schedule, every pipeline rank a thread\n"
          "(in-process transport) or, under mpirun / srun, a process (MPI transport), on the\n"
          "CPU backend (OpenBLAS, the reference) or with --backend cuda on GPUs (cuBLAS; NCCL\n"
          "between processes). It ends with a summary on stdout: final loss, median step,\n"
          "tokens/s, model TFLOP/s and each rank's peak memory (--json: the same as JSON).\n"
          "\n",
          fp);
    pprun_opts dflt;
    defaults(&dflt);
    pp_opt_help(fp, opts, n, &dflt);
    fputs("\n"
          "A step consumes dp * N * b sequences; its loss is their mean cross-entropy.\n"
          "Ranks: D x tp x cp x dp (threads of this process, or MPI processes).\n"
          "Exit status: 0 done, 1 the run failed, 2 bad options or input.\n",
          fp);
}

static int bad(const char *opt, const char *val, const char *want)
{
    fprintf(stderr, "pprun: %s: invalid value \"", opt);
    pp_fputs_escaped(val, stderr); /* stays one line */
    fprintf(stderr, "\": expected %s\n", want);
    return 2;
}

int pprun_check_settings(const pprun_opts *o)
{
    const pp_config_axis *rl = pp_config_axis_find("recompute_layers");
    const char *want = rl->rule(&o->cfg);
    if (want) { /* the axis's rule, as a profile's reader applies it */
        fprintf(stderr, "pprun: --recompute-layers %d: expected %s\n", o->cfg.recompute_layers,
                want);
        return 2;
    }
    int na;
    const pp_config_axis *ax = pp_config_axes(&na);
    for (int i = 0; i < na; i++)
        if (ax[i].flag && ax[i].pprun_cannot && ax[i].pprun_cannot(&o->cfg, o->precision)) {
            fprintf(stderr, "pprun: %s %s%s: not run by pprun yet (see pprun --help)\n",
                    ax[i].flag, pp_config_enum_name(&ax[i], pp_config_get(&o->cfg, &ax[i])),
                    ax[i].pprun_cannot(&o->cfg, o->precision));
            return 2;
        }
    return -1;
}

/* What the table cannot say: ranges between options and the limits of the rest. */
static int check(const pprun_opts *o)
{
    if (o->model_set && o->model_config) { /* two models: neither is silently the one trained */
        fprintf(stderr, "pprun: --model %s and --model-config %s: give one model (a preset, or "
                        "a HuggingFace config.json)\n",
                o->model_name, o->model_config);
        return 2;
    }
    if (o->lr > 10 || o->weight_decay > 10) { /* finite (the table), and sane */
        fprintf(stderr, "pprun: %s: expected at most 10, got %g\n",
                o->lr > 10 ? "--lr" : "--weight-decay", o->lr > 10 ? o->lr : o->weight_decay);
        return 2;
    }
    if (pp_sched_chunks_option(pp_sched_lookup(o->cfg.schedule), o->cfg.v) != PP_OK) {
        fprintf(stderr, "pprun: %s\n", pp_err_text());
        return 2;
    }
    if (pp_sched_budget_check(o->cfg.p, o->cfg.N, o->cfg.v > 0 ? o->cfg.v : 1) != PP_OK) {
        fprintf(stderr, "pprun: --ranks, --chunks, --microbatches: %s\n", pp_err_text());
        return 2;
    }
    int rc = pprun_check_settings(o);
    if (rc >= 0)
        return rc;
    const pp_backend_row *be = pp_backend_row_of(o->backend);
    if (!pp_backend_row_has_precision(be, o->precision)) {
        const pp_backend_row *with = NULL; /* the first --backend that computes in it */
        for (const char *const *c = pp_backend_choices(); *c && !with; c++)
            if (pp_backend_row_has_precision(pp_backend_row_named(*c), o->precision))
                with = pp_backend_row_named(*c);
        fprintf(stderr, "pprun: --precision %s needs --backend %s (the %s backend is fp32)\n",
                PRECISIONS[o->precision], with ? with->name : "?", be->name);
        return 2;
    }
    return -1;
}

/* A bad word: said in one line (exit 2). The limits of --threads and --layers are said as
 * limits, the rest as what the value must be. */
static int refuse(const pp_opt_parser *p, char **argv)
{
    const pp_opt *r = p->opt;
    if (p->error != PP_OPT_ERR_VALUE) {
        fputs("pprun: unknown option or missing value: \"", stderr);
        pp_fputs_escaped(argv[optind - 1], stderr);
        fputs("\" (see pprun --help)\n", stderr);
        return 2;
    }
    int v;
    if (r->kind == PP_OPT_INT && r->max && pp_opt_int(p->arg, (long)r->min, 1L << 30, &v)) {
        fprintf(stderr, "pprun: %s: expected at most %.0f, got %d\n", p->name, r->max, v);
        return 2;
    }
    return bad(p->name, p->arg, p->want);
}

int pprun_parse(int argc, char **argv, pprun_opts *o)
{
    static pp_opt opts[PP_OPT_MAX];
    int n = rows(opts, PP_OPT_MAX);
    defaults(o);
    pp_opt_group g = {.opts = opts, .n = n, .target = o};
    pp_opt_parser p;
    pp_opt_init(&p, &g, 1, argc, argv);
    for (int c; (c = pp_opt_next(&p)) != -1;) {
        if (c == PP_OPT_BAD)
            return refuse(&p, argv);
        if (c == O_HELP) {
            usage(stdout, opts, n);
            return 0;
        }
        if (c == O_VERSION) {
            printf("pprun %s\n", pp_version());
            return 0;
        }
        if (c == O_DP)
            o->dp_set = 1;
        if (c == O_MODEL)
            o->model_set = 1;
    }
    if (optind < argc) {
        fputs("pprun: unexpected argument \"", stderr);
        pp_fputs_escaped(argv[optind], stderr);
        fputs("\" (see pprun --help)\n", stderr);
        return 2;
    }
    o->backend = pp_backend_kind(pp_backend_row_named(o->backend_name)); /* one of the choices */
    return check(o);
}
