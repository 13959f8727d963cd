#include "collectives/reduce_op_stages.h"

#include <cstring>

namespace terse {

void prepare_contribution(ncclDataType_t type, const ReduceOp& op, void* output, const void* input,
                          size_t count) {
  if (count == 0) return;
  if (op.scale_input) {
    scale_elements(type, output, input, count, op.input_scale);
  } else if (output != input) {
    std::memcpy(output, input, count * nccl_type_size(type));
  }
}

void finish_result(ncclDataType_t type, const ReduceOp& op, void* data, size_t count) {
  if (op.divide_result && count != 0) divide_elements(type, data, data, count, op.result_divisor);
}

}  // namespace terse
