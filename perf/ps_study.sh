#!/usr/bin/env bash
# Parameter-server mode against allreduce (issue 15): train_fmnist with --sync allreduce,
# downpour, easgd and ssp:2, the same model, ranks, epochs and seed, twice: on this machine's
# loopback (accuracy after the same epochs) and on the emulated cluster with one straggler node
# (time to accuracy). Writes one JSON per run, a table (perf/ps_study_table.py) and two charts
# (perf/plot --ps-study: accuracy_vs_epoch.png, accuracy_vs_time.png).
#
#   perf/ps_study.sh [-e EPOCHS] [-r RANKS] [-s SEED] [-S STRAGGLER] [-R RATE] [-B BUILDDIR]
#                    [-o OUTDIR] [-k "SCHEME ..."] [-p SPLIT_BYTES] [-L] [-C]
#
# Defaults: 3 epochs, 4 ranks, seed 1, straggler cpu:0.25 (emulated_cluster.sh -S; -S none for
# a cluster without one), links 1gbit,
# build/, output in perf/results/ps_study/; -k runs only the named schemes (allreduce downpour
# easgd ssp:2); -L skips the loopback runs, -C the cluster runs (which need root and network
# namespaces: emulated_cluster.sh). Loopback runs are processes (perf/launch.sh; a parameter-
# server scheme needs one rank per process), LOOP/SCHEME.json; cluster runs one rank per node,
# CLUSTER/SCHEME/..., each holding /tmp/terse-cluster.lock. The load (uptime) before each run
# goes into OUTDIR/load.txt. Every run gets TERSE_PS_SPLIT_BYTES=256K (-p to change it), so that
# the MLP's fc1.weight (784 KiB) is split over the ranks rather than served by one: whole, its
# owner's link carries every rank's push and fetch of it each step.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

epochs=3
ranks=4
seed=1
straggler=cpu:0.25
rate=1gbit
split=256K
build=build
out=perf/results/ps_study
schemes="allreduce downpour easgd ssp:2"
loopback=1
cluster=1
while getopts "e:r:s:S:R:B:o:k:p:LCh" flag; do
  case $flag in
    e) epochs=$OPTARG ;;
    r) ranks=$OPTARG ;;
    s) seed=$OPTARG ;;
    S) straggler=$OPTARG ;;
    R) rate=$OPTARG ;;
    B) build=$OPTARG ;;
    o) out=$OPTARG ;;
    k) schemes=$OPTARG ;;
    p) split=$OPTARG ;;
    L) loopback=0 ;;
    C) cluster=0 ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
trainer=$build/perf/train_fmnist
[[ -x $trainer ]] || { echo "ps_study.sh: no $trainer (cmake --build $build --target train_fmnist)" >&2; exit 2; }
mkdir -p "$out"
load() { echo "$(date -u +%FT%TZ) $1: $(uptime)" >>"$out/load.txt"; }

straggler_flag=(-S "$straggler")
[[ $straggler == none ]] && straggler_flag=()
failed=()
for scheme in $schemes; do
  name=${scheme//:/_}
  if ((loopback)); then
    mkdir -p "$out/loop"
    load "loop $scheme"
    echo "== loopback $scheme"
    if ! TERSE_SOCKET_IFNAME=lo TERSE_SOCKET_FAMILY=AF_INET TERSE_PS_SPLIT_BYTES=$split \
      perf/launch.sh "$ranks" "$trainer" \
      --epochs "$epochs" --seed "$seed" --sync "$scheme" --json "$out/loop/$name.json" \
      >"$out/loop/$name.log" 2>&1; then
      failed+=("loop $scheme")
    fi
    grep '^epoch' "$out/loop/$name.log" || true
  fi
  if ((cluster)); then
    mkdir -p "$out/cluster/$name"
    echo "== cluster $scheme (-n $ranks -r $rate -S $straggler)"
    load "cluster $scheme"
    if ! flock /tmp/terse-cluster.lock perf/emulated_cluster.sh -n "$ranks" -r "$rate" \
      "${straggler_flag[@]}" -B "$build" -o "$out/cluster/$name" -e "TERSE_PS_SPLIT_BYTES=$split" \
      -x "$trainer --epochs $epochs --seed $seed --sync $scheme --json {out}.json" \
      >"$out/cluster/$name/cluster.log" 2>&1; then
      failed+=("cluster $scheme")
    fi
    grep -h '^epoch' "$out/cluster/$name"/*rank0.log || true
  fi
done
python3 perf/ps_study_table.py "$out" | tee "$out/table.md"
perf/plot --ps-study "$out" || echo "ps_study.sh: no charts (perf/plot needs matplotlib)" >&2
if ((${#failed[@]})); then
  echo "ps_study.sh: failed: ${failed[*]} (their logs are in $out)" >&2
  exit 1
fi
