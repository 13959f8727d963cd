#!/usr/bin/env bash
# Runs the device-buffer tests of plugin_tests against the fake CUDA runtime (fake_cudart.cpp),
# for machines without a GPU. CTest runs it as plugin_device_buffers_on_fake_cudart.
# Usage: tests/plugin/fake_cudart/run.sh BUILD_DIR [--no-build] [gtest args...]
# BUILD_DIR must be a CUDA build (TERSE_CUDA=AUTO or ON, with nvcc); the script builds the
# fake_cudart and plugin_tests targets there first, unless --no-build (CTest's test has them).
set -euo pipefail
build="$(cd "${1:?usage: run.sh BUILD_DIR [--no-build] [gtest args...]}" && pwd)"
shift
if [ "${1:-}" = --no-build ]; then
  shift
else
  cmake --build "$build" --target fake_cudart plugin_tests -j"$(nproc)"
fi
lib="$build/tests/plugin/fake_cudart/lib"
if ! ls "$lib"/libcudart.so.* >/dev/null 2>&1; then
  echo "run.sh: no fake libcudart in $lib: is $build a CUDA build with the fake_cudart target built?" >&2
  exit 1
fi
# LD_BIND_NOW: a CUDA symbol the fake lacks fails at start, as where linkers bind eagerly.
LD_BIND_NOW=1 LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TERSE_DEBUG="${TERSE_DEBUG:-NONE}" \
  "$build/tests/plugin_tests" --gtest_filter='*Device*' "$@"
