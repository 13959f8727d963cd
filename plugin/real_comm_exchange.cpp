#include "plugin/real_comm_exchange.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/byte_allgather.h"
#include "common/result.h"
#include "plugin/real_nccl.h"
#include "transport/deadline.h"
#include "transport/transport_settings.h"
#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {
namespace {

// How often a wait asks again: an allgather of a few hundred bytes finishes in microseconds
// once every rank is there, so this only bounds the wait's cost while a rank is still coming.
constexpr std::chrono::microseconds kPollInterval{200};

// The longest real-communicator address a rank may send (UCX and IB addresses are a few hundred
// bytes).
constexpr uint64_t kMaxAddressBytes = uint64_t{1} << 20;

ncclResult_t timeout_deadline(Deadline* deadline) {
  double seconds = 0;
  TERSE_CHECK(transport_timeout_seconds(&seconds));
  *deadline = Deadline::after_seconds(seconds);
  return ncclSuccess;
}

ncclResult_t real_async_error(ncclComm_t real, ncclResult_t* state) {
  return call_real(real_nccl()->ncclCommGetAsyncError, "ncclCommGetAsyncError", real, state);
}

#if TERSE_HAVE_CUDA
ncclResult_t cuda_failed(cudaError_t error, const char* what) {
  return fail(ncclUnhandledCudaError, "wrap mode: %s failed: %s", what, cudaGetErrorString(error));
}
#endif

}  // namespace

ncclResult_t wait_until_real_ready(ncclComm_t real, const char* function) {
  Deadline deadline = Deadline::after_seconds(0);
  TERSE_CHECK(timeout_deadline(&deadline));
  for (;;) {
    ncclResult_t state = ncclSuccess;
    TERSE_CHECK(real_async_error(real, &state));
    if (state == ncclSuccess) return ncclSuccess;
    if (state != ncclInProgress) {
      return fail(
          state, "%s: the real NCCL communicator failed to initialise: %s", function,
          real_nccl()->ncclGetLastError != nullptr ? real_nccl()->ncclGetLastError(real) : "");
    }
    if (deadline.expired()) {
      return fail(ncclRemoteError,
                  "%s: the real NCCL communicator was not ready within "
                  "TERSE_TIMEOUT_S",
                  function);
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

ncclResult_t RealCommExchange::allgather(const void* mine, size_t bytes, void* all) const {
  if (device_ >= 0) return allgather_on_device(mine, bytes, all);
  // Host memory (see the header): the in-place form, as a GPU NCCL would also accept.
  char* out = static_cast<char*>(all);
  int rank = 0;
  TERSE_CHECK(call_real(real_nccl()->ncclCommUserRank, "ncclCommUserRank", real_, &rank));
  std::memcpy(out + static_cast<size_t>(rank) * bytes, mine, bytes);
  const ncclResult_t result = call_real(
      real_nccl()->ncclAllGather, "ncclAllGather", static_cast<const void*>(out + rank * bytes),
      static_cast<void*>(out), bytes, ncclUint8, real_, cudaStream_t{nullptr});
  if (result != ncclSuccess) {
    return fail(result,
                "wrap mode: the address exchange (ncclAllGather on the real NCCL) failed: %s",
                real_nccl()->ncclGetLastError(real_));
  }
  return ncclSuccess;
}

ncclResult_t RealCommExchange::allgather_on_device(const void* mine, size_t bytes,
                                                   void* all) const {
#if TERSE_HAVE_CUDA
  const size_t total = bytes * static_cast<size_t>(nranks_);
  cudaError_t error = cudaSetDevice(device_);
  if (error != cudaSuccess) return cuda_failed(error, "cudaSetDevice");
  void* buffer = nullptr;
  error = cudaMalloc(&buffer, total + bytes);
  if (error != cudaSuccess) return cuda_failed(error, "cudaMalloc");
  cudaStream_t stream = nullptr;
  ncclResult_t result = ncclSuccess;
  char* send = static_cast<char*>(buffer) + total;
  error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (error == cudaSuccess) error = cudaMemcpy(send, mine, bytes, cudaMemcpyHostToDevice);
  if (error != cudaSuccess) {
    result = cuda_failed(error, "preparing the address exchange");
  } else {
    result = call_real(real_nccl()->ncclAllGather, "ncclAllGather", static_cast<const void*>(send),
                       buffer, bytes, ncclUint8, real_, stream);
    if (result != ncclSuccess) {
      result = fail(result, "wrap mode: the address exchange (ncclAllGather) failed: %s",
                    real_nccl()->ncclGetLastError(real_));
    }
  }
  // Polled, not synchronised: a rank that never comes must end in an error at the deadline.
  Deadline deadline = Deadline::after_seconds(0);
  if (result == ncclSuccess) result = timeout_deadline(&deadline);
  while (result == ncclSuccess) {
    error = cudaStreamQuery(stream);
    if (error == cudaSuccess) break;
    if (error != cudaErrorNotReady) {
      result = cuda_failed(error, "the address exchange's stream");
      break;
    }
    ncclResult_t state = ncclSuccess;
    result = real_async_error(real_, &state);
    if (result == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
      result = fail(state, "wrap mode: the address exchange failed on the real NCCL: %s",
                    real_nccl()->ncclGetLastError(real_));
    }
    if (result == ncclSuccess && deadline.expired()) {
      result = fail(ncclRemoteError,
                    "wrap mode: the address exchange through the real NCCL did not finish within "
                    "TERSE_TIMEOUT_S");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  if (result == ncclSuccess) {
    error = cudaMemcpy(all, buffer, total, cudaMemcpyDeviceToHost);
    if (error != cudaSuccess) result = cuda_failed(error, "cudaMemcpy of the exchanged addresses");
  }
  // A stream whose collective never finished is left alone (destroying it would not stop the
  // kernel); the caller aborts the real communicator.
  if (stream != nullptr && result == ncclSuccess) cudaStreamDestroy(stream);
  if (result == ncclSuccess) cudaFree(buffer);
  return result;
#else
  (void)mine;
  (void)bytes;
  (void)all;
  return fail(ncclInvalidUsage,
              "wrap mode: the real NCCL communicator is on CUDA device %d, but this libterse.so "
              "was built without CUDA and cannot exchange addresses in device memory",
              device_);
#endif
}

ncclResult_t RealCommExchange::allgather(const std::vector<uint8_t>& mine,
                                         std::vector<std::vector<uint8_t>>* table) const {
  return allgather_bytes([this](const void* bytes, size_t size,
                                void* all) -> Result { return allgather(bytes, size, all); },
                         nranks_, mine, kMaxAddressBytes, "its real communicator's address", table);
}

}  // namespace terse
