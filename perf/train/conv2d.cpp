#include "perf/train/conv2d.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace terse {
namespace train {

Conv2d::Conv2d(const std::string& name, int in, int out, int kernel, int side, SeededRandom* random)
    : weight(name + ".weight", {out, in, kernel, kernel}),
      bias(name + ".bias", {out}),
      in_(in),
      out_(out),
      kernel_(kernel),
      side_(side) {
  const float bound = std::sqrt(6.0f / static_cast<float>(patch()));
  for (float& w : weight.value) w = random->uniform(-bound, bound);
}

// Row (c, ky, kx) of the column matrix holds, for every output pixel, the input pixel that the
// kernel's tap (ky, kx) of channel c sees there (0 outside the image).
void Conv2d::image_to_columns(const float* image, float* columns) const {
  const int pad = kernel_ / 2;
  for (int c = 0; c < in_; ++c) {
    for (int ky = 0; ky < kernel_; ++ky) {
      for (int kx = 0; kx < kernel_; ++kx) {
        float* row = columns + static_cast<size_t>((c * kernel_ + ky) * kernel_ + kx) * pixels();
        for (int y = 0; y < side_; ++y) {
          const int sy = y + ky - pad;
          for (int x = 0; x < side_; ++x) {
            const int sx = x + kx - pad;
            const bool inside = sy >= 0 && sy < side_ && sx >= 0 && sx < side_;
            row[y * side_ + x] = inside ? image[(c * side_ + sy) * side_ + sx] : 0.0f;
          }
        }
      }
    }
  }
}

// The adjoint of image_to_columns: every column entry added back to the pixel it came from.
void Conv2d::columns_to_image(const float* columns, float* image) const {
  const int pad = kernel_ / 2;
  std::fill(image, image + static_cast<size_t>(in_) * pixels(), 0.0f);
  for (int c = 0; c < in_; ++c) {
    for (int ky = 0; ky < kernel_; ++ky) {
      for (int kx = 0; kx < kernel_; ++kx) {
        const float* row =
            columns + static_cast<size_t>((c * kernel_ + ky) * kernel_ + kx) * pixels();
        for (int y = 0; y < side_; ++y) {
          const int sy = y + ky - pad;
          if (sy < 0 || sy >= side_) continue;
          for (int x = 0; x < side_; ++x) {
            const int sx = x + kx - pad;
            if (sx >= 0 && sx < side_) image[(c * side_ + sy) * side_ + sx] += row[y * side_ + x];
          }
        }
      }
    }
  }
}

void Conv2d::forward(const float* x, int batch, std::vector<float>* y) {
  const size_t column_floats = static_cast<size_t>(patch()) * pixels();
  columns_.resize(column_floats * batch);
  y->resize(static_cast<size_t>(batch) * out_ * pixels());
  for (int b = 0; b < batch; ++b) {
    float* columns = columns_.data() + column_floats * b;
    image_to_columns(x + static_cast<size_t>(b) * in_ * pixels(), columns);
    float* out = y->data() + static_cast<size_t>(b) * out_ * pixels();
    for (int o = 0; o < out_; ++o) {
      std::fill(out + o * pixels(), out + (o + 1) * pixels(), bias.value[static_cast<size_t>(o)]);
    }
    // out [out x pixels] += W [out x patch] columns [patch x pixels]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out_, pixels(), patch(), 1.0f,
                weight.value.data(), patch(), columns, pixels(), 1.0f, out, pixels());
  }
}

void Conv2d::backward(const float* dy, int batch, std::vector<float>* dx) {
  const size_t column_floats = static_cast<size_t>(patch()) * pixels();
  std::fill(weight.grad.begin(), weight.grad.end(), 0.0f);
  std::fill(bias.grad.begin(), bias.grad.end(), 0.0f);
  if (dx != nullptr) dx->resize(static_cast<size_t>(batch) * in_ * pixels());
  column_grad_.resize(column_floats);
  for (int b = 0; b < batch; ++b) {
    const float* grad_out = dy + static_cast<size_t>(b) * out_ * pixels();
    const float* columns = columns_.data() + column_floats * b;
    // dW [out x patch] += dy [out x pixels] columns^T [pixels x patch]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, out_, patch(), pixels(), 1.0f, grad_out,
                pixels(), columns, pixels(), 1.0f, weight.grad.data(), patch());
    for (int o = 0; o < out_; ++o) {
      float sum = 0.0f;
      for (int p = 0; p < pixels(); ++p) sum += grad_out[o * pixels() + p];
      bias.grad[static_cast<size_t>(o)] += sum;
    }
    if (dx == nullptr) continue;
    // dcolumns [patch x pixels] = W^T [patch x out] dy [out x pixels]
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, patch(), pixels(), out_, 1.0f,
                weight.value.data(), patch(), grad_out, pixels(), 0.0f, column_grad_.data(),
                pixels());
    columns_to_image(column_grad_.data(), dx->data() + static_cast<size_t>(b) * in_ * pixels());
  }
}

}  // namespace train
}  // namespace terse
