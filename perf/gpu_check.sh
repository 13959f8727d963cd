#!/usr/bin/env bash
# The GPU checks of issue 12 in one command, for a GPU machine with CUDA, CMake, a compiler and
# PyTorch but no network and none of terse's libraries: builds terse against the prefix that
# perf/gpu_deps.sh prepared (carried as .gpu-deps/carry), then runs, each step timed and bounded:
#   build       configure (Release, CUDA architecture of the present GPU) and build the targets used
#   probe       which CUDA calls wait for a stream held as terse holds the caller's
#               (perf/stream_hold_probe), and that a host write releases it
#   tests       the GPU tests (ctest -R 'Gpu|Device|device|fake_cudart'; they skip without a GPU),
#               CUDA_MODULE_LOADING=EAGER, TERSE_TIMEOUT_S=20, 60 s a test
#   stacks      one device-backend test that hangs, stopped after 20 s with every thread's stack
#   lazy        the device-backend and stream tests again with lazy loading (CUDA's default)
#   sanitizer   compute-sanitizer memcheck, racecheck and synccheck over codec_tests' GPU tests
#               and residual memory's device test (compressed_tests)
#   codec_perf  every codec's device kernels against a device-to-device copy (perf/codec_gpu_perf),
#               and on the CPU (codec_perf)
#   allreduce   device-buffer allreduces, several processes on one GPU, through torch.distributed
#               under LD_PRELOAD=libterse.so TERSE_MODE=engine (tests/pytorch/allreduce_check.py),
#               and perf/all_reduce_perf -B device with as many processes on GPU 0 (-Z none, int8)
#   route_timing  int8 on device buffers: 2 processes, 4 threads of one process, and on host
#               buffers, for where the device route's time goes; its TERSE_DEBUG=INFO lines
#   ddp         tests/pytorch/ddp_train.py: DDP training, uncompressed, int8 and topk, compared
#   nccl_tests  nccl-tests' own all_reduce_perf built from source (NCCL_TESTS_DIR, the prefix's
#               src/nccl-tests, or ./nccl-tests), under LD_PRELOAD=libterse.so
#   net_plugin  the real NCCL loading libnccl-net-terse.so (NCCL_NET_PLUGIN=terse NCCL_NET=terse)
#               under that all_reduce_perf: 2 processes with P2P/SHM off where there are 2 GPUs
# Figures go to perf/results/gpu_check/<UTC time>/ and a dated section is appended to
# perf/RESULTS.md; with OUT (or GPU_CHECK_OUT) set, gpu_check.tar.gz (both) and summary.md are
# copied there too.
#
# Usage: bash perf/gpu_check.sh [--quick|--full] [--only STEP,...] [--skip STEP,...]
#                               [--build-dir DIR] [--budget-s SECONDS]
#   --quick (default) fits one 10-minute command with the build; --full runs larger sizes/steps.
#   --budget-s (default 560): a step that would start with less than its own minimum left is
#   skipped, and said so, rather than cut off with everything after it.
# Environment: TERSE_DEPS_PREFIX (default .gpu-deps/prefix, unpacked from .gpu-deps/carry when
# absent), NCCL_TESTS_DIR, CUDA_HOME, GPU_CHECK_NPROC (processes on the GPU, default 4),
# GPU_CHECK_ARCH (CUDA architecture, default the GPU's), GPU_CHECK_TARGETS and
# GPU_CHECK_TEST_TARGETS (what the build step builds), PYTHON (the one with torch).
set -euo pipefail

started_at=$SECONDS
mode=quick
only=""
skip=""
build_dir="build-gpu"
budget_s=560
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) mode=quick; shift ;;
    --full) mode=full; shift ;;
    --only) only=",${2:?--only needs a list},"; shift 2 ;;
    --skip) skip=",${2:?--skip needs a list},"; shift 2 ;;
    --build-dir) build_dir="${2:?--build-dir needs a folder}"; shift 2 ;;
    --budget-s) budget_s="${2:?--budget-s needs seconds}"; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
results="perf/results/gpu_check/$stamp"
mkdir -p "$results"
build="$(mkdir -p "$build_dir" && cd "$build_dir" && pwd)"
nproc_gpu="${GPU_CHECK_NPROC:-4}"
jobs="$(nproc)"
log() { echo "gpu_check.sh: $(date -u +%H:%M:%S) $*" | tee -a "$results/steps.log"; }
out="${GPU_CHECK_OUT:-${OUT:-}}"
# Every engine deadline short (a dead peer or a stuck stream is an error in seconds, not 10
# minutes), and no test allowed to cost more than a minute of a short lease.
export TERSE_TIMEOUT_S="${GPU_CHECK_TIMEOUT_S:-20}"
test_timeout_s="${GPU_CHECK_TEST_TIMEOUT_S:-60}"


