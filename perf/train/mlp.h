// The 2-hidden-layer perceptron: 784 -> 256 -> 128 -> 10 with ReLU, layers fc1, fc2, fc3
// (235,146 parameters, 85% of them in fc1.weight).
#pragma once

#include "perf/train/linear.h"
#include "perf/train/model.h"

namespace terse {
namespace train {

class Mlp : public Model {
 public:
  explicit Mlp(SeededRandom* random);
  const std::vector<float>& forward(const float* images, int batch) override;
  void backward(const std::vector<float>& dlogits, int batch) override;
  std::vector<Parameter*> parameters() override;

 private:
  Linear fc1_, fc2_, fc3_;
  std::vector<float> hidden1_, hidden2_, logits_;
  std::vector<float> grad1_, grad2_;
};

}  // namespace train
}  // namespace terse
