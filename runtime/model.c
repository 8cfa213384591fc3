/* model.c — the runnable model presets and the size checks of pp_model_cfg.
 *
 * Only sizes live here; the tuner's larger catalogue (GPT-3 family, Llama 3) and its importers
 * are in tuner/. "gpt-125m" is GPT-3 Small (Brown et al. 2020): its sizes are real, nobody
 * trains it on this machine.
 */
#include <string.h>

#include "pp_rt.h"

typedef struct {
    const char *name;
    pp_model_cfg cfg;
} preset;

static const preset presets[] = {
    /* CI-sized: byte-level vocabulary; many schedules run in seconds. */
    {"tiny", {.layers = 4, .hidden = 32, .heads = 4, .ffn = 128, .vocab = 256, .seq = 64}},
    /* A few minutes of training on a laptop-class CPU. */
    {"small", {.layers = 6, .hidden = 128, .heads = 4, .ffn = 512, .vocab = 256, .seq = 128}},
    {"gpt-125m",
     {.layers = 12, .hidden = 768, .heads = 12, .ffn = 3072, .vocab = 50257, .seq = 2048}},
};

pp_status pp_model_preset(const char *name, pp_model_cfg *out)
{
    size_t n = sizeof presets / sizeof presets[0];
    for (size_t i = 0; i < n; i++) {
        if (name && strcmp(name, presets[i].name) == 0) {
            *out = presets[i].cfg;
            return PP_OK;
        }
    }
    char list[256] = "";
    for (size_t i = 0; i < n; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, presets[i].name, sizeof list - strlen(list) - 1);
    }
    return PP_ERR(PP_ERR_NOTFOUND, "unknown model \"%s\"; the runtime's presets are: %s",
                  name ? name : "(null)", list);
}

pp_status pp_model_validate(const pp_model_cfg *cfg)
{
    const struct {
        const char *field;
        int value;
    } sizes[] = {
        {"layers", cfg->layers}, {"hidden", cfg->hidden}, {"heads", cfg->heads},
        {"ffn", cfg->ffn},       {"vocab", cfg->vocab},   {"seq", cfg->seq},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value <= 0)
            return PP_ERR(PP_ERR_INVALID, "model: \"%s\" must be a positive integer, got %d",
                          sizes[i].field, sizes[i].value);
    if (cfg->hidden % cfg->heads != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "model: \"heads\" (%d) must divide \"hidden\" (%d) so every head has the "
                      "same width",
                      cfg->heads, cfg->hidden);
    return PP_OK;
}
