#include "collectives/compressed/compressed_error_bound.h"

#include <cmath>
#include <string>
#include <vector>

#include "codecs/codec_params.h"
#include "codecs/sparse_density.h"
#include "common/result.h"

namespace terse {
namespace {

// The parameters a bound depends on, read from the codec's canonical spec (every parameter is
// spelled out there, so the fallbacks only keep the reads total).
struct SpecParameters {
  explicit SpecParameters(const Codec& codec) {
    std::string name;
    if (parse_codec_spec(codec.spec(), &name, &params_) != ncclSuccess) params_ = CodecParams();
  }
  double number(const char* key, double fallback) {
    double value = fallback;
    if (params_.get_double(key, fallback, -1e300, 1e300, &value) != ncclSuccess) value = fallback;
    return value;
  }
  // Whether choice `key` (one of `choices`, as the codec defines them) is `expected`.
  bool is(const char* key, const std::vector<std::string>& choices, const char* expected) {
    std::string value;
    return params_.get_choice(key, choices, choices.front(), &value) == ncclSuccess &&
           value == expected;
  }
  bool flag(const char* key, bool fallback) {
    bool value = fallback;
    return params_.get_bool(key, fallback, &value) == ncclSuccess ? value : fallback;
  }

 private:
  CodecParams params_;
};

// The blockwise integer quantizers: half a step (nearest) or a whole step (stochastic), the
// step being (max - min) / (2^b - 1) <= 2 max|x| / (2^b - 1) (minmax) or
// max|x| / (2^(b-1) - 1) (absmax); plus their 2^-20 max|x| of fp32 rounding.
double int_quant_factor(int bits, SpecParameters& parameters) {
  const bool absmax = parameters.is("mode", {"minmax", "absmax"}, "absmax");
  const bool stochastic = parameters.is("rounding", {"nearest", "stochastic"}, "stochastic");
  const double step = absmax ? 1.0 / ((1 << (bits - 1)) - 1) : 2.0 / ((1 << bits) - 1);
  return (stochastic ? step : step / 2) + std::ldexp(1.0, -20);
}

}  // namespace

ncclResult_t codec_error_bound(const Codec& codec, size_t count, CodecErrorBound* bound) {
  SpecParameters parameters(codec);
  *bound = CodecErrorBound{};
  switch (codec.id()) {
    case CodecId::kNone:
      return ncclSuccess;
    case CodecId::kFp16:
      bound->factor = std::ldexp(1.0, -11);
      return ncclSuccess;
    case CodecId::kBf16:
      bound->factor = std::ldexp(1.0, -8);
      return ncclSuccess;
    case CodecId::kInt8:
      bound->factor = int_quant_factor(8, parameters);
      return ncclSuccess;
    case CodecId::kInt4:
      bound->factor = int_quant_factor(4, parameters);
      return ncclSuccess;
    case CodecId::kInt2:
      bound->factor = int_quant_factor(2, parameters);
      return ncclSuccess;
    case CodecId::kQsgd:
      // x^ lies on one of the two levels next to x, N / levels apart (N: the block's norm).
      bound->factor = 1.0 / parameters.number("levels", 7) + std::ldexp(1.0, -20);
      bound->norm =
          parameters.is("norm", {"max", "l2"}, "l2") ? BoundNorm::kL2 : BoundNorm::kMaxAbs;
      return ncclSuccess;
    case CodecId::kTernGrad:
      // x^ in {0, S sign x} with S <= max|x|; clipping moves x by at most another max|x|.
      bound->factor = parameters.number("clip", 0) > 0 ? 2.0 : 1.0;
      return ncclSuccess;
    case CodecId::kSign:  // | |x| - mean|x| | <= max|x|
    case CodecId::kTopK:  // kept exact, dropped ones move by |x|
    case CodecId::kThreshold:
    case CodecId::kDgc:  // the first step of a fresh tensor: top-k of the gradient itself
      bound->factor = 1.0;
      return ncclSuccess;
    case CodecId::kRandomK: {
      // Unbiased: a kept value is scaled by its stratum's length L <= ceil(count / k), so it
      // moves by (L - 1)|x|; a dropped one by |x|.
      if (!parameters.flag("unbiased", true)) {
        bound->factor = 1.0;
        return ncclSuccess;
      }
      const size_t kept = kept_count(count, parameters.number("ratio", 0.01));
      const double longest = kept == 0 ? 1.0 : std::ceil(double(count) / double(kept));
      bound->factor = longest > 2 ? longest - 1 : 1.0;
      return ncclSuccess;
    }
    case CodecId::kPowerSgd:
      bound->factor = 1.0 + std::ldexp(1.0, -16);  // an orthogonal projection, fp32 GEMMs
      bound->norm = BoundNorm::kL2;
      return ncclSuccess;
  }
  return fail(ncclInvalidArgument, "no error bound is stated for codec %s", codec.spec().c_str());
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
  const double output_rounding = output == DType::kFloat16    ? std::ldexp(1.0, -11)
                                 : output == DType::kBFloat16 ? std::ldexp(1.0, -8)
                                                              : 0.0;
  return scaled + output_rounding * (max_abs_result + scaled) + 1e-30;
}

}  // namespace terse
