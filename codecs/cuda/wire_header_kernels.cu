#include "codecs/cuda/wire_header_kernels.h"
#include "codecs/device_support.h"

namespace terse {
namespace {

// One thread per byte: a caller's message may start at any address (a message at an offset in
// a larger buffer), and a whole-struct store would need 8-byte alignment, a sticky
// misaligned-address fault otherwise.
__global__ void write_header_kernel(unsigned char* message, WireHeader header) {
  message[threadIdx.x] = reinterpret_cast<const unsigned char*>(&header)[threadIdx.x];
}

}  // namespace

ncclResult_t launch_write_header(void* message, const WireHeader& header, void* stream) {
  write_header_kernel<<<1, sizeof(WireHeader), 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<unsigned char*>(message), header);
  return check_launch("writing a message header");
}

}  // namespace terse
