#!/usr/bin/env bash
# Installs what is missing, then configures and builds terse in build/ (Release, CUDA kernels
# wherever nvcc exists). Extra arguments go to the CMake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
./cmake/install_deps.sh
cuda_root="${CUDA_HOME:-/usr/local/cuda}"
export PATH="$cuda_root/bin:$PATH"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT="$cuda_root" "$@" >build.configure.log \
  || { cat build.configure.log; exit 1; }
cmake --build build -j"$(nproc)"
