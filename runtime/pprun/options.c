/* options.c — pprun's command line: defaults, --help, and value checks whose messages name the
 * option and the value. Combination checks (ranks vs layers, seq vs the model) are left to the
 * library, which knows the rules; main.c turns its errors into exit code 2. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_sched.h"
#include "pprun.h"

static void usage(FILE *fp)
{
    fputs("usage: pprun [options]\n"
          "Trains a GPT-style model with a pipeline schedule, every pipeline rank a thread\n"
          "(in-process transport) or, under mpirun / srun, a process (MPI transport), on the\n"
          "CPU backend (OpenBLAS, the reference) or with --backend cuda on GPUs (cuBLAS; NCCL\n"
          "between processes). It ends with a summary on stdout: final loss, median step,\n"
          "tokens/s, model TFLOP/s and each rank's peak memory (--json: the same as JSON).\n"
          "\n"
          "  --model NAME              tiny | small | gpt-125m | gpt-350m | gpt-760m | gpt-1.3b |\n"
          "                            gpt-2.7b | gpt-6.7b | gpt-13b | gpt-175b (default tiny)\n"
          "  --layers L                override the model's number of transformer blocks\n",
          fp);
    char names[256]; /* the registry's names: every schedule pprun can run */
    fprintf(fp, "  --schedule K              %s\n                            (default %s)\n",
            pp_sched_names(PP_SCHED_MEGATRON_NONE, " | ", names, sizeof names), PP_SCHED_DEFAULT);
    fputs("  --ranks D                 pipeline ranks (default 2)\n"
          "  --microbatches N          micro-batches per step and replica (default 4)\n"
          "  --micro-batch-size b      sequences per micro-batch (default 1)\n"
          "  --chunks v                stages per rank per pipe, interleaved (default: the\n"
          "                            schedule's own)\n"
          "  --group G                 interleaved micro-batch group size (default D)\n"
          "  --uneven                  Llama-3 split: one layer fewer on the first and last stage\n"
          "  --first-stage-layers A    layers of each pipe's first stage (it also holds the\n"
          "                            embedding); the stages not given share the rest evenly\n"
          "  --last-stage-layers Z     layers of each pipe's last stage (it also holds the head\n"
          "                            and the loss), as Megatron's --decoder-last-pipeline-\n"
          "                            num-layers; interleaved: the first/last virtual stage\n"
          "  --threads T               BLAS threads per rank (default: OPENBLAS_NUM_THREADS if\n"
          "                            set, else this machine's cores / the ranks on it)\n",
          fp);
    fputs(/* two literals: C99 promises 4095 characters in one */
          "  --dp d                    data-parallel pipeline replicas (default 1)\n"
          "  --tp t                    tensor-parallel ranks per pipeline rank, Megatron-style\n"
          "                            (t must divide the heads and the MLP width; default 1)\n"
          "  --sequence-parallel       with --tp t > 1: LayerNorms and residuals on seq/t tokens\n"
          "                            per tensor rank (Megatron; t must divide --seq)\n"
          "  --seq s                   tokens per sequence (default: min(model maximum, 64))\n"
          "  --steps S                 training steps (default 10)\n"
          "  --lr X                    AdamW learning rate (default 1e-3)\n"
          "  --weight-decay X          AdamW weight decay (default 0.0)\n"
          "  --clip X                  clip the global gradient norm to X; 0 = off (default 1.0)\n"
          "  --data PATH               train on Megatron's indexed dataset PATH.idx + PATH.bin\n"
          "                            (token ids below the model's vocabulary; step k takes\n"
          "                            samples k*B .. (k+1)*B-1, B = dp*N*b, sample i being\n"
          "                            tokens [i*s, i*s+s+1) of the documents concatenated),\n"
          "                            else on the bytes of the file PATH (vocabulary 256, at\n"
          "                            offsets drawn from the seed); default: a synthetic\n"
          "                            stream from the seed\n"
          "  --shuffle                 a Megatron dataset's samples in an order drawn from the\n"
          "                            seed, each sample once per epoch\n"
          "  --seed X                  parameters and data order (default 1)\n"
          "  --json                    print a JSON summary on stdout\n"
          "  --trace FILE              write a Chrome trace (Perfetto) of every action\n"
          "  --quiet                   no per-step progress on stderr\n"
          "  --transport K             auto | thread | mpi (default auto: MPI when started by\n"
          "                            mpirun / srun as several processes, one pipeline rank\n"
          "                            per process and D x dp processes; rank 0 reports;\n"
          "                            thread: every rank in this process, even under one)\n"
          "  --watchdog S              under MPI, a rank that waits S seconds for a peer\n"
          "                            without progress (a stopped or frozen process) ends the\n"
          "                            job with a message naming that peer; 0 = never\n"
          "                            (default 600)\n"
          "  --backend K               cpu | cuda (default cpu): cuda gives each rank a CUDA\n"
          "                            backend (ranks as threads: rank g on device g mod the\n"
          "                            devices; as processes: the launch's local rank)\n"
          "  --precision P             fp32 | bf16 (default fp32; bf16 needs --backend cuda)\n"
          "  --profile FILE            the configuration of a pptune profile (model, schedule,\n"
          "                            ranks, micro-batches and size, chunks, group, dp, seq,\n"
          "                            split); not together with those flags\n"
          "  --save-every K            write a checkpoint every K steps and at the end\n"
          "                            (atomically: parameters, AdamW state, step, data position)\n"
          "  --checkpoint FILE         the checkpoint file (default pprun.ckpt)\n"
          "  --resume                  continue from the checkpoint when there is one; the run\n"
          "                            ends with the same parameters, bit for bit, as one that\n"
          "                            never stopped (thread transport only)\n"
          "  --help                    this text\n"
          "\n"
          "A step consumes dp * N * b sequences; its loss is their mean cross-entropy.\n"
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

static int parse_int(const char *opt, const char *val, int min, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < min || v > INT_MAX) {
        char want[64];
        snprintf(want, sizeof want, "an integer >= %d", min);
        return bad(opt, val, want);
    }
    *out = (int)v;
    return -1;
}

