#include "perf/train/relu.h"

#include <cstddef>

namespace terse {
namespace train {

void relu_forward(std::vector<float>* x) {
  for (float& value : *x) value = value > 0.0f ? value : 0.0f;
}

void relu_backward(const std::vector<float>& y, std::vector<float>* dy) {
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] <= 0.0f) (*dy)[i] = 0.0f;
  }
}

}  // namespace train
}  // namespace terse
