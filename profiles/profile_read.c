/* profile_read.c — parses and validates a profile (docs/profile-schema.md).
 *
 * Every field the readers of a profile rely on is checked for presence, type and range, and a
 * failure names the file, the field's path and what was expected, with the offending value.
 * The whole JSON document is kept (pp_profile.doc), so fields this version does not know —
 * those of a newer minor version — survive a read/write round trip. This file does not decide
 * what to do with a profile; diff, export and the store do.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_json.h"
#include "pp_profile.h"
#include "pp_sched.h"

typedef pp_json_src rd;

#define INT_MAX_FIELD 1000000000 /* no size or count in a profile comes near */

/* "FILE: field "PREFIX.KEY": expected WANT, got GOT" */
static pp_status bad(const rd *r, const char *prefix, const char *key, const char *want,
                     const json_t *got)
{
    char path[160];
    return pp_json_bad(r, pp_json_path(path, sizeof path, prefix, key), want, got);
}

/* A name-like field (an enum whose values pptune and HuggingFace extend: a rope type, a trial
 * status): 1 to 32 of a-z 0-9 _ - . (want says what it is in the message). */
static pp_status read_name(const rd *r, json_t *o, const char *prefix, const char *key,
                           const char *want, const char **out)
{
    PP_TRY(pp_json_str(r, o, prefix, key, out));
    size_t n = strlen(*out);
    if (n < 1 || n > 32 || strspn(*out, "abcdefghijklmnopqrstuvwxyz0123456789_-.") != n)
        return bad(r, prefix, key, want, json_object_get(o, key));
    return PP_OK;
}

static pp_status read_predicted(const rd *r, json_t *o, const char *prefix, pp_profile_candidate *c)
{
    PP_TRY(pp_json_num(r, o, prefix, "step_time_s", 0, &c->step_time_s));
    PP_TRY(pp_json_num(r, o, prefix, "tokens_per_s", 0, &c->tokens_per_s));
    PP_TRY(pp_json_num(r, o, prefix, "tflops_per_gpu", 0, &c->tflops_per_gpu));
    PP_TRY(pp_json_num(r, o, prefix, "mfu", 0, &c->mfu));
    PP_TRY(pp_json_num(r, o, prefix, "bubble_over_ideal", 0, &c->bubble_over_ideal));
    PP_TRY(pp_json_num(r, o, prefix, "peak_bytes_per_rank_max", 0, &c->peak_bytes));
    PP_TRY(pp_json_num(r, o, prefix, "capacity_bytes", 0, &c->capacity_bytes));
    PP_TRY(pp_json_bool(r, o, prefix, "fits", &c->fits));
    if (!(c->step_time_s > 0))
        return bad(r, prefix, "step_time_s", "a number > 0 (seconds)",
                   json_object_get(o, "step_time_s"));
    return PP_OK;
}

/* What a candidate's config does not say: the axes' defaults, and its settings before 1.2 the
 * profile's options. */
static pp_config config_defaults(const pp_profile *p)
{
    pp_config c;
    pp_config_defaults(&c);
    c.sequence_parallel = p->options.sequence_parallel;
    c.shard = p->options.distributed_optimizer ? PP_SHARD_OPTIMIZER : PP_SHARD_NONE;
    for (int k = 0; pp_recompute_names[k]; k++)
        if (!strcmp(p->options.recompute, pp_recompute_names[k]))
            c.recompute = (pp_recompute)k;
    return c;
}