static int parse_double(const char *opt, const char *val, double min, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || !(v >= min) || !isfinite(v)) { /* --lr inf */
        char want[64];
        snprintf(want, sizeof want, "a finite number >= %g", min);
        return bad(opt, val, want);
    }
    *out = v;
    return -1;
}

/* The most transformer blocks --layers may ask for (as the tuner's model bound). */
#define PPRUN_MAX_LAYERS 4096
#define PPRUN_MAX_THREADS 1024

static int parse_u64(const char *opt, const char *val, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 0);
    if (errno || end == val || *end || val[0] == '-')
        return bad(opt, val, "a non-negative integer");
    *out = v;
    return -1;
}

enum {
    O_MODEL = 256,
    O_SCHEDULE,
    O_LAYERS,
    O_RANKS,
    O_MB,
    O_MBS,
    O_CHUNKS,
    O_GROUP,
    O_UNEVEN,
    O_DP,
    O_SEQ,
    O_STEPS,
    O_LR,
    O_WD,
    O_CLIP,
    O_DATA,
    O_SEED,
    O_JSON,
    O_TRACE,
    O_QUIET,
    O_TRANSPORT,
    O_HELP,
    O_PROFILE,
    O_SAVE_EVERY,
    O_CHECKPOINT,
    O_RESUME,
    O_BACKEND,
    O_PRECISION,
    O_WATCHDOG,
    O_TP,
    O_SEQPAR,
    O_SHUFFLE,
    O_FIRST,
    O_LAST,
    O_THREADS
};

