// PowerSGD (powersgd_codec.cpp): exact recovery of low-rank matrices, the error bound and its
// approach to the best rank-r error across warm-started steps, orthonormal P, exact error
// output, wire sizes, shapes, the dense fallback, parameter and message validation, error
// feedback that stays bounded, and CPU/GPU parity (skipped without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "codec_test_support.h"
#include "codecs/codec_registry.h"
#include "codecs/powersgd.h"
#include "codecs/powersgd_math.h"
#include "codecs/wire_format.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse::testing {
namespace {

std::unique_ptr<Codec> make(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec(spec, &codec), ncclSuccess) << spec << ": " << last_error();
  return codec;
}

WireHeader header_of(const std::vector<uint8_t>& message) {
  WireHeader header;
  memcpy(&header, message.data(), sizeof(header));
  return header;
}

// The factors of a low-rank message: P (rows x rank) then Q (cols x rank), column-major.
std::vector<float> factors_of(const std::vector<uint8_t>& message) {
  std::vector<float> factors((message.size() - kWireHeaderBytes) / sizeof(float));
  memcpy(factors.data(), message.data() + kWireHeaderBytes, factors.size() * sizeof(float));
  return factors;
}

double norm(const std::vector<float>& values) {
  double sum = 0;
  for (float v : values) sum += double(v) * v;
  return std::sqrt(sum);
}

double distance(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(sum);
}

// A rows x cols matrix (row-major) of rank `rank`: A B^T with Gaussian factors.
std::vector<float> low_rank_matrix(size_t rows, size_t cols, int rank, uint64_t seed) {
  auto a = random_normal(rows * rank, seed);
  auto b = random_normal(cols * rank, seed + 1000);
  std::vector<float> m(rows * cols);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (int k = 0; k < rank; ++k) sum += double(a[i * rank + k]) * b[j * rank + k];
      m[i * cols + j] = static_cast<float>(sum);
    }
  }
  return m;
}

// Orthonormalises `count` columns of `length` doubles (column-major) by modified Gram-Schmidt.
void orthonormalise_double(std::vector<double>& columns, size_t length, int count) {
  for (int c = 0; c < count; ++c) {
    double* v = &columns[c * length];
    for (int k = 0; k < c; ++k) {
      const double* q = &columns[k * length];
      double h = 0;
      for (size_t i = 0; i < length; ++i) h += q[i] * v[i];
      for (size_t i = 0; i < length; ++i) v[i] -= h * q[i];
    }
    double n = 0;
    for (size_t i = 0; i < length; ++i) n += v[i] * v[i];
    n = std::sqrt(n);
    for (size_t i = 0; i < length; ++i) v[i] /= n;
  }
}

// sum_k s_k u_k v_k^T with orthonormal u_k, v_k and s_k = decay^k, k < terms: its singular
// values are known, so the best rank-r error is sqrt(sum_{k >= r} s_k^2) exactly (Eckart-Young).
std::vector<float> decaying_spectrum_matrix(size_t rows, size_t cols, int terms, double decay,
                                            uint64_t seed) {
  auto u_random = random_normal(rows * terms, seed);
  auto v_random = random_normal(cols * terms, seed + 1);
  std::vector<double> u(u_random.begin(), u_random.end()), v(v_random.begin(), v_random.end());
  orthonormalise_double(u, rows, terms);
  orthonormalise_double(v, cols, terms);
  std::vector<float> m(rows * cols);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) {
      double sum = 0, s = 1;
      for (int k = 0; k < terms; ++k, s *= decay) sum += s * u[k * rows + i] * v[k * cols + j];
      m[i * cols + j] = static_cast<float>(sum);
    }
  }
  return m;
}

double best_rank_error(int terms, double decay, int rank) {
  double sum = 0;
  for (int k = rank; k < terms; ++k) sum += std::pow(decay, 2.0 * k);
  return std::sqrt(sum);
}

// The rank-r error that subspace iteration in double reaches after `iterations` steps from a
// random start: ||M - P P^T M||_F. The SVD-free reference for the codec's fp32 iteration.
double double_subspace_iteration_error(const std::vector<float>& m, size_t rows, size_t cols,
                                       int rank, int iterations) {
  auto start = random_normal(cols * rank, 4242);
  std::vector<double> q(start.begin(), start.end()), p(rows * rank);
  for (int t = 0; t < iterations; ++t) {
    for (int c = 0; c < rank; ++c) {
      for (size_t i = 0; i < rows; ++i) {
        double sum = 0;
        for (size_t j = 0; j < cols; ++j) sum += double(m[i * cols + j]) * q[c * cols + j];
        p[c * rows + i] = sum;
      }
    }
    orthonormalise_double(p, rows, rank);
    for (int c = 0; c < rank; ++c) {
      for (size_t j = 0; j < cols; ++j) {
        double sum = 0;
        for (size_t i = 0; i < rows; ++i) sum += double(m[i * cols + j]) * p[c * rows + i];
        q[c * cols + j] = sum;
      }
    }
  }
  double error = 0;
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) {
      double approx = 0;
      for (int c = 0; c < rank; ++c) approx += p[c * rows + i] * q[c * cols + j];
      double d = m[i * cols + j] - approx;
      error += d * d;
    }
  }
  return std::sqrt(error);
}

