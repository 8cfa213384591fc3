"""byhand_nemo.py PPTUNE — by hand, not in ctest: `pptune export --format nemo2` and `--format
nemo` against NeMo's own code (nemo_toolkit 2.5.3 from PyPI with megatron-core 0.14.0, the set of
tests/py/nemo.txt layered on the interop venv's torch 2.15), for every profile of the golden set (pptune_golden.golden_set:
gpt-13b x 32, llama3-70b x 16 with and without sequence parallelism, llama3-405b x 64 uneven,
an interleaved uneven split, Qwen2.5 7B and Llama 3.1 8B from config.json, and the three
profile fixtures).

NeMo 2: the exported Python is executed as a user runs it (its own imports: nemo.lightning,
nemo.collections.llm, megatron.core), which builds NeMo's real llm.GPTConfig (Megatron-Core's
TransformerConfig checks in __post_init__), nl.MegatronStrategy, nl.MegatronMixedPrecision and
the Lightning nl.Trainer (on the CPU: building it starts no process). The config is then wrapped
in llm.GPTModel and attached to the strategy by MegatronStrategy.connect, which copies the
strategy's parallelism into the config and runs TransformerConfig.__post_init__ again (the
checks of t, p, v, cp, sequence parallelism and the pipeline layout together), then
GPTConfig.configure_model runs its own checks (the chunk-count assert of interleaved layouts)
and picks the vocabulary size. What NeMo then holds is compared with pptune's profile: the
model's sizes, heads, KV groups, FFN, norm epsilon, rope base, the padded vocabulary (a multiple
of t that holds the tokenizer's), t, p, v, cp, sequence parallelism, the recompute fields, the
micro-batch size and count (the data module's batch sizes through megatron-core's
num-microbatches calculator, which NeMo's MegatronDataSampler calls) and the layers of every
(pipeline rank, virtual stage) as Megatron-Core's get_num_layers_to_build gives them from
NeMo's config, which must be pptune's own split (`pptune schedule --format json`).

NeMo 1 (--format nemo): nemo_toolkit 2.5.3 no longer ships NeMo 1's MegatronGPTModel
(nemo.collections.nlp.models is gone), and the NeMo 1 model cannot be built without apex and a
GPU, so its own validation does not run here. What runs: the export is loaded with OmegaConf
(NeMo 1's config library) and merged over NeMo's real megatron_gpt_config.yaml
(tests/fixtures/nemo/megatron_gpt_config.yaml, from NVIDIA/NeMo at the commit keys.txt names),
every key must be one that file has or NeMo 1's model reads (keys.txt's "yaml" names), the
merged config must resolve, and its values must be the profile's. Interleaved profiles must be
refused (NeMo 1 builds no virtual pipeline).

Stubbed, and why: Megatron-Core's GPTModel itself is not
built: GPTConfig.configure_model's MCoreGPTModel is replaced by a recorder of what it is given
(the config, the vocabulary size), because building a 13B-405B model needs its tensor-parallel
process groups and the memory of the GPUs it is planned for; everything configure_model does
before it runs, with Megatron-Core's parallel_state told the tensor, pipeline and virtual sizes
and rank 0 (set_*_world_size / set_*_rank: no process groups, no distributed run). The data module is not built (it needs the user's data files and tokenizer,
which the export leaves as `...`): its batch sizes are read from the exported call, whose line is not executed. Transformer
Engine and apex are not installed (GPU-only): NeMo and Megatron-Core take their CPU fallbacks.
TORCH_CUDA_ARCH_LIST=9.0 (the H100 of the dgx-h100 plans): megatron-core 0.14's import compiles
a CUDA managed-memory allocator with torch's load_inline wherever it finds a CUDA toolkit, and
with no GPU to ask torch's arch list is empty (IndexError, not caught by megatron-core).

Not in ctest: NeMo 2.5.3's `llm` needs about 1.7 GB beyond the interop venv and a first install
took over 8 minutes here (tests/py/nemo.txt), past what the 40-minute CI has left. Usage:
  PY=$(tests/py/venv.sh nemo)
  TORCH_CUDA_ARCH_LIST=9.0 $PY tests/py/byhand_nemo.py build/tuner/pptune
Prints ok / FAIL per check, exit 1 on any FAIL. Run on 2026-12-07 (the main of 9b729e8):
152 passed, 0 failed, 61 s after a 43 s import (2-core sandbox, loaded; again 152 passed
after merging main at 2c7ad0f); with
num_layers_in_first/last_pipeline_stage planted one off in export_nemo2.c, 2 failed (the two
llama3-405b x 64 profiles: get_num_layers_to_build on NeMo's config differs from pptune's split).
"""
import ast
import json
import os
import sys
import tempfile
import time

