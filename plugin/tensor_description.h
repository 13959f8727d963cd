// terseAllReduceTensor's descriptor (include/terse/terse.h: terseTensor) checked and turned into
// the engine's TensorRequest.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <memory>

#include "collectives/collective_args.h"
#include "terse/terse.h"

namespace terse {

// Refuses, naming the member: a size below the struct's first layout (growing_structs.h), ndims
// outside [0, TERSE_MAX_DIMS], a dimension below 1, a shape whose product is not `count`, and a
// codec that is not a known codec spec.
ncclResult_t describe_tensor(const terseTensor& tensor, size_t count,
                             std::shared_ptr<const TensorRequest>* request);

}  // namespace terse