// Encodes successive steps of one tensor with its state, as the residual memory would.
class Steps {
 public:
  Steps(Codec& codec, size_t count, DType dtype, MatrixShape shape = {})
      : codec_(codec), count_(count), dtype_(dtype), shape_(shape) {
    state_ = codec.make_state(count, dtype, shape);
  }

  std::vector<uint8_t> encode(const std::vector<float>& values,
                              std::vector<float>* error = nullptr) {
    EncodeContext context;
    context.state = state_.get();
    context.shape = shape_;
    context.step = step_++;
    if (error != nullptr) {
      error->assign(count_, std::numeric_limits<float>::quiet_NaN());
      context.error = error->data();
    }
    return encode_host(codec_, to_dtype(values, dtype_), dtype_, context);
  }

  CodecState* state() { return state_.get(); }

 private:
  Codec& codec_;
  size_t count_;
  DType dtype_;
  MatrixShape shape_;
  std::unique_ptr<CodecState> state_;
  uint64_t step_ = 0;
};

TEST(PowerSgd, RecoversALowRankMatrixToRoundingInOneStep) {
  // rank 3 data: rank 3 matches it, rank 4 and 8 are rank-deficient (their extra P columns
  // are rounding noise after the projection and must be replaced, not normalised into NaN).
  const size_t rows = 96, cols = 80;
  auto m = low_rank_matrix(rows, cols, 3, 1);
  for (int rank : {3, 4, 8}) {
    SCOPED_TRACE(rank);
    auto codec = make("powersgd:rank=" + std::to_string(rank));
    Steps steps(*codec, rows * cols, DType::kFloat32, MatrixShape{rows, cols});
    auto message = steps.encode(m);
    EXPECT_EQ(header_of(message).param0, static_cast<uint32_t>(rank));
    auto decoded = decode_host(*codec, message, rows * cols, DType::kFloat32);
    // fp32 GEMMs over 80-96 terms and a rank-3 projection: ~1e-6 relative.
    EXPECT_LE(distance(decoded, m), 1e-5 * norm(m));
  }
}

TEST(PowerSgd, ErrorIsBelowTheInputAndFallsTowardTheBestRankRWithWarmSteps) {
  const size_t rows = 120, cols = 90;
  const int terms = 40, rank = 4;
  const double decay = 0.75;
  auto m = decaying_spectrum_matrix(rows, cols, terms, decay, 2);
  double best = best_rank_error(terms, decay, rank);
  // The double reference agrees with Eckart-Young: the construction is what it claims.
  EXPECT_NEAR(double_subspace_iteration_error(m, rows, cols, rank, 200), best, 1e-5 * best);
  auto codec = make("powersgd:rank=4");
  Steps steps(*codec, rows * cols, DType::kFloat32, MatrixShape{rows, cols});
  double previous = std::numeric_limits<double>::infinity();
  double error = 0;
  for (int step = 0; step < 30; ++step) {
    auto decoded = decode_host(*codec, steps.encode(m), rows * cols, DType::kFloat32);
    error = distance(decoded, m);
    // Projection bound, always; and each warm step is one more subspace iteration, whose
    // error does not increase (slack: fp32 rounding of a ~1e-7 relative size).
    EXPECT_LE(error, norm(m)) << step;
    EXPECT_LE(error, previous + 1e-6 * norm(m)) << step;
    previous = error;
  }
  // Converged (the subspace error shrinks by (s_5 / s_4)^2 = 0.56 per step) to the optimum.
  EXPECT_LE(error, best * 1.0001);
  EXPECT_GE(error, best * (1 - 1e-4));
}

TEST(PowerSgd, IterationsImproveASingleStepWithoutWarmStart) {
  const size_t rows = 120, cols = 90;
  auto m = decaying_spectrum_matrix(rows, cols, 40, 0.75, 3);
  double best = best_rank_error(40, 0.75, 4);
  auto one = make("powersgd:rank=4,iterations=1,warm_start=false");
  auto many = make("powersgd:rank=4,iterations=12,warm_start=false");
  Steps steps_one(*one, rows * cols, DType::kFloat32, MatrixShape{rows, cols});
  Steps steps_many(*many, rows * cols, DType::kFloat32, MatrixShape{rows, cols});
  double error_one =
      distance(decode_host(*one, steps_one.encode(m), rows * cols, DType::kFloat32), m);
  double error_many =
      distance(decode_host(*many, steps_many.encode(m), rows * cols, DType::kFloat32), m);
  EXPECT_LT(error_many, error_one);
  EXPECT_LE(error_many, best * 1.001);
}

