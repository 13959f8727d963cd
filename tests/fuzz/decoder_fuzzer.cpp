#include "decoder_fuzzer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec_registry.h"
#include "codecs/wire_format.h"
#include "common/result.h"
#include "decoder_input.h"
#include "fuzz_support.h"

namespace terse::fuzz {
namespace {

// The byte every output element starts as: with accumulate the decode adds to it, and a
// refused message must leave every byte of it in place.
constexpr uint8_t kOutputFill = 0x3c;

// The codec's variants, built once: creating a codec per input would cost more than decoding.
const std::vector<std::unique_ptr<Codec>>& codecs_for(const char* codec_name) {
  static const std::string name = codec_name;
  static const std::vector<std::unique_ptr<Codec>> codecs = [] {
    std::vector<std::unique_ptr<Codec>> made;
    for (const std::string& spec : decoder_variants(name)) {
      std::unique_ptr<Codec> codec;
      TERSE_FUZZ_REQUIRE(create_codec(spec, &codec) == ncclSuccess, "%s: %s", spec.c_str(),
                         last_error());
      made.push_back(std::move(codec));
    }
    return made;
  }();
  TERSE_FUZZ_REQUIRE(name == codec_name, "one target decodes one codec (%s, then %s)", name.c_str(),
                     codec_name);
  return codecs;
}

}  // namespace

int fuzz_decoder(const char* codec_name, const uint8_t* data, size_t size) {
  quiet_logs();
  const std::vector<std::unique_ptr<Codec>>& codecs = codecs_for(codec_name);
  if (size < kDecoderPrefixBytes) return -1;
  const DecoderPrefix prefix = read_decoder_prefix(data);
  const Codec& codec = *codecs[prefix.variant % codecs.size()];
  const uint8_t* wire = data + kDecoderPrefixBytes;
  const size_t wire_bytes = size - kDecoderPrefixBytes;

  size_t count = std::min<size_t>(prefix.count, kMaxFuzzCount);
  if (!prefix.count_from_prefix && wire_bytes >= kWireHeaderBytes) {
    uint64_t stated = 0;
    memcpy(&stated, wire + offsetof(WireHeader, count), sizeof(stated));
    if (stated <= kMaxFuzzCount) count = static_cast<size_t>(stated);
  }

  // The message in a heap block of exactly its size, as a receive buffer holds it: a read past
  // its end is an AddressSanitizer report. new[] has malloc's alignment, as transport buffers
  // do (the format aligns payloads relative to the header, not to the fuzzer's prefix).
  std::unique_ptr<uint8_t[]> message(new uint8_t[wire_bytes]);
  if (wire_bytes > 0) memcpy(message.get(), wire, wire_bytes);
  const size_t output_bytes = count * dtype_size(prefix.dtype);
  std::unique_ptr<uint8_t[]> output(new uint8_t[output_bytes]);
  memset(output.get(), kOutputFill, output_bytes);

  WireHeader header;
  const ncclResult_t header_result =
      read_header(message.get(), wire_bytes, codec.id(), count, DecodeContext{}, &header);
  TERSE_FUZZ_REQUIRE(header_result == ncclSuccess || header_result == ncclInvalidArgument,
                     "read_header returned %d: %s", static_cast<int>(header_result), last_error());
  if (header_result == ncclSuccess) {
    TERSE_FUZZ_REQUIRE((header.flags & kWireEscapesFlag) == 0,
                       "read_header shows the escape flag to the codec");
  }

  clear_last_error();
  const ncclResult_t result = codec.decode(message.get(), wire_bytes, output.get(), count,
                                           prefix.dtype, prefix.accumulate, DecodeContext{});
  TERSE_FUZZ_REQUIRE(result == ncclSuccess || result == ncclInvalidArgument,
                     "%s: decode returned %d: %s", codec.spec().c_str(), static_cast<int>(result),
                     last_error());
  if (result != ncclSuccess) {
    TERSE_FUZZ_REQUIRE(last_error()[0] != '\0', "%s: a refusal without a reason",
                       codec.spec().c_str());
    // Validation comes before any write (codec.h): a collective decodes a peer's message into
    // its result with accumulate, so a refusal after a partial add would corrupt the result.
    for (size_t i = 0; i < output_bytes; ++i) {
      TERSE_FUZZ_REQUIRE(output[i] == kOutputFill, "%s: refused (%s) after writing byte %zu",
                         codec.spec().c_str(), last_error(), i);
    }
  }
  TERSE_FUZZ_REQUIRE(header_result == ncclSuccess || result != ncclSuccess,
                     "%s: decode accepted a message whose header read_header refuses",
                     codec.spec().c_str());
  return 0;
}

}  // namespace terse::fuzz
