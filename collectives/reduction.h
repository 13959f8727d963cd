// Element-wise reductions of every NCCL data type on the host: the arithmetic of every reducing
// collective. 16-bit and 8-bit floats are widened to fp32 for each operation and rounded back to
// nearest even (fp8 saturates to the largest finite value, as NCCL's device code does), so the
// wire keeps the user's type while each addition is exact in fp32.
#pragma once

#include <nccl.h>

#include <cstddef>

namespace terse {

enum class ReduceKind { kSum, kProd, kMax, kMin };

// What a user's ncclRedOp_t means for the algorithms: the combining function, and how inputs are
// prepared or results finished. ncclAvg on floats scales every input by 1/nranks before summing
// (as a PreMulSum); on integers it sums and divides the result (integer division, as NCCL does).
struct ReduceOp {
  ReduceKind kind = ReduceKind::kSum;
  bool scale_input = false;  // multiply each rank's input by `input_scale` first
  double input_scale = 1.0;
  bool divide_result = false;  // divide the final result by `result_divisor`
  long long result_divisor = 1;
  // The user asked for ncclAvg (not a PreMulSum that happens to scale by 1/n: only an average
  // is the same on every rank, which compression needs).
  bool average = false;
};

// Size in bytes of one element; 0 for values outside ncclDataType_t.
size_t nccl_type_size(ncclDataType_t type);
const char* nccl_type_name(ncclDataType_t type);
bool nccl_type_is_float(ncclDataType_t type);

// accumulator[i] = accumulator[i] (kind) operand[i], for `count` elements of `type`.
void reduce_into(ncclDataType_t type, ReduceKind kind, void* accumulator, const void* operand,
                 size_t count);

// output[i] = left[i] (kind) right[i]: reduce_into with the accumulator read from `left` and
// written to `output` (bit for bit the same result), one pass instead of a copy and a reduction.
// `output` may be `left` or `right`; other overlaps are not allowed.
void reduce_pair(ncclDataType_t type, ReduceKind kind, void* output, const void* left,
                 const void* right, size_t count);

// output[i] = input[i] * scale (in fp32 for narrow floats, fp64 for fp64, integer types unused).
void scale_elements(ncclDataType_t type, void* output, const void* input, size_t count,
                    double scale);

// output[i] = input[i] / divisor for integer types (truncating, as C does).
void divide_elements(ncclDataType_t type, void* output, const void* input, size_t count,
                     long long divisor);

}  // namespace terse
