"""csv_interop.py PPTUNE WORKDIR -- pptune's schedules against PyTorch pipelining's own code.

Run by tests/torch/test_torch.sh with the torch of tests/py/venv.sh interop (torch 2.15). Three
checks, each over many shapes, each failing loudly with the schedule, the shape and the cause:

  load      every schedule `pptune schedule --help` lists is written with --format csv
            (compute_comms) and --format csv-compute (compute_only) and loaded by
            _PipelineScheduleRuntime._load_csv in that format, which lowers and validates it
            (stage placement, counts, REDUCE_GRAD/WAIT_REDUCE_GRAD pairing, one wait per send);
            the bidirectional ones (chimera, bitpipe) must be refused by pptune with its reason.
  dump      every schedule class torch has (get_schedule_class's list: GPipe, 1F1B,
            Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, DualPipeV) is
            dumped by torch's _dump_csv in both forms, also lowered with torch's options that
            move actions (defer_pp_recv, defer_reduce_grad_wait, max_outstanding_sends), and
            read by `pptune schedule --check`; where pptune generates the same schedule, the
            order pptune reads equals the order pptune generates.
  makespan  DualPipeV's unit-cost makespan in pptune (F = I = W = 1/2 a chunk, B = 1) is half
            that of PyTorch's own simulator (_schedule_visualizer.add_schedule_op_spacing, whose
            F = I = W = 1, B = 2, OVERLAP_F_B = 3) for every shape D = 2..8, N = 2D..3D+1.
Prints one line per check with its counts; exit status 1 on the first failure. PP_TORCH_QUICK=1
(the sanitizer pass, where every pptune run is slower) keeps a third of the shapes and two of the
lowerings.
"""

import contextlib
import csv
import functools
import io
import json
import os
import re
import subprocess
import sys
import time
from unittest import mock

import torch
from torch.distributed.pipelining import schedules as S
from torch.distributed.pipelining._schedule_visualizer import (
    action_type_to_color_mapping,
    add_schedule_op_spacing,
)
from torch.distributed.pipelining.stage import PipelineStage

PPTUNE, WORK = sys.argv[1], sys.argv[2]
QUICK = os.environ.get("PP_TORCH_QUICK") == "1"


