// max(0, x), in place; backward passes the gradient where the output was positive.
#pragma once

#include <vector>

namespace terse {
namespace train {

void relu_forward(std::vector<float>* x);
// y: the forward output; dy becomes dL/dx in place.
void relu_backward(const std::vector<float>& y, std::vector<float>* dy);

}  // namespace train
}  // namespace terse
