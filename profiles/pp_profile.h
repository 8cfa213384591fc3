/* pp_profile.h — the tuned profile: pptune's contract with training runs.
 *
 * A profile is a versioned JSON document (docs/profile-schema.md describes every field, its
 * unit and the version rules) that the search writes and that training jobs, exporters and the
 * CI job read. This module:
 *
 *   - reads and validates a profile (pp_profile_read / pp_profile_parse): every error names the
 *     file, the field and what was expected; a newer MAJOR version is refused, fields this
 *     reader does not know (a newer MINOR version) are kept and written back unchanged;
 *   - compares two profiles (pp_profile_diff) for a CI job that must notice a slowdown;
 *   - exports the chosen configuration as Megatron-LM flags, NeMo YAML or pprun flags;
 *   - stores profiles: a local directory keyed by cluster fingerprint and model, and an HTTP
 *     store (libcurl: PUT/GET, timeouts, retries with backoff, SHA-256 checksums, bearer token).
 *
 * Lifecycle: pp_profile_read → use the fields → pp_profile_destroy. The fields are views into
 * the parsed document and stay valid until destroy. Library code here never prints except into
 * a FILE* the caller passes, and never exits.
 */
#ifndef PP_PROFILE_H
#define PP_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pp_backends.h"
#include "pp_common.h"
#include "pp_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PP_PROFILE_SCHEMA "pptune-profile"
/* The version this code reads and writes. A file with a larger MAJOR is refused; a file with
 * the same MAJOR and a larger MINOR is read (its unknown fields kept). */
#define PP_PROFILE_VERSION_MAJOR 1
#define PP_PROFILE_VERSION_MINOR 6
/* 1.1 added the model's shape beyond its sizes (model.head_dim, norm, linear_bias, qkv_bias,
 * position, rope_theta, rope_scaling), which exporters need; 1.0 profiles still read, and an
 * export that needs those fields says so (pp_profile.model.has_shape = 0). 1.2 added each
 * candidate's settings to its config (sequence_parallel, recompute, distributed_optimizer);
 * an older profile's candidates take them from its "options". 1.3 added model.norm_eps (the
 * norms' epsilon; without it an exporter leaves the target's default), and recompute_layers,
 * shard (in place of distributed_optimizer, which a 1.2 config still gives) and cp to each
 * config; a 1.2 candidate has none of them: every layer recomputed as its recompute says, its
 * shard from distributed_optimizer, cp 1. 1.4 added model.origin (the preset, or the config.json
 * by absolute path and SHA-256, that pprun is given) and measured.model (what the trial's pprun
 * said it trained); a 1.3 profile names its model by name only. 1.5 added model.moe (the
 * mixture-of-experts layers: absent, a dense model), model.qk_norm and each config's ep (absent:
 * 1). */

/* ---- the document --------------------------------------------------------------------------- */


/* A profile's mixture-of-experts layers (model.moe, 1.5): pp_moe_cfg's fields
 * (runtime/plan/pp_rt_model.h); experts 0: a dense model. */
typedef struct {
    int experts, top_k, ffn, shared, shared_ffn, every, phase, first_dense, norm_topk;
    const char *router; /* "softmax" or "sigmoid" */
    double aux_coef;
} pp_profile_moe;

/* A candidate: the chosen one or a runner-up. Measured figures exist only after trials. */
typedef struct {
    pp_config config; /* "config" (pp_config.h: its JSON form) */
    /* predicted */
    double step_time_s;       /* one optimizer step, seconds */
    double tokens_per_s;      /* whole cluster, tokens per second */
    double tflops_per_gpu;    /* model FLOPs per GPU per second / 1e12 */
    double mfu;               /* fraction of peak, 0..1 */
    double bubble_over_ideal; /* idle / ideal compute (Megatron definition) */
    double peak_bytes;        /* fullest rank's predicted peak, bytes */
    double capacity_bytes;    /* usable device memory after headroom, bytes */
    int fits;                 /* 1 when peak_bytes <= capacity_bytes */
    /* measured (has_measured = 1 only when a trial ran) */
    int has_measured;
    const char *measured_status; /* "ok", "oom", "crash", "timeout" */
    double measured_step_time_s; /* median step after warm-up, seconds */
    double measured_peak_bytes;  /* largest rank's peak, bytes */
    const char *launch;          /* the pprun command line the tuner wrote, informative */
    int predicted_only;          /* 1: could not be trialled here (e.g. t > 1 on the CPU runtime) */
} pp_profile_candidate;

