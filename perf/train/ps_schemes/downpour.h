// Downpour SGD (Dean et al., "Large Scale Distributed Deep Networks", 2012): each worker trains
// its own copy of the model, pushes the updates it made to the parameter server every
// `send_every` steps and replaces its copy with the server's every `fetch_every` steps, never
// waiting for the other workers.
//
// The server only adds (tersePsAdd): the optimizer runs on the worker, so what is pushed is the
// optimizer's work, the change of the values since the last push, times `push_scale`. The
// trainer passes 1 / nranks, so that with send_every = fetch_every = 1 and no delay the centre
// takes the ranks' mean step, as a gradient allreduce would (momentum is linear, so the mean of
// the workers' momentum steps is the step of the mean momentum).
//
// Fetches are prefetched: the receive for the fetch at the end of step t is issued at the end of
// step t - 1 (right after that step's push, so it sees it), and overlaps step t's compute. The
// worker's values after a fetch are the centre as received plus every update of this worker the
// receive could not contain (those not pushed when it was issued, and those made since), at full
// scale: a fetch never undoes the worker's own recent progress.
//
// Nothing waits for a slow owner (a straggler's server thread, a congested link): a tensor whose
// receive has not arrived by its fetch step keeps its values and takes the receive at the first
// step end after it arrived (its next receive is issued then, or at the next issue step); pushes
// are released as they finish, and a worker waits only when more than kPushesInFlight pushes
// per tensor are still on their way.
//
// Cadence (t counts steps from 0; step t ends in step()):
//   push    at the end of step t when (t + 1) % send_every == 0, and in flush()
//   fetch   at the end of step t when (t + 1) % fetch_every == 0 (after that step's push), for
//           every tensor whose receive has arrived; later ones at the first step end after
//   issue   the receive at the end of step t when (t + 2) % fetch_every == 0 (after any fetch),
//           and in start() when fetch_every is 1 (step 0's fetch), for every tensor that has no
//           receive outstanding; with fetch_every 1 a late tensor's next receive goes out when its
//           last one is applied
#pragma once

#include <vector>

#include "perf/train/ps_schemes/pending_requests.h"
#include "perf/train/ps_schemes/update_scheme.h"

namespace terse {
namespace ps {

struct DownpourSettings {
  int send_every = 1;
  int fetch_every = 1;
  float push_scale = 1.0f;
};

class Downpour : public UpdateScheme {
 public:
  // Pushes per tensor that may be in flight before a push waits for the oldest.
  static constexpr size_t kPushesInFlight = 4;

  Downpour(const std::vector<SchemeTensor>& tensors, const DownpourSettings& settings);
  ~Downpour() override;
  ncclResult_t start() override;
  ncclResult_t step() override;
  // Pushes the updates not yet pushed (if a step made any since the last push) and waits for
  // every push; a receive in flight is waited for too but kept, to be applied at its fetch step.
  ncclResult_t flush() override;

 private:
  struct Tensor {
    SchemeTensor tensor;
    std::vector<float> previous;         // the values when the last step() returned
    std::vector<float> unpushed;         // updates made since the last push
    std::vector<float> unseen;           // updates the outstanding receive cannot contain
    std::vector<float> outgoing;         // push_scale * unpushed, as sent
    std::vector<float> received;         // the receive's destination
    tersePsRequest_t receive = nullptr;  // in flight
    bool arrived = false;                // received holds a receive not yet applied
    bool overdue = false;                // its fetch step passed before it arrived
  };
  DownpourSettings settings_;
  std::vector<Tensor> tensors_;
  PendingRequests pushes_;
  bool steps_unpushed_ = false;  // a step ended since the last push

  ncclResult_t push();
  ncclResult_t issue_receive(Tensor* tensor);
  // Applies the tensor's receive if it has arrived (never waits); marks it overdue if not.
  ncclResult_t fetch(Tensor* tensor);
};

}  // namespace ps
}  // namespace terse
