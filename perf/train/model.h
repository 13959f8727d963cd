// What the trainer needs of a model: logits for a batch of images, the gradients of every
// parameter for dL/dlogits, and the parameters in a fixed order (the order their gradients are
// reduced in, the same on every rank).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "perf/train/parameter.h"

namespace terse {
namespace train {

class Model {
 public:
  virtual ~Model() = default;
  // images: batch x 784 -> logits: batch x 10 (valid until the next forward).
  virtual const std::vector<float>& forward(const float* images, int batch) = 0;
  // Sets every parameter's grad for the last forward's batch.
  virtual void backward(const std::vector<float>& dlogits, int batch) = 0;
  virtual std::vector<Parameter*> parameters() = 0;
};

// "mlp" or "cnn", initialised from `seed` (the same weights for the same seed); null for any
// other name.
std::unique_ptr<Model> make_model(const std::string& name, uint64_t seed);

}  // namespace train
}  // namespace terse
