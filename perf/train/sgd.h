// Stochastic gradient descent with (heavy-ball) momentum: v = momentum v + g; w -= lr v.
#pragma once

#include "perf/train/parameter.h"

namespace terse {
namespace train {

void sgd_step(Parameter* parameter, float learning_rate, float momentum);

}  // namespace train
}  // namespace terse
