#include "model_steps.h"

#include <cmath>
#include <stdexcept>

#include "common/result.h"

namespace terse {
namespace model {

Range near_equal(size_t count, int parts, int index) {
  const size_t n = static_cast<size_t>(parts), i = static_cast<size_t>(index);
  const size_t base = count / n, extra = count % n;
  return Range{i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

size_t piece_count(size_t longest, size_t piece) {
  if (piece == 0 || longest <= piece) return 1;
  return (longest + piece - 1) / piece;
}

Range piece_of(const Range& range, size_t piece, size_t k) {
  const size_t start = k * piece;
  if (start >= range.count) return Range{range.offset + range.count, 0};
  return Range{range.offset + start, std::min(piece, range.count - start)};
}

uint64_t seed_at(uint64_t call_seed, size_t offset) {
  return call_seed ^ (static_cast<uint64_t>(offset) * 0x9e3779b97f4a7c15ull);
}

std::vector<uint8_t> encode(const GroupCall& call, const float* values, size_t count, size_t offset,
                            float* error, CodecState* state) {
  EncodeContext context;
  context.seed = seed_at(call.seed, offset);
  context.step = call.step;
  context.warmup_progress = call.warmup_progress;
  context.shape = call.shape;
  context.error = error;
  context.state = state;
  std::vector<uint8_t> message(call.codec->max_encoded_bytes(count, DType::kFloat32));
  size_t bytes = 0;
  if (call.codec->encode(values, count, DType::kFloat32, context, message.data(), message.size(),
                         &bytes) != ncclSuccess) {
    throw std::runtime_error(std::string("model: encode failed: ") + last_error());
  }
  message.resize(bytes);
  return message;
}

void decode(const GroupCall& call, const std::vector<uint8_t>& message, float* out, size_t count,
            bool accumulate) {
  if (call.codec->decode(message.data(), message.size(), out, count, DType::kFloat32, accumulate,
                         DecodeContext{}) != ncclSuccess) {
    throw std::runtime_error(std::string("model: decode failed: ") + last_error());
  }
}

GroupResult position_order_sum(const std::vector<std::vector<float>>& values) {
  GroupResult result;
  const size_t count = values.empty() ? 0 : values[0].size();
  result.sum.assign(count, 0.0f);
  result.tolerance.assign(count, 0.0);
  const double ulp = std::ldexp(1.0, -23);
  for (size_t i = 0; i < count; ++i) {
    double magnitude = 0;
    float sum = 0.0f;
    for (size_t r = 0; r < values.size(); ++r) {
      sum = r == 0 ? values[r][i] : sum + values[r][i];
      magnitude += std::fabs(static_cast<double>(values[r][i]));
    }
    result.sum[i] = sum;
    result.tolerance[i] = static_cast<double>(values.size()) * ulp * magnitude;
  }
  return result;
}

}  // namespace model
}  // namespace terse
