"""test_export_torchtitan.py PPTUNE — `pptune export --format torchtitan` against torchtitan's own
configuration and pipeline code, from its source (tests/py/torchtitan_src, see its README):
torchtitan itself does not install within reason here (its ConfigManager imports the model
registry, and with it the trainer's dataloader, checkpointer, tokenizer and metrics: grain,
datasets, torch_checkpointing, tokenizers, tensorboard, wandb, spmd_types, tyro), so this test
runs the pieces that decide whether our overrides start a run, with torch 2.15 (the interop
venv) for everything they call:

- configs.py whole: ParallelismConfig and TrainingConfig built from the overrides, their
  __post_init__ checks included; the overrides are read by each field's type (tyro's rules for
  what this exporter writes: `--section.key value`, `--section.key` / `--section.no_key` for a
  bool, a subcommand `activation-checkpoint:MODE`), and an option that is not a field fails.
- trainer.py's Trainer.Config._validate_cuda_graphs (the check that stops every pipeline-parallel
  run without --training.disable_cuda_graphs), run on them; and without that flag it must refuse.
- pipeline_parallel.py's _get_pipeline_metadata (stage count from the schedule name through
  torch's get_schedule_class and pipeline_parallel_layers_per_stage),
  _generate_llm_fqn_per_model_part (the layers of each stage) and
  _get_pp_rank_to_stage_indices_mapping (which rank holds which stage): they must give pptune's
  own split and placement (`pptune schedule --format json`), stage by stage.
- activation_checkpoint.py's ActivationCheckpointingConfig: the subcommand names (read with ast);
  the one given must be what the profile planned (none when it planned no recomputation).
- the schedule command the export starts with is run, and torch's
  _PipelineScheduleRuntime._load_csv reads the CSV it writes in its default format
  (compute_only), as torchtitan's _build_pipeline_schedule calls it.

The functions are taken out of the files with ast and run with torch's real classes; only their
type annotations are left unevaluated (they name torchtitan classes not loaded here). The golden
set: gpt-13b on 32 dgx-h100 nodes, llama3-70b on 16 (with and without sequence parallelism),
llama3-405b on 64, an interleaved first/last split (llama3-8b on 4), Qwen2.5 7B and Llama 3.1 8B
from config.json, each searched by this pptune over every schedule torchtitan runs, and the
profiles of tests/fixtures/profiles. Run by ctest as py_export_torchtitan.
"""
import __future__
import ast
import dataclasses
import functools
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import types
import typing
from unittest import mock

import torch
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S

import pptune_golden

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "torchtitan_src")
PPTUNE = os.path.abspath(sys.argv[1])
results, check = pptune_golden.results, pptune_golden.check


