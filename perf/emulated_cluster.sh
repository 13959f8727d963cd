#!/usr/bin/env bash
# An emulated cluster on this machine: where compression has to pay off (docs/design.md section 11).
#
# One network namespace per node, each with one rank of all_reduce_perf; every node's veth goes
# into a bridge that lives in a namespace of its own (the "switch"), and `tc` limits each node's
# link to RATE in both directions (token bucket on the node's side and on the switch's port).
# With an RTT, the switch delays every frame it forwards, so that a ping between two nodes takes
# RTT (at least the 0.1-0.2 ms the delaying itself costs). Nodes are told apart by TERSE_HOSTID and talk over
# UCX's TCP transport on their veth, as ranks on different hosts would. The nodes share this
# machine's cores, so each rank's BLAS (PowerSGD) gets one thread (OPENBLAS_NUM_THREADS, unless
# set). Every run is all_reduce_perf with -J; the table at the end gives, per rate, RTT and
# codec, the time per call, the effective algbw (uncompressed bytes / time), the speed-up over
# the uncompressed run on the same link, the traffic ratio, and where the time went (encode and
# decode of rank 0, the rest being wire and waiting), after a table of what each link measured
# (ping RTT, TCP throughput); perf/plot draws it.
#
#   sudo perf/emulated_cluster.sh [-n NODES] [-r "1gbit 10gbit"] [-l "0 0.1ms 10ms"]
#        [-c "none int8 ..."] [-s 64M | -s MIN:MAX:FACTOR] [-i ITERS] [-o OUTDIR] [-p PNG]
#        [-B BUILDDIR] [-P | -M] [-e "VAR=value ..."] [-S link:RATE | -S cpu:FRACTION] [-x "COMMAND"]
#        [-w WARMUP]
#
# Defaults: 4 nodes, rates 1gbit and 10gbit, RTT 0 (no added delay), codecs none int8 int4
# topk:ratio=0.01 powersgd:rank=4 (-c "": only the link checks), 64M fp32, 5 timed iterations,
# output (JSON, logs, table.md, and the chart unless -p) in build/emulated_cluster/, binaries
# from build/, 1 untimed warm-up call before them (-w: more, so that the planner has learned this
# link before the timed calls; planner.h, Learning). Rates are tc's
# (100mbit, 1gbit, 2.5gbit, ...), RTTs a number with us, ms or s (0.1ms, 10ms, 50ms). Each rank
# is told the link it sits behind (TERSE_NET_GBPS = the rate, TERSE_NET_LATENCY_US = half the
# measured ping RTT), which the planner reads; -P leaves them unset, to see what it does
# uninformed; -M tells them the rate measured with every node sending to the next at once (the
# link check's slowest flow) instead of the rate asked, which is less where this machine's cores
# cannot carry every node's TCP at the rate (10 Gbit/s on 2 cores). -e adds environment to every rank (-e "TERSE_COMPRESSED_ALGO=sra TERSE_DEBUG=INFO":
# an algorithm forced, the planner's log). Files: RATE_RTT_CODEC.json (and .rankI.log) per run,
# link_RATE_RTT.json per link.
#
# A straggler (-S): the last node is slower than the others, by its link (-S link:100mbit: its
# token buckets run at that rate instead, both ways) or by its CPU (-S cpu:0.25: its ranks get a
# quarter of one core, through a cgroup's CFS quota). -x runs COMMAND (split at spaces; a
# relative path is the tree's) on every node instead of all_reduce_perf, once per rate, RTT and
# codec (TERSE_CODEC set to it; -c defaults to "none" then), with the ranks' torchrun-style
# environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and its output in
# RATE_RTT_CODEC.rankI.log; `{out}` in COMMAND becomes OUTDIR/RATE_RTT_CODEC (a prefix for the
# command's own files), and no table or chart is made. For example, a training run with one node
# on a slow link:
#   sudo perf/emulated_cluster.sh -n 4 -r 1gbit -S link:100mbit \
#     -x "build/perf/train_fmnist --epochs 2 --json {out}.json"
#
# Needs root (namespaces and tc), ping and, with an RTT, iptables (./cmake/install_deps.sh
# installs both), and a built tree (./cmake/build.sh): perf/all_reduce_perf and, with an RTT,
# perf/delay_line. Everything it creates is named tc<pid>-*, lives in its own namespaces
# (addresses 10.213.0.0/24 exist only there), and is removed on exit, also after Ctrl-C or a
# failed run.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

