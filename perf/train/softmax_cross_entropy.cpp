#include "perf/train/softmax_cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace terse {
namespace train {

LossResult softmax_cross_entropy(const std::vector<float>& logits, const uint8_t* labels, int batch,
                                 int classes, std::vector<float>* dlogits) {
  LossResult result;
  if (dlogits != nullptr) dlogits->resize(logits.size());
  for (int b = 0; b < batch; ++b) {
    const float* row = logits.data() + static_cast<size_t>(b) * classes;
    const int label = labels[b];
    const int predicted = static_cast<int>(std::max_element(row, row + classes) - row);
    if (predicted == label) ++result.correct;
    // Shifted by the largest logit so that exp never overflows.
    const float largest = row[predicted];
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(row[c] - largest));
    result.loss += std::log(sum) - static_cast<double>(row[label] - largest);
    if (dlogits == nullptr) continue;
    float* grad = dlogits->data() + static_cast<size_t>(b) * classes;
    for (int c = 0; c < classes; ++c) {
      const double probability = std::exp(static_cast<double>(row[c] - largest)) / sum;
      grad[c] = static_cast<float>((probability - (c == label ? 1.0 : 0.0)) / batch);
    }
  }
  result.loss /= batch;
  return result;
}

}  // namespace train
}  // namespace terse
