// The inputs every rank sends are exact in their datatype, integer and max/min results are
// exact, and the stated float tolerance covers a reduction that rounds after every step.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "perf/nccl_tests/buffer_check.h"
#include "perf/nccl_tests/element_values.h"
#include "perf/nccl_tests/value_pattern.h"

namespace terse {
namespace perf {
namespace {

constexpr size_t kElements = 600;
const int kRankCounts[] = {1, 2, 3, 4, 8, 16, 64};

std::vector<Reduction> every_op() {
  std::vector<Reduction> ops = reductions();
  ops.push_back(Reduction::kNone);
  return ops;
}

// `value` after a round trip through the datatype.
double rounded(const DataTypeInfo& type, double value) {
  uint64_t storage = 0;
  store_element(type.type, &storage, 0, value);
  return load_element(type.type, &storage, 0);
}

TEST(PerfValuePattern, InputsAreExactInTheirType) {
  for (const DataTypeInfo& type : data_types()) {
    for (Reduction op : every_op()) {
      for (int n : kRankCounts) {
        const ValuePattern pattern(type, op, n);
        for (int rank = 0; rank < n; ++rank) {
          for (size_t i = 0; i < kElements; ++i) {
            const double value = pattern.input(rank, i);
            ASSERT_EQ(rounded(type, value), value)
                << type.name << " " << reduction_name(op) << " n=" << n << " rank " << rank;
          }
        }
      }
    }
  }
}

TEST(PerfValuePattern, InputsVaryWithRankAndIndex) {
  const ValuePattern pattern(data_type_info(ncclFloat32), Reduction::kSum, 4);
  EXPECT_NE(pattern.input(0, 5), pattern.input(1, 5));
  EXPECT_NE(pattern.input(2, 5), pattern.input(2, 6));
  EXPECT_NE(pattern.reduced(5).value, pattern.reduced(6).value);
}

TEST(PerfValuePattern, ExactResultsAreRepresentableAndHaveNoTolerance) {
  for (const DataTypeInfo& type : data_types()) {
    for (Reduction op : reductions()) {
      for (int n : kRankCounts) {
        const ValuePattern pattern(type, op, n);
        const bool exact = !type.is_float || op != Reduction::kAvg;
        for (size_t i = 0; i < kElements; ++i) {
          const Expectation expected = pattern.reduced(i);
          if (exact) {
            ASSERT_EQ(expected.tolerance, 0.0) << type.name << reduction_name(op);
          }
          // Everything but avg of floats stays exact in every type.
          if (op != Reduction::kAvg || !type.is_float) {
            ASSERT_EQ(rounded(type, expected.value), expected.value)
                << type.name << " " << reduction_name(op) << " n=" << n << " i=" << i;
          }
        }
      }
    }
  }
}

// The reduction as an algorithm computes it: each input prepared in the datatype (scaled for
// avg and mulsum), then combined one rank at a time with every partial result rounded to the
// datatype (16- and 8-bit floats combined in fp32), in the given rank order.
double reduce_in_type(const DataTypeInfo& type, Reduction op, const ValuePattern& pattern,
                      size_t index, const std::vector<int>& order) {
  const int n = pattern.nranks();
  auto prepared = [&](int rank) {
    double value = pattern.input(rank, index);
    if (op == Reduction::kMulSum) value *= pattern.premul_scalar(rank);
    if (op == Reduction::kAvg && type.is_float) {
      // The factor 1/n is rounded to the type the scaling runs in: fp32, or fp64 for double.
      value *= type.type == ncclFloat64 ? 1.0 / n : static_cast<float>(1.0 / n);
    }
    return rounded(type, value);
  };
  double result = prepared(order[0]);
  for (size_t k = 1; k < order.size(); ++k) {
    const double value = prepared(order[k]);
    double combined = 0;
    switch (op) {
      case Reduction::kProd:
        combined = result * value;
        break;
      case Reduction::kMax:
        combined = std::max(result, value);
        break;
      case Reduction::kMin:
        combined = std::min(result, value);
        break;
      default:
        combined = result + value;
    }
    if (type.is_float && type.bytes < 4) combined = static_cast<float>(combined);
    result = rounded(type, combined);
  }
  if (op == Reduction::kAvg && !type.is_float) result = std::trunc(result / n);
  return result;
}

TEST(PerfValuePattern, ToleranceCoversRoundingInAnyRankOrder) {
  for (const DataTypeInfo& type : data_types()) {
    for (Reduction op : reductions()) {
      for (int n : kRankCounts) {
        const ValuePattern pattern(type, op, n);
        std::vector<int> forward(n), backward(n);
        for (int rank = 0; rank < n; ++rank) {
          forward[rank] = rank;
          backward[rank] = n - 1 - rank;
        }
        for (size_t i = 0; i < kElements; ++i) {
          for (const auto* order : {&forward, &backward}) {
            const double got = reduce_in_type(type, op, pattern, i, *order);
            ASSERT_TRUE(matches(got, pattern.reduced(i)))
                << type.name << " " << reduction_name(op) << " n=" << n << " i=" << i << ": got "
                << got << ", reference " << pattern.reduced(i).value << " +- "
                << pattern.reduced(i).tolerance;
          }
        }
      }
    }
  }
}

TEST(PerfValuePattern, ToleranceOfNarrowFloatsIsStatedPerType) {
  // avg of 3 ranks: S = sum of |x| / 3, tolerance (3 + 2) * u * S.
  for (ncclDataType_t id : {ncclFloat16, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2}) {
    const DataTypeInfo& type = data_type_info(id);
    const ValuePattern pattern(type, Reduction::kAvg, 3);
    double magnitudes = 0;
    for (int rank = 0; rank < 3; ++rank) magnitudes += std::fabs(pattern.input(rank, 11));
    EXPECT_DOUBLE_EQ(pattern.reduced(11).tolerance, 5 * type.unit_roundoff * magnitudes / 3)
        << type.name;
  }
  EXPECT_EQ(data_type_info(ncclFloat16).unit_roundoff, std::ldexp(1.0, -11));
  EXPECT_EQ(data_type_info(ncclBfloat16).unit_roundoff, std::ldexp(1.0, -8));
  EXPECT_EQ(data_type_info(ncclFloat8e4m3).unit_roundoff, std::ldexp(1.0, -4));
  EXPECT_EQ(data_type_info(ncclFloat8e5m2).unit_roundoff, std::ldexp(1.0, -3));
}

}  // namespace
}  // namespace perf
}  // namespace terse
