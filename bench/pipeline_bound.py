#!/usr/bin/env python3
"""pipeline_bound.py TRACE -- the 1F1B bound of a pprun run from its own trace (pprun --trace).

For every step after the first: each stage's forward and backward time (the median over that
step's micro-batches of its F and B spans), the 1F1B order of pp_sched's generator (rank d: warm-up
min(D - d - 1, N) forwards, then one forward one backward, then the remaining backwards) run with
those times and free transfers, plus the slowest rank's AdamW. That is the step time 1F1B allows
for this split on these cores; the measured step (the trace's step span) is compared against it.
Prints one JSON line: per-step bound and measured seconds, and their ratio at the fastest step.
Single pipe, v = 1 (gpipe/1f1b traces), dp = 1 only: it is the benchmark's helper, not a tool.
"""
import json
import statistics
import sys
from collections import defaultdict


def one_f_one_b(D, N, f, b):
    """Makespan of 1F1B with per-stage times f[s], b[s] (stage s on rank s), free links."""
    order = []
    for d in range(D):
        w = min(D - d - 1, N)
        ops = [("F", m) for m in range(w)]
        nb = 0
        for m in range(w, N):
            ops += [("F", m), ("B", nb)]
            nb += 1
        ops += [("B", m) for m in range(nb, N)]
        order.append(ops)
    done = {}  # (op, m, s) -> finish
    pos, free = [0] * D, [0.0] * D
    while any(pos[d] < len(order[d]) for d in range(D)):
        moved = False
        for d in range(D):
            if pos[d] >= len(order[d]):
                continue
            op, m = order[d][pos[d]]
            if op == "F":
                dep = [("F", m, d - 1)] if d > 0 else []
            else:
                dep = [("F", m, d)] + ([("B", m, d + 1)] if d < D - 1 else [])
            if all(x in done for x in dep):
                start = max([free[d]] + [done[x] for x in dep])
                free[d] = start + (f[d] if op == "F" else b[d])
                done[(op, m, d)] = free[d]
                pos[d] += 1
                moved = True
        if not moved:
            raise SystemExit("pipeline_bound.py: the 1F1B order deadlocked (a bug)")
    return max(free)


def main():
    ev = json.load(open(sys.argv[1]))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    spans = defaultdict(list)  # (step, cat, stage) -> durations (s)
    optim = defaultdict(list)
    steps = {}
    D = 1 + max(e["args"]["stage"] for e in ev if e.get("cat") == "F")
    N = 1 + max(e["args"]["mb"] for e in ev if e.get("cat") == "F")
    for e in ev:
        c, a = e.get("cat"), e.get("args", {})
        if c in ("F", "B"):
            spans[(a["step"], c, a["stage"])].append(e["dur"] * 1e-6)
        elif c == "optim":
            optim[a["step"]].append(e["dur"] * 1e-6)
        elif c == "step":
            steps[int(e["name"].split()[1])] = e["dur"] * 1e-6
    rows = []
    for k in sorted(steps)[1:]:  # the first step is warm-up
        f = [statistics.median(spans[(k, "F", s)]) for s in range(D)]
        b = [statistics.median(spans[(k, "B", s)]) for s in range(D)]
        bound = one_f_one_b(D, N, f, b) + max(optim[k])
        rows.append({"step": k, "measured_s": steps[k], "bound_s": bound,
                     "stage_f_s": f, "stage_b_s": b})
    best = min(rows, key=lambda r: r["measured_s"])
    print(json.dumps({"ranks": D, "microbatches": N, "steps": rows,
                      "fastest_measured_s": best["measured_s"], "its_bound_s": best["bound_s"],
                      "ratio": best["measured_s"] / best["bound_s"]}))


if __name__ == "__main__":
    main()
