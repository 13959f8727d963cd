// Every collective and send/recv entry point: validate what only the API layer can (the raw
// datatype and op values, where the buffers live), let the engine check the rest, and hand
// the call to call_routing.h: host buffers run on the engine as they always did (completed
// when the call returns, the stream ignored); device or managed buffers are staged through
// pinned host memory on the stream (device_staging.h), and the call returns without waiting
// for the stream. A refused call inside a group fails the group.
//
// In wrap mode (comm_mode.h) a call goes to the real NCCL's communicator unless it is an
// allreduce the policy compresses (CompressionEngine::hand_off_uncompressed decides); once the
// real NCCL has taken it, the call counts as one of its tensor's steps. Inside a group it goes
// into the real NCCL's group and counts only among the group's own steps until the group has
// run (call_routing.h: group_steps): a simulated group runs none of its calls, and its
// hand-offs must move no step that another plan, such as the stream proxy's, could see.
#include "collectives/collective_args.h"
#include "common/exception_guard.h"
#include "common/result.h"
#include "plugin/buffer_placement.h"
#include "plugin/call_routing.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"
#include "plugin/pointer_memory.h"
#include "plugin/real_nccl.h"
#include "plugin/reduction_ops.h"
#include "plugin/tensor_description.h"
#include "plugin/wrapped_comm.h"

