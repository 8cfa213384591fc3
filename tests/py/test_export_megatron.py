"""test_export_megatron.py PPTUNE — `pptune export --format megatron` against Megatron-LM's own
argument code: each launch script of the golden set is run by bash with a torchrun on PATH that
records its environment and arguments; pretrain_gpt.py's arguments then go through Megatron-LM's
parse_args and validate_args (megatron/training/arguments.py of the Megatron-LM commit that
megatron-core 0.16.1 was released from, kept in tests/py/megatron_lm/, see its README) with the
environment the script set and the world size torchrun would give (nodes x processes per node),
then through core_transformer_config_from_args (Megatron-Core 0.16.1's TransformerConfig
checks) and get_num_layers_to_build for every (pipeline rank, virtual stage), which must be the
layers of pptune's own split (`pptune schedule --format json`). Checked besides: the data-parallel
size, virtual pipeline size and micro-batch count Megatron derives, the norm epsilon of the
config.json, and that CUDA_DEVICE_MAX_CONNECTIONS=1 is what lets a tensor-parallel export
through (without it validate_args stops it).

The golden set: gpt-13b on 32 dgx-h100 nodes, llama3-70b on 16, llama3-405b on 64 (the uneven
split), an interleaved uneven split (llama3-8b on 4, interleaved only: first/last 5/3; gpt-13b
on 32 is one too: p=2 v=7 uneven), a sequence-parallel case
(llama3-70b on 16 with --sequence-parallel), two HuggingFace configs (tests/fixtures/hf:
Qwen2.5 7B, Llama 3.1 8B), each searched by this pptune restricted to the schedules upstream
Megatron-LM runs, and the profiles kept in tests/fixtures/profiles (written by older pptunes).

Besides, issue 28's mixture-of-experts searches (Mixtral 8x7B and Qwen3-30B-A3B from
tests/fixtures/hf on 16 nodes, --for megatron): their experts, top-k, widths, layer pattern,
router, auxiliary loss, dispatcher, grouped GEMM, ep and qk_layernorm as TransformerConfig has
them.

Stubbed, because they cannot run on a CPU without a GPU or pull in Megatron-LM's whole
training loop: megatron.training.utils.get_device_arch_version and torch.cuda.
get_device_capability (they ask CUDA for the device's compute capability: answered 9 / (9, 0),
the H100 of the dgx-h100 cluster the profiles plan for; validate_args asks the latter for
--moe-grouped-gemm); the
names megatron/training/utils.py imports at its top and validate_args never calls
(megatron.training.get_args / get_timers / get_adlr_autoresume, which live in the training
loop's package, and megatron.legacy.model.module.param_is_not_shared, the legacy models): they
raise if called; and rope fusion is switched off (args.apply_rope_fusion = False) before
core_transformer_config_from_args, because TransformerConfig refuses it without Transformer
Engine, a GPU-only package not installed here. Nothing of arguments.py itself is changed. Run by ctest as py_export_megatron.
"""
import contextlib
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
import time
import types

import pptune_golden

HERE = os.path.dirname(os.path.abspath(__file__))
PPTUNE = os.path.abspath(sys.argv[1])
results, check = pptune_golden.results, pptune_golden.check


def import_megatron_arguments():
    """Megatron-LM's megatron.training.arguments from tests/py/megatron_lm beside
    megatron-core's megatron.core (megatron is a namespace package)."""
    sys.path.insert(0, os.path.join(HERE, "megatron_lm"))

    def never(*_a, **_k):
        raise RuntimeError("stubbed: not on the path of parse_args / validate_args")

    training = types.ModuleType("megatron.training")
    training.__path__ = [os.path.join(HERE, "megatron_lm", "megatron", "training")]
    training.get_args = training.get_timers = training.get_adlr_autoresume = never
    sys.modules["megatron.training"] = training
    for name in ("megatron.legacy", "megatron.legacy.model", "megatron.legacy.model.module"):
        mod = types.ModuleType(name)
        mod.__path__ = []
        sys.modules[name] = mod
    sys.modules["megatron.legacy.model.module"].param_is_not_shared = never
    import megatron.training.utils as utils
    import megatron.training.arguments as arguments

    utils.get_device_arch_version = arguments.get_device_arch_version = lambda: 9
    # --moe-grouped-gemm: validate_args asks CUDA for the compute capability (the H100's, 9.0)
    import torch
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
    return arguments


def run(*args):
    return pptune_golden.run(PPTUNE, *args)


FAKE_TORCHRUN = """#!%s
import json, os, sys
with open(os.environ["PP_TORCHRUN_LOG"], "w") as fp:
    json.dump({"argv": sys.argv[1:], "cuda_device_max_connections":
               os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")}, fp)
"""

USER_FLAGS = ["--mock-data", "--tokenizer-type", "NullTokenizer", "--train-iters", "10",
              "--lr", "1.0e-4"]


