#!/usr/bin/env bash
# Runs a command under Debian's Open MPI mpirun with NPROCS processes on this machine (as root
# when need be, oversubscribing the cores, passing terse's loopback settings on). Exits 77
# (CTest's skip code here) with a message when there is no mpirun.
#
#   run_under_mpirun.sh NPROCS COMMAND [ARGS...]
set -uo pipefail

if ! command -v mpirun >/dev/null; then
  echo "run_under_mpirun.sh: skipped: no mpirun on PATH (install openmpi-bin)"
  exit 77
fi
nprocs=$1
shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np "$nprocs" --oversubscribe \
  -x TERSE_SOCKET_IFNAME -x TERSE_SOCKET_FAMILY -x TERSE_TIMEOUT_S "$@"
