// DGC: momentum correction, masking and top-k of the velocity against a plain reference over
// several steps, the sampled selection, local clipping, the warm-up density schedule, the state
// and error-buffer rules, parameters, and CPU/GPU parity over several steps.
#include <gtest/gtest.h>

#include <cmath>

#include "sparse_test_support.h"

namespace terse::testing {
namespace {

// DGC written out directly: u = m u + s g, v = v + u, then u = v = 0 where sent.
struct ReferenceDgc {
  std::vector<float> u, v;
  float momentum;

  ReferenceDgc(size_t count, float m) : u(count, 0.0f), v(count, 0.0f), momentum(m) {}

  void accumulate(const std::vector<float>& gradient, float scale) {
    for (size_t i = 0; i < u.size(); ++i) {
      float g = gradient[i] * scale;
      float decayed = momentum * u[i];
      float corrected = decayed + g;
      u[i] = corrected;
      v[i] = v[i] + corrected;
    }
  }

  void mask(const std::vector<uint32_t>& sent) {
    for (uint32_t index : sent) u[index] = v[index] = 0.0f;
  }
};

struct Stepper {
  std::unique_ptr<Codec> codec;
  std::unique_ptr<CodecState> state;

  Stepper(const std::string& spec, size_t count, DType dtype)
      : codec(make_sparse(spec)), state(codec->make_state(count, dtype, MatrixShape{})) {}

  std::vector<uint8_t> encode(const std::vector<uint8_t>& input, DType dtype, uint64_t step) {
    EncodeContext context;
    context.state = state.get();
    context.step = step;
    return encode_host(*codec, input, dtype, context);
  }
};

TEST(Dgc, MatchesAPlainReferenceOverSteps) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const size_t count = 5003;
    Stepper dgc("dgc:ratio=0.01,momentum=0.9,method=exact", count, dtype);
    ReferenceDgc reference(count, 0.9f);
    const size_t k = 50;
    for (uint64_t step = 0; step < 12; ++step) {
      SCOPED_TRACE(step);
      // Every third step sends a zero gradient: masked elements must then stay quiet.
      auto raw = step % 3 == 2 ? std::vector<float>(count, 0.0f) : random_normal(count, 100 + step);
      auto input = to_dtype(raw, dtype);
      auto message = dgc.encode(input, dtype, step);
      reference.accumulate(from_dtype(input, dtype), 1.0f);
      auto expected = brute_force_top_k(reference.v, k);
      SparseView view = view_sparse(message);
      ASSERT_EQ(view.indices, expected);
      for (size_t j = 0; j < k; ++j) {
        ASSERT_EQ(float_bits(view.values[j]), float_bits(reference.v[expected[j]])) << j;
      }
      auto decoded = decode_f32(*dgc.codec, message, count);
      for (size_t j = 0; j < k; ++j) ASSERT_EQ(decoded[expected[j]], reference.v[expected[j]]);
      reference.mask(expected);
    }
  }
}

// Sampled selection keeps 0.8 k..k elements, the largest |v| (so the exact top |kept|), and the
// state follows whatever was sent.
TEST(Dgc, SampledSendsTheLargestVelocitiesAndMasksThem) {
  const size_t count = 200000, k = 2000;
  Stepper dgc("dgc:ratio=0.01,momentum=0.5", count, DType::kFloat32);
  ReferenceDgc reference(count, 0.5f);
  for (uint64_t step = 0; step < 8; ++step) {
    SCOPED_TRACE(step);
    auto raw = random_normal(count, 200 + step);
    auto message = dgc.encode(to_dtype(raw, DType::kFloat32), DType::kFloat32, step);
    reference.accumulate(raw, 1.0f);
    SparseView view = view_sparse(message);
    ASSERT_LE(view.kept(), k);
    ASSERT_GE(view.kept(), k * 8 / 10);
    ASSERT_EQ(view.indices, brute_force_top_k(reference.v, view.kept()));
    for (size_t j = 0; j < view.kept(); ++j) {
      ASSERT_EQ(view.values[j], reference.v[view.indices[j]]) << j;
    }
    reference.mask(view.indices);
  }
}

