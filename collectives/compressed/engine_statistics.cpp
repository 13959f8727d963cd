// The compression engine's statistics (engine_statistics.h: what record() counts per codec and
// algorithm) and the rest of its C API (terse.h): policy, residual resets and statistics, decide.
#include <algorithm>
#include <string>

#include "collectives/compressed/compression_engine.h"
#include "common/result.h"
#include "transport/transport.h"

namespace terse {

uint64_t CompressionEngine::dense_wire_bytes(uint64_t bytes, int nranks) {
  if (nranks <= 1) return 0;
  return 2 * bytes * static_cast<uint64_t>(nranks - 1) / static_cast<uint64_t>(nranks);
}

void CompressionEngine::record(const std::string& codec, const std::string& algorithm,
                               uint64_t raw_bytes, uint64_t wire_bytes,
                               const CompressionCounters& counters, double seconds,
                               bool compressed) {
  // Rows are named by codec name (the spec up to ':'); last_codec keeps the whole spec.
  const std::string codec_name = codec.substr(0, codec.find(':'));
  auto row = std::find_if(stats_.traffic.rows.begin(), stats_.traffic.rows.end(),
                          [&](const CompressionStatsRow& r) {
                            return r.codec == codec_name && r.algorithm == algorithm;
                          });
  if (row == stats_.traffic.rows.end()) {
    stats_.traffic.rows.push_back(CompressionStatsRow{codec_name, algorithm});
    row = stats_.traffic.rows.end() - 1;
  }
  ++row->calls;
  row->raw_bytes += raw_bytes;
  row->wire_bytes += wire_bytes;
  row->dense_wire_bytes += dense_wire_bytes(raw_bytes, transport_->nranks());
  row->encode_seconds += counters.encode_seconds;
  row->decode_seconds += counters.decode_seconds;
  row->seconds += seconds;
  stats_.device_copies.to_host += counters.pcie_bytes_to_host;
  stats_.device_copies.to_device += counters.pcie_bytes_to_device;
  ++stats_.traffic.calls;
  if (compressed) ++stats_.traffic.compressed_calls;
  stats_.last_call.codec = codec;
  stats_.last_call.algorithm = algorithm;
}

void CompressionEngine::record_dense(const CollectiveArgs& args, const char* algorithm,
                                     uint64_t wire_bytes, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  record("none", algorithm, args.count * nccl_type_size(args.type), wire_bytes,
         CompressionCounters{}, seconds, false);
  if (dense_to_observe_) {
    planner_->observe(dense_to_observe_->request, dense_to_observe_->plan,
                      Planner::Measured{seconds, 0, 0});
    dense_to_observe_.reset();
  }
}

void CompressionEngine::count_staging_copies(uint64_t to_host, uint64_t to_device) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.device_copies.to_host += to_host;
  stats_.device_copies.to_device += to_device;
}

CompressionStats CompressionEngine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CompressionStats stats = stats_;
  stats.planner = planner_->estimates();
  return stats;
}

void CompressionEngine::reset_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_ = CompressionStats{};
}

void CompressionEngine::set_policy(Policy policy) {
  std::lock_guard<std::mutex> lock(mutex_);
  policy_ = std::move(policy);
  logged_.clear();
  ++policy_generation_;
}

size_t CompressionEngine::reset_residuals(const std::string& name) {
  if (name.empty()) return residuals_->reset_comm(comm_id_);
  TensorKey key;
  key.comm = comm_id_;
  key.name = name;
  return residuals_->reset(key) ? 1 : 0;
}

ncclResult_t CompressionEngine::decide(const CollectiveArgs& args, std::string* codec,
                                       std::string* algorithm) {
  std::lock_guard<std::mutex> lock(mutex_);
  Plan plan;
  TERSE_CHECK(predict(args, /*pending=*/nullptr, &plan));
  *codec = plan.compressed ? plan.codec->spec() : "none";
  *algorithm = plan.compressed ? plan.algorithm->name : "";
  return ncclSuccess;
}

std::string CompressionEngine::ps_receive_codec(const std::string& name, size_t count,
                                                ncclDataType_t type) const {
  TensorInfo info;
  info.name = name;
  info.bytes = count * nccl_type_size(type);
  DType dtype = DType::kFloat32;
  if (dtype_from_nccl(type, &dtype)) info.dtype = dtype;
  info.op = ncclSum;
  info.comm_size = transport_->nranks();
  info.link = link_;
  std::lock_guard<std::mutex> lock(mutex_);
  return policy_.decide(info).ps_receive;
}

ResidualStats CompressionEngine::residual_stats() const {
  return residuals_->stats();
}

}  // namespace terse
