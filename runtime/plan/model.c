/* model.c — the runnable model presets and the size checks of pp_model_cfg.
 *
 * Only sizes live here; the tuner's larger catalogue (GPT-3 family, Llama 3) and its importers
 * are in tuner/. The "gpt-*" presets are the GPT-3 family's dense shapes (Brown et al. 2020,
 * Table 2.1; the same ones tuner/models.c lists): this runtime's model is that architecture
 * (learned positions, pre-LN blocks, GELU MLP, biases, tied embedding), so pptune's trials on
 * GPUs run the real sizes. Nobody trains them on a CPU: they are for the CUDA backend.
 */
#include <string.h>

#include "pp_rt_model.h"

typedef struct {
    const char *name;
    pp_model_cfg cfg;
} preset;

static const preset presets[] = {
    /* CI-sized: byte-level vocabulary; many schedules run in seconds. */
    {"tiny", {.layers = 4, .hidden = 32, .heads = 4, .ffn = 128, .vocab = 256, .seq = 64}},
    /* A few minutes of training on a laptop-class CPU. */
    {"small", {.layers = 6, .hidden = 128, .heads = 4, .ffn = 512, .vocab = 256, .seq = 128}},
#define PP_GPT3(L, C, H) {.layers = L, .hidden = C, .heads = H, .ffn = 4 * (C), .vocab = 50257, .seq = 2048}
    {"gpt-125m", PP_GPT3(12, 768, 12)},
    {"gpt-350m", PP_GPT3(24, 1024, 16)},
    {"gpt-760m", PP_GPT3(24, 1536, 16)},
    {"gpt-1.3b", PP_GPT3(24, 2048, 16)},
    {"gpt-2.7b", PP_GPT3(32, 2560, 32)},
    {"gpt-6.7b", PP_GPT3(32, 4096, 32)},
    {"gpt-13b", PP_GPT3(40, 5120, 40)},
    {"gpt-175b", PP_GPT3(96, 12288, 96)},
#undef PP_GPT3
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

pp_status pp_model_check_tp(const pp_model_cfg *cfg, int t)
{
    if (t < 1)
        return PP_ERR(PP_ERR_INVALID, "tensor parallelism: --tp must be >= 1, got %d", t);
    if (cfg->heads % t != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "tensor parallelism: --tp %d must divide the model's %d attention heads "
                      "(each rank takes whole heads)",
                      t, cfg->heads);
    if (cfg->ffn % t != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "tensor parallelism: --tp %d must divide the model's MLP width \"ffn\" %d",
                      t, cfg->ffn);
    return PP_OK;
}

pp_status pp_model_check_sp(int seq, int t)
{
    if (t > 1 && seq % t != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "sequence parallelism: the sequence length %d must be a multiple of --tp %d "
                      "(each tensor-parallel rank takes seq/tp of its tokens)",
                      seq, t);
    return PP_OK;
}
