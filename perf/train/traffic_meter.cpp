#include "perf/train/traffic_meter.h"

#include <terse/terse.h>

namespace terse {
namespace train {
namespace {

ncclResult_t totals(ncclComm_t comm, Traffic* traffic) {
  terseStats stats;
  const ncclResult_t result = terseCommGetStats(comm, &stats);
  if (result != ncclSuccess) return result;
  traffic->wire_bytes = stats.wire_bytes;
  traffic->dense_wire_bytes = stats.dense_wire_bytes;
  traffic->raw_bytes = stats.raw_bytes;
  return ncclSuccess;
}

}  // namespace

ncclResult_t TrafficMeter::start() {
  return totals(comm_, &start_);
}

ncclResult_t TrafficMeter::read(Traffic* traffic) const {
  const ncclResult_t result = totals(comm_, traffic);
  if (result != ncclSuccess) return result;
  traffic->wire_bytes -= start_.wire_bytes;
  traffic->dense_wire_bytes -= start_.dense_wire_bytes;
  traffic->raw_bytes -= start_.raw_bytes;
  return ncclSuccess;
}

}  // namespace train
}  // namespace terse
