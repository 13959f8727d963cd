// NaN and Inf in device tensors: every codec with device kernels escapes them exactly as on the
// host (nonfinite_escapes.h, codec.h): the device message is the host's byte for byte (few
// non-finite elements: the list form; many: the map form), a device decode of it equals the
// host's (overwriting and accumulating; with the host's copy of the message and without), the
// error output and a compensated encode's residual are the host's, and a codec that keeps device
// state refuses such a tensor, naming itself. Needs a GPU; skips, saying so, without one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "codec_test_support.h"
#include "common/result.h"

namespace terse::testing {
namespace {

// Equal values, NaN matching NaN (a NaN's payload is not kept: nonfinite_escapes.h).
void expect_same_values(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
    if (!same && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0u) << what << ": first at " << first << ", got " << got[first] << ", want "
                       << want[first];
}

// `count` normal values with NaN, +Inf and -Inf at every `every`-th element (offset 3).
std::vector<float> poisoned(size_t count, size_t every, uint64_t seed) {
  std::vector<float> values = random_normal(count, seed);
  const float kinds[3] = {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  for (size_t i = 3, k = 0; i < count; i += every, ++k) values[i] = kinds[k % 3];
  return values;
}

struct Case {
  const char* spec;
  DType dtype;
};

const Case kCases[] = {
    {"fp16", DType::kFloat32},
    {"bf16", DType::kFloat32},
    {"int8", DType::kFloat32},
    {"int8", DType::kFloat16},
    {"int4:block=64", DType::kBFloat16},
    {"int2", DType::kFloat32},
    {"qsgd", DType::kFloat32},
    {"terngrad", DType::kFloat32},
    {"sign", DType::kFloat32},
    {"mxfp8", DType::kFloat32},
    {"mxfp4", DType::kFloat16},
    {"nvfp4", DType::kFloat32},
    {"topk:ratio=0.05", DType::kFloat32},
    {"randomk:ratio=0.05", DType::kFloat32},
};

TEST(DeviceNonFinite, EveryStatelessCodecEscapesAsTheHostDoes) {
  TERSE_REQUIRE_GPU();
  const size_t count = 1000;
  for (const Case& c : kCases) {
    for (size_t every : {size_t{97}, size_t{3}}) {  // a list of escapes, then the map
      SCOPED_TRACE(std::string(c.spec) + " " + dtype_name(c.dtype) + " every " +
                   std::to_string(every));
      auto codec = make_codec(c.spec);
      ASSERT_NE(codec, nullptr);
      const std::vector<uint8_t> input = to_dtype(poisoned(count, every, 7), c.dtype);
      EncodeContext context;
      context.seed = 11;
      std::vector<float> host_error(count);
      EncodeContext host_context = context;
      host_context.error = host_error.data();
      const std::vector<uint8_t> host = encode_host(*codec, input, c.dtype, host_context);
      std::vector<uint8_t> device;
      std::vector<float> device_error;
      ASSERT_EQ(encode_device(*codec, input, c.dtype, context, &device, &device_error), ncclSuccess)
          << last_error();
      EXPECT_EQ(device, host);
      expect_same_values(device_error, host_error, "error output");

      const std::vector<float> want = decode_host(*codec, host, count, c.dtype);
      for (bool with_host_message : {false, true}) {
        std::vector<float> got;
        ASSERT_EQ(decode_device(*codec, host, count, c.dtype, false, {}, &got, with_host_message),
                  ncclSuccess)
            << last_error();
        expect_same_values(got, want, with_host_message ? "decode (host copy)" : "decode");
      }
      // Accumulating onto values of the output's type: the escaped elements added too.
      const std::vector<uint8_t> initial = to_dtype(random_normal(count, 8), c.dtype);
      std::vector<uint8_t> host_sum = initial;
      ASSERT_EQ(codec->decode(host.data(), host.size(), host_sum.data(), count, c.dtype, true,
                              DecodeContext{}),
                ncclSuccess)
          << last_error();
      std::vector<float> accumulated;
      ASSERT_EQ(decode_device(*codec, host, count, c.dtype, true, initial, &accumulated, true),
                ncclSuccess)
          << last_error();
      expect_same_values(accumulated, from_dtype(host_sum, c.dtype), "accumulated decode");
    }
  }
}

// The fused device compensation (int quantisers): message and residual as the host's generic
// path leaves them (the escaped elements' residual 0).
TEST(DeviceNonFinite, CompensatedEncodeKeepsTheResidualFiniteAsTheHostDoes) {
  TERSE_REQUIRE_GPU();
  const size_t count = 777;
  for (const char* spec : {"int8", "int4:block=64,mode=absmax", "int2"}) {
    SCOPED_TRACE(spec);
    auto codec = make_codec(spec);
    ASSERT_NE(codec, nullptr);
    const std::vector<uint8_t> input = to_dtype(poisoned(count, 50, 9), DType::kFloat32);
    std::vector<float> host_residual = random_normal(count, 10);
    for (float& r : host_residual) r *= 0.01f;
    std::vector<float> device_residual = host_residual;
    EncodeContext context;
    context.seed = 5;
    std::vector<uint8_t> host(codec->max_encoded_bytes(count, DType::kFloat32));
    size_t bytes = 0;
    ASSERT_EQ(codec->encode_compensated(input.data(), DType::kFloat32, host_residual.data(), count,
                                        context, host.data(), host.size(), &bytes),
              ncclSuccess)
        << last_error();
    host.resize(bytes);
    std::vector<uint8_t> device;
    ASSERT_EQ(encode_compensated_device(*codec, input, DType::kFloat32, &device_residual, context,
                                        &device),
              ncclSuccess)
        << last_error();
    EXPECT_EQ(device, host);
    expect_same_values(device_residual, host_residual, "residual");
    for (size_t i = 0; i < count; ++i) ASSERT_TRUE(std::isfinite(device_residual[i])) << i;
  }
}

// DGC keeps its momentum on the device: a poisoned device tensor is refused, naming the codec,
// and a finite one still encodes.
TEST(DeviceNonFinite, ACodecWithDeviceStateRefusesNamingItself) {
  TERSE_REQUIRE_GPU();
  const size_t count = 512;
  auto codec = make_codec("dgc");
  ASSERT_NE(codec, nullptr);
  std::unique_ptr<CodecState> state = codec->make_state(count, DType::kFloat32, MatrixShape{});
  ASSERT_NE(state, nullptr);
  EncodeContext context;
  context.state = state.get();
  std::vector<uint8_t> message;
  EXPECT_EQ(encode_device(*codec, to_dtype(poisoned(count, 100, 3), DType::kFloat32),
                          DType::kFloat32, context, &message),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("dgc"), std::string::npos) << last_error();
  EXPECT_NE(std::string(last_error()).find("NaN or Inf"), std::string::npos) << last_error();
}

}  // namespace
}  // namespace terse::testing