nodes=4
rates="1gbit 10gbit"
rtts="0"
codecs="none int8 int4 topk:ratio=0.01 powersgd:rank=4"
size=64M
iters=5
warmup=1
out=build/emulated_cluster
build=build
png=
inform=1
extra_env=()
straggler=
command_line=
codecs_given=0
while getopts "n:r:l:c:s:i:w:o:p:B:e:S:x:PMh" flag; do
  case $flag in
    n) nodes=$OPTARG ;;
    r) rates=$OPTARG ;;
    l) rtts=$OPTARG ;;
    c) codecs=$OPTARG; codecs_given=1 ;;
    s) size=$OPTARG ;;
    i) iters=$OPTARG ;;
    w) warmup=$OPTARG ;;
    o) out=$OPTARG ;;
    p) png=$OPTARG ;;
    B) build=$OPTARG ;;
    P) inform=0 ;;
    M) inform=2 ;;
    e) read -ra extra_env <<<"$OPTARG" ;;
    S) straggler=$OPTARG ;;
    x) command_line=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
fail() { echo "emulated_cluster.sh: $*" >&2; exit 1; }

# Rates as tc takes them, in bits per second; RTTs in microseconds.
rate_bps() {
  [[ $1 =~ ^([0-9]+(\.[0-9]+)?)([kmgt]?)bit$ ]] || return 1
  local scale
  case ${BASH_REMATCH[3]} in '') scale=1 ;; k) scale=1e3 ;; m) scale=1e6 ;; g) scale=1e9 ;; t) scale=1e12 ;; esac
  awk -v v="${BASH_REMATCH[1]}" -v s="$scale" 'BEGIN { printf "%.0f", v * s }'
}
rtt_us() {
  [[ $1 == 0 ]] && { echo 0; return 0; }
  [[ $1 =~ ^([0-9]+(\.[0-9]+)?)(us|ms|s)$ ]] || return 1
  local scale
  case ${BASH_REMATCH[3]} in us) scale=1 ;; ms) scale=1e3 ;; s) scale=1e6 ;; esac
  awk -v v="${BASH_REMATCH[1]}" -v s="$scale" 'BEGIN { printf "%.1f", v * s }'
}
for rate in $rates; do
  rate_bps "$rate" >/dev/null || fail "rate '$rate': a number and bit, kbit, mbit, gbit or tbit (100mbit, 1gbit)"
done
straggler_rate=
straggler_cpu=
case $straggler in
  '') ;;
  link:*)
    straggler_rate=${straggler#link:}
    rate_bps "$straggler_rate" >/dev/null ||
      fail "-S $straggler: link:RATE with a rate as tc takes it (link:100mbit)" ;;
  cpu:*)
    straggler_cpu=${straggler#cpu:}
    awk -v f="$straggler_cpu" 'BEGIN { exit !(f ~ /^[0-9]*\.?[0-9]+$/ && f > 0 && f <= 64) }' ||
      fail "-S $straggler: cpu:FRACTION with a fraction of one core above 0 (cpu:0.25)" ;;
  *) fail "-S $straggler: link:RATE (the last node's link) or cpu:FRACTION (its share of a core)" ;;
esac
((nodes >= 2)) || fail "-n $nodes: an emulated cluster needs at least 2 nodes"
if [[ -n $command_line ]]; then
  read -ra command_words <<<"$command_line"
  ((codecs_given)) || codecs=none