# --- the prefix of Debian packages ---------------------------------------------------------
prefix="${TERSE_DEPS_PREFIX:-$repo/.gpu-deps/prefix}"
if [ ! -f "$prefix/env.sh" ]; then
  archive="$(find "$repo/.gpu-deps/carry" -name '*.tar.xz' 2>/dev/null | head -1 || true)"
  if [ -n "$archive" ]; then
    log "unpacking $archive"
    if command -v xz >/dev/null; then
      tar -C "$repo/.gpu-deps" -xJf "$archive"
    else
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$archive" "$repo/.gpu-deps"
    fi
    prefix="$repo/.gpu-deps/prefix"
  fi
fi
if [ -f "$prefix/env.sh" ]; then
  # shellcheck source=/dev/null
  source "$prefix/env.sh"
  log "dependencies from $TERSE_DEPS_PREFIX"
elif pkg-config --exists ucx hwloc libibverbs openblas re2 2>/dev/null; then
  log "no prefix ($prefix); building against the system's packages"
else
  echo "gpu_check.sh: no prefix at $prefix and no .gpu-deps/carry/*.tar.xz: run perf/gpu_deps.sh where packages can be installed and carry .gpu-deps/carry" >&2
  exit 1
fi

# --- CUDA ----------------------------------------------------------------------------------
nvcc="$(command -v nvcc || true)"
for candidate in "${CUDA_HOME:-}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
  [ -z "$nvcc" ] && [ -x "$candidate" ] && nvcc="$candidate"
done
[ -n "$nvcc" ] || { echo "gpu_check.sh: no nvcc (PATH, CUDA_HOME, /usr/local/cuda)" >&2; exit 1; }
cuda_root="$(cd "$(dirname "$nvcc")/.." && pwd)"
export PATH="$cuda_root/bin:$PATH"
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)"
[ -n "$arch" ] || arch=90
arch="${GPU_CHECK_ARCH:-$arch}"  # e.g. 80-real, to try the script on a machine without a GPU
gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo 'no GPU seen by nvidia-smi')"
python="${PYTHON:-python3}"

{
  echo "date (UTC): $stamp"
  echo "mode: $mode"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo 'unknown (no .git here)')"
  echo "gpu: $gpu_name (compute capability $arch)"
  nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/driver, memory: /' || true
  echo "nvcc: $nvcc ($("$nvcc" --version | sed -n 's/.*release \([^,]*\),.*/\1/p'))"
  echo "cmake: $(cmake --version | head -1)"
  echo "compiler: $(c++ --version 2>/dev/null | head -1)"
  echo "cpus: $jobs"
  "$python" -c 'import torch; print("torch:", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None, "gpus", torch.cuda.device_count())' 2>&1 || echo "torch: not importable"
} >"$results/facts.txt" 2>&1
cat "$results/facts.txt"

# --- steps ---------------------------------------------------------------------------------
declare -a step_rows=()
failures=0
wanted() { [[ -z "$only" || "$only" == *",$1,"* ]] && [[ "$skip" != *",$1,"* ]]; }
# run_step NAME MIN_SECONDS FUNCTION: runs FUNCTION unless unwanted or out of time; records it.
run_step() {
  local name="$1" min_s="$2" fn="$3" left status t0
  if ! wanted "$name"; then return 0; fi
  left=$((budget_s - (SECONDS - started_at)))
  if [ "$left" -lt "$min_s" ]; then
    log "$name: skipped, ${left}s left of the budget and it needs about ${min_s}s"
    step_rows+=("| $name | skipped (out of time) | 0 |")
    return 0
  fi
  log "$name: starting (${left}s left)"
  t0=$SECONDS
  if "$fn" "$left"; then status=passed; else status=FAILED; failures=$((failures + 1)); fi
  log "$name: $status in $((SECONDS - t0))s"
  step_rows+=("| $name | $status | $((SECONDS - t0)) |")
  snapshot
}
# The results so far, packed into the out folder after every step: a run cut off by its caller's
# time limit still hands back every finished step's logs.
snapshot() {
  [ -n "$out" ] && [ -d "$out" ] || return 0
  tar -czf "$out/gpu_check.tar.gz.part" "$results" 2>/dev/null \
    && mv "$out/gpu_check.tar.gz.part" "$out/gpu_check.tar.gz"
  cp "$results/steps.log" "$out/steps.log" 2>/dev/null || true
}
# bounded SECONDS LOG COMMAND...: the command's output to LOG (and the terminal), killed at SECONDS.
bounded() {
  local seconds="$1" logfile="$2"
  shift 2
  set -o pipefail
  timeout --kill-after=10 "$seconds" "$@" 2>&1 | tee "$logfile"
}
time_left() { echo $((budget_s - (SECONDS - started_at))); }

