#include "collectives/compressed/compressed_error_bound.h"

#include <cmath>

#include "common/result.h"

namespace terse {

ncclResult_t codec_error_bound(const Codec& codec, size_t count, CodecErrorBound* bound) {
  *bound = codec.error_bound(count);
  if (!bound->stated) {
    return fail(ncclInvalidArgument, "no error bound is stated for codec %s", codec.spec().c_str());
  }
  return ncclSuccess;
}

namespace {

template <typename T>
double norm_of(BoundNorm norm, const T* values, size_t count) {
  double result = 0;
  for (size_t i = 0; i < count; ++i) {
    const double v = std::fabs(static_cast<double>(values[i]));
    result = norm == BoundNorm::kL2 ? result + v * v : (v > result ? v : result);
  }
  return norm == BoundNorm::kL2 ? std::sqrt(result) : result;
}

}  // namespace

double bound_norm(BoundNorm norm, const float* values, size_t count) {
  return norm_of(norm, values, count);
}

double bound_norm(BoundNorm norm, const double* values, size_t count) {
  return norm_of(norm, values, count);
}

double allreduce_error_bound(const CodecErrorBound& bound, int lossy_steps, double norm_sum,
                             double result_scale, double max_abs_result, DType output) {
  const double lossy = norm_sum * (std::pow(1.0 + bound.factor, lossy_steps) - 1.0);
  // fp32 sums and decodes: a few roundings of values up to the (grown) norm sum.
  const double arithmetic =
      64 * std::ldexp(1.0, -24) * norm_sum * std::pow(1.0 + bound.factor, lossy_steps);
  const double scaled = (lossy + arithmetic) * std::fabs(result_scale);
  // Half an ulp of the output type, relative (fp8: E4M3 3 mantissa bits, E5M2 2).
  const double output_rounding = output == DType::kFloat16      ? std::ldexp(1.0, -11)
                                 : output == DType::kBFloat16   ? std::ldexp(1.0, -8)
                                 : output == DType::kFloat8E4M3 ? std::ldexp(1.0, -4)
                                 : output == DType::kFloat8E5M2 ? std::ldexp(1.0, -3)
                                                                : 0.0;
  return scaled + output_rounding * (max_abs_result + scaled) + 1e-30;
}

}  // namespace terse
