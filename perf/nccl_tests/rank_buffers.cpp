#include "perf/nccl_tests/rank_buffers.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

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

}  // namespace

RankBuffers allocate_buffers(size_t bytes) {
  RankBuffers buffers;
  buffers.capacity = std::max<size_t>(bytes, 64);
  buffers.send = {allocate_zeroed(buffers.capacity), free};
  buffers.recv = {allocate_zeroed(buffers.capacity), free};
  return buffers;
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
