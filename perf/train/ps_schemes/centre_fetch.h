// Reads the centre (every scheme tensor's parameter-server values) into caller buffers, e.g. to
// evaluate the model the job is training rather than one worker's copy of it. Every receive is
// issued before the first is waited for, so the tensors travel together.
#pragma once

#include <vector>

#include "perf/train/ps_schemes/update_scheme.h"

namespace terse {
namespace ps {

// centre[i] receives tensors[i].count values of tensors[i]'s parameter-server tensor.
ncclResult_t fetch_centre(const std::vector<SchemeTensor>& tensors,
                          const std::vector<float*>& centre);

}  // namespace ps
}  // namespace terse
