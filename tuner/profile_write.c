/* profile_write.c — the tuned profile: a versioned JSON file written atomically.
 *
 * Contents: schema and version, when and how it was made (pptune version, command line), the
 * cluster (fingerprint, description used, where its figures came from), the model, the options
 * of the memory and time models, the chosen configuration with its predicted (and measured)
 * figures and their provenance, the runners-up, search statistics, and the pprun command that
 * launches the chosen configuration. Kept in one file so that profiles/ can take it over; the
 * store's layout (directory, key) and the reader are profiles/'s (pp_profile.h).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pp_profile.h"
#include "pp_tune.h"

int pp_tune_launch_precision(const pp_tune_hw *hw, const pp_tune_opts *o)
{
    const pp_backend_row *be = pp_tune_hw_backend(hw);
    return pp_backend_row_has_precision(be, o->precision) ? o->precision : PP_PREC_FP32;
}

char *pp_tune_launch_command(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                             const pp_tune_opts *o, char *buf, size_t n)
{
    pp_tune_opts def;
    if (!o) {
        pp_tune_opts_default(&def);
        o = &def;
    }
    const pp_backend_row *be = pp_tune_hw_backend(hw);
    pp_profile_pprun_line line = {
        .config = c, .seq = m->seq, .backend = pp_backend_row_flag(be),
        .precision = pp_tune_launch_precision(hw, o)};
    if (pp_tune_pprun_model(m, &line) != PP_OK)
        return NULL; /* no line pprun would reject: the error says why */
    if (m->block.moe.experts > 0 && be->device_memory) { /* runtime/executor.c's check */
        (void)PP_ERR(PP_ERR_UNSUPPORTED,
                     "pprun runs mixture-of-experts layers on the cpu backend only (the %s "
                     "backend has no MoE block yet)",
                     be->name);
        return NULL;
    }
    char args[PP_PROFILE_PPRUN_LINE_LEN];
    snprintf(buf, n, "pprun %s", pp_profile_pprun_args(&line, args, sizeof args));
    return buf;
}

static json_t *prediction_json(const pp_tune_model *m, const pp_tune_hw *hw,
                               const pp_tune_opts *opts, const pp_tune_prediction *p)
{
    char cmd[PP_PROFILE_PPRUN_LINE_LEN];
    /* "" when pprun cannot train the model (the search said why; the reader needs a string) */
    const char *launch = pp_tune_launch_command(m, hw, &p->cfg, opts, cmd, sizeof cmd);
    pp_err_clear();
    json_t *o = json_pack(
        "{s:o, s:{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:f, s:b}, s:s}", "config",
        pp_config_to_json(&p->cfg), "predicted", "provenance", "time and memory models + simulation",
        "step_time_s", p->step_time, "pipeline_time_s", p->pipeline_time, "tokens_per_s",
        p->tokens_per_s, "tflops_per_gpu", p->tflops_per_gpu, "mfu", p->mfu,
        "bubble_over_ideal", p->bubble_ideal, "bubble_over_total", p->bubble_total,
        "peak_bytes_per_rank_max", p->peak_mem, "peak_rank", p->peak_rank, "capacity_bytes",
        p->capacity, "fits", p->fits, "launch", launch ? launch : "");
    if (p->trial_status[0]) {
        json_t *ranks = json_array();
        for (int r = 0; r < p->cfg.p && r < PP_TUNE_RANK_PEAKS; r++)
            json_array_append_new(ranks, json_real(p->measured_rank_peak[r]));
        json_object_set_new(o, "measured",
                            json_pack("{s:s, s:s, s:s, s:s, s:f, s:f, s:o}", "provenance",
                                      "trial (pprun)", "where", p->trial_where, "status",
                                      p->trial_status, "detail", p->trial_detail,
                                      "step_time_s", p->measured_step, "peak_bytes",
                                      p->measured_peak, "peak_bytes_per_rank", ranks));
        if (p->trial_model[0]) /* what pprun said it trained (1.4) */
            json_object_set_new(json_object_get(o, "measured"), "model",
                                json_string(p->trial_model));
    }
    json_object_set_new(o, "predicted_only", json_boolean(p->predicted_only));
    return o;
}

/* The chosen configuration's predicted bytes per pipeline rank, by category: the search's own
 * entries for its schedule (none when the prediction carries none). */
static json_t *rank_memory_json(const pp_tune_prediction *p)
{
    const pp_tune_rank_mem *mem = p->mem;
    json_t *a = json_array();
    for (int r = 0; mem && r < p->cfg.p; r++)
        json_array_append_new(
            a, json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "rank", r, "weights",
                         mem[r].weights, "grads", mem[r].grads, "optim", mem[r].optim, "acts",
                         mem[r].acts, "acts_in_flight_units", mem[r].peak_units, "comm",
                         mem[r].comm, "workspace", mem[r].workspace, "total", mem[r].total));
    return a;
}

