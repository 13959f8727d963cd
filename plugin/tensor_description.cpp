#include "plugin/tensor_description.h"

#include <cinttypes>

#include "collectives/compressed/policy/policy.h"
#include "common/result.h"
#include "plugin/growing_structs.h"

namespace terse {

ncclResult_t describe_tensor(const terseTensor& given, size_t count,
                             std::shared_ptr<const TensorRequest>* request) {
  terseTensor tensor{};
  TERSE_CHECK(read_grown("terseAllReduceTensor", "tensor", given, &tensor));
  auto made = std::make_shared<TensorRequest>();
  if (tensor.name != nullptr) made->name = tensor.name;
  if (tensor.ndims < 0 || tensor.ndims > TERSE_MAX_DIMS) {
    return fail(ncclInvalidArgument, "terseAllReduceTensor: tensor->ndims %d is outside [0, %d]",
                tensor.ndims, TERSE_MAX_DIMS);
  }
  if (tensor.ndims > 0) {
    uint64_t product = 1;
    for (int d = 0; d < tensor.ndims; ++d) {
      const int64_t extent = tensor.shape[d];
      if (extent < 1) {
        return fail(ncclInvalidArgument,
                    "terseAllReduceTensor: tensor->shape[%d] is %" PRId64
                    "; dimensions must be "
                    "at least 1",
                    d, extent);
      }
      if (product > UINT64_MAX / static_cast<uint64_t>(extent)) {
        return fail(ncclInvalidArgument, "terseAllReduceTensor: tensor->shape overflows");
      }
      product *= static_cast<uint64_t>(extent);
      made->shape.push_back(extent);
    }
    if (product != count) {
      return fail(ncclInvalidArgument,
                  "terseAllReduceTensor: tensor->shape holds %" PRIu64 " elements but count is %zu",
                  product, count);
    }
  }
  if (tensor.codec != nullptr && tensor.codec[0] != '\0') {
    // Parsed (and the codec created) now, so a typo fails this call, not a later one.
    Policy check;
    if (Policy::from_codec_spec(tensor.codec, &check) != ncclSuccess) {
      return fail(ncclInvalidArgument, "terseAllReduceTensor: tensor->codec \"%s\": %s",
                  tensor.codec, last_error());
    }
    made->codec = tensor.codec;
  }
  *request = std::move(made);
  return ncclSuccess;
}

}  // namespace terse