static pp_status read_candidate(const rd *r, json_t *o, const char *prefix, const pp_profile *p,
                                long devices, pp_profile_candidate *c)
{
    char sub[160];
    json_t *x = NULL;
    int global_batch = p->global_batch;
    *c = (pp_profile_candidate){.config = config_defaults(p)};
    pp_json_path(sub, sizeof sub, prefix, "config");
    PP_TRY(pp_json_obj(r, o, prefix, "config", 0, &x));
    PP_TRY(pp_config_from_json(x, r->file, sub, &c->config));
    pp_json_path(sub, sizeof sub, prefix, "predicted");
    PP_TRY(pp_json_obj(r, o, prefix, "predicted", 0, &x));
    PP_TRY(read_predicted(r, x, sub, c));
    PP_TRY(pp_json_str(r, o, prefix, "launch", &c->launch));
    PP_TRY(pp_json_bool(r, o, prefix, "predicted_only", &c->predicted_only));
    json_t *m = json_object_get(o, "measured");
    if (m) {
        pp_json_path(sub, sizeof sub, prefix, "measured");
        if (!json_is_object(m))
            return bad(r, prefix, "measured", "an object (or no field)", m);
        PP_TRY(read_name(r, m, sub, "status", "a trial status such as \"ok\" or \"oom\"",
                         &c->measured_status));
        PP_TRY(pp_json_num(r, m, sub, "step_time_s", 0, &c->measured_step_time_s));
        PP_TRY(pp_json_num(r, m, sub, "peak_bytes", 0, &c->measured_peak_bytes));
        c->has_measured = 1;
    }
    const pp_config *k = &c->config;
    /* b N d = global batch, compared by division: each factor may be up to 1e9, and a product
     * that wraps could let a hostile profile pass and then size pprun's buffers */
    if (global_batch % k->b != 0 || (global_batch / k->b) % k->d != 0 ||
        (global_batch / k->b) / k->d != k->N) {
        char want[96], path[160];
        pp_json_path(path, sizeof path, prefix, "config");
        snprintf(want, sizeof want, "b * N * d = search.global_batch (%d)", global_batch);
        return pp_json_fail(r, path, "expected %s, got b=%d N=%d d=%d", want, k->b, k->N, k->d);
    }
    /* every stage holds a layer at least (64-bit: p and v may each be up to 1e9) */
    if (pp_config_stages(k) > p->model.layers) {
        char path[160];
        pp_json_path(path, sizeof path, prefix, "config");
        return pp_json_fail(r, path,
                            "expected at most the model's %d layers in its %lld pipeline stages "
                            "(p x v), got p=%d v=%d",
                            p->model.layers, pp_config_stages(k), k->p, k->v);
    }
    /* p t cp d devices, at most the cluster's (same care: divisions, not products) */
    if (devices > 0 && (k->p > devices || k->t > devices / k->p ||
                        k->cp > devices / k->p / k->t ||
                        k->d > devices / k->p / k->t / k->cp)) {
        char path[160];
        pp_json_path(path, sizeof path, prefix, "config");
        return pp_json_fail(r, path,
                            "expected p * t * cp * d <= the cluster's %ld devices, got p=%d t=%d "
                            "cp=%d d=%d",
                            devices, k->p, k->t, k->cp, k->d);
    }
    return PP_OK;
}

/* An optional integer field in lo..hi; absent leaves *out as it was. */
static pp_status opt_int(const rd *r, json_t *o, const char *prefix, const char *key, int lo,
                         int *out)
{
    return json_object_get(o, key) ? pp_json_int(r, o, prefix, key, lo, INT_MAX_FIELD, NULL, out)
                                   : PP_OK;
}

static pp_status opt_bool(const rd *r, json_t *o, const char *prefix, const char *key, int *out)
{
    return json_object_get(o, key) ? pp_json_bool(r, o, prefix, key, out) : PP_OK;
}

/* The model's shape: 1.0 wrote kv_heads, ffn, gated_mlp, tied_embeddings; 1.1 the rest (all of
 * it or none: a half-written shape is an error, not a guess). */
