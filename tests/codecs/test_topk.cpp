// Top-K: exact selection against a brute-force sort, the sampled method's guarantees, wire size,
// error output, warm-up, error feedback over many steps, the shared sparse decoder's refusals,
// and CPU/GPU parity.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "codecs/topk_select.h"
#include "sparse_test_support.h"

namespace terse::testing {
namespace {

// Values with many exact ties: small integers with random signs, so the k-th magnitude is
// shared by many elements and the lower-index rule decides.
std::vector<float> tied_values(size_t count, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<float> values(count);
  for (float& value : values) {
    value = static_cast<float>(random() % 6) * (random() % 2 ? 1.0f : -1.0f);
  }
  return values;
}

// Checks that `message` carries exactly `expected` indices and the input's values there, and
// that it decodes to the input at those indices and 0 elsewhere.
void expect_carries(const Codec& codec, const std::vector<uint8_t>& message,
                    const std::vector<float>& input, const std::vector<uint32_t>& expected) {
  SparseView view = view_sparse(message);
  ASSERT_EQ(view.indices, expected);
  for (size_t j = 0; j < expected.size(); ++j) {
    ASSERT_EQ(float_bits(view.values[j]), float_bits(input[expected[j]])) << j;
  }
  auto decoded = decode_f32(codec, message, input.size());
  std::vector<bool> kept(input.size(), false);
  for (uint32_t index : expected) kept[index] = true;
  for (size_t i = 0; i < input.size(); ++i) {
    ASSERT_EQ(decoded[i], kept[i] ? input[i] : 0.0f) << i;
  }
}

TEST(TopK, ExactKeepsTheKLargestMagnitudesAndBreaksTiesByLowerIndex) {
  for (const char* spec : {"topk:method=exact", "topk:method=exact,ratio=0.3",
                           "topk:method=exact,k=1", "topk:method=exact,ratio=1"}) {
    auto codec = make_sparse(spec);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (size_t count : {size_t(1), size_t(7), size_t(255), size_t(4099), size_t(100003)}) {
        for (bool ties : {false, true}) {
          SCOPED_TRACE(std::string(spec) + " " + dtype_name(dtype) + " x " + std::to_string(count) +
                       (ties ? " tied" : ""));
          auto raw = ties ? tied_values(count, count) : random_normal(count, count);
          auto input = to_dtype(raw, dtype);
          auto values = from_dtype(input, dtype);
          auto message = encode_host(*codec, input, dtype);
          size_t k = view_sparse(message).kept();
          expect_carries(*codec, message, values, brute_force_top_k(values, k));
        }
      }
    }
  }
}

TEST(TopK, KeepsRoundRatioTimesCountOrTheGivenK) {
  const size_t count = 1 << 20;
  auto input = to_dtype(random_normal(count, 1), DType::kFloat32);
  auto message = encode_host(*make_sparse("topk:method=exact"), input, DType::kFloat32);
  EXPECT_EQ(view_sparse(message).kept(), 10486u);  // round(0.01 * 1048576 = 10485.76)
  message = encode_host(*make_sparse("topk:k=777,method=exact"), input, DType::kFloat32);
  EXPECT_EQ(view_sparse(message).kept(), 777u);
  // Density 1 keeps everything, sampled or not.
  for (const char* spec : {"topk:ratio=1", "topk:ratio=1,method=exact"}) {
    message = encode_host(*make_sparse(spec), input, DType::kFloat32);
    EXPECT_EQ(view_sparse(message).kept(), count) << spec;
  }
  // k above the count keeps everything.
  auto small = to_dtype(random_normal(5, 1), DType::kFloat32);
  message = encode_host(*make_sparse("topk:k=777"), small, DType::kFloat32);
  EXPECT_EQ(view_sparse(message).kept(), 5u);
}

// Sampled: the threshold t is a sample quantile chosen low, so usually >= k elements pass and
// the exact top k is kept; otherwise every element >= t is kept, fewer than k. Either way:
// kept <= k, and every kept magnitude >= every dropped one (the kept set is the exact top
// |kept|), so each kept key is >= the true k-th largest key. On smooth data the threshold's
// rank error is a few percent, so kept >= 0.8 k holds with a wide margin.
TEST(TopK, SampledKeepsAtMostKAndOnlyElementsOfTheExactTopK) {
  auto codec = make_sparse("topk:ratio=0.01");
  auto exact = make_sparse("topk:ratio=0.01,method=exact");
  const size_t count = 1 << 18;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    auto values = random_normal(count, seed);
    if (seed % 2 == 0) {
      for (float& value : values) value = value * value * value;  // heavy tails
    }
    auto input = to_dtype(values, DType::kFloat32);
    const size_t k = 2621;  // round(0.01 * 262144)
    auto message = encode_host(*codec, input, DType::kFloat32);
    SparseView view = view_sparse(message);
    ASSERT_LE(view.kept(), k);
    ASSERT_GE(view.kept(), k * 8 / 10);
    auto truth = brute_force_top_k(values, k);
    uint32_t kth = ~0u;
    for (uint32_t index : truth) kth = std::min(kth, key_of(values[index]));
    uint32_t min_kept = ~0u;
    for (uint32_t index : view.indices) min_kept = std::min(min_kept, key_of(values[index]));
    ASSERT_GE(min_kept, kth);
    expect_carries(*codec, message, values, brute_force_top_k(values, view.kept()));
    // When it keeps k, it is the exact result.
    if (view.kept() == k) {
      EXPECT_EQ(message, encode_host(*exact, input, DType::kFloat32));
    }
  }
}

