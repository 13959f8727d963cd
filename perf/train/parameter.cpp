#include "perf/train/parameter.h"

#include <utility>

namespace terse {
namespace train {
namespace {

size_t element_count(const std::vector<int64_t>& shape) {
  size_t count = 1;
  for (int64_t extent : shape) count *= static_cast<size_t>(extent);
  return count;
}

}  // namespace

Parameter::Parameter(std::string name_, std::vector<int64_t> shape_)
    : name(std::move(name_)),
      shape(std::move(shape_)),
      value(element_count(shape), 0.0f),
      grad(value.size(), 0.0f),
      velocity(value.size(), 0.0f) {}

}  // namespace train
}  // namespace terse
