#!/usr/bin/env bash
# The soak (perf/README.md, "Soak"): 100,000 compressed allreduces over mixed codecs and tensor
# names on 4 processes of this machine, every result checked, and whether each process's RSS,
# heap in use, threads, open descriptors and residual memory stay flat after the warm-up (growth
# under 5% from the first checkpoint after 20% of the calls to the last). Builds what is missing
# first, as perf/run.sh does; prints allreduce_soak's table (perf/soak.cpp) and exits with its code:
# 0 flat and right, 4 growth, 3 a wrong result.
#
#   perf/soak.sh [--calls N] [--ranks R] [other allreduce_soak flags: --warmup F, --max-growth P,
#                 --rss-slack-kb K, --memory-cap BYTES, --idle-steps S, --progress LINES, --csv DIR]
#
# BUILD_DIR=build-soak perf/soak.sh runs the allreduce_soak of an existing build directory
# instead of building build/.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
if [[ -z "${BUILD_DIR:-}" ]]; then
  ./cmake/build.sh
fi
soak="$build/perf/allreduce_soak"
if [[ ! -x "$soak" ]]; then
  echo "soak.sh: $soak is missing (build the allreduce_soak target of $build)" >&2
  exit 2
fi
# Loopback unless the caller chose an interface; a hang fails a rank instead of the run.
export TERSE_SOCKET_IFNAME=${TERSE_SOCKET_IFNAME:-lo}
export TERSE_SOCKET_FAMILY=${TERSE_SOCKET_FAMILY:-AF_INET}
export TERSE_TIMEOUT_S=${TERSE_TIMEOUT_S:-60}
unset TERSE_COMM_ID NCCL_COMM_ID
echo "# perf/soak.sh $* ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $soak)"
exec "$soak" "$@"
