#include "perf/nccl_tests/compression_figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "perf/nccl_tests/element_values.h"

namespace terse {
namespace perf {

bool compression_requested() {
  const char* codec = getenv("TERSE_CODEC");
  return codec != nullptr && codec[0] != '\0' && std::strcmp(codec, "none") != 0;
}

CompressionFigures compression_figures(const terseStats& before, const terseStats& after,
                                       int calls) {
  CompressionFigures figures;
  const std::string spec = after.last_codec;
  figures.codec = spec.substr(0, spec.find(':'));
  const double wire = static_cast<double>(after.wire_bytes - before.wire_bytes);
  const double dense = static_cast<double>(after.dense_wire_bytes - before.dense_wire_bytes);
  figures.ratio = dense > 0 ? wire / dense : 1.0;
  const double per_call = calls > 0 ? 1e6 / calls : 0;
  figures.encode_us = (after.encode_seconds - before.encode_seconds) * per_call;
  figures.decode_us = (after.decode_seconds - before.decode_seconds) * per_call;
  return figures;
}

bool last_call_bound(ncclComm_t comm, size_t count, int nranks, StatedBound* bound) {
  terseStats stats;
  if (terseCommGetStats(comm, &stats) != ncclSuccess) return false;
  if (std::strcmp(stats.last_codec, "none") == 0) return false;
  int l2 = 0;
  if (terseCodecErrorBound(stats.last_codec, count, &bound->factor, &l2) != ncclSuccess ||
      terseAlgorithmLossySteps(stats.last_algorithm, nranks, &bound->steps) != ncclSuccess) {
    return false;
  }
  bound->l2 = l2 != 0;
  return true;
}

double input_norm_sum(const ValuePattern& pattern, size_t count, bool l2) {
  double sum = 0;
  for (int rank = 0; rank < pattern.nranks(); ++rank) {
    double norm = 0;
    for (size_t i = 0; i < count; ++i) {
      const double value = std::fabs(pattern.input(rank, i));
      norm = l2 ? norm + value * value : std::max(norm, value);
    }
    sum += l2 ? std::sqrt(norm) : norm;
  }
  return sum;
}

double allreduce_bound(const StatedBound& bound, double norm_sum, double scale,
                       double unit_roundoff, double max_reference) {
  const double grown = std::pow(1.0 + bound.factor, bound.steps);
  const double lossy = norm_sum * (grown - 1.0);
  const double arithmetic = 64 * std::ldexp(1.0, -24) * norm_sum * grown;
  const double scaled = (lossy + arithmetic) * std::fabs(scale);
  // A 16-bit output rounds the result once more (fp32 outputs: well inside the slack above).
  const double rounding = unit_roundoff > std::ldexp(1.0, -20) ? unit_roundoff : 0.0;
  return scaled + rounding * (max_reference + scaled);
}

int64_t count_outside_bound(ncclDataType_t type, const void* data, size_t count,
                            const ValuePattern& pattern, double bound, double* rel_err) {
  int64_t outside = 0;
  double worst = 0, largest = 0;
  for (size_t i = 0; i < count; ++i) {
    const Expectation expected = pattern.reduced(i);
    const double got = load_element(type, data, i);
    const double error = std::fabs(got - expected.value);
    if (!(error <= bound + expected.tolerance)) ++outside;
    if (std::isfinite(error)) worst = std::max(worst, error);
    largest = std::max(largest, std::fabs(expected.value));
  }
  *rel_err = largest > 0 ? worst / largest : worst;
  return outside;
}

std::string compression_columns(const std::string& codec, double ratio, double rel_err) {
  char text[96];
  std::snprintf(text, sizeof(text), "  %9s  %6.4f  %8.2e", codec.c_str(), ratio, rel_err);
  return text;
}

}  // namespace perf
}  // namespace terse
