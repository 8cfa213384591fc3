#!/usr/bin/env python3
"""check_profile.py PROFILE LAUNCHER NODES [SCHEDULE=STATUS ...] — the checks of the slurm suite on a
profile pptune wrote after trials in an allocation: the pick is the fastest measured candidate
that ran "ok" and fits; the allocation and every trial name the launcher and the nodes; every
trial of SCHEDULE ended with STATUS (at least one such trial ran), "*" for the other schedules. Prints one line per failed check, exit 1 if any."""
import json, sys

prof = json.load(open(sys.argv[1]))
launcher, nodes = sys.argv[2], sys.argv[3]
want = dict(a.split("=") for a in sys.argv[4:])
bad = []
chosen = prof["chosen"]
entries = [chosen] + prof["runners_up"]
trials = [e for e in entries if "measured" in e]
ok = [e for e in trials
      if e["measured"]["status"] == "ok"
      and e["measured"]["peak_bytes"] <= e["predicted"]["capacity_bytes"]]
if not ok:
    bad.append("no trial ran ok")
elif "measured" not in chosen or chosen["measured"]["status"] != "ok":
    bad.append("the pick was not measured ok: %s" % chosen.get("measured"))
else:
    fastest = min(e["measured"]["step_time_s"] for e in ok)
    if chosen["measured"]["step_time_s"] != fastest:
        bad.append("pick %g s is not the fastest measured %g s"
                   % (chosen["measured"]["step_time_s"], fastest))
al = prof.get("allocation", {})
if al.get("launcher") != launcher or al.get("nodes") != nodes:
    bad.append("allocation %s, expected launcher %s nodes %s" % (al, launcher, nodes))
if launcher not in prof.get("figures", "") or nodes not in prof.get("figures", ""):
    bad.append("figures %r do not name %s and %s" % (prof.get("figures"), launcher, nodes))
for e in trials:
    w = e["measured"].get("where", "")
    if not w.startswith(launcher + " on ") or not (w.endswith(" of " + nodes) or
                                                   (" of " + nodes + ", reduced: d=") in w):
        bad.append("trial where %r does not name %s and %s" % (w, launcher, nodes))
for sched, st in want.items():
    mine = [e for e in trials if e["config"]["schedule"] == sched or
            (sched == "*" and e["config"]["schedule"] not in want)]
    if not mine:
        bad.append("no trial of %s ran" % sched)
    for e in mine:
        m = e["measured"]
        if m["status"] != st:
            bad.append("trial %s %s: %s (%s), expected %s" % (
                e["config"]["schedule"], e["launch"], m["status"], m["detail"], st))
for b in bad:
    print("check_profile: " + b)
sys.exit(1 if bad else 0)
