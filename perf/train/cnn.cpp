#include "perf/train/cnn.h"

#include "perf/train/fashion_mnist.h"
#include "perf/train/relu.h"

namespace terse {
namespace train {
namespace {

constexpr int kChannels1 = 8;
constexpr int kChannels2 = 16;
constexpr int kHidden = 64;
constexpr int kSide2 = kImageSide / 2;  // after the first pool
constexpr int kSide3 = kImageSide / 4;  // after the second

}  // namespace

Cnn::Cnn(SeededRandom* random)
    : conv1_("conv1", 1, kChannels1, 3, kImageSide, random),
      pool1_(kChannels1, kImageSide),
      conv2_("conv2", kChannels1, kChannels2, 3, kSide2, random),
      pool2_(kChannels2, kSide2),
      fc1_("fc1", kChannels2 * kSide3 * kSide3, kHidden, random),
      fc2_("fc2", kHidden, kClasses, random) {}

const std::vector<float>& Cnn::forward(const float* images, int batch) {
  conv1_.forward(images, batch, &conv1_out_);
  relu_forward(&conv1_out_);
  pool1_.forward(conv1_out_, batch, &pool1_out_);
  conv2_.forward(pool1_out_.data(), batch, &conv2_out_);
  relu_forward(&conv2_out_);
  pool2_.forward(conv2_out_, batch, &pool2_out_);
  fc1_.forward(pool2_out_.data(), batch, &hidden_);
  relu_forward(&hidden_);
  fc2_.forward(hidden_.data(), batch, &logits_);
  return logits_;
}

void Cnn::backward(const std::vector<float>& dlogits, int batch) {
  fc2_.backward(dlogits.data(), batch, &grad_hidden_);
  relu_backward(hidden_, &grad_hidden_);
  fc1_.backward(grad_hidden_.data(), batch, &grad_pool2_);
  pool2_.backward(grad_pool2_, batch, &grad_conv2_);
  relu_backward(conv2_out_, &grad_conv2_);
  conv2_.backward(grad_conv2_.data(), batch, &grad_pool1_);
  pool1_.backward(grad_pool1_, batch, &grad_conv1_);
  relu_backward(conv1_out_, &grad_conv1_);
  conv1_.backward(grad_conv1_.data(), batch, nullptr);
}

std::vector<Parameter*> Cnn::parameters() {
  return {&conv1_.weight, &conv1_.bias, &conv2_.weight, &conv2_.bias,
          &fc1_.weight,   &fc1_.bias,   &fc2_.weight,   &fc2_.bias};
}

}  // namespace train
}  // namespace terse