static json_t *cluster_json(const pp_tune_hw *hw)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:b, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, "
                     "s:s, s:s}",
                     "name", hw->name, "source", hw->source, "fingerprint", hw->fingerprint,
                     "device", hw->device, "nodes", hw->nodes, "gpus_per_node", hw->gpus_per_node,
                     "local", hw->is_local, "mem_bytes", hw->mem_bytes, "peak_flops",
                     hw->peak_flops, "gemm_flops", hw->gemm_flops, "mem_bw_Bps", hw->mem_bw,
                     "intra_bw_Bps", hw->intra_bw, "intra_latency_s", hw->intra_lat,
                     "inter_bw_Bps", hw->inter_bw, "inter_latency_s", hw->inter_lat, "note",
                     hw->note, "placement", "global GPU = tp + t * (pp + p * dp)");
}

/* The model as a training framework needs it to build the same network (version 1.1 added
 * norm, biases, positions and head width: an exporter must not guess them). */
static json_t *model_json(const pp_tune_model *m)
{
    pp_tune_params pc;
    pp_tune_model_params(m, &pc);
    json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:b, s:f}", "name",
                          m->name, "source", m->source, "layers", m->layers, "hidden", m->hidden,
                          "heads", m->heads, "kv_heads", m->kv_heads, "ffn", m->ffn, "vocab",
                          m->vocab, "seq", m->seq, "gated_mlp", m->gated_mlp, "tied_embeddings",
                          m->tied_embed, "parameters", pc.total);
    json_object_set_new(o, "head_dim", json_integer(m->head_dim ? m->head_dim
                                                                : m->hidden / m->heads));
    json_object_set_new(o, "norm", json_string(m->norm_bias ? "layernorm" : "rmsnorm"));
    json_object_set_new(o, "linear_bias", json_boolean(m->linear_bias));
    json_object_set_new(o, "qkv_bias", json_boolean(m->qkv_bias));
    json_object_set_new(o, "position", json_string(m->learned_pos ? "learned" : "rope"));
    if (!m->learned_pos)
        json_object_set_new(o, "rope_theta", json_real(m->rope_theta));
    json_object_set_new(o, "rope_scaling",
                        m->rope_scaling[0] ? json_string(m->rope_scaling) : json_null());
    if (m->norm_eps > 0)
        json_object_set_new(o, "norm_eps", json_real(m->norm_eps));
    /* 1.5: the mixture-of-experts layers (an exporter must not guess them) */
    const pp_moe_cfg *e = &m->block.moe;
    if (e->experts > 0)
        json_object_set_new(
            o, "moe",
            json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:b, s:f}", "experts",
                      e->experts, "top_k", e->top_k, "ffn", e->ffn, "shared", e->shared,
                      "shared_ffn", e->shared_ffn, "every", e->every > 1 ? e->every : 1,
                      "phase", e->every > 1 ? e->phase : 0, "first_dense", e->first_dense,
                      "router", e->router == PP_ROUTER_SIGMOID ? "sigmoid" : "softmax",
                      "norm_topk", e->norm_topk, "aux_coef", e->aux_coef));
    if (m->block.qk_norm)
        json_object_set_new(o, "qk_norm", json_true());
    /* 1.4: what pprun is given (pprun --profile reads the config.json and checks its SHA-256) */
    json_object_set_new(o, "origin",
                        m->config_path[0]
                            ? json_pack("{s:s, s:s, s:s}", "kind", "config.json", "path",
                                        m->config_path, "sha256", m->config_sha256)
                        : !strcmp(m->source, "preset")
                            ? json_pack("{s:s, s:s}", "kind", "preset", "name", m->name)
                            : json_pack("{s:s, s:s}", "kind", "model-file", "path", m->source));
    if (m->origin_layers) /* 1.6: planned the first `layers` of the model's (pptune --layers) */
        json_object_set_new(json_object_get(o, "origin"), "layers",
                            json_integer(m->origin_layers));
    return o;
}

/* The options; the settings there are the chosen candidate's (none without one), for readers
 * of 1.0 and 1.1, which take them from here: each candidate's config has its own (1.2, 1.3). */
static json_t *opts_json(const pp_tune_opts *o, const pp_tune_result *r)
{
    pp_config c;
    pp_config_defaults(&c);
    if (r->n_best > 0)
        c = r->best[0].cfg;
    return json_pack("{s:s, s:b, s:s, s:b, s:b, s:f, s:s}", "precision",
                     o->precision == PP_PREC_FP32 ? "fp32" : "bf16 + fp32 main grads + Adam",
                     "distributed_optimizer", c.shard != PP_SHARD_NONE, "recompute",
                     pp_recompute_name(c.recompute), "flash_attention", o->flash_attention,
                     "sequence_parallel", c.sequence_parallel && c.t > 1,
                     "headroom", o->headroom, "activation_model",
                     "Korthikanti 2022 Table 2, tensor parallel (+ sequence parallel when set)");
}

