#!/usr/bin/env bash
# test_slurm.sh BUILD_DIR — the slurm suite (ctest -L slurm): pptune's trials across the nodes of
# a real Slurm cluster on this host (cluster.sh: four slurmd n1..n4 on 127.0.0.2-5), and across
# an Open MPI host file without Slurm. CPU backend, MPI transport, the tiny model.
#
#   1. salloc -N 4: trials are srun job steps; the pick is the fastest measured; the profile
#      names the launcher and the nodes
#   2. a rank of every 1f1b trial is SIGKILLed: those trials are classified, the others run,
#      and no pprun is left on any node
#   3. a rank of every 1f1b trial hangs: killed at the trial's limit, nothing left running
#   4. mpirun --hostfile (two hosts, no Slurm): the same as 1
#   5. examples/tune-cluster.sbatch submitted with sbatch (2 nodes): pptune probe probes every node
#      itself (one srun rank each), tune with srun
#      trials, publish to the local HTTP store of the profile tests (tests/fixtures/store_server.py)
#   6. pptune search --cluster local inside salloc -N 2 (2 ranks): it probes both nodes itself (one
#      rank each, named in the output and the profile); candidates of more ranks run with fewer
#      data-parallel replicas, their full-size DP all-reduce probed across the nodes and added
#      to the measured step, said on stderr and in the profile
#   7. salloc --no-kill -N 4, SlurmdTimeout lowered to 4 s: rank 1 of the first 1f1b trial stops
#      its node's slurmd; slurmctld declares the node DOWN, srun says "Node failure on nX": that
#      trial is node-lost, the later ones exclude the node and run ok; the node is brought back
#      (SIGCONT, ReturnToService=2) and nothing of the trials is left running (by pid)
#
# Open MPI between the "nodes": TCP over loopback only (self,tcp: the shared-memory BTL of two
# slurmd on one host would map the same segment and crash a rank), PMIx from srun --mpi=pmix
# (each slurmd has its own TmpFS, so their PMIx directories differ). Exit 77 = skipped.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: test_slurm.sh BUILD_DIR}" && pwd)
if [ -z "${PP_SLURM_TMP:-}" ]; then
  exec "$here/cluster.sh" run "$0" "$build"
fi
T=$PP_SLURM_TMP
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export XDG_DATA_HOME=$T/data
mkdir -p "$T/bin"
cp "$build/runtime/pprun" "$T/bin/pprun"
cp "$here/pprun-fault.sh" "$T/bin/"
export PPTUNE_PPRUN=$T/bin/pprun-fault.sh
pptune=$build/tuner/pptune
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Nothing of ours may outlive a trial. Every rank pprun-fault.sh started (pprun, or a failed
# rank's stand-in) left its pid in $T/fault-NAME/pids; one host holds every node, so /proc shows
# them all. A pid counts while it runs (not a zombie) with that PP_FAULT_DIR in its environment
# (so a reused pid is not ours). A killed step's processes take slurmstepd a moment to reap:
# wait for them, at most 20 s.
alive() { # alive NAME: the recorded pids of NAME's trials still running
  local f p dir=$T/fault-$1
  for f in "$dir"/pids/*; do
    [ -e "$f" ] || continue
    p=${f##*/}
    tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "PP_FAULT_DIR=$dir" && echo "$p"
  done
}
none_left() {
  ls "$T/fault-$1/pids/"* >/dev/null 2>&1 || { fail "$1: no trial process recorded its pid"; return; }
  for _ in $(seq 100); do
    [ -z "$(alive "$1")" ] && return 0
    sleep 0.2
  done
  fail "$1: left running: $(for p in $(alive "$1"); do tr '\0' ' ' <"/proc/$p/cmdline"; echo; done | head -3)"
}

search() { # search NAME [pptune options...]: runs pptune search, its output in $T/NAME.out
  local name=$1
  shift
  PP_FAULT_DIR=$T/fault-$name "$pptune" --model tiny --cluster local ${no_probe---no-probe-nodes} \
    --schedules gpipe,1f1b --trial-steps 3 -o "$T/$name.json" "$@" >"$T/$name.out" 2>&1 ||
    fail "$name: pptune exited $?: $(tail -3 "$T/$name.out")"
}

check() { # check NAME LAUNCHER NODES [SCHEDULE=STATUS...]
  local name=$1
  shift
  python3 "$here/check_profile.py" "$T/$name.json" "$@" || fail "$name: $(grep trial "$T/$name.out" | head -5)"
}

export -f search check fail none_left alive
export T pptune here fails

