"""test_hf_weights.py PPRUN — pprun's HuggingFace checkpoints (--load-weights, --save-weights)
against transformers itself (5.25.0, tests/py/hf.txt). Run by ctest as py_hf_weights
(tests/py/run.sh hf).

 (a) pprun trains a tiny Llama-3-shaped model (RMSNorm, SwiGLU, rotary with llama3 scaling,
     2 KV heads for 4 query heads, untied head) from its config.json for a few steps and
     writes --save-weights; LlamaForCausalLM.from_pretrained loads it with no missing,
     unexpected or mismatched keys, and its loss on the tokens of pprun's first step equals
     the loss pprun computes with those weights (--load-weights, --lr 0, one step), under one
     layout and under --ranks 2 --tp 2;
 (b) a random LlamaForCausalLM written by save_pretrained (safetensors, its own config.json)
     loaded by pprun --model-config/--load-weights gives transformers' loss;
 (c) the same for GPT2LMHeadModel (Conv1D weights stored transposed, tied head), also from
     its base GPT2Model's checkpoint (names without "transformer.", as the Hub's gpt2), and
 (d) for Qwen2ForCausalLM with a tied head (q/k/v biases, no o_proj bias; no lm_head.weight
     in the file), and
 (e) for Qwen3ForCausalLM (the per-head q/k RMSNorm, self_attn.q_norm / k_norm; head_dim 16
     where hidden / heads is 8; 2 KV heads for 4; untied head): a random one from
     save_pretrained gives transformers' loss in pprun, and (a)'s round trip with it: pprun
     trains it, --save-weights, from_pretrained loads it with no missing/unexpected keys and
     gives pprun's loss, under one layout and under --tp 2, and
 (f) for MixtralForCausalLM (4 experts, top-2; the checkpoint names save_pretrained writes
     and the Hub's Mixtral has: block_sparse_moe.gate.weight, block_sparse_moe.experts.E.w1 /
     w3 / w2, which transformers fuses into mlp.experts.gate_up_proj on load): 2 layers with the
     load-balancing loss off (router_aux_loss_coef 0), and 1 layer with it on (coefficient
     0.02, output_router_logits) in one micro-batch of the 4 sequences, where transformers'
     load_balancing_loss_func (the layers' logits concatenated, the batch's tokens together)
     is pprun's per-layer, per-micro-batch form; and pprun's own --save-weights of a trained
     Mixtral loads into MixtralForCausalLM cleanly with pprun's loss, and
 (g) the same three for Qwen3MoeForCausalLM (Qwen3's q/k norm and head_dim 16 with 4 experts of
     width 24, top-2, every layer sparse; the names save_pretrained writes: mlp.gate.weight,
     mlp.experts.E.gate_proj / up_proj / down_proj, fused into mlp.experts.gate_up_proj on
     load): the top-k weights as the softmax gives them (norm_topk_prob false) in (g) and
     renormalised in (g-aux) and (g-trained).
The tokens are a Megatron indexed dataset written by megatron-core's IndexedDatasetBuilder:
without --shuffle pprun's first step reads samples 0..N-1, sample i = tokens [i s, i s + s + 1).
Tolerance: |pprun - transformers| <= 1e-5 x the loss (both fp32; the sums run in another order
and pprun's GELU uses its own tanh). The random models are initialised with std 0.3 and random
norm gains so that attention and the MLP matter: loading q/k with Meta's rotary permutation or
gate/up swapped moves the loss by orders of magnitude more than the tolerance.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          MixtralConfig, MixtralForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)

PPRUN = sys.argv[1]
TOL = 1e-5
S, N = 16, 4  # sequence length, micro-batches of one sequence each (pprun's first step)
results = {"passed": 0, "failed": 0}


def check(ok, what):
    results["passed" if ok else "failed"] += 1
    print(("ok   " if ok else "FAIL ") + what, flush=True)


def pprun(*args):
    cmd = [PPRUN, "--json", "--quiet", "--seq", str(S), "--microbatches", str(N),
           "--micro-batch-size", "1", *args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
        return None
    return json.loads(r.stdout[r.stdout.index("{"):])


def tokens_file(tmp, vocab):
    g = torch.Generator().manual_seed(7)
    toks = torch.randint(0, vocab, (N * S + 1,), generator=g, dtype=torch.int32)
    prefix = os.path.join(tmp, "tokens")
    b = IndexedDatasetBuilder(prefix + ".bin", dtype=np.int32)
    b.add_document(toks, [len(toks)])
    b.finalize(prefix + ".idx")
    windows = torch.stack([toks[i * S:i * S + S + 1] for i in range(N)]).long()
    return prefix, windows


def hf_loss(model, windows):
    with torch.no_grad():
        out = model(input_ids=windows, labels=windows)
        if getattr(out, "aux_loss", None) is None:
            return out.loss.item()
        # A MoE model's load-balancing loss: over the S input tokens pprun routes (the windows
        # hold S + 1, the last one a target only), added to the cross-entropy as transformers
        # adds it (router_aux_loss_coef x load_balancing_loss_func)
        ce = model(input_ids=windows, labels=windows, output_router_logits=False).loss.item()
        aux = model(input_ids=windows[:, :S], output_router_logits=True).aux_loss.item()
        return ce + model.config.router_aux_loss_coef * aux


def compare(what, ours, theirs):
    rel = abs(ours - theirs) / abs(theirs)
    check(rel <= TOL, f"{what}: pprun loss {ours:.7f}, transformers {theirs:.7f} "
                      f"(|diff| {abs(ours - theirs):.2e}, relative {rel:.2e}, tolerance {TOL})")


def loaded_cleanly(cls, folder, what):
    model, info = cls.from_pretrained(folder, output_loading_info=True, dtype=torch.float32)
    bad = {k: sorted(v) for k, v in info.items() if k != "error_msgs" and v}
    check(not bad and not info.get("error_msgs"),
          f"{what}: from_pretrained loads it with no missing/unexpected/mismatched keys {bad}")
    return model.eval()


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name or "ln_" in name) and name.endswith("weight"):
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))


LLAMA = dict(vocab_size=256, hidden_size=32, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
             rms_norm_eps=1e-5, hidden_act="silu", tie_word_embeddings=False,
             rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 16})


def part_a(tmp, data, windows, cls=LlamaForCausalLM, config=None, tag="a",
           layouts=(("--ranks", "2"), ("--ranks", "2", "--tp", "2"))):
    """pprun trains `config` (Llama's by default), saves it; cls.from_pretrained loads it
    cleanly and its loss equals pprun's on the same weights under each layout."""
    folder = os.path.join(tmp, tag)
    os.makedirs(folder)
    (config or LlamaConfig(**LLAMA)).save_pretrained(folder)  # config.json, as transformers writes
    cfg = os.path.join(folder, "config.json")
    out = os.path.join(folder, "model.safetensors")
    trained = pprun("--model-config", cfg, "--ranks", "2", "--steps", "3", "--lr", "0.01",
                    "--data", data, "--save-weights", out)
    check(trained is not None and os.path.exists(out),
          f"({tag}) pprun trains 3 steps, --save-weights")
    if trained is None:
        return
    model = loaded_cleanly(cls, folder, f"({tag}) pprun's --save-weights")
    theirs = hf_loss(model, windows)
    for layout in layouts:
        r = pprun("--model-config", cfg, *layout, "--steps", "1", "--lr", "0", "--data", data,
                  "--load-weights", out)
        check(r is not None, f"({tag}) pprun {' '.join(layout)} --load-weights runs")
        if r:
            compare(f"({tag}) {cls.__name__} trained by pprun, {' '.join(layout)}",
                    r["per_step"][0]["loss"], theirs)


def part_hf(tmp, data, windows, cls, config, tag, layout=("--ranks", "2")):
    folder = os.path.join(tmp, tag)
    torch.manual_seed(3)
    model = cls(config).eval()
    randomize(model, 11)
    model.save_pretrained(folder)  # safetensors, transformers' own names and config.json
    check(os.path.exists(os.path.join(folder, "model.safetensors")),
          f"({tag}) save_pretrained wrote model.safetensors")
    theirs = hf_loss(model, windows)
    r = pprun("--model-config", os.path.join(folder, "config.json"), *layout, "--steps",
              "1", "--lr", "0", "--data", data, "--load-weights", folder)
    check(r is not None, f"({tag}) pprun --load-weights {cls.__name__}'s save_pretrained output")
    if r:
        compare(f"({tag}) random {cls.__name__}", r["per_step"][0]["loss"], theirs)


def part_base(tmp, data, windows):
    """(c) again from GPT2Model's checkpoint (the base model alone, as the Hub's gpt2 is:
    names without "transformer."), which from_pretrained also loads into GPT2LMHeadModel."""
    folder, base = os.path.join(tmp, "c"), os.path.join(tmp, "c-base")
    model = GPT2LMHeadModel.from_pretrained(folder, dtype=torch.float32).eval()
    model.transformer.save_pretrained(base)
    r = pprun("--model-config", os.path.join(base, "config.json"), "--ranks", "2", "--steps",
              "1", "--lr", "0", "--data", data, "--load-weights", base)
    check(r is not None, "(c) pprun --load-weights GPT2Model's save_pretrained output")
    if r:
        compare("(c) random GPT2Model (no transformer. prefix)", r["per_step"][0]["loss"],
                hf_loss(model, windows))


MIXTRAL = dict(vocab_size=256, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
               rms_norm_eps=1e-5, num_local_experts=4, num_experts_per_tok=2,
               tie_word_embeddings=False, router_aux_loss_coef=0.0)


def part_mixtral(tmp, data, windows):
    part_hf(tmp, data, windows, MixtralForCausalLM, MixtralConfig(**MIXTRAL), "f")
    one = dict(MIXTRAL, num_hidden_layers=1, router_aux_loss_coef=0.02, output_router_logits=True)
    part_hf(tmp, data, windows, MixtralForCausalLM, MixtralConfig(**one), "f-aux",
            ("--ranks", "1", "--microbatches", "1", "--micro-batch-size", str(N)))
    part_a(tmp, data, windows, MixtralForCausalLM, MixtralConfig(**MIXTRAL), "f-trained",
           (("--ranks", "2"),))


QWEN3_MOE = dict(vocab_size=256, hidden_size=32, intermediate_size=64, moe_intermediate_size=24,
                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                 max_position_embeddings=64, rms_norm_eps=1e-6, num_experts=4,
                 num_experts_per_tok=2, decoder_sparse_step=1, mlp_only_layers=[],
                 norm_topk_prob=False, tie_word_embeddings=False, router_aux_loss_coef=0.0)


def part_qwen3_moe(tmp, data, windows):
    cls = Qwen3MoeForCausalLM
    part_hf(tmp, data, windows, cls, Qwen3MoeConfig(**QWEN3_MOE), "g")
    one = dict(QWEN3_MOE, num_hidden_layers=1, norm_topk_prob=True, router_aux_loss_coef=0.02,
               output_router_logits=True)
    part_hf(tmp, data, windows, cls, Qwen3MoeConfig(**one), "g-aux",
            ("--ranks", "1", "--microbatches", "1", "--micro-batch-size", str(N)))
    part_a(tmp, data, windows, cls, Qwen3MoeConfig(**dict(QWEN3_MOE, norm_topk_prob=True)),
           "g-trained", (("--ranks", "2"),))


def main():
    tmp = tempfile.mkdtemp(prefix="pp-hf-")
    try:
        data, windows = tokens_file(tmp, 256)
        part_a(tmp, data, windows)
        part_hf(tmp, data, windows, LlamaForCausalLM, LlamaConfig(**LLAMA), "b")
        gpt2 = GPT2Config(vocab_size=256, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                          bos_token_id=0, eos_token_id=0)
        part_hf(tmp, data, windows, GPT2LMHeadModel, gpt2, "c")
        part_base(tmp, data, windows)
        qwen2 = Qwen2Config(vocab_size=256, hidden_size=32, intermediate_size=64,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            max_position_embeddings=64, tie_word_embeddings=True)
        part_hf(tmp, data, windows, Qwen2ForCausalLM, qwen2, "d")
        qwen3 = Qwen3Config(vocab_size=256, hidden_size=32, intermediate_size=64,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6,
                            tie_word_embeddings=False)
        part_hf(tmp, data, windows, Qwen3ForCausalLM, qwen3, "e")
        part_a(tmp, data, windows, Qwen3ForCausalLM, qwen3, "e-trained")
        part_mixtral(tmp, data, windows)
        part_qwen3_moe(tmp, data, windows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)


main()
