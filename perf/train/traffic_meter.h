// The synchronisation traffic of a stretch of training. With --sync allreduce, from
// terseCommGetStats: what this rank sent for gradient allreduces (headers included) and what an
// uncompressed ring allreduce would have sent for the same calls. In parameter-server modes the
// collectives send nothing during an epoch, and the traffic is that of the parameters' tersePs
// handles (tersePsGetStats): the values this rank pushed plus those its fetches brought back
// (the owners sent them), and the same traffic as the tensors' own elements, without codecs.
// Protocol headers are left out there, so an uncompressed run's ratio is exactly 1.
#pragma once

#include <nccl.h>
#include <terse/terse.h>

#include <cstdint>
#include <vector>

namespace terse {
namespace train {

struct Traffic {
  uint64_t wire_bytes = 0;
  uint64_t dense_wire_bytes = 0;
};

class TrafficMeter {
 public:
  explicit TrafficMeter(ncclComm_t comm) : comm_(comm) {}
  // Counts these parameter-server handles too, from the next start() on (they must stay valid
  // until the meter's last read). The job's own progress counter is not model traffic: leave
  // it out.
  void add_ps_handles(const std::vector<tersePsHandle_t>& handles) {
    handles_.insert(handles_.end(), handles.begin(), handles.end());
  }
  // Starts a stretch; calls after this count, earlier ones (e.g. the metrics' own) do not.
  ncclResult_t start();
  // The traffic since start().
  ncclResult_t read(Traffic* traffic) const;

 private:
  ncclResult_t totals(Traffic* traffic) const;

  ncclComm_t comm_;
  std::vector<tersePsHandle_t> handles_;
  Traffic start_;
};

}  // namespace train
}  // namespace terse
