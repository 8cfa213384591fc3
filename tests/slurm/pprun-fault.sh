#!/usr/bin/env bash
# pprun-fault.sh — the slurm suite's pprun: runs the copy of pprun beside it ($0's directory)
# unless PP_FAULT=KIND:SCHEDULE names this trial's schedule, and then rank 1 of it fails:
#   kill    — SIGKILL itself (a rank killed, as the OOM killer or an operator would)
#   hang    — never returns (waits for good, as a rank stuck in the fabric would)
#   hangall — every rank of the trial never returns (a trial that only a kill ends)
#   slurmd  — once per PP_FAULT_DIR: stops (SIGSTOP) the slurmd of its own node, then never
#             returns: the node stops answering slurmctld, which declares it DOWN after
#             SlurmdTimeout (a node lost mid-trial); the node's name goes to
#             $PP_FAULT_DIR/slurmd-stopped/node for the test to bring it back (SIGCONT)
# Every process it becomes (pprun, or the stand-in of a failed rank) keeps this script's pid:
# it is written to $PP_FAULT_DIR/pids/, so that the suite checks by pid what is left running.
here=$(cd "$(dirname "$0")" && pwd)
rank=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-0}}
kind=${PP_FAULT%%:*} sched=${PP_FAULT#*:}
if [ -n "${PP_FAULT_DIR:-}" ]; then
  mkdir -p "$PP_FAULT_DIR/pids" && : >"$PP_FAULT_DIR/pids/$$"
fi
if [ -n "${PP_FAULT:-}" ] && { [ "$rank" = 1 ] || [ "$kind" = hangall ]; } &&
  [[ " $* " == *" --schedule $sched "* ]]; then
  case "$kind" in
    hangall) exec -a "$here/pprun-hung" sleep 100000 ;;
    kill) kill -9 $$ ;;
    hang) exec -a "$here/pprun-hung" sleep 100000 ;;
    slurmd)
      if mkdir "$PP_FAULT_DIR/slurmd-stopped" 2>/dev/null; then
        echo "$SLURMD_NODENAME" >"$PP_FAULT_DIR/slurmd-stopped/node"
        kill -STOP "$(cat "$PP_SLURM_TMP/$SLURMD_NODENAME/slurmd.pid")"
        exec -a "$here/pprun-hung" sleep 100000
      fi ;;
  esac
fi
exec "$here/pprun" "$@"
