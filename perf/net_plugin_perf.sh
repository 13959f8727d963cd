#!/usr/bin/env bash
# The ncclNet plugin beside UCX itself (issue 13): perf/net_plugin_perf (two processes through
# libnccl-net-terse.so, driven as NCCL's proxy drives it) and ucx_perftest's tag_bw / tag_lat on
# the same UCX transport, in the same run, size by size; then, with -r, the same on an emulated
# link of that rate between two network namespaces (a veth pair, tc's token bucket on both ends,
# UCX over TCP), with TERSE_NET_COMPRESS off, lossless and auto on bf16 gradient-like bytes (and
# random bytes, which do not compress). Prints markdown tables; raw outputs go to OUTDIR.
#
#   perf/net_plugin_perf.sh [-B BUILDDIR] [-t "tcp sm"] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS]
#                           [-r RATE] [-R "MIN MAX FACTOR ITERS"] [-o OUTDIR] [-y 1|0]
#
# Defaults: build/, transports tcp (UCX_TLS for both tools), sizes 8 B to 64 MiB by 8, 20
# iterations, no emulated link, output in build/net_plugin_perf/. -r 1gbit adds the emulated
# link (needs root, ip and tc; holds /tmp/terse-cluster.lock while its namespaces exist, like
# perf/emulated_cluster.sh), with sizes 1 MiB to 16 MiB by 4 and 10 iterations unless -R.
# -y 0: the plugin's driver spins between calls, as ucx_perftest does, instead of yielding as
# NCCL's idle proxy thread does (the default, -y 1).
set -euo pipefail
cd "$(dirname "$0")/.."

build=build
transports="tcp"
min=8 max=67108864 factor=8 iters=20
rate=
emulated="1048576 16777216 4 10"
out=build/net_plugin_perf
yield=1
while getopts "B:t:b:e:f:n:r:R:o:y:h" flag; do
  case $flag in
    B) build=$OPTARG ;;
    t) transports=$OPTARG ;;
    y) yield=$OPTARG ;;
    b) min=$OPTARG ;;
    e) max=$OPTARG ;;
    f) factor=$OPTARG ;;
    n) iters=$OPTARG ;;
    r) rate=$OPTARG ;;
    R) emulated=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
perf=$build/perf/net_plugin_perf
[[ -x $perf ]] || { echo "net_plugin_perf.sh: no $perf (cmake --build $build --target net_plugin_perf)" >&2; exit 1; }
command -v ucx_perftest >/dev/null || { echo "net_plugin_perf.sh: no ucx_perftest (ucx-utils)" >&2; exit 1; }
mkdir -p "$out"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  if [[ -n ${ns_a:-} ]]; then ip netns del "$ns_a" 2>/dev/null || true; fi
  if [[ -n ${ns_b:-} ]]; then ip netns del "$ns_b" 2>/dev/null || true; fi
  if [[ -n ${ns_sw:-} ]]; then ip netns del "$ns_sw" 2>/dev/null || true; fi
}
trap cleanup EXIT

# Runs `ucx_perftest` as a server (under the prefix $1, on a port held for it in that namespace)
# and as a client (prefix $2) to address $3 with the rest of the arguments; prints the Final line.
ucx_pair() {
  local server_prefix=$1 client_prefix=$2 address=$3
  shift 3
  local port server deadline
  coproc HOLD { exec $server_prefix python3 perf/hold_ports.py 1 0.0.0.0; }
  read -r port <&"${HOLD[0]}"
  $server_prefix ucx_perftest -p "$port" >"$out/ucx_server.log" 2>&1 &
  server=$!
  pids+=("$server")
  # Wait (bounded) until the server listens on the held port.
  deadline=$((SECONDS + 30))
  until $server_prefix ss -ltnH "sport = :$port" | grep -q .; do
    ((SECONDS < deadline)) || { echo "ucx_perftest did not listen" >&2; return 1; }
    sleep 0.05
  done
  $client_prefix timeout 300 ucx_perftest "$address" -p "$port" "$@" 2>&1 | grep '^Final:' || true
  wait "$server" 2>/dev/null || true
  exec {HOLD[1]}>&-
  wait "$HOLD_PID" 2>/dev/null || true
}

sizes() {
  local size=$1
  while ((size <= $2)); do echo "$size"; size=$((size * $3)); done
}

