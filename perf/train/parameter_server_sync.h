// The parameter-server side of one rank's training (--sync downpour|easgd|ssp:S): one tersePs
// tensor per model parameter, named as the parameter ("fc1.weight"), so that policy rules
// (TERSE_CODEC, TERSE_POLICY) choose its pushes' codec by layer as they choose the allreduce's,
// cut between rows of its shape; the update scheme (perf/train/ps_schemes) over them; and the
// centre, the model the job trains, swapped into the parameters for evaluation.
#pragma once

#include <nccl.h>
#include <terse/terse.h>

#include <memory>
#include <vector>

#include "perf/train/parameter.h"
#include "perf/train/ps_schemes/update_scheme.h"
#include "perf/train/sync_scheme.h"

namespace terse {
namespace train {

class ParameterServerSync {
 public:
  ParameterServerSync(ncclComm_t comm, const std::vector<Parameter*>& parameters,
                      const SyncScheme& scheme, int nranks);
  // Frees the tensors if free() was not called (a failing run ends the process anyway).
  ~ParameterServerSync();

  // Collective: creates the tensors from the parameters' values (the same on every rank: one
  // seed) and starts the scheme.
  ncclResult_t init();
  // After the optimizer's step (ps::UpdateScheme's contract).
  ncclResult_t step() { return scheme_->step(); }
  ncclResult_t flush() { return scheme_->flush(); }
  // Saves the worker's values and loads the centre into the parameters; after flush() on every
  // rank and a barrier, every rank loads the same centre.
  ncclResult_t load_centre();
  void restore_worker_values();
  // Collective: flushes and frees the tensors.
  ncclResult_t free();
  // One per parameter, after init() and until free() (for tersePsGetStats).
  const std::vector<tersePsHandle_t>& handles() const { return handles_; }

 private:
  ncclComm_t comm_;
  std::vector<Parameter*> parameters_;
  SyncScheme scheme_spec_;
  int nranks_;
  std::vector<tersePsHandle_t> handles_;
  std::vector<ps::SchemeTensor> tensors_;
  std::unique_ptr<ps::UpdateScheme> scheme_;
  std::vector<std::vector<float>> worker_values_;
};

}  // namespace train
}  // namespace terse
