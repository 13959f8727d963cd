#!/usr/bin/env bash
# The long fuzzing campaign (issue 10): every decoder target for 10^7 executions, starting from
# its committed seed corpus, under ASan + UBSan (tests/fuzz/README.md). Prints a markdown table
# of executions, exec/s, crashes and the corpus each target ended with, after a line saying
# when, on what and with which command it ran (the section perf/RESULTS.md keeps); the same
# goes to build-fuzz/fuzz-campaign.md. Exits 1 when any target crashed.
#
#   perf/fuzz_campaign.sh [--runs N] [--parallel P] [targets...]
#
# Defaults: --runs 10000000, --parallel 2 (one process per target, P targets at a time),
# targets fuzz_decode_*. On 2 cores, about 2 minutes per target for the fast decoders. Runs
# under nohup survive the terminal:
#   nohup perf/fuzz_campaign.sh > fuzz-campaign.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."

runs=10000000
parallel=2
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --parallel) parallel="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz_campaign.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=('fuzz_decode_*')

build_dir="${TERSE_FUZZ_BUILD_DIR:-build-fuzz}"
report="$build_dir/fuzz-campaign.md"
command="perf/fuzz_campaign.sh --runs $runs --parallel $parallel ${targets[*]}"
started=$(date -u +%Y-%m-%dT%H:%MZ)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)  # what the build is of
start_s=$(date +%s)
status=0
table=$(tests/fuzz/run_fuzzers.sh --runs "$runs" --parallel "$parallel" --markdown \
          "${targets[@]}") || status=$?
minutes=$(( ($(date +%s) - start_s + 59) / 60 ))

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
compiler=$(clang++ --version | head -1)
mkdir -p "$build_dir"
{
  echo "Started $started, $minutes min; commit $commit (plus the working tree); \`$command\`;"
  echo "$(nproc) cores ($cpu), $compiler, -O2 with -fsanitize=fuzzer,address,undefined."
  echo
  echo "$table" | sed -n '/^|/p'
} | tee "$report"
if [ "$status" -ne 0 ]; then
  echo
  echo "$table" | sed '/^|/d'
  echo "fuzz_campaign.sh: run_fuzzers.sh failed (exit $status): a crash (reproducers in $build_dir/fuzz-work/*/artifacts) or the build" >&2
fi
exit "$status"
