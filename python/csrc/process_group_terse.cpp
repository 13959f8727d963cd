#include "process_group_terse.h"

#include <Python.h>

#include <terse/terse.h>

#include <c10/util/Exception.h>

#include <cstring>

namespace torch_terse {
namespace {

// The Store key of a group's unique id: torch.distributed gives each group a prefixed store.
constexpr const char* kUniqueIdKey = "terse_unique_id";

ncclDataType_t nccl_type(const at::Tensor& tensor, const char* call) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kChar:
      return ncclInt8;
    case at::kByte:
    case at::kBool:  // as PyTorch's NCCL backend does: one byte, 0 or 1
      return ncclUint8;
    case at::kInt:
      return ncclInt32;
    case at::kLong:
      return ncclInt64;
    default:
      TORCH_CHECK(false, "terse ", call, ": dtype ", tensor.scalar_type(),
                  " is not one torch and NCCL share");
  }
}

ncclRedOp_t nccl_op(const c10d::ReduceOp& op, const char* call) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return ncclSum;
    case c10d::ReduceOp::AVG:
      return ncclAvg;
    case c10d::ReduceOp::PRODUCT:
      return ncclProd;
    case c10d::ReduceOp::MIN:
      return ncclMin;
    case c10d::ReduceOp::MAX:
      return ncclMax;
    default:
      TORCH_CHECK(false, "terse ", call, ": reduce op ", static_cast<int>(op),
                  " is not supported (sum, avg, product, min and max are)");
  }
}

// One dense CPU tensor, as every call takes.
void check_tensor(const at::Tensor& tensor, const char* call, const char* what) {
  TORCH_CHECK(tensor.device().is_cpu(), "terse ", call, ": ", what, " is on ", tensor.device(),
              "; this build of torch_terse takes CPU tensors");
  TORCH_CHECK(tensor.layout() == at::kStrided, "terse ", call, ": ", what, " is not dense");
  TORCH_CHECK(tensor.is_contiguous(), "terse ", call, ": ", what, " is not contiguous");
}

void check_single(const std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "terse ", call, ": takes one tensor per process, got ",
              tensors.size());
  check_tensor(tensors[0], call, "the tensor");
}

}  // namespace

// torch's group timeout is not used: TERSE_TIMEOUT_S bounds every call of the communicator.
ProcessGroupTerse::ProcessGroupTerse(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                     int size, std::chrono::milliseconds /*timeout*/)
    : TORCH_TERSE_BASE(rank, size) {
  ncclUniqueId id;
  if (rank == 0) {
    ncclResult_t result = ncclGetUniqueId(&id);
    TORCH_CHECK(result == ncclSuccess,
                "terse: ncclGetUniqueId failed: ", ncclGetErrorString(result), ": ",
                ncclGetLastError(nullptr));
    std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(&id),
                               reinterpret_cast<uint8_t*>(&id) + sizeof(id));
    store->set(kUniqueIdKey, bytes);
  } else {
    std::vector<uint8_t> bytes = store->get(kUniqueIdKey);
    TORCH_CHECK(bytes.size() == sizeof(id), "terse: the store's unique id has ", bytes.size(),
                " bytes, not ", sizeof(id));
    memcpy(&id, bytes.data(), sizeof(id));
  }
  ncclResult_t result = ncclCommInitRank(&comm_, size, id, rank);
  TORCH_CHECK(result == ncclSuccess, "terse: ncclCommInitRank (rank ", rank, " of ", size,
              ") failed: ", ncclGetErrorString(result), ": ", ncclGetLastError(nullptr));
  worker_ = std::thread([this] { worker_loop(); });
}

ProcessGroupTerse::~ProcessGroupTerse() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  // Python may drop the last reference with the GIL held, while the worker is letting go of a
  // job's tensors, which takes the GIL when they have Python objects: join without it.
  if (worker_.joinable()) {
    if (Py_IsInitialized() && PyGILState_Check()) {
      Py_BEGIN_ALLOW_THREADS worker_.join();
      Py_END_ALLOW_THREADS
    } else {
      worker_.join();
    }
  }
  if (comm_ != nullptr) ncclCommDestroy(comm_);
}

