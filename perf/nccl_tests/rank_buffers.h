// The send and receive buffers of one rank, sized for the largest row, in the memory -B names.
// In host memory the NCCL calls, the fill and the checks use the same bytes. In device (or
// managed) memory the calls get cudaMalloc'd (cudaMallocManaged) buffers and the harness never
// touches them: it writes inputs into pinned host mirrors and copies them in, and copies results
// back into the mirrors before checking them, all in the order of the rank's stream, so that a
// copy never overtakes a call that is still queued there.
#pragma once

#include <cstddef>
#include <string>

#include "perf/nccl_tests/options.h"

namespace terse {
namespace perf {

class RankBuffers {
 public:
  RankBuffers() = default;
  RankBuffers(RankBuffers&& other) noexcept;
  RankBuffers& operator=(RankBuffers&& other) noexcept;
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;
  ~RankBuffers();

  // Both buffers, `bytes` each (at least 64), zeroed so that every page is touched before any
  // timing. kDevice and kManaged allocate on the current device and copy through `stream`;
  // `slot` is the rank thread's (the -T watchdog watches its waits for the stream). Check
  // allocated() afterwards.
  static RankBuffers allocate(BufferMemory memory, size_t bytes, void* stream, int slot);

  bool allocated() const { return send_ != nullptr && recv_ != nullptr; }
  size_t capacity() const { return capacity_; }
  // What the NCCL calls get.
  char* send() const { return send_; }
  char* recv() const { return recv_; }
  // Where inputs are written and results read: the buffers themselves in host memory, their
  // pinned mirrors otherwise.
  char* host_send() const { return mirror_send_ != nullptr ? mirror_send_ : send_; }
  char* host_recv() const { return mirror_recv_ != nullptr ? mirror_recv_ : recv_; }

  // `bytes` at `mirror` (inside host_send() or host_recv()) into the buffer at the same offset,
  // then waits for the stream (the mirror may be written again at once). No-op in host memory.
  void copy_in(const char* mirror, size_t bytes) const;
  // The buffer's `bytes` at the offset of `mirror` into the mirror, once the calls queued before
  // are done; returns `mirror`, now holding them.
  const char* copy_out(const char* mirror, size_t bytes) const;
  // Returns once every call queued on the stream has run. No-op in host memory.
  void synchronize() const;

 private:
  void release();
  char* buffer_of(const char* mirror) const;

  BufferMemory memory_ = BufferMemory::kHost;
  char* send_ = nullptr;
  char* recv_ = nullptr;
  char* mirror_send_ = nullptr;
  char* mirror_recv_ = nullptr;
  size_t capacity_ = 0;  // bytes of each
  void* stream_ = nullptr;
  int slot_ = 0;
};

// The largest per-rank size that lets `ranks_in_process` ranks hold their two buffers (or, with
// device buffers, their two pinned mirrors) in 80% of this machine's physical memory.
size_t memory_limited_bytes(int ranks_in_process);

}  // namespace perf
}  // namespace terse