# Table of one transport: sizes, ucx_perftest bandwidth and latency, the plugin's.
compare() {
  local label=$1 server_prefix=$2 client_prefix=$3 address=$4 peer_prefix=$5 lo=$6 hi=$7 f=$8 n=$9
  local plugin_log=$out/plugin_$label.log
  $client_prefix "$perf" -b "$lo" -e "$hi" -f "$f" -n "$n" -d random -y "$yield" ${peer_prefix:+-p "$peer_prefix"} >"$plugin_log"
  echo
  echo "### $label: ucx_perftest tag_bw/tag_lat and the plugin (random bytes, compression off)"
  echo
  echo "| bytes | ucx_perftest GB/s | plugin GB/s | plugin / ucx | ucx_perftest lat us | plugin lat us |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
  for size in $(sizes "$lo" "$hi" "$f"); do
    local bw lat pbw plat count
    # ucx_perftest's own window needs many messages: 256 MiB worth, 100 to 20000 of them.
    count=$(( 268435456 / size )); count=$(( count < 100 ? 100 : count > 20000 ? 20000 : count ))
    bw=$(ucx_pair "$server_prefix" "$client_prefix" "$address" -t tag_bw -s "$size" -n "$count" -w 5 | awk '{printf "%.3f", $7 * 1048576 / 1e9}')
    lat=-
    if ((size <= 1048576)); then
      lat=$(ucx_pair "$server_prefix" "$client_prefix" "$address" -t tag_lat -s "$size" -n 200 -w 20 | awk '{printf "%.2f", $3}')
    fi
    read -r pbw plat < <(awk -v s="$size" '$1 == s && NF == 3 {print $2, $3}' "$plugin_log")
    echo "| $size | ${bw:-?} | ${pbw:-?} | $(awk -v a="${pbw:-0}" -v b="${bw:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }') | ${lat:-?} | ${plat:-?} |"
  done
}

for tls in $transports; do
  UCX_TLS=$tls,self TERSE_NET_COMPRESS=off compare "local-$tls" "" "" 127.0.0.1 "" "$min" "$max" "$factor" "$iters"
done

[[ -n $rate ]] || exit 0

# The emulated link: nodes A and B behind a bridge, RATE each way (a token bucket of about 4 ms
# at the rate, 64 KiB to 512 KiB, as perf/emulated_cluster.sh uses, on each node's egress).
exec {lock}>/tmp/terse-cluster.lock
flock "$lock"
# Each node's eth0 is made in its own namespace and its peer moved into the switch's (UCX 1.13
# lists no TCP device on a veth end that was moved into a namespace, only on one made there).
ns_a=tn$$-a ns_b=tn$$-b ns_sw=tn$$-sw
ip netns add "$ns_sw"
ip -n "$ns_sw" link add br0 type bridge
ip -n "$ns_sw" link set br0 up
for node in a b; do
  ns=tn$$-$node
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link add eth0 type veth peer name "p$node" netns "$ns_sw"
  ip -n "$ns" addr add "10.214.0.$([[ $node == a ]] && echo 1 || echo 2)/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns_sw" link set "p$node" master br0
  ip -n "$ns_sw" link set "p$node" up
done
bps=$(awk -v r="$rate" 'BEGIN { n = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u);
  m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1; printf "%.0f", n * m }')
burst=$(awk -v bps="$bps" 'BEGIN { b = bps / 8 * 0.004; if (b < 65536) b = 65536; if (b > 524288) b = 524288; printf "%.0f", b }')
for ns in "$ns_a" "$ns_b"; do
  ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms
done
# The bridge forwards once its ports are up: wait (bounded) for a ping to come back.
deadline=$((SECONDS + 30))
until ip netns exec "$ns_a" ping -c 1 -W 1 10.214.0.2 >/dev/null 2>&1; do
  ((SECONDS < deadline)) || { echo "net_plugin_perf.sh: the emulated link does not come up" >&2; exit 1; }
done
read -r elo ehi ef en <<<"$emulated"
export UCX_TLS=tcp UCX_NET_DEVICES=eth0 TERSE_NET_IF==eth0 TERSE_NET_SPEED_MBPS=$((bps / 1000000))
export TERSE_TIMEOUT_S=${TERSE_TIMEOUT_S:-120}
a="ip netns exec $ns_a env TERSE_HOSTID=node-a"
b="ip netns exec $ns_b env TERSE_HOSTID=node-b"
TERSE_NET_COMPRESS=off compare "$rate-link" "$b" "$a" 10.214.0.2 "$b" "$elo" "$ehi" "$ef" "$en"

echo
echo "### $rate link: TERSE_NET_COMPRESS on bf16 gradient-like and random bytes (effective GB/s: raw bytes / time)"
echo
modes="off lossless auto"
header="| data | bytes |"; rule="| --- | ---: |"
for mode in $modes; do header+=" $mode |"; rule+=" ---: |"; done
echo "$header speed-up lossless/off |"
echo "$rule ---: |"
for data in bf16 random; do
  for mode in $modes; do
    TERSE_NET_COMPRESS=$mode $a "$perf" -b "$elo" -e "$ehi" -f "$ef" -n "$en" -d "$data" -p "$b" >"$out/emulated_${data}_$mode.log"
  done
  for size in $(sizes "$elo" "$ehi" "$ef"); do
    row="| $data | $size |"
    for mode in $modes; do
      row+=" $(awk -v s="$size" '$1 == s && NF == 3 {print $2}' "$out/emulated_${data}_$mode.log") |"
    done
    off=$(awk -v s="$size" '$1 == s && NF == 3 {print $2}' "$out/emulated_${data}_off.log")
    on=$(awk -v s="$size" '$1 == s && NF == 3 {print $2}' "$out/emulated_${data}_lossless.log")
    echo "$row $(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.2f", a / b }') |"
  done
done