took=() # the wall time of each part, printed at the end (a figure, not a check)
lap() { took+=("$1 $((SECONDS - lap_at)) s"); lap_at=$SECONDS; }
lap_at=$SECONDS
# 1-3 inside one allocation of the four nodes
salloc --quiet -N 4 bash -c '
  fails=0
  search srun --trials 3 --trial-timeout 60
  check srun srun "n[1-4]" "*=ok"
  none_left srun
  PP_FAULT=kill:1f1b search kill --trials 4 --trial-timeout 60
  grep -q "Killed" "$T/kill.out" || fail "kill: no trial reported the killed rank"
  check kill srun "n[1-4]" 1f1b=crash gpipe=ok
  none_left kill
  PP_FAULT=hang:1f1b search hang --trials 3 --trial-timeout 8
  check hang srun "n[1-4]" 1f1b=timeout gpipe=ok
  none_left hang
  exit $fails
'
rc=$?
[ $rc -eq 0 ] || fail "inside salloc: $rc failed (or salloc exited $rc)"
lap "1-3 (srun, kill, hang)"

# 7: a node lost mid-trial. slurmctld declares a node DOWN SlurmdTimeout after its slurmd last
# answered (its pings time out after MessageTimeout): 4 s and 3 s for this part only (scontrol
# reconfigure; the node is then lost in about 7 s, within the trial's 60 s and pprun's 12 s
# watchdog), 30 s and 10 s again after it. --no-kill: the allocation outlives the node (srun
# and pptune go on with the others).
timeout_to() {
  sed -i "s/^SlurmdTimeout=.*/SlurmdTimeout=$1/; s/^MessageTimeout=.*/MessageTimeout=$2/" "$SLURM_CONF"
  scontrol reconfigure || fail "lost: scontrol reconfigure failed"
}
timeout_to 4 3
# (salloc itself exits 1 after a node of its job failed: the search's own status is kept)
salloc --quiet --no-kill -N 4 bash -c '
  fails=0
  PP_FAULT=slurmd:1f1b search lost --trials 3 --trial-timeout 60
  echo $fails >"$T/lost.rc"
