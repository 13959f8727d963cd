#include "perf/train/parameter_digest.h"

#include <cstdint>

namespace terse {
namespace train {

double parameter_digest(const std::vector<Parameter*>& parameters) {
  double digest = 0.0;
  uint64_t state = 0x9E3779B97F4A7C15ull;  // a fixed xorshift64 stream of weights
  for (const Parameter* parameter : parameters) {
    for (float value : parameter->value) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      const double weight = static_cast<double>(state >> 11) * (1.0 / 9007199254740992.0) + 0.5;
      digest += weight * static_cast<double>(value);
    }
  }
  return digest;
}

}  // namespace train
}  // namespace terse
