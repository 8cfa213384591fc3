/* tiny_models.h — the tiny models and AdamW settings the runtime's equivalence tests share
 * (test_runtime_tp.c, test_runtime_cp.c), at a sequence length of the test's choosing. */
#ifndef PP_TEST_TINY_MODELS_H
#define PP_TEST_TINY_MODELS_H

#include "pp_rt.h"

static const pp_adamw PP_TEST_ADAMW = {
    .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};

/* GPT's block: 4 heads and FFN 32 so that t = 4 splits them; L layers, T positions. */
#define PP_TEST_GPT(L, T)                                                                          \
    {.layers = (L), .hidden = 16, .heads = 4, .ffn = 32, .vocab = 64, .seq = (T)}
/* The Llama block (RMSNorm, SwiGLU, rotary with Llama 3 scaling, untied head) with 2 KV heads
 * for its 4 query heads: t = 2 gives each rank 2 query heads and their KV head. */
#define PP_TEST_LLAMA(L, T)                                                                        \
    {.layers = (L), .hidden = 16, .heads = 4, .ffn = 24, .vocab = 64, .seq = (T), .kv_heads = 2,   \
     .norm = PP_NORM_RMSNORM, .norm_eps = 1e-5, .mlp = PP_MLP_SWIGLU, .pos = PP_POS_ROPE,          \
     .rope_theta = 500000, .rope_scaling = PP_ROPE_LLAMA3, .rope_scaling_name = "llama3",          \
     .rope_factor = 8, .rope_low_freq = 1, .rope_high_freq = 4, .rope_orig_max = 16,               \
     .nobias = PP_NOBIAS_ALL, .untied = 1}

/* Qwen3's block: Llama's with the per-head q/k RMSNorm, heads 8 wide (hidden / heads is 4),
 * no rotary scaling (Qwen3 has none). */
#define PP_TEST_QWEN3(L, T)                                                                        \
    {.layers = (L), .hidden = 16, .heads = 4, .ffn = 24, .vocab = 64, .seq = (T), .kv_heads = 2,   \
     .head_dim = 8, .norm = PP_NORM_RMSNORM, .norm_eps = 1e-6, .mlp = PP_MLP_SWIGLU,               \
     .pos = PP_POS_ROPE, .rope_theta = 1000000, .nobias = PP_NOBIAS_ALL, .untied = 1,              \
     .qk_norm = 1}

#endif