typedef struct {
    const char *name;      /* the file name used in messages */
    int version_major;     /* "version" */
    int version_minor;     /* "version_minor" (absent: 0) */
    const char *created;   /* ISO 8601 UTC */
    const char *generator; /* "pptune 0.1.0 (git fe8d7ad01c)" */
    const char *command;   /* the pptune command line that made it */
    struct {
        const char *name;        /* preset or "probed" */
        const char *fingerprint; /* "fnv1a64:<16 hex>": the store's key */
        const char *device;
        int nodes, gpus_per_node;
        int gpu; /* "device_kind": "gpu" (1) or "cpu" (0); absent (1.0): options.precision
                  * bf16, which the tuner picks for GPUs only */
    } cluster;
    struct pp_profile_model {
        const char *name;
        int layers, hidden, heads, seq, vocab;
        double parameters; /* count */
        /* shape: kv_heads, ffn, gated_mlp and tied_embeddings since 1.0 (kv_heads = heads and
         * ffn = 4 hidden when absent); the rest since 1.1, has_shape = 1 when present */
        int kv_heads, ffn, gated_mlp, tied_embeddings;
        int has_shape;
        int head_dim;    /* width of one attention head */
        int norm_bias;   /* 1: LayerNorm ("layernorm"), 0: RMSNorm */
        int linear_bias; /* biases on every linear layer */
        int qkv_bias;    /* biases on Q, K, V only */
        int learned_pos; /* 1: learned positions, 0: rotary */
        double rope_theta;        /* rotary base; 0 with learned positions */
        const char *rope_scaling; /* rotary scaling type, NULL for none */
        double norm_eps; /* the norms' epsilon; 0: not recorded (an older writer) */
        /* "origin" (1.4; before: all NULL): where pptune read the model. kind "preset" (a name
         * of the model table, = name), "config.json" (path: the HuggingFace config.json as an
         * absolute path, sha256: its bytes' SHA-256 in hex when read) or "model-file"
         * (pptune's model JSON, path) */
        const char *origin_kind, *origin_path, *origin_sha256;
        /* "origin.layers" (1.6; absent: 0): the preset's or config.json's own layer count
         * when the search planned `layers` of them instead (pptune --layers L: the first L
         * blocks, as pprun --layers runs them); pprun is then given --layers `layers` */
        int origin_layers;
        /* "moe" (1.5; absent: a dense model, experts 0): the mixture-of-experts layers as
         * pp_moe_cfg (runtime/plan/pp_rt_model.h) describes them; router "softmax" or
         * "sigmoid". "qk_norm" (1.5): RMSNorm over each head of q and k (Qwen3). */
        pp_profile_moe moe;
        int qk_norm;
    } model;
    struct {
        int distributed_optimizer, sequence_parallel;
        const char *recompute; /* "none", "selective", "full" */
        int bf16;              /* options.precision: bf16 mixed precision (else fp32) */
    } options;
    int global_batch; /* sequences per optimizer step: b * N * d of every candidate */
    int has_chosen;   /* 0 when nothing fitted ("chosen": null) */
    pp_profile_candidate chosen;
    int n_runners_up;
    pp_profile_candidate *runners_up; /* (n_runners_up) */
    void *doc; /* private: the whole JSON document, unknown fields included */
} pp_profile;

/* Parses and validates text. `name` names the source in messages ("profile.json"). Errors:
 * PP_ERR_PARSE (`profile.json: field "chosen.config.p": expected an integer >= 1, got "x"`),
 * PP_ERR_UNSUPPORTED for a newer major version. *out is set only on success. */
pp_status pp_profile_parse(const char *text, size_t len, const char *name, pp_profile **out);
/* Reads a file and parses it. PP_ERR_NOTFOUND when the file does not exist. */
pp_status pp_profile_read(const char *path, pp_profile **out);
/* The file's bytes (NUL-terminated, caller frees), PP_ERR_NOTFOUND when it does not exist. */
pp_status pp_profile_read_text(const char *path, char **text, size_t *len);
/* NULL is a no-op. */
void pp_profile_destroy(pp_profile *p);
/* The document as JSON text (unknown fields included), caller frees. */
pp_status pp_profile_to_json(const pp_profile *p, char **text);
/* Writes the document atomically to path. */
pp_status pp_profile_write(const pp_profile *p, const char *path);

