// What every parameter-server update scheme (Downpour, EASGD, stale synchronous parallel) is to
// a trainer: a worker keeps its own copy of the model's tensors, runs its own optimizer on them,
// and once per step hands them to the scheme, which decides what to push to the parameter
// server (the "centre", one tersePs tensor per model tensor) and when to read it back.
//
// The step contract, the same for every scheme:
//   1. every rank creates the tensors' tersePs handles from the same initial values (tersePsInit
//      is collective), so worker and centre start equal;
//   2. start() once, before the first step;
//   3. per step: the trainer computes gradients on the values, its optimizer changes the values
//      in place, then step() (which may change the values again: a fetch, an elastic pull);
//   4. flush() whenever the centre must hold everything this worker has to give (the end of an
//      epoch), and before the handles are freed.
// Every call returns the first failing tersePs call's result (ncclGetLastError says why); a
// scheme that failed should not be stepped again.
#pragma once

#include <nccl.h>
#include <terse/terse.h>

#include <cstddef>
#include <cstdint>

namespace terse {
namespace ps {

// One model tensor as a scheme sees it: the worker's values (fp32, `count` of them, owned by the
// trainer, updated in place by its optimizer) and the parameter-server tensor of the same size
// they synchronize with.
struct SchemeTensor {
  tersePsHandle_t handle = nullptr;
  float* values = nullptr;
  size_t count = 0;
};

class UpdateScheme {
 public:
  virtual ~UpdateScheme() = default;
  virtual ncclResult_t start() = 0;
  virtual ncclResult_t step() = 0;
  virtual ncclResult_t flush() = 0;
  // Steps done so far (step() calls that returned).
  uint64_t steps() const { return steps_; }

 protected:
  uint64_t steps_ = 0;
};

}  // namespace ps
}  // namespace terse
