// Reading and writing one element of any ncclDataType_t as a double, on the host. The 16- and
// 8-bit floats go through the CUDA toolkit's host conversions (round to nearest even; fp8
// saturates to the largest finite value), so what is written is what a GPU would hold.
#pragma once

#include <nccl.h>

#include <cstddef>

namespace terse {
namespace perf {

void store_element(ncclDataType_t type, void* data, size_t index, double value);
double load_element(ncclDataType_t type, const void* data, size_t index);

}  // namespace perf
}  // namespace terse