static pp_status read_shape(const rd *r, json_t *o, pp_profile *p)
{
    static const char *const NORMS[] = {"layernorm", "rmsnorm", NULL};
    static const char *const POSITIONS[] = {"learned", "rope", NULL};
    p->model.kv_heads = p->model.heads;
    p->model.ffn = p->model.hidden <= INT_MAX_FIELD / 4 ? 4 * p->model.hidden : INT_MAX_FIELD;
    p->model.tied_embeddings = 1;
    PP_TRY(opt_int(r, o, "model", "kv_heads", 1, &p->model.kv_heads));
    PP_TRY(opt_int(r, o, "model", "ffn", 1, &p->model.ffn));
    PP_TRY(opt_bool(r, o, "model", "gated_mlp", &p->model.gated_mlp));
    PP_TRY(opt_bool(r, o, "model", "tied_embeddings", &p->model.tied_embeddings));
    if (!json_object_get(o, "norm"))
        return PP_OK; /* a 1.0 profile: has_shape = 0 */
    const char *norm, *pos;
    PP_TRY(pp_json_enum(r, o, "model", "norm", NORMS, "\"layernorm\" or \"rmsnorm\"", &norm));
    PP_TRY(pp_json_enum(r, o, "model", "position", POSITIONS, "\"learned\" or \"rope\"", &pos));
    PP_TRY(pp_json_int(r, o, "model", "head_dim", 1, INT_MAX_FIELD, NULL, &p->model.head_dim));
    PP_TRY(pp_json_bool(r, o, "model", "linear_bias", &p->model.linear_bias));
    PP_TRY(pp_json_bool(r, o, "model", "qkv_bias", &p->model.qkv_bias));
    p->model.norm_bias = !strcmp(norm, "layernorm");
    p->model.learned_pos = !strcmp(pos, "learned");
    if (!p->model.learned_pos)
        PP_TRY(pp_json_num(r, o, "model", "rope_theta", 1, &p->model.rope_theta));
    json_t *sc = json_object_get(o, "rope_scaling");
    if (sc && !json_is_null(sc))
        PP_TRY(read_name(r, o, "model", "rope_scaling", "a rope type such as \"llama3\"",
                         &p->model.rope_scaling));
    if (json_object_get(o, "norm_eps")) /* 1.3; absent: the targets' default */
        PP_TRY(pp_json_range(r, o, "model", "norm_eps", 1e-30, 1, 0, &p->model.norm_eps));
    p->model.has_shape = 1;
    return PP_OK;
}

/* model.origin (1.4): a kind and what it needs; absent in older profiles (NULLs). ("source",
 * a string since 1.0, is informative: "preset" or the file as the command line named it.) */
static pp_status read_origin(const rd *r, json_t *model, pp_profile *p)
{
    static const char *const KINDS[] = {"preset", "config.json", "model-file", NULL};
    json_t *o = json_object_get(model, "origin");
    if (!o || json_is_null(o))
        return PP_OK;
    PP_TRY(pp_json_obj(r, model, "model", "origin", 0, &o));
    PP_TRY(pp_json_enum(r, o, "model.origin", "kind", KINDS,
                        "\"preset\", \"config.json\" or \"model-file\"", &p->model.origin_kind));
    PP_TRY(opt_int(r, o, "model.origin", "layers", 1, &p->model.origin_layers));
    if (!strcmp(p->model.origin_kind, "preset"))
        return PP_OK;
    PP_TRY(pp_json_str(r, o, "model.origin", "path", &p->model.origin_path));
    if (!p->model.origin_path[0])
        return bad(r, "model.origin", "path", "the file's path", json_object_get(o, "path"));
    if (strcmp(p->model.origin_kind, "config.json") != 0)
        return PP_OK;
    PP_TRY(pp_json_str(r, o, "model.origin", "sha256", &p->model.origin_sha256));
    const char *h = p->model.origin_sha256;
    if (strlen(h) != 64 || strspn(h, "0123456789abcdef") != 64)
        return bad(r, "model.origin", "sha256", "64 lowercase hex digits (the file's SHA-256)",
                   json_object_get(o, "sha256"));
    return PP_OK;
}

/* model.moe (1.5): the mixture-of-experts layers; absent or null, a dense model. model.qk_norm
 * (1.5): absent, false. */
