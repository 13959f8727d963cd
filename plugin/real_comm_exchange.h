// Small allgathers through a real NCCL communicator: how terse's UCX side of a wrap-mode
// communicator (comm_mode.h) learns its peers' addresses without a bootstrap of its own.
//
// The memory: a real NCCL moves device memory only, so when the real communicator has a CUDA
// device (ncclCommCuDevice >= 0) the bytes go through cudaMalloc memory on that device and a
// stream of our own, waited for by polling (with the real communicator's async error checked
// and TERSE_TIMEOUT_S as the deadline, so a peer that never comes is an error, not a hang).
// A communicator without a device (ncclCommCuDevice < 0) can only come from a library that
// works on host memory, such as the tests' recording stand-in (tests/plugin/recording_nccl):
// the bytes then go in host memory with the null stream, complete when the call returns.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace terse {

class RealCommExchange {
 public:
  // `real` has `nranks` ranks and runs on CUDA device `device` (-1: none).
  RealCommExchange(ncclComm_t real, int nranks, int device)
      : real_(real), nranks_(nranks), device_(device) {}

  // Every rank contributes `bytes` bytes; `all` receives nranks * bytes in rank order.
  ncclResult_t allgather(const void* mine, size_t bytes, void* all) const;
  // Every rank contributes a byte string of any length; `table` receives them in rank order.
  ncclResult_t allgather(const std::vector<uint8_t>& mine,
                         std::vector<std::vector<uint8_t>>* table) const;

 private:
  ncclResult_t allgather_on_device(const void* mine, size_t bytes, void* all) const;

  ncclComm_t real_;
  int nranks_;
  int device_;
};

// Polls the real communicator's async error until it is no longer ncclInProgress (a nonblocking
// init still under way), up to TERSE_TIMEOUT_S; fails with its error.
ncclResult_t wait_until_real_ready(ncclComm_t real, const char* function);

}  // namespace terse
