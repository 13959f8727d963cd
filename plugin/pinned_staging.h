// A communicator's pinned host memory: the 32-bit flag its streams wait on (stream_proxy.h) and
// the staging blocks device buffers are copied through. Blocks are reused: a batch takes the
// smallest free block that fits and gives it back once its last stream has copied the outputs
// out (from a CUDA host function: release() only takes a short lock). A new block, rounded up
// to a power of two (at least kMinimumBlockBytes), is allocated only when none fits, so a
// communicator that keeps making calls of similar sizes stops allocating after the first ones.
//
// Freeing waits until no stream can still touch the memory: cudaFreeHost under a pending copy
// or wait would let the GPU read freed memory. free_when_idle() gives up (and leaks, saying so)
// if streams still hold blocks at its deadline, e.g. a stream the user never lets run. Nothing
// here frees pinned memory from a destructor, since the last reference may be dropped on CUDA's
// host-function thread, where CUDA must not be called.
#pragma once

#include <nccl.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/deadline.h"

namespace terse {

class PinnedStaging {
 public:
  static constexpr size_t kMinimumBlockBytes = size_t{1} << 20;

  struct Block {
    uint8_t* data = nullptr;
    size_t bytes = 0;
    size_t index = 0;  // in blocks_
  };

  // Allocates the flag (mapped and portable pinned memory, set to 0) on the current device.
  static ncclResult_t create(std::shared_ptr<PinnedStaging>* out);
  ~PinnedStaging();  // frees nothing pinned: see free_when_idle()
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  uint32_t* flag() const { return flag_; }
  // A second word of the flag's allocation, 0 until the stream-wait probe writes it.
  uint32_t* probe_word() const { return flag_ + kProbeWordOffset / sizeof(uint32_t); }
  static constexpr size_t kProbeWordOffset = 64;

  // A free block of at least `bytes`, allocated if none fits (ncclSystemError naming the size
  // if cudaHostAlloc fails).
  ncclResult_t acquire(size_t bytes, Block* out);
  // Gives the block back. Safe in a CUDA host function.
  void release(const Block& block);
  // The block is never reused nor freed: a failed enqueue may have left copies into it.
  void leak(const Block& block);

  // Waits until every block is back (or leaked), then frees all pinned memory and returns true.
  // At the deadline it frees nothing, logs a warning and returns false.
  bool free_when_idle(Deadline deadline);

  size_t blocks_allocated() const;

 private:
  PinnedStaging() = default;

  struct Entry {
    uint8_t* data = nullptr;
    size_t bytes = 0;
    bool in_use = false;
    bool leaked = false;
  };

  uint32_t* flag_ = nullptr;
  mutable std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<Entry> blocks_;
  size_t in_use_ = 0;
  bool freed_ = false;
};

}  // namespace terse
