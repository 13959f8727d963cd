#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs a 4-rank allreduce sweep on this
# machine three times side by side: uncompressed, int8 and top-k 1% (all_reduce_perf, nccl-tests'
# table plus the codec, ratio and rel_err columns; four processes launched torchrun style by
# perf/launch.sh, talking over UCX), then a summary of the time and the bytes each codec saved
# (perf/main_job_summary.py).
#
# Arguments replace the default sweep and run it once, uncompressed unless -Z is among them:
#   ./perf/run.sh -b 1M -e 64M -f 4 -d bfloat16 -Z int4
# RANKS=2 ./perf/run.sh runs another rank count.
set -euo pipefail
cd "$(dirname "$0")/.."
./cmake/build.sh
ranks=${RANKS:-4}
if [[ $# -gt 0 ]]; then
  exec ./perf/launch.sh "$ranks" ./build/perf/all_reduce_perf "$@"
fi
out=build/main_job
mkdir -p "$out"
sweep=(-b 64K -e 64M -f 4 -n 10 -w 3)
json=()
for codec in none int8 topk:ratio=0.01; do
  name=${codec%%:*}
  echo "### all_reduce_perf, $ranks ranks, codec $codec"
  ./perf/launch.sh "$ranks" ./build/perf/all_reduce_perf "${sweep[@]}" -Z "$codec" \
    -J "$out/$name.json"
  json+=("$out/$name.json")
  echo
done
python3 perf/main_job_summary.py "${json[@]}"
