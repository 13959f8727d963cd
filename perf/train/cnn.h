// The small convolutional network: conv1 (1 -> 8 channels, 3x3) ReLU, 2x2 max pool, conv2
// (8 -> 16, 3x3) ReLU, 2x2 max pool, fc1 (784 -> 64) ReLU, fc2 (64 -> 10); 52,138 parameters.
#pragma once

#include "perf/train/conv2d.h"
#include "perf/train/linear.h"
#include "perf/train/max_pool.h"
#include "perf/train/model.h"

namespace terse {
namespace train {

class Cnn : public Model {
 public:
  explicit Cnn(SeededRandom* random);
  const std::vector<float>& forward(const float* images, int batch) override;
  void backward(const std::vector<float>& dlogits, int batch) override;
  std::vector<Parameter*> parameters() override;

 private:
  Conv2d conv1_;
  MaxPool2x2 pool1_;
  Conv2d conv2_;
  MaxPool2x2 pool2_;
  Linear fc1_, fc2_;
  std::vector<float> conv1_out_, pool1_out_, conv2_out_, pool2_out_, hidden_, logits_;
  std::vector<float> grad_hidden_, grad_pool2_, grad_conv2_, grad_pool1_, grad_conv1_;
};

}  // namespace train
}  // namespace terse
