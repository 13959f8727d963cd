#!/usr/bin/env bash
# Builds the fuzz targets (build-fuzz: clang, libFuzzer, ASan + UBSan, -O1, no CUDA) and runs
# each over a scratch copy of its committed seed corpus, so tests/fuzz/corpus is never modified.
#
#   tests/fuzz/run_fuzzers.sh [--runs N] [--seconds S] [--parallel P] [--markdown]
#                             [--no-build | --build-only] [--build-also T]... [targets...]
#
#   --runs N       stop each target after N executions (libFuzzer -runs)
#   --seconds S    stop each target after S seconds (-max_total_time); with --runs, whichever
#                  comes first. Neither: 30 seconds.
#   --parallel P   run P targets at a time (default 1; each target is one process)
#   --markdown     print the summary as a markdown table
#   --no-build     use the targets already in build-fuzz
#   --build-only   build, run nothing
#   --build-also T build target T of the same sanitized build too (tests/run.sh: codec_tests,
#                  so that the codecs are compiled with the sanitizers once, not twice)
#   targets        names or shell patterns (fuzz_decode_*); default: every target
#
# Prints, per target: executions, executions per second, crashes (crash, leak, timeout and
# out-of-memory reports) and the corpus it ended with; exits 1 when any target crashed, with
# its report and reproducer under build-fuzz/fuzz-work/<target>/ (re-run one with
# build-fuzz/tests/fuzz/<target> <reproducer>). TERSE_FUZZ_BUILD_DIR overrides build-fuzz.
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=""
seconds=""
parallel=1
markdown=0
build=1
build_only=0
also=()
patterns=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --parallel) parallel="$2"; shift 2 ;;
    --markdown) markdown=1; shift ;;
    --no-build) build=0; shift ;;
    --build-only) build_only=1; shift ;;
    --build-also) also+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run_fuzzers.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    *) patterns+=("$1"); shift ;;
  esac
done
[ -z "$runs" ] && [ -z "$seconds" ] && seconds=30

build_dir="${TERSE_FUZZ_BUILD_DIR:-build-fuzz}"
if [ "$build" = 1 ]; then
  mkdir -p "$build_dir"
  # -O1, as AddressSanitizer recommends: about half of -O2's compile time, and a run is bounded
  # by executions, not speed. The tests are configured (built only when asked: --build-also).
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DTERSE_FUZZ=ON -DTERSE_CUDA=OFF -DTERSE_BUILD_PERF=OFF -DTERSE_BUILD_TESTS=ON \
    >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log"; exit 1; }
  cmake --build "$build_dir" -j"$(nproc)" --target terse_fuzz_targets "${also[@]}" \
    >"$build_dir/build.log" 2>&1 || { tail -50 "$build_dir/build.log"; exit 1; }
fi
[ "$build_only" = 1 ] && exit 0
list="$build_dir/fuzz_targets.txt"
[ -f "$list" ] || { echo "run_fuzzers.sh: no $list (build with TERSE_FUZZ=ON first)" >&2; exit 1; }