// When the sample overestimates the threshold, fewer than k survive and all of them are kept.
// Forced here: the rank-th largest sample element is made huge (as are the ones above it), so
// the threshold is that value and exactly `rank` elements pass, all of them in the top k.
TEST(TopK, SampledKeepsEverySurvivorWhenFewerThanKPass) {
  const size_t count = 1 << 18, k = 2621;
  SamplePlan plan = plan_sample(count, k);
  ASSERT_FALSE(plan.exact);
  ASSERT_LT(plan.rank, k);
  auto values = random_normal(count, 31);
  std::vector<uint32_t> boosted;
  for (size_t j = 0; j < plan.rank; ++j) {
    uint64_t index = stratum_pick(kSampleSeed, j, count, plan.samples);
    values[index] = 100.0f + j;
    boosted.push_back(static_cast<uint32_t>(index));
  }
  auto message = encode_host(*make_sparse("topk:ratio=0.01"), to_dtype(values, DType::kFloat32),
                             DType::kFloat32);
  expect_carries(*make_sparse("topk"), message, values, boosted);
}

// Data whose k-th magnitude is 0 (99.5% zeros, k is 1%): the sample threshold is 0, every
// element survives, and the encoder must fall back to exact selection instead of keeping all.
TEST(TopK, SampledFallsBackToExactUnderHeavyTies) {
  const size_t count = 1 << 20;
  std::vector<float> values(count, 0.0f);
  auto noise = random_normal(count / 200, 3);
  for (size_t j = 0; j < noise.size(); ++j) values[j * 200 + 17] = noise[j];
  auto input = to_dtype(values, DType::kFloat32);
  auto sampled = encode_host(*make_sparse("topk:ratio=0.01"), input, DType::kFloat32);
  auto exact = encode_host(*make_sparse("topk:ratio=0.01,method=exact"), input, DType::kFloat32);
  EXPECT_EQ(view_sparse(sampled).kept(), 10486u);
  EXPECT_EQ(sampled, exact);
  expect_carries(*make_sparse("topk"), exact, values, brute_force_top_k(values, 10486));
}

// 8 bytes per kept fp32 element (4 index + 4 value), 6 for fp16/bf16, plus the 32-byte header.
TEST(TopK, WireSizeIsHeaderPlusIndexAndValuePerKeptElement) {
  const size_t count = 1 << 20, k = 10486;
  auto codec = make_sparse("topk:method=exact");
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    auto input = to_dtype(random_normal(count, 2), dtype);
    auto message = encode_host(*codec, input, dtype);
    EXPECT_EQ(message.size(), kWireHeaderBytes + k * (4 + dtype_size(dtype)));
    if (dtype == DType::kFloat32) {
      EXPECT_LE(double(message.size()) / input.size(), 0.021);
    }
    EXPECT_EQ(codec->max_encoded_bytes(count, dtype),
              kWireHeaderBytes + count * (4 + dtype_size(dtype)) + escape_room(count));
  }
}

