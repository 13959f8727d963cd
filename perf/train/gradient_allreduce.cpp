#include "perf/train/gradient_allreduce.h"

#include <cstring>

namespace terse {
namespace train {

GradientAllreduce::GradientAllreduce(ncclComm_t comm, const std::vector<Parameter*>& parameters)
    : comm_(comm), parameters_(parameters) {
  for (const Parameter* parameter : parameters_) {
    terseTensor tensor{};
    tensor.name = parameter->name.c_str();
    tensor.ndims = static_cast<int>(parameter->shape.size());
    for (size_t d = 0; d < parameter->shape.size(); ++d) tensor.shape[d] = parameter->shape[d];
    tensors_.push_back(tensor);
  }
}

ncclResult_t GradientAllreduce::average() {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    float* grad = parameters_[i]->grad.data();
    const ncclResult_t result = terseAllReduceTensor(grad, grad, parameters_[i]->size(), ncclFloat,
                                                     ncclAvg, &tensors_[i], comm_, nullptr);
    if (result != ncclSuccess) return result;
  }
  return ncclSuccess;
}

bool GradientAllreduce::uses_dgc(size_t index, ncclResult_t* result) const {
  char codec[128] = {0};
  char algorithm[64] = {0};
  *result = terseCommDecide(comm_, &tensors_[index], parameters_[index]->size(), ncclFloat, ncclAvg,
                            codec, sizeof(codec), algorithm, sizeof(algorithm));
  return strncmp(codec, "dgc", 3) == 0 && (codec[3] == '\0' || codec[3] == ':');
}

}  // namespace train
}  // namespace terse
