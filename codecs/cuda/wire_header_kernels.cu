#include "codecs/cuda/wire_header_kernels.h"
#include "codecs/device_support.h"

namespace terse {
namespace {

__global__ void write_header_kernel(WireHeader* message, WireHeader header) {
  *message = header;
}

}  // namespace

ncclResult_t launch_write_header(void* message, const WireHeader& header, void* stream) {
  write_header_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<WireHeader*>(message), header);
  return check_launch("writing a message header");
}

}  // namespace terse