TEST(TopK, ErrorOutputIsInputMinusDecoded) {
  for (const char* spec : {"topk:method=exact", "topk"}) {
    auto codec = make_sparse(spec);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(spec) + " " + dtype_name(dtype));
      const size_t count = 200003;
      auto values = random_normal(count, 4);
      values[5] = INFINITY;  // escaped: decodes exactly, nothing dropped
      auto input = to_dtype(values, dtype);
      std::vector<float> error(count, -1.0f);
      EncodeContext context;
      context.error = error.data();
      auto message = encode_host(*codec, input, dtype, context);
      auto decoded = decode_f32(*codec, message, count);
      auto exact_input = from_dtype(input, dtype);
      for (size_t i = 0; i < count; ++i) {
        if (i == 5) continue;
        float expected = exact_input[i] - decoded[i];
        ASSERT_EQ(float_bits(error[i]), float_bits(expected)) << i;
      }
      EXPECT_EQ(decoded[5], INFINITY);
      EXPECT_EQ(error[5], 0.0f);
    }
  }
}

// Stated bound for exact: ||x - decoded||^2 <= (1 - k/count) ||x||^2 (the dropped elements are
// the count - k smallest, so their mean square is at most the overall mean square).
TEST(TopK, ExactErrorNormWithinTheTopKBound) {
  auto codec = make_sparse("topk:method=exact,ratio=0.05");
  const size_t count = 100000;
  auto values = random_normal(count, 9);
  auto message = encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32);
  auto decoded = decode_f32(*codec, message, count);
  double error = 0, norm = 0;
  for (size_t i = 0; i < count; ++i) {
    error += double(values[i] - decoded[i]) * (values[i] - decoded[i]);
    norm += double(values[i]) * values[i];
  }
  EXPECT_LE(error, (1.0 - 0.05) * norm);
}

TEST(TopK, WarmupProgressRaisesTheDensity) {
  const size_t count = 100000;
  auto input = to_dtype(random_normal(count, 5), DType::kFloat32);
  auto codec = make_sparse("topk:ratio=0.01,method=exact");
  EncodeContext context;
  context.warmup_progress = 0.5;  // density 0.01^0.5 = 0.1
  EXPECT_EQ(view_sparse(encode_host(*codec, input, DType::kFloat32, context)).kept(), 10000u);
  context.warmup_progress = 0.25;  // 0.01^0.25 = 0.316...
  EXPECT_EQ(view_sparse(encode_host(*codec, input, DType::kFloat32, context)).kept(), 31623u);
  auto fixed = make_sparse("topk:k=100,method=exact");  // density 0.001, ^0.5 = 0.0316...
  context.warmup_progress = 0.5;
  EXPECT_EQ(view_sparse(encode_host(*fixed, input, DType::kFloat32, context)).kept(), 3162u);
  for (double bad : {0.0, -0.5, 1.5, double(NAN)}) {
    context.warmup_progress = bad;
    std::vector<uint8_t> message(codec->max_encoded_bytes(count, DType::kFloat32));
    size_t bytes = 0;
    EXPECT_EQ(codec->encode(input.data(), count, DType::kFloat32, context, message.data(),
                            message.size(), &bytes),
              ncclInvalidArgument);
    EXPECT_NE(std::string(last_error()).find("warmup_progress"), std::string::npos);
  }
}

TEST(TopK, CapacityForKIsEnough) {
  const size_t count = 10000;
  auto input = to_dtype(random_normal(count, 6), DType::kFloat32);
  auto codec = make_sparse("topk:ratio=0.01");
  std::vector<uint8_t> message(kWireHeaderBytes + 100 * 8);
  size_t bytes = 0;
  EXPECT_EQ(codec->encode(input.data(), count, DType::kFloat32, EncodeContext{}, message.data(),
                          message.size(), &bytes),
            ncclSuccess)
      << last_error();
  EXPECT_EQ(codec->encode(input.data(), count, DType::kFloat32, EncodeContext{}, message.data(),
                          message.size() - 1, &bytes),
            ncclInvalidArgument);
}

TEST(TopK, ParametersAreValidated) {
  expect_refused("topk:ratio=0", "ratio=0");
  expect_refused("topk:ratio=1.5", "ratio=1.5");
  expect_refused("topk:ratio=-0.1", "ratio=-0.1");
  expect_refused("topk:k=0", "k=0");
  expect_refused("topk:k=ten", "k=ten");
  expect_refused("topk:ratio=0.1,k=10", "exclude");
  expect_refused("topk:method=fast", "method=fast");
  expect_refused("topk:density=0.1", "unknown parameter 'density'");
  EXPECT_EQ(make_sparse("topk")->spec(), "topk:ratio=0.01,method=sampled");
  EXPECT_EQ(make_sparse("topk:k=5,method=exact")->spec(), "topk:k=5,method=exact");
  EXPECT_EQ(make_sparse("topk:ratio=0.125")->spec(), "topk:ratio=0.125,method=sampled");
}

