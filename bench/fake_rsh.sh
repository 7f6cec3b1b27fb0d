#!/bin/sh
# An rsh agent for mpirun (--mca plm_rsh_agent) that starts each "remote"
# node's daemon on this machine: many_servers_peers.py's N nodes of one job.
# Called as: fake_rsh.sh [options] <host> <command...>. Each node's daemon
# gets its own session directory (under FAKE_RSH_TMP, default /tmp), as a
# node of its own would: daemons sharing one collide.
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;
    *) break ;;
  esac
done
host=$1
shift
OMPI_MCA_orte_tmpdir_base="${FAKE_RSH_TMP:-/tmp}/node-$host"
mkdir -p "$OMPI_MCA_orte_tmpdir_base"
export OMPI_MCA_orte_tmpdir_base
exec /bin/sh -c "$*"