terse_lib="$build/plugin/libterse.so"
have_target() { grep -Eq "(^|[ .])$1(:| |$)" "$build/.targets" 2>/dev/null; }

step_build() {
  local generator=() core=() tests=() keep_going=(-k) target
  if [ -f "$build/CMakeCache.txt" ] && ! grep -q "^CMAKE_CUDA_ARCHITECTURES:.*=$arch\$" "$build/CMakeCache.txt"; then
    rm -rf "$build" && mkdir -p "$build"
  fi
  # Ninja where present, unless the folder was configured with another generator.
  if grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$build/CMakeCache.txt" 2>/dev/null \
     || { [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; }; then
    generator=(-G Ninja)
    keep_going=(-k 0)
  fi
  bounded "$(time_left)" "$results/configure.log" cmake -S "$repo" -B "$build" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DTERSE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DTERSE_DEPS_PREFIX="${TERSE_DEPS_PREFIX:-}" \
    -DCUDAToolkit_ROOT="$cuda_root" -DCMAKE_CUDA_COMPILER="$nvcc" >/dev/null || return 1
  cmake --build "$build" --target help >"$build/.targets" 2>/dev/null || true
  # Only what the later steps run: libterse and the benchmarks first, then the GPU tests'
  # binaries, going on past one that fails to build (its tests then count as failed).
  for target in ${GPU_CHECK_TARGETS:-terse stream_hold_probe codec_gpu_perf codec_perf all_reduce_perf nccl-net-terse}; do
    have_target "$target" && core+=("$target")
  done
  # plugin_device_backend_tests: the backend route through the NCCL API with the real kernels,
  # dense and sparse codecs.
  for target in ${GPU_CHECK_TEST_TARGETS:-codec_tests plugin_tests fake_cudart compressed_device_tests compressed_fake_device_tests plugin_device_backend_tests plugin_wrap_tests}; do
    have_target "$target" && tests+=("$target")
  done
  log "building ${core[*]}, then ${tests[*]}"
  if ! bounded "$(time_left)" "$results/build.log" cmake --build "$build" -j"$jobs" \
       --target "${core[@]}" -- "${keep_going[@]}" >/dev/null; then
    grep -E 'error' "$results/build.log" | head -20
    return 1
  fi
  [ ${#tests[@]} -eq 0 ] && return 0
  if ! bounded "$(time_left)" "$results/build_tests.log" cmake --build "$build" -j"$jobs" \
       --target "${tests[@]}" -- "${keep_going[@]}" >/dev/null; then
    grep -E 'error' "$results/build_tests.log" | head -20
    return 1
  fi
}

# device_ctest LOADING SECONDS LOG INCLUDE EXCLUDE: the matching tests with CUDA_MODULE_LOADING
# set, each stopped at test_timeout_s; LOG_summary.txt gets the verdict, the tests that failed or
# did not run, and how many skipped (a GPU run should skip none but those needing two GPUs).
device_ctest() {
  local loading="$1" seconds="$2" logfile="$3" include="$4" exclude="$5"
  bounded "$seconds" "$logfile" env CUDA_MODULE_LOADING="$loading" \
    ctest --test-dir "$build" -R "$include" -E "$exclude" --output-on-failure \
    --timeout "$test_timeout_s" -j4 >/dev/null
  local rc=$?
  {
    grep -E 'tests passed|tests failed|\((Failed|Timeout|Not Run|SEGFAULT|Subprocess aborted)\)' \
      "$logfile" || true
    echo "skipped: $(grep -c '(Skipped)' "$logfile" || true) tests"
  } >"${logfile%.log}_summary.txt"
  cat "${logfile%.log}_summary.txt"
  return $rc
}

# perf_device_*: the perf binaries' device buffers on the fake runtime (the allreduce step runs
# them on this GPU instead), whose binaries this build does not make; *_on_host_kernels: the
# kernels built for the host under the runtime model (tests/host_kernels), for machines without
# a GPU, whose binaries this build does not make either. CUDA_MODULE_LOADING=EAGER:
# every kernel loaded when the context is made, so no first launch waits for a device that a held
# stream keeps busy (step lazy tries the default).
step_tests() {
  device_ctest EAGER $(($1 - 10)) "$results/ctest.log" 'Gpu|Device|device|fake_cudart' \
    '_NOT_BUILT|^perf_device_|_on_host_kernels$'
}

# Which CUDA calls wait for a stream held the way terse holds the caller's (perf/stream_hold_probe:
# one process per call, a stream held by cuStreamWaitValue32 and by a polling kernel), and the
# proof that a host write to the mapped flag releases the held stream. Lazy loading (CUDA's
# default) first, then the first launch and cuBLAS again with EAGER.
step_probe() {
  local left="$1" probe="$build/perf/stream_hold_probe" rc=0 hold
  [ -x "$probe" ] || { log "probe: no perf/stream_hold_probe in this build"; return 1; }
  for hold in memop kernel; do
    bounded $(((left - 10) / 3)) "$results/stream_hold_$hold.txt" env CUDA_MODULE_LOADING=LAZY \
      "$probe" --hold "$hold" --timeout-ms 1500 >/dev/null || rc=1
  done
  bounded $(((left - 10) / 3)) "$results/stream_hold_eager.txt" env CUDA_MODULE_LOADING=EAGER \
    "$probe" --hold memop --timeout-ms 1500 firstLaunch cudaFuncGetAttributes cublasCreate \
    cublasSgemmFirst >/dev/null || rc=1
  return $rc
}

# One device-backend test that hangs, stopped after 20 s with every thread's stack
# (perf/gpu_hang_stacks.sh): where the hang is, not only that there is one.
step_stacks() {
  local left="$1" binary="$build/tests/plugin_device_backend_tests"
  [ -x "$binary" ] || { log "stacks: no tests/plugin_device_backend_tests in this build"; return 1; }
  env CUDA_MODULE_LOADING=EAGER TERSE_DEBUG=INFO "$repo/perf/gpu_hang_stacks.sh" \
    "${GPU_CHECK_STACKS_AFTER_S:-20}" "$results/hang_stacks.txt" "$binary" \
    --gtest_filter="${GPU_CHECK_STACKS_TEST:-PluginDeviceBackendRoute.Int8OnTwoRanksEqualsTheModelAndCopiesOnlyMessages}" \
    >"$results/hang_stacks_output.txt" 2>&1
  local rc=$?
  [ $rc -eq 124 ] && log "stacks: the test hung; stacks in hang_stacks.txt"
  return $rc
}

# The device-backend tests again with CUDA's default lazy loading: a kernel loaded for the first
# time while a caller's stream is held by terse's wait may wait for that stream (a deadlock that
# only the test timeout ends).
step_lazy() {
  device_ctest LAZY $(($1 - 5)) "$results/ctest_lazy.log" \
    "${GPU_CHECK_LAZY_TESTS:-PluginDeviceBackend|PluginDeviceStreams}" '_NOT_BUILT|fake_cudart'
}

# compute-sanitizer's memcheck, racecheck and synccheck over the codecs' device tests (one
# process each, so every kernel of every codec runs under each tool).
step_sanitizer() {
  local left="$1" tool rc=0 sanitizer
  sanitizer="$(command -v compute-sanitizer || echo "$cuda_root/bin/compute-sanitizer")"
  [ -x "$sanitizer" ] || { log "sanitizer: no compute-sanitizer"; return 1; }
  local tools=(${GPU_CHECK_SANITIZER_TOOLS:-memcheck racecheck synccheck})
  for tool in "${tools[@]}"; do
    bounded $(((left - 10) / ${#tools[@]} * 3 / 4)) "$results/sanitizer_$tool.log" \
      env CUDA_MODULE_LOADING=EAGER "$sanitizer" --tool "$tool" --error-exitcode 9 --print-limit 20 \
      "$build/tests/codec_tests" --gtest_brief=1 \
      --gtest_filter="${GPU_CHECK_SANITIZER_FILTER:-*Gpu*:*Device*}" >/dev/null || rc=1
    tail -3 "$results/sanitizer_$tool.log"
    # The error-feedback kernels (codecs/cuda/residual_kernels.cu) run in residual memory's
    # device test, which lives with residual memory in compressed_tests.
    bounded $(((left - 10) / ${#tools[@]} / 4)) "$results/sanitizer_${tool}_residual.log" \
      env CUDA_MODULE_LOADING=EAGER "$sanitizer" --tool "$tool" --error-exitcode 9 --print-limit 20 \
      "$build/tests/compressed_tests" --gtest_brief=1 \
      --gtest_filter="ResidualMemory.Device*" >/dev/null || rc=1
    tail -3 "$results/sanitizer_${tool}_residual.log"
  done
  return $rc
}

step_codec_perf() {
  local left="$1" n=16M iters=3 gpu_n=64M gpu_iters=10 rc=0
  [ "$mode" = full ] && n=64M && iters=10 && gpu_n=256M && gpu_iters=20
  # The codecs' device kernels against a device-to-device copy (issue 12's 0.7x / 0.3x figure).
  if [ -x "$build/perf/codec_gpu_perf" ]; then
    bounded $((left / 2)) "$results/codec_gpu_perf.txt" "$build/perf/codec_gpu_perf" \
      -n "$gpu_n" -i "$gpu_iters" >/dev/null || rc=1
  else
    log "codec_perf: no perf/codec_gpu_perf in this tree; the CPU codecs only"
  fi
  # The same codecs on the CPU, for comparison (and the planner's figures).
  bounded $((left / 2 - 5)) "$results/codec_perf.txt" "$build/perf/codec_perf" -n "$n" \
    -i "$iters" -c 'none;fp16;bf16;int8;int4;qsgd;sign;terngrad;topk;powersgd' >/dev/null || rc=1
  return $rc
}

step_allreduce() {
  local left="$1" sizes="1M,16M,64M" rc=0
  [ "$mode" = full ] && sizes="256K,1M,4M,16M,64M,256M"
  bounded $((left / 2)) "$results/allreduce_torch.txt" env LD_PRELOAD="$terse_lib" \
    TERSE_MODE=engine PYTHONUNBUFFERED=1 "$python" tests/pytorch/allreduce_check.py \
    --nproc "$nproc_gpu" --sizes "$sizes" --codecs none,int8,topk --iters 10 \
    --out "$results/allreduce" >/dev/null || rc=1
  # perf/all_reduce_perf with device buffers (-B device, perf/README.md "Device buffers"): the
  # same processes, every one on GPU 0 (NCCL_TESTS_DEVICE), #wrong checked (exit 7 otherwise),
  # uncompressed through -Z none and compressed with int8; a few sizes, a short budget.
  if "$build/perf/all_reduce_perf" -h 2>&1 | grep -q -- '-B device'; then
    for codec in none int8; do
      bounded 90 "$results/all_reduce_perf_device_$codec.txt" env TERSE_SOCKET_IFNAME=lo \
        NCCL_TESTS_DEVICE=0 perf/launch.sh "$nproc_gpu" "$build/perf/all_reduce_perf" -B device \
        -b 256K -e 16M -f 4 -n 5 -w 1 -Z "$codec" \
        -J "$results/all_reduce_perf_device_$codec.json" >/dev/null || rc=1
    done
  else
    log "allreduce: perf/all_reduce_perf has no -B device in -h (an older tree); torch's device buffers only"
  fi
  return $rc
}

# Where the device route's time goes: int8 on device buffers with 2 processes on the one GPU
# (CUDA time-slices the contexts of several processes), 4 ranks as threads of one process (one
# context; ranks sharing a process never hold their streams), and 4 processes on host buffers
# (the same algorithm, every step on the CPU); then one 2-process run at TERSE_DEBUG=INFO for
# the route's lines on which calls allocated and when a shape began to hold its stream.
step_route_timing() {
  local rc=0 binary="$build/perf/all_reduce_perf" sizes=(-b 1M -e 16M -f 4 -n 5 -w 1 -Z int8)
  bounded 50 "$results/route_int8_2procs_device.txt" env TERSE_SOCKET_IFNAME=lo NCCL_TESTS_DEVICE=0 \
    perf/launch.sh 2 "$binary" -B device "${sizes[@]}" >/dev/null || rc=1
  bounded 50 "$results/route_int8_4threads_device.txt" env TERSE_SOCKET_IFNAME=lo \
    "$binary" -t 4 -B device "${sizes[@]}" >/dev/null || rc=1
  bounded 50 "$results/route_int8_4procs_host.txt" env TERSE_SOCKET_IFNAME=lo \
    perf/launch.sh 4 "$binary" -B host "${sizes[@]}" >/dev/null || rc=1
  bounded 40 "$results/route_int8_info.log" env TERSE_SOCKET_IFNAME=lo NCCL_TESTS_DEVICE=0 \
    TERSE_DEBUG=INFO perf/launch.sh 2 "$binary" -B device -b 1M -e 1M -n 3 -w 1 -Z int8 \
    >/dev/null || rc=1
  grep -h 'device backend:' "$results/route_int8_info.log" | sed 's/^[^ ]* //' | sort | uniq -c \
    | head -20 >"$results/route_warm_lines.txt" || true
  return $rc
}

step_ddp() {
  local left="$1" steps=300
  [ "$mode" = full ] && steps=1000
  bounded $((left - 5)) "$results/ddp_train.txt" env LD_PRELOAD="$terse_lib" TERSE_MODE=engine \
    PYTHONUNBUFFERED=1 "$python" tests/pytorch/ddp_train.py --nproc "$nproc_gpu" \
    --steps "$steps" --codecs none,int8,topk --device cuda --out "$results/ddp" >/dev/null
}

# The real libnccl.so.2 of this machine (PyTorch's wheel, the system, CUDA's folder), if any.
real_nccl() {
  local found
  found="$("$python" -c 'import os, nvidia.nccl as n; d = os.path.join(list(n.__path__)[0], "lib"); print(os.path.join(d, "libnccl.so.2"))' 2>/dev/null || true)"
  [ -n "$found" ] && [ -e "$found" ] && { echo "$found"; return; }
  found="$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')"
  [ -n "$found" ] && { echo "$found"; return; }
  for found in "$cuda_root"/lib64/libnccl.so.2 "$cuda_root"/lib/libnccl.so.2; do
    [ -e "$found" ] && { echo "$found"; return; }
  done
}

step_nccl_tests() {
  local left="$1" src="${NCCL_TESTS_DIR:-}" out="$build/nccl-tests" mpi=0 mpi_home="" rc=0
  [ -n "$src" ] || { [ -f "$prefix/src/nccl-tests/src/all_reduce.cu" ] && src="$prefix/src/nccl-tests"; }
  [ -n "$src" ] || { [ -f "$repo/nccl-tests/src/all_reduce.cu" ] && src="$repo/nccl-tests"; }
  if [ -z "$src" ]; then
    log "nccl_tests: no sources (NCCL_TESTS_DIR, the prefix's src/nccl-tests, ./nccl-tests): not run"
    echo "no nccl-tests sources" >"$results/nccl_tests.txt"
    return 0
  fi
  # With MPI where the machine has it (several processes on the GPU), else one process.
  # nccl-tests looks in MPI_HOME/include and lib; Debian's Open MPI is elsewhere, so the wrapper's
  # own -I and -L go through CPATH and LIBRARY_PATH (which nvcc's host compiler and ld read).
  local mpi_cpath="" mpi_libpath="" flag
  if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    mpi=1
    mpi_home="$(dirname "$(dirname "$(command -v mpicc)")")"
    for flag in $(mpicc -show 2>/dev/null || mpicc --showme 2>/dev/null || true); do
      case "$flag" in
        -I*) mpi_cpath="$mpi_cpath${mpi_cpath:+:}${flag#-I}" ;;
        -L*) mpi_libpath="$mpi_libpath${mpi_libpath:+:}${flag#-L}" ;;
      esac
    done
  fi
  # nccl.h: the prefix's (the version terse implements). The binary links the machine's real
  # libnccl, as an application does, and LD_PRELOAD puts terse in front of it; where there is
  # none, it links libterse itself.
  local real lib_dirs
  real="$(real_nccl)"
  mkdir -p "$out/nccl/include" "$out/nccl/lib"
  cp "${TERSE_DEPS_PREFIX:-$cuda_root}/nccl/include/nccl.h" "$out/nccl/include/" 2>/dev/null \
    || cp "$cuda_root/include/nccl.h" "$out/nccl/include/"
  if [ -n "$real" ]; then
    ln -sf "$real" "$out/nccl/lib/libnccl.so"
    lib_dirs="$(dirname "$real")"
    log "nccl_tests: linked to the real $real, terse by LD_PRELOAD"
  else
    ln -sf "$terse_lib" "$out/nccl/lib/libnccl.so"
    lib_dirs="$(dirname "$terse_lib")"
    log "nccl_tests: no real libnccl.so.2 here; linked to libterse"
  fi
  bounded $((left / 2)) "$results/nccl_tests_build.log" env CPATH="$mpi_cpath" \
    LIBRARY_PATH="$mpi_libpath" make -C "$src/src" -j"$jobs" \
    BUILDDIR="$out/build" CUDA_HOME="$cuda_root" NCCL_HOME="$out/nccl" MPI="$mpi" \
    MPI_HOME="$mpi_home" NVCC_GENCODE="-gencode=arch=compute_${arch%-real},code=sm_${arch%-real}" \
    "$out/build/all_reduce_perf" >/dev/null || { log "nccl_tests: build failed"; return 1; }
  local binary="$out/build/all_reduce_perf" size=(-b 8 -e 64M -f 8) codec
  [ "$mode" = full ] && size=(-b 8 -e 256M -f 4)
  for codec in none int8; do
    local vars=(LD_PRELOAD="$terse_lib" TERSE_MODE=engine TERSE_SOCKET_IFNAME=lo
                NCCL_TESTS_DEVICE=0 LD_LIBRARY_PATH="$lib_dirs:${LD_LIBRARY_PATH:-}")
    local exports=(-x LD_PRELOAD -x TERSE_MODE -x TERSE_SOCKET_IFNAME -x NCCL_TESTS_DEVICE
                   -x LD_LIBRARY_PATH)
    [ "$codec" = none ] || { vars+=(TERSE_CODEC="$codec"); exports+=(-x TERSE_CODEC); }
    if [ "$mpi" = 1 ]; then
      # Every process on GPU 0 (NCCL_TESTS_DEVICE): terse's engine lets ranks share it.
      local launcher=(mpirun -np "$nproc_gpu")  # MPICH's passes the environment by itself
      if mpirun --version 2>&1 | grep -q 'Open MPI'; then
        launcher=(mpirun --allow-run-as-root --oversubscribe -np "$nproc_gpu" "${exports[@]}")
      fi
      bounded 150 "$results/nccl_tests_$codec.txt" env "${vars[@]}" "${launcher[@]}" \
        "$binary" "${size[@]}" -g 1 -c 1 >/dev/null || rc=1
    else
      # One process, one GPU, one rank: nccl-tests' own checks of device buffers through terse.
      bounded 120 "$results/nccl_tests_$codec.txt" env "${vars[@]}" "$binary" "${size[@]}" -g 1 -c 1 \
        >/dev/null || rc=1
    fi
  done
  return $rc
}

# NCCL itself with the ncclNet plugin (issue 13) and nccl-tests' binary from the step before,
# linked to the real libnccl. NCCL refuses two ranks on one GPU, so two processes (P2P and SHM
# off, so that they talk through the plugin) need two GPUs; with one, a single rank still shows
# NCCL loading and choosing the plugin. The log must say "Using network terse".
step_net_plugin() {
  local binary="$build/nccl-tests/build/all_reduce_perf" plugin_dir="$build/plugin/net" real rc=0
  real="$(real_nccl)"
  if [ -z "$real" ] || [ ! -x "$binary" ]; then
    log "net_plugin: needs a real libnccl.so.2 and the nccl_tests step's binary: not run"
    echo "not run: no real libnccl.so.2 or no nccl-tests binary" >"$results/net_plugin.txt"
    return 0
  fi
  [ -f "$plugin_dir/libnccl-net-terse.so" ] || { log "net_plugin: no libnccl-net-terse.so"; return 1; }
  local vars=(NCCL_NET_PLUGIN=terse NCCL_NET=terse NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
              TERSE_DEBUG=INFO LD_LIBRARY_PATH="$plugin_dir:$(dirname "$real"):${LD_LIBRARY_PATH:-}")
  if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] && mpirun --version 2>&1 | grep -q 'Open MPI'; then
    vars+=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)
    local exports=() var
    for var in "${vars[@]}"; do exports+=(-x "${var%%=*}"); done
    bounded 150 "$results/net_plugin.txt" env "${vars[@]}" mpirun --allow-run-as-root       --oversubscribe -np 2 "${exports[@]}" "$binary" -b 8 -e 64M -f 8 -g 1 -c 1 >/dev/null || rc=1
  else
    bounded 120 "$results/net_plugin.txt" env "${vars[@]}" "$binary" -b 8 -e 64M -f 8 -g 1 -c 1       >/dev/null || rc=1
  fi
  grep -q 'Using network terse' "$results/net_plugin.txt"     || { log "net_plugin: NCCL did not choose the terse plugin (see net_plugin.txt)"; rc=1; }
  return $rc
}

run_step build 120 step_build
if wanted build && [ ! -f "$terse_lib" ]; then
  log "no libterse.so: stopping after the build"
else
  run_step probe 40 step_probe
  run_step tests 60 step_tests
  run_step stacks 30 step_stacks
  run_step codec_perf 30 step_codec_perf
  run_step allreduce 60 step_allreduce
  run_step route_timing 60 step_route_timing
  run_step lazy 40 step_lazy
  run_step sanitizer 60 step_sanitizer
  run_step ddp 60 step_ddp
  run_step nccl_tests 90 step_nccl_tests
  run_step net_plugin 60 step_net_plugin
fi

# --- the record ----------------------------------------------------------------------------
# shellcheck disable=SC2016  # backquotes are Markdown here
excerpt() {  # excerpt TITLE FILE LINES: a fenced excerpt of a result file, if there is one
  [ -s "$2" ] || return 0
  printf '\n%s (`%s`):\n\n```\n' "$1" "${2#"$repo/"}"
  grep -vE '^\s*$' "$2" | tail -n "$3"
  printf '```\n'
}
# shellcheck disable=SC2016  # backquotes are Markdown here
{
  printf '\n## GPU check, %s (`perf/gpu_check.sh --%s`)\n\n' "$stamp" "$mode"
  printf 'Machine: %s, %s CPUs. ' "$gpu_name" "$jobs"
  sed -n 's/^torch: /torch /p; s/^nvcc: .*(\(.*\))/CUDA \1/p' "$results/facts.txt" | paste -sd ',' - | sed 's/,/, /g' | tr -d '\n'
  printf '. Raw output: `%s/`.\n\n| step | result | seconds |\n| --- | --- | --- |\n' "$results"
  printf '%s\n' "${step_rows[@]}"
  for f in "$results"/stream_hold_*.txt; do
    [ -e "$f" ] && excerpt "CUDA calls while a stream is held ($(basename "$f" .txt))" "$f" 30
  done
  excerpt "GPU tests (CUDA_MODULE_LOADING=EAGER)" "$results/ctest_summary.txt" 30
  excerpt "Device-backend tests with lazy loading (CUDA_MODULE_LOADING=LAZY)" "$results/ctest_lazy_summary.txt" 20
  for f in "$results"/sanitizer_*.log; do
    [ -e "$f" ] && excerpt "compute-sanitizer $(basename "$f" .log | sed 's/sanitizer_//') over codec_tests' device tests" "$f" 6
  done
  excerpt "Codecs on the GPU against a device-to-device copy" "$results/codec_gpu_perf.txt" 30
  excerpt "Codecs on the CPU" "$results/codec_perf.txt" 30
  excerpt "Device-buffer allreduces, $nproc_gpu processes on one GPU, torch.distributed under LD_PRELOAD" "$results/allreduce_torch.txt" 20
  for f in "$results"/all_reduce_perf_device_*.txt "$results"/nccl_tests_*.txt; do
    [ -e "$f" ] && excerpt "$(basename "$f" .txt)" "$f" 25
  done
  for f in "$results"/route_int8_*.txt "$results/route_warm_lines.txt"; do
    [ -e "$f" ] && excerpt "$(basename "$f" .txt)" "$f" 12
  done
  excerpt "DDP training (tests/pytorch/ddp_train.py)" "$results/ddp_train.txt" 12
  excerpt "NCCL with the ncclNet plugin (NCCL_NET=terse)" "$results/net_plugin.txt" 25
} >"$results/summary.md"
cat "$results/summary.md" >>perf/RESULTS.md
log "figures in $results, section appended to perf/RESULTS.md"
if [ -n "$out" ] && [ -d "$out" ]; then
  snapshot
  cp "$results/summary.md" "$out/summary.md"
  log "copied to $out: gpu_check.tar.gz (tar -xzf it in the repository root), summary.md"
fi
log "total $((SECONDS - started_at))s, $failures step(s) failed"
[ "$failures" -eq 0 ]
