#include "plugin/pinned_staging.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>

#include "codecs/device_support.h"
#include "common/log.h"
#include "common/result.h"

namespace terse {
namespace {

// Mapped so that a kernel can poll the flag (stream_wait.h); portable so that any device
// (the communicator's, whichever is current) may copy to and from the staging.
constexpr unsigned int kPinnedFlags = cudaHostAllocMapped | cudaHostAllocPortable;

size_t round_up_to_power_of_two(size_t bytes) {
  size_t rounded = PinnedStaging::kMinimumBlockBytes;
  while (rounded < bytes && rounded <= (SIZE_MAX >> 1)) rounded <<= 1;
  return rounded < bytes ? bytes : rounded;
}

}  // namespace

ncclResult_t PinnedStaging::create(std::shared_ptr<PinnedStaging>* out) {
  std::shared_ptr<PinnedStaging> staging(new PinnedStaging());
  // The flag and, a cache line on, the word the stream-wait probe waits on (stream_wait.h): one
  // allocation, freed with the staging.
  void* flag = nullptr;
  const cudaError_t error = cudaHostAlloc(&flag, 2 * kProbeWordOffset, kPinnedFlags);
  if (error != cudaSuccess) {
    return fail(ncclUnhandledCudaError, "cudaHostAlloc of the stream flag failed: %s",
                cudaGetErrorString(error));
  }
  staging->flag_ = static_cast<uint32_t*>(flag);
  __atomic_store_n(staging->flag_, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(staging->probe_word(), 0u, __ATOMIC_RELEASE);
  *out = std::move(staging);
  return ncclSuccess;
}

PinnedStaging::~PinnedStaging() = default;

ncclResult_t PinnedStaging::acquire(size_t bytes, Block* out) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t best = blocks_.size();
    for (size_t i = 0; i < blocks_.size(); ++i) {
      const Entry& entry = blocks_[i];
      if (entry.in_use || entry.leaked || entry.bytes < bytes) continue;
      if (best == blocks_.size() || entry.bytes < blocks_[best].bytes) best = i;
    }
    if (best < blocks_.size()) {
      blocks_[best].in_use = true;
      ++in_use_;
      *out = Block{blocks_[best].data, blocks_[best].bytes, best};
      return ncclSuccess;
    }
  }
  // Allocated outside the lock: host functions returning blocks must never wait on it.
  const size_t size = round_up_to_power_of_two(bytes);
  // Never while the calling thread runs a call that holds its stream (stream_hold_gate.h).
  TERSE_CHECK(require_allocation_allowed("device staging", size));
  void* data = nullptr;
  const cudaError_t error = cudaHostAlloc(&data, size, kPinnedFlags);
  if (error != cudaSuccess) {
    return fail(ncclSystemError, "cudaHostAlloc of %zu bytes of staging failed: %s", size,
                cudaGetErrorString(error));
  }
  TERSE_INFO("device staging: %zu bytes of pinned host memory added (a call needed %zu)", size,
             bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_.push_back(Entry{static_cast<uint8_t*>(data), size, true, false});
  ++in_use_;
  *out = Block{static_cast<uint8_t*>(data), size, blocks_.size() - 1};
  return ncclSuccess;
}

void PinnedStaging::release(const Block& block) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = blocks_[block.index];
    if (!entry.in_use) return;
    entry.in_use = false;
    --in_use_;
  }
  returned_.notify_all();
}

void PinnedStaging::leak(const Block& block) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = blocks_[block.index];
    if (entry.in_use) --in_use_;
    entry.in_use = false;
    entry.leaked = true;
  }
  returned_.notify_all();
}

bool PinnedStaging::free_when_idle(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (freed_) return true;
  if (!returned_.wait_until(lock, deadline.when(), [&] { return in_use_ == 0; })) {
    TERSE_WARN(
        "device staging: %zu staging blocks still belong to streams that have not finished "
        "their copies; their pinned memory is left allocated",
        in_use_);
    return false;
  }
  freed_ = true;
  bool any_leaked = false;
  for (Entry& entry : blocks_) {
    if (entry.leaked) {
      any_leaked = true;
    } else {
      cudaFreeHost(entry.data);
    }
    entry.data = nullptr;
  }
  blocks_.clear();
  // After a failed enqueue a stream may still wait on the flag: it stays with the leaked block.
  if (!any_leaked) cudaFreeHost(flag_);
  flag_ = nullptr;
  return true;
}

size_t PinnedStaging::blocks_allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return blocks_.size();
}

}  // namespace terse

#endif  // TERSE_HAVE_CUDA
