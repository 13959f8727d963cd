#include "codecs/sparse_density.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/result.h"

namespace terse {

size_t kept_count(size_t count, double density) {
  if (count == 0) return 0;
  double wanted = std::floor(density * static_cast<double>(count) + 0.5);
  if (!(wanted >= 1.0)) return 1;  // also catches NaN
  if (wanted >= static_cast<double>(count)) return count;
  return static_cast<size_t>(wanted);
}

ncclResult_t ramp_density(const char* codec, double target, double progress, double* density) {
  if (!(progress > 0.0 && progress <= 1.0)) {
    return fail(ncclInvalidArgument, "%s: warmup_progress=%g is outside (0, 1]", codec, progress);
  }
  *density = progress == 1.0 ? target : std::pow(target, progress);
  return ncclSuccess;
}

ncclResult_t check_sparse_count(const char* codec, size_t count) {
  if (count > kMaxSparseCount) {
    return fail(ncclInvalidArgument,
                "%s: count %zu exceeds the %llu elements that uint32 indices address", codec, count,
                static_cast<unsigned long long>(kMaxSparseCount));
  }
  return ncclSuccess;
}

std::string spec_number(double value) {
  char text[40];
  for (int digits = 6; digits <= 17; ++digits) {
    snprintf(text, sizeof(text), "%.*g", digits, value);
    if (strtod(text, nullptr) == value) break;
  }
  return text;
}

}  // namespace terse
