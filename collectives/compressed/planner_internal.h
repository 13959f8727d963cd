// What the planner's source files share (planner.cpp, planner_agreement.cpp,
// planner_candidates.cpp): the bound of a whole allreduce through k lossy steps.
#pragma once

#include <cmath>

#include "collectives/compressed/compressed_error_bound.h"

namespace terse {

// (1 + c)^k - 1 for a per-encode bound c through `lossy_steps` encodes; infinite for a codec
// without a stated bound.
inline double relative_bound(const ErrorBound& bound, int lossy_steps) {
  if (!bound.stated) return INFINITY;
  return std::pow(1.0 + bound.factor, lossy_steps) - 1.0;
}

}  // namespace terse
