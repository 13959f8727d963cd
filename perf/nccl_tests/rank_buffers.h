// The send and receive buffers of one rank, sized for the largest row.
#pragma once

#include <cstddef>
#include <memory>

namespace terse {
namespace perf {

struct RankBuffers {
  std::unique_ptr<char[], void (*)(void*)> send{nullptr, nullptr};
  std::unique_ptr<char[], void (*)(void*)> recv{nullptr, nullptr};
  size_t capacity = 0;  // bytes of each
};

// Both buffers, `bytes` each (at least 64), zeroed so that every page is touched before any
// timing. Host memory for now: this is the one place to add device buffers (cudaMalloc or
// ncclMemAlloc on the rank's GPU) once the plugin takes them; fill and check would then stage
// through a host copy.
RankBuffers allocate_buffers(size_t bytes);

// The largest per-rank size that lets `ranks_in_process` ranks hold their two buffers in 80%
// of this machine's physical memory.
size_t memory_limited_bytes(int ranks_in_process);

}  // namespace perf
}  // namespace terse