TEST(PowerSgd, PColumnsAreOrthonormal) {
  struct Case {
    size_t rows, cols;
    int rank;
    int data_rank;  // 0: full-rank Gaussian
  };
  for (const Case& c : {Case{200, 150, 8, 0}, Case{64, 64, 6, 2}, Case{4096, 4096, 4, 0}}) {
    SCOPED_TRACE(std::to_string(c.rows) + " rank " + std::to_string(c.rank));
    auto m = c.data_rank == 0 ? random_normal(c.rows * c.cols, 5)
                              : low_rank_matrix(c.rows, c.cols, c.data_rank, 5);
    auto codec = make("powersgd:rank=" + std::to_string(c.rank));
    Steps steps(*codec, c.rows * c.cols, DType::kFloat32, MatrixShape{c.rows, c.cols});
    auto factors = factors_of(steps.encode(m));
    ASSERT_EQ(factors.size(), (c.rows + c.cols) * c.rank);
    for (int a = 0; a < c.rank; ++a) {
      for (int b = 0; b <= a; ++b) {
        double dot = 0;
        for (size_t i = 0; i < c.rows; ++i) {
          dot += double(factors[a * c.rows + i]) * factors[b * c.rows + i];
        }
        // sqrt(rows) * 2^-24 relative rounding per dot: <= 4e-6 for 4096 rows.
        EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-5) << a << "," << b;
      }
    }
  }
}

TEST(PowerSgd, ErrorOutputIsExactlyInputMinusDecoded) {
  const size_t rows = 48, cols = 40;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto codec = make("powersgd:rank=3");
    Steps steps(*codec, rows * cols, dtype);
    auto values = from_dtype(to_dtype(random_normal(rows * cols, 6), dtype), dtype);
    for (int step = 0; step < 3; ++step) {
      std::vector<float> error;
      auto message = steps.encode(values, &error);
      auto decoded = decode_host(*codec, message, rows * cols, DType::kFloat32);
      for (size_t i = 0; i < rows * cols; ++i) ASSERT_EQ(error[i], values[i] - decoded[i]) << i;
    }
  }
}

TEST(PowerSgd, DecodeIntoEveryDtypeAndAccumulateRoundOnce) {
  const size_t rows = 32, cols = 24, count = rows * cols;
  auto codec = make("powersgd:rank=2");
  Steps steps(*codec, count, DType::kFloat32);
  auto message = steps.encode(random_normal(count, 7));
  auto exact = decode_host(*codec, message, count, DType::kFloat32);
  auto base = random_normal(count, 8);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto plain = decode_host(*codec, message, count, dtype);
    auto output = to_dtype(base, dtype);
    ASSERT_EQ(codec->decode(message.data(), message.size(), output.data(), count, dtype, true,
                            DecodeContext{}),
              ncclSuccess)
        << last_error();
    auto accumulated = from_dtype(output, dtype);
    for (size_t i = 0; i < count; ++i) {
      float rounded_base = load_element(to_dtype({base[i]}, dtype).data(), dtype, 0);
      std::vector<uint8_t> one(dtype_size(dtype));
      store_element(one.data(), dtype, 0, exact[i]);
      ASSERT_EQ(plain[i], load_element(one.data(), dtype, 0)) << i;
      store_element(one.data(), dtype, 0, exact[i] + rounded_base);
      ASSERT_EQ(accumulated[i], load_element(one.data(), dtype, 0)) << i;
    }
  }
}

TEST(PowerSgd, SixteenBitInputsRoundTripWithinTheirRounding) {
  // A rank-2 matrix rounded to fp16/bf16 is rank 2 plus a rounding perturbation E with
  // |E_ij| <= 2^-11 |M_ij| (fp16) or 2^-8 |M_ij| (bf16); a converged rank-2 approximation of
  // M + E is within ||E|| of it (Eckart-Young), and one step is nearly converged given the
  // gap, so we allow 2 ||E||, bounded via ||E|| <= u ||M||.
  const size_t rows = 64, cols = 50, count = rows * cols;
  auto m = low_rank_matrix(rows, cols, 2, 9);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    double unit = dtype == DType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    auto codec = make("powersgd:rank=2");
    Steps steps(*codec, count, dtype, MatrixShape{rows, cols});
    auto rounded = from_dtype(to_dtype(m, dtype), dtype);
    auto decoded = decode_host(*codec, steps.encode(m), count, DType::kFloat32);
    EXPECT_LE(distance(decoded, rounded), 2 * unit * norm(m));
  }
}

TEST(PowerSgd, WireSizeOf4096SquareAtRank4IsUnderTwoThousandths) {
  const size_t n = 4096, count = n * n;
  auto codec = make("powersgd");  // rank 4 by default
  EXPECT_EQ(codec->spec(), "powersgd:rank=4,iterations=1,warm_start=true");
  auto state = codec->make_state(count, DType::kFloat32, MatrixShape{});
  EncodeContext context;
  context.state = state.get();
  auto message = encode_host(*codec, to_dtype(random_normal(count, 10), DType::kFloat32),
                             DType::kFloat32, context);
  // 32-byte header + P (4096 x 4) + Q (4096 x 4) fp32.
  EXPECT_EQ(message.size(), 32u + 4096 * 4 * 2 * 4);
  EXPECT_LE(double(message.size()) / (count * 4.0), 0.002);
  WireHeader header = header_of(message);
  EXPECT_EQ(header.param0, 4u);
  EXPECT_EQ(header.seed, 4096u);
  EXPECT_EQ(header.flags, 0u);
  EXPECT_EQ(header.codec, static_cast<uint8_t>(CodecId::kPowerSgd));
  EXPECT_EQ(codec->family(), CodecFamily::kLowRank);
}