// Clipping: with momentum 0 and everything sent, the decoded vector is the clipped gradient,
// whose norm is clip (the scale clip / ||g|| is computed in double, then rounded to fp32).
// A clip above the gradient's norm changes nothing, bit for bit.
TEST(Dgc, ClipsTheGradientNormLocally) {
  const size_t count = 10007;
  auto raw = random_normal(count, 5);
  double norm = 0;
  for (float g : raw) norm += double(g) * g;
  norm = std::sqrt(norm);  // ~100
  auto input = to_dtype(raw, DType::kFloat32);
  Stepper clipped("dgc:ratio=1,momentum=0,clip=2,method=exact", count, DType::kFloat32);
  auto decoded = decode_f32(*clipped.codec, clipped.encode(input, DType::kFloat32, 0), count);
  double decoded_norm = 0;
  const float scale = static_cast<float>(2.0 / norm);
  for (size_t i = 0; i < count; ++i) {
    decoded_norm += double(decoded[i]) * decoded[i];
    ASSERT_NEAR(decoded[i], raw[i] * scale, 1e-6 * std::fabs(raw[i] * scale)) << i;
  }
  EXPECT_NEAR(std::sqrt(decoded_norm), 2.0, 1e-5);

  Stepper loose("dgc:ratio=0.01,clip=1000", count, DType::kFloat32);
  Stepper off("dgc:ratio=0.01", count, DType::kFloat32);
  for (uint64_t step = 0; step < 3; ++step) {
    EXPECT_EQ(loose.encode(input, DType::kFloat32, step), off.encode(input, DType::kFloat32, step));
  }
}

// Warm-up: density 0.25 (ratio/0.25)^(s/W) for step s < W, then ratio. With ratio 0.001 the
// quarter points are close to the paper's 93.75%, 98.4375% and 99.6% sparsity.
TEST(Dgc, WarmupRampsTheDensityFromAQuarterToTheRatio) {
  const size_t count = 100000;
  Stepper dgc("dgc:ratio=0.001,warmup_steps=100", count, DType::kFloat32);
  auto input = to_dtype(random_normal(count, 6), DType::kFloat32);
  struct Point {
    uint64_t step;
    double paper_density;  // 0 = check the formula only
  };
  size_t previous = count + 1;
  for (Point point : {Point{0, 0.25}, Point{25, 0.0625}, Point{50, 0.015625}, Point{75, 0.004},
                      Point{99, 0}, Point{100, 0.001}, Point{5000, 0.001}}) {
    SCOPED_TRACE(point.step);
    size_t kept = view_sparse(dgc.encode(input, DType::kFloat32, point.step)).kept();
    double density = point.step >= 100 ? 0.001 : 0.25 * std::pow(0.004, point.step / 100.0);
    EXPECT_EQ(kept, static_cast<size_t>(std::floor(density * count + 0.5)));
    if (point.paper_density > 0) {
      EXPECT_NEAR(kept, point.paper_density * count, 0.013 * kept);
    }
    EXPECT_LE(kept, previous);
    previous = kept;
  }
  // The policy's ramp applies on top: progress 0.5 after warm-up gives 0.001^0.5.
  EncodeContext context;
  context.state = dgc.state.get();
  context.step = 200;
  context.warmup_progress = 0.5;
  EXPECT_EQ(view_sparse(encode_host(*dgc.codec, input, DType::kFloat32, context)).kept(), 3162u);
  // Off by default: step 0 already at the ratio.
  Stepper plain("dgc:ratio=0.001", count, DType::kFloat32);
  EXPECT_EQ(view_sparse(plain.encode(input, DType::kFloat32, 0)).kept(), 100u);
}

