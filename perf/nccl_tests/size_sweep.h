// The sizes of the rows, and of the warm-up before them, as nccl-tests steps through them.
#pragma once

#include <cstddef>
#include <vector>

namespace terse {
namespace perf {

// From min_bytes, times step_factor when it is above 1, else plus step_bytes, up to max_bytes.
std::vector<size_t> sweep_sizes(size_t min_bytes, size_t max_bytes, size_t step_factor,
                                size_t step_bytes);
// From min_bytes (0 then 1), doubling, up to max_bytes.
std::vector<size_t> warmup_sizes(size_t min_bytes, size_t max_bytes);

}  // namespace perf
}  // namespace terse
