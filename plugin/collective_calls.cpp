// Every collective and send/recv entry point: validate what only the API layer can (the raw
// datatype and op values, device buffers), fill CollectiveArgs, and hand the call to the
// engine's group layer (collectives/group.h), which checks the rest and runs or queues it.
// The stream is accepted and ignored: buffers are host memory, and a call outside a group has
// completed when it returns.
#include "collectives/collective_args.h"
#include "collectives/group.h"
#include "common/result.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"
#include "plugin/reduction_ops.h"
#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {
namespace {

constexpr int kNoOp = -1;

// Device buffers are not staged yet; refusing them beats reading device addresses on the host.
ncclResult_t check_host_buffer(const void* buffer, const char* name, const char* function) {
#if TERSE_HAVE_CUDA
  if (buffer == nullptr) return ncclSuccess;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, buffer) != cudaSuccess) {
    cudaGetLastError();  // no CUDA here, or not a CUDA address: host memory
    return ncclSuccess;
  }
  if (attributes.type == cudaMemoryTypeDevice) {
    return fail(ncclInvalidUsage,
                "%s: %s %p is device memory; device buffers are not supported yet", function, name,
                buffer);
  }
#else
  (void)buffer;
  (void)name;
  (void)function;
#endif
  return ncclSuccess;
}

ncclResult_t submit_call(ncclComm* comm, const char* function, CollectiveArgs args, int raw_type,
                         int raw_op) {
  Communicator* engine = nullptr;
  TERSE_CHECK(engine_of(comm, function, &engine));
  // Checked as an int before it is used as the enum: values outside it are a caller's mistake.
  if (raw_type < 0 || raw_type >= ncclNumTypes) {
    return fail(ncclInvalidArgument, "%s: datatype %d is not an ncclDataType_t", function,
                raw_type);
  }
  args.type = static_cast<ncclDataType_t>(raw_type);
  TERSE_CHECK(check_host_buffer(args.send, "sendbuff", function));
  TERSE_CHECK(check_host_buffer(args.recv, "recvbuff", function));
  if (raw_op != kNoOp) {
    TERSE_CHECK(resolve_reduce_op(comm, raw_op, args.type, engine->nranks(), &args.op));
  }
  return submit(engine, args);
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
                                     cudaStream_t /*stream*/) {
  return terse::submit_call(comm, "ncclAllReduce",
                            terse::make_args(CollectiveKind::kAllReduce, sendbuff, recvbuff, count),
                            static_cast<int>(datatype), static_cast<int>(op));
}
TERSE_PROFILER_ALIAS(ncclAllReduce)

TERSE_API ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, int root,
                                  ncclComm_t comm, cudaStream_t /*stream*/) {
  auto args = terse::make_args(CollectiveKind::kReduce, sendbuff, recvbuff, count);
  args.root = root;
  return terse::submit_call(comm, "ncclReduce", args, static_cast<int>(datatype),
                            static_cast<int>(op));
}
TERSE_PROFILER_ALIAS(ncclReduce)

TERSE_API ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t /*stream*/) {
  auto args = terse::make_args(CollectiveKind::kBroadcast, sendbuff, recvbuff, count);
  args.root = root;
  return terse::submit_call(comm, "ncclBroadcast", args, static_cast<int>(datatype), terse::kNoOp);
}
TERSE_PROFILER_ALIAS(ncclBroadcast)

// The legacy in-place broadcast.
TERSE_API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
TERSE_PROFILER_ALIAS(ncclBcast)

TERSE_API ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         cudaStream_t /*stream*/) {
  return terse::submit_call(
      comm, "ncclReduceScatter",
      terse::make_args(CollectiveKind::kReduceScatter, sendbuff, recvbuff, recvcount),
      static_cast<int>(datatype), static_cast<int>(op));
}
TERSE_PROFILER_ALIAS(ncclReduceScatter)

TERSE_API ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                     ncclDataType_t datatype, ncclComm_t comm,
                                     cudaStream_t /*stream*/) {
  return terse::submit_call(
      comm, "ncclAllGather",
      terse::make_args(CollectiveKind::kAllGather, sendbuff, recvbuff, sendcount),
      static_cast<int>(datatype), terse::kNoOp);
}
TERSE_PROFILER_ALIAS(ncclAllGather)

TERSE_API ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclComm_t comm,
                                    cudaStream_t /*stream*/) {
  return terse::submit_call(comm, "ncclAlltoAll",
                            terse::make_args(CollectiveKind::kAllToAll, sendbuff, recvbuff, count),
                            static_cast<int>(datatype), terse::kNoOp);
}
TERSE_PROFILER_ALIAS(ncclAlltoAll)

TERSE_API ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t /*stream*/) {
  auto args = terse::make_args(CollectiveKind::kGather, sendbuff, recvbuff, count);
  args.root = root;
  return terse::submit_call(comm, "ncclGather", args, static_cast<int>(datatype), terse::kNoOp);
}
TERSE_PROFILER_ALIAS(ncclGather)

TERSE_API ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                   ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t /*stream*/) {
  auto args = terse::make_args(CollectiveKind::kScatter, sendbuff, recvbuff, count);
  args.root = root;
  return terse::submit_call(comm, "ncclScatter", args, static_cast<int>(datatype), terse::kNoOp);
}
TERSE_PROFILER_ALIAS(ncclScatter)

TERSE_API ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                int peer, ncclComm_t comm, cudaStream_t /*stream*/) {
  auto args = terse::make_args(CollectiveKind::kSend, sendbuff, nullptr, count);
  args.peer = peer;
  return terse::submit_call(comm, "ncclSend", args, static_cast<int>(datatype), terse::kNoOp);
}
TERSE_PROFILER_ALIAS(ncclSend)

TERSE_API ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                ncclComm_t comm, cudaStream_t /*stream*/) {
  auto args = terse::make_args(CollectiveKind::kRecv, nullptr, recvbuff, count);
  args.peer = peer;
  return terse::submit_call(comm, "ncclRecv", args, static_cast<int>(datatype), terse::kNoOp);
}
TERSE_PROFILER_ALIAS(ncclRecv)