static const struct option long_opts[] = {
    {"model", required_argument, NULL, O_MODEL},
    {"schedule", required_argument, NULL, O_SCHEDULE},
    {"layers", required_argument, NULL, O_LAYERS},
    {"ranks", required_argument, NULL, O_RANKS},
    {"microbatches", required_argument, NULL, O_MB},
    {"micro-batch-size", required_argument, NULL, O_MBS},
    {"chunks", required_argument, NULL, O_CHUNKS},
    {"group", required_argument, NULL, O_GROUP},
    {"uneven", no_argument, NULL, O_UNEVEN},
    {"first-stage-layers", required_argument, NULL, O_FIRST},
    {"last-stage-layers", required_argument, NULL, O_LAST},
    {"threads", required_argument, NULL, O_THREADS},
    {"dp", required_argument, NULL, O_DP},
    {"seq", required_argument, NULL, O_SEQ},
    {"steps", required_argument, NULL, O_STEPS},
    {"lr", required_argument, NULL, O_LR},
    {"weight-decay", required_argument, NULL, O_WD},
    {"clip", required_argument, NULL, O_CLIP},
    {"data", required_argument, NULL, O_DATA},
    {"seed", required_argument, NULL, O_SEED},
    {"json", no_argument, NULL, O_JSON},
    {"trace", required_argument, NULL, O_TRACE},
    {"quiet", no_argument, NULL, O_QUIET},
    {"transport", required_argument, NULL, O_TRANSPORT},
    {"help", no_argument, NULL, O_HELP},
    {"profile", required_argument, NULL, O_PROFILE},
    {"save-every", required_argument, NULL, O_SAVE_EVERY},
    {"checkpoint", required_argument, NULL, O_CHECKPOINT},
    {"resume", no_argument, NULL, O_RESUME},
    {"backend", required_argument, NULL, O_BACKEND},
    {"precision", required_argument, NULL, O_PRECISION},
    {"watchdog", required_argument, NULL, O_WATCHDOG},
    {"tp", required_argument, NULL, O_TP},
    {"sequence-parallel", no_argument, NULL, O_SEQPAR},
    {"shuffle", no_argument, NULL, O_SHUFFLE},
    {NULL, 0, NULL, 0},
};

static int apply(int c, const char *v, pprun_opts *o)
{
    switch (c) {
    case O_MODEL:
        o->model_name = v;
        return -1;
    case O_LAYERS:
        return parse_int("--layers", v, 1, &o->layers);
    case O_SCHEDULE:
        o->schedule = v;
        return -1;
    case O_RANKS:
        return parse_int("--ranks", v, 1, &o->ranks);
    case O_MB:
        return parse_int("--microbatches", v, 1, &o->microbatches);
    case O_MBS:
        return parse_int("--micro-batch-size", v, 1, &o->micro_batch);
    case O_CHUNKS:
        return parse_int("--chunks", v, 1, &o->chunks);
    case O_GROUP:
        return parse_int("--group", v, 1, &o->group);
    case O_UNEVEN:
        o->uneven = 1;
        return -1;
    case O_FIRST:
        return parse_int("--first-stage-layers", v, 1, &o->first_layers);
    case O_LAST:
        return parse_int("--last-stage-layers", v, 1, &o->last_layers);
    case O_THREADS:
        return parse_int("--threads", v, 1, &o->threads);
    case O_DP:
        o->dp_set = 1;
        return parse_int("--dp", v, 1, &o->dp);
    case O_SEQ:
        return parse_int("--seq", v, 1, &o->seq);
    case O_STEPS:
        return parse_int("--steps", v, 1, &o->steps);
    case O_LR:
        return parse_double("--lr", v, 0, &o->lr);
    case O_WD:
        return parse_double("--weight-decay", v, 0, &o->weight_decay);
    case O_CLIP:
        return parse_double("--clip", v, 0, &o->clip);
    case O_DATA:
        o->data = v;
        return -1;
    case O_SEED:
        return parse_u64("--seed", v, &o->seed);
    case O_JSON:
        o->json = 1;
        return -1;
    case O_TRACE:
        o->trace = v;
        return -1;
    case O_QUIET:
        o->quiet = 1;
        return -1;
    case O_TRANSPORT:
        if (strcmp(v, "auto") && strcmp(v, "thread") && strcmp(v, "mpi"))
            return bad("--transport", v, "auto, thread or mpi");
        o->transport = v;
        return -1;
    case O_HELP:
        usage(stdout);
        return 0;
    case O_PROFILE:
        o->profile = v;
        return -1;
    case O_SAVE_EVERY:
        return parse_int("--save-every", v, 1, &o->save_every);
    case O_CHECKPOINT:
        o->checkpoint = v;
        return -1;
    case O_RESUME:
        o->resume = 1;
        return -1;
    case O_BACKEND:
        if (strcmp(v, "cpu") && strcmp(v, "cuda"))
            return bad("--backend", v, "cpu or cuda");
        o->backend = strcmp(v, "cuda") ? PP_RT_BACKEND_CPU : PP_RT_BACKEND_CUDA;
        return -1;
    case O_PRECISION:
        if (strcmp(v, "fp32") && strcmp(v, "bf16"))
            return bad("--precision", v, "fp32 or bf16");
        o->precision = strcmp(v, "bf16") ? PP_PREC_FP32 : PP_PREC_BF16;
        return -1;
    case O_WATCHDOG:
        return parse_double("--watchdog", v, 0, &o->watchdog_s);
    case O_TP:
        return parse_int("--tp", v, 1, &o->tp);
    case O_SEQPAR:
        o->sequence_parallel = 1;
        return -1;
    case O_SHUFFLE:
        o->shuffle = 1;
        return -1;
    default:
        break;
    }
    fputs("pprun: unknown or incomplete option (see pprun --help)\n", stderr);
    return 2;
}