def fail(msg):
    print(f"csv_interop.py: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def pptune(*args, ok=True):
    r = subprocess.run([PPTUNE, *args], capture_output=True, text=True)
    if ok and r.returncode != 0:
        fail(f"pptune {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return r


@functools.lru_cache(maxsize=None)
def mock_stage(ranks, stages):
    """What torch's _schedule_visualizer.get_schedule_ops builds: a stage with no module (made
    once per shape: create_autospec is slow)."""
    st = mock.create_autospec(PipelineStage, instance=True)
    st.group_rank, st.group_size, st.submod, st.num_stages = 0, ranks, None, stages
    return st


def mock_stages(ranks, stages):
    return [mock_stage(ranks, stages)] * max(1, stages // ranks)


def csv_shape(path):
    """(rows, stages, micro-batches) of a PyTorch CSV."""
    rows = list(csv.reader(open(path, newline="")))
    cells = [c for r in rows for c in r if c]
    stages = 1 + max(int(m) for c in cells for m in re.findall(r"(\d+)[A-Z]", c))
    mbs = 1 + max(int(m) for c in cells for m in re.findall(r"(?:[FBIW]|_[FB])(\d+)", c))
    return len(rows), stages, mbs


def kinds():
    """The schedules `pptune schedule --help` lists under "schedules (--kind):"."""
    out = pptune("schedule", "--help").stdout
    block = out.split("schedules (--kind):\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines() if line.strip()]


SHAPES = [  # ranks, micro-batches, extra options
    (1, 1, []), (1, 3, []), (2, 2, []), (2, 4, []), (2, 5, []), (3, 6, []), (4, 8, []),
    (4, 10, []), (4, 8, ["--chunks", "3"]), (4, 12, ["--chunks", "2", "--group", "6"]),
    (8, 16, []),
]
if QUICK:
    SHAPES = SHAPES[1::3]


def check_load():
    loaded = refused = 0
    last_refused = None
    for kind in kinds():
        for ranks, mbs, extra in SHAPES:
            if refused and kind == last_refused:
                break  # one refusal per bidirectional schedule says it
            base = ["schedule", "--kind", kind, "--ranks", str(ranks), "--microbatches",
                    str(mbs), *extra]
            for fmt, torch_fmt in (("csv", "compute_comms"), ("csv-compute", "compute_only")):
                path = os.path.join(WORK, f"load-{kind}-{ranks}-{mbs}-{len(extra)}-{fmt}.csv")
                r = pptune(*base, "--format", fmt, "-o", path, ok=False)
                if r.returncode == 2 and "is bidirectional" in r.stderr:
                    refused += 1  # PyTorch's CSV holds one pipeline: pptune says so
                    last_refused = kind
                    break
                if r.returncode == 2 and pptune(*base, "--format", "text", ok=False).returncode:
                    break  # a rule of the schedule, not of the CSV (pptune names it)
                if r.returncode != 0:
                    fail(f"{' '.join(base)} --format {fmt} exited {r.returncode}: "
                         f"{r.stderr.strip()}")
                rows, stages, n = csv_shape(path)
                rt = S._PipelineScheduleRuntime(mock_stages(rows, stages), n)
                try:
                    rt._load_csv(path, format=torch_fmt)
                except Exception as e:  # noqa: BLE001 -- any refusal is the failure reported
                    fail(f"torch {torch.__version__} _load_csv({path}, {torch_fmt}) of "
                         f"{' '.join(base)}: {type(e).__name__}: {e}")
                loaded += 1
    if loaded < (30 if QUICK else 100):
        fail(f"only {loaded} CSVs were loaded")
    print(f"load: torch {torch.__version__} _PipelineScheduleRuntime._load_csv took all "
          f"{loaded} of pptune's CSVs (both forms); {refused} bidirectional ones refused by "
          f"pptune with its reason")


# torch's schedule classes, their stages per rank, and pptune's generator of the same order
# (None: pptune has no such schedule).
CLASSES = [
    ("GPipe", 1, "gpipe"), ("1F1B", 1, "1f1b"), ("Interleaved1F1B", 2, "interleaved"),
    ("Interleaved1F1B", 3, "interleaved"), ("LoopedBFS", 2, None),
    ("InterleavedZeroBubble", 2, None), ("ZBVZeroBubble", 2, "zbv"),
    ("DualPipeV", 2, "dualpipev"),
]
DUMP_SHAPES = [(1, 1), (1, 2), (2, 4), (2, 6), (4, 8), (4, 12)]
VARIANTS = [{}, {"defer_pp_recv": True}, {"defer_reduce_grad_wait": True},
            {"max_outstanding_sends": 1}]
if QUICK:
    DUMP_SHAPES, VARIANTS = DUMP_SHAPES[::2], VARIANTS[:2]


def torch_order(name, ranks, v, mbs):
    cls = S.get_schedule_class(name)
    try:
        sched = cls(mock_stages(ranks, ranks * v)[0] if v == 1 else mock_stages(ranks, ranks * v),
                    mbs)
    except (ValueError, AssertionError):
        return None, None  # a shape the class refuses (DualPipeV: N < stages, ...)
    order = sched._get_pipeline_order() if v == 1 else sched.pipeline_order
    # the single-stage classes' order shows their REDUCE_GRAD too: the compute-only form has not
    return sched, {r: [a for a in acts if a is None or a.is_compute_op]
                   for r, acts in order.items()}


def ours_compute(kind, ranks, v, mbs):
    args = ["schedule", "--kind", kind, "--ranks", str(ranks), "--microbatches", str(mbs),
            "--format", "csv-compute"]
    if kind == "interleaved":
        args += ["--chunks", str(v)]
    r = pptune(*args, ok=False)
    return r.stdout if r.returncode == 0 else None


# Schedule1F1B._get_pipeline_order (torch 2.15, the order torch's tools show; its
# _step_microbatches runs its own loop) numbers the last rank's forwards 1..N instead of
# 0..N-1 (forward_mb starts at 0 and is incremented before the first steady-state forward when
# there is no warm-up forward), so torch's own _validate_schedule refuses it on that rank:
# "Running Full Backward for stage D-1, microbatch 0 without first running Forward". Those
# dumps cannot be made; the check says so and goes on. Anything else torch refuses fails.
TORCH_REFUSES_ITS_OWN = {"1F1B"}


def check_dump():
    read = same = 0
    refused = []
    for name, v, kind in CLASSES:
        for ranks, mbs in DUMP_SHAPES:
            sched, order = torch_order(name, ranks, v, mbs)
            if order is None:
                continue
            try:
                S._PipelineScheduleRuntime(mock_stages(ranks, ranks * v), mbs) \
                    ._prepare_schedule_with_comms({r: list(a) for r, a in order.items()})
            except AssertionError as e:
                if name not in TORCH_REFUSES_ITS_OWN:
                    fail(f"torch refuses its own {name} order ({ranks} ranks, N = {mbs}): {e}")
                refused.append(f"{name} D={ranks} N={mbs}")
                continue
            files = []
            for k, variant in enumerate(VARIANTS):
                rt = S._PipelineScheduleRuntime(mock_stages(ranks, ranks * v), mbs, **variant)
                rt._prepare_schedule_with_comms({r: list(a) for r, a in order.items()})
                rt.pipeline_order = order
                for fmt in ("compute_comms", "compute_only") if k == 0 else ("compute_comms",):
                    path = os.path.join(WORK, f"dump-{name}-{v}-{ranks}-{mbs}-{k}-{fmt}.csv")
                    rt._dump_csv(path, format=fmt)
                    files.append(path)
            if isinstance(sched, S._PipelineScheduleRuntime):  # the class's own dump
                path = os.path.join(WORK, f"dump-{name}-{v}-{ranks}-{mbs}-own.csv")
                sched._dump_csv(path)
                files.append(path)
            want = ours_compute(kind, ranks, v, mbs) if kind else None
            for path in files:
                r = pptune("schedule", "--check", path, "--format", "csv-compute", ok=False)
                if r.returncode != 0:
                    fail(f"pptune schedule --check {path} ({name}, {ranks} ranks, {v} stages "
                         f"per rank, N = {mbs}): {r.stderr.strip()}")
                read += 1
                if want is not None:
                    if r.stdout != want:
                        fail(f"{path}: pptune reads torch's {name} as\n{r.stdout}but generates "
                             f"{kind} of that shape as\n{want}")
                    same += 1
    if read < (40 if QUICK else 100):
        fail(f"only {read} of torch's CSVs were read")
    print(f"dump: pptune schedule --check read all {read} CSVs torch {torch.__version__}'s "
          f"_dump_csv wrote ({len(CLASSES)} class/stage combinations, both forms, "
          f"{len(VARIANTS)} lowerings); {same} of them read as exactly pptune's own order; "
          f"torch's own validator refuses its {', '.join(refused) or 'nothing'} (see "
          f"TORCH_REFUSES_ITS_OWN)")


def torch_makespan(ranks, mbs):
    """PyTorch's simulator: add_schedule_op_spacing's timeline, end of the last action."""
    _, order = torch_order("DualPipeV", ranks, 2, mbs)
    ops = [list(order[r]) for r in range(ranks)]
    with contextlib.redirect_stdout(io.StringIO()):  # it prints every timestep
        spaced = add_schedule_op_spacing(ops)
    width = {t: m.width for t, m in action_type_to_color_mapping.items()}
    end = 0
    for row in spaced:
        t = 0
        for a in row:
            t += 1 if a is None else width[a.computation_type]
            end = t if a is not None else end
    return end


def check_makespan():
    n, lines = 0, []
    for ranks in range(2, 5 if QUICK else 9):
        for mbs in range(2 * ranks, 3 * ranks + 2):
            out = pptune("schedule", "--kind", "dualpipev", "--ranks", str(ranks),
                         "--microbatches", str(mbs), "--format", "json").stdout
            ours, theirs = json.loads(out)["makespan"], torch_makespan(ranks, mbs)
            if abs(2 * ours - theirs) > 1e-9:
                fail(f"dualpipev D = {ranks}, N = {mbs}: pptune's unit-cost makespan {ours} "
                     f"is not half of PyTorch's simulator's {theirs}")
            if (ranks, mbs) in ((2, 4), (4, 8), (4, 12), (6, 12)):
                lines.append(f"D={ranks} N={mbs}: {ours} = {theirs}/2")
            n += 1
    print(f"makespan: dualpipev's unit-cost makespan equals PyTorch's simulator's (halved: a "
          f"chunk is half of L/D layers) on all {n} shapes; " + "; ".join(lines))


def timed(check, *args):
    t = time.monotonic()
    check(*args)
    print(f"  ({check.__name__}: {time.monotonic() - t:.1f} s)")


# torch 2.15's own dumps, kept in tests/fixtures/pytorch/ for the C tests that read them without
# torch (tests/test_sched_csv.c): checked here to be byte for byte what torch writes, and
# rewritten with --write-fixtures.
FIXTURES = [  # file, class, ranks, stages per rank, micro-batches, form
    ("torch-2.15_interleaved1f1b_1rank_2stage_1mb_comms.csv", "Interleaved1F1B", 1, 2, 1,
     "compute_comms"),
    ("torch-2.15_interleaved1f1b_2rank_4stage_4mb_comms.csv", "Interleaved1F1B", 2, 2, 4,
     "compute_comms"),
    ("torch-2.15_zbv_2rank_4mb_comms.csv", "ZBVZeroBubble", 2, 2, 4, "compute_comms"),
    ("torch-2.15_dualpipev_2rank_4mb_comms.csv", "DualPipeV", 2, 2, 4, "compute_comms"),
    ("torch-2.15_dualpipev_2rank_4mb_compute.csv", "DualPipeV", 2, 2, 4, "compute_only"),
]


def check_fixtures(write):
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "pytorch")
    for name, cls, ranks, v, mbs, fmt in FIXTURES:
        sched = S.get_schedule_class(cls)(mock_stages(ranks, ranks * v), mbs)
        path = os.path.join(WORK, name)
        sched._dump_csv(path, format=fmt)
        new = open(path, "rb").read()
        fixture = os.path.join(here, name)
        if write:
            open(fixture, "wb").write(new)
        elif open(fixture, "rb").read() != new:
            fail(f"{fixture} is not what torch {torch.__version__} writes for {cls} "
                 f"({ranks} ranks, {v} stages each, N = {mbs}, {fmt}); rewrite it with "
                 f"--write-fixtures")
    print(f"fixtures: the {len(FIXTURES)} torch CSVs in tests/fixtures/pytorch are torch "
          f"{torch.__version__}'s own _dump_csv output")


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    timed(check_fixtures, "--write-fixtures" in sys.argv[3:])
    timed(check_load)
    timed(check_dump)
    timed(check_makespan)
