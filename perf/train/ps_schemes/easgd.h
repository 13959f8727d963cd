// Elastic averaging SGD (Zhang, Choromanska and LeCun, "Deep learning with Elastic Averaging
// SGD", 2015), asynchronous form: each worker trains its own variables x and, every `tau` steps,
// is pulled towards the centre variable c (the parameter-server tensor) while pulling the centre
// towards itself, by the same elastic difference:
//     d = alpha (x - c);   x -= d;   c += d   (pushed as a tersePsAdd of d)
// so x + c is conserved by the exchange and the workers explore around a centre that averages
// them. The paper's moving rate is alpha = beta / p for p workers, with beta = 0.9 in its
// experiments; the trainer passes beta / nranks. Between exchanges a worker runs its own
// optimizer, untouched by the scheme (with momentum, the paper's EAMSGD).
//
// Cadence (t counts steps from 0; step t ends in step()): at the end of step t when
// (t + 1) % tau == 0, receive c (every tensor's receive issued, then all waited for: the pull
// must use the centre as it is, so this one is not prefetched), apply the pull to x and push d.
// Pushes are released as they finish; an exchange waits for the oldest only when more than
// kPushesInFlight per tensor are still on their way.
#pragma once

#include <vector>

#include "perf/train/ps_schemes/pending_requests.h"
#include "perf/train/ps_schemes/update_scheme.h"

namespace terse {
namespace ps {

struct EasgdSettings {
  int tau = 1;
  float alpha = 0.45f;  // beta / nranks: 0.9 / 2
};

class Easgd : public UpdateScheme {
 public:
  // Pushes per tensor that may be in flight before an exchange waits for the oldest.
  static constexpr size_t kPushesInFlight = 4;

  Easgd(const std::vector<SchemeTensor>& tensors, const EasgdSettings& settings);
  ncclResult_t start() override { return ncclSuccess; }
  ncclResult_t step() override;
  // Waits for the last exchange's pushes (the local variables are the worker's own: nothing else
  // is owed to the centre).
  ncclResult_t flush() override { return pushes_.wait_all(); }

 private:
  struct Tensor {
    SchemeTensor tensor;
    std::vector<float> centre;      // the receive's destination
    std::vector<float> difference;  // alpha (x - c), as pushed
  };
  EasgdSettings settings_;
  std::vector<Tensor> tensors_;
  PendingRequests pushes_;

  ncclResult_t exchange();
};

}  // namespace ps
}  // namespace terse
