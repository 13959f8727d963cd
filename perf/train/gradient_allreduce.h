// The data-parallel step: every parameter's gradient averaged over the ranks, one
// terseAllReduceTensor per tensor, named and shaped as the model names it ("fc1.weight",
// {256, 784}), so that TERSE_POLICY rules match layers and PowerSGD sees the real matrix.
#pragma once

#include <nccl.h>
#include <terse/terse.h>

#include <vector>

#include "perf/train/parameter.h"

namespace terse {
namespace train {

class GradientAllreduce {
 public:
  GradientAllreduce(ncclComm_t comm, const std::vector<Parameter*>& parameters);

  // In place, in the parameters' order (the same on every rank). The first failing call's
  // result; ncclGetLastError says why.
  ncclResult_t average();

  // Whether the policy sends this parameter's gradient through DGC at the next step. DGC's
  // momentum correction (Lin et al. 2018) accumulates the momentum before sparsifying, in place
  // of the optimizer's, so the trainer gives such a tensor plain SGD.
  bool uses_dgc(size_t index, ncclResult_t* result) const;

 private:
  ncclComm_t comm_;
  std::vector<Parameter*> parameters_;
  std::vector<terseTensor> tensors_;
};

}  // namespace train
}  // namespace terse