TEST(PowerSgd, ExplicitShapeIsHonouredAndABadShapeRefused) {
  // Rank 2 as a 32 x 512 matrix; its near-square 128 x 128 view is not low-rank.
  const size_t rows = 32, cols = 512, count = rows * cols;
  auto m = low_rank_matrix(rows, cols, 2, 11);
  auto codec = make("powersgd:rank=2");
  Steps shaped(*codec, count, DType::kFloat32, MatrixShape{rows, cols});
  auto message = shaped.encode(m);
  EXPECT_EQ(header_of(message).seed, rows);
  EXPECT_EQ(message.size(), kWireHeaderBytes + 4 * 2 * (rows + cols));
  EXPECT_LE(distance(decode_host(*codec, message, count, DType::kFloat32), m), 1e-5 * norm(m));
  Steps square(*codec, count, DType::kFloat32);
  auto square_message = square.encode(m);
  EXPECT_EQ(header_of(square_message).seed, 128u);
  EXPECT_GT(distance(decode_host(*codec, square_message, count, DType::kFloat32), m),
            0.1 * norm(m));

  auto input = to_dtype(m, DType::kFloat32);
  std::vector<uint8_t> out(codec->max_encoded_bytes(count, DType::kFloat32));
  size_t bytes = 0;
  for (MatrixShape bad : {MatrixShape{100, 100}, MatrixShape{0, count}, MatrixShape{count, 0},
                          MatrixShape{33, 512}}) {
    EncodeContext context;
    context.shape = bad;
    EXPECT_EQ(codec->encode(input.data(), count, DType::kFloat32, context, out.data(), out.size(),
                            &bytes),
              ncclInvalidArgument);
    EXPECT_NE(std::string(last_error())
                  .find("shape " + std::to_string(bad.rows) + " x " + std::to_string(bad.cols)),
              std::string::npos)
        << last_error();
    EXPECT_EQ(codec->make_state(count, DType::kFloat32, bad), nullptr);
  }
}

TEST(PowerSgd, StateOfAnotherShapeOrCodecIsRefused) {
  const size_t count = 64 * 64;
  auto codec = make("powersgd:rank=2");
  auto input = to_dtype(random_normal(count, 12), DType::kFloat32);
  auto state = codec->make_state(count, DType::kFloat32, MatrixShape{32, 128});
  ASSERT_NE(state, nullptr);
  EncodeContext context;
  context.state = state.get();  // made for 32 x 128, used with the near-square 64 x 64
  std::vector<uint8_t> out(codec->max_encoded_bytes(count, DType::kFloat32));
  size_t bytes = 0;
  EXPECT_EQ(
      codec->encode(input.data(), count, DType::kFloat32, context, out.data(), out.size(), &bytes),
      ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("state was made for a 32 x 128"), std::string::npos)
      << last_error();
  auto rank3 = make("powersgd:rank=3")->make_state(count, DType::kFloat32, MatrixShape{});
  context.state = rank3.get();
  EXPECT_EQ(
      codec->encode(input.data(), count, DType::kFloat32, context, out.data(), out.size(), &bytes),
      ncclInvalidArgument);
}

TEST(PowerSgd, WithoutStateEncodesLikeAFreshStateAndWarmStartOffLikeNoState) {
  const size_t count = 40 * 30;
  auto values = random_normal(count, 13);
  auto input = to_dtype(values, DType::kFloat32);
  auto codec = make("powersgd:rank=3");
  EncodeContext stateless;
  auto without = encode_host(*codec, input, DType::kFloat32, stateless);
  Steps steps(*codec, count, DType::kFloat32);
  EXPECT_EQ(without, steps.encode(values));  // step 0 from the same initial Q
  // warm_start=false restarts from the step's initial Q, as a stateless encode does.
  auto cold = make("powersgd:rank=3,warm_start=false");
  Steps cold_steps(*cold, count, DType::kFloat32);
  for (uint64_t step = 0; step < 3; ++step) {
    stateless.step = step;
    EXPECT_EQ(cold_steps.encode(values), encode_host(*cold, input, DType::kFloat32, stateless));
  }
  // Whereas the warm state moves on: its step 1 differs from a cold step 1.
  stateless.step = 1;
  EXPECT_NE(steps.encode(values), encode_host(*codec, input, DType::kFloat32, stateless));
}

TEST(PowerSgd, SendsUncompressedWhenFactorsWouldNotBeSmaller) {
  struct Case {
    size_t count;
    MatrixShape shape;
    std::string spec;
  };
  // empty; 1 and primes (1 x n views); rank >= min(rows, cols) (full rank never pays).
  for (const Case& c :
       {Case{0, {}, "powersgd"}, Case{1, {}, "powersgd"}, Case{7, {}, "powersgd"},
        Case{257, {}, "powersgd"}, Case{4099, {}, "powersgd"},
        Case{4 * 1024, {4, 1024}, "powersgd:rank=8"}, Case{16 * 16, {}, "powersgd:rank=8"}}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(c.spec + " x " + std::to_string(c.count) + " " + dtype_name(dtype));
      auto codec = make(c.spec);
      auto values = random_normal(c.count, 14);
      Steps steps(*codec, c.count, dtype, c.shape);
      EXPECT_EQ(steps.state(), nullptr);
      std::vector<float> error;
      auto message = steps.encode(values, &error);
      EXPECT_EQ(message.size(), kWireHeaderBytes + c.count * dtype_size(dtype));
      EXPECT_EQ(header_of(message).flags, 1u);
      EXPECT_EQ(decode_host(*codec, message, c.count, dtype),
                from_dtype(to_dtype(values, dtype), dtype));
      for (float e : error) ASSERT_EQ(e, 0.0f);
    }
  }
  // fp16 halves the dense size, so it goes dense sooner: 16 x 16 at rank 4 is 512 bytes of
  // factors against 1024 (fp32, low-rank) and 512 (fp16, dense).
  auto codec = make("powersgd:rank=4");
  auto values = random_normal(256, 15);
  EXPECT_EQ(header_of(Steps(*codec, 256, DType::kFloat32).encode(values)).flags, 0u);
  EXPECT_EQ(header_of(Steps(*codec, 256, DType::kFloat16).encode(values)).flags, 1u);
}