def load_configs():
    spec = importlib.util.spec_from_file_location("torchtitan_configs", os.path.join(SRC, "configs.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def functions(path, names, ns, cls_path=()):
    """The named function definitions of path (inside the classes cls_path, outermost first),
    compiled with annotations left unevaluated, defined in ns."""
    tree = ast.parse(open(path).read(), path)
    body = tree.body
    for cls in cls_path:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    found = [n for n in body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert {f.name for f in found} == set(names), f"{path}: {names} not all found"
    code = compile(ast.Module(body=found, type_ignores=[]), path, "exec",
                   flags=__future__.annotations.compiler_flag)
    exec(code, ns)
    return ns


def ac_modes():
    """The subcommand names of ActivationCheckpointingConfig (tyro.conf.subcommand("...))."""
    tree = ast.parse(open(os.path.join(SRC, "activation_checkpoint.py")).read())
    assign = next(n for n in tree.body if isinstance(n, ast.Assign)
                  and getattr(n.targets[0], "id", "") == "ActivationCheckpointingConfig")
    return {c.args[0].value for c in ast.walk(assign) if isinstance(c, ast.Call)
            and getattr(c.func, "attr", "") == "subcommand"}


def parse_overrides(words, configs):
    """{section: {field: value}} and the subcommands, read by the dataclasses' field types."""
    classes = {"parallelism": configs.ParallelismConfig, "training": configs.TrainingConfig}
    out, subcommands, i = {k: {} for k in classes}, [], 0
    while i < len(words):
        w = words[i]
        if not w.startswith("--"):
            subcommands.append(w)
            i += 1
            continue
        section, key = w[2:].split(".", 1)
        if section not in classes:
            raise ValueError(f"{w}: not a section this test reads")
        hints = typing.get_type_hints(classes[section])
        negated = key.startswith("no_") and key[3:] in hints and hints[key[3:]] is bool
        name = key[3:] if negated else key
        if name not in hints:
            raise ValueError(f"{w}: {classes[section].__name__} has no field {name}")
        t = hints[name]
        if t is bool:
            out[section][name] = not negated
            i += 1
            continue
        value = words[i + 1]
        args = [a for a in typing.get_args(t) if a is not type(None)]
        base = args[0] if args and typing.get_origin(t) is not typing.Literal else t
        if typing.get_origin(t) is typing.Literal:
            if value not in typing.get_args(t):
                raise ValueError(f"{w} {value}: expected one of {typing.get_args(t)}")
        elif base in (int, float):
            value = base(value)
        out[section][name] = value
        i += 2
    return out, subcommands


def run(*args):
    return pptune_golden.run(PPTUNE, *args)


@functools.lru_cache(maxsize=None)
def mock_stage(ranks, stages):
    """A stage with no module, as torch's own _schedule_visualizer builds them."""
    st = mock.create_autospec(PipelineStage, instance=True)
    st.group_rank, st.group_size, st.submod, st.num_stages = 0, ranks, None, stages
    return st


def one_case(name, path, configs, tt, modes, work):
    with open(path) as fp:
        profile = json.load(fp)
    c, model, L = profile["chosen"]["config"], profile["model"], profile["model"]["layers"]
    r = run("export", "--format", "torchtitan", path)
    if not check(r.returncode == 0, f"{name}: pptune export --format torchtitan ({c['schedule']})"):
        return
    lines = r.stdout.splitlines()
    try:
        over, subcommands = parse_overrides(lines[-1].split(), configs)
        par = configs.ParallelismConfig(**over["parallelism"])
        train = configs.TrainingConfig(**over["training"])
    except (ValueError, TypeError) as e:
        check(False, f"{name}: torchtitan's ParallelismConfig / TrainingConfig take the overrides: {e}")
        return
    check(True, f"{name}: torchtitan's ParallelismConfig and TrainingConfig take every override")
    cfg = types.SimpleNamespace(training=train, parallelism=par, model_spec=None)
    try:
        tt["_validate_cuda_graphs"](cfg)
        ok = True
    except ValueError as e:
        ok = e
    check(ok is True, f"{name}: Trainer.Config._validate_cuda_graphs accepts them"
          + ("" if ok is True else f": {ok}"))
    if c["p"] > 1:
        bare = types.SimpleNamespace(training=configs.TrainingConfig(**{
            **over["training"], "disable_cuda_graphs": False}), parallelism=par, model_spec=None)
        try:
            tt["_validate_cuda_graphs"](bare)
            said = None
        except ValueError as e:
            said = str(e)
        check(said is not None and "disable_cuda_graphs" in said,
              f"{name}: without --training.disable_cuda_graphs it refuses ({said})")
    sched_name = par.pipeline_parallel_schedule
    try:
        cls = S.get_schedule_class(sched_name)
    except ValueError as e:
        check(False, f"{name}: torch's get_schedule_class({sched_name!r}): {e}")
        return
    check(cls is not S._PipelineScheduleRuntime,
          f"{name}: torch's get_schedule_class knows {sched_name} ({cls.__name__})")
    want = pptune_golden.stages(PPTUNE, profile)
    n_stages, n_layers, iw, ow = tt["_get_pipeline_metadata"](
        types.SimpleNamespace(pp=par.pipeline_parallel_degree), par,
        types.SimpleNamespace(layers=[None] * L))
    parts = tt["_generate_llm_fqn_per_model_part"](n_stages, n_layers, iw, ow)
    got = [sum(m.startswith("layers.") for m in part) for part in parts]
    check(got == [n for _, n in want],
          f"{name}: torchtitan builds {n_stages} stages of {got[:6]}{'...' if len(got) > 6 else ''}"
          f" layers: pptune's {len(want)}" + ("" if got == [n for _, n in want]
                                              else f" of {[n for _, n in want]}"))
    placed = {r: tt["_get_pp_rank_to_stage_indices_mapping"](r, c["p"], sched_name, n_stages)
              for r in range(c["p"])}
    ours = {r: tuple(k for k, (rank, _) in enumerate(want) if rank == r) for r in range(c["p"])}
    check(placed == ours, f"{name}: torchtitan places the stages on the ranks as pptune "
          f"(rank 0: {placed.get(0)})" + ("" if placed == ours else f", pptune {ours}"))
    recompute = c.get("recompute", profile["options"].get("recompute", "none"))
    want_ac = {"none": "none", "selective": "selective", "full": "full"}[recompute]
    check(subcommands == [f"activation-checkpoint:{want_ac}"] and want_ac in modes,
          f"{name}: activation checkpointing {subcommands}: the profile planned {recompute}")
    csv_cmd = [ln for ln in lines if ln.startswith("# schedule CSV first: pptune schedule ")]
    if par.pipeline_parallel_schedule_csv:
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        cmd = csv_cmd[0][len("# schedule CSV first: pptune"):]
        sh = subprocess.run(f"{PPTUNE}{cmd}", shell=True, cwd=d, capture_output=True, text=True)
        csv_path = os.path.join(d, par.pipeline_parallel_schedule_csv)
        if not check(sh.returncode == 0, f"{name}: the schedule command runs: {sh.stderr.strip()}"):
            return
        rt = S._PipelineScheduleRuntime([mock_stage(c["p"], n_stages)] * (n_stages // c["p"]),
                                        par.num_pp_microbatches)
        try:
            rt._load_csv(csv_path)
            loaded = True
        except Exception as e:  # noqa: BLE001 -- any refusal is the failure reported
            loaded = f"{type(e).__name__}: {e}"
        check(loaded is True, f"{name}: torch's _load_csv(path) (compute_only, as torchtitan "
              f"calls it) reads the CSV" + ("" if loaded is True else f": {loaded}"))
    else:
        check(not csv_cmd and cls in (S.ScheduleZBVZeroBubble, S.ScheduleDualPipeV),
              f"{name}: a V-shaped schedule by PyTorch's name ({sched_name}), no CSV")


def main():
    t0 = time.time()
    configs = load_configs()
    tt = {"math": math, "get_schedule_class": S.get_schedule_class,
          "PipelineScheduleSingle": S.PipelineScheduleSingle,
          "ScheduleZBVZeroBubble": S.ScheduleZBVZeroBubble, "ScheduleDualPipeV": S.ScheduleDualPipeV}
    functions(os.path.join(SRC, "pipeline_parallel.py"),
              ["_get_pipeline_metadata", "_generate_llm_fqn_per_model_part",
               "_get_pp_rank_to_stage_indices_mapping"], tt)
    functions(os.path.join(SRC, "trainer.py"), ["_validate_cuda_graphs"], tt, ("Trainer", "Config"))
    modes = ac_modes()
    print(f"torch {torch.__version__}; torchtitan's activation checkpointing modes {sorted(modes)}")
    work = tempfile.mkdtemp(prefix="pp_py_torchtitan_export_")
    # torchtitan runs one pipeline: the bidirectional schedules are its row's refusal
    cases = pptune_golden.golden_set(PPTUNE, work, "gpipe,1f1b,interleaved,zb-h1,zbv,dualpipev",
                                     check)
    for name, path in cases:
        one_case(name, path, configs, tt, modes, work)
    print(f"{results['passed']} passed, {results['failed']} failed ({time.time() - t0:.1f} s)")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