fi
delays=0
for rtt in $rtts; do
  us=$(rtt_us "$rtt") || fail "RTT '$rtt': 0 or a number and us, ms or s (0.1ms, 10ms)"
  [[ $us != 0 ]] && delays=1
done
sweep=(-b "$size" -e "$size")
if [[ $size == *:* ]]; then
  IFS=: read -r min max factor <<<"$size"
  [[ -n $min && -n $max && -n $factor ]] || fail "size '$size': SIZE or MIN:MAX:FACTOR (1M:64M:8)"
  sweep=(-b "$min" -e "$max" -f "$factor")
fi

if [[ $(id -u) -ne 0 ]]; then
  fail "needs root (network namespaces, veth and tc); run it with sudo"
fi
binary=$(realpath -m "$build/perf/all_reduce_perf")
delay_line=$(realpath -m "$build/perf/delay_line")
if [[ -n $command_line ]]; then
  command_words[0]=$(realpath -m "${command_words[0]}")
  [[ -x ${command_words[0]} ]] || fail "-x: ${command_words[0]} is not an executable"
else
  [[ -x $binary ]] || fail "$binary is missing; run ./cmake/build.sh"
fi
if ((delays)) && [[ ! -x $delay_line ]]; then
  fail "$delay_line (for the RTT) is missing; run ./cmake/build.sh"
fi
tools=(ip tc ping)
((delays)) && tools+=(iptables)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || fail "no $tool here; ./cmake/install_deps.sh installs it"
done
mkdir -p "$out"
out=$(realpath "$out")
png=${png:-$out/emulated_cluster.png}