static pp_status read_moe(const rd *r, json_t *model, pp_profile *p)
{
    static const char *const ROUTERS[] = {"softmax", "sigmoid", NULL};
    PP_TRY(opt_bool(r, model, "model", "qk_norm", &p->model.qk_norm));
    json_t *o = json_object_get(model, "moe");
    if (!o || json_is_null(o))
        return PP_OK;
    PP_TRY(pp_json_obj(r, model, "model", "moe", 0, &o));
    const char *P = "model.moe";
    PP_TRY(pp_json_int(r, o, P, "experts", 1, INT_MAX_FIELD, NULL, &p->model.moe.experts));
    PP_TRY(pp_json_int(r, o, P, "top_k", 1, p->model.moe.experts, NULL, &p->model.moe.top_k));
    PP_TRY(pp_json_int(r, o, P, "ffn", 1, INT_MAX_FIELD, NULL, &p->model.moe.ffn));
    PP_TRY(pp_json_int(r, o, P, "shared", 0, INT_MAX_FIELD, NULL, &p->model.moe.shared));
    PP_TRY(pp_json_int(r, o, P, "shared_ffn", 0, INT_MAX_FIELD, NULL, &p->model.moe.shared_ffn));
    PP_TRY(pp_json_int(r, o, P, "every", 1, INT_MAX_FIELD, NULL, &p->model.moe.every));
    PP_TRY(pp_json_int(r, o, P, "phase", 0, p->model.moe.every - 1, NULL, &p->model.moe.phase));
    PP_TRY(pp_json_int(r, o, P, "first_dense", 0, INT_MAX_FIELD, NULL,
                       &p->model.moe.first_dense));
    PP_TRY(pp_json_enum(r, o, P, "router", ROUTERS, "\"softmax\" or \"sigmoid\"",
                        &p->model.moe.router));
    PP_TRY(pp_json_bool(r, o, P, "norm_topk", &p->model.moe.norm_topk));
    PP_TRY(pp_json_range(r, o, P, "aux_coef", 0, 1e6, 1, &p->model.moe.aux_coef));
    return PP_OK;
}

/* schema, version, version_minor: checked before anything else, so a newer major version is
 * refused with the version message rather than a field error. */
static pp_status read_version(const rd *r, json_t *doc, pp_profile *p)
{
    json_t *s = json_object_get(doc, "schema");
    if (!json_is_string(s) || strcmp(json_string_value(s), PP_PROFILE_SCHEMA) != 0)
        return bad(r, "", "schema", "\"" PP_PROFILE_SCHEMA "\" (is this a pptune profile?)", s);
    PP_TRY(pp_json_int(r, doc, "", "version", 1, INT_MAX_FIELD, NULL, &p->version_major));
    p->version_minor = 0;
    if (json_object_get(doc, "version_minor"))
        PP_TRY(pp_json_int(r, doc, "", "version_minor", 0, INT_MAX_FIELD, NULL, &p->version_minor));
    if (p->version_major > PP_PROFILE_VERSION_MAJOR)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: profile version %d.%d is newer than this pptune reads (%d.x): its "
                      "fields may mean something else; upgrade pptune to read it",
                      r->file, p->version_major, p->version_minor, PP_PROFILE_VERSION_MAJOR);
    return PP_OK;
}

