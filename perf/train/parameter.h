// One trainable tensor of a model: its name and shape (what terseAllReduceTensor is told, so that
// per-layer policy rules match it), its values, the gradient of the current step and the
// optimizer's velocity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace terse {
namespace train {

struct Parameter {
  std::string name;            // e.g. "fc1.weight"
  std::vector<int64_t> shape;  // outermost first, e.g. {256, 784}
  std::vector<float> value;
  std::vector<float> grad;
  std::vector<float> velocity;

  Parameter(std::string name_, std::vector<int64_t> shape_);
  size_t size() const { return value.size(); }
};

}  // namespace train
}  // namespace terse
