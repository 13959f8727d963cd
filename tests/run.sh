#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the codec tests once more under
# AddressSanitizer/UBSan (decoders must never read or write out of bounds, whatever arrives),
# then the whole suite with CTest.
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

# -O1 -g1, as AddressSanitizer recommends: its reports keep their line numbers, and the build takes
# a third of -O2 -g's time (163 s against about 480 s on 2 cores).
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERSE_CUDA=OFF -DTERSE_BUILD_PERF=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DTERSE_SANITIZE=address,undefined >build-asan.configure.log || { cat build-asan.configure.log; exit 1; }
cmake --build build-asan -j"$(nproc)" --target codec_tests
echo "terse: codec tests under AddressSanitizer and UBSan"
TERSE_DEBUG=NONE ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ./build-asan/tests/codec_tests --gtest_brief=1
stage_done "codec tests under ASan and UBSan"

# Fuzzing (tests/fuzz/README.md): a short run of every libFuzzer target over its seed corpus,
# in build-fuzz (clang, ASan + UBSan); any crash fails the test command.
echo "terse: fuzz targets, 20000 runs (at most 5 s) each, $(nproc) at a time"
tests/fuzz/run_fuzzers.sh --runs 20000 --seconds 5 --parallel "$(nproc)"
stage_done "fuzz targets (build and runs)"

build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' build/CMakeCache.txt)
cuda=$(sed -n 's/^TERSE_CUDA:STRING=//p' build/CMakeCache.txt)
echo "terse: full suite in build/ (CMAKE_BUILD_TYPE=${build_type}, TERSE_CUDA=${cuda:-AUTO}; the build cmake/build.sh makes)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
stage_done "CTest"