namespace terse {
namespace {

constexpr int kNoOp = -1;

// Where the call runs, from the memory of the buffers this rank uses. A call that moves
// nothing (count 0) is not classified: it touches no CUDA.
ncclResult_t place_call(const Communicator& engine, const char* function,
                        const CollectiveArgs& args, bool* on_device) {
  *on_device = false;
  if (args.count == 0) return ncclSuccess;
  const BuffersUsed used = buffers_used(args.kind, engine.rank(), args.root);
  const BufferMemory send = used.send ? query_buffer_memory(args.send) : BufferMemory{};
  const BufferMemory recv = used.recv ? query_buffer_memory(args.recv) : BufferMemory{};
  const PathChoice choice = choose_path(used, send, recv, engine.cuda_device());
  const bool names_send = choice.argument != nullptr && choice.argument[0] == 's';
  const void* refused = names_send ? args.send : args.recv;
  const BufferMemory& refused_memory = names_send ? send : recv;
  switch (choice.refusal) {
    case PlacementRefusal::kNone:
      *on_device = choice.path == CallPath::kDevice;
      return ncclSuccess;
    case PlacementRefusal::kMixed: {
      const void* other = names_send ? args.recv : args.send;
      const BufferMemory& other_memory = names_send ? recv : send;
      return fail(ncclInvalidUsage,
                  "%s: %s %p is host memory but %s %p is %s; the buffers of one call must be all "
                  "host memory or all device memory",
                  function, choice.argument, refused, names_send ? "recvbuff" : "sendbuff", other,
                  buffer_kind_name(other_memory.kind));
    }
    case PlacementRefusal::kOtherDevice:
      return fail(ncclInvalidUsage,
                  "%s: %s %p is memory of CUDA device %d, but the communicator (rank %d) uses "
                  "device %d",
                  function, choice.argument, refused, refused_memory.device, engine.rank(),
                  engine.cuda_device());
    case PlacementRefusal::kNoDevice:
      return fail(ncclInvalidUsage,
                  "%s: %s %p is %s, but the communicator (rank %d) has no CUDA device (none was "
                  "current when it was created)",
                  function, choice.argument, refused, buffer_kind_name(refused_memory.kind),
                  engine.rank());
  }
  return ncclSuccess;
}

ncclResult_t check_call(ncclComm* comm, const char* function, CollectiveArgs* args, int raw_type,
                        int raw_op, QueuedCall* call) {
  Communicator* engine = nullptr;
  TERSE_CHECK(engine_of(comm, function, &engine));
  // Checked as an int before it is used as the enum: values outside it are a caller's mistake.
  if (raw_type < 0 || raw_type >= ncclNumTypes) {
    return fail(ncclInvalidArgument, "%s: datatype %d is not an ncclDataType_t", function,
                raw_type);
  }
  args->type = static_cast<ncclDataType_t>(raw_type);
  const void* device_scalar = nullptr;
  if (raw_op != kNoOp) {
    TERSE_CHECK(
        resolve_reduce_op(comm, raw_op, args->type, engine->nranks(), &args->op, &device_scalar));
  }
  TERSE_CHECK(engine->check_arguments(*args));
  TERSE_CHECK(place_call(*engine, function, *args, &call->on_device));
  if (device_scalar != nullptr && args->count > 0) {
    // Read in stream order with the inputs; host buffers run now, before any stream could.
    if (!call->on_device) {
      return fail(ncclInvalidUsage,
                  "%s: op %d scales by a scalar in device memory (%p), which only calls on device "
                  "buffers can read in stream order; these buffers are host memory",
                  function, raw_op, device_scalar);
    }
    call->device_scalar = device_scalar;
  }
  return ncclSuccess;
}

// Wrap mode: the call on the real communicator, with the real library's own operator.
ncclResult_t forward_call(ncclComm* comm, const char* function, const CollectiveArgs& args,
                          int raw_type, int raw_op, cudaStream_t stream) {
  const RealNccl& real = *real_nccl();
  const auto type = static_cast<ncclDataType_t>(raw_type);
  const ncclRedOp_t op = real_op(comm, static_cast<ncclRedOp_t>(raw_op));
  ncclComm_t to = comm->real;
  ncclResult_t result = ncclInternalError;
  switch (args.kind) {
    case CollectiveKind::kAllReduce:
      result = call_real(real.ncclAllReduce, "ncclAllReduce", args.send, args.recv, args.count,
                         type, op, to, stream);
      break;
    case CollectiveKind::kReduce:
      result = call_real(real.ncclReduce, "ncclReduce", args.send, args.recv, args.count, type, op,
                         args.root, to, stream);
      break;
    case CollectiveKind::kBroadcast:
      result = call_real(real.ncclBroadcast, "ncclBroadcast", args.send, args.recv, args.count,
                         type, args.root, to, stream);
      break;
    case CollectiveKind::kReduceScatter:
      result = call_real(real.ncclReduceScatter, "ncclReduceScatter", args.send, args.recv,
                         args.count, type, op, to, stream);
      break;
    case CollectiveKind::kAllGather:
      result = call_real(real.ncclAllGather, "ncclAllGather", args.send, args.recv, args.count,
                         type, to, stream);
      break;
    case CollectiveKind::kAllToAll:
      result = call_real(real.ncclAlltoAll, "ncclAlltoAll", args.send, args.recv, args.count, type,
                         to, stream);
      break;
    case CollectiveKind::kGather:
      result = call_real(real.ncclGather, "ncclGather", args.send, args.recv, args.count, type,
                         args.root, to, stream);
      break;
    case CollectiveKind::kScatter:
      result = call_real(real.ncclScatter, "ncclScatter", args.send, args.recv, args.count, type,
                         args.root, to, stream);
      break;
    case CollectiveKind::kSend:
      result =
          call_real(real.ncclSend, "ncclSend", args.send, args.count, type, args.peer, to, stream);
      break;
    case CollectiveKind::kRecv:
      result =
          call_real(real.ncclRecv, "ncclRecv", args.recv, args.count, type, args.peer, to, stream);
      break;
  }
  return forwarded(result, function, to);
}

// Wrap mode: an allreduce terse hands to the real NCCL, to be counted as a step of its tensor
// once the real NCCL has taken it (a call it refuses never runs).
struct RealHandOff {
  CompressionEngine* engine = nullptr;  // null: nothing to count
  CompressionEngine::HandOff hand_off;
  // The open group's steps on the communicator (null outside a group): the call runs only at
  // the group's end, or never when the group is simulated.
  CompressionEngine::PendingSteps* pending = nullptr;
};

// Wrap mode: whether the call goes to the real NCCL (all but the allreduces the policy
// compresses). A datatype or op terse cannot read goes there too, for the real NCCL to judge.
ncclResult_t goes_to_real(ncclComm* comm, const char* function, const CollectiveArgs& args,
                          int raw_type, int raw_op, bool* real, RealHandOff* hand_off) {
  *real = true;
  if (args.kind != CollectiveKind::kAllReduce) return ncclSuccess;
  Communicator* engine = nullptr;
  TERSE_CHECK(engine_of(comm, function, &engine));
  if (raw_type < 0 || raw_type >= ncclNumTypes) return ncclSuccess;
  CollectiveArgs decided = args;
  decided.type = static_cast<ncclDataType_t>(raw_type);
  const void* device_scalar = nullptr;
  if (resolve_reduce_op(comm, raw_op, decided.type, engine->nranks(), &decided.op,
                        &device_scalar) != ncclSuccess) {
    return ncclSuccess;
  }
  // Taken before anything is handed off, so that a communicator being closed meanwhile
  // refuses the call before the real NCCL has it.
  if (api_group_depth() > 0) TERSE_CHECK(group_steps(comm, &hand_off->pending));
  TERSE_CHECK(engine->compression()->hand_off_uncompressed(decided, hand_off->pending, real,
                                                           &hand_off->hand_off));
  if (*real) hand_off->engine = engine->compression();
  return ncclSuccess;
}

ncclResult_t submit_call(ncclComm* comm, const char* function, CollectiveArgs args, int raw_type,
                         int raw_op, cudaStream_t stream) {
  CommUse use(comm, function);
  if (use.result() != ncclSuccess) {
    refuse_in_group(use.result());
    return use.result();
  }
  if (comm->real != nullptr) {
    bool real = true;
    RealHandOff hand_off;
    ncclResult_t result = goes_to_real(comm, function, args, raw_type, raw_op, &real, &hand_off);
    if (result == ncclSuccess && real) {
      result = forward_call(comm, function, args, raw_type, raw_op, stream);
      if (result == ncclSuccess && hand_off.engine != nullptr) {
        hand_off.engine->count_hand_off(std::move(hand_off.hand_off), "nccl", hand_off.pending);
      }
    }
    if (result != ncclSuccess) refuse_in_group(result);
    if (result != ncclSuccess || real) return result;
  }
  QueuedCall call;
  ncclResult_t result = check_call(comm, function, &args, raw_type, raw_op, &call);
  if (result == ncclSuccess) {
    call.args = args;
    call.stream = call.on_device ? stream : nullptr;
    result = route_call(comm, call);
  }
  if (result != ncclSuccess) refuse_in_group(result);
  return result;
}

CollectiveArgs make_args(CollectiveKind kind, const void* send, void* recv, size_t count) {
  CollectiveArgs args;
  args.kind = kind;
  args.send = send;
  args.recv = recv;
  args.count = count;
  return args;
}

}  // namespace
}  // namespace terse

