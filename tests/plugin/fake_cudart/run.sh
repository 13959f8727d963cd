#!/usr/bin/env bash
# Runs the device-buffer tests of plugin_tests against the fake CUDA runtime (fake_cudart.cpp),
# for machines without a GPU. Usage: tests/plugin/fake_cudart/run.sh BUILD_DIR [gtest args...]
# BUILD_DIR must be a TERSE_CUDA=ON build with plugin_tests built.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:?usage: run.sh BUILD_DIR [gtest args...]}" && pwd)"
shift
cuda="${CUDA_HOME:-/usr/local/cuda}"
version="$(sed -n 's/^#define CUDART_VERSION *\([0-9]*\).*/\1/p' "$cuda/include/cuda_runtime_api.h")"
major=$((version / 1000))
out="$build/fake_cudart"
mkdir -p "$out"
echo "libcudart.so.$major { global: *; };" >"$out/version.map"
g++ -std=c++17 -O1 -g -fPIC -shared -I"$cuda/include" "$here/fake_cudart.cpp" \
  -o "$out/libcudart.so.$major" -Wl,--version-script="$out/version.map" \
  -Wl,-soname,"libcudart.so.$major" -lpthread
LD_LIBRARY_PATH="$out${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TERSE_DEBUG="${TERSE_DEBUG:-NONE}" \
  "$build/tests/plugin_tests" --gtest_filter='*Device*' "$@"
