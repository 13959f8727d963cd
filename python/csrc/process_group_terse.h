// torch.distributed's backend "terse": a process group whose collectives run on one terse
// communicator (terse's own engine over UCX, linked instead of NCCL), each on this group's
// worker thread in the order they were called, so that every call returns at once with a Work.
// The rendezvous is the Store torch.distributed gives every backend: rank 0 puts terse's unique
// id there and the others read it. Compression follows TERSE_CODEC / TERSE_POLICY as for any
// terse communicator, or set_codec().
//
// Error feedback is keyed by the tensor's storage, not its address: a sum or average allreduce
// of a floating tensor is named "torch_terse/s<serial>+<byte offset>", the serial given to its
// storage when this group first saw it (every rank sees the same storages in the same call
// order). A storage freed and another allocated at the same address (DDP's buckets rebuilt after
// the first step) so gets a fresh residual, never the old tensor's. A named allreduce
// (allreduce_named, which the DDP comm hook uses) uses the caller's name.
//
// PyTorch 1.x registers a ProcessGroup subclass; 2.x a Backend, which a ProcessGroup wraps.
#pragma once

#include <nccl.h>
#include <terse/terse.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "terse_work.h"

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define TORCH_TERSE_BASE c10d::Backend
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define TORCH_TERSE_BASE c10d::ProcessGroup
#endif

namespace torch_terse {

class ProcessGroupTerse : public TORCH_TERSE_BASE {
 public:
  ProcessGroupTerse(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
  ~ProcessGroupTerse() override;

  const std::string getBackendName() const override { return "terse"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // A sum or average allreduce whose residual memory (and policy match) follows `name`;
  // `codec` ("" for the policy's choice) overrides the policy for this call.
  c10::intrusive_ptr<c10d::Work> allreduce_named(at::Tensor tensor, const std::string& name,
                                                 const std::string& codec, bool average);
  // The communicator's terseStats, read in order with the collectives already called.
  terseStats stats();
  // terseCommSetCodec / terseCommResetResidual, in order with the collectives already called.
  void set_codec(const std::string& codec);
  void reset_residual(const std::string& name);

  static c10::intrusive_ptr<TORCH_TERSE_BASE> create(const c10::intrusive_ptr<c10d::Store>& store,
                                                     int rank, int size,
                                                     std::chrono::milliseconds timeout);

 private:
  using Job = std::function<void()>;
  // Queues `run` on the worker; the Work completes with `outputs` once it returned, or with
  // its exception.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* name,
                                         std::vector<at::Tensor> outputs, Job run);
  // Runs `run` on the worker and waits for it (queries and settings, in call order).
  void run_in_order(Job run);
  void worker_loop();
  // send and recv: one tensor to or from `peer`.
  c10::intrusive_ptr<c10d::Work> point_to_point(std::vector<at::Tensor>& tensors, int peer, int tag,
                                                bool sending);
  // Throws naming `call` when `result` is not ncclSuccess.
  void check(ncclResult_t result, const char* call) const;
  // The residual name of `tensor`'s memory (above); "" when terse would not compress the call.
  std::string residual_name(const at::Tensor& tensor, const c10d::ReduceOp& op);
  // What terseAllReduceTensor is told of a tensor; an empty name: a plain ncclAllReduce.
  struct Description {
    std::string name;
    std::string codec;           // "" for the policy's choice
    std::vector<int64_t> shape;  // none: terse picks its own view
  };
  void run_allreduce(const at::Tensor& tensor, ncclDataType_t type, ncclRedOp_t op,
                     const Description& description, const char* call);

  struct SeenStorage {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;  // holds the address until it expired
    uint64_t serial;
  };
  std::mutex storages_mutex_;
  std::map<const c10::StorageImpl*, SeenStorage> storages_;
  uint64_t next_storage_serial_ = 0;

  ncclComm_t comm_ = nullptr;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace torch_terse
