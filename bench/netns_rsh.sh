#!/usr/bin/env bash
# Stand-in for ssh that OpenMPI's rsh launcher (plm_rsh) calls to start an
# orted on a "remote host".  The host is one of the namespaces made by
# bench/netns.sh, and "remote" means: run the command in that namespace.
#
#   mpirun --mca plm_rsh_agent bench/netns_rsh.sh --mca plm_rsh_no_tree_spawn 1 ...
#
# plm_rsh calls:  AGENT [OPTIONS] HOST WORD...
# OPTIONS are whatever plm_rsh_args adds (plm_rsh adds none for an agent not
# named ssh/rsh); ssh-style options are skipped, with an argument for the
# ones that take one.  The WORDs are joined with spaces and run by /bin/sh,
# as sshd would; plm_rsh sends a command such as
#   PATH=...; export PATH; LD_LIBRARY_PATH=...; ... orted -mca ess "env" ...
#
# HOST may be the rank's name llmcc-rK or its address 10.77.0.(K+1).
# The command runs under "ip netns exec llmcc-rK" and in its own UTS
# namespace with hostname llmcc-rK, so every orted (and the ranks it
# starts) reports its own host name; OpenMPI uses the host name in session
# directory paths, which would otherwise be shared between "hosts".  Like
# sshd, it starts from a clean environment (only PATH, LD_LIBRARY_PATH,
# HOME, USER, LANG, TMPDIR are kept), so mpirun's own OMPI_*/PMIX_*
# variables do not leak into the orted.
#
# Set NETNS_RSH_LOG=/path to append each call's arguments to that file.
set -euo pipefail

if [[ -n ${NETNS_RSH_LOG:-} ]]; then
  printf '%q ' "$0" "$@" >>"$NETNS_RSH_LOG"
  echo >>"$NETNS_RSH_LOG"
fi

# Skip ssh-style options in front of the host.
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;  # ssh options that take a value
    --) shift; break ;;
    *) shift ;;
  esac
done
[[ $# -ge 2 ]] || { echo "netns_rsh.sh: usage: $0 [opts] HOST COMMAND..." >&2; exit 255; }
host=$1; shift

case $host in
  llmcc-r[0-9]*) ns=$host ;;
  10.77.0.*)
    last=${host##*.}
    [[ $last =~ ^[0-9]+$ && $last -ge 1 && $last -le 250 ]] ||
      { echo "netns_rsh.sh: no rank namespace for $host" >&2; exit 255; }
    ns=llmcc-r$((last - 1)) ;;
  *) echo "netns_rsh.sh: unknown host '$host' (want llmcc-rK or 10.77.0.K+1)" >&2
     exit 255 ;;
esac
[[ -e /run/netns/$ns ]] ||
  { echo "netns_rsh.sh: namespace $ns does not exist (run bench/netns.sh up)" >&2; exit 255; }

# The joined command goes through $1 of the inner shell, so no quoting
# of its own is needed.
# shellcheck disable=SC2016
exec ip netns exec "$ns" \
  env -i PATH="$PATH" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" HOME="${HOME:-/root}" \
         USER="${USER:-root}" LANG="${LANG:-C.UTF-8}" TMPDIR="${TMPDIR:-/tmp}" \
  unshare --uts /bin/sh -c 'hostname "$1" && exec /bin/sh -c "$2"' \
  netns-rsh "$ns" "$*"
