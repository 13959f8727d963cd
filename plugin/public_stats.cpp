#include "plugin/public_stats.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace terse {
namespace {

void fill_row(const CompressionStatsRow& row, terseStatsRow* out) {
  copy_text(row.codec, out->codec, sizeof(out->codec));
  copy_text(row.algorithm, out->algorithm, sizeof(out->algorithm));
  out->calls = row.calls;
  out->raw_bytes = row.raw_bytes;
  out->wire_bytes = row.wire_bytes;
  out->dense_wire_bytes = row.dense_wire_bytes;
  out->encode_seconds = row.encode_seconds;
  out->decode_seconds = row.decode_seconds;
  out->seconds = row.seconds;
}

}  // namespace

void copy_text(const std::string& text, char* out, size_t bytes) {
  if (out == nullptr || bytes == 0) return;
  const size_t n = std::min(text.size(), bytes - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

terseStats public_stats(const CompressionStats& now, const ResidualStats& residuals) {
  terseStats full{};  // this library's layout, written into the caller's as far as it reaches
  full.size = sizeof(full);
  terseStats* const out = &full;
  out->calls = now.traffic.calls;
  out->compressed_calls = now.traffic.compressed_calls;
  for (const CompressionStatsRow& row : now.traffic.rows) {
    out->raw_bytes += row.raw_bytes;
    out->wire_bytes += row.wire_bytes;
    out->dense_wire_bytes += row.dense_wire_bytes;
    out->encode_seconds += row.encode_seconds;
    out->decode_seconds += row.decode_seconds;
    out->seconds += row.seconds;
    // Rows beyond the table's room still count in the totals above, and as rows_beyond.
    if (out->nrows < TERSE_STATS_MAX_ROWS) {
      fill_row(row, &out->rows[out->nrows++]);
    } else {
      ++out->rows_beyond;
    }
  }
  copy_text(now.last_call.codec, out->last_codec, sizeof(out->last_codec));
  copy_text(now.last_call.algorithm, out->last_algorithm, sizeof(out->last_algorithm));
  out->residual_entries = residuals.entries;
  out->residual_bytes = residuals.bytes;
  out->residual_max_bytes = residuals.max_bytes;
  out->residual_evictions = residuals.evictions;
  out->last_seed = now.last_call.seed;
  out->last_step = now.last_call.step;
  out->last_piece_bytes = now.last_call.piece_bytes;
  out->residual_admitted = residuals.misses;
  out->residual_refused = now.admission.refused_tensors;
  out->fallback_calls = now.admission.fallback_calls;
  out->residual_idle_steps = residuals.idle_steps;
  out->residual_step = residuals.step;
  copy_text(now.last_call.inner_algorithm, out->last_inner_algorithm,
            sizeof(out->last_inner_algorithm));
  out->last_predicted_seconds = now.last_call.predicted_seconds;
  out->pcie_bytes_to_host = now.device_copies.to_host;
  out->pcie_bytes_to_device = now.device_copies.to_device;
  const PlannerEstimates& planner = now.planner;
  out->planner_learning = planner.learning ? 1 : 0;
  out->planner_agreements = planner.agreements;
  out->planner_plan_changes = planner.plan_changes;
  out->planner_explorations = planner.explorations;
  out->intra_latency_s = planner.intra.latency_s;
  out->intra_bytes_per_s = planner.intra.bytes_per_s;
  out->nominal_intra_latency_s = planner.intra.nominal_latency_s;
  out->nominal_intra_bytes_per_s = planner.intra.nominal_bytes_per_s;
  out->inter_latency_s = planner.inter.latency_s;
  out->inter_bytes_per_s = planner.inter.bytes_per_s;
  out->nominal_inter_latency_s = planner.inter.nominal_latency_s;
  out->nominal_inter_bytes_per_s = planner.inter.nominal_bytes_per_s;
  out->reduce_bytes_per_s = planner.reduce_bytes_per_s;
  out->nominal_reduce_bytes_per_s = planner.nominal_reduce_bytes_per_s;
  for (const CodecEstimate& codec : planner.codecs) {
    if (out->planner_ncodecs == TERSE_STATS_MAX_CODECS) break;
    auto& entry = out->planner_codecs[out->planner_ncodecs++];
    copy_text(codec.codec, entry.codec, sizeof(entry.codec));
    entry.encode_bytes_per_s = codec.encode_bytes_per_s;
    entry.decode_bytes_per_s = codec.decode_bytes_per_s;
    entry.probed_encode_bytes_per_s = codec.probed_encode_bytes_per_s;
    entry.probed_decode_bytes_per_s = codec.probed_decode_bytes_per_s;
    entry.observations = codec.observations;
  }
  return full;
}

}  // namespace terse
