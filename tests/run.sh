#!/usr/bin/env bash
# The test command: installs what is missing, builds, checks the codecs' speed against a pinned
# baseline, runs the codec tests once more under
# AddressSanitizer/UBSan (decoders must never read or write out of bounds, whatever arrives) and
# the fuzz targets briefly, then the whole suite with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's time, printed as it ends and summed up at the end.
started=$SECONDS
stage_started=$SECONDS
stage_times=()
stage_done() {
  stage_times+=("$1: $((SECONDS - stage_started)) s")
  echo "terse: $1 took $((SECONDS - stage_started)) s"
  stage_started=$SECONDS
}
trap 'echo "terse: stage times: ${stage_times[*]:-none}; total $((SECONDS - started)) s"' EXIT

# The CUDA kernels as compute_90 PTX only: the test command proves they compile through NVVM
# (and the fake runtime runs the device paths) without ptxas's machine code for a GPU this machine
# does not have (40% of nvcc's time). A library for GPUs keeps cmake/build.sh's default list, and
# perf/gpu_check.sh builds the machine code of the GPU it runs on.
./cmake/build.sh -DCMAKE_CUDA_ARCHITECTURES=90-virtual
stage_done "packages and the build (cmake/build.sh)"

# Every codec's speed against its pinned baseline (perf/codec_check.py, ratios to memcpy in the
# same runs), while nothing else runs: a codec that got 30% slower fails the command.
python3 perf/codec_check.py --build build --quick
stage_done "codec speeds against perf/codec_baseline.csv"

# One sanitized build (build-fuzz: clang, AddressSanitizer, UBSan and libFuzzer's coverage, -O1,
# tests/fuzz/README.md) for two checks, so that the codecs are compiled with the sanitizers once:
# the codec tests once more (decoders must never read or write out of bounds, whatever arrives),
# then a short run of every libFuzzer target over its seed corpus. Any report fails the command.
tests/fuzz/run_fuzzers.sh --build-only --build-also codec_tests
stage_done "sanitized build of the codec tests and fuzz targets (clang)"

echo "terse: codec tests under AddressSanitizer and UBSan, in $((2 * $(nproc))) shards"
# Twice as many shards as cores: the slow tests bunch together, and more shards even them out.
shards=$((2 * $(nproc)))
for ((shard = 0; shard < shards; ++shard)); do
  TERSE_DEBUG=NONE ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard \
    ./build-fuzz/tests/codec_tests --gtest_brief=1 >"build-fuzz/codec_tests.$shard.log" 2>&1 &
done
failed_shards=0
for ((shard = 0; shard < shards; ++shard)); do wait -n || failed_shards=$((failed_shards + 1)); done
for ((shard = 0; shard < shards; ++shard)); do
  grep -E '^\[ +(PASSED|SKIPPED|FAILED) +\]|tests? from .* ran' "build-fuzz/codec_tests.$shard.log" || true
done
if [ "$failed_shards" -ne 0 ]; then
  for ((shard = 0; shard < shards; ++shard)); do tail -100 "build-fuzz/codec_tests.$shard.log"; done
  exit 1
fi
stage_done "codec tests under ASan and UBSan"

echo "terse: fuzz targets, 20000 runs (at most 5 s) each, $(nproc) at a time"
tests/fuzz/run_fuzzers.sh --no-build --runs 20000 --seconds 5 --parallel "$(nproc)"
stage_done "fuzz target runs"

build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' build/CMakeCache.txt)
cuda=$(sed -n 's/^TERSE_CUDA:STRING=//p' build/CMakeCache.txt)
echo "terse: full suite in build/ (CMAKE_BUILD_TYPE=${build_type}, TERSE_CUDA=${cuda:-AUTO}; the build cmake/build.sh makes)"
# One more job than cores: about a fifth of the tests' time is spent waiting (for deadlines, peers
# and processes to start), which another test can use.
ctest --test-dir build --output-on-failure -j"$(($(nproc) + 1))"
stage_done "CTest"
