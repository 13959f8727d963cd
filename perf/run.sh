#!/usr/bin/env bash
# The main job: installs what is missing, builds (./cmake/build.sh, in build/), and shows where
# terse pays. Where it can (root or passwordless sudo, and network namespaces work: probed with a
# throwaway namespace and token bucket), it runs a 4-node cluster emulated on this machine
# (perf/emulated_cluster.sh: one rank per network namespace, 1 Gbit/s links, UCX over TCP) with
# uncompressed, auto, int8, top-k 1% and PowerSGD rank 4 side by side, 1 MiB to 64 MiB fp32, then
# a table per codec at 64 MiB (time, speed-up over uncompressed, wire ratio, time in the codecs,
# rel_err, #wrong), the time and speed-up at every size and the bytes each codec saved
# (perf/main_job_summary.py), and a PNG chart. Where it cannot, it says why in one line and runs
# the shared-memory sweep instead: 4 processes on this machine, 64 KiB to 64 MiB, uncompressed,
# auto, int8 and top-k 1% (where the link is memory, compression costs more CPU than it saves,
# and auto should not compress).
#
#   ./perf/run.sh                    # the cluster if it can, else the shared-memory sweep
#   MAIN_JOB=local ./perf/run.sh     # the shared-memory sweep even where the cluster could run
#
# Arguments replace the default sweep and run it once on this machine, uncompressed unless -Z
# is among them:
#   ./perf/run.sh -b 1M -e 64M -f 4 -d bfloat16 -Z int4
# RANKS=2 ./perf/run.sh runs another rank count (arguments and the shared-memory sweep).
set -euo pipefail
cd "$(dirname "$0")/.."
./cmake/build.sh
ranks=${RANKS:-4}
if [[ $# -gt 0 ]]; then
  exec ./perf/launch.sh "$ranks" ./build/perf/all_reduce_perf "$@"
fi
out=build/main_job
mkdir -p "$out"

# Whether the emulated cluster can run here; if not, why not (one line, in $why).
sudo=()
why=
cluster_possible() {
  if [[ ${MAIN_JOB:-} == local ]]; then
    why="MAIN_JOB=local asks for it"
    return 1
  fi
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
      why="it is not root and has no passwordless sudo"
      return 1
    fi
    sudo=(sudo -n)
  fi
  local probe=terse-probe-$$ error
  if ! error=$("${sudo[@]}" ip netns add "$probe" 2>&1); then
    why="network namespaces do not work here (ip netns add: ${error//$'\n'/ })"
    return 1
  fi
  if ! error=$("${sudo[@]}" ip netns exec "$probe" tc qdisc add dev lo root tbf rate 1gbit \
                 burst 512kb latency 100ms 2>&1); then
    "${sudo[@]}" ip netns del "$probe"
    why="tc's token bucket does not work here (tc qdisc add ... tbf: ${error//$'\n'/ })"
    return 1
  fi
  "${sudo[@]}" ip netns del "$probe"
}

if cluster_possible; then
  echo "### 4 emulated nodes behind 1 Gbit/s links (perf/emulated_cluster.sh), 1 MiB to 64 MiB fp32"
  codecs="none auto int8 topk:ratio=0.01 powersgd:rank=4"
  "${sudo[@]}" ./perf/emulated_cluster.sh -n 4 -r 1gbit -c "$codecs" -s 1M:64M:8 -i 5 \
    -o "$out/cluster" -p "$out/cluster/main_job.png" -B build
  json=()
  for codec in $codecs; do json+=("$out/cluster/1gbit_0_${codec%%:*}.json"); done
  echo
  python3 perf/main_job_summary.py "${json[@]}"
  echo
  echo "chart: $out/cluster/main_job.png; JSON, logs and table.md: $out/cluster/"
  exit 0
fi

echo "perf/run.sh: no emulated cluster because $why; running the shared-memory sweep on this" \
     "machine instead (as root, with network namespaces, ./perf/run.sh runs 4 nodes at 1 Gbit/s)"
sweep=(-b 64K -e 64M -f 4 -n 10 -w 3)
json=()
for codec in none auto int8 topk:ratio=0.01; do
  name=${codec%%:*}
  echo "### all_reduce_perf, $ranks ranks, codec $codec"
  ./perf/launch.sh "$ranks" ./build/perf/all_reduce_perf "${sweep[@]}" -Z "$codec" \
    -J "$out/$name.json"
  json+=("$out/$name.json")
  echo
done
python3 perf/main_job_summary.py "${json[@]}"
perf/plot "$out/main_job.png" "${json[@]}" >/dev/null 2>&1 &&
  echo "chart: $out/main_job.png" || echo "perf/run.sh: no chart (perf/plot failed)"
