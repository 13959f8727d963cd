// What an ncclComm_t points to: nccl.h leaves `struct ncclComm` incomplete, and the plugin
// completes it as terse's engine communicator plus what only the API layer knows (the
// PreMulSum operators created on it, and whether a group has yet to create it).
#pragma once

#include <nccl.h>

#include <map>
#include <memory>
#include <mutex>

#include "collectives/communicator.h"
#include "transport/unique_id.h"

// One ncclRedOpCreatePreMulSum operator: the scalar is read at creation (host immediate) or at
// each call (a host pointer given as ncclScalarDevice, which NCCL also dereferences later).
struct PreMulSumOp {
  ncclDataType_t type = ncclFloat32;
  bool read_at_call = false;
  double immediate = 1.0;
  const void* scalar = nullptr;
};

struct ncclComm {
  // Null between ncclCommInitRank inside a group and that group's ncclGroupEnd.
  std::unique_ptr<terse::Communicator> engine;

  std::mutex ops_mutex;
  std::map<int, PreMulSumOp> dynamic_ops;  // by ncclRedOp_t value (>= ncclNumOps)
  int next_dynamic_op = ncclNumOps;
};

namespace terse {

// ncclCommInitRank inside a group: created at the outermost ncclGroupEnd, every pending rank on
// its own thread, since ranks initialised from one thread must rendezvous together.
struct PendingInit {
  ncclComm* comm = nullptr;
  UniqueId id{};
  int rank = 0;
  int nranks = 0;
  int cuda_device = -1;
};
void defer_init(const PendingInit& init);
// ncclCommFinalize inside a group: run at the outermost ncclGroupEnd after the group's calls,
// every pending communicator on its own thread (closing flushes, which needs the peers).
void defer_finalize(Communicator* engine);
// The communicator's engine, or ncclInvalidUsage/ncclInvalidArgument naming `function` when
// `comm` is null or not yet created.
ncclResult_t engine_of(ncclComm* comm, const char* function, Communicator** engine);
// The CUDA device the calling thread uses (-1 without CUDA or without a device).
int current_cuda_device();

}  // namespace terse
