/* pp_rt_model.h — the sizes of the bundled runtime's GPT-style decoder (token + position
 * embedding, pre-LN blocks with causal multi-head attention and a GELU MLP, final LN, tied LM
 * head), its runnable presets and their checks. Part of the plan library (pp_rt_plan): plain
 * values, no allocation, usable without a backend (the tuner plans with them).
 */
#ifndef PP_RT_MODEL_H
#define PP_RT_MODEL_H

#include "pp_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int layers; /* L transformer blocks */
    int hidden; /* C */
    int heads;  /* NH; C % NH == 0 */
    int ffn;    /* MLP width, usually 4C */
    int vocab;  /* V */
    int seq;    /* maximum sequence length (learned positions) */
} pp_model_cfg;

/* Fills *out with the preset `name`: "tiny" (CI-sized), "small", "gpt-125m" ... "gpt-175b".
 * Returns PP_OK, or PP_ERR_NOTFOUND whose message lists the names (NULL name: not found). */
pp_status pp_model_preset(const char *name, pp_model_cfg *out);
/* Returns PP_OK when every size is positive and heads divide hidden, else PP_ERR_INVALID
 * naming the field and its value. */
pp_status pp_model_validate(const pp_model_cfg *cfg);

/* Returns PP_OK when the model splits over t tensor-parallel ranks as the runtime splits it
 * (Megatron-LM: qkv by heads, the MLP by its width): t >= 1 divides heads and ffn; else
 * PP_ERR_INVALID naming the size that t does not divide. The vocabulary is not split (the
 * embedding and head are replicated: runtime/stage.c says why). */
pp_status pp_model_check_tp(const pp_model_cfg *cfg, int t);
/* Returns PP_OK when sequence parallelism over t > 1 tensor-parallel ranks can split a
 * sequence of seq tokens (Megatron's check: t divides seq), or t <= 1; else PP_ERR_INVALID
 * naming both. */
pp_status pp_model_check_sp(int seq, int t);

#ifdef __cplusplus
}
#endif
#endif