// Non-finite elements are escaped (codec.h): the factors come from the finite rest, the escaped
// elements decode exactly, and the warm start is not poisoned.
TEST(PowerSgd, NonFiniteInputIsEscapedAndKeepsTheWarmStart) {
  const size_t rows = 40, cols = 30, count = rows * cols;
  auto codec = make("powersgd:rank=2");
  Steps steps(*codec, count, DType::kFloat32, MatrixShape{rows, cols});
  auto m = low_rank_matrix(rows, cols, 2, 16);
  auto poisoned = m;
  poisoned[123] = std::numeric_limits<float>::quiet_NaN();
  poisoned[456] = std::numeric_limits<float>::infinity();
  auto message = steps.encode(poisoned);
  EXPECT_EQ(header_of(message).flags, kWireEscapesFlag);  // low rank, with escapes
  auto decoded = decode_host(*codec, message, count, DType::kFloat32);
  EXPECT_TRUE(std::isnan(decoded[123]));
  EXPECT_EQ(decoded[456], std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < count; ++i) {
    if (i != 123 && i != 456) {
      ASSERT_TRUE(std::isfinite(decoded[i])) << i;
    }
  }
  // The state was not poisoned: the next finite step is low-rank and exact.
  auto next = steps.encode(m);
  EXPECT_EQ(header_of(next).flags, 0u);
  EXPECT_LE(distance(decode_host(*codec, next, count, DType::kFloat32), m), 1e-5 * norm(m));
}

TEST(PowerSgd, AZeroGradientDoesNotStallTheWarmStart) {
  // Q = M^T P = 0 after a zero step; without care the next P = M Q would be zero forever.
  const size_t rows = 50, cols = 40, count = rows * cols;
  auto codec = make("powersgd:rank=2");
  Steps steps(*codec, count, DType::kFloat32, MatrixShape{rows, cols});
  std::vector<float> zero(count, 0.0f), error;
  auto message = steps.encode(zero, &error);
  EXPECT_EQ(header_of(message).flags, 0u);
  for (float v : decode_host(*codec, message, count, DType::kFloat32)) ASSERT_EQ(v, 0.0f);
  for (float e : error) ASSERT_EQ(e, 0.0f);
  auto m = low_rank_matrix(rows, cols, 2, 17);
  auto decoded = decode_host(*codec, steps.encode(m), count, DType::kFloat32);
  EXPECT_LE(distance(decoded, m), 1e-5 * norm(m));
}

TEST(PowerSgd, ErrorFeedbackKeepsTheSentSumWithinAConstantOfTheTrueSum) {
  // Encoding the same g every step with error feedback: input_t = g + e_(t-1), e_t =
  // input_t - decoded_t, so sum_t decoded_t = t g - e_t exactly, and the gap is ||e_t||.
  // Bound: a compressor with ||x - C(x)||^2 <= (1 - d) ||x||^2 keeps ||e_t|| <= a / (1 - a)
  // ||g|| with a = sqrt(1 - d) (e_t <= a (||g|| + ||e_(t-1)||), summed geometrically). The best
  // rank-r projection keeps at least d = r / min(rows, cols) of the energy: for rank 2 of a
  // 64 x 48 matrix, d = 1/24 and the bound is 46.4 ||g||, whatever t. (Measured: ~14 ||g||.)
  // A codec that dropped some direction for good would instead see the gap grow like t, so we
  // also require that it does not grow from t = 50 to t = 100 (by more than 1.5x; linear
  // growth would double it).
  const size_t rows = 64, cols = 48, count = rows * cols;
  const int rank = 2;
  auto codec = make("powersgd:rank=2");
  Steps steps(*codec, count, DType::kFloat32, MatrixShape{rows, cols});
  auto g = random_normal(count, 18);
  std::vector<float> residual(count, 0.0f), error;
  std::vector<double> sum(count, 0.0);
  double a = std::sqrt(1.0 - double(rank) / std::min(rows, cols));
  double bound = a / (1 - a) * norm(g);
  double at50 = 0;
  for (int t = 1; t <= 100; ++t) {
    std::vector<float> input(count);
    for (size_t i = 0; i < count; ++i) input[i] = g[i] + residual[i];
    auto decoded = decode_host(*codec, steps.encode(input, &error), count, DType::kFloat32);
    residual = error;
    for (size_t i = 0; i < count; ++i) sum[i] += decoded[i];
    if (t == 50 || t == 100) {
      double gap = 0;
      for (size_t i = 0; i < count; ++i) gap += (sum[i] - t * double(g[i])) * (sum[i] - t * g[i]);
      gap = std::sqrt(gap);
      EXPECT_LE(gap, bound) << "t = " << t;
      if (t == 50) at50 = gap;
      if (t == 100) {
        EXPECT_LE(gap, 1.5 * at50) << "growing from t = 50";
      }
    }
  }
}

