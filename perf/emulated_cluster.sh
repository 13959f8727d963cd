#!/usr/bin/env bash
# An emulated cluster on this machine: where compression has to pay off (DESIGN.md section 9).
#
# One network namespace per node, each with one rank of all_reduce_perf; every node's veth goes
# into a bridge that lives in a namespace of its own (the "switch"), and `tc` limits each node's
# link to RATE in both directions (token bucket on the node's side and on the switch's port).
# Nodes are told apart by TERSE_HOSTID and talk over UCX's TCP transport on their veth, as ranks
# on different hosts would. The nodes share this machine's cores, so each rank's BLAS (PowerSGD)
# gets one thread (OPENBLAS_NUM_THREADS, unless set). Every run is all_reduce_perf with -J; the
# table at the end gives, per rate and codec, the time per call, the effective algbw
# (uncompressed bytes / time), the speed-up over the uncompressed run, the traffic ratio, and
# where the time went (encode and decode of rank 0, the rest being wire and waiting), and
# perf/plot draws it.
#
#   sudo perf/emulated_cluster.sh [-n NODES] [-r "1gbit 10gbit"] [-c "none int8 ..."]
#                                 [-s 64M] [-i ITERS] [-o OUTDIR] [-p PNG] [-B BUILDDIR]
#
# Defaults: 4 nodes, 1gbit and 10gbit, codecs none int8 int4 topk:ratio=0.01 powersgd:rank=4,
# 64M fp32, 5 timed iterations, output (JSON, logs, table.md, and the chart unless -p) in
# build/emulated_cluster/, binaries from build/. Needs root (namespaces and tc) and a built
# tree (./cmake/build.sh). Everything it creates is named tc<pid>-*, lives in its own
# namespaces (addresses 10.213.0.0/24 exist only there), and is removed on exit, also after
# Ctrl-C or a failed run.
set -euo pipefail
cd "$(dirname "$0")/.."

nodes=4
rates="1gbit 10gbit"
codecs="none int8 int4 topk:ratio=0.01 powersgd:rank=4"
size=64M
iters=5
out=build/emulated_cluster
build=build
png=
while getopts "n:r:c:s:i:o:p:B:h" flag; do
  case $flag in
    n) nodes=$OPTARG ;;
    r) rates=$OPTARG ;;
    c) codecs=$OPTARG ;;
    s) size=$OPTARG ;;
    i) iters=$OPTARG ;;
    o) out=$OPTARG ;;
    p) png=$OPTARG ;;
    B) build=$OPTARG ;;
    h) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
if [[ $(id -u) -ne 0 ]]; then
  echo "emulated_cluster.sh: needs root (network namespaces, veth and tc); run it with sudo" >&2
  exit 1
fi
binary=$(realpath -m "$build/perf/all_reduce_perf")
[[ -x $binary ]] || { echo "emulated_cluster.sh: $binary is missing; run ./cmake/build.sh" >&2; exit 1; }
mkdir -p "$out"
out=$(realpath "$out")
png=${png:-$out/emulated_cluster.png}

prefix=tc$$
switch=$prefix-sw
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for ((i = 0; i < nodes; ++i)); do ip netns del "$prefix-n$i" 2>/dev/null || true; done
  ip netns del "$switch" 2>/dev/null || true
}
trap cleanup EXIT
trap 'echo "emulated_cluster.sh: interrupted, cleaning up" >&2; exit 130' INT TERM

address() { echo "10.213.0.$((10 + $1))"; }

# The switch and the nodes; deleting a namespace deletes the veth ends inside it.
ip netns add "$switch"
ip -n "$switch" link add br0 type bridge
ip -n "$switch" link set br0 up
ip -n "$switch" link set lo up
for ((i = 0; i < nodes; ++i)); do
  ns=$prefix-n$i
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link add eth0 type veth peer name "p$i" netns "$switch"
  ip -n "$ns" addr add "$(address "$i")/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$switch" link set "p$i" master br0
  ip -n "$switch" link set "p$i" up
done

# Each node's link: RATE each way. A token bucket of a few milliseconds at the rate keeps TCP's
# bursts from exceeding it by much.
limit_links() {
  local rate=$1
  for ((i = 0; i < nodes; ++i)); do
    for side in "$prefix-n$i eth0" "$switch p$i"; do
      read -r ns dev <<<"$side"
      ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst 512kb \
        latency 100ms
    done
  done
}

run_codec() {
  local rate=$1 codec=$2 json=$3
  local port=$((20000 + RANDOM % 20000))
  pids=()
  for ((i = 0; i < nodes; ++i)); do
    ip netns exec "$prefix-n$i" env RANK=$i LOCAL_RANK=0 WORLD_SIZE="$nodes" LOCAL_WORLD_SIZE=1 \
      MASTER_ADDR="$(address 0)" MASTER_PORT=$port TERSE_HOSTID="node$i" \
      TERSE_SOCKET_IFNAME=eth0 UCX_TLS=tcp UCX_NET_DEVICES=eth0 TERSE_TIMEOUT_S=300 \
      OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" \
      "$binary" -b "$size" -e "$size" -n "$iters" -w 1 -Z "$codec" -J "$json" \
      >"$out/$(basename "$json" .json).rank$i.log" 2>&1 &
    pids+=($!)
  done
  local status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  pids=()
  if [[ $status -ne 0 ]]; then
    echo "emulated_cluster.sh: $codec at $rate failed ($status); see $out/*.rank*.log" >&2
    return $status
  fi
  grep -E '^ +[0-9]+ ' "$out/$(basename "$json" .json).rank0.log" | sed "s/^/  $rate $codec: /"
}

jsons=()
for rate in $rates; do
  limit_links "$rate"
  for codec in $codecs; do
    json=$out/${rate}_${codec%%:*}.json
    run_codec "$rate" "$codec" "$json"
    jsons+=("$json")
  done
done

python3 perf/emulated_cluster_table.py "${jsons[@]}" | tee "$out/table.md"
perf/plot "$png" "${jsons[@]}" || echo "emulated_cluster.sh: no chart (perf/plot failed)" >&2
