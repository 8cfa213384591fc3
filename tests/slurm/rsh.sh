#!/bin/sh
# rsh.sh — Open MPI's remote shell for the host-file test: the hosts are loopback addresses of
# this machine (127.0.0.2, ...), so "ssh HOST CMD" is CMD run here. plm_rsh_agent=rsh.sh.
# Each "host" gets its own session directory (orte_tmpdir_base under $PP_RSH_TMP): two orted of
# one job on one machine would otherwise both create /tmp/ompi.HOST.UID/jf.N/0 and one fail.
# And, where the kernel lets it (unshare --uts: root, or a user namespace), its own host name
# node-HOST, in a UTS namespace of its own, as a remote machine has: what pptune's node probe
# tells nodes apart by.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1
shift
dir=${PP_RSH_TMP:-${TMPDIR:-/tmp}}/rsh-$host
mkdir -p "$dir"
OMPI_MCA_orte_tmpdir_base=$dir
export OMPI_MCA_orte_tmpdir_base
if unshare --uts true 2>/dev/null; then
  exec unshare --uts sh -c "hostname 'node-$host' && exec sh -c \"\$0\"" "$*"
fi
exec sh -c "$*"
