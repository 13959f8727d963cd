#include "plugin/comm_mode.h"

#include <cstdlib>
#include <string>

#include "common/log.h"
#include "common/result.h"
#include "plugin/real_nccl.h"
#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {
namespace {

struct Decision {
  CommMode mode = CommMode::kEngine;
  ncclResult_t error = ncclSuccess;
  std::string message;
};

bool cuda_device_present() {
#if TERSE_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess) return count > 0;
  cudaGetLastError();  // no driver or no device: clear the sticky error
#endif
  return false;
}

Decision decide() {
  Decision decision;
  const char* raw = getenv("TERSE_MODE");
  const std::string asked = raw != nullptr && raw[0] != '\0' ? raw : "auto";
  if (asked != "auto" && asked != "wrap" && asked != "engine") {
    decision.error = ncclInvalidArgument;
    decision.message = "TERSE_MODE=" + asked + " is not auto, wrap or engine";
    return decision;
  }
  if (asked == "engine") {
    TERSE_INFO("TERSE_MODE=engine: every call runs on terse's engine");
    return decision;
  }
  const RealNccl* real = real_nccl();
  if (asked == "wrap") {
    if (real == nullptr) {
      decision.error = ncclInvalidUsage;
      decision.message = "TERSE_MODE=wrap needs a real NCCL behind libterse.so, and " +
                         real_nccl_absence() +
                         " (TERSE_NCCL_LIBRARY names one for an application linked to libterse)";
      return decision;
    }
    decision.mode = CommMode::kWrap;
    TERSE_INFO("TERSE_MODE=wrap: uncompressed calls go to the real NCCL %s", real->path.c_str());
    return decision;
  }
  const bool device = cuda_device_present();
  if (real != nullptr && device) {
    decision.mode = CommMode::kWrap;
    TERSE_INFO("TERSE_MODE=auto: wrap (the real NCCL %s and a CUDA device are present)",
               real->path.c_str());
  } else {
    TERSE_INFO("TERSE_MODE=auto: engine (%s)",
               real == nullptr ? real_nccl_absence().c_str() : "no CUDA device is present");
  }
  return decision;
}

const Decision& decided() {
  static const Decision* decision = new Decision(decide());  // outlives static destructors
  return *decision;
}

}  // namespace

ncclResult_t comm_mode(CommMode* mode) {
  const Decision& decision = decided();
  if (decision.error != ncclSuccess) return fail(decision.error, "%s", decision.message.c_str());
  *mode = decision.mode;
  return ncclSuccess;
}

bool wrap_mode() {
  const Decision& decision = decided();
  return decision.error == ncclSuccess && decision.mode == CommMode::kWrap;
}

const char* comm_mode_name(CommMode mode) {
  return mode == CommMode::kWrap ? "wrap" : "engine";
}

}  // namespace terse