using terse::CollectiveKind;

TERSE_API ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream) try {
  TERSE_FORWARD_NESTED(ncclAllReduce, sendbuff, recvbuff, count, datatype, op, comm, stream);
  auto args = terse::make_args(CollectiveKind::kAllReduce, sendbuff, recvbuff, count);
  // The compression policy keys an anonymous tensor by the user's buffer, also when the engine
  // sees a staging copy of it.
  args.tensor_address = reinterpret_cast<uint64_t>(recvbuff);
  return terse::submit_call(comm, "ncclAllReduce", args, static_cast<int>(datatype),
                            static_cast<int>(op), stream);
} catch (...) {
  return terse::result_of_current_exception("ncclAllReduce");
}
TERSE_PROFILER_ALIAS(ncclAllReduce)

TERSE_API ncclResult_t terseAllReduceTensor(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, ncclRedOp_t op,
                                            const terseTensor* tensor, ncclComm_t comm,
                                            cudaStream_t stream) try {
  auto args = terse::make_args(CollectiveKind::kAllReduce, sendbuff, recvbuff, count);
  args.tensor_address = reinterpret_cast<uint64_t>(recvbuff);
  if (tensor != nullptr) {
    std::shared_ptr<const terse::TensorRequest> request;
    const ncclResult_t described = terse::describe_tensor(*tensor, count, &request);
    if (described != ncclSuccess) {
      terse::refuse_in_group(described);
      return described;
    }
    args.tensor = std::move(request);
  }
  return terse::submit_call(comm, "terseAllReduceTensor", args, static_cast<int>(datatype),
                            static_cast<int>(op), stream);
} catch (...) {
  return terse::result_of_current_exception("terseAllReduceTensor");
}

TERSE_API ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, int root,
                                  ncclComm_t comm, cudaStream_t stream) try {
  TERSE_FORWARD_NESTED(ncclReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  auto args = terse::make_args(CollectiveKind::kReduce, sendbuff, recvbuff, count);
  args.root = root;
  return terse::submit_call(comm, "ncclReduce", args, static_cast<int>(datatype),
                            static_cast<int>(op), stream);
} catch (...) {
  return terse::result_of_current_exception("ncclReduce");
}
TERSE_PROFILER_ALIAS(ncclReduce)

TERSE_API ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream) try {
  TERSE_FORWARD_NESTED(ncclBroadcast, sendbuff, recvbuff, count, datatype, root, comm, stream);
  auto args = terse::make_args(CollectiveKind::kBroadcast, sendbuff, recvbuff, count);
  args.root = root;
  return terse::submit_call(comm, "ncclBroadcast", args, static_cast<int>(datatype), terse::kNoOp,
                            stream);
} catch (...) {
  return terse::result_of_current_exception("ncclBroadcast");
}
TERSE_PROFILER_ALIAS(ncclBroadcast)