/* Derived figures of a candidate: measured tokens/s from the measured step time (0 when not
 * measured: global_batch * seq / step). */
double pp_profile_measured_tokens_per_s(const pp_profile *p, const pp_profile_candidate *c);

/* ---- diff ----------------------------------------------------------------------------------- */

typedef struct {
    int config_changed;  /* any axis of the configurations differs */
    int cluster_changed; /* fingerprints differ */
    int model_changed;   /* model names differ */
    int measured_basis;  /* 1: throughputs compared are measured in both, 0: predicted */
    double old_tokens_per_s, new_tokens_per_s; /* on that basis */
    double throughput_change;                  /* new / old - 1 (-0.07: 7 % slower) */
    double peak_bytes_change; /* new - old, bytes, on the same basis as throughput */
    int regression;           /* 1: throughput dropped by more than the threshold */
} pp_profile_diff;

/* Compares the chosen configurations of old and new and writes a readable report of what
 * changed to fp (may be NULL). threshold: largest tolerated relative drop of throughput
 * (0.05 = 5 %). Throughput is compared on measured figures when both have them, else on
 * predicted ones; the report says which. PP_ERR_INVALID when either has no chosen candidate. */
pp_status pp_profile_diff_run(const pp_profile *old, const pp_profile *new_, double threshold,
                              FILE *fp, pp_profile_diff *out);

/* ---- export (export.c: one row per target) ------------------------------------------------ */

/* A target a profile exports to: what it is called, what it can express, its writer. The rows
 * are static storage (pp_profile_export_targets); `pptune export --help`, `pptune --help`, the
 * refusals and their ways out are generated from them. */
typedef struct pp_export_target {
    const char *format;  /* --format NAME */
    const char *target;  /* --target NAME: a variant of the format (NULL: the format itself) */
    const char *title;   /* the target as messages name it: "Megatron-LM" */
    const char *output;  /* what it prints, for the command list: "Megatron-LM flags" */
    const char *help;    /* export --help's description ('\n' between lines) */
    int suggest;         /* 1: named as a way out when another target refuses a schedule it
                            runs (a training framework; not pptune's own pprun) */
    const char *builds;  /* non-NULL: it builds the model, so a profile without the model's
                            shape (before 1.1) is refused: what it builds ("a Megatron-LM
                            command") */
    int line_settings_only; /* 1: it runs only the settings pprun's line carries (the axes with a
                               pprun flag, pp_config_axis.flag): `pptune --for` holds the others
                               at their defaults (pp_profile_pprun_unrun) */
    int pprun_model;        /* 1: its line gives pprun the profile's model (model.origin: the
                               preset, or --model-config PATH): pptune first asks whether pprun
                               trains it (tuner/pprun_model.c, which reads the model table that
                               profiles/ does not link) and refuses what pprun would reject */
    /* The schedules it runs (a registry row); NULL: every one. */
    int (*runs)(const pp_sched_desc *d);
    /* Why it cannot run d, for the refusal ("Megatron-LM has no Chimera schedule (no upstream
     * flag selects it)"), into buf. */
    void (*why_not)(const pp_sched_desc *d, char *buf, size_t n);
    /* Writes the chosen configuration (one its rows let through) to fp, or refuses what the
     * rows cannot tell (a rope scaling the target has no flag for, ...) writing nothing. */
    pp_status (*write)(const pp_profile *p, FILE *fp);
} pp_export_target;

/* The rows, in --help order; *n their count. */
const pp_export_target *pp_profile_export_targets(int *n);
/* The row of --format FORMAT with --target TARGET (NULL: none). NULL, with PP_ERR_INVALID and a
 * message listing what exists, for an unknown format or a target the format has not. */
const pp_export_target *pp_profile_export_find(const char *format, const char *target);
/* The formats joined by sep ("megatron|nemo|..."), into buf; returns buf. */
char *pp_profile_export_names(const char *sep, char *buf, size_t n);
/* The registry's schedules target t runs, joined by sep ("gpipe,1f1b,interleaved"), into buf;
 * returns buf. What `pptune --for FORMAT` keeps the search to. */
char *pp_profile_export_schedules(const pp_export_target *t, const char *sep, char *buf,
                                  size_t n);
