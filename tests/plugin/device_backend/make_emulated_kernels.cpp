// The shared library that TERSE_TEST_DEVICE_COMPUTE names when libterse's device backend runs
// under the fake CUDA runtime (plugin/backend_route.h): the emulated kernels of
// tests/compressed/device/emulated_compute.h, which run the CPU codecs' arithmetic in host
// functions on the backend's stream, so the route's results are the host path's bit for bit.
#include "compressed/device/emulated_compute.h"

extern "C" __attribute__((visibility("default"))) terse::DeviceCompute*
terse_test_make_device_compute() {
  return new terse::test::EmulatedCompute();
}