// Error feedback: each step encodes c_t = g + e_{t-1} and keeps e_t = c_t - decoded_t (the
// encoder's error output). Summing, sum_t decoded_t = T g - e_T, so the claim is that e_T stays
// bounded. Top-k keeps the k' largest of c_t, so ||e_t||^2 <= (1 - k'/n) ||c_t||^2, and with
// q = sqrt(1 - k'/n): ||e_t|| <= q (||e_{t-1}|| + ||g||) <= q/(1 - q) ||g|| = C for every t.
// At ratio 0.05 (k' >= 0.8 k for sampled: q = sqrt(0.96)) C < 49 ||g||, while without feedback
// the sum would miss T g by T ||g - topk(g)|| ~ 0.9 T ||g|| (45 ||g|| at T = 50, 90 at 100).
TEST(TopK, ErrorFeedbackKeepsTheSumOfDecodedTrackingTheSumOfGradients) {
  for (const char* spec : {"topk:ratio=0.05,method=exact", "topk:ratio=0.05"}) {
    SCOPED_TRACE(spec);
    auto codec = make_sparse(spec);
    const size_t count = 65536;  // large enough that sampled really samples
    auto gradient = random_normal(count, 12);
    double gradient_norm = 0;
    for (float g : gradient) gradient_norm += double(g) * g;
    gradient_norm = std::sqrt(gradient_norm);
    std::vector<float> residual(count, 0.0f), compensated(count), next(count);
    std::vector<double> sum(count, 0.0);
    double bound = 0;  // the recursive bound on ||e_t||
    const double k = 0.05 * count;
    for (int step = 1; step <= 100; ++step) {
      for (size_t i = 0; i < count; ++i) compensated[i] = gradient[i] + residual[i];
      EncodeContext context;
      context.error = next.data();
      auto message =
          encode_host(*codec, to_dtype(compensated, DType::kFloat32), DType::kFloat32, context);
      size_t kept = view_sparse(message).kept();
      ASSERT_GE(kept, 0.8 * k);
      auto decoded = decode_f32(*codec, message, count);
      for (size_t i = 0; i < count; ++i) sum[i] += decoded[i];
      residual = next;
      double q = std::sqrt(1.0 - double(kept) / count);
      bound = q * (bound + gradient_norm);
      double residual_norm = 0;
      for (float e : residual) residual_norm += double(e) * e;
      ASSERT_LE(std::sqrt(residual_norm), bound * (1 + 1e-5)) << "step " << step;
      if (step == 50 || step == 100) {
        double miss = 0;
        for (size_t i = 0; i < count; ++i) {
          double d = sum[i] - double(step) * gradient[i];
          miss += d * d;
        }
        const double q_min = std::sqrt(1.0 - 0.8 * k / count);
        const double constant = q_min / (1 - q_min) * gradient_norm;
        EXPECT_LE(std::sqrt(miss), constant) << "step " << step;
        // The identity sum = T g - e_T, up to fp32 rounding of the compensation.
        EXPECT_NEAR(std::sqrt(miss), std::sqrt(residual_norm), 1e-3 * gradient_norm);
      }
    }
  }
}

// The shared sparse decoder refuses every malformed index list before writing.
TEST(SparseDecoder, RefusesDuplicateUnsortedOutOfRangeIndicesAndBadHeaders) {
  auto codec = make_sparse("topk:k=4,method=exact");
  const size_t count = 100;
  auto values = random_normal(count, 7);
  auto valid = encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32);
  ASSERT_EQ(try_decode(*codec, valid, count), ncclSuccess);
  SparseView view = view_sparse(valid);
  ASSERT_EQ(view.indices.size(), 4u);

  auto with_index = [&](size_t j, uint32_t index) {
    auto message = valid;
    put_index(&message, j, index);
    return message;
  };
  struct Case {
    std::vector<uint8_t> message;
    const char* needle;
  };
  std::vector<Case> cases = {
      {with_index(1, view.indices[0]), "does not increase"},  // duplicate
      {with_index(0, view.indices[1] + 1 < count ? view.indices[1] + 1 : 99), "does not increase"},
      {with_index(3, count), "not below count"},
      {with_index(3, 0xffffffffu), "not below count"},
  };
  WireHeader header = view.header;
  header.param0 = count + 1;  // k > count
  cases.push_back({valid, "k=101"});
  put_header(&cases.back().message, header);
  header = view.header;
  header.param1 = static_cast<uint32_t>(DType::kFloat16);  // value type differs from the input's
  cases.push_back({valid, "value type"});
  put_header(&cases.back().message, header);
  header = view.header;
  header.flags = kSparseImplicitIndices;  // randomk's flag on a topk message
  cases.push_back({valid, "flags"});
  put_header(&cases.back().message, header);
  header = view.header;
  header.param0 = 3;  // k disagrees with the length
  cases.push_back({valid, "implies"});
  put_header(&cases.back().message, header);

  for (const Case& c : cases) {
    std::vector<float> output(count + 2, 7.0f);
    EXPECT_EQ(codec->decode(c.message.data(), c.message.size(), output.data() + 1, count,
                            DType::kFloat32, false, DecodeContext{}),
              ncclInvalidArgument)
        << c.needle;
    EXPECT_NE(std::string(last_error()).find(c.needle), std::string::npos) << last_error();
    for (float value : output) ASSERT_EQ(value, 7.0f) << "wrote before validating: " << c.needle;
  }
}

