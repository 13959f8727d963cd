#include "perf/nccl_tests/compression_figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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
  figures.algorithm = after.last_algorithm;
  if (after.last_inner_algorithm[0] != '\0') {
    figures.algorithm += std::string("/") + after.last_inner_algorithm;
  }
  figures.predicted_us = after.last_predicted_seconds * 1e6;
  return figures;
}

std::string compression_columns(const std::string& codec, double ratio, double rel_err,
                                double mean_err) {
  char text[128];
  std::snprintf(text, sizeof(text), "  %9s  %6.4f  %8.2e  %8.2e", codec.c_str(), ratio, rel_err,
                mean_err);
  return text;
}

}  // namespace perf
}  // namespace terse
