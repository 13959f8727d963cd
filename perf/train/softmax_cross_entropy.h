// The loss: softmax over the logits, cross-entropy against the labels, averaged over the batch.
#pragma once

#include <cstdint>
#include <vector>

namespace terse {
namespace train {

struct LossResult {
  double loss = 0.0;  // mean over the batch
  int correct = 0;    // samples whose largest logit is their label
};

// logits: batch x classes. Writes dL/dlogits (batch x classes) when dlogits is not null.
LossResult softmax_cross_entropy(const std::vector<float>& logits, const uint8_t* labels, int batch,
                                 int classes, std::vector<float>* dlogits);

}  // namespace train
}  // namespace terse