TEST(PowerSgd, ParametersAreValidatedAndNamed) {
  std::unique_ptr<Codec> codec;
  for (const char* spec : {"powersgd:rank=0", "powersgd:rank=257", "powersgd:iterations=0",
                           "powersgd:iterations=17", "powersgd:warm_start=maybe"}) {
    EXPECT_EQ(create_codec(spec, &codec), ncclInvalidArgument) << spec;
    std::string key = std::string(spec).substr(9, std::string(spec).find('=') - 9);
    EXPECT_NE(std::string(last_error()).find(key), std::string::npos) << last_error();
  }
  EXPECT_EQ(create_codec("powersgd:block=4", &codec), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("block"), std::string::npos);
  ASSERT_EQ(create_codec("powersgd:rank=256,iterations=16,warm_start=off", &codec), ncclSuccess);
  EXPECT_EQ(codec->spec(), "powersgd:rank=256,iterations=16,warm_start=false");
}

// A valid message, then damaged copies: each must be refused with a sentence naming the field.
TEST(PowerSgd, DecodeRefusesInconsistentMessages) {
  const size_t rows = 20, cols = 30, count = rows * cols;
  auto codec = make("powersgd:rank=3");
  auto valid = Steps(*codec, count, DType::kFloat32, MatrixShape{rows, cols})
                   .encode(random_normal(count, 19));
  std::vector<float> output(count);
  auto refused = [&](std::vector<uint8_t> message, const std::string& words) {
    EXPECT_EQ(codec->decode(message.data(), message.size(), output.data(), count, DType::kFloat32,
                            false, DecodeContext{}),
              ncclInvalidArgument)
        << words;
    EXPECT_NE(std::string(last_error()).find(words), std::string::npos) << last_error();
  };
  auto with_header = [&](auto edit) {
    auto message = valid;
    WireHeader header = header_of(message);
    edit(header);
    memcpy(message.data(), &header, sizeof(header));
    return message;
  };
  refused(with_header([](WireHeader& h) { h.param0 = 0; }), "rank 0");
  refused(with_header([](WireHeader& h) { h.param0 = 257; }), "rank 257");
  refused(with_header([](WireHeader& h) { h.param0 = 21; }), "rank 21");  // > min(rows, cols)
  refused(with_header([](WireHeader& h) { h.seed = 7; }), "rows=7");
  refused(with_header([](WireHeader& h) { h.seed = 0; }), "rows=0");
  refused(with_header([](WireHeader& h) { h.seed = 24; }), "implies 620");  // 24 x 25
  refused(with_header([](WireHeader& h) { h.flags = 2; }), "flags");
  refused(with_header([](WireHeader& h) { h.param1 = 1; }), "param1");
  refused(with_header([](WireHeader& h) { h.flags = 1; }), "dense message");
  auto nan_factor = valid;
  float nan = std::numeric_limits<float>::quiet_NaN();
  memcpy(nan_factor.data() + kWireHeaderBytes + 4 * 5, &nan, sizeof(nan));
  refused(nan_factor, "NaN or Inf");
  auto inf_q = valid;
  float inf = std::numeric_limits<float>::infinity();
  memcpy(inf_q.data() + kWireHeaderBytes + 4 * ((rows + cols) * 3 - 1), &inf, sizeof(inf));
  refused(inf_q, "NaN or Inf");
  EXPECT_EQ(codec->decode(valid.data(), valid.size(), nullptr, count, DType::kFloat32, false,
                          DecodeContext{}),
            ncclInvalidArgument);
}

TEST(PowerSgd, TiledDecodeMatchesTheSharedPerElementMathBitForBit) {
  // The GPU decodes an element at a time with powersgd_reconstruct_element; the CPU tiles.
  // Same order, same bits; ranks that exercise 1, several and many terms, a width that is not
  // a multiple of the tile.
  for (int rank : {1, 5, 40}) {
    const size_t rows = 64, cols = 1100, count = rows * cols;
    auto codec = make("powersgd:rank=" + std::to_string(rank));
    auto message = Steps(*codec, count, DType::kFloat32, MatrixShape{rows, cols})
                       .encode(random_normal(count, 20));
    ASSERT_EQ(header_of(message).param0, static_cast<uint32_t>(rank));
    auto factors = factors_of(message);
    auto decoded = decode_host(*codec, message, count, DType::kFloat32);
    const float* p = factors.data();
    const float* q = p + rows * rank;
    for (size_t i = 0; i < rows; ++i) {
      for (size_t j = 0; j < cols; ++j) {
        ASSERT_EQ(decoded[i * cols + j], powersgd_reconstruct_element(p, q, rows, cols, rank, i, j))
            << i << "," << j;
      }
    }
  }
}

