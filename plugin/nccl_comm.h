// What an ncclComm_t points to: nccl.h leaves `struct ncclComm` incomplete, and the plugin
// completes it as terse's engine communicator plus what only the API layer knows (the
// PreMulSum operators created on it, whether a group has yet to create it, and the staging of
// device buffers with its stream proxy).
#pragma once

#include <nccl.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "collectives/communicator.h"
#include "plugin/device_staging.h"
#include "transport/unique_id.h"

// One ncclRedOpCreatePreMulSum operator: the scalar is read at creation (host immediate) or at
// each call (ncclScalarDevice, which NCCL also dereferences later): from the host when it is
// host memory, else staged with each call's inputs in stream order (device_staging.h).
struct PreMulSumOp {
  ncclDataType_t type = ncclFloat32;
  bool read_at_call = false;
  bool scalar_on_device = false;  // device or managed memory
  double immediate = 1.0;
  const void* scalar = nullptr;
};

struct ncclComm {
  // Null between ncclCommInitRank inside a group and that group's ncclGroupEnd.
  std::unique_ptr<terse::Communicator> engine;
  // Wrap mode (comm_mode.h): the real NCCL's communicator, which gets every call the policy
  // leaves alone (a handle of the real library, never dereferenced here). Null in engine mode.
  ncclComm_t real = nullptr;

  std::mutex ops_mutex;
  std::map<int, PreMulSumOp> dynamic_ops;  // by ncclRedOp_t value (>= ncclNumOps)
  int next_dynamic_op = ncclNumOps;
  // Wrap mode: each of dynamic_ops' values as the real communicator's own operator.
  std::map<int, ncclRedOp_t> real_ops;

  // Created at the first call with device buffers (call_routing.h); from then on every call
  // on the communicator goes through its stream proxy. Guarded by staging_mutex.
  std::mutex staging_mutex;
  std::unique_ptr<terse::DeviceStaging> staging;

  // Lifetime (comm_close.cpp). One use for the handle the user holds, one for each call in
  // progress on the communicator; ncclCommDestroy/Abort give up the handle's use, and whoever
  // gives up the last one hands the engine and staging to a closing thread and frees this
  // struct. So an abort from one thread never frees what a call in another still uses.
  std::atomic<int> uses{1};
  std::atomic<bool> closing{false};  // destroyed or aborted: no call may start
  std::atomic<bool> aborted{false};  // closed by force when the last use ends
};

namespace terse {

// A call's use of `comm` for its whole duration: fails with ncclInvalidUsage (naming
// `function`) when the communicator is being destroyed or aborted.
class CommUse {
 public:
  CommUse(ncclComm* comm, const char* function);
  ~CommUse();
  CommUse(const CommUse&) = delete;
  CommUse& operator=(const CommUse&) = delete;
  ncclResult_t result() const { return result_; }

 private:
  ncclComm* comm_;
  ncclResult_t result_ = ncclSuccess;
};

// The same by hand, for a use that outlives one scope (a call queued in a group until
// ncclGroupEnd). release_comm gives up a use; the last one closes the communicator.
ncclResult_t acquire_comm(ncclComm* comm, const char* function);
void release_comm(ncclComm* comm);

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
// Holds a use of `comm` until then; fails when it is being destroyed or aborted.
ncclResult_t defer_finalize(ncclComm* comm);
// ncclCommFinalize's work: the engine's finalize, after every call already made on `comm`.
ncclResult_t finalize_in_order(ncclComm* comm);
// The communicator's engine, or ncclInvalidUsage/ncclInvalidArgument naming `function` when
// `comm` is null or not yet created.
ncclResult_t engine_of(ncclComm* comm, const char* function, Communicator** engine);
// The CUDA device the calling thread uses (-1 without CUDA or without a device).
int current_cuda_device();

}  // namespace terse