// The legacy in-place broadcast.
TERSE_API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream) try {
  TERSE_FORWARD_NESTED(ncclBcast, buff, count, datatype, root, comm, stream);
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
} catch (...) {
  return terse::result_of_current_exception("ncclBcast");
}
TERSE_PROFILER_ALIAS(ncclBcast)

TERSE_API ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         cudaStream_t stream) try {
  TERSE_FORWARD_NESTED(ncclReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, comm,
                       stream);
  return terse::submit_call(
      comm, "ncclReduceScatter",
      terse::make_args(CollectiveKind::kReduceScatter, sendbuff, recvbuff, recvcount),
      static_cast<int>(datatype), static_cast<int>(op), stream);
} catch (...) {
  return terse::result_of_current_exception("ncclReduceScatter");
}
TERSE_PROFILER_ALIAS(ncclReduceScatter)

TERSE_API ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                     ncclDataType_t datatype, ncclComm_t comm,
                                     cudaStream_t stream) try {
  TERSE_FORWARD_NESTED(ncclAllGather, sendbuff, recvbuff, sendcount, datatype, comm, stream);
  return terse::submit_call(
      comm, "ncclAllGather",
      terse::make_args(CollectiveKind::kAllGather, sendbuff, recvbuff, sendcount),
      static_cast<int>(datatype), terse::kNoOp, stream);
} catch (...) {
  return terse::result_of_current_exception("ncclAllGather");
}
TERSE_PROFILER_ALIAS(ncclAllGather)

TERSE_API ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclComm_t comm,
                                    cudaStream_t stream) try {
  TERSE_FORWARD_NESTED(ncclAlltoAll, sendbuff, recvbuff, count, datatype, comm, stream);
  return terse::submit_call(comm, "ncclAlltoAll",
                            terse::make_args(CollectiveKind::kAllToAll, sendbuff, recvbuff, count),
                            static_cast<int>(datatype), terse::kNoOp, stream);
} catch (...) {
  return terse::result_of_current_exception("ncclAlltoAll");
}
TERSE_PROFILER_ALIAS(ncclAlltoAll)

TERSE_API ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream) try {
  TERSE_FORWARD_NESTED(ncclGather, sendbuff, recvbuff, count, datatype, root, comm, stream);
  auto args = terse::make_args(CollectiveKind::kGather, sendbuff, recvbuff, count);
  args.root = root;
  return terse::submit_call(comm, "ncclGather", args, static_cast<int>(datatype), terse::kNoOp,
                            stream);
} catch (...) {
  return terse::result_of_current_exception("ncclGather");
}
TERSE_PROFILER_ALIAS(ncclGather)

TERSE_API ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                   ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) try {
  TERSE_FORWARD_NESTED(ncclScatter, sendbuff, recvbuff, count, datatype, root, comm, stream);
  auto args = terse::make_args(CollectiveKind::kScatter, sendbuff, recvbuff, count);
  args.root = root;
  return terse::submit_call(comm, "ncclScatter", args, static_cast<int>(datatype), terse::kNoOp,
                            stream);
} catch (...) {
  return terse::result_of_current_exception("ncclScatter");
}
TERSE_PROFILER_ALIAS(ncclScatter)

TERSE_API ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                int peer, ncclComm_t comm, cudaStream_t stream) try {
  TERSE_FORWARD_NESTED(ncclSend, sendbuff, count, datatype, peer, comm, stream);
  auto args = terse::make_args(CollectiveKind::kSend, sendbuff, nullptr, count);
  args.peer = peer;
  return terse::submit_call(comm, "ncclSend", args, static_cast<int>(datatype), terse::kNoOp,
                            stream);
} catch (...) {
  return terse::result_of_current_exception("ncclSend");
}
TERSE_PROFILER_ALIAS(ncclSend)

TERSE_API ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                ncclComm_t comm, cudaStream_t stream) try {
  TERSE_FORWARD_NESTED(ncclRecv, recvbuff, count, datatype, peer, comm, stream);
  auto args = terse::make_args(CollectiveKind::kRecv, nullptr, recvbuff, count);
  args.peer = peer;
  return terse::submit_call(comm, "ncclRecv", args, static_cast<int>(datatype), terse::kNoOp,
                            stream);
} catch (...) {
  return terse::result_of_current_exception("ncclRecv");
}
TERSE_PROFILER_ALIAS(ncclRecv)
