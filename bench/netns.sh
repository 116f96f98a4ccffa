#!/usr/bin/env bash
# Emulated multi-node network for data-parallel benchmarks.
#
#   bench/netns.sh up N [--rate 10gbit|1gbit|none] [--delay 100us|0]
#                       [--no-ingress]
#   bench/netns.sh down
#   bench/netns.sh status
#
# "up" creates network namespaces llmcc-r0 .. llmcc-r{N-1}.  Namespace
# llmcc-rK gets one veth end named eth0 with address 10.77.0.(K+1)/24; the
# other end (llmcc-vK) sits in the bridge llmcc-br0 in the root namespace,
# which has 10.77.0.254/24.  Every rank can therefore reach every other rank
# and the root namespace, where mpirun (the HNP) runs.
#
# Shaping, modelling a full-duplex NIC with line rate RATE and one-way
# delay DELAY on every rank:
#   - egress of the rank (eth0 inside llmcc-rK): tbf at RATE, then netem
#     adding DELAY.  This limits what a rank sends.
#   - ingress of the rank (llmcc-vK in the root namespace, whose egress is
#     what the rank receives): tbf at RATE only, no extra delay, so a
#     packet's one-way delay is DELAY and the RTT is 2*DELAY.  This limits
#     what a rank receives when several peers send to it at once (incast).
#     With --no-ingress only the sending side is shaped.
# --rate none and --delay 0 leave out the corresponding qdisc.
#
# "up" first tears down anything left by an earlier run, so it is
# idempotent; "down" removes all llmcc-r* namespaces and the bridge.
set -euo pipefail

PREFIX=llmcc-r
BRIDGE=llmcc-br0
SUBNET=10.77.0
BRIDGE_IP=$SUBNET.254

die() { echo "netns.sh: $*" >&2; exit 1; }

usage() {
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

check_env() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (needs ip netns / tc)"
  command -v ip >/dev/null || die "'ip' not found (install iproute2)"
  command -v tc >/dev/null || die "'tc' not found (install iproute2)"
}

# Converts a tc rate such as 10gbit, 500mbit, 100kbit or 1000000 (bit/s)
# to bytes per second, for sizing the tbf bucket.
rate_bytes_per_sec() {
  local r=${1,,} mult=1 num
  case $r in
    *gbit) mult=1000000000; num=${r%gbit} ;;
    *mbit) mult=1000000;    num=${r%mbit} ;;
    *kbit) mult=1000;       num=${r%kbit} ;;
    *bit)  num=${r%bit} ;;
    *[0-9]) num=$r ;;
    *) die "unsupported rate '$1' (use e.g. 10gbit, 1gbit, 500mbit, none)" ;;
  esac
  awk -v n="$num" -v m="$mult" 'BEGIN { printf "%d", n * m / 8 }'
}

# Adds shaping as the root qdisc of device $1 (run inside namespace $2, or
# the root namespace if $2 is empty).  $3 = rate or none, $4 = delay or 0.
shape() {
  local dev=$1 ns=$2 rate=$3 delay=$4 err
  local -a run=()
  [[ -n $ns ]] && run=(ip netns exec "$ns")
  local parent="root"
  if [[ $rate != none ]]; then
    # The bucket has to hold what the line sends in about one timer tick,
    # otherwise tbf cannot reach the rate (at 10 Gbit/s, 1 ms = 1.25 MB).
    # It also has to hold a whole 64 KB GSO segment.  The queue (limit)
    # holds ~5 ms of traffic so TCP does not see drops from a tiny buffer.
    local bps burst limit
    bps=$(rate_bytes_per_sec "$rate")
    burst=$(( bps / 1000 )); (( burst < 131072 )) && burst=131072
    limit=$(( bps / 200 )); (( limit < 4 * burst )) && limit=$(( 4 * burst ))
    "${run[@]}" tc qdisc add dev "$dev" root handle 1: \
      tbf rate "$rate" burst "$burst" limit "$limit"
    parent="parent 1:1"
  fi
  if [[ $delay != 0 ]]; then
    # netem queues packets while they wait out the delay; 10000 packets
    # is far more than a 10 Gbit/s x 100 us path keeps in flight.
    # shellcheck disable=SC2086
    if ! err=$("${run[@]}" tc qdisc add dev "$dev" $parent handle 10: \
                 netem delay "$delay" limit 10000 2>&1); then
      [[ $err == *unknown* ]] &&
        err="this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM); use --delay 0"
      die "adding delay on $dev failed: $err"
    fi
  fi
}

down() {
  local ns dev
  # Deleting one end of a veth pair deletes both at once.  Doing it before
  # "ip netns del" matters: a namespace is torn down asynchronously, so its
  # veth could otherwise still exist when "up" recreates it.
  for dev in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' |
               grep '^llmcc-v[0-9]\+$' || true); do
    ip link del "$dev"
  done
  for ns in $(ip netns list | awk '{print $1}' | grep "^${PREFIX}[0-9]\+$" || true); do
    ip netns del "$ns"
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link del "$BRIDGE"
  fi
}

up() {
  local n=$1 rate=$2 delay=$3 ingress=$4
  if ! [[ $n =~ ^[0-9]+$ ]] || (( n < 1 || n > 250 )); then
    die "N must be 1..250"
  fi
  [[ $rate == none ]] || rate_bytes_per_sec "$rate" >/dev/null
  down
  # A failure half-way leaves nothing behind.
  trap 'echo "netns.sh: setup failed, removing what was created" >&2; down' EXIT

  ip link add "$BRIDGE" type bridge
  ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up

  local k ns host
  for (( k = 0; k < n; k++ )); do
    ns=$PREFIX$k host=llmcc-v$k
    ip netns add "$ns"
    ip link add "$host" type veth peer name eth0 netns "$ns"
    ip link set "$host" master "$BRIDGE" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$SUBNET.$((k + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$BRIDGE_IP"
    shape eth0 "$ns" "$rate" "$delay"
    if [[ $ingress == 1 && $rate != none ]]; then
      shape "$host" "" "$rate" 0
    fi
  done
  trap - EXIT
  echo "netns.sh: $n namespaces ${PREFIX}0..$PREFIX$((n - 1))," \
       "rate=$rate delay=$delay ingress_shaping=$ingress"
}

status() {
  ip -br addr show "$BRIDGE" 2>/dev/null || echo "no bridge $BRIDGE"
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^${PREFIX}[0-9]\+$" | sort -V || true); do
    echo "== $ns"
    ip -n "$ns" -br addr show eth0
    ip netns exec "$ns" tc qdisc show dev eth0
    tc qdisc show dev "llmcc-v${ns#"$PREFIX"}"
  done
}

cmd=${1:-}
[[ -n $cmd ]] || usage
shift
case $cmd in
  up)
    [[ $# -ge 1 ]] || usage
    n=$1; shift
    rate=none delay=0 ingress=1
    while [[ $# -gt 0 ]]; do
      case $1 in
        --rate) rate=${2:?--rate needs a value}; shift 2 ;;
        --delay) delay=${2:?--delay needs a value}; shift 2 ;;
        --no-ingress) ingress=0; shift ;;
        *) usage ;;
      esac
    done
    [[ $delay == 0 || $delay == 0us || $delay == 0ms ]] && delay=0
    check_env
    up "$n" "$rate" "$delay" "$ingress"
    ;;
  down) check_env; down; echo "netns.sh: removed" ;;
  status) check_env; status ;;
  *) usage ;;
esac
