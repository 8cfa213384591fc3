/* export_pprun.c — the chosen configuration as pprun's own flags (`pptune export --format
 * pprun`): the one pprun line builder (pprun_line.c) with the model the profile's origin names
 * (--model-config PATH for a config.json; whether pprun trains it pptune asks first: the
 * row's pprun_model) and the backend and precision the profile planned for. pprun runs every
 * schedule and split of the registry; a setting it has no option for (pp_profile_pprun_unrun)
 * is refused with the targets that run it. */
#include "export_impl.h"

pp_status pp_export_pprun(const pp_profile *p, FILE *fp)
{
    const pp_config *c = &p->chosen.config;
    /* backend and precision as the profile planned: the backend row for its device kind (a GPU
     * cluster: CUDA), bf16 when tuned so and the backend computes in it */
    const pp_backend_row *be = pp_backend_row_for_device(p->cluster.gpu ? "gpu" : "cpu");
    int bf16 = p->options.bf16 && pp_backend_row_has_precision(be, PP_PREC_BF16);
    char unrun[128];
    if (pp_profile_pprun_unrun(c, bf16 ? PP_PREC_BF16 : PP_PREC_FP32, unrun, sizeof unrun))
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: pprun has no option for %s yet: its line would train another "
                      "configuration; the Megatron-LM, NeMo and torchtitan exports carry it "
                      "where they run the schedule, or search with them forced to what pprun "
                      "runs (pprun --help)",
                      p->name, unrun);
    /* the model as the profile's origin says (1.4): the config.json the search read, else the
     * preset by name (what a profile before 1.4 names) */
    int config = p->model.origin_kind && !strcmp(p->model.origin_kind, "config.json");
    pp_profile_pprun_line line = {.model = p->model.name,
                                  .model_config = config ? p->model.origin_path : NULL,
                                  .layers = p->model.origin_layers ? p->model.layers : 0,
                                  .config = c,
                                  .seq = p->model.seq,
                                  .backend = pp_backend_row_flag(be),
                                  .precision = bf16 ? PP_PREC_BF16 : PP_PREC_FP32};
    char args[PP_PROFILE_PPRUN_LINE_LEN];
    fprintf(fp, "%s\n", pp_profile_pprun_args(&line, args, sizeof args));
    return PP_OK;
}
