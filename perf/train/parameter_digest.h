// Data parallelism's invariant: after every step all ranks hold the same parameters, because
// every rank applies the same averaged gradient (terse returns the same bits on every rank). A
// digest of the parameters, compared across ranks, catches a gradient exchange that leaves a
// rank out or hands ranks different results, which the loss alone would not (each rank would
// still learn from its own shard).
#pragma once

#include <vector>

#include "perf/train/parameter.h"

namespace terse {
namespace train {

// A weighted sum of every parameter value, in double, with fixed pseudo-random weights: equal
// parameters give the same bits; different ones differ but for a measure-zero coincidence.
double parameter_digest(const std::vector<Parameter*>& parameters);

}  // namespace train
}  // namespace terse