' 2>"$T/lost.salloc"
[ "$(cat "$T/lost.rc" 2>/dev/null)" = 0 ] || fail "lost: the search failed: $(tail -2 "$T/lost.salloc")"
node=$(cat "$T/fault-lost/slurmd-stopped/node" 2>/dev/null)
if [ -n "$node" ]; then
  kill -CONT "$(cat "$T/$node/slurmd.pid")"
  for _ in $(seq 150); do
    [ "$(sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ] && break
    sleep 0.2
  done
  [ "$(sinfo -h -n "$node" -o %t)" = idle ] || fail "lost: $node did not come back: $(sinfo -h -n "$node")"
  python3 - "$T/lost.json" "$node" <<'PY' || fail "lost: $(grep -E 'trial ' "$T/lost.out" | head -4)"
import json, sys
p, node = json.load(open(sys.argv[1])), sys.argv[2]
runs = [e for e in [p["chosen"]] + p["runners_up"] if "measured" in e]
lost = [e for e in runs if e["measured"]["status"] == "node-lost"]
bad = []
if len(lost) != 1 or lost[0]["config"]["schedule"] != "1f1b":
    bad.append("expected one node-lost 1f1b trial, got %s" % [e["measured"]["status"] for e in runs])
elif ("Node failure on " + node not in lost[0]["measured"]["detail"]
      or "later trials exclude " + node not in lost[0]["measured"]["detail"]):
    bad.append("detail %r does not name %s" % (lost[0]["measured"]["detail"], node))
later = [e for e in runs if e not in lost]
if not later or any(e["measured"]["status"] != "ok" for e in later):
    bad.append("the other trials: %s" % [(e["measured"]["status"], e["measured"]["detail"]) for e in later])
for b in bad:
    print("lost: " + b)
sys.exit(1 if bad else 0)
PY
  check lost srun "n[1-4]"
else
  fail "lost: no trial stopped a slurmd: $(grep -E 'trial ' "$T/lost.out" | head -3)"
fi
none_left lost
timeout_to 30 10
lap "7 (lost)"

# 4: an Open MPI host file, no Slurm in the environment
printf '127.0.0.2 slots=2\n127.0.0.3 slots=2\n' >"$T/hosts"
(
  fails=0 # this part's own count, added to the suite's below
  for v in $(env | grep -o '^SLURM_[A-Z_]*'); do unset "$v"; done
  export OMPI_MCA_plm_rsh_agent=$here/rsh.sh PP_RSH_TMP=$T
  # the search probes every host itself (one mpirun rank each) when the stand-in ssh can give
  # each its own host name; else the two look like one machine and the probe is not checked
  probed=0
  if unshare --uts true 2>/dev/null; then no_probe='' probed=1; fi
  search mpirun --trials 3 --trial-timeout 60 --hostfile "$T/hosts"
  check mpirun mpirun "127.0.0.2,127.0.0.3" "*=ok"
  if [ "$probed" = 1 ]; then
    grep -q "^probed: 2 nodes of the allocation, one mpirun rank each.*node-127.0.0.2, node-127.0.0.3" \
      "$T/mpirun.out" || fail "mpirun: the search did not probe both hosts: $(grep -E 'prob' "$T/mpirun.out" | head -3)"
  else
    echo "mpirun: hosts share this machine's name (no unshare --uts): the node probe is not checked"
  fi
  none_left mpirun
  exit $fails
) || fails=$((fails + $?))
lap "4 (mpirun)"

# 5: the per-cluster CI job as a batch job, against the test HTTP store (the default schedules,
# the zero-bubble family included: pprun runs I and W)
mkdir -p "$T/store"
python3 "$here/../fixtures/store_server.py" --mode ok --root "$T/store" --lifetime 300 \
  >"$T/store.port" 2>"$T/store.err" &
store_pid=$!
for _ in $(seq 50); do grep -q PORT "$T/store.port" && break; sleep 0.1; done
port=$(awk '/PORT/ {print $2}' "$T/store.port")
(
  cd "$here/../.."
  PPTUNE_STORE_URL=http://127.0.0.1:$port/profiles PPTUNE=$pptune PPTUNE_QUICK=1 \
    sbatch --wait --quiet --nodes 2 --output="$T/sbatch.log" examples/tune-cluster.sbatch tiny \
    "$T/job" --trials 2 --trial-steps 3
) || fail "sbatch: the job exited $?: $(tail -5 "$T/sbatch.log")"
grep -q "^published .* to http://127.0.0.1:$port/profiles" "$T/sbatch.log" ||
  fail "sbatch: not published: $(tail -3 "$T/sbatch.log")"
ls "$T"/store/profiles/*/tiny.json >/dev/null 2>&1 || fail "sbatch: the store holds no tiny.json"
grep -q "trials: #1 to #2 run with pprun under srun" "$T/job/tune.txt" 2>/dev/null ||
  fail "sbatch: the job's search ran no srun trials: $(grep -E 'trial|allocation' "$T/job/tune.txt" | head -3)"
python3 "$here/check_profile.py" "$T/job/profile.json" srun "n[1-2]" "*=ok" || fail "sbatch: profile"
python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
sys.exit(0 if [n["hostname"] for n in c["nodes"]] == ["n1", "n2"] else 1)' "$T/job/cluster.json" ||
  fail "sbatch: the probe did not cover both nodes: $(grep -E '^probe' "$T/sbatch.log" | head -3)"
lap "5 (sbatch)"
# 6: pptune search --cluster local inside a 2-rank allocation of 2 nodes probes both itself (2
# cores each: 4 devices); trials needing more than its 2 ranks run with fewer data-parallel
# replicas, their full-size all-reduce probed over the 2 ranks
salloc --quiet -N 2 "$pptune" --model tiny --cluster local --schedules gpipe \
  --trials 2 --trial-steps 3 -o "$T/reduced.json" >"$T/reduced.out" 2>&1 ||
  fail "reduced: pptune exited $?: $(tail -3 "$T/reduced.out")"
grep -q "^probed: 2 nodes of the allocation, one srun rank each, quick (n1, n2)" "$T/reduced.out" ||
  fail "reduced: the search did not probe both nodes: $(grep -E 'prob|cluster' "$T/reduced.out" | head -3)"
grep -Eq "ran reduced: srun on 2 nodes of n\[1-2\], reduced: d=1 of 2 .*; DP all-reduce: probed over 2 ranks at dp=2|ran reduced: srun on 2 nodes of n\[1-2\], reduced: d=[12] of [48] .*; DP all-reduce: probed over 2 ranks, scaled to dp=[48] by the ring formula" "$T/reduced.out" ||
  fail "reduced: no reduced trial said so: $(grep -E 'trial|allocation' "$T/reduced.out" | head -3)"
python3 - "$T/reduced.json" <<'PY' || fail "reduced: the profile does not record the reduction and its all-reduce"
import json, re, sys
p = json.load(open(sys.argv[1]))
runs = [e for e in [p["chosen"]] + p["runners_up"] if "measured" in e]
red = [e for e in runs if re.search(r"reduced: d=\d+ of %d .*; DP all-reduce: probed over 2 ranks"
                                     r"(, scaled to dp=%d| at dp=%d)" % ((e["config"]["d"],) * 3),
                                     e["measured"]["where"])]
ok = all(e["measured"]["status"] == "ok" for e in runs)
sys.exit(0 if red and ok and p["cluster"]["source"].endswith("(n1, n2)")
         and p["cluster"]["nodes"] == 2 else 1)
PY

lap "6 (reduced)"
kill "$store_pid" 2>/dev/null
wait "$store_pid" 2>/dev/null

for f in srun kill hang lost mpirun reduced; do
  [ -f "$T/$f.out" ] && { echo "--- $f"; grep -E "^(allocation|trials:|cluster )|trial " "$T/$f.out"; }
done
echo "--- wall time per part (load average $(cut -d' ' -f1-3 /proc/loadavg)):"
printf '  %s\n' "${took[@]}"
[ $fails -eq 0 ] && echo "slurm suite: all checks passed" || echo "slurm suite: $fails failed"
[ $fails -eq 0 ]
