#!/usr/bin/env bash
# The planner against the emulated cluster (issue 11): is what it predicts what the cluster does,
# and does `auto` pick the fastest candidate?
#
# For each link rate and RTT it measures, on perf/emulated_cluster.sh's 4 nodes, every candidate
# the planner weighs for a flat allreduce, each forced in a run of its own:
#   none ring, none recursive_doubling   -Z auto:max_rel_err=0 (no codec's bound is 0, so auto
#                                        stays uncompressed, plans, and logs the prediction of
#                                        both dense algorithms) with TERSE_ALGO=allreduce:NAME
#   CODEC tree, recursive_doubling, sra  -Z CODEC with TERSE_COMPRESSED_ALGO=NAME (the JSON's
#                                        predicted_us is the prediction of that algorithm)
#   auto                                 -Z auto, the planner's own choice
# every run with TERSE_DEBUG=INFO (each tensor's plan with every candidate's prediction, in the
# rank logs). Each run is one size on one link in a process of its own (codec speeds are probed
# once per process, so each size is planned with speeds probed under its own run's load; terse
# would log each size's plan of a sweep too), and the candidates of one link and size run one
# after another, so that they see about the same load on this shared machine.
# perf/planner_check_table.py then prints, per (rate, RTT, size), each candidate's measured and
# predicted time and their ratio (goal: within 2x), what auto chose and its time against the best
# measured candidate that auto may choose (goal: within 10%).
#
#   sudo perf/planner_check.sh [-r "1gbit 10gbit"] [-l "0.1ms 10ms"] [-s "256K 4M 64M"] [-i 3]
#        [-w 20] [-c "int8"] [-B build-check] [-o OUTDIR] [-M] [-N]
#
# -w: untimed calls before the timed ones (20: what the planner needs to learn a link and settle,
# planner.h, Learning); -N: TERSE_PLANNER_LEARN=off, the nominal figures only (the table before
# learning).
# -M: the ranks are told the rate every node reaches sending to the next at once (emulated_cluster.sh
# -M) instead of the rate asked. Defaults as above (fp32; -i timed iterations); -c the codecs forced with each compressed
# algorithm; output in BUILDDIR/planner_check/ (CANDIDATE/RATE_RTT_SIZE/ with emulated_cluster.sh's
# files; load.log with uptime and the namespaces present at each run; table.md). Each
# emulated_cluster.sh run holds the shared cluster's lock (/tmp/terse-cluster.lock, or LOCK)
# while it runs. Measured time: the mean over ranks (all_reduce_perf -a 1) of the out-of-place
# and in-place halves, 2 x ITERS calls.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

rates="1gbit 10gbit"
rtts="0.1ms 10ms"
sizes="256K 4M 64M"
iters=3
warmup=20
learn=()
codecs=int8
build="build-check"
out=
told=()
while getopts "r:l:s:i:w:c:B:o:MNh" flag; do
  case $flag in
    r) rates=$OPTARG ;;
    l) rtts=$OPTARG ;;
    s) sizes=$OPTARG ;;
    i) iters=$OPTARG ;;
    w) warmup=$OPTARG ;;
    N) learn=(TERSE_PLANNER_LEARN=off) ;;
    c) codecs=$OPTARG ;;
    B) build=$OPTARG ;;
    o) out=$OPTARG ;;
    M) told=(-M) ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
out=${out:-$build/planner_check}
lock=${LOCK:-/tmp/terse-cluster.lock}
read -ra size_list <<<"$sizes"
mkdir -p "$out"
out=$(realpath "$out")
: >"$out/load.log"
names=(none_ring none_recursive_doubling)
for codec in $codecs; do
  for algorithm in tree recursive_doubling sra; do names+=("${codec%%:*}_$algorithm"); done
done
names+=(auto)
for name in "${names[@]}"; do rm -rf "${out:?}/$name"; done  # an earlier check's files

# Run under the lock: notes the time, load and namespaces (others' runs show as tc<pid>-*) in $0,
# then runs "$@".
# shellcheck disable=SC2016
under_lock='echo "  $(date -u +%T) lock held; $(uptime);'\
' namespaces: $(ip netns list | cut -d" " -f1 | tr "\n" " ")" >>"$0"; exec "$@"'
# One candidate on one link at one size: NAME RATE RTT SIZE CODEC ENV... writes
# $out/NAME/RATE_RTT_SIZE/ (emulated_cluster.sh's files) and its log beside it.
candidate() {
  local name=$1 rate=$2 rtt=$3 size=$4 codec=$5
  shift 5
  local env=("TERSE_DEBUG=INFO" "${learn[@]}" "$@") dir=$out/$name/${rate}_${rtt}_$size
  echo "planner_check.sh: $name, $rate, RTT $rtt, $size" >&2
  mkdir -p "$(dirname "$dir")"
  echo "== $name $rate $rtt $size: -c $codec -e \"${env[*]}\"" >>"$out/load.log"
  flock "$lock" bash -c "$under_lock" "$out/load.log" \
    perf/emulated_cluster.sh -B "$build" -r "$rate" -l "$rtt" -s "$size" -i "$iters" -w "$warmup" \
    -c "$codec" -e "${env[*]}" "${told[@]}" -o "$dir" -p "$dir/chart.png" >"$dir.log" 2>&1 || {
    echo "planner_check.sh: $name failed; see $dir.log" >&2
    tail -5 "$dir.log" >&2
    return 1
  }
}

start=$(date +%s)
for rate in $rates; do
  for rtt in $rtts; do
    for size in "${size_list[@]}"; do
      link=("$rate" "$rtt" "$size")
      candidate none_ring "${link[@]}" auto:max_rel_err=0 TERSE_ALGO=allreduce:ring
      candidate none_recursive_doubling "${link[@]}" auto:max_rel_err=0 \
        TERSE_ALGO=allreduce:recursive_doubling
      for codec in $codecs; do
        for algorithm in tree recursive_doubling sra; do
          candidate "${codec%%:*}_$algorithm" "${link[@]}" "$codec" TERSE_COMPRESSED_ALGO=$algorithm
        done
      done
      candidate auto "${link[@]}" auto
    done
  done
done
echo "== done $(date -u +%FT%TZ), $(($(date +%s) - start)) s; $(uptime)" >>"$out/load.log"

python3 perf/planner_check_table.py "$out" | tee "$out/table.md"
