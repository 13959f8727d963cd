// Filling a buffer with a rank's inputs and counting the elements of a result that miss their
// reference (value_pattern.h says what the values and tolerances are).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "perf/nccl_tests/value_pattern.h"

namespace terse {
namespace perf {

// data[i] = value(i) for i < count, converted to `type`.
void fill_buffer(ncclDataType_t type, void* data, size_t count,
                 const std::function<double(size_t)>& value);

// Whether `got` is within the expectation (NaN never is).
bool matches(double got, const Expectation& expected);

// How many of data[0, count) miss expected(i): the #wrong column.
int64_t count_wrong(ncclDataType_t type, const void* data, size_t count,
                    const std::function<Expectation(size_t)>& expected);

}  // namespace perf
}  // namespace terse
