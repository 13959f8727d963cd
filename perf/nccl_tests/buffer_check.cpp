#include "perf/nccl_tests/buffer_check.h"

#include <cmath>

#include "perf/nccl_tests/element_values.h"

namespace terse {
namespace perf {

void fill_buffer(ncclDataType_t type, void* data, size_t count,
                 const std::function<double(size_t)>& value) {
  for (size_t i = 0; i < count; ++i) store_element(type, data, i, value(i));
}

bool matches(double got, const Expectation& expected) {
  if (expected.tolerance == 0) return got == expected.value;
  return std::fabs(got - expected.value) <= expected.tolerance;
}

int64_t count_wrong(ncclDataType_t type, const void* data, size_t count,
                    const std::function<Expectation(size_t)>& expected) {
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!matches(load_element(type, data, i), expected(i))) ++wrong;
  }
  return wrong;
}

}  // namespace perf
}  // namespace terse
