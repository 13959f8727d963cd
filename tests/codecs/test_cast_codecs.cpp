#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "codec_test_support.h"
#include "codecs/codec_registry.h"
#include "codecs/wire_format.h"
#include "common/result.h"

namespace terse::testing {
namespace {

std::unique_ptr<Codec> make(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec(spec, &codec), ncclSuccess) << last_error();
  return codec;
}

TEST(NoneCodec, IsLosslessForEveryDtype) {
  auto codec = make("none");
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    auto input = to_dtype(random_normal(1001, 1), dtype);
    auto message = encode_host(*codec, input, dtype);
    EXPECT_EQ(message.size(), kWireHeaderBytes + input.size());
    EXPECT_EQ(decode_host(*codec, message, 1001, dtype), from_dtype(input, dtype));
  }
}

TEST(NoneCodec, DecodesIntoAnotherDtype) {
  auto codec = make("none");
  auto values = random_normal(64, 2);
  auto message = encode_host(*codec, to_dtype(values, DType::kFloat32), DType::kFloat32);
  auto as_bf16 = decode_host(*codec, message, 64, DType::kBFloat16);
  for (size_t i = 0; i < 64; ++i) EXPECT_EQ(as_bf16[i], bf16_to_float(float_to_bf16(values[i])));
}

// Stated bounds: round to nearest gives |x - q(x)| <= 2^-(mantissa bits + 1) |x| for normal
// values: 2^-11 for fp16 (10 mantissa bits), 2^-8 for bf16 (7 bits).
TEST(CastCodecs, ErrorWithinHalfAnUlpAndErrorOutputMatches) {
  struct Case {
    const char* name;
    double bound;
    double ratio;
  };
  for (Case c : {Case{"fp16", 1.0 / 2048, 0.5}, Case{"bf16", 1.0 / 256, 0.5}}) {
    SCOPED_TRACE(c.name);
    auto codec = make(c.name);
    const size_t count = 100000;
    auto values = random_normal(count, 4);
    auto input = to_dtype(values, DType::kFloat32);
    std::vector<float> error(count);
    EncodeContext context;
    context.error = error.data();
    auto message = encode_host(*codec, input, DType::kFloat32, context);
    EXPECT_NEAR(double(message.size()) / input.size(), c.ratio, 1e-3);
    auto decoded = decode_host(*codec, message, count, DType::kFloat32);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_LE(std::fabs(decoded[i] - values[i]), c.bound * std::fabs(values[i]) + 1e-7) << i;
      ASSERT_EQ(error[i], values[i] - decoded[i]) << i;
    }
  }
}

TEST(CastCodecs, RefusesAMessageWhoseWireTypeWasTamperedWith) {
  auto codec = make("fp16");
  auto message =
      encode_host(*codec, to_dtype(random_normal(16, 5), DType::kFloat32), DType::kFloat32);
  WireHeader header;
  memcpy(&header, message.data(), sizeof(header));
  header.param0 = static_cast<uint32_t>(DType::kFloat32);
  memcpy(message.data(), &header, sizeof(header));
  std::vector<float> output(16);
  EXPECT_EQ(codec->decode(message.data(), message.size(), output.data(), 16, DType::kFloat32, false,
                          DecodeContext{}),
            ncclInvalidArgument);
}

TEST(CastCodecsGpu, DeviceBytesEqualHostBytes) {
  TERSE_REQUIRE_GPU();
  for (const char* name : {"none", "fp16", "bf16"}) {
    auto codec = make(name);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(name) + " " + dtype_name(dtype));
      const size_t count = 100003;
      auto input = to_dtype(random_normal(count, 6), dtype);
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
      auto initial = to_dtype(random_normal(count, 7), dtype);
      std::vector<float> device_output;
      ASSERT_EQ(decode_device(*codec, host_message, count, dtype, true, initial, &device_output),
                ncclSuccess);
      auto host_output = initial;
      ASSERT_EQ(codec->decode(host_message.data(), host_message.size(), host_output.data(), count,
                              dtype, true, DecodeContext{}),
                ncclSuccess);
      EXPECT_EQ(device_output, from_dtype(host_output, dtype));
    }
  }
}

}  // namespace
}  // namespace terse::testing
