// Properties every registered codec must have, whatever its family: it is listed once, builds
// from its name, round-trips every dtype and awkward length within a loose sanity bound, refuses
// short buffers and foreign messages, and survives truncated or corrupted messages (fuzzed) with
// an error and no out-of-bounds access. Codec-specific error bounds live in each codec's tests.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "codec_test_support.h"
#include "codecs/codec_registry.h"
#include "codecs/wire_format.h"
#include "common/result.h"

namespace terse::testing {
namespace {

std::vector<std::string> codec_names() {
  std::vector<std::string> names;
  for (const CodecInfo& info : codec_table()) names.push_back(info.name);
  return names;
}

std::unique_ptr<Codec> make(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec(spec, &codec), ncclSuccess) << spec << ": " << last_error();
  return codec;
}

// Runs encode with whatever per-tensor state the codec asks for.
struct Encoded {
  std::unique_ptr<CodecState> state;
  std::vector<uint8_t> message;
};

Encoded encode_with_state(Codec& codec, const std::vector<uint8_t>& input, DType dtype,
                          uint64_t seed = 1) {
  Encoded encoded;
  size_t count = input.size() / dtype_size(dtype);
  encoded.state = codec.make_state(count, dtype, MatrixShape{});
  EncodeContext context;
  context.seed = seed;
  context.state = encoded.state.get();
  encoded.message = encode_host(codec, input, dtype, context);
  return encoded;
}

class EveryCodec : public ::testing::TestWithParam<std::string> {};

TEST(CodecTable, NamesAndWireIdsAreUnique) {
  std::set<std::string> names;
  std::set<int> ids;
  for (const CodecInfo& info : codec_table()) {
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_TRUE(ids.insert(static_cast<int>(info.id)).second) << info.name;
    EXPECT_NE(std::string(info.description), "") << info.name;
  }
  EXPECT_GE(names.size(), 3u);
}

TEST(CodecTable, UnknownNamesAndParametersAreRefusedWithTheirName) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec("int9", &codec), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("unknown codec 'int9'"), std::string::npos);
  EXPECT_NE(std::string(last_error()).find("none"), std::string::npos);
  EXPECT_EQ(create_codec("none:bogus=1", &codec), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("unknown parameter 'bogus'"), std::string::npos);
  EXPECT_EQ(create_codec(":x=1", &codec), ncclInvalidArgument);
  EXPECT_EQ(create_codec("none:novalue", &codec), ncclInvalidArgument);
}

TEST_P(EveryCodec, SpecRecreatesTheSameCodec) {
  auto codec = make(GetParam());
  ASSERT_TRUE(codec);
  auto again = make(codec->spec());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->spec(), codec->spec());
  EXPECT_EQ(again->id(), codec->id());
}

TEST_P(EveryCodec, RoundTripsEveryDtypeAndAwkwardLengths) {
  auto codec = make(GetParam());
  ASSERT_TRUE(codec);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3,
                      DType::kFloat8E5M2}) {
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(255), size_t(257), size_t(4099)}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " x " + std::to_string(count));
      auto values = random_normal(count, 11 + count);
      auto input = to_dtype(values, dtype);
      Encoded encoded = encode_with_state(*codec, input, dtype);
      EXPECT_LE(encoded.message.size(), codec->max_encoded_bytes(count, dtype));
      EXPECT_GE(encoded.message.size(), kWireHeaderBytes);
      auto decoded = decode_host(*codec, encoded.message, count, dtype);
      ASSERT_EQ(decoded.size(), count);
      // Sanity only: every codec keeps the output finite and no larger than a generous multiple
      // of the input's norm (sign and sparsifiers scale; the exact bounds are per codec).
      double input_norm = 0, output_norm = 0;
      for (size_t i = 0; i < count; ++i) {
        ASSERT_TRUE(std::isfinite(decoded[i])) << i;
        input_norm += double(values[i]) * values[i];
        output_norm += double(decoded[i]) * decoded[i];
      }
      EXPECT_LE(std::sqrt(output_norm), 64 * std::sqrt(input_norm) + 1e-6);
    }
  }
}

TEST_P(EveryCodec, DecodeAccumulateAddsToTheOutput) {
  auto codec = make(GetParam());
  ASSERT_TRUE(codec);
  const size_t count = 1000;
  auto input = to_dtype(random_normal(count, 3), DType::kFloat32);
  Encoded encoded = encode_with_state(*codec, input, DType::kFloat32);
  auto plain = decode_host(*codec, encoded.message, count, DType::kFloat32);
  std::vector<float> output(count, 2.5f);
  ASSERT_EQ(codec->decode(encoded.message.data(), encoded.message.size(), output.data(), count,
                          DType::kFloat32, true, DecodeContext{}),
            ncclSuccess)
      << last_error();
  for (size_t i = 0; i < count; ++i) ASSERT_FLOAT_EQ(output[i], plain[i] + 2.5f) << i;
}