static json_t *stats_json(const pp_tune_result *r)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:i}", "candidates_seen",
                     (json_int_t)r->seen, "pruned_rule", (json_int_t)r->pruned_rule,
                     "pruned_memory", (json_int_t)r->pruned_memory, "simulated",
                     (json_int_t)r->simulated, "not_simulated_bound", (json_int_t)r->bounded,
                     "trialled", (json_int_t)r->trialled, "schedule_cache_hits",
                     (json_int_t)r->sim_cache_hits, "wall_s", r->wall_s, "global_batch",
                     r->global_batch);
}

static void iso_now(char *buf, size_t n)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *profile_json(const pp_tune_profile_input *in)
{
    const pp_tune_result *r = in->result;
    char created[32];
    iso_now(created, sizeof created);
    char generator[96];
    snprintf(generator, sizeof generator, "pptune %s", pp_version());
    json_t *runners = json_array();
    for (int i = 1; i < r->n_best; i++)
        json_array_append_new(runners, prediction_json(in->model, in->hw, &r->opts, &r->best[i]));
    json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:s}", "schema",
                          "pptune-profile", "version", PP_TUNE_PROFILE_VERSION, "created", created,
                          "generator", generator, "command", in->command_line,
                          "cluster", cluster_json(in->hw), "model", model_json(in->model),
                          "options", opts_json(in->opts, r), "runners_up", runners, "search",
                          stats_json(r), "figures",
                          in->trials_run ? "measured by trials on this machine, and predicted"
                                         : "predicted only (no trials on the target cluster)");
    const pp_tune_alloc *al = in->alloc && in->alloc->launcher[0] ? in->alloc : NULL;
    if (al && in->trials_run) {
        char fig[400];
        snprintf(fig, sizeof fig, "measured by trials as %s job steps on %s, and predicted",
                 al->launcher, al->nodes);
        json_object_set_new(o, "figures", json_string(fig));
    }
    if (al)
        json_object_set_new(o, "allocation",
                            json_pack("{s:s, s:s, s:s, s:i, s:i}", "launcher", al->launcher,
                                      "nodes", al->nodes, "job", al->job, "n_nodes",
                                      al->n_nodes, "ranks", al->slots));
    json_t *chosen = r->n_best > 0 ? prediction_json(in->model, in->hw, &r->opts, &r->best[0]) : json_null();
    if (r->n_best > 0)
        json_object_set_new(json_object_get(chosen, "predicted"), "memory_per_rank",
                            rank_memory_json(&r->best[0]));
    json_object_set_new(o, "chosen", chosen);
    json_object_set_new(o, "version_minor", json_integer(PP_PROFILE_VERSION_MINOR));
    json_t *cluster = json_object_get(o, "cluster");
    json_object_set_new(cluster, "device_kind", json_string(in->hw->cpu_devices ? "cpu" : "gpu"));
    json_error_t e;
    json_t *desc = in->cluster_json ? json_loads(in->cluster_json, 0, &e) : NULL;
    json_object_set_new(cluster, "description",
                        desc ? desc : json_string("regenerate with: pptune probe --preset NAME "
                                                  "--nodes N (see cluster.source)"));
    if (r->calibration > 0)
        json_object_set_new(o, "calibration",
                            json_pack("{s:f, s:s}", "measured_over_predicted", r->calibration,
                                      "from", "median over the trials that ran"));
    return o;
}

pp_status pp_tune_profile_write(const pp_tune_profile_input *in, const char *path)
{
    json_t *o = profile_json(in);
    if (!o)
        return PP_ERR(PP_ERR_NOMEM, "could not build the profile JSON");
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!text)
        return PP_ERR(PP_ERR_NOMEM, "could not serialise the profile JSON");
    size_t len = strlen(text);
    text[len] = '\0';
    pp_status st = PP_OK;
    if (!strcmp(path, "-")) { /* stdout: a stream, nothing to rename */
        if (fwrite(text, 1, len, stdout) != len || fputc('\n', stdout) == EOF ||
            fflush(stdout) != 0)
            st = PP_ERR(PP_ERR_IO, "stdout: cannot write the profile");
    } else {
        st = pp_file_write_atomic(path, text, len);
    }
    free(text);
    PP_TRY(st);
    return PP_OK;
}

/* The store keys a profile by cluster fingerprint and model name (profiles/store.c); a model
 * name read from a file may hold characters a key refuses: those become '_'. */
pp_status pp_tune_profile_default_path(const pp_tune_hw *hw, const pp_tune_model *m, char **out)
{
    char model[101];
    snprintf(model, sizeof model, "%s", m->name);
    pp_profile_model_name_sanitize(model);
    char *dir = NULL;
    PP_TRY(pp_profile_store_dir(&dir));
    char *path = NULL;
    pp_status st = pp_profile_store_path(dir, hw->fingerprint, model, &path);
    free(dir);
    if (st == PP_OK)
        st = pp_profile_store_mkdirs(path);
    if (st != PP_OK) {
        free(path);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    *out = path;
    return PP_OK;
}
