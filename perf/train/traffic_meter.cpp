#include "perf/train/traffic_meter.h"

namespace terse {
namespace train {

ncclResult_t TrafficMeter::totals(Traffic* traffic) const {
  terseStats stats{};
  ncclResult_t result = terseCommGetStats(comm_, &stats);
  if (result != ncclSuccess) return result;
  traffic->wire_bytes = stats.wire_bytes;
  traffic->dense_wire_bytes = stats.dense_wire_bytes;
  for (tersePsHandle_t handle : handles_) {
    tersePsStats ps{};
    result = tersePsGetStats(handle, &ps);
    if (result != ncclSuccess) return result;
    // Pushes are this rank's sends; a fetch's values are sent by their owner for this rank, so
    // summed over the ranks this counts every byte of the job's parameter-server traffic once.
    traffic->wire_bytes += ps.send_bytes + ps.receive_bytes;
    traffic->dense_wire_bytes += ps.send_uncompressed_bytes + ps.receive_uncompressed_bytes;
  }
  return ncclSuccess;
}

ncclResult_t TrafficMeter::start() {
  return totals(&start_);
}

ncclResult_t TrafficMeter::read(Traffic* traffic) const {
  const ncclResult_t result = totals(traffic);
  if (result != ncclSuccess) return result;
  traffic->wire_bytes -= start_.wire_bytes;
  traffic->dense_wire_bytes -= start_.dense_wire_bytes;
  return ncclSuccess;
}

}  // namespace train
}  // namespace terse
