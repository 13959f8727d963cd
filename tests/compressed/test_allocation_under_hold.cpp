// Device memory is never allocated while the calling thread runs a call that holds its stream
// (common/stream_hold_gate.h): the allocation is refused with an error that names what needed
// the memory, before CUDA is asked (so this runs without a GPU, in CUDA builds).
#include <gtest/gtest.h>

#include <string>

#include "codecs/device_support.h"
#include "collectives/compressed/memory/residual_buffer.h"
#include "common/result.h"
#include "common/stream_hold_gate.h"

namespace terse {
namespace {

TEST(AllocationUnderHold, RequireAllocationAllowedRefusesInsideAScopeNamingWhat) {
  EXPECT_EQ(require_allocation_allowed("device backend scratch", 4096), ncclSuccess);
  StreamHoldScope hold;
  EXPECT_EQ(require_allocation_allowed("device backend scratch", 4096), ncclInvalidUsage);
  const std::string message = last_error();
  EXPECT_NE(message.find("device backend scratch"), std::string::npos) << message;
  EXPECT_NE(message.find("4096 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("held"), std::string::npos) << message;
}

TEST(AllocationUnderHold, ADeviceResidualIsRefusedInsideAScopeAndHostMemoryIsNot) {
#if !TERSE_HAVE_CUDA
  GTEST_SKIP() << "terse was built without CUDA: device residuals are refused for that reason";
#endif
  StreamHoldScope hold;
  ResidualBuffer host, device;
  EXPECT_EQ(ResidualBuffer::allocate(16, Memory::kHost, nullptr, "a host tensor", &host),
            ncclSuccess);
  EXPECT_EQ(ResidualBuffer::allocate(16, Memory::kDevice, nullptr, "a device tensor", &device),
            ncclInvalidUsage);
  const std::string message = last_error();
  EXPECT_NE(message.find("residual memory"), std::string::npos) << message;
  EXPECT_NE(message.find("64 bytes"), std::string::npos) << message;
}

}  // namespace
}  // namespace terse
