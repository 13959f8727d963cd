// Where a parameter-server tensor's shards live (terse.h, "Placement"): a tensor larger than the
// split threshold is cut by rows into one shard per rank, shard i on rank i; a smaller one goes
// whole to the rank owning the fewest bytes so far. A pure function of what every rank knows
// alike (the tensors' sizes in the order of their inits, the loads so far), so every rank
// computes the same placement without a message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace terse {

// Default TERSE_PS_SPLIT_BYTES.
constexpr uint64_t kDefaultPsSplitBytes = uint64_t{1} << 20;

struct ShardSpan {
  int owner = 0;
  size_t offset = 0;  // first element
  size_t count = 0;   // elements
};

struct PlacementInput {
  size_t count = 0;
  size_t row_elements = 1;  // divides count
  size_t element_bytes = 4;
};

// Shards of each tensor, in the order given. `load` (bytes owned per rank, nranks entries) is
// read and advanced: tensors above `split_bytes` add their rows' bytes to every rank; the small
// ones are placed largest first (ties: the earlier tensor), each on the least-loaded rank (ties:
// the lowest rank).
std::vector<std::vector<ShardSpan>> place_tensors(const std::vector<PlacementInput>& tensors,
                                                  uint64_t split_bytes,
                                                  std::vector<uint64_t>* load);

}  // namespace terse
