#include "perf/nccl_tests/mpi_launch.h"

#include <cstdlib>

#if TERSE_PERF_HAVE_MPI
#include <mpi.h>
#endif

namespace terse {
namespace perf {

#if TERSE_PERF_HAVE_MPI

bool built_with_mpi() {
  return true;
}

void mpi_start(int* argc, char*** argv, int* rank, int* size) {
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
}

void mpi_broadcast_unique_id(ncclUniqueId* id) {
  MPI_Bcast(id, sizeof(*id), MPI_BYTE, 0, MPI_COMM_WORLD);
}

void mpi_finish() {
  MPI_Finalize();
}

#else

bool built_with_mpi() {
  return false;
}

// Never reached: launch_plan.h refuses MPI launches of a build without MPI.
void mpi_start(int*, char***, int*, int*) {
  abort();
}
void mpi_broadcast_unique_id(ncclUniqueId*) {
  abort();
}
void mpi_finish() {}

#endif

}  // namespace perf
}  // namespace terse
