#include "codecs/wire_format.h"

#include "codecs/device_support.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>

#include "codecs/cuda/wire_header_kernels.h"
#endif

namespace terse {

ncclResult_t read_header(const void* message, size_t message_bytes, CodecId codec, size_t count,
                         const DecodeContext& context, WireHeader* header) {
  if (message == nullptr) return fail(ncclInvalidArgument, "message is null");
  if (message_bytes < kWireHeaderBytes) {
    return fail(ncclInvalidArgument, "message of %zu bytes is shorter than the %zu-byte header",
                message_bytes, kWireHeaderBytes);
  }
  if (context.memory == Memory::kDevice && context.host_message != nullptr) {
    memcpy(header, context.host_message, sizeof(*header));
  } else if (context.memory == Memory::kDevice) {
#if TERSE_HAVE_CUDA
    cudaStream_t stream = static_cast<cudaStream_t>(context.stream);
    cudaError_t error =
        cudaMemcpyAsync(header, message, sizeof(*header), cudaMemcpyDeviceToHost, stream);
    if (error == cudaSuccess) error = cudaStreamSynchronize(stream);
    if (error != cudaSuccess) {
      return cuda_call_failed(error, "reading a message header from device memory");
    }
#else
    return fail(ncclInvalidUsage, "device memory passed, but terse was built without CUDA");
#endif
  } else {
    memcpy(header, message, sizeof(*header));
  }
  if (header->magic != kWireMagic) {
    return fail(ncclInvalidArgument, "message magic 0x%08x is not terse's 0x%08x", header->magic,
                kWireMagic);
  }
  if (header->version != kWireVersion) {
    return fail(ncclInvalidArgument, "message format version %u is not the supported %u",
                header->version, kWireVersion);
  }
  if (header->codec != static_cast<uint8_t>(codec)) {
    return fail(ncclInvalidArgument, "message holds codec id %u, expected %u", header->codec,
                static_cast<unsigned>(codec));
  }
  if (header->dtype >= kDTypeCount) {
    return fail(ncclInvalidArgument, "message dtype %u is not a known type", header->dtype);
  }
  if (header->count != count) {
    return fail(ncclInvalidArgument, "message describes %llu elements, decode asked for %zu",
                static_cast<unsigned long long>(header->count), count);
  }
  header->flags &= static_cast<uint8_t>(~kWireEscapesFlag);
  return ncclSuccess;
}

ncclResult_t check_capacity(const char* codec, size_t needed, size_t capacity) {
  if (needed > capacity) {
    return fail(ncclInvalidArgument, "%s: message needs %zu bytes, capacity is %zu", codec, needed,
                capacity);
  }
  return ncclSuccess;
}

ncclResult_t check_payload(const char* codec, size_t expected_bytes, size_t message_bytes) {
  if (expected_bytes != message_bytes) {
    return fail(ncclInvalidArgument, "%s: message is %zu bytes, its header implies %zu", codec,
                message_bytes, expected_bytes);
  }
  return ncclSuccess;
}

ncclResult_t write_header_device(void* message, const WireHeader& header, void* stream) {
#if TERSE_HAVE_CUDA
  return launch_write_header(message, header, stream);
#else
  (void)message;
  (void)header;
  (void)stream;
  return fail(ncclInvalidUsage, "device memory passed, but terse was built without CUDA");
#endif
}

}  // namespace terse