def launch(script, work):
    """Runs the script as a user would (bash, with their flags after it) with the fake
    torchrun first on PATH; returns what torchrun was given."""
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir, exist_ok=True)
    fake = os.path.join(bindir, "torchrun")
    with open(fake, "w") as fp:
        fp.write(FAKE_TORCHRUN % sys.executable)
    os.chmod(fake, stat.S_IRWXU)
    path = os.path.join(work, "launch.sh")
    with open(path, "w") as fp:
        fp.write(script)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    env.update(PATH=bindir + os.pathsep + env["PATH"], PP_TORCHRUN_LOG=os.path.join(work, "log"),
               NODE_RANK="0", MASTER_ADDR="node0")
    r = subprocess.run(["bash", path, *USER_FLAGS], env=env, capture_output=True, text=True)
    if r.returncode:
        print(r.stderr)
        return None
    with open(env["PP_TORCHRUN_LOG"]) as fp:
        return json.load(fp)


def torchrun_split(argv):
    """torchrun's own options, the script it starts, and that script's arguments."""
    i, opts = 0, {}
    while argv[i].startswith("--"):
        opts[argv[i][2:]] = argv[i + 1]
        i += 2
    return opts, argv[i], argv[i + 1:]


def pptune_stages(profile):
    """Layers of each (rank, virtual stage) as pptune's schedules split them."""
    p = profile["chosen"]["config"]["p"]
    return {(rank, k // p): n for k, (rank, n) in enumerate(pptune_golden.stages(PPTUNE, profile))}


def megatron_stages(arguments, args, cfg):
    return pptune_golden.megatron_layers(cfg, args.pipeline_model_parallel_size,
                                         args.virtual_pipeline_model_parallel_size)


def validate(arguments, flags, env, world):
    """parse_args + validate_args on flags under env; the args, or the exception."""
    saved = dict(os.environ)
    os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    os.environ.update(env)
    os.environ["WORLD_SIZE"], os.environ["RANK"] = str(world), "0"
    sys.argv = ["pretrain_gpt.py", *flags]
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # validate_args prints every argument
            args = arguments.parse_args()
            arguments.validate_args(args)
        return args
    except (AssertionError, SystemExit, ValueError, RuntimeError) as e:
        return e
    finally:
        os.environ.clear()
        os.environ.update(saved)


def moe_checks(name, profile, args, cfg):
    """A mixture-of-experts profile: Megatron's arguments and TransformerConfig carry its
    experts, top-k, widths, layer pattern, router, auxiliary loss, dispatcher and ep."""
    c, model = profile["chosen"]["config"], profile["model"]
    moe = model["moe"]
    freq = cfg.moe_layer_freq
    layers = ([1 if l % freq == 0 else 0 for l in range(model["layers"])]
              if isinstance(freq, int) else list(freq))
    every = moe["every"]
    want_layers = [1 if l >= moe["first_dense"] and (every <= 1 or l % every == moe["phase"])
                   else 0 for l in range(model["layers"])]
    check((cfg.num_moe_experts, cfg.moe_router_topk, cfg.moe_ffn_hidden_size,
           cfg.moe_shared_expert_intermediate_size or 0, args.expert_model_parallel_size,
           cfg.moe_router_score_function, cfg.moe_router_pre_softmax,
           cfg.moe_token_dispatcher_type, cfg.moe_grouped_gemm, cfg.moe_aux_loss_coeff,
           cfg.qk_layernorm)
          == (moe["experts"], moe["top_k"], moe["ffn"], moe["shared_ffn"], c.get("ep", 1),
              moe["router"], moe["router"] == "softmax" and not moe["norm_topk"],
              "alltoall", True, moe["aux_coef"], bool(model.get("qk_norm"))),
          f"{name}: TransformerConfig has the {moe['experts']} experts, top-{moe['top_k']}, "
          f"expert width {moe['ffn']}, ep {c.get('ep', 1)}, router, aux loss, alltoall, "
          f"grouped GEMM and qk_layernorm {bool(model.get('qk_norm'))}")
    check(layers == want_layers,
          f"{name}: moe_layer_freq {freq!r} makes the model's MoE layers "
          f"({sum(want_layers)} of {model['layers']})")


def one_case(arguments, name, path, work):
    with open(path) as fp:
        profile = json.load(fp)
    c, model = profile["chosen"]["config"], profile["model"]
    r = run("export", "--format", "megatron", path)
    if not check(r.returncode == 0 and r.stdout.startswith("#!/usr/bin/env bash\n"),
                 f"{name}: pptune export --format megatron writes a bash script"):
        return
    got = launch(r.stdout, os.path.join(work, name))
    if not check(got is not None, f"{name}: the script runs torchrun"):
        return
    opts, script, flags = torchrun_split(got["argv"])
    world = int(opts["nnodes"]) * int(opts["nproc-per-node"])
    gpus = c["p"] * c.get("t", 1) * c.get("cp", 1) * c["d"]
    check(script == "pretrain_gpt.py" and world == gpus and flags[-len(USER_FLAGS):] == USER_FLAGS,
          f"{name}: torchrun {opts['nnodes']} x {opts['nproc-per-node']} = {world} processes "
          f"(the plan's {gpus} GPUs) of pretrain_gpt.py with the user's flags last")
    env = {}
    if got["cuda_device_max_connections"] is not None:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = got["cuda_device_max_connections"]
    args = validate(arguments, flags, env, world)
    if not check(not isinstance(args, BaseException),
                 f"{name}: Megatron-LM's parse_args + validate_args accept it "
                 f"({type(args).__name__}: {args})" if isinstance(args, BaseException)
                 else f"{name}: Megatron-LM's parse_args + validate_args accept it"):
        return
    if c.get("t", 1) > 1:
        refused = validate(arguments, flags, {}, world)
        check(isinstance(refused, AssertionError) and "CUDA_DEVICE_MAX_CONNECTIONS" in str(refused),
              f"{name}: t = {c['t']}: without the script's CUDA_DEVICE_MAX_CONNECTIONS=1 "
              f"validate_args stops it ({str(refused)[:60]}...)")
    vp = args.virtual_pipeline_model_parallel_size
    want_vp = c["v"] if c["schedule"] == "interleaved" and c["v"] > 1 else None
    micro = args.global_batch_size // (args.micro_batch_size * args.data_parallel_size)
    check((args.tensor_model_parallel_size, args.pipeline_model_parallel_size, vp,
           args.data_parallel_size, micro, args.sequence_parallel)
          == (c.get("t", 1), c["p"], want_vp, c["d"], c["N"],
              bool(c.get("sequence_parallel", profile["options"].get("sequence_parallel")))
              and c.get("t", 1) > 1),
          f"{name}: Megatron derives t={args.tensor_model_parallel_size} "
          f"p={args.pipeline_model_parallel_size} v={vp} d={args.data_parallel_size} "
          f"N={micro} sequence_parallel={args.sequence_parallel}: the profile's")
    # Transformer Engine (GPU-only, not installed here) is what fuses rope: TransformerConfig
    # refuses apply_rope_fusion without it, so the config is built with it off
    args.apply_rope_fusion = False
    try:
        cfg = arguments.core_transformer_config_from_args(args)
    except (AssertionError, ValueError) as e:
        check(False, f"{name}: core_transformer_config_from_args: {type(e).__name__}: {e}")
        return
    check((cfg.num_layers, cfg.hidden_size, cfg.ffn_hidden_size, cfg.num_attention_heads,
           cfg.num_query_groups or cfg.num_attention_heads, cfg.kv_channels,
           cfg.gated_linear_unit, cfg.normalization)
          == (model["layers"], model["hidden"], model["ffn"], model["heads"], model["kv_heads"],
              model["head_dim"], model["gated_mlp"],
              "LayerNorm" if model["norm"] == "layernorm" else "RMSNorm"),
          f"{name}: Megatron-Core's TransformerConfig has the model's sizes, heads, MLP and norm")
    if "norm_eps" in model:
        check(args.layernorm_epsilon == model["norm_eps"] == cfg.layernorm_epsilon,
              f"{name}: norm epsilon {args.layernorm_epsilon} (TransformerConfig.layernorm_epsilon) is the model's {model['norm_eps']}")
    if model.get("moe"):
        moe_checks(name, profile, args, cfg)
    want, got_layers = pptune_stages(profile), megatron_stages(arguments, args, cfg)
    check(want == got_layers,
          f"{name}: get_num_layers_to_build gives pptune's split on every (rank, virtual stage)"
          + ("" if want == got_layers else f": Megatron {got_layers}, pptune {want}"))


def main():
    t0 = time.time()
    arguments = import_megatron_arguments()
    print(f"import of Megatron-LM's arguments.py with megatron-core: {time.time() - t0:.1f} s")
    work = tempfile.mkdtemp(prefix="pp_py_megatron_export_")
    cases = pptune_golden.golden_set(PPTUNE, work, "gpipe,1f1b,interleaved", check)
    # issue 28's done-when: Mixtral 8x7B and Qwen3-30B-A3B from their config.json on 16 nodes,
    # searched for Megatron-LM (expert parallelism among the axes)
    hf = os.path.join(pptune_golden.FIXTURES, "hf")
    for name, f in (("mixtral-8x7b-x16", "mixtral-8x7b-v0.1.json"),
                    ("qwen3-30b-a3b-x16", "qwen3-30b-a3b.json")):
        path = os.path.join(work, name + ".json")
        r = run("--model-config", os.path.join(hf, f), "--nodes", "16", "--for", "megatron",
                "-o", path)
        if check(r.returncode == 0 and " ep=" in r.stdout,
                 f"{name}: pptune --model-config {f} --nodes 16 --for megatron picks ep > 1"):
            cases.append((name, path))
    seen = set()
    for name, path in cases:
        with open(path) as fp:
            c = json.load(fp)["chosen"]["config"]
        seen.add("interleaved uneven" if c["schedule"] == "interleaved" and c.get("split") != "even"
                 else "")
        seen.add("sequence parallel" if c.get("sequence_parallel") else "")
        seen.add("uneven" if c.get("split") == "uneven" else "")
        one_case(arguments, name, path, work)
    check({"interleaved uneven", "sequence parallel", "uneven"} <= seen,
          f"the golden set has an interleaved uneven split, an uneven one and sequence parallelism")
    print(f"{results['passed']} passed, {results['failed']} failed ({time.time() - t0:.1f} s)")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
