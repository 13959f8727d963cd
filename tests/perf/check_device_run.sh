#!/usr/bin/env bash
# A perf run with device buffers (-B device or managed) against the fake CUDA runtime: CHECKER
# (check_perf_run.sh or check_compressed_run.sh with its arguments and the command) runs with the
# fake first on LD_LIBRARY_PATH and must pass, and the "# Using devices" block must name the
# fake's GPU (its bus id 0000:fa:ce.0) for every one of NRANKS ranks and host memory for none.
# So a run on the real runtime (no device here: -B device is refused) or on host buffers fails.
#
#   check_device_run.sh FAKE_CUDART_DIR NRANKS CHECKER [ARGS...]
set -uo pipefail

fake_dir=$1
nranks=$2
shift 2
output=$(LD_LIBRARY_PATH="$fake_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@" 2>&1)
code=$?
printf '%s\n' "$output"
fail() {
  echo "check_device_run.sh: $*" >&2
  exit 1
}
[[ $code -eq 0 ]] || fail "the run failed its checks"
on_fake=$(grep -cE '^#  Rank +[0-9]+ Group +0 Pid +[0-9]+ on +[^ ]+ device +0 \[0000:fa:ce\.0\] fake CUDA device' <<<"$output")
[[ $on_fake -eq $nranks ]] || fail "$on_fake device lines name the fake GPU, expected $nranks"
! grep -q '^#  Rank .*host memory' <<<"$output" || fail "a rank reports host memory"
echo "check_device_run.sh: $nranks ranks on the fake GPU"
