// How a flat tensor is seen as a matrix (PowerSGD). The C API passes a shape; an anonymous
// buffer of `count` elements is viewed row-major as the most nearly square factorisation
// rows x cols = count with rows <= cols: rows is the largest divisor of count that is at most
// sqrt(count). A prime count has no better factorisation than 1 x count, a view in which no
// low-rank approximation saves anything; the codec then sends the tensor uncompressed (see
// powersgd_codec.cpp).
#pragma once

#include <nccl.h>

#include <cstddef>

#include "codecs/codec.h"

namespace terse {

// floor(sqrt(n)), exact for every size_t.
size_t integer_sqrt(size_t n);

// The near-square view of `count` elements: rows = largest divisor of count <= sqrt(count),
// cols = count / rows. {0, 0} for count 0. Costs O(sqrt(count) - rows) divisions.
MatrixShape near_square_shape(size_t count);

// The shape to use for `count` elements: `requested` when it is set ({rows, cols} with
// rows * cols == count, checked without overflow), else near_square_shape(count). A requested
// shape of the wrong size, or with exactly one zero side, is refused naming `codec`, the shape
// and the count.
ncclResult_t resolve_matrix_shape(const char* codec, size_t count, const MatrixShape& requested,
                                  MatrixShape* shape);

}  // namespace terse
