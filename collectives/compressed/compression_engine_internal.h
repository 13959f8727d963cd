// What the compression engine's sources (compression_decision.cpp, tensor_clock.cpp,
// residual_admission.cpp) share beyond compression_engine.h: the bound on per-tensor bookkeeping.
#pragma once

#include <cstddef>

namespace terse {

// Step counts and decision logs are kept per tensor key; anonymous buffers of a long run could
// otherwise grow them without end. Past this many keys they start over (steps restart at 0,
// which only matters to schedules with a start or end step).
constexpr size_t kMaxTrackedTensors = size_t{1} << 16;

}  // namespace terse
