#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs a 4-rank allreduce sweep on this
# machine (all_reduce_perf, nccl-tests' table; four processes launched torchrun style by
# perf/launch.sh, talking over UCX). Arguments replace the default sweep, e.g.
#   ./perf/run.sh -b 1M -e 64M -f 4 -d bfloat16
# RANKS=2 ./perf/run.sh runs another rank count.
set -euo pipefail
cd "$(dirname "$0")/.."
./cmake/build.sh
ranks=${RANKS:-4}
if [[ $# -eq 0 ]]; then
  set -- -b 8 -e 256M -f 2 -n 20 -w 5
fi
exec ./perf/launch.sh "$ranks" ./build/perf/all_reduce_perf "$@"
