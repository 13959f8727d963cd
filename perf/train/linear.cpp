#include "perf/train/linear.h"

#include <cblas.h>

#include <cmath>

namespace terse {
namespace train {

Linear::Linear(const std::string& name, int in, int out, SeededRandom* random)
    : weight(name + ".weight", {out, in}), bias(name + ".bias", {out}), in_(in), out_(out) {
  const float bound = std::sqrt(6.0f / static_cast<float>(in));
  for (float& w : weight.value) w = random->uniform(-bound, bound);
}

void Linear::forward(const float* x, int batch, std::vector<float>* y) {
  input_ = x;
  y->resize(static_cast<size_t>(batch) * out_);
  for (int b = 0; b < batch; ++b) {
    std::copy(bias.value.begin(), bias.value.end(), y->begin() + static_cast<long>(b) * out_);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out_, in_, 1.0f, x, in_,
              weight.value.data(), in_, 1.0f, y->data(), out_);
}

void Linear::backward(const float* dy, int batch, std::vector<float>* dx) {
  // dW = dy^T x, db = the column sums of dy, dx = dy W.
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_, in_, batch, 1.0f, dy, out_, input_,
              in_, 0.0f, weight.grad.data(), in_);
  std::fill(bias.grad.begin(), bias.grad.end(), 0.0f);
  for (int b = 0; b < batch; ++b) {
    const float* row = dy + static_cast<size_t>(b) * out_;
    for (int o = 0; o < out_; ++o) bias.grad[static_cast<size_t>(o)] += row[o];
  }
  if (dx == nullptr) return;
  dx->resize(static_cast<size_t>(batch) * in_);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in_, out_, 1.0f, dy, out_,
              weight.value.data(), in_, 0.0f, dx->data(), in_);
}

}  // namespace train
}  // namespace terse
