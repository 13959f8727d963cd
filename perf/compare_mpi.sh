#!/usr/bin/env bash
# terse's allreduce against Open MPI's MPI_Allreduce on this machine, side by side: for each rank
# count, the same sizes through all_reduce_perf (ranks as processes, perf/launch.sh) and
# mpi_allreduce_perf (mpirun), then one table (perf/compare_mpi.py). Both run over this host's
# shared memory: UCX shm + cma for terse, Open MPI's vader BTL (shm + cma) for MPI. terse's
# buffers are host memory (-B host), as MPI's are, also where a GPU would make device the default.
#
#   perf/compare_mpi.sh                 # 2 and 4 ranks, 1 MiB to 256 MiB, and 8-byte latency
#   RANKS="2" MAX=64M perf/compare_mpi.sh
#   BUILD_DIR=build-dense perf/compare_mpi.sh   # binaries of another build tree (built beforehand)
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${RANKS:-"2 4"}
max=${MAX:-256M}
build=${BUILD_DIR:-build}
out=${OUT:-$build/compare_mpi}
bin=$build/perf
if [[ ! -x $bin/all_reduce_perf || ! -x $bin/mpi_allreduce_perf ]]; then
  if [[ $build != build ]]; then
    echo "compare_mpi.sh: $bin lacks all_reduce_perf or mpi_allreduce_perf; build them first" >&2
    exit 1
  fi
  ./cmake/build.sh
fi
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_flags=(--oversubscribe --bind-to none)

for n in $ranks; do
  echo "== $n ranks: bandwidth, 1M to $max" >&2
  perf/launch.sh "$n" $bin/all_reduce_perf -B host -b 1M -e "$max" -f 2 -n 10 -w 3 -J "$out/terse_bw_$n.json" >&2
  mpirun "${mpirun_flags[@]}" -np "$n" $bin/mpi_allreduce_perf -b 1M -e "$max" -f 2 -n 10 -w 3 \
    -J "$out/mpi_bw_$n.json" >&2
  echo "== $n ranks: 8-byte latency" >&2
  perf/launch.sh "$n" $bin/all_reduce_perf -B host -b 8 -e 8 -n 5000 -w 500 -J "$out/terse_lat_$n.json" >&2
  mpirun "${mpirun_flags[@]}" -np "$n" $bin/mpi_allreduce_perf -b 8 -e 8 -n 5000 -w 500 \
    -J "$out/mpi_lat_$n.json" >&2
done
python3 perf/compare_mpi.py "$out" $ranks
