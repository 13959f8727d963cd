#include "perf/train/mlp.h"

#include "perf/train/fashion_mnist.h"
#include "perf/train/relu.h"

namespace terse {
namespace train {

Mlp::Mlp(SeededRandom* random)
    : fc1_("fc1", kImagePixels, 256, random),
      fc2_("fc2", 256, 128, random),
      fc3_("fc3", 128, kClasses, random) {}

const std::vector<float>& Mlp::forward(const float* images, int batch) {
  fc1_.forward(images, batch, &hidden1_);
  relu_forward(&hidden1_);
  fc2_.forward(hidden1_.data(), batch, &hidden2_);
  relu_forward(&hidden2_);
  fc3_.forward(hidden2_.data(), batch, &logits_);
  return logits_;
}

void Mlp::backward(const std::vector<float>& dlogits, int batch) {
  fc3_.backward(dlogits.data(), batch, &grad2_);
  relu_backward(hidden2_, &grad2_);
  fc2_.backward(grad2_.data(), batch, &grad1_);
  relu_backward(hidden1_, &grad1_);
  fc1_.backward(grad1_.data(), batch, nullptr);
}

std::vector<Parameter*> Mlp::parameters() {
  return {&fc1_.weight, &fc1_.bias, &fc2_.weight, &fc2_.bias, &fc3_.weight, &fc3_.bias};
}

}  // namespace train
}  // namespace terse
