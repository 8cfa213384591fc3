#!/bin/sh
# rsh.sh — Open MPI's remote shell for the host-file test: the hosts are loopback addresses of
# this machine (127.0.0.2, ...), so "ssh HOST CMD" is CMD run here. plm_rsh_agent=rsh.sh.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
shift
exec sh -c "$*"
