"""pptune_golden.py — what the export tests (test_export_*.py) share: running pptune, the golden
set of profiles they export (searched by the pptune under test, and the fixtures written by
older pptunes), and pptune's own split and placement of a profile's stages."""
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")


# One tally for a test script: check(ok, what) prints "ok   what" or "FAIL what" and counts it.
results = {"passed": 0, "failed": 0}


def check(ok, what):
    results["passed" if ok else "failed"] += 1
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    return ok


def run(pptune, *args):
    r = subprocess.run([pptune, *args], capture_output=True, text=True)
    if r.returncode:
        print(f"pptune {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    return r


def golden_set(pptune, work, schedules, check):
    """[(name, profile path)]: gpt-13b on 32 dgx-h100 nodes, llama3-70b on 16 (and with
    --sequence-parallel), llama3-405b on 64, an interleaved first/last split (llama3-8b on 4,
    interleaved only), Qwen2.5 7B and Llama 3.1 8B from config.json on 2, each searched over
    `schedules` (what the target runs), then the three profile fixtures."""
    hf = os.path.join(FIXTURES, "hf")
    searches = {
        "gpt-13b-x32": ["--model", "gpt-13b", "--nodes", "32"],
        "llama3-70b-x16": ["--model", "llama3-70b", "--nodes", "16"],
        "llama3-405b-x64": ["--model", "llama3-405b", "--nodes", "64"],
        "llama3-8b-x4-interleaved": ["--model", "llama3-8b", "--nodes", "4"],
        "llama3-70b-x16-sp": ["--model", "llama3-70b", "--nodes", "16", "--sequence-parallel"],
        "qwen2.5-7b-x2": ["--model-config", os.path.join(hf, "qwen2.5-7b.json"), "--nodes", "2"],
        "llama-3.1-8b-x2": ["--model-config", os.path.join(hf, "llama-3.1-8b.json"),
                            "--nodes", "2"],
    }
    cases = []
    for name, args in searches.items():
        args = args + ["--schedules", "interleaved" if "interleaved" in name else schedules]
        path = os.path.join(work, name + ".json")
        if check(run(pptune, *args, "-o", path).returncode == 0,
                 f"{name}: pptune {' '.join(args[:4])} ..."):
            cases.append((name, path))
    for f in ("gpt-13b-dgx-h100-x32-v1.1", "llama3-70b-dgx-h100-x16", "llama3-405b-dgx-h100-x64"):
        cases.append((f, os.path.join(FIXTURES, "profiles", f + ".json")))
    return cases


def stages(pptune, profile):
    """[(rank, layers)] of each stage in data-flow order, as pptune's schedules split and place
    them (`pptune schedule --format json`)."""
    c, model = profile["chosen"]["config"], profile["model"]
    args = ["schedule", "--kind", c["schedule"], "--ranks", str(c["p"]), "--microbatches",
            str(c["N"]), "--layers", str(model["layers"]), "--format", "json"]
    if c["schedule"] == "interleaved":
        args += ["--chunks", str(c["v"]), "--group", str(c["G"])]
    if c.get("split") == "uneven":
        args.append("--uneven")
    for key, flag in (("first_stage_layers", "--first-stage-layers"),
                      ("last_stage_layers", "--last-stage-layers")):
        if c.get(key):
            args += [flag, str(c[key])]
    sched = json.loads(run(pptune, *args).stdout)
    return [(st["rank"], st["layers"][1] - st["layers"][0]) for st in sched["stages"][0]]


def megatron_layers(cfg, p, vp):
    """{(pipeline rank, virtual stage): layers} as Megatron-Core's get_num_layers_to_build gives
    them from cfg (a TransformerConfig) for p ranks and vp virtual stages (None: not
    interleaved), with parallel_state told the sizes and each rank in turn (no process groups).
    Megatron-Core 0.16 takes the rank as pp_rank; 0.14 (what NeMo 2.5.3 needs) reads it from
    parallel_state only."""
    import inspect
    from megatron.core import parallel_state
    from megatron.core.transformer.transformer_block import get_num_layers_to_build

    by_rank = "pp_rank" in inspect.signature(get_num_layers_to_build).parameters
    parallel_state.set_pipeline_model_parallel_world_size(p)
    parallel_state.set_virtual_pipeline_model_parallel_world_size(vp)
    out = {}
    for r in range(p):
        parallel_state.set_pipeline_model_parallel_rank(r)
        for k in range(vp or 1):
            kw = {"pp_rank": r} if by_rank else {}
            out[(r, k)] = get_num_layers_to_build(cfg, vp_stage=k if vp else None, **kw)
    return out
