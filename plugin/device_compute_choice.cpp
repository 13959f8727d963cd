// The kernels libterse.so's device backend runs: the codecs' own (backend_route.h). Alone in its
// file so that the library's test build (tests/CMakeLists.txt, terse_emulated) can link another
// definition, the emulated kernels, in its place.
#include "collectives/compressed/device_compute.h"
#include "plugin/backend_route.h"

namespace terse {

ncclResult_t make_device_compute(std::unique_ptr<DeviceCompute>* out) {
  return make_cuda_compute(out);
}

}  // namespace terse