int pprun_parse(int argc, char **argv, pprun_opts *o)
{
    *o = (pprun_opts){.model_name = "tiny",
                      .schedule = PP_SCHED_DEFAULT,
                      .ranks = 2,
                      .microbatches = 4,
                      .micro_batch = 1,
                      .dp = 1,
                      .tp = 1,
                      .steps = 10,
                      .lr = 1e-3,
                      .clip = 1.0,
                      .seed = 1,
                      .transport = "auto",
                      .watchdog_s = PP_TRANSPORT_WATCHDOG_S};
    opterr = 0; /* our own one-line message */
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        if (c == '?') {
            fputs("pprun: unknown option or missing value: \"", stderr);
            pp_fputs_escaped(argv[optind - 1], stderr);
            fputs("\" (see pprun --help)\n", stderr);
            return 2;
        }
        int rc = apply(c, optarg, o);
        if (rc >= 0)
            return rc;
    }
    if (optind < argc) {
        fputs("pprun: unexpected argument \"", stderr);
        pp_fputs_escaped(argv[optind], stderr);
        fputs("\" (see pprun --help)\n", stderr);
        return 2;
    }
    if (o->lr > 10 || o->weight_decay > 10) { /* finite (parse_double), and sane */
        fprintf(stderr, "pprun: %s: expected at most 10, got %g\n",
                o->lr > 10 ? "--lr" : "--weight-decay", o->lr > 10 ? o->lr : o->weight_decay);
        return 2;
    }
    /* sizes bounded before anything is allocated (issue 18, finding 6) */
    if (o->threads > PPRUN_MAX_THREADS) {
        fprintf(stderr, "pprun: --threads: expected at most %d, got %d\n", PPRUN_MAX_THREADS,
                o->threads);
        return 2;
    }
    if (o->layers > PPRUN_MAX_LAYERS) {
        fprintf(stderr, "pprun: --layers: expected at most %d, got %d\n", PPRUN_MAX_LAYERS,
                o->layers);
        return 2;
    }
    if (pp_sched_budget_check(o->ranks, o->microbatches, o->chunks > 0 ? o->chunks : 1) !=
        PP_OK) {
        fprintf(stderr, "pprun: --ranks, --chunks, --microbatches: %s\n", pp_err_text());
        return 2;
    }
    if (o->precision == PP_PREC_BF16 && o->backend != PP_RT_BACKEND_CUDA) {
        /* the CPU backend computes in fp32 only */
        fputs("pprun: --precision bf16 needs --backend cuda (the CPU backend is fp32)\n", stderr);
        return 2;
    }
    return -1;
}
