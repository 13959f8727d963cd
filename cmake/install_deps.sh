#!/usr/bin/env bash
# Installs the Debian packages terse builds against, only those that are missing, so the
# README's commands work on a fresh machine and cost nothing on a prepared one.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libucx-dev ucx-utils            # transport
  libhwloc-dev hwloc              # topology
  libibverbs-dev rdma-core        # RDMA NIC discovery
  libyaml-cpp-dev                 # policy files
  libre2-dev                      # policy name patterns
  libzstd-dev                     # the net plugin's lossless compression
  libssl-dev                      # HMAC for the bootstrap handshake
  libgtest-dev                    # tests
  clang libclang-rt-14-dev        # fuzz targets (libFuzzer, tests/fuzz)
  libopenblas-dev                 # PowerSGD on the CPU
  zlib1g-dev                      # train_fmnist reads the gzipped IDX files
  dataset-fashion-mnist           # train_fmnist's data (perf/convergence.sh, tests/train)
  openmpi-bin libopenmpi-dev      # mpirun launch and the MPI baseline
  iproute2 iputils-ping iptables  # perf/emulated_cluster.sh: namespaces and tc, link checks, RTT
  python3-torch libtorch-dev      # torch_terse, the torch.distributed backend (python/)
  pybind11-dev python3-setuptools
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "terse: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# nccl.h (terse's API) and the CUDA runtime headers come from the CUDA toolkit.
cuda_root="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda_root/include/nccl.h" ]; then
  echo "terse: no nccl.h under $cuda_root/include; install the CUDA toolkit with NCCL or set CUDA_HOME" >&2
  exit 1
fi