prefix=tc$$
switch=$prefix-sw
# With -S cpu: the straggler's ranks run in this cgroup (v2 cpu.max, or v1's CFS quota).
cgroup=
pids=()
delay_pid=
holder=
# Ends a process this script started: SIGTERM, then SIGKILL after 5 s.
end_process() {
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
cleanup() {
  for pid in "${pids[@]}" $delay_pid $holder; do end_process "$pid"; done
  for ((i = 0; i < nodes; ++i)); do ip netns del "$prefix-n$i" 2>/dev/null || true; done
  ip netns del "$switch" 2>/dev/null || true
  [[ -n $cgroup ]] && rmdir "$cgroup" 2>/dev/null || true
}
trap cleanup EXIT
trap 'echo "emulated_cluster.sh: interrupted, cleaning up" >&2; exit 130' INT TERM

address() { echo "10.213.0.$((10 + $1))"; }

# The switch and the nodes; deleting a namespace deletes the veth ends and the qdiscs and
# iptables rules inside it.
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
  # TCP buffers of a host tuned for long fat links: a 4 MiB send buffer (the default maximum)
  # holds 33 ms at 1 Gbit/s, less than a 50 ms round trip needs.
  ip netns exec "$ns" sysctl -qw net.ipv4.tcp_wmem="4096 16384 33554432" \
    net.ipv4.tcp_rmem="4096 131072 33554432"
done

# The straggler's CPU share (-S cpu:FRACTION): a cgroup whose CFS quota is FRACTION of a
# 100 ms period, through cgroup v2's cpu.max where the unified hierarchy has the cpu controller,
# else v1's cpu controller.
if [[ -n $straggler_cpu ]]; then
  quota_us=$(awk -v f="$straggler_cpu" 'BEGIN { printf "%.0f", f * 100000 }')
  if grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    cgroup=/sys/fs/cgroup/$prefix-straggler
    mkdir "$cgroup" && echo "$quota_us 100000" >"$cgroup/cpu.max" ||
      fail "-S cpu: cannot make the cgroup $cgroup"
  elif [[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
    cgroup=/sys/fs/cgroup/cpu/$prefix-straggler
    mkdir "$cgroup" && echo 100000 >"$cgroup/cpu.cfs_period_us" &&
      echo "$quota_us" >"$cgroup/cpu.cfs_quota_us" || fail "-S cpu: cannot make the cgroup $cgroup"
  else
    fail "-S cpu: no cgroup cpu controller here (neither v2's cpu.max nor v1's cpu.cfs_quota_us)"
  fi
  echo "  straggler: node $((nodes - 1))'s ranks get $straggler_cpu of a core ($cgroup)" >&2
fi
[[ -n $straggler_rate ]] && echo "  straggler: node $((nodes - 1))'s link runs at $straggler_rate" >&2

# Each node's link: RATE each way. A token bucket of 1 ms at the rate (64 KiB to 512 KiB: at
# least one TCP segmentation burst) keeps TCP's bursts from exceeding the rate by much, and a
# small allreduce from passing inside one burst; TCP still reaches the rate (955-957 Mbit/s per
# flow at 1 Gbit/s, every node sending at once). Figures in perf/RESULTS.md before 2026-11-26
# were measured with 4 ms buckets.
limit_links() {
  local rate=$1 burst
  burst=$(awk -v bps="$(rate_bps "$rate")" \
    'BEGIN { b = bps / 8 * 0.001; if (b < 65536) b = 65536; if (b > 524288) b = 524288; printf "%.0f", b }')
  for ((i = 0; i < nodes; ++i)); do
    for side in "$prefix-n$i eth0" "$switch p$i"; do
      read -r ns dev <<<"$side"
      local node_rate=$rate node_burst=$burst
      if [[ -n $straggler_rate ]] && ((i == nodes - 1)); then
        node_rate=$straggler_rate
        node_burst=$(awk -v bps="$(rate_bps "$node_rate")" \
          'BEGIN { b = bps / 8 * 0.001; if (b < 65536) b = 65536; if (b > 524288) b = 524288; printf "%.0f", b }')
      fi
      ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$node_rate" \
        burst "$node_burst" latency 100ms
    done
  done
}

# The RTT. This machine's kernel has no `tc netem` (CONFIG_NET_SCH_NETEM is off: "Specified qdisc
# kind is unknown"), so the switch holds each IPv4 frame it forwards in user space: iptables
# queues every bridged frame (net.bridge.bridge-nf-call-iptables, set in the switch's namespace
# only) to perf/delay_line, which lets each go a fixed time after it arrived, in order. The delay
# sits between the sender's and the receiver's token buckets, as a long wire would, and in the
# switch, not in the sender's own stack, where holding packets would throttle TCP (TCP small
# queues). With no delay_line listening, queued frames are dropped, never let through undelayed.
# The time held is half of RTT less what a ping takes through the queue with no delay (veth,
# bridge and the trip through user space, 0.1-0.2 ms here), so that ping shows the RTT asked for;
# an RTT below that floor gets the floor.
stop_delay() {
  [[ -n $delay_pid ]] || return 0
  ip netns exec "$switch" iptables -w -D FORWARD -j NFQUEUE --queue-num 0
  end_process "$delay_pid"
  delay_pid=
}
start_delay() {
  local one_way_us=$1 log=$2
  ip netns exec "$switch" sysctl -qw net.bridge.bridge-nf-call-iptables=1
  rm -f "$log"  # a log of an earlier run would read as this one's start (the child truncates it late)
  ip netns exec "$switch" "$delay_line" 0 "$one_way_us" >"$log" 2>&1 &
  delay_pid=$!
  for _ in $(seq 300); do  # up to 30 s: `ip netns exec` alone can take seconds on a busy machine
    grep -qs "^delay_line: queue 0, " "$log" && break
    kill -0 "$delay_pid" 2>/dev/null || fail "delay_line did not start; see $log"
    sleep 0.1
  done
  grep -q "^delay_line: queue 0, " "$log" || fail "delay_line did not start; see $log"
  ip netns exec "$switch" iptables -w -A FORWARD -j NFQUEUE --queue-num 0
}
# min avg max of 10 pings from node 0 to node 1 (ms), after one that resolves the address.
ping_ms() {
  ip netns exec "$prefix-n0" ping -c 1 -W 5 "$(address 1)" >/dev/null
  # rtt min/avg/max/mdev = 10.100/10.163/10.243/0.048 ms
  ip netns exec "$prefix-n0" ping -c 10 -i 0.05 -q "$(address 1)" | tail -1 |
    sed 's/.*= //; s/ ms//; s#/# #g' | cut -d' ' -f1-3
}
set_rtt() {
  local rtt_us=$1 tag=$2 floor_ms one_way_us
  stop_delay
  awk -v u="$rtt_us" 'BEGIN { exit !(u == 0) }' && return 0
  start_delay 0 "$out/delay_line_${tag}_floor.log"
  read -r _ floor_ms _ <<<"$(ping_ms)"
  stop_delay
  one_way_us=$(awk -v u="$rtt_us" -v f="$floor_ms" \
    'BEGIN { d = (u - f * 1000) / 2; printf "%.1f", (d > 0 ? d : 0) }')
  echo "  RTT $rtt: $floor_ms ms through the switch's queue alone; it holds frames $one_way_us us" >&2
  start_delay "$one_way_us" "$out/delay_line_$tag.log"
}

# What the link does now: ping RTT node 0 to node 1 (after one ping that resolves the address), a
# TCP transfer of about 1.5 s at the rate from node 0 to node 1 alone, and the same from every
# node to the next at once (a ring's steps: what this machine's cores sustain for all the nodes'
# TCP stacks, the switch and the delay line together). Writes link_TAG.json; prints half the
# average ping RTT in microseconds, the one-way latency the ranks are told.
check_link() {
  local rate=$1 rtt=$2 tag=$3 bytes transfer ring ping_min ping_avg ping_max ring_nodes=()
  read -r ping_min ping_avg ping_max <<<"$(ping_ms)"
  bytes=$(awk -v bps="$(rate_bps "$rate")" \
    'BEGIN { b = bps / 8 * 1.5; if (b > 536870912) b = 536870912; printf "%.0f", b }')
  # (`set -e` does not reach into the $(...) this runs in: each failure returns by itself.)
  transfer=$(python3 perf/link_check.py "$prefix-n0" "$prefix-n1" "$(address 1)" "$bytes") ||
    return 1
  for ((i = 0; i < nodes; ++i)); do ring_nodes+=("$prefix-n$i:$(address "$i")"); done
  ring=$(python3 perf/link_check.py --ring "${ring_nodes[@]}" "$bytes") || return 1
  printf '{"rate": "%s", "rtt": "%s", "ping_ms": {"min": %s, "avg": %s, "max": %s}, "tcp": %s, "tcp_ring": %s}\n' \
    "$rate" "$rtt" "$ping_min" "$ping_avg" "$ping_max" "$transfer" "$ring" >"$out/link_$tag.json"
  echo "  link $rate, RTT $rtt: ping $ping_min/$ping_avg/$ping_max ms (min/avg/max), TCP $transfer; every node at once: $ring" >&2
  awk -v ms="$ping_avg" 'BEGIN { printf "%.0f", ms * 1000 / 2 }'
}

# One all_reduce_perf run. The rendezvous ports (MASTER_PORT, and the next one, where terse's
# perf binaries put the bootstrap root) are held by perf/hold_ports.py inside node 0's namespace
# from before the ranks start until they end, so no other socket can take them in between (a
# port drawn at random and merely hoped free could be); the ranks' own sockets are the only
# others in that namespace.
run_codec() {
  local rate=$1 rtt=$2 codec=$3 json=$4 latency_us=$5 port link=()
  coproc PORTS { exec ip netns exec "$prefix-n0" python3 perf/hold_ports.py 2 "$(address 0)"; }
  holder=$PORTS_PID
  read -r port <&"${PORTS[0]}" || fail "hold_ports.py gave no port"
  # veth reports a fixed 10000 Mb/s in /sys/class/net/*/speed and refuses `ethtool -s ... speed`
  # ("Operation not supported"), so the topology layer cannot see tc's limit: each rank is told
  # the link instead (unless -P).
  if ((inform == 1)); then
    link=(TERSE_NET_GBPS="$(awk -v bps="$(rate_bps "$rate")" 'BEGIN { print bps / 1e9 }')"
          TERSE_NET_LATENCY_US="$latency_us")
  elif ((inform == 2)); then
    link=(TERSE_NET_GBPS="$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["tcp_ring"]["min_mbit"] / 1000)' "$out/link_${rate}_$rtt.json")"
          TERSE_NET_LATENCY_US="$latency_us")
  fi
  if [[ $codec == "${codecs%% *}" ]]; then
    echo "  ranks told: ${link[*]:-nothing (-P)}${extra_env[*]:+; ${extra_env[*]}}; rendezvous $(address 0):$port" >&2
  fi
  # What each node runs: all_reduce_perf, or -x's command with {out} filled in and the codec
  # in TERSE_CODEC.
  local program=("$binary" "${sweep[@]}" -n "$iters" -w "$warmup" -Z "$codec" -J "$json")
  local codec_env=()
  if [[ -n $command_line ]]; then
    program=("${command_words[@]//\{out\}/${json%.json}}")
    codec_env=(TERSE_CODEC="$codec")
  fi
  pids=()
  for ((i = 0; i < nodes; ++i)); do
    # The straggler's ranks join its cgroup before they start: a shell moves itself, then
    # becomes `ip netns exec` (inside the namespace, /sys is remounted without the cgroups).
    local confine=()
    if [[ -n $cgroup ]] && ((i == nodes - 1)); then
      confine=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cgroup")
    fi
    "${confine[@]}" ip netns exec "$prefix-n$i" env RANK=$i LOCAL_RANK=0 WORLD_SIZE="$nodes" \
      LOCAL_WORLD_SIZE=1 MASTER_ADDR="$(address 0)" MASTER_PORT="$port" TERSE_HOSTID="node$i" \
      TERSE_SOCKET_IFNAME=eth0 UCX_TLS=tcp UCX_NET_DEVICES=eth0 TERSE_TIMEOUT_S=300 \
      OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" "${link[@]}" "${codec_env[@]}" \
      "${extra_env[@]}" "${program[@]}" >"${json%.json}.rank$i.log" 2>&1 &
    pids+=($!)
  done
  local status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  pids=()
  kill "$holder" 2>/dev/null || true
  wait "$holder" 2>/dev/null || true
  holder=
  if [[ $status -ne 0 ]]; then
    echo "emulated_cluster.sh: $codec at $rate, RTT $rtt failed ($status); see ${json%.json}.rank*.log" >&2
    return $status
  fi
  if [[ -n $command_line ]]; then
    tail -n 20 "${json%.json}.rank0.log" | sed "s/^/  $rate $rtt $codec: /"
  else
    grep -E '^ +[0-9]+ ' "${json%.json}.rank0.log" | sed "s/^/  $rate $rtt $codec: /"
  fi
}

files=()
for rate in $rates; do
  limit_links "$rate"
  for rtt in $rtts; do
    tag=${rate}_$rtt
    us=$(rtt_us "$rtt")
    set_rtt "$us" "$tag"
    latency_us=$(check_link "$rate" "$rtt" "$tag") || fail "the link check of $rate, RTT $rtt failed"
    files+=("$out/link_$tag.json")
    for codec in $codecs; do
      json=$out/${tag}_${codec%%:*}.json
      run_codec "$rate" "$rtt" "$codec" "$json" "$latency_us"
      files+=("$json")
    done
  done
done
stop_delay
[[ -n $command_line ]] && exit 0  # -x: the command's own output is the result

python3 perf/emulated_cluster_table.py "${files[@]}" | tee "$out/table.md"
[[ -z ${codecs// /} ]] && exit 0  # -c "": the links only
perf/plot "$png" "${files[@]}" || echo "emulated_cluster.sh: no chart (perf/plot failed)" >&2
