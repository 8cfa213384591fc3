/* pprun_model.c — the one answer to "does pprun train this model, and what is it given", asked
 * by the search's launch line, its trials and `pptune export --format pprun`, so that pptune
 * prints no pprun line that pprun rejects (issue 26: `pptune --model llama3-8b` once printed
 * `pprun --model llama3-8b`, which pprun refused as unknown; a config.json model was launched as
 * `--model <file name>`).
 *
 * pprun takes a preset of the model table (runtime/plan/model.c: a row marked runnable; BERT is
 * planned only) or a HuggingFace config.json (--model-config), which it reads with the same
 * importer (runtime/plan/model_hf.c) and checks with the same pp_model_check_runnable; so this
 * asks exactly those, and also that the model pprun would build has the tuned sizes and
 * positions for the sequence. The config.json is given by the absolute path of the file the
 * search read (a trial or a launch under srun/mpirun may start in another directory; the nodes
 * need the path on a shared file system either way) and must still have the SHA-256 the search
 * recorded (pp_profile_model_config_check).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_tune.h"

/* The model pprun would build (cfg) has the tuned sizes, and positions for seq tokens. */
static pp_status same_shape(const char *what, const pp_model_cfg *cfg, const pp_model_cfg *want,
                            int seq)
{
    if (cfg->layers != want->layers || cfg->hidden != want->hidden ||
        cfg->heads != want->heads || pp_model_kv(cfg) != pp_model_kv(want) ||
        cfg->ffn != want->ffn || cfg->vocab != want->vocab ||
        pp_model_hd(cfg) != pp_model_hd(want))
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "pprun would train %s as %d layers, hidden %d, %d heads (%d KV), ffn %d, "
                      "vocabulary %d; the model tuned has %d, %d, %d (%d), %d, %d",
                      what, cfg->layers, cfg->hidden, cfg->heads, pp_model_kv(cfg), cfg->ffn,
                      cfg->vocab, want->layers, want->hidden, want->heads, pp_model_kv(want),
                      want->ffn, want->vocab);
    if (seq > cfg->seq)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "pprun trains %s at most %d tokens a sequence (its positions); the search "
                      "tuned %d",
                      what, cfg->seq, seq);
    return PP_OK;
}

/* The check, on what a model record or a profile says: a config.json (path, sha256), else a
 * preset by name (kind NULL or "preset"), else a file pprun does not read. want: the tuned
 * shape (NULL: not compared, a profile's is checked by pprun --profile itself). layers > 0:
 * pprun is given --layers layers (the model's first blocks, pptune --layers), so its model is
 * cut the same before the checks, as pprun cuts it. */
static pp_status check(const char *name, const char *kind, const char *path, const char *sha256,
                       int layers, const pp_model_cfg *want, int seq, pp_profile_pprun_line *line)
{
    pp_model_cfg cfg;
    char what[PP_PROFILE_PPRUN_PATH_MAX + 64];
    if (kind && !strcmp(kind, "config.json")) {
        snprintf(what, sizeof what, "the model of %s", path);
        PP_TRY(pp_profile_model_config_check("pprun --model-config", path, sha256));
        pp_model_hf_pos pos;
        PP_TRY(pp_model_load_hf(path, &cfg, &pos));
        cfg.layers = layers > 0 ? layers : cfg.layers;
        PP_TRY(pp_model_check_runnable(&cfg));
    } else if (!kind || !strcmp(kind, "preset")) {
        snprintf(what, sizeof what, "model %s", name);
        pp_status st = pp_model_preset(name, &cfg);
        cfg.layers = st == PP_OK && layers > 0 ? layers : cfg.layers;
        if (st == PP_OK)
            st = pp_model_check_runnable(&cfg);
        if (st != PP_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", pp_err_text());
            return PP_ERR(PP_ERR_UNSUPPORTED, "pprun cannot train model %s: %s", name, why);
        }
    } else {
        int n;
        const pp_model_row *t = pp_model_table(&n);
        char list[512] = "";
        for (int i = 0; i < n; i++)
            if (t[i].runnable)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                         list[0] ? ", " : "", t[i].name);
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "pprun cannot train model %s: it was read from %s, a file pprun does not "
                      "read; pprun trains the presets %s and HuggingFace config.json files "
                      "(pptune --model-config)",
                      name, path ? path : "(no file)", list);
    }
    PP_TRY(same_shape(what, &cfg, want ? want : &cfg, seq));
    if (line) {
        line->model = name;
        line->model_config = kind && !strcmp(kind, "config.json") ? path : NULL;
        line->layers = layers > 0 ? layers : 0;
    }
    return PP_OK;
}

pp_status pp_tune_pprun_model(const pp_tune_model *m, pp_profile_pprun_line *line)
{
    pp_model_cfg want;
    pp_tune_model_cfg(m, &want);
    const char *kind = m->config_path[0]              ? "config.json"
                       : !strcmp(m->source, "preset") ? "preset"
                                                      : "model-file";
    return check(m->name, kind, m->config_path[0] ? m->config_path : m->source,
                 m->config_sha256[0] ? m->config_sha256 : NULL,
                 m->origin_layers ? m->layers : 0, &want, m->seq, line);
}

pp_status pp_tune_pprun_profile_model(const pp_profile *p, pp_profile_pprun_line *line)
{
    return check(p->model.name, p->model.origin_kind, p->model.origin_path,
                 p->model.origin_sha256, p->model.origin_layers ? p->model.layers : 0, NULL,
                 p->model.seq, line);
}

void pp_tune_model_pprun_note(pp_tune_model *m)
{
    m->pprun = pp_tune_pprun_model(m, NULL) == PP_OK;
    snprintf(m->pprun_why, sizeof m->pprun_why, "%s", m->pprun ? "" : pp_err_text());
    pp_err_clear();
}