TEST(PowerSgd, ResidualInPlaceAndPByRowBlocksGiveTheSameBits) {
  // What distributed PowerSGD relies on (powersgd_allreduce.cpp): the error written over M
  // itself equals the error written elsewhere, and P computed block of rows by block of rows
  // (as the blocks of M are built) equals P computed at once; odd sizes, ranks 1, 4 and 9.
  for (int rank : {1, 4, 9}) {
    const size_t rows = 301, cols = 1037, count = rows * cols;
    const std::vector<float> m = random_normal(count, 40 + rank);
    const std::vector<float> q = random_normal(cols * rank, 50 + rank);
    std::vector<float> p(rows * rank), p_blocks(rows * rank, -1.0f);
    ASSERT_EQ(powersgd_compute_p(m.data(), DType::kFloat32, rows, cols, q.data(), rank, p.data(),
                                 nullptr, Memory::kHost, nullptr),
              ncclSuccess);
    const size_t block = powersgd_host_block_rows(cols);
    ASSERT_LT(block, rows);
    for (size_t first = 0; first < rows; first += block) {
      ASSERT_EQ(powersgd_compute_p_rows(m.data(), DType::kFloat32, rows, cols, first,
                                        std::min(block, rows - first), q.data(), rank,
                                        p_blocks.data(), nullptr),
                ncclSuccess);
    }
    EXPECT_EQ(p_blocks, p) << rank;
    std::vector<float> error(count), in_place = m;
    ASSERT_EQ(powersgd_residual(m.data(), DType::kFloat32, p.data(), q.data(), rows, cols, rank,
                                error.data(), Memory::kHost, nullptr),
              ncclSuccess);
    ASSERT_EQ(powersgd_residual(in_place.data(), DType::kFloat32, p.data(), q.data(), rows, cols,
                                rank, in_place.data(), Memory::kHost, nullptr),
              ncclSuccess);
    EXPECT_EQ(in_place, error) << rank;
    EXPECT_NE(error, m) << rank;
  }
  std::vector<float> p(4);
  EXPECT_EQ(powersgd_compute_p_rows(p.data(), DType::kFloat32, 2, 2, 1, 2, p.data(), 1, p.data(),
                                    nullptr),
            ncclInvalidArgument);
}

// ---- GPU parity (skipped without a GPU) ----

#if TERSE_HAVE_CUDA
std::vector<float> run_on_device(const std::vector<float>& host,
                                 ncclResult_t (*step)(float*, void*), void* argument) {
  float* device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, host.size() * sizeof(float) + 4), cudaSuccess);
  cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  EXPECT_EQ(step(device, argument), ncclSuccess) << last_error();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> result(host.size());
  cudaMemcpy(result.data(), device, host.size() * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(device);
  return result;
}

struct ColumnsShape {
  size_t length;
  int count;
};
#endif

TEST(PowerSgdGpu, OrthogonalizeAndNormalizeMatchTheHostBitForBit) {
  TERSE_REQUIRE_GPU();
#if TERSE_HAVE_CUDA
  for (ColumnsShape shape : {ColumnsShape{37, 4}, ColumnsShape{1000, 17}, ColumnsShape{300, 40},
                             ColumnsShape{4096, 4}, ColumnsShape{3, 5}}) {
    SCOPED_TRACE(std::to_string(shape.length) + " x " + std::to_string(shape.count));
    auto columns = random_normal(shape.length * shape.count, shape.length);
    if (shape.count > 3) {
      for (size_t i = 0; i < shape.length; ++i) {
        columns[shape.length + i] = 0.0f;                    // zero column
        columns[3 * shape.length + i] = -3.0f * columns[i];  // dependent column
      }
      columns[2 * shape.length] = std::numeric_limits<float>::quiet_NaN();
    }
    auto host = columns;
    ASSERT_EQ(powersgd_orthogonalize(host.data(), shape.length, std::min<int>(shape.count, 256),
                                     Memory::kHost, nullptr),
              shape.count <= static_cast<int>(shape.length) ? ncclSuccess : ncclInvalidArgument);
    if (shape.count <= static_cast<int>(shape.length)) {
      auto device = run_on_device(
          columns,
          [](float* d, void* a) {
            auto* s = static_cast<ColumnsShape*>(a);
            return powersgd_orthogonalize(d, s->length, s->count, Memory::kDevice, nullptr);
          },
          &shape);
      EXPECT_EQ(0, memcmp(device.data(), host.data(), host.size() * sizeof(float)));
    }
    auto normalized_host = columns;
    ASSERT_EQ(powersgd_prepare_q(normalized_host.data(), shape.length, shape.count, 9,
                                 Memory::kHost, nullptr),
              ncclSuccess);
    auto normalized_device = run_on_device(
        columns,
        [](float* d, void* a) {
          auto* s = static_cast<ColumnsShape*>(a);
          return powersgd_prepare_q(d, s->length, s->count, 9, Memory::kDevice, nullptr);
        },
        &shape);
    EXPECT_EQ(0, memcmp(normalized_device.data(), normalized_host.data(),
                        normalized_host.size() * sizeof(float)));
  }
#endif
}

