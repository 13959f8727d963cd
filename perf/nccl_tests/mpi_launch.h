// The little the perf binaries need from MPI when an MPI launcher started them: the process's
// rank and the job's size, and the ncclUniqueId from rank 0. Built as stubs when CMake found no
// MPI (TERSE_PERF_HAVE_MPI 0); launch_plan.h then refuses MPI launches.
#pragma once

#include <nccl.h>

namespace terse {
namespace perf {

bool built_with_mpi();

// MPI_Init, then this process's rank and the world's size.
void mpi_start(int* argc, char*** argv, int* rank, int* size);
// Rank 0's id to every process.
void mpi_broadcast_unique_id(ncclUniqueId* id);
void mpi_finish();

}  // namespace perf
}  // namespace terse