TEST(SparseDecoder, DecodesIntoAnyDtypeAndAccumulates) {
  auto codec = make_sparse("topk:ratio=0.1,method=exact");
  const size_t count = 1001;
  auto values = random_normal(count, 8);
  auto message = encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32);
  auto as_f32 = decode_f32(*codec, message, count);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    auto initial = to_dtype(random_normal(count, 9), dtype);
    auto output = initial;
    ASSERT_EQ(codec->decode(message.data(), message.size(), output.data(), count, dtype, true,
                            DecodeContext{}),
              ncclSuccess);
    // Kept elements get start + value rounded once to the output type; the rest are untouched.
    auto start = from_dtype(initial, dtype), result = from_dtype(output, dtype);
    for (size_t i = 0; i < count; ++i) {
      float sum = start[i] + as_f32[i];
      float expected = as_f32[i] == 0.0f ? start[i] : from_dtype(to_dtype({sum}, dtype), dtype)[0];
      ASSERT_EQ(result[i], expected) << i;
    }
  }
}

TEST(TopKGpu, DeviceBytesEqualHostBytes) {
  TERSE_REQUIRE_GPU();
  for (const char* spec : {"topk:method=exact", "topk", "topk:ratio=0.3", "topk:k=1"}) {
    auto codec = make_sparse(spec);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      for (size_t count : {size_t(1), size_t(4099), size_t(1 << 20)}) {
        for (bool ties : {false, true}) {
          SCOPED_TRACE(std::string(spec) + " " + dtype_name(dtype) + " x " + std::to_string(count) +
                       (ties ? " tied" : ""));
          auto input = to_dtype(ties ? tied_values(count, 3) : random_normal(count, 6), dtype);
          std::vector<float> host_error(count);
          EncodeContext context;
          context.error = host_error.data();
          auto host_message = encode_host(*codec, input, dtype, context);
          std::vector<uint8_t> device_message;
          std::vector<float> device_error;
          ASSERT_EQ(
              encode_device(*codec, input, dtype, EncodeContext{}, &device_message, &device_error),
              ncclSuccess)
              << last_error();
          EXPECT_EQ(device_message, host_message);
          EXPECT_EQ(device_error, host_error);
          for (bool accumulate : {false, true}) {
            auto initial = to_dtype(random_normal(count, 7), dtype);
            std::vector<float> device_output;
            ASSERT_EQ(decode_device(*codec, host_message, count, dtype, accumulate, initial,
                                    &device_output),
                      ncclSuccess)
                << last_error();
            auto host_output = initial;
            ASSERT_EQ(codec->decode(host_message.data(), host_message.size(), host_output.data(),
                                    count, dtype, accumulate, DecodeContext{}),
                      ncclSuccess);
            EXPECT_EQ(device_output, from_dtype(host_output, dtype));
          }
        }
      }
    }
  }
}

TEST(TopKGpu, DeviceDecodeRefusesBadIndices) {
  TERSE_REQUIRE_GPU();
  auto codec = make_sparse("topk:k=4,method=exact");
  const size_t count = 100;
  auto valid =
      encode_host(*codec, to_dtype(random_normal(count, 7), DType::kFloat32), DType::kFloat32);
  SparseView view = view_sparse(valid);
  for (uint32_t bad : {view.indices[0], uint32_t(count)}) {
    auto message = valid;
    put_index(&message, 3, bad);
    std::vector<float> output;
    EXPECT_EQ(decode_device(*codec, message, count, DType::kFloat32, false, {}, &output),
              ncclInvalidArgument);
  }
}

}  // namespace
}  // namespace terse::testing
