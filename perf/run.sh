#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs the codec benchmark on 16M fp32
# elements (every codec's ratio, error and single-thread throughput next to memcpy).
set -euo pipefail
cd "$(dirname "$0")/.."
./cmake/build.sh
./build/perf/codec_perf "$@"