TEST(Dgc, ValuesAreFp32WhateverTheInputType) {
  const size_t count = 10000;
  Stepper dgc("dgc:ratio=0.01", count, DType::kBFloat16);
  auto message =
      dgc.encode(to_dtype(random_normal(count, 7), DType::kBFloat16), DType::kBFloat16, 0);
  EXPECT_EQ(view_sparse(message).header.param1, static_cast<uint32_t>(DType::kFloat32));
  EXPECT_EQ(message.size(), kWireHeaderBytes + view_sparse(message).kept() * 8);
  EXPECT_EQ(dgc.codec->max_encoded_bytes(count, DType::kBFloat16),
            kWireHeaderBytes + count * 8 + escape_room(count));
  EXPECT_EQ(dgc.state->bytes(), 2 * count * sizeof(float));
}

TEST(Dgc, NeedsItsStateAndRefusesAnErrorBuffer) {
  const size_t count = 100;
  auto codec = make_sparse("dgc");
  auto input = to_dtype(random_normal(count, 8), DType::kFloat32);
  std::vector<uint8_t> message(codec->max_encoded_bytes(count, DType::kFloat32));
  size_t bytes = 0;
  auto encode = [&](const EncodeContext& context) {
    return codec->encode(input.data(), count, DType::kFloat32, context, message.data(),
                         message.size(), &bytes);
  };
  EncodeContext context;
  EXPECT_EQ(encode(context), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("state is null"), std::string::npos) << last_error();

  struct OtherState : CodecState {
    size_t bytes() const override { return 0; }
  } other;
  context.state = &other;
  EXPECT_EQ(encode(context), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("make_state"), std::string::npos) << last_error();

  auto wrong_size = codec->make_state(count + 1, DType::kFloat32, MatrixShape{});
  context.state = wrong_size.get();
  EXPECT_EQ(encode(context), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("101 elements"), std::string::npos) << last_error();

  auto state = codec->make_state(count, DType::kFloat32, MatrixShape{});
  std::vector<float> error(count);
  context.state = state.get();
  context.error = error.data();
  EXPECT_EQ(encode(context), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("error must be null"), std::string::npos);
  context.error = nullptr;
  EXPECT_EQ(encode(context), ncclSuccess) << last_error();
}

TEST(Dgc, ParametersAreValidated) {
  expect_refused("dgc:ratio=0", "ratio=0");
  expect_refused("dgc:momentum=1.5", "momentum=1.5");
  expect_refused("dgc:momentum=-0.1", "momentum=-0.1");
  expect_refused("dgc:clip=-1", "clip=-1");
  expect_refused("dgc:warmup_steps=-1", "warmup_steps=-1");
  expect_refused("dgc:warmup_steps=1.5", "warmup_steps=1.5");
  expect_refused("dgc:method=magic", "method=magic");
  expect_refused("dgc:nesterov=true", "unknown parameter 'nesterov'");
  EXPECT_EQ(make_sparse("dgc")->spec(),
            "dgc:ratio=0.001,momentum=0.9,clip=0,warmup_steps=0,method=sampled");
}

TEST(DgcGpu, DeviceStateAndBytesFollowTheHostOverSteps) {
  TERSE_REQUIRE_GPU();
  for (const char* spec : {"dgc:ratio=0.01", "dgc:ratio=0.01,method=exact,clip=50",
                           "dgc:ratio=0.001,warmup_steps=4,momentum=0.5"}) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (size_t count : {size_t(1), size_t(4099), size_t(1 << 20)}) {
        SCOPED_TRACE(std::string(spec) + " " + dtype_name(dtype) + " x " + std::to_string(count));
        Stepper host(spec, count, dtype);
        auto device_state = host.codec->make_state(count, dtype, MatrixShape{});
        for (uint64_t step = 0; step < 6; ++step) {
          auto input = to_dtype(random_normal(count, 300 + step), dtype);
          auto host_message = host.encode(input, dtype, step);
          EncodeContext context;
          context.state = device_state.get();
          context.step = step;
          std::vector<uint8_t> device_message;
          ASSERT_EQ(encode_device(*host.codec, input, dtype, context, &device_message), ncclSuccess)
              << last_error();
          ASSERT_EQ(device_message, host_message) << "step " << step;
        }
      }
    }
  }
}

}  // namespace
}  // namespace terse::testing