/* 1 when target t runs the registry's schedule `name`, 0 when not (or no such schedule). */
int pp_profile_export_runs(const pp_export_target *t, const char *name);
/* export --help's description of every target (its help, the schedules it runs). */
void pp_profile_export_help(FILE *fp);
/* Writes the chosen configuration for target t to fp. PP_ERR_INVALID when the profile has no
 * chosen configuration or a --target variant was asked for a schedule its format runs itself;
 * PP_ERR_UNSUPPORTED when the target cannot express it (a schedule it does not run, a profile
 * without the model's shape for a target that builds the model, ...), with the reason, the
 * profile's fastest runner-up it runs and the other targets that run it. */
pp_status pp_profile_export(const pp_profile *p, const pp_export_target *t, FILE *fp);

/* ---- pprun's command line (the one builder: trials, the profile's launch line, export) ------ */

/* What a pprun command line says. The model is one of two: the caller decides which pprun
 * trains (the tuner's pp_tune_pprun_model asks the model table). */
typedef struct {
    const char *model;        /* --model: a pprun preset name (when model_config is NULL) */
    const char *model_config; /* --model-config: the HuggingFace config.json; NULL: none */
    int layers;               /* --layers L: the model's first L blocks; 0: all of its own */
    const pp_config *config; /* its axes' flags (pp_config_axis.flag, on_line) */
    int seq;                 /* --seq */
    const char *backend;     /* --backend NAME (pp_backend_row_flag); NULL: pprun's default */
    pp_precision precision;  /* PP_PREC_BF16: --precision bf16; FP32: pprun's default */
} pp_profile_pprun_line;

#define PP_PROFILE_PPRUN_MAX_ARGS 48
#define PP_PROFILE_PPRUN_ARG_LEN 72
/* The longest config.json path a line carries (the argv points at the caller's string, not
 * the store), and room for a whole line with it (the string form, shell-quoted). */
#define PP_PROFILE_PPRUN_PATH_MAX 1024
#define PP_PROFILE_PPRUN_LINE_LEN (3 * PP_PROFILE_PPRUN_PATH_MAX)

/* pprun's options for the line, in the axes' line order: --model M (or --model-config PATH,
 * argv pointing at l->model_config) [--layers L] --schedule K --ranks p
 * --microbatches N --micro-batch-size b [--chunks v --group G (schedules with tunable chunks,
 * the registry's)] --dp d [--tp t [--sequence-parallel]] --seq s [--uneven]
 * [--first-stage-layers A] [--last-stage-layers Z] [--backend NAME] [--precision bf16].
 * Fills argv[0..n-1] (pointing into store) and returns n (at most PP_PROFILE_PPRUN_MAX_ARGS). */
int pp_profile_pprun_argv(const pp_profile_pprun_line *l,
                          char store[PP_PROFILE_PPRUN_MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN],
                          char **argv);
/* The same options as one string of shell words (pp_fput_sh_word: quoted where a word is not
 * plain), separated by single spaces (no program name, no newline), into buf (n bytes, cut to
 * fit); returns buf. */
char *pp_profile_pprun_args(const pp_profile_pprun_line *l, char *buf, size_t n);
/* NULL when pprun runs every setting of c; else the settings it has no option for, at values
 * other than their defaults ("shard optimizer, cp 2"), into buf: a line for c would run another
 * configuration than c (the builder leaves them out), so trials skip it, the pprun export
 * refuses it and the search's launch line says so. precision: the line's (pp_precision; for a
 * setting that pprun would run in one precision only). */
const char *pp_profile_pprun_unrun(const pp_config *c, int precision, char *buf, size_t n);

/* ---- the model's file (model_source.c) ------------------------------------------------------ */

/* The SHA-256 of the file's bytes as 64 lowercase hex digits (hex: 65 bytes). PP_ERR_NOTFOUND
 * or PP_ERR_IO (naming the file) when it cannot be read. */
pp_status pp_profile_file_sha256(const char *path, char hex[65]);
/* PP_OK when the file at path reads and its SHA-256 is sha256 (NULL: only that it reads);
 * else PP_ERR_IO / PP_ERR_INVALID with a message that names `who` (the profile, the
 * search), the path, both digests and the way out: pprun would train another model than
 * the one tuned. */
pp_status pp_profile_model_config_check(const char *who, const char *path, const char *sha256);

