"""gloo_step.py PPTUNE WORKDIR -- pptune's schedule CSVs run in PyTorch's pipeline runtime.

Run by tests/torch/test_torch.sh with the torch of tests/py/venv.sh interop (torch 2.15). Two
processes on 127.0.0.1 form a gloo process group (torch.distributed, CPU). For each schedule
below, pptune writes the CSV of 2 ranks and N = 4 micro-batches in both of PyTorch's forms
(`--format csv`: compute_comms, run as written; `--format csv-compute`: compute_only, which
PyTorch lowers itself). Each rank builds the PipelineStages its row of the CSV names (a stage's
rank is its row, so the V schedules put stages r and 3 - r on rank r), loads the CSV into a
_PipelineScheduleRuntime and runs one training step of a small model (4 blocks of Linear(16,
16) + tanh, MSE loss, a batch of 8 rows) split into those stages. Every parameter's gradient
and the loss must equal those of the same model run unpipelined on the whole batch, to fp32
tolerance. A step that hangs (a schedule whose sends and receives do not meet) fails at the
time limit. Prints one line per step; exit status 1 on the first failure. While debugging,
PP_GLOO_ONLY=zbv,dualpipev runs only those schedules and PP_GLOO_FORM=csv (or csv-compute) one
form.
"""

import csv
import os
import re
import socket
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.pipelining import PipelineStage  # noqa: E402
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime  # noqa: E402

PPTUNE, WORK = sys.argv[1], sys.argv[2]
RANKS, MBS, BLOCKS, WIDTH, BATCH = 2, 4, 4, 16, 8
SCHEDULES = [  # pptune kind, its options, stages over the 2 ranks
    ("gpipe", [], 2), ("1f1b", [], 2), ("interleaved", ["--chunks", "2"], 4),
    ("zb-h1", [], 2), ("zbv", [], 4), ("dualpipev", [], 4),
]
FORMS = [("csv", "compute_comms"), ("csv-compute", "compute_only")]
LIMIT_S = 120


def blocks():
    torch.manual_seed(0)
    return [nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(BLOCKS)]


def data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, WIDTH, generator=g)


def reference():
    """Loss and per-block gradients of the unpipelined step on the whole batch."""
    model = nn.Sequential(*blocks())
    x, y = data()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss.item(), [[p.grad.clone() for p in b.parameters()] for b in model]


def stages_of_row(path, rank):
    row = list(csv.reader(open(path, newline="")))[rank]
    return sorted({int(m) for c in row for m in re.findall(r"(\d+)[A-Z]", c)})


def one_step(rank, path, fmt, n_stages, ref):
    """Runs the CSV's step on this rank; returns the worst gradient difference."""
    mine = blocks()
    per = BLOCKS // n_stages
    stages = [PipelineStage(nn.Sequential(*mine[s * per:(s + 1) * per]), s, n_stages,
                            torch.device("cpu"))
              for s in stages_of_row(path, rank)]
    rt = _PipelineScheduleRuntime(stages, MBS, loss_fn=nn.functional.mse_loss)
    rt._load_csv(path, format=fmt)
    x, y = data()
    first = any(st.is_first for st in stages)
    last = any(st.is_last for st in stages)
    losses = [] if last else None
    rt.step(*((x,) if first else ()), target=y if last else None, losses=losses)
    worst = 0.0
    for st in stages:
        for b in range(st.stage_index * per, (st.stage_index + 1) * per):
            for p, g in zip(mine[b].parameters(), ref[1][b]):
                if p.grad is None:
                    raise AssertionError(f"block {b} (stage {st.stage_index}): no gradient")
                worst = max(worst, (p.grad - g).abs().max().item())
                if not torch.allclose(p.grad, g, rtol=1e-5, atol=1e-6):
                    raise AssertionError(
                        f"block {b} (stage {st.stage_index}): gradient differs from the "
                        f"unpipelined step by {(p.grad - g).abs().max().item():.3g}")
    if last:
        loss = torch.stack(losses).mean().item()
        if abs(loss - ref[0]) > 1e-6 * max(1.0, abs(ref[0])):
            raise AssertionError(f"loss {loss} vs unpipelined {ref[0]}")
    return worst


def worker(rank, port, runs, results):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=RANKS)
    ref = reference()
    try:
        for name, path, fmt, n_stages in runs:
            try:
                results.put((rank, name, fmt, one_step(rank, path, fmt, n_stages, ref), None))
            except Exception as e:  # noqa: BLE001 -- reported with the schedule's name
                results.put((rank, name, fmt, None, f"{type(e).__name__}: {e}"))
                raise
            dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    os.makedirs(WORK, exist_ok=True)
    runs = []
    only = os.environ.get("PP_GLOO_ONLY")
    for kind, opts, n_stages in SCHEDULES:
        if only and kind not in only.split(","):
            continue
        for flag, fmt in [f for f in FORMS if os.environ.get("PP_GLOO_FORM", f[0]) == f[0]]:
            path = os.path.join(WORK, f"gloo-{kind}-{flag}.csv")
            r = subprocess.run([PPTUNE, "schedule", "--kind", kind, "--ranks", str(RANKS),
                                "--microbatches", str(MBS), *opts, "--format", flag, "-o",
                                path], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"gloo_step.py: FAIL: pptune schedule --kind {kind} --format {flag}: "
                         f"{r.stderr.strip()}")
            runs.append((kind, path, fmt, n_stages))
    ctx = mp.get_context("fork")  # torch is imported already; no CUDA is touched
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, port, runs, results)) for r in range(RANKS)]
    for p in procs:
        p.start()
    seen, bad = {}, []
    for _ in range(RANKS * len(runs)):
        try:
            rank, name, fmt, worst, err = results.get(timeout=LIMIT_S)
        except Exception:  # noqa: BLE001 -- queue.Empty: a rank is stuck
            bad.append(f"no result within {LIMIT_S} s (a step hangs: sends and receives do "
                       f"not meet); got {sorted(seen)}")
            break
        if err:
            bad.append(f"{name} ({fmt}), rank {rank}: {err}")
            break
        seen.setdefault((name, fmt), []).append(worst)
    for p in procs:
        p.join(timeout=10 if not bad else 1)
        if p.is_alive():
            p.kill()
    if bad:
        sys.exit("gloo_step.py: FAIL: " + "; ".join(bad))
    for (name, fmt), worst in seen.items():
        print(f"gloo step: pptune's {name} CSV ({fmt}) ran in torch {torch.__version__}'s "
              f"_PipelineScheduleRuntime on {RANKS} gloo ranks: gradients equal the "
              f"unpipelined step's (largest difference {max(worst):.2g})")
    if len(seen) != len(runs):
        sys.exit(f"gloo_step.py: FAIL: {len(seen)} of {len(runs)} steps reported")


if __name__ == "__main__":
    main()
