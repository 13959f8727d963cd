// The gradient traffic of a stretch of training, from terseCommGetStats: what this rank sent
// (headers included) and what an uncompressed ring allreduce would have sent for the same calls.
#pragma once

#include <nccl.h>

#include <cstdint>

namespace terse {
namespace train {

struct Traffic {
  uint64_t wire_bytes = 0;
  uint64_t dense_wire_bytes = 0;
  uint64_t raw_bytes = 0;
};

class TrafficMeter {
 public:
  explicit TrafficMeter(ncclComm_t comm) : comm_(comm) {}
  // Starts a stretch; calls after this count, earlier ones (e.g. the metrics' own) do not.
  ncclResult_t start();
  // The traffic since start().
  ncclResult_t read(Traffic* traffic) const;

 private:
  ncclComm_t comm_;
  Traffic start_;
};

}  // namespace train
}  // namespace terse