static pp_status read_head(const rd *r, json_t *doc, pp_profile *p)
{
    json_t *o = NULL;
    PP_TRY(pp_json_str(r, doc, "", "created", &p->created));
    PP_TRY(pp_json_str(r, doc, "", "generator", &p->generator));
    PP_TRY(pp_json_str(r, doc, "", "command", &p->command));
    PP_TRY(pp_json_obj(r, doc, "", "cluster", 0, &o));
    PP_TRY(pp_json_str(r, o, "cluster", "name", &p->cluster.name));
    PP_TRY(pp_json_str(r, o, "cluster", "fingerprint", &p->cluster.fingerprint));
    PP_TRY(pp_json_str(r, o, "cluster", "device", &p->cluster.device));
    PP_TRY(pp_json_int(r, o, "cluster", "nodes", 1, INT_MAX_FIELD, NULL, &p->cluster.nodes));
    PP_TRY(pp_json_int(r, o, "cluster", "gpus_per_node", 1, INT_MAX_FIELD, NULL,
                       &p->cluster.gpus_per_node));
    char key[128];
    if (pp_profile_store_key(p->cluster.fingerprint, "m", key, sizeof key) != PP_OK)
        return bad(r, "cluster", "fingerprint", "letters, digits and . _ - : only",
                   json_object_get(o, "fingerprint"));
    PP_TRY(pp_json_obj(r, doc, "", "model", 0, &o));
    PP_TRY(pp_json_str(r, o, "model", "name", &p->model.name));
    PP_TRY(pp_json_int(r, o, "model", "layers", 1, INT_MAX_FIELD, NULL, &p->model.layers));
    PP_TRY(pp_json_int(r, o, "model", "hidden", 1, INT_MAX_FIELD, NULL, &p->model.hidden));
    PP_TRY(pp_json_int(r, o, "model", "heads", 1, INT_MAX_FIELD, NULL, &p->model.heads));
    PP_TRY(pp_json_int(r, o, "model", "vocab", 1, INT_MAX_FIELD, NULL, &p->model.vocab));
    PP_TRY(pp_json_int(r, o, "model", "seq", 1, INT_MAX_FIELD, NULL, &p->model.seq));
    PP_TRY(pp_json_num(r, o, "model", "parameters", 0, &p->model.parameters));
    if (pp_profile_store_key("f", p->model.name, key, sizeof key) != PP_OK)
        return bad(r, "model", "name", "letters, digits and . _ - only",
                   json_object_get(o, "name"));
    PP_TRY(read_shape(r, o, p));
    PP_TRY(read_origin(r, o, p));
    PP_TRY(read_moe(r, o, p));
    PP_TRY(pp_json_obj(r, doc, "", "options", 0, &o));
    PP_TRY(
        pp_json_bool(r, o, "options", "distributed_optimizer", &p->options.distributed_optimizer));
    PP_TRY(pp_json_bool(r, o, "options", "sequence_parallel", &p->options.sequence_parallel));
    PP_TRY(pp_json_enum(r, o, "options", "recompute", pp_recompute_names,
                        "one of none, selective, full", &p->options.recompute));
    const char *prec = "fp32";
    static const char *const PRECISIONS[] = {"fp32", "bf16", "bf16 + fp32 main grads + Adam", NULL};
    if (json_object_get(o, "precision"))
        PP_TRY(pp_json_enum(r, o, "options", "precision", PRECISIONS,
                            "\"fp32\" or \"bf16 + fp32 main grads + Adam\"", &prec));
    p->options.bf16 = !strncmp(prec, "bf16", 4);
    static const char *const KINDS[] = {"gpu", "cpu", NULL};
    const char *kind = p->options.bf16 ? "gpu" : "cpu";
    json_t *cl = json_object_get(doc, "cluster");
    if (json_object_get(cl, "device_kind"))
        PP_TRY(pp_json_enum(r, cl, "cluster", "device_kind", KINDS, "\"gpu\" or \"cpu\"", &kind));
    p->cluster.gpu = !strcmp(kind, "gpu");
    PP_TRY(pp_json_obj(r, doc, "", "search", 0, &o));
    PP_TRY(pp_json_int(r, o, "search", "global_batch", 1, INT_MAX_FIELD, NULL, &p->global_batch));
    return PP_OK;
}

