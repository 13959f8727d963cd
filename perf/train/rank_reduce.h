// Reduces a few doubles over the ranks (losses, counts, bytes, parameter digests), always
// uncompressed: the per-call codec "none" overrides whatever the policy says, so the figures are
// exact.
#pragma once

#include <nccl.h>

#include <vector>

namespace terse {
namespace train {

// In place; op is ncclSum, ncclMin or ncclMax.
ncclResult_t reduce_over_ranks(ncclComm_t comm, ncclRedOp_t op, std::vector<double>* values);

}  // namespace train
}  // namespace terse
