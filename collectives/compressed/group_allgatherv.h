// Allgather of variable-size byte blocks over a PeerGroup: the message sizes first (8 bytes to
// every peer), then every block straight to every other rank (a direct allgatherv: one latency,
// n - 1 messages in flight). Sparse allgather exchanges its encoded messages this way, and
// Random-K its ranks' escaped non-finite elements.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/compressed/compressed_args.h"

namespace terse {

// Tag steps the two functions below use together: [first_step, first_step + this).
constexpr uint32_t kGroupAllgathervSteps = 2;

// Every rank's size, in group positions, identical on every rank, into sizes[0 .. group size);
// own_bytes at this rank's. Tagged make_operation(context.sequence, first_step).
ncclResult_t exchange_sizes(const CompressedContext& context, uint32_t first_step,
                            uint64_t own_bytes, uint64_t* sizes);

// blocks[j] = group position j's block, own (own_bytes at `own`) included, after an
// exchange_sizes that gave `sizes`. Tagged make_operation(context.sequence, first_step + 1).
ncclResult_t gather_blocks(const CompressedContext& context, uint32_t first_step,
                           const std::vector<uint64_t>& sizes, const void* own,
                           std::vector<std::vector<uint8_t>>* blocks);

}  // namespace terse
