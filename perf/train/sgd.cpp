#include "perf/train/sgd.h"

namespace terse {
namespace train {

void sgd_step(Parameter* parameter, float learning_rate, float momentum) {
  for (size_t i = 0; i < parameter->size(); ++i) {
    const float velocity = momentum * parameter->velocity[i] + parameter->grad[i];
    parameter->velocity[i] = velocity;
    parameter->value[i] -= learning_rate * velocity;
  }
}

}  // namespace train
}  // namespace terse
