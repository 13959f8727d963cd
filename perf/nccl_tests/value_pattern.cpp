#include "perf/nccl_tests/value_pattern.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace terse {
namespace perf {
namespace {

bool sums_inputs(Reduction op) {
  return op == Reduction::kSum || op == Reduction::kAvg || op == Reduction::kMulSum;
}

}  // namespace

ValuePattern::ValuePattern(const DataTypeInfo& type, Reduction op, int nranks, bool scrambled)
    : type_(type), op_(op), nranks_(nranks), contributing_ranks_(nranks), scrambled_(scrambled) {
  if (!sums_inputs(op)) {
    magnitude_ = type.exact_limit;
    return;
  }
  // The whole sum (scaled by at most 2 for mulsum) must stay inside the exact range.
  const double budget = std::floor(type.exact_limit / (op == Reduction::kMulSum ? 2 : 1));
  magnitude_ = std::floor(budget / nranks);
  // Compressed runs keep every sum inside fp16's range (65504), which the fp16 codec needs.
  if (scrambled_) magnitude_ = std::min(magnitude_, std::floor(16384.0 / nranks));
  if (magnitude_ < 1) {
    magnitude_ = 1;
    contributing_ranks_ = static_cast<int>(budget);
  }
}

double ValuePattern::input(int rank, size_t index) const {
  if (op_ == Reduction::kProd) {
    // At most max_power_of_two ranks ever contribute a 2, so the product stays in range.
    double value = ((index + rank) % 2 == 0 && rank < type_.max_power_of_two) ? 2 : 1;
    if (type_.is_signed && (index + 2 * static_cast<size_t>(rank)) % 5 == 0) value = -value;
    return value;
  }
  if (rank >= contributing_ranks_) return 0;
  const auto k = static_cast<uint64_t>(magnitude_);
  const uint64_t span = type_.is_signed ? 2 * k + 1 : k + 1;
  uint64_t position = index;
  if (scrambled_) {
    // splitmix64 of (index, rank): every residue equally likely, no runs.
    uint64_t x =
        index * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(rank) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    position = x ^ (x >> 31);
  }
  const uint64_t step = (position % span) * 7 + static_cast<uint64_t>(rank) * 13 + 1;
  const double value = static_cast<double>(step % span);
  return type_.is_signed ? value - static_cast<double>(k) : value;
}

double ValuePattern::premul_scalar(int rank) const {
  return rank % 2 == 0 ? 1 : 2;
}

Expectation ValuePattern::reduced(size_t index) const {
  auto contribution = [&](int rank) {
    const double value = input(rank, index);
    return op_ == Reduction::kMulSum ? value * premul_scalar(rank) : value;
  };
  double result = contribution(0);
  double magnitudes = std::fabs(result);  // S of the avg tolerance (value_pattern.h)
  for (int rank = 1; rank < nranks_; ++rank) {
    const double value = contribution(rank);
    magnitudes += std::fabs(value);
    switch (op_) {
      case Reduction::kProd:
        result *= value;
        break;
      case Reduction::kMax:
        result = std::max(result, value);
        break;
      case Reduction::kMin:
        result = std::min(result, value);
        break;
      default:  // sum, avg, mulsum
        result += value;
    }
  }
  if (op_ != Reduction::kAvg) return {result, 0.0};
  // Floats scale every input by 1/nranks; integers divide the sum, truncating as C does.
  if (!type_.is_float) return {std::trunc(result / nranks_), 0.0};
  return {result / nranks_, (nranks_ + 2) * type_.unit_roundoff * magnitudes / nranks_};
}

}  // namespace perf
}  // namespace terse