TEST_P(EveryCodec, RefusesShortCapacityAndNullPointers) {
  auto codec = make(GetParam());
  ASSERT_TRUE(codec);
  const size_t count = 1024;
  auto input = to_dtype(random_normal(count, 5), DType::kFloat32);
  auto state = codec->make_state(count, DType::kFloat32, MatrixShape{});
  EncodeContext context;
  context.state = state.get();
  std::vector<uint8_t> message(kWireHeaderBytes - 1);
  size_t bytes = 0;
  EXPECT_EQ(codec->encode(input.data(), count, DType::kFloat32, context, message.data(),
                          message.size(), &bytes),
            ncclInvalidArgument);
  message.resize(codec->max_encoded_bytes(count, DType::kFloat32));
  EXPECT_EQ(codec->encode(nullptr, count, DType::kFloat32, context, message.data(), message.size(),
                          &bytes),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("input"), std::string::npos) << last_error();
  EXPECT_EQ(
      codec->encode(input.data(), count, DType::kFloat32, context, nullptr, message.size(), &bytes),
      ncclInvalidArgument);
}

TEST_P(EveryCodec, RefusesMessagesOfAnotherCodecOrCount) {
  auto codec = make(GetParam());
  ASSERT_TRUE(codec);
  const size_t count = 512;
  auto input = to_dtype(random_normal(count, 6), DType::kFloat32);
  Encoded encoded = encode_with_state(*codec, input, DType::kFloat32);
  std::vector<float> output(count + 1);
  EXPECT_EQ(codec->decode(encoded.message.data(), encoded.message.size(), output.data(), count + 1,
                          DType::kFloat32, false, DecodeContext{}),
            ncclInvalidArgument);
  auto foreign = GetParam() == "none" ? make("fp16") : make("none");
  auto other = foreign->max_encoded_bytes(count, DType::kFloat32);
  std::vector<uint8_t> message(other);
  size_t bytes = 0;
  ASSERT_EQ(foreign->encode(input.data(), count, DType::kFloat32, EncodeContext{}, message.data(),
                            message.size(), &bytes),
            ncclSuccess);
  EXPECT_EQ(codec->decode(message.data(), bytes, output.data(), count, DType::kFloat32, false,
                          DecodeContext{}),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("codec id"), std::string::npos) << last_error();
}

// Every truncation, and many random corruptions, of a valid message: decode must either
// succeed or fail cleanly, and must never write outside the output (guard values around it) or
// read outside the message (the message lives in an exactly-sized heap block, so an
// AddressSanitizer build of this test catches any overread).
TEST_P(EveryCodec, SurvivesTruncatedAndCorruptedMessages) {
  auto codec = make(GetParam());
  ASSERT_TRUE(codec);
  const size_t count = 300;
  const float kGuard = 12345.0f;
  auto input = to_dtype(random_normal(count, 8), DType::kFloat32);
  Encoded encoded = encode_with_state(*codec, input, DType::kFloat32);
  const std::vector<uint8_t>& valid = encoded.message;
  std::vector<float> output(count + 16, kGuard);
  auto decode_into_guarded = [&](const std::vector<uint8_t>& bytes) {
    std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size() == 0 ? 1 : bytes.size()]);
    std::copy(bytes.begin(), bytes.end(), exact.get());
    ncclResult_t result = codec->decode(exact.get(), bytes.size(), output.data() + 8, count,
                                        DType::kFloat32, false, DecodeContext{});
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(output[i], kGuard) << "wrote before the output";
      EXPECT_EQ(output[count + 8 + i], kGuard) << "wrote past the output";
    }
    return result;
  };
  for (size_t length = 0; length < valid.size(); ++length) {
    std::vector<uint8_t> truncated(valid.begin(), valid.begin() + length);
    EXPECT_EQ(decode_into_guarded(truncated), ncclInvalidArgument) << "length " << length;
  }
  std::mt19937_64 random(99);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> corrupted = valid;
    int flips = 1 + static_cast<int>(random() % 4);
    for (int f = 0; f < flips; ++f) {
      size_t at = random() % corrupted.size();
      // Bias towards the header and the first payload bytes, where lengths and counts live.
      if (trial % 2 == 0) at = random() % std::min<size_t>(corrupted.size(), 64);
      corrupted[at] = static_cast<uint8_t>(random());
    }
    decode_into_guarded(corrupted);
  }
  // Extra bytes after a valid message are refused too: the header implies the exact size.
  std::vector<uint8_t> longer = valid;
  longer.push_back(0);
  EXPECT_EQ(decode_into_guarded(longer), ncclInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryCodec, ::testing::ValuesIn(codec_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace terse::testing
