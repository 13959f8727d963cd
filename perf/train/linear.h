// A fully connected layer, y = x W^T + b, with W stored [out][in] (PyTorch's layout, so the
// tensor's shape reads {out, in}); the matrix products are OpenBLAS sgemm calls.
#pragma once

#include <string>
#include <vector>

#include "perf/train/parameter.h"
#include "perf/train/seeded_random.h"

namespace terse {
namespace train {

class Linear {
 public:
  // Weights He-uniform for the ReLU that follows (bound sqrt(6 / in)), biases zero.
  Linear(const std::string& name, int in, int out, SeededRandom* random);

  // x: batch x in -> y: batch x out. Keeps x for backward.
  void forward(const float* x, int batch, std::vector<float>* y);
  // dy: batch x out. Sets the gradients of weight and bias (this step's only contribution) and,
  // when dx is not null, writes dL/dx (batch x in).
  void backward(const float* dy, int batch, std::vector<float>* dx);

  Parameter weight;
  Parameter bias;

 private:
  int in_;
  int out_;
  const float* input_ = nullptr;
};

}  // namespace train
}  // namespace terse