/* ---- local store ---------------------------------------------------------------------------- */

/* The default local store: $XDG_DATA_HOME/pptune/profiles, else ~/.local/share/pptune/profiles.
 * Caller frees. PP_ERR_INVALID when neither variable is set. */
pp_status pp_profile_store_dir(char **out);
/* The key of a profile in any store: "<fingerprint with ':' as '-'>/<model>.json". Refuses
 * (PP_ERR_INVALID) a fingerprint or model with characters outside [A-Za-z0-9._-:] so a key can
 * never leave the store's directory or need URL escaping. */
pp_status pp_profile_store_key(const char *fingerprint, const char *model, char *buf, size_t n);
/* Whether a model name can key a profile (the rule pp_profile_store_key applies): 1 or 0. */
int pp_profile_model_name_ok(const char *name);
/* Replaces, in place, every character a store key refuses with '_'. */
void pp_profile_model_name_sanitize(char *name);
/* dir + "/" + key. Creates nothing (a failed fetch must leave the store as it was). Caller
 * frees. */
pp_status pp_profile_store_path(const char *dir, const char *fingerprint, const char *model,
                                char **out);
/* Creates the directories above the file path (mkdir -p of its parent). */
pp_status pp_profile_store_mkdirs(const char *path);

/* ---- HTTP store ----------------------------------------------------------------------------- */

/* The environment variable holding the store's bearer token; its value is never printed. */
#define PP_STORE_TOKEN_ENV "PPTUNE_STORE_TOKEN"
/* The environment variable giving a default for --store. */
#define PP_STORE_URL_ENV "PPTUNE_STORE_URL"
/* Set to 1 to send the token over plain http to another host (allow_insecure_token). */
#define PP_STORE_INSECURE_ENV "PPTUNE_STORE_ALLOW_INSECURE_TOKEN"

typedef struct {
    const char *url;          /* base URL; profiles live at <url>/<key> */
    const char *token;        /* bearer token or NULL; never copied into a message */
    double connect_timeout_s; /* per attempt; 0: 10 s */
    double timeout_s;         /* whole attempt; 0: 60 s */
    double deadline_s;        /* the whole publish or fetch, retries and waits included (no
                               * attempt starts or runs past it); 0: twice timeout_s */
    int retries;              /* attempts after the first, on connection errors, timeouts and
                               * 5xx (never on 4xx); < 0: 3; at most PP_PROFILE_HTTP_MAX_RETRIES */
    double backoff_s;         /* wait before the first retry, doubled each time, each wait at
                               * most 30 s; 0: 0.5 s; at most 30 */
    int allow_insecure_token; /* send the token over plain http to a non-loopback host (else
                               * refused: it would cross the network in clear text) */
    /* Progress ("retry 1/3 in 0.5 s: HTTP 503"), may be NULL. Never receives the token. */
    void (*log)(void *ctx, const char *msg);
    void *log_ctx;
} pp_profile_http;
#define PP_PROFILE_HTTP_MAX_RETRIES 10
/* An attempt that moves fewer than 1 KiB/s for this long is abandoned (a slow-drip server). */
#define PP_PROFILE_HTTP_LOW_SPEED_S 10

/* PUTs the profile file at <url>/<key of its fingerprint and model> with header
 * X-Checksum-Sha256 (hex of the body; the convention of Artifactory's deploy API). The file is
 * validated first. On success *key_out (may be NULL) receives the key, caller frees. */
pp_status pp_profile_publish(const pp_profile_http *h, const char *path, char **key_out);
/* GETs <url>/<key>, checks the body's SHA-256 against the X-Checksum-Sha256 response header,
 * validates it as a profile of that fingerprint and model, and only then creates dest's
 * directory and writes it atomically to dest (on every failure nothing is created and the
 * previous file, if any, stays untouched). Errors: PP_ERR_IO
 * (connection, 5xx after retries, truncated body), PP_ERR_TIMEOUT, PP_ERR_NOTFOUND (404),
 * PP_ERR_INVALID (401/403: token missing or refused), PP_ERR_IO also for a missing or
 * mismatching checksum, PP_ERR_PARSE (not a valid profile, or not the one asked for). */
pp_status pp_profile_fetch(const pp_profile_http *h, const char *fingerprint, const char *model,
                           const char *dest);

#ifdef __cplusplus
}
#endif
#endif
