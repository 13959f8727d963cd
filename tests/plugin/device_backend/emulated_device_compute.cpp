// The test build of libterse.so (terse_emulated, tests/CMakeLists.txt): its device backend runs
// the emulated kernels of tests/compressed/device/emulated_compute.h, which run the CPU codecs'
// arithmetic in host functions on the backend's stream, so that under the fake CUDA runtime the
// route's results are the host path's bit for bit. Replaces plugin/device_compute_choice.cpp.
#include "compressed/device/emulated_compute.h"
#include "plugin/backend_route.h"

namespace terse {

ncclResult_t make_device_compute(std::unique_ptr<DeviceCompute>* out) {
  out->reset(new test::EmulatedCompute());
  return ncclSuccess;
}

}  // namespace terse
