#include "codecs/matrix_view.h"

#include <cmath>

#include "common/result.h"

namespace terse {

size_t integer_sqrt(size_t n) {
  // The double estimate is within one of the answer for any 64-bit n; fix it up exactly,
  // comparing with divisions so that nothing overflows.
  size_t root = static_cast<size_t>(std::sqrt(static_cast<double>(n)));
  while (root > 0 && root > n / root) --root;
  while ((root + 1) <= n / (root + 1)) ++root;
  return root;
}

MatrixShape near_square_shape(size_t count) {
  if (count == 0) return MatrixShape{0, 0};
  size_t rows = integer_sqrt(count);
  while (count % rows != 0) --rows;  // ends at 1 at the latest
  return MatrixShape{rows, count / rows};
}

ncclResult_t resolve_matrix_shape(const char* codec, size_t count, const MatrixShape& requested,
                                  MatrixShape* shape) {
  if (requested.rows == 0 && requested.cols == 0) {
    *shape = near_square_shape(count);
    return ncclSuccess;
  }
  bool size_matches = false;
  if (requested.rows != 0 && requested.cols != 0) {
    size_matches =
        requested.cols <= count / requested.rows && requested.rows * requested.cols == count;
  }
  if (!size_matches) {
    return fail(ncclInvalidArgument,
                "%s: matrix shape %zu x %zu does not hold the tensor's %zu elements", codec,
                requested.rows, requested.cols, count);
  }
  *shape = requested;
  return ncclSuccess;
}

}  // namespace terse
