#include "perf/train/max_pool.h"

#include <algorithm>

namespace terse {
namespace train {

void MaxPool2x2::forward(const std::vector<float>& x, int batch, std::vector<float>* y) {
  const int half = side_ / 2;
  const size_t outputs = static_cast<size_t>(batch) * channels_ * half * half;
  y->resize(outputs);
  winners_.resize(outputs);
  size_t out = 0;
  for (int plane = 0; plane < batch * channels_; ++plane) {
    const int base = plane * side_ * side_;
    for (int py = 0; py < half; ++py) {
      for (int px = 0; px < half; ++px, ++out) {
        int best = base + (2 * py) * side_ + 2 * px;
        for (int dy = 0; dy < 2; ++dy) {
          for (int dx = 0; dx < 2; ++dx) {
            const int index = base + (2 * py + dy) * side_ + 2 * px + dx;
            if (x[static_cast<size_t>(index)] > x[static_cast<size_t>(best)]) best = index;
          }
        }
        winners_[out] = best;
        (*y)[out] = x[static_cast<size_t>(best)];
      }
    }
  }
}

void MaxPool2x2::backward(const std::vector<float>& dy, int batch, std::vector<float>* dx) {
  dx->assign(static_cast<size_t>(batch) * channels_ * side_ * side_, 0.0f);
  for (size_t out = 0; out < dy.size(); ++out) {
    (*dx)[static_cast<size_t>(winners_[out])] += dy[out];
  }
}

}  // namespace train
}  // namespace terse