TEST(PowerSgdGpu, DeviceDecodeOfAHostMessageIsBitIdentical) {
  TERSE_REQUIRE_GPU();
  for (int rank : {1, 4, 33}) {
    const size_t rows = 70, cols = 333, count = rows * cols;
    auto codec = make("powersgd:rank=" + std::to_string(rank));
    auto message = Steps(*codec, count, DType::kFloat32, MatrixShape{rows, cols})
                       .encode(random_normal(count, 21));
    auto initial_values = random_normal(count, 22);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(std::to_string(rank) + " " + dtype_name(dtype) + (accumulate ? " +=" : ""));
        auto initial = to_dtype(initial_values, dtype);
        auto host_output = initial;
        ASSERT_EQ(codec->decode(message.data(), message.size(), host_output.data(), count, dtype,
                                accumulate, DecodeContext{}),
                  ncclSuccess);
        std::vector<float> device_output;
        ASSERT_EQ(decode_device(*codec, message, count, dtype, accumulate, initial, &device_output),
                  ncclSuccess)
            << last_error();
        EXPECT_EQ(device_output, from_dtype(host_output, dtype));
      }
    }
  }
}

TEST(PowerSgdGpu, DeviceEncodeMatchesTheHostWithinGemmRounding) {
  // cuBLAS and OpenBLAS sum the GEMMs in different orders, so P and Q differ in their last
  // bits; the rest is shared code. With a spectral gap (decay 0.75) the rank-4 subspace is
  // well conditioned and those differences stay at fp32 rounding: we allow 1e-4 relative on
  // the reconstructions over 4 warm steps. The error output must still be exact against the
  // (bit-identical) decode of the device's own message.
  TERSE_REQUIRE_GPU();
  const size_t rows = 256, cols = 192, count = rows * cols;
  auto m = decaying_spectrum_matrix(rows, cols, 60, 0.75, 23);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto codec = make("powersgd:rank=4,iterations=2");
    auto host_state = codec->make_state(count, dtype, MatrixShape{rows, cols});
    auto device_state = codec->make_state(count, dtype, MatrixShape{rows, cols});
    auto input = to_dtype(m, dtype);
    auto values = from_dtype(input, dtype);
    for (uint64_t step = 0; step < 4; ++step) {
      EncodeContext context;
      context.step = step;
      context.shape = MatrixShape{rows, cols};
      context.state = host_state.get();
      auto host_message = encode_host(*codec, input, dtype, context);
      context.state = device_state.get();
      std::vector<uint8_t> device_message;
      std::vector<float> device_error;
      ASSERT_EQ(encode_device(*codec, input, dtype, context, &device_message, &device_error),
                ncclSuccess)
          << last_error();
      ASSERT_EQ(device_message.size(), host_message.size());
      EXPECT_EQ(memcmp(device_message.data(), host_message.data(), kWireHeaderBytes), 0);
      auto host_decoded = decode_host(*codec, host_message, count, DType::kFloat32);
      auto device_decoded = decode_host(*codec, device_message, count, DType::kFloat32);
      EXPECT_LE(distance(device_decoded, host_decoded), 1e-4 * norm(host_decoded)) << step;
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(device_error[i], values[i] - device_decoded[i]) << i;
      }
    }
  }
}

TEST(PowerSgdGpu, StateMovesBetweenHostAndDevice) {
  TERSE_REQUIRE_GPU();
  // Host step, device step, host step with one state: Q follows; a rank-2 matrix stays exact.
  const size_t rows = 60, cols = 50, count = rows * cols;
  auto m = low_rank_matrix(rows, cols, 2, 24);
  auto input = to_dtype(m, DType::kFloat32);
  auto codec = make("powersgd:rank=2");
  auto state = codec->make_state(count, DType::kFloat32, MatrixShape{rows, cols});
  EncodeContext context;
  context.state = state.get();
  context.shape = MatrixShape{rows, cols};
  for (int step = 0; step < 3; ++step) {
    context.step = step;
    std::vector<uint8_t> message;
    if (step == 1) {
      ASSERT_EQ(encode_device(*codec, input, DType::kFloat32, context, &message), ncclSuccess)
          << last_error();
    } else {
      message = encode_host(*codec, input, DType::kFloat32, context);
    }
    EXPECT_LE(distance(decode_host(*codec, message, count, DType::kFloat32), m), 1e-5 * norm(m));
  }
}

TEST(PowerSgdGpu, DenseFallbacksMatchTheHostBytes) {
  TERSE_REQUIRE_GPU();
  auto codec = make("powersgd");
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    // A prime count (the dense fallback), and a low-rank-sized tensor holding NaN.
    auto prime = to_dtype(random_normal(4099, 25), dtype);
    std::vector<uint8_t> device_message;
    ASSERT_EQ(encode_device(*codec, prime, dtype, EncodeContext{}, &device_message), ncclSuccess);
    EXPECT_EQ(device_message, encode_host(*codec, prime, dtype));
    auto values = random_normal(64 * 64, 26);
    values[100] = std::numeric_limits<float>::quiet_NaN();
    auto poisoned = to_dtype(values, dtype);
    ASSERT_EQ(encode_device(*codec, poisoned, dtype, EncodeContext{}, &device_message),
              ncclSuccess);
    // Escaped as on the host: the NaN exactly, the rest low-rank.
    EXPECT_NE(header_of(device_message).flags & kWireEscapesFlag, 0u);
    EXPECT_EQ(device_message, encode_host(*codec, poisoned, dtype));
  }
}

}  // namespace
}  // namespace terse::testing
