#include "perf/nccl_tests/rank_buffers.h"

#include <unistd.h>
#include <cstdint>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "perf/nccl_tests/device_runtime.h"
#include "perf/nccl_tests/run_abort.h"

namespace terse {
namespace perf {
namespace {

constexpr size_t kAlignment = 4096;

char* allocate_zeroed(size_t bytes) {
  void* data = nullptr;
  if (posix_memalign(&data, kAlignment, bytes) != 0) return nullptr;
  memset(data, 0, bytes);
  return static_cast<char*>(data);
}

// A failed CUDA call leaves nothing to measure: nccl-tests' testCudaError.
void check_cuda(bool ok, const std::string& why) {
  if (!ok) abort_run(kExitNoMemory, short_host_name() + ": " + why);
}

}  // namespace

RankBuffers::RankBuffers(RankBuffers&& other) noexcept {
  *this = std::move(other);
}

RankBuffers& RankBuffers::operator=(RankBuffers&& other) noexcept {
  if (this != &other) {
    release();
    memory_ = other.memory_;
    send_ = std::exchange(other.send_, nullptr);
    recv_ = std::exchange(other.recv_, nullptr);
    mirror_send_ = std::exchange(other.mirror_send_, nullptr);
    mirror_recv_ = std::exchange(other.mirror_recv_, nullptr);
    capacity_ = other.capacity_;
    stream_ = other.stream_;
    slot_ = other.slot_;
  }
  return *this;
}

RankBuffers::~RankBuffers() {
  release();
}

void RankBuffers::release() {
  if (memory_ == BufferMemory::kHost) {
    free(send_);
    free(recv_);
  } else {
    // Nothing may still use them: a cudaFree would wait for the device meanwhile.
    if (send_ != nullptr || recv_ != nullptr) synchronize();
    cuda_free(send_);
    cuda_free(recv_);
    cuda_free_pinned(mirror_send_);
    cuda_free_pinned(mirror_recv_);
  }
  send_ = recv_ = mirror_send_ = mirror_recv_ = nullptr;
}

RankBuffers RankBuffers::allocate(BufferMemory memory, size_t bytes, void* stream, int slot) {
  RankBuffers buffers;
  buffers.memory_ = memory;
  buffers.capacity_ = std::max<size_t>(bytes, 64);
  buffers.stream_ = stream;
  buffers.slot_ = slot;
  if (memory == BufferMemory::kHost) {
    buffers.send_ = allocate_zeroed(buffers.capacity_);
    buffers.recv_ = allocate_zeroed(buffers.capacity_);
    return buffers;
  }
  const bool managed = memory == BufferMemory::kManaged;
  buffers.send_ = static_cast<char*>(cuda_allocate(buffers.capacity_, managed));
  buffers.recv_ = static_cast<char*>(cuda_allocate(buffers.capacity_, managed));
  buffers.mirror_send_ = static_cast<char*>(cuda_allocate_pinned(buffers.capacity_));
  buffers.mirror_recv_ = static_cast<char*>(cuda_allocate_pinned(buffers.capacity_));
  if (buffers.mirror_send_ == nullptr || buffers.mirror_recv_ == nullptr) {
    buffers.release();  // allocated() is false, and the caller says so
    return buffers;
  }
  if (!buffers.allocated()) return buffers;
  memset(buffers.mirror_send_, 0, buffers.capacity_);
  memset(buffers.mirror_recv_, 0, buffers.capacity_);
  buffers.copy_in(buffers.mirror_send_, buffers.capacity_);
  buffers.copy_in(buffers.mirror_recv_, buffers.capacity_);
  return buffers;
}

char* RankBuffers::buffer_of(const char* mirror) const {
  if (mirror >= mirror_send_ && mirror < mirror_send_ + capacity_) {
    return send_ + (mirror - mirror_send_);
  }
  return recv_ + (mirror - mirror_recv_);
}

void RankBuffers::copy_in(const char* mirror, size_t bytes) const {
  if (memory_ == BufferMemory::kHost || bytes == 0) return;
  std::string why;
  check_cuda(cuda_copy(buffer_of(mirror), mirror, bytes, stream_, &why), why);
  synchronize();
}

const char* RankBuffers::copy_out(const char* mirror, size_t bytes) const {
  if (memory_ == BufferMemory::kHost || bytes == 0) return mirror;
  std::string why;
  check_cuda(cuda_copy(const_cast<char*>(mirror), buffer_of(mirror), bytes, stream_, &why), why);
  synchronize();
  return mirror;
}

void RankBuffers::synchronize() const {
  if (memory_ == BufferMemory::kHost) return;
  std::string why;
  CallTimer timer(slot_, "cudaStreamSynchronize");
  check_cuda(cuda_synchronize(stream_, &why), why);
}

size_t memory_limited_bytes(int ranks_in_process) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return SIZE_MAX;
  const double usable = 0.8 * static_cast<double>(pages) * static_cast<double>(page_bytes);
  return static_cast<size_t>(usable / (2.0 * ranks_in_process));
}

}  // namespace perf
}  // namespace terse