static pp_status read_candidates(const rd *r, json_t *doc, pp_profile *p)
{
    long devices = (long)p->cluster.nodes * p->cluster.gpus_per_node; /* each <= 1e9 */
    json_t *ch = json_object_get(doc, "chosen");
    if (json_is_object(ch)) {
        PP_TRY(read_candidate(r, ch, "chosen", p, devices, &p->chosen));
        p->has_chosen = 1;
    } else if (!json_is_null(ch)) {
        return bad(r, "", "chosen", "an object, or null when nothing fitted", ch);
    }
    json_t *ru = json_object_get(doc, "runners_up");
    if (!json_is_array(ru))
        return bad(r, "", "runners_up", "an array", ru);
    size_t n = json_array_size(ru);
    if (n == 0)
        return PP_OK;
    p->runners_up = pp_calloc(n, sizeof *p->runners_up);
    if (!p->runners_up)
        return PP_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        char prefix[48];
        snprintf(prefix, sizeof prefix, "runners_up[%zu]", i);
        json_t *c = json_array_get(ru, i);
        if (!json_is_object(c))
            return bad(r, "", prefix, "an object", c);
        PP_TRY(read_candidate(r, c, prefix, p, devices, &p->runners_up[i]));
        p->n_runners_up = (int)i + 1;
    }
    return PP_OK;
}

static pp_status read_doc(const rd *r, json_t *doc, pp_profile *p)
{
    if (!json_is_object(doc))
        return PP_ERR(PP_ERR_PARSE, "%s: expected a JSON object at the top level", r->file);
    PP_TRY(read_version(r, doc, p));
    PP_TRY(read_head(r, doc, p));
    PP_TRY(read_candidates(r, doc, p));
    return PP_OK;
}

pp_status pp_profile_parse(const char *text, size_t len, const char *name, pp_profile **out)
{
    json_t *doc;
    PP_TRY(pp_json_load(text, len, name, JSON_REJECT_DUPLICATES, &doc));
    pp_profile *p = pp_calloc(1, sizeof *p);
    char *nm = pp_strdup(name);
    if (!p || !nm) {
        free(p);
        free(nm);
        json_decref(doc);
        return PP_ERR_NOMEM;
    }
    p->doc = doc;
    p->name = nm;
    rd r = {.file = nm};
    pp_status st = read_doc(&r, doc, p);
    if (st != PP_OK) {
        pp_profile_destroy(p);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    *out = p;
    return PP_OK;
}

pp_status pp_profile_read_text(const char *path, char **text, size_t *len)
{
    PP_TRY(pp_file_read(path, text, len)); /* NOTFOUND for a missing file, IO otherwise */
    return PP_OK;
}

pp_status pp_profile_read(const char *path, pp_profile **out)
{
    char *text = NULL;
    size_t len;
    PP_TRY(pp_profile_read_text(path, &text, &len));
    pp_status st = pp_profile_parse(text, len, path, out);
    free(text);
    PP_TRY(st);
    return PP_OK;
}

void pp_profile_destroy(pp_profile *p)
{
    if (!p)
        return;
    json_decref(p->doc);
    free((char *)p->name);
    free(p->runners_up);
    free(p);
}

pp_status pp_profile_to_json(const pp_profile *p, char **text)
{
    /* Same layout as the tuner's writer: two-space indent, ten significant digits. */
    char *s = json_dumps(p->doc, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    if (!s)
        return PP_ERR(PP_ERR_NOMEM, "could not serialise profile %s", p->name);
    *text = s;
    return PP_OK;
}

pp_status pp_profile_write(const pp_profile *p, const char *path)
{
    char *text = NULL;
    PP_TRY(pp_profile_to_json(p, &text));
    size_t len = strlen(text);
    pp_status st = pp_file_write_atomic(path, text, len);
    free(text);
    PP_TRY(st);
    return PP_OK;
}

double pp_profile_measured_tokens_per_s(const pp_profile *p, const pp_profile_candidate *c)
{
    if (!c->has_measured || strcmp(c->measured_status, "ok") != 0 || !(c->measured_step_time_s > 0))
        return 0;
    return (double)p->global_batch * p->model.seq / c->measured_step_time_s;
}
