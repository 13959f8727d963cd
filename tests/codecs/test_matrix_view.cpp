// The near-square view of an anonymous buffer (matrix_view.h) and explicit shape checks.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "codecs/matrix_view.h"
#include "common/result.h"

namespace terse::testing {
namespace {

TEST(IntegerSqrt, IsExactIncludingNearPerfectSquaresAndTheTopOfSizeT) {
  EXPECT_EQ(integer_sqrt(0), 0u);
  EXPECT_EQ(integer_sqrt(1), 1u);
  EXPECT_EQ(integer_sqrt(3), 1u);
  EXPECT_EQ(integer_sqrt(4), 2u);
  EXPECT_EQ(integer_sqrt(4096u * 4096u - 1), 4095u);
  EXPECT_EQ(integer_sqrt(4096u * 4096u), 4096u);
  const size_t big = 4294967295u;  // 2^32 - 1: big * big fits in 64 bits
  EXPECT_EQ(integer_sqrt(big * big), big);
  EXPECT_EQ(integer_sqrt(big * big - 1), big - 1);
  EXPECT_EQ(integer_sqrt(SIZE_MAX), big);
}

TEST(NearSquareShape, PicksTheLargestDivisorAtMostTheSquareRoot) {
  struct Case {
    size_t count, rows, cols;
  };
  for (const Case& c :
       {Case{0, 0, 0}, Case{1, 1, 1}, Case{12, 3, 4}, Case{16, 4, 4},
        Case{4096u * 4096u, 4096, 4096}, Case{1000, 25, 40}, Case{300, 15, 20},
        Case{2 * 4099, 2, 4099}, Case{768 * 3072, 1536, 1536}, Case{1024 * 4096 * 3, 3072, 4096}}) {
    SCOPED_TRACE(c.count);
    MatrixShape shape = near_square_shape(c.count);
    EXPECT_EQ(shape.rows, c.rows);
    EXPECT_EQ(shape.cols, c.cols);
  }
}

TEST(NearSquareShape, PrimeCountsDegenerateToOneRow) {
  for (size_t prime : {size_t(2), size_t(7), size_t(257), size_t(4099), size_t(1000003)}) {
    MatrixShape shape = near_square_shape(prime);
    EXPECT_EQ(shape.rows, 1u) << prime;
    EXPECT_EQ(shape.cols, prime);
  }
}

TEST(NearSquareShape, IsAlwaysAValidFactorisationWithRowsAtMostCols) {
  for (size_t count = 1; count < 5000; ++count) {
    MatrixShape shape = near_square_shape(count);
    ASSERT_EQ(shape.rows * shape.cols, count);
    ASSERT_LE(shape.rows, shape.cols);
    // No divisor lies between rows and sqrt(count).
    for (size_t d = shape.rows + 1; d * d <= count; ++d) ASSERT_NE(count % d, 0u) << count;
  }
}

TEST(ResolveMatrixShape, HonoursAnExplicitShapeAndRefusesAWrongOne) {
  MatrixShape shape;
  ASSERT_EQ(resolve_matrix_shape("powersgd", 16384, MatrixShape{64, 256}, &shape), ncclSuccess);
  EXPECT_EQ(shape.rows, 64u);
  EXPECT_EQ(shape.cols, 256u);
  ASSERT_EQ(resolve_matrix_shape("powersgd", 16384, MatrixShape{}, &shape), ncclSuccess);
  EXPECT_EQ(shape.rows, 128u);
  EXPECT_EQ(resolve_matrix_shape("powersgd", 16384, MatrixShape{100, 100}, &shape),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("shape 100 x 100"), std::string::npos) << last_error();
  EXPECT_NE(std::string(last_error()).find("16384"), std::string::npos) << last_error();
  EXPECT_EQ(resolve_matrix_shape("powersgd", 16384, MatrixShape{0, 16384}, &shape),
            ncclInvalidArgument);
  // rows * cols wraps around to the count in 64 bits: still refused.
  EXPECT_EQ(
      resolve_matrix_shape("powersgd", 0, MatrixShape{size_t(1) << 32, size_t(1) << 32}, &shape),
      ncclInvalidArgument);
  EXPECT_EQ(resolve_matrix_shape("powersgd", 16, MatrixShape{size_t(1) << 62, 4}, &shape),
            ncclInvalidArgument);
}

}  // namespace
}  // namespace terse::testing