import pptune_golden

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")
PPTUNE = os.path.abspath(sys.argv[1])
results, check = pptune_golden.results, pptune_golden.check


def run(*args):
    return pptune_golden.run(PPTUNE, *args)


def want_recompute(profile):
    c = profile["chosen"]["config"]
    r = c.get("recompute", profile["options"].get("recompute", "none"))
    if r == "full":
        k = c.get("recompute_layers", 0)
        return ("full", "block" if k else "uniform", k or 1)
    return (None if r in (None, "none") else r, None, None)


def want_sp(profile):
    c = profile["chosen"]["config"]
    return bool(c.get("sequence_parallel", profile["options"].get("sequence_parallel"))) \
        and c.get("t", 1) > 1


def pptune_stages(profile):
    p = profile["chosen"]["config"]["p"]
    return {(rank, k // p): n for k, (rank, n) in enumerate(pptune_golden.stages(PPTUNE, profile))}


def megatron_stages(cfg):
    return pptune_golden.megatron_layers(cfg, cfg.pipeline_model_parallel_size,
                                         cfg.virtual_pipeline_model_parallel_size)


class Recorder:
    """Stands in for Megatron-Core's GPTModel in GPTConfig.configure_model (see the header)."""
    seen = None

    def __init__(self, config, **kwargs):
        Recorder.seen = (config, kwargs)


def data_kwargs(text):
    """The keyword values of the exported llm.PreTrainingDataModule(...) call."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "PreTrainingDataModule":
            return {k.arg: k.value.value for k in node.keywords
                    if isinstance(k.value, ast.Constant) and k.value.value is not Ellipsis}
    return {}


def nemo2_case(name, profile, path):
    from megatron.core import num_microbatches_calculator as nmc
    from nemo.collections import llm
    from nemo.collections.llm.gpt.model import base as gpt_base

    c, model = profile["chosen"]["config"], profile["model"]
    r = run("export", "--format", "nemo2", path)
    if not check(r.returncode == 0, f"{name}: pptune export --format nemo2"):
        return
    ns = {"__name__": "pptune_nemo2_export"}
    try:
        exec(compile(r.stdout.replace("data = ", "data_line = None and ", 1), name, "exec"), ns)
    except Exception as e:  # what NeMo refuses is the exporter's bug
        check(False, f"{name}: NeMo builds GPTConfig, MegatronStrategy and the Trainer "
                     f"({type(e).__name__}: {e})")
        return
    cfg, strategy, trainer = ns["model_config"], ns["strategy"], ns["trainer"]
    check(isinstance(cfg, llm.GPTConfig) and trainer.strategy is strategy
          and (trainer.num_nodes, trainer.num_devices) == (profile["cluster"]["nodes"],
                                                            profile["cluster"]["gpus_per_node"])
          if profile["cluster"]["nodes"] * profile["cluster"]["gpus_per_node"]
          == c["p"] * c.get("t", 1) * c.get("cp", 1) * c["d"]
          else isinstance(cfg, llm.GPTConfig) and trainer.strategy is strategy,
          f"{name}: NeMo builds GPTConfig, MegatronStrategy and a Trainer of "
          f"{trainer.num_nodes} x {trainer.num_devices} devices with that strategy")
    gpt = llm.GPTModel(cfg)
    try:
        strategy.connect(gpt)  # parallelism into the config, TransformerConfig.__post_init__
        # the sizes the process groups would have on rank 0 (no groups: no distributed run)
        from megatron.core import parallel_state as ps
        ps.set_tensor_model_parallel_world_size(cfg.tensor_model_parallel_size)
        ps.set_tensor_model_parallel_rank(0)
        ps.set_pipeline_model_parallel_world_size(cfg.pipeline_model_parallel_size)
        ps.set_pipeline_model_parallel_rank(0)
        ps.set_virtual_pipeline_model_parallel_world_size(cfg.virtual_pipeline_model_parallel_size)
        saved, gpt_base.MCoreGPTModel = gpt_base.MCoreGPTModel, Recorder
        try:
            Recorder.seen = None
            cfg.configure_model(None)
        finally:
            gpt_base.MCoreGPTModel = saved
    except Exception as e:
        import traceback
        traceback.print_exc(limit=-4)
        check(False, f"{name}: MegatronStrategy.connect + GPTConfig.configure_model accept it "
                     f"({type(e).__name__}: {e})")
        return
    check(Recorder.seen is not None,
          f"{name}: MegatronStrategy.connect + GPTConfig.configure_model accept it")
    vocab = Recorder.seen[1]["vocab_size"]
    t = c.get("t", 1)
    check(vocab % t == 0 and model["vocab"] <= vocab < model["vocab"] + t,
          f"{name}: configure_model's vocabulary {vocab}: the tokenizer's {model['vocab']} "
          f"padded to a multiple of t = {t}")
    want_v = c["v"] if c["schedule"] == "interleaved" and c["v"] > 1 else None
    got = (cfg.num_layers, cfg.hidden_size, cfg.ffn_hidden_size, cfg.num_attention_heads,
           cfg.num_query_groups or cfg.num_attention_heads, cfg.kv_channels, cfg.seq_length)
    check(got == (model["layers"], model["hidden"], model["ffn"], model["heads"],
                  model["kv_heads"], model["head_dim"], model["seq"]),
          f"{name}: GPTConfig's layers, hidden, FFN, heads, KV groups, head size, sequence "
          f"{got}: the model's")
    check(cfg.normalization == ("LayerNorm" if model["norm"] == "layernorm" else "RMSNorm")
          and cfg.gated_linear_unit == model["gated_mlp"]
          and cfg.share_embeddings_and_output_weights == model["tied_embeddings"],
          f"{name}: GPTConfig's {cfg.normalization}, gated MLP {cfg.gated_linear_unit}, tied "
          f"embeddings {cfg.share_embeddings_and_output_weights}: the model's")
    if "norm_eps" in model:
        check(cfg.layernorm_epsilon == model["norm_eps"],
              f"{name}: norm epsilon {cfg.layernorm_epsilon}: the model's {model['norm_eps']}")
    if model.get("position") == "rope":
        check(cfg.position_embedding_type == "rope" and cfg.rotary_base == model["rope_theta"],
              f"{name}: rope base {cfg.rotary_base}: the model's {model['rope_theta']}")
    par = (cfg.tensor_model_parallel_size, cfg.pipeline_model_parallel_size,
           cfg.virtual_pipeline_model_parallel_size, cfg.context_parallel_size,
           cfg.sequence_parallel)
    check(par == (t, c["p"], want_v, c.get("cp", 1), want_sp(profile)),
          f"{name}: NeMo's config holds t, p, v, cp, sequence parallel {par}: the profile's")
    rec = (cfg.recompute_granularity, cfg.recompute_method, cfg.recompute_num_layers)
    check(rec == want_recompute(profile),
          f"{name}: recompute granularity, method, layers {rec}: the profile's")
    kw = data_kwargs(r.stdout)
    d = c["d"]
    try:
        nmc.init_num_microbatches_calculator(0, None, kw["global_batch_size"],
                                             kw["micro_batch_size"], d)
        micro = nmc.get_num_microbatches()
    except Exception as e:
        micro = f"{type(e).__name__}: {e}"
    finally:
        nmc.destroy_num_microbatches_calculator()
    check((kw.get("micro_batch_size"), micro, kw.get("seq_length")) == (c["b"], c["N"], model["seq"]),
          f"{name}: micro-batch size {kw.get('micro_batch_size')}, {micro} micro-batches over "
          f"d = {d}: the profile's b = {c['b']}, N = {c['N']}")
    want, got_layers = pptune_stages(profile), megatron_stages(cfg)
    check(want == got_layers,
          f"{name}: get_num_layers_to_build on NeMo's config gives pptune's split on every "
          f"(rank, virtual stage)" + ("" if want == got_layers
                                      else f": NeMo {got_layers}, pptune {want}"))


def yaml_names():
    names = set()
    with open(os.path.join(FIXTURES, "nemo", "keys.txt")) as fp:
        for line in fp:
            if line.startswith("yaml "):
                names.add(line.split()[1])
    return names


def flat(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flat(v, prefix + k + ".")
        else:
            yield prefix + k, v


def nemo1_case(name, profile, path, default):
    from omegaconf import OmegaConf

    c, model = profile["chosen"]["config"], profile["model"]
    r = run("export", "--format", "nemo", path)
    if c["schedule"] == "interleaved" and c["v"] > 1:
        check(r.returncode == 2 and ("virtual" in r.stderr.lower() or "interleaved" in r.stderr),
              f"{name}: --format nemo refuses the interleaved profile (NeMo 1 runs no virtual "
              f"pipeline), exit {r.returncode}")
        return
    if not check(r.returncode == 0, f"{name}: pptune export --format nemo"):
        return
    ours = OmegaConf.to_container(OmegaConf.create(r.stdout))
    known = yaml_names() | {k for k, _ in flat(OmegaConf.to_container(default))}
    unknown = [k for k, _ in flat(ours) if k not in known]
    check(not unknown, f"{name}: every key is megatron_gpt_config.yaml's or one NeMo 1's model "
                       f"reads" + (f": not {unknown}" if unknown else ""))
    merged = OmegaConf.merge(default, OmegaConf.create(r.stdout))
    try:
        m = OmegaConf.to_container(merged.model, resolve=True)
        tr = OmegaConf.to_container(merged.trainer, resolve=True)
    except Exception as e:
        check(False, f"{name}: the merged config resolves ({type(e).__name__}: {e})")
        return
    t = c.get("t", 1)
    gpus = c["p"] * t * c.get("cp", 1) * c["d"]
    got = (m["num_layers"], m["hidden_size"], m["ffn_hidden_size"], m["num_attention_heads"],
           m["num_query_groups"] or m["num_attention_heads"], m["kv_channels"],
           m["encoder_seq_length"], m["max_position_embeddings"])
    check(got == (model["layers"], model["hidden"], model["ffn"], model["heads"],
                  model["kv_heads"], model["head_dim"], model["seq"], model["seq"]),
          f"{name}: merged model sizes, heads, KV groups, head size, sequence {got}: the model's")
    check(m["normalization"] == model["norm"]
          and m["activation"] == ("fast-swiglu" if model["gated_mlp"] else "gelu")
          and m["layernorm_epsilon"] == model.get("norm_eps", 1e-5)
          and (model.get("position") != "rope"
               or (m["position_embedding_type"], m["rotary_base"]) == ("rope", model["rope_theta"])),
          f"{name}: norm {m['normalization']} eps {m['layernorm_epsilon']}, activation "
          f"{m['activation']}, position {m.get('position_embedding_type')} base "
          f"{m.get('rotary_base')}: the model's")
    first, last = c.get("first_stage_layers"), c.get("last_stage_layers")
    stages = pptune_golden.stages(PPTUNE, profile)
    if c.get("split", "even") != "even" or first or last:
        first, last = stages[0][1], stages[-1][1]
    got = (m["tensor_model_parallel_size"], m["pipeline_model_parallel_size"],
           m["virtual_pipeline_model_parallel_size"], m.get("context_parallel_size", 1),
           m["sequence_parallel"], m["micro_batch_size"],
           m["global_batch_size"] // (m["micro_batch_size"] * c["d"]),
           m.get("num_layers_in_first_pipeline_stage"), m.get("num_layers_in_last_pipeline_stage"),
           tr["devices"] * tr["num_nodes"])
    check(got == (t, c["p"], None, c.get("cp", 1), want_sp(profile), c["b"], c["N"],
                  first if c.get("split", "even") != "even" else None,
                  last if c.get("split", "even") != "even" else None, gpus),
          f"{name}: merged t, p, v, cp, sequence parallel, b, N, first/last stage layers, "
          f"devices {got}: the profile's")
    gran = m["activations_checkpoint_granularity"]
    rec = (gran, m["activations_checkpoint_method"] if gran == "full" else None,
           m["activations_checkpoint_num_layers"] if gran == "full" else None)
    check(rec == want_recompute(profile),
          f"{name}: activations checkpoint granularity, method, layers {rec}: the profile's")


def main():
    t0 = time.time()
    from omegaconf import OmegaConf
    import nemo
    from nemo import lightning  # noqa: F401
    from nemo.collections import llm  # noqa: F401
    import nemo.core.config.hydra_runner  # noqa: F401 (NeMo 1's resolvers: multiply, sum)

    print(f"import of nemo {nemo.__version__} (nemo.lightning, nemo.collections.llm): "
          f"{time.time() - t0:.1f} s", flush=True)
    default = OmegaConf.load(os.path.join(FIXTURES, "nemo", "megatron_gpt_config.yaml"))
    work = tempfile.mkdtemp(prefix="pp_py_nemo_export_")
    cases = pptune_golden.golden_set(PPTUNE, work, "gpipe,1f1b,interleaved", check)
    for name, path in cases:
        with open(path) as fp:
            profile = json.load(fp)
        nemo2_case(name, profile, path)
        nemo1_case(name, profile, path, default)
    print(f"{results['passed']} passed, {results['failed']} failed ({time.time() - t0:.1f} s)")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