# The targets asked for, in the list's order: name, binary, seed corpus, dictionary.
selected=()
while IFS=$'\t' read -r name binary corpus dict; do
  [ -n "$name" ] || continue
  if [ ${#patterns[@]} -eq 0 ]; then
    selected+=("$name")
    continue
  fi
  for pattern in "${patterns[@]}"; do
    # shellcheck disable=SC2053  # a pattern on purpose
    if [[ "$name" == $pattern ]]; then
      selected+=("$name")
      break
    fi
  done
done <"$list"
if [ ${#selected[@]} -eq 0 ]; then
  echo "run_fuzzers.sh: no target matches ${patterns[*]} (known: $(cut -f1 "$list" | tr '\n' ' '))" >&2
  exit 2
fi

work_root="$build_dir/fuzz-work"
mkdir -p "$work_root"

# Runs one target in $work_root/<name>/ and leaves key=value lines in its `result` file.
run_target() {
  local name="$1" binary corpus dict
  IFS=$'\t' read -r _ binary corpus dict < <(awk -F'\t' -v n="$name" '$1 == n' "$list")
  local work="$work_root/$name"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  if [ -d "$corpus" ]; then cp -R "$corpus"/. "$work/corpus/"; fi
  local options=(-print_final_stats=1 -timeout=25 -rss_limit_mb=2048
                 "-artifact_prefix=$work/artifacts/")
  [ -n "$runs" ] && options+=("-runs=$runs")
  [ -n "$seconds" ] && options+=("-max_total_time=$seconds")
  [ -n "$dict" ] && options+=("-dict=$dict")
  local start end status=0
  start=$(date +%s.%N)
  TERSE_DEBUG="${TERSE_DEBUG:-NONE}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
    "$binary" "${options[@]}" "$work/corpus" >"$work/log.txt" 2>&1 || status=$?
  end=$(date +%s.%N)
  local executions exec_per_s
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log.txt" | tail -1)
  if [ -z "$executions" ]; then
    # No final statistics (the process died): the last status line, "#<executions> ...".
    executions=$(grep -o '^#[0-9]*' "$work/log.txt" | tail -1 | tr -d '#')
    executions=${executions:-0}
  fi
  # From the wall clock, start-up included: libFuzzer's own figure counts whole seconds.
  exec_per_s=$(awk -v n="$executions" -v s="$start" -v e="$end" \
               'BEGIN { d = e - s; printf "%d", (d > 0 ? n / d : 0) }')
  local crashes
  crashes=$(find "$work/artifacts" -type f \
            \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  # A non-zero exit without a reproducer (the binary failed to start, say) is a failure too.
  if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi
  local files bytes
  files=$(find "$work/corpus" -type f | wc -l)
  bytes=$(find "$work/corpus" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
  {
    echo "executions=$executions"
    echo "exec_per_s=$exec_per_s"
    echo "crashes=$crashes"
    echo "corpus_files=$files"
    echo "corpus_bytes=$bytes"
    echo "seconds=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.0f", e - s }')"
    echo "status=$status"
  } >"$work/result"
}

what="${runs:+$runs runs}${runs:+${seconds:+ or }}${seconds:+$seconds s}"
echo "terse: fuzzing ${#selected[@]} targets for $what each, $parallel at a time (work: $work_root)"
running=0
for name in "${selected[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_target "$name" &
  running=$((running + 1))
done
wait || true

failed=0
if [ "$markdown" = 1 ]; then
  echo "| target | executions | exec/s | crashes | corpus (files) | corpus (KiB) | time (s) |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
else
  printf '%-24s %14s %10s %8s %14s %8s\n' target executions exec/s crashes "corpus files" "time s"
fi
for name in "${selected[@]}"; do
  result="$work_root/$name/result"
  if [ ! -f "$result" ]; then
    echo "run_fuzzers.sh: $name left no result" >&2
    failed=1
    continue
  fi
  # shellcheck disable=SC1090
  . "$result"
  if [ "$markdown" = 1 ]; then
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$executions" "$exec_per_s" \
      "$crashes" "$corpus_files" "$((corpus_bytes / 1024))" "$seconds"
  else
    printf '%-24s %14s %10s %8s %14s %8s\n' "$name" "$executions" "$exec_per_s" "$crashes" \
      "$corpus_files" "$seconds"
  fi
  [ "$crashes" -eq 0 ] || failed=1
done

if [ "$failed" -ne 0 ]; then
  for name in "${selected[@]}"; do
    result="$work_root/$name/result"
    [ -f "$result" ] || continue
    # shellcheck disable=SC1090
    . "$result"
    [ "$crashes" -eq 0 ] && continue
    echo
    echo "terse: $name failed; reproducers in $work_root/$name/artifacts:"
    ls "$work_root/$name/artifacts" >&2 || true
    echo "--- the end of $work_root/$name/log.txt:"
    tail -40 "$work_root/$name/log.txt"
  done
  exit 1
fi
