// How this process was started, read from the environment, and what that means for the ranks:
//   - under an MPI launcher (OMPI_COMM_WORLD_SIZE or PMI_SIZE set; needs the MPI build):
//     MPI_Init, rank 0 makes the ncclUniqueId and MPI_Bcasts it;
//   - torchrun style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set, no MPI launcher): every
//     process sets TERSE_COMM_ID=MASTER_ADDR:(MASTER_PORT + 1; a real torchrun's store holds
//     MASTER_PORT itself), so ncclGetUniqueId returns the same
//     id everywhere and rank 0 runs the bootstrap root at that address (a TERSE_COMM_ID or
//     NCCL_COMM_ID already set wins);
//   - otherwise one process.
// Each process runs -t ranks as threads: nranks = processes * threads, and thread t of process
// p is rank p * threads + t. LOCAL_RANK (or Open MPI's local rank) numbers the device column
// and, with device buffers, picks the GPU (buffer_memory.h).
#pragma once

#include <functional>
#include <string>

namespace terse {
namespace perf {

enum class Launcher { kThreads, kMpi, kTorchrun };

struct LaunchPlan {
  Launcher launcher = Launcher::kThreads;
  int process = 0;    // RANK (torchrun); MPI's rank is known only after MPI_Init
  int processes = 1;  // WORLD_SIZE (torchrun), the launcher's size (MPI)
  int local_rank = 0;
  std::string comm_id;  // torchrun: host:port for TERSE_COMM_ID ("" if already set)
};

// getenv, or a stand-in for tests.
using EnvironmentLookup = std::function<const char*(const char* name)>;

// False with a sentence in `*error` when the environment is contradictory or incomplete (e.g.
// WORLD_SIZE=2 without MASTER_ADDR, or an MPI launch of a binary built without MPI).
bool plan_launch(const EnvironmentLookup& environment, bool built_with_mpi, LaunchPlan* plan,
                 std::string* error);

const char* launcher_name(Launcher launcher);  // "threads", "mpirun", "torchrun"

}  // namespace perf
}  // namespace terse
