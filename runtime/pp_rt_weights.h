/* pp_rt_weights.h — a run's parameters as a HuggingFace checkpoint (runtime/weights_hf.c):
 * loaded from and saved to safetensors with the tensor names and layouts transformers uses for
 * the model's family, so that from_pretrained loads what --save-weights wrote with no missing
 * or unexpected keys, and pprun trains what save_pretrained wrote.
 * Part of the runtime's public headers (pp_rt.h includes them all); stands alone.
 *
 * Families (the model's block decides): GPT-2's block (LayerNorm, GELU, learned positions) is
 * GPT2LMHeadModel (transformer.wte / wpe / h.N.ln_1 / attn.c_attn / attn.c_proj / ln_2 /
 * mlp.c_fc / mlp.c_proj / ln_f; Conv1D weights stored (in, out), the transpose of pprun's
 * (out, in)); the Llama block (RMSNorm, SwiGLU, rotary) is LlamaForCausalLM, which is also
 * MistralForCausalLM's and Qwen2ForCausalLM's layout (model.embed_tokens, model.layers.N.
 * self_attn.{q,k,v,o}_proj (+ q/k/v .bias where the model has them), mlp.{gate,up,down}_proj,
 * input_layernorm, post_attention_layernorm, model.norm, lm_head unless tied); with
 * Mixtral's mixture-of-experts MLP it is MixtralForCausalLM as its checkpoints name it
 * (block_sparse_moe.gate, block_sparse_moe.experts.E.w1 / w3 / w2). Another mix of
 * block variants has no transformers class: PP_ERR_UNSUPPORTED naming the block.
 */
#ifndef PP_RT_WEIGHTS_H
#define PP_RT_WEIGHTS_H

#include "pp_common.h"
#include "pp_rt_executor.h"
#include "pp_rt_safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Loads the checkpoint at path (a .safetensors file, an index JSON, or a folder with
 * model.safetensors or model.safetensors.index.json: pp_st_open) into every stage this
 * process runs: every replica, pipe and tensor-parallel rank (each takes its slice of q/k/v by
 * heads and KV heads, of the MLP by its width, as the stage holds it). F32, BF16 and F16
 * tensors (converted to fp32). Before any parameter changes, the whole model is checked
 * against the file: a tensor the model needs and the file lacks (PP_ERR_NOTFOUND), a shape
 * that differs (PP_ERR_INVALID) or a tensor the model has no place for (PP_ERR_INVALID) is
 * refused naming the file and the tensor. more_layers = 1 accepts a checkpoint with more
 * blocks than the model (a trial of the first layers of a large model: blocks 0..L-1 are
 * loaded, the others skipped; *skipped, may be NULL, gets their count); 0 refuses them as
 * unexpected. Buffers transformers keeps in some checkpoints (GPT-2's attn.bias and
 * attn.masked_bias, rotary_emb.inv_freq) and lm_head.weight of a tied model are skipped. A
 * checkpoint of the base model alone (LlamaModel, GPT2Model, e.g. the Hub's gpt2: names
 * without "model." / "transformer.") loads as from_pretrained loads it into the LM class;
 * an untied head is then missing. */
pp_status pp_rt_weights_load(pp_rt_executor *ex, const char *path, int more_layers, int *skipped);

/* Writes the parameters of replica 0 (pipe 0's stages, the tensor-parallel slices put
 * together) to one safetensors file at path, atomically (pp_st_write), as dtype (PP_ST_F32
 * or PP_ST_BF16), with metadata {"format": "pt"} as transformers writes it; a tied head is
 * stored once (as the embedding). Under a process transport (MPI) every process calls it:
 * those of replica 0 send their tensors to global rank 0, which writes the file (the
 * others return PP_OK once their part is delivered). */
pp_status pp_rt_weights_save(pp_rt_executor *ex, const char *path, pp_st_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
