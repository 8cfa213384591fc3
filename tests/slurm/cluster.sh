#!/usr/bin/env bash
# cluster.sh — a 4-node Slurm cluster on this one host, for the slurm test suite.
#
#   tests/slurm/cluster.sh run CMD...   start munged, slurmctld and slurmd n1..n4, wait until sinfo
#                                       shows the four nodes idle, run CMD with SLURM_CONF and PATH
#                                       set, then stop every daemon it started (trap) and remove its
#                                       temporary directory. Exit status: CMD's.
#
# Every node is a slurmd -N nI on its own loopback address (127.0.0.1+I) and port, with its own
# spool, log, pid and TmpFS directories, so two nodes never share a file. Only loopback addresses
# are used. Exit 77 with one line "skip: ..." where the daemons cannot start (no slurm-wlm/munge
# installed, not root, ports taken): the caller turns that into a skipped test.
set -u
NODES=${PP_SLURM_NODES:-4}
# ports from our pid, so that two clusters on one host (two CI jobs) do not collide
BASE_PORT=${PP_SLURM_PORT:-$((20000 + ($$ % 2000) * 5))}

skip() { echo "skip: local slurm: $*"; exit 77; }
[ "${1:-}" = run ] || { echo "usage: $0 run CMD..." >&2; exit 2; }
shift
[ $# -gt 0 ] || { echo "usage: $0 run CMD..." >&2; exit 2; }
for b in munged slurmctld slurmd sinfo srun salloc; do
  command -v "$b" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin
  command -v "$b" >/dev/null 2>&1 || skip "$b not installed (scripts/install-deps.sh installs slurm-wlm and munge)"
done
[ "$(id -u)" -eq 0 ] || skip "slurmd needs root to launch job steps here (uid $(id -u))"

T=$(mktemp -d /tmp/pp-slurm.XXXXXX) || skip "mktemp failed"
chmod 755 "$T"
pids=()
cleanup() {
  # Job steps first (scancel), then the daemons we started, by their pids, then the directory.
  if [ -n "${SLURM_CONF:-}" ]; then
    scancel --quiet --user=root >/dev/null 2>&1
    for _ in $(seq 50); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  # whatever a step left behind (its tasks carry our SLURM_CONF): ended by pid
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}
    p=${p%/environ}
    [ "$p" != $$ ] && tr '\0' '\n' 2>/dev/null <"$e" | grep -qx "SLURM_CONF=$T/slurm.conf" &&
      kill -9 "$p" 2>/dev/null
  done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  if [ -f "$T/munged.pid" ]; then
    m=$(cat "$T/munged.pid")
    kill "$m" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$m" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# munge: own key, socket, pid and log, so a system munged is untouched.
mkdir -p "$T/munge" && chmod 700 "$T/munge"
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
MUNGE_SOCK=$T/munge/munge.socket
munged --force --key-file="$T/munge/munge.key" --socket="$MUNGE_SOCK" \
  --pid-file="$T/munged.pid" --log-file="$T/munge/munged.log" --seed-file="$T/munge/seed" \
  >/dev/null 2>&1 || skip "munged did not start ($(tail -1 "$T/munge/munged.log" 2>/dev/null))"

ctl_port=$BASE_PORT
nodelines=""
for i in $(seq 1 "$NODES"); do
  mkdir -p "$T/n$i/spool" "$T/n$i/tmp"
  nodelines+="NodeName=n$i NodeHostname=$(hostname) NodeAddr=127.0.0.$((i + 1)) Port=$((BASE_PORT + i)) CPUs=$(nproc) State=UNKNOWN"$'\n'
done
cat >"$T/slurm.conf" <<CONF
ClusterName=pplocal
SlurmctldHost=$(hostname)(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
CredType=cred/munge
StateSaveLocation=$T/ctld
SlurmdSpoolDir=$T/%n/spool
SlurmdPidFile=$T/%n/slurmd.pid
SlurmctldPidFile=$T/slurmctld.pid
SlurmdLogFile=$T/%n/slurmd.log
SlurmctldLogFile=$T/slurmctld.log
TmpFS=$T/%n/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=2
MessageTimeout=10
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=5
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
LaunchParameters=enable_nss_slurm
$nodelines
PartitionName=local Nodes=n[1-$NODES] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
sed -i '/^LaunchParameters/d' "$T/slurm.conf"
mkdir -p "$T/ctld"
export SLURM_CONF=$T/slurm.conf

slurmctld -D -i -f "$SLURM_CONF" >"$T/slurmctld.out" 2>&1 &
pids+=($!)
for i in $(seq 1 "$NODES"); do
  slurmd -D -N "n$i" -f "$SLURM_CONF" >"$T/n$i/slurmd.out" 2>&1 &
  pids+=($!)
done

ok=0
for _ in $(seq 150); do
  idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
  [ "$idle" -ge "$NODES" ] && { ok=1; break; }
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || break 2; done
  sleep 0.2
done
if [ $ok -ne 1 ]; then
  why=$(tail -n 1 "$T/slurmctld.log" "$T"/n*/slurmd.log 2>/dev/null | grep -i error | head -1)
  skip "daemons did not come up within 30 s: ${why:-$(sinfo -h -N 2>&1 | head -1)}"
fi
export PP_SLURM_TMP=$T
"$@"
