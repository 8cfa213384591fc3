#!/bin/sh
# rsh.sh — Open MPI's remote shell for the host-file test: the hosts are loopback addresses of
# this machine (127.0.0.2, ...), so "ssh HOST CMD" is CMD run here. plm_rsh_agent=rsh.sh.
# Each "host" gets its own session directory (orte_tmpdir_base under $PP_RSH_TMP): two orted of
# one job on one machine would otherwise both create /tmp/ompi.HOST.UID/jf.N/0 and one fail.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1
shift
dir=${PP_RSH_TMP:-${TMPDIR:-/tmp}}/rsh-$host
mkdir -p "$dir"
OMPI_MCA_orte_tmpdir_base=$dir
export OMPI_MCA_orte_tmpdir_base
exec sh -c "$*"
