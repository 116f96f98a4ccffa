#!/usr/bin/env bash
# Runs an MPI program with one rank in each namespace made by
# "bench/netns.sh up N", all MPI traffic going over the shaped veth links.
#
#   bench/netns_mpirun.sh N PROGRAM [ARGS...]
#
# Extra mpirun options can be given in MPIRUN_ARGS (word-split).  The
# hostfile lists llmcc-r0..llmcc-r{N-1} with one slot each; the rsh agent
# bench/netns_rsh.sh starts each orted inside its namespace.  Options used:
#   plm_rsh_no_tree_spawn 1   mpirun (root namespace) starts every orted
#                             itself instead of orteds starting each other
#   oob_tcp_if_include        runtime (orted <-> mpirun) traffic uses the
#                             10.77.0.0/24 network, the only one all share
#   btl tcp,self, pml ob1     rank-to-rank data goes over TCP, not shared
#                             memory and not UCX
#   btl_tcp_if_include        ... over the veth links
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
n=$1; shift
here=$(cd "$(dirname "$0")" && pwd)

for (( k = 0; k < n; k++ )); do
  [[ -e /run/netns/llmcc-r$k ]] ||
    { echo "netns_mpirun.sh: no namespace llmcc-r$k; run bench/netns.sh up $n" >&2; exit 1; }
done
hostfile=$(mktemp /tmp/llmcc-netns-hosts.XXXXXX)
trap 'rm -f "$hostfile"' EXIT
for (( k = 0; k < n; k++ )); do echo "llmcc-r$k slots=1"; done >"$hostfile"

# shellcheck disable=SC2086
mpirun --allow-run-as-root -np "$n" --hostfile "$hostfile" \
  --mca plm_rsh_agent "$here/netns_rsh.sh" --mca plm_rsh_no_tree_spawn 1 \
  --mca oob_tcp_if_include 10.77.0.0/24 \
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
  ${MPIRUN_ARGS:-} "$@"
