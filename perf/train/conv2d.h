// A 2-D convolution, stride 1, zero padding k/2 (output the size of the input), as one sgemm
// per image over its im2col matrix. Layout: images [batch][channels][side][side]; weight
// [out][in][k][k] (shape {out, in, k, k}).
#pragma once

#include <string>
#include <vector>

#include "perf/train/parameter.h"
#include "perf/train/seeded_random.h"

namespace terse {
namespace train {

class Conv2d {
 public:
  // Weights He-uniform (bound sqrt(6 / (in k k))), biases zero.
  Conv2d(const std::string& name, int in, int out, int kernel, int side, SeededRandom* random);

  // x: batch x in x side x side -> y: batch x out x side x side.
  void forward(const float* x, int batch, std::vector<float>* y);
  // Sets the weight and bias gradients; writes dL/dx when dx is not null.
  void backward(const float* dy, int batch, std::vector<float>* dx);

  Parameter weight;
  Parameter bias;

 private:
  int in_, out_, kernel_, side_;
  std::vector<float> columns_;  // batch x (in k k) x (side side), kept for backward
  std::vector<float> column_grad_;

  int patch() const { return in_ * kernel_ * kernel_; }
  int pixels() const { return side_ * side_; }
  void image_to_columns(const float* image, float* columns) const;
  void columns_to_image(const float* columns, float* image) const;
};

}  // namespace train
}  // namespace terse
