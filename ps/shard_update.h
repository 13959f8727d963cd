// The update rules an owner applies to a shard (terse.h: tersePsRule_t), on the element types
// the parameter server takes: fp32 and fp64 added in their own precision, fp16 and bf16 added
// in fp32 and rounded once to the type (as a reduction of that type rounds each sum).
#pragma once

#include <nccl.h>

#include <cstddef>

namespace terse {

// Whether the parameter server holds tensors of `type`.
bool ps_type_supported(ncclDataType_t type);

// shard[i] += values[i] for `count` elements of `type`.
void add_into_shard(void* shard, const void* values, size_t count, ncclDataType_t type);

}  // namespace terse
