#include "perf/nccl_tests/size_sweep.h"

#include <cstdint>

namespace terse {
namespace perf {

std::vector<size_t> sweep_sizes(size_t min_bytes, size_t max_bytes, size_t step_factor,
                                size_t step_bytes) {
  std::vector<size_t> sizes;
  for (size_t bytes = min_bytes; bytes <= max_bytes;) {
    sizes.push_back(bytes);
    const bool grows = step_factor > 1 ? bytes > 0 && bytes <= SIZE_MAX / step_factor
                                       : step_bytes > 0 && bytes <= SIZE_MAX - step_bytes;
    if (!grows) break;  // the next size would overflow (or never grow: refused by the options)
    bytes = step_factor > 1 ? bytes * step_factor : bytes + step_bytes;
  }
  return sizes;
}

std::vector<size_t> warmup_sizes(size_t min_bytes, size_t max_bytes) {
  std::vector<size_t> sizes;
  for (size_t bytes = min_bytes; bytes <= max_bytes;) {
    sizes.push_back(bytes);
    if (bytes > SIZE_MAX / 2) break;
    bytes = bytes == 0 ? 1 : bytes * 2;
  }
  return sizes;
}

}  // namespace perf
}  // namespace terse
