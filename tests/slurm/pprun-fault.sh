#!/usr/bin/env bash
# pprun-fault.sh — the slurm suite's pprun: runs the copy of pprun beside it ($0's directory)
# unless PP_FAULT=KIND:SCHEDULE names this trial's schedule, and then rank 1 of it fails:
#   kill  — SIGKILL itself (a rank killed, as the OOM killer or an operator would)
#   hang  — never returns (waits for good, as a rank stuck in the fabric would)
here=$(cd "$(dirname "$0")" && pwd)
rank=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-0}}
kind=${PP_FAULT%%:*} sched=${PP_FAULT#*:}
if [ -n "${PP_FAULT:-}" ] && [ "$rank" = 1 ] && [[ " $* " == *" --schedule $sched "* ]]; then
  case "$kind" in
    kill) kill -9 $$ ;;
    hang) exec -a "$here/pprun-hung" sleep 100000 ;;
  esac
fi
exec "$here/pprun" "$@"