c10::intrusive_ptr<TORCH_TERSE_BASE> ProcessGroupTerse::create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  return c10::make_intrusive<ProcessGroupTerse>(store, rank, size, timeout);
}

void ProcessGroupTerse::worker_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued ran
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::enqueue(c10d::OpType type, const char* name,
                                                          std::vector<at::Tensor> outputs,
                                                          Job run) {
  auto work = c10::make_intrusive<TerseWork>(getRank(), type, name, std::move(outputs));
  Job job = [work, run = std::move(run)] {
    std::exception_ptr error;
    try {
      run();
    } catch (...) {
      error = std::current_exception();
    }
    work->complete(error);
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
  return work;
}

void ProcessGroupTerse::run_in_order(Job run) {
  auto work = enqueue(c10d::OpType::UNKNOWN, "terse", {}, std::move(run));
  work->wait();
}

void ProcessGroupTerse::check(ncclResult_t result, const char* call) const {
  if (result == ncclSuccess) return;
  TORCH_CHECK(false, "terse ", call, " failed on rank ", getRank(), ": ",
              ncclGetErrorString(result), ": ", ncclGetLastError(comm_));
}

std::string ProcessGroupTerse::residual_name(const at::Tensor& tensor, const c10d::ReduceOp& op) {
  const bool compressible =
      (op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG) &&
      (tensor.scalar_type() == at::kFloat || tensor.scalar_type() == at::kHalf ||
       tensor.scalar_type() == at::kBFloat16);
  if (!compressible || !tensor.has_storage()) return "";
  const c10::Storage& storage = tensor.storage();
  std::lock_guard<std::mutex> lock(storages_mutex_);
  auto found = storages_.find(storage.unsafeGetStorageImpl());
  if (found == storages_.end()) {
    // A storage not seen before: storages that died are forgotten first (their residuals age
    // out in the engine as any idle tensor's do, alike on every rank), so the map stays as large
    // as the live gradient buffers. A known storage is alive (this tensor holds it): no sweep.
    for (auto it = storages_.begin(); it != storages_.end();) {
      it = it->second.storage.expired() ? storages_.erase(it) : std::next(it);
    }
    found = storages_
                .emplace(storage.unsafeGetStorageImpl(),
                         SeenStorage{storage.getWeakStorageImpl(), next_storage_serial_++})
                .first;
  }
  const auto offset =
      static_cast<const char*>(tensor.data_ptr()) - static_cast<const char*>(storage.data());
  return "torch_terse/s" + std::to_string(found->second.serial) + "+" + std::to_string(offset);
}

void ProcessGroupTerse::run_allreduce(const at::Tensor& tensor, ncclDataType_t type, ncclRedOp_t op,
                                      const Description& description, const char* call) {
  if (description.name.empty()) {
    check(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type, op, comm_,
                        nullptr),
          call);
    return;
  }
  terseTensor described = TERSE_TENSOR_INITIALIZER;
  described.name = description.name.c_str();
  described.codec = description.codec.empty() ? nullptr : description.codec.c_str();
  described.ndims = static_cast<int>(description.shape.size());
  for (size_t i = 0; i < description.shape.size(); ++i) described.shape[i] = description.shape[i];
  check(terseAllReduceTensor(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type, op,
                             &described, comm_, nullptr),
        call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  check_single(tensors, "broadcast");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "terse broadcast: root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
  at::Tensor tensor = tensors[0];
  ncclDataType_t type = nccl_type(tensor, "broadcast");
  int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, "terse:broadcast", {tensor}, [this, tensor, type, root] {
    check(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type, root, comm_,
                        nullptr),
          "broadcast");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  check_single(tensors, "allreduce");
  at::Tensor tensor = tensors[0];
  ncclDataType_t type = nccl_type(tensor, "allreduce");
  ncclRedOp_t op = nccl_op(opts.reduceOp, "allreduce");
  Description description{residual_name(tensor, opts.reduceOp)};
  return enqueue(c10d::OpType::ALLREDUCE, "terse:all_reduce", {tensor},
                 [this, tensor, type, op, description] {
                   run_allreduce(tensor, type, op, description, "allreduce");
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "terse allreduce_coalesced: no tensors");
  std::vector<ncclDataType_t> types;
  std::vector<Description> descriptions;
  for (const at::Tensor& tensor : tensors) {
    check_tensor(tensor, "allreduce_coalesced", "a tensor");
    types.push_back(nccl_type(tensor, "allreduce_coalesced"));
    descriptions.push_back(Description{residual_name(tensor, opts.reduceOp)});
  }
  ncclRedOp_t op = nccl_op(opts.reduceOp, "allreduce_coalesced");
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, "terse:all_reduce_coalesced", tensors,
                 [this, tensors, types, op, descriptions] {
                   for (size_t i = 0; i < tensors.size(); ++i) {
                     run_allreduce(tensors[i], types[i], op, descriptions[i],
                                   "allreduce_coalesced");
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  check_single(tensors, "reduce");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "terse reduce: root ", opts.rootRank,
              " is not a rank of this group of ", getSize());
  at::Tensor tensor = tensors[0];
  ncclDataType_t type = nccl_type(tensor, "reduce");
  ncclRedOp_t op = nccl_op(opts.reduceOp, "reduce");
  int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::REDUCE, "terse:reduce", {tensor}, [this, tensor, type, op, root] {
    check(ncclReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type, op, root, comm_,
                     nullptr),
          "reduce");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::_allgather_base(at::Tensor& output,
                                                                  at::Tensor& input,
                                                                  const c10d::AllgatherOptions&) {
  check_tensor(input, "allgather", "the input");
  check_tensor(output, "allgather", "the output");
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "terse allgather: the output has ",
              output.numel(), " elements, not ", getSize(), " x ", input.numel());
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "terse allgather: the output's dtype differs from the input's");
  ncclDataType_t type = nccl_type(input, "allgather");
  return enqueue(c10d::OpType::_ALLGATHER_BASE, "terse:_all_gather_base", {output},
                 [this, output, input, type] {
                   check(ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), type,
                                       comm_, nullptr),
                         "allgather");
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  check_single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "terse allgather: takes one list of ", getSize(), " output tensors");
  at::Tensor input = inputs[0];
  for (const at::Tensor& out : outputs[0]) {
    TORCH_CHECK(out.numel() == input.numel() && out.scalar_type() == input.scalar_type(),
                "terse allgather: every output must match the input's size and dtype");
  }
  ncclDataType_t type = nccl_type(input, "allgather");
  std::vector<at::Tensor> targets = outputs[0];
  return enqueue(
      c10d::OpType::ALLGATHER, "terse:all_gather", targets, [this, input, targets, type] {
        at::Tensor flat = at::empty({input.numel() * getSize()}, input.options());
        check(ncclAllGather(input.data_ptr(), flat.data_ptr(), input.numel(), type, comm_, nullptr),
              "allgather");
        for (int r = 0; r < getSize(); ++r) {
          targets[r].copy_(
              flat.narrow(0, r * input.numel(), input.numel()).view(targets[r].sizes()));
        }
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_tensor(input, "reduce_scatter", "the input");
  check_tensor(output, "reduce_scatter", "the output");
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "terse reduce_scatter: the input has ",
              input.numel(), " elements, not ", getSize(), " x ", output.numel());
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "terse reduce_scatter: the output's dtype differs from the input's");
  ncclDataType_t type = nccl_type(input, "reduce_scatter");
  ncclRedOp_t op = nccl_op(opts.reduceOp, "reduce_scatter");
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "terse:_reduce_scatter_base", {output},
                 [this, output, input, type, op] {
                   check(ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(),
                                           type, op, comm_, nullptr),
                         "reduce_scatter");
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  check_single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "terse reduce_scatter: takes one list of ", getSize(), " input tensors");
  at::Tensor output = outputs[0];
  for (const at::Tensor& in : inputs[0]) {
    TORCH_CHECK(in.numel() == output.numel() && in.scalar_type() == output.scalar_type(),
                "terse reduce_scatter: every input must match the output's size and dtype");
  }
  ncclDataType_t type = nccl_type(output, "reduce_scatter");
  ncclRedOp_t op = nccl_op(opts.reduceOp, "reduce_scatter");
  std::vector<at::Tensor> pieces = inputs[0];
  return enqueue(c10d::OpType::REDUCE_SCATTER, "terse:reduce_scatter", {output},
                 [this, output, pieces, type, op] {
                   std::vector<at::Tensor> flat_pieces;
                   for (const at::Tensor& piece : pieces) flat_pieces.push_back(piece.reshape(-1));
                   at::Tensor flat = at::cat(flat_pieces);
                   check(ncclReduceScatter(flat.data_ptr(), output.data_ptr(), output.numel(), type,
                                           op, comm_, nullptr),
                         "reduce_scatter");
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions&) {
  check_tensor(input, "alltoall", "the input");
  check_tensor(output, "alltoall", "the output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "terse alltoall: the output's dtype differs from the input's");
  const int size = getSize();
  TORCH_CHECK(input.dim() > 0 && output.dim() > 0, "terse alltoall: tensors need a dimension");
  // Rows of dimension 0 go to each rank: equal shares when no split sizes are given.
  auto offsets_of = [size](const at::Tensor& t, const std::vector<int64_t>& splits,
                           const char* what) {
    const int64_t row = t.numel() / std::max<int64_t>(t.size(0), 1);
    std::vector<int64_t> counts(size), starts(size);
    if (splits.empty()) {
      TORCH_CHECK(t.size(0) % size == 0, "terse alltoall: the ", what, "'s first dimension ",
                  t.size(0), " does not divide among ", size, " ranks");
      for (int r = 0; r < size; ++r) counts[r] = t.size(0) / size * row;
    } else {
      TORCH_CHECK(static_cast<int>(splits.size()) == size, "terse alltoall: ", what,
                  " split sizes have ", splits.size(), " entries, not ", size);
      int64_t total = 0;
      for (int r = 0; r < size; ++r) {
        TORCH_CHECK(splits[r] >= 0, "terse alltoall: a negative ", what, " split size");
        counts[r] = splits[r] * row;
        total += splits[r];
      }
      TORCH_CHECK(total == t.size(0), "terse alltoall: the ", what, " split sizes sum to ", total,
                  ", not the first dimension ", t.size(0));
    }
    int64_t start = 0;
    for (int r = 0; r < size; ++r) {
      starts[r] = start;
      start += counts[r];
    }
    return std::make_pair(counts, starts);
  };
  auto in = offsets_of(input, input_split_sizes, "input");
  auto out = offsets_of(output, output_split_sizes, "output");
  ncclDataType_t type = nccl_type(input, "alltoall");
  const size_t element = input.element_size();
  return enqueue(
      c10d::OpType::ALLTOALL_BASE, "terse:all_to_all", {output},
      [this, output, input, in, out, type, element, size] {
        auto* send_base = static_cast<char*>(input.data_ptr());
        auto* recv_base = static_cast<char*>(output.data_ptr());
        check(ncclGroupStart(), "alltoall");
        for (int r = 0; r < size; ++r) {
          check(ncclSend(send_base + in.second[r] * element, in.first[r], type, r, comm_, nullptr),
                "alltoall");
          check(
              ncclRecv(recv_base + out.second[r] * element, out.first[r], type, r, comm_, nullptr),
              "alltoall");
        }
        check(ncclGroupEnd(), "alltoall");
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions&) {
  const int size = getSize();
  TORCH_CHECK(static_cast<int>(outputs.size()) == size && static_cast<int>(inputs.size()) == size,
              "terse alltoall: takes ", size, " input and ", size, " output tensors");
  for (int r = 0; r < size; ++r) {
    check_tensor(inputs[r], "alltoall", "an input");
    check_tensor(outputs[r], "alltoall", "an output");
    TORCH_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type() &&
                    outputs[r].scalar_type() == inputs[0].scalar_type(),
                "terse alltoall: every tensor must have the same dtype");
  }
  ncclDataType_t type = nccl_type(inputs[0], "alltoall");
  return enqueue(
      c10d::OpType::ALLTOALL, "terse:all_to_all", outputs, [this, outputs, inputs, type, size] {
        check(ncclGroupStart(), "alltoall");
        for (int r = 0; r < size; ++r) {
          check(ncclSend(inputs[r].data_ptr(), inputs[r].numel(), type, r, comm_, nullptr),
                "alltoall");
          check(ncclRecv(outputs[r].data_ptr(), outputs[r].numel(), type, r, comm_, nullptr),
                "alltoall");
        }
        check(ncclGroupEnd(), "alltoall");
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::send(std::vector<at::Tensor>& tensors,
                                                       int dst_rank, int tag) {
  return point_to_point(tensors, dst_rank, tag, /*sending=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::recv(std::vector<at::Tensor>& tensors,
                                                       int src_rank, int tag) {
  return point_to_point(tensors, src_rank, tag, /*sending=*/false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::point_to_point(std::vector<at::Tensor>& tensors,
                                                                 int peer, int tag, bool sending) {
  const char* call = sending ? "send" : "recv";
  check_single(tensors, call);
  TORCH_CHECK(peer >= 0 && peer < getSize() && peer != getRank(), "terse ", call, ": ",
              sending ? "destination " : "source ", peer, " is not another rank of this group");
  TORCH_CHECK(tag == 0, "terse ", call, ": tag ", tag,
              ": terse matches point-to-point messages in call order, as NCCL does, not by tag");
  at::Tensor tensor = tensors[0];
  ncclDataType_t type = nccl_type(tensor, call);
  return enqueue(
      sending ? c10d::OpType::SEND : c10d::OpType::RECV, sending ? "terse:send" : "terse:recv",
      {tensor}, [this, tensor, type, peer, sending, call] {
        check(sending ? ncclSend(tensor.data_ptr(), tensor.numel(), type, peer, comm_, nullptr)
                      : ncclRecv(tensor.data_ptr(), tensor.numel(), type, peer, comm_, nullptr),
              call);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::barrier(const c10d::BarrierOptions&) {
  at::Tensor token = at::zeros({1}, at::kInt);
  return enqueue(c10d::OpType::BARRIER, "terse:barrier", {}, [this, token] {
    check(ncclAllReduce(token.data_ptr(), token.data_ptr(), 1, ncclInt32, ncclSum, comm_, nullptr),
          "barrier");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTerse::allreduce_named(at::Tensor tensor,
                                                                  const std::string& name,
                                                                  const std::string& codec,
                                                                  bool average) {
  check_tensor(tensor, "allreduce_named", "the tensor");
  ncclDataType_t type = nccl_type(tensor, "allreduce_named");
  Description description{name, codec, {tensor.sizes().begin(), tensor.sizes().end()}};
  TORCH_CHECK(description.shape.size() <= TERSE_MAX_DIMS, "terse allreduce_named: more than ",
              TERSE_MAX_DIMS, " dimensions");
  ncclRedOp_t op = average ? ncclAvg : ncclSum;
  return enqueue(c10d::OpType::ALLREDUCE, "terse:all_reduce", {tensor},
                 [this, tensor, type, op, description] {
                   run_allreduce(tensor, type, op, description, "allreduce_named");
                 });
}

terseStats ProcessGroupTerse::stats() {
  terseStats stats;
  memset(&stats, 0, sizeof(stats));
  stats.size = sizeof(stats);
  run_in_order([this, &stats] { check(terseCommGetStats(comm_, &stats), "stats"); });
  return stats;
}

void ProcessGroupTerse::set_codec(const std::string& codec) {
  run_in_order([this, codec] { check(terseCommSetCodec(comm_, codec.c_str()), "set_codec"); });
}

void ProcessGroupTerse::reset_residual(const std::string& name) {
  run_in_order([this, name] {
    check(terseCommResetResidual(comm_, name.empty() ? nullptr : name.c_str()), "reset_residual");
  });
}

}  // namespace torch_terse
