// Fuzz target: codec specs as users write them, "name[:k=v,...]" (create_codec, which
// parse_codec_spec and each codec's factory serve; a policy's `codec:`, the C API's per-call
// override) and TERSE_CODEC's "spec[;fallback=spec]" (Policy::from_codec_spec). The input bytes
// are the text.
//
// Any text must be refused with ncclInvalidArgument and a reason, or make a codec that works:
// a factory that accepts parameters its codec cannot run with (a size that overflows, a block
// the packing cannot hold) only fails later, inside a collective. So an accepted codec must
// rebuild from its canonical spec() into the same codec, and must encode and decode a small
// tensor, non-finite elements included, within max_encoded_bytes.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec_registry.h"
#include "collectives/compressed/policy/policy.h"
#include "common/result.h"
#include "fuzz_support.h"

namespace terse::fuzz {
namespace {

// An odd count that spans several blocks of the smallest block size and leaves a partial one.
constexpr size_t kCount = 301;
constexpr size_t kNaNAt = 3;
constexpr size_t kInfAt = 150;

void require_refusal_or_success(ncclResult_t result, const char* what, const std::string& text) {
  TERSE_FUZZ_REQUIRE(result == ncclSuccess || result == ncclInvalidArgument,
                     "%s('%s') returned %d: %s", what, text.c_str(), static_cast<int>(result),
                     last_error());
  if (result != ncclSuccess) {
    TERSE_FUZZ_REQUIRE(last_error()[0] != '\0', "%s('%s'): a refusal without a reason", what,
                       text.c_str());
  }
}

void require_working_codec(Codec& codec) {
  const std::string spec = codec.spec();
  std::unique_ptr<Codec> again;
  TERSE_FUZZ_REQUIRE(create_codec(spec, &again) == ncclSuccess,
                     "canonical spec '%s' does not build: %s", spec.c_str(), last_error());
  TERSE_FUZZ_REQUIRE(again->spec() == spec && again->id() == codec.id(),
                     "canonical spec '%s' builds '%s'", spec.c_str(), again->spec().c_str());

  std::vector<float> input(kCount);
  for (size_t i = 0; i < kCount; ++i) input[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  input[kNaNAt] = NAN;
  input[kInfAt] = INFINITY;
  std::unique_ptr<CodecState> state = codec.make_state(kCount, DType::kFloat32, MatrixShape{});
  EncodeContext context;
  context.seed = 7;
  context.state = state.get();
  const size_t capacity = codec.max_encoded_bytes(kCount, DType::kFloat32);
  std::unique_ptr<uint8_t[]> message(new uint8_t[capacity]);
  size_t message_bytes = 0;
  TERSE_FUZZ_REQUIRE(codec.encode(input.data(), kCount, DType::kFloat32, context, message.get(),
                                  capacity, &message_bytes) == ncclSuccess,
                     "%s: encode of %zu elements failed: %s", spec.c_str(), kCount, last_error());
  TERSE_FUZZ_REQUIRE(message_bytes <= capacity, "%s: %zu bytes written, capacity %zu", spec.c_str(),
                     message_bytes, capacity);
  std::vector<float> output(kCount);
  TERSE_FUZZ_REQUIRE(codec.decode(message.get(), message_bytes, output.data(), kCount,
                                  DType::kFloat32, false, DecodeContext{}) == ncclSuccess,
                     "%s: decode of its own message failed: %s", spec.c_str(), last_error());
  TERSE_FUZZ_REQUIRE(std::isnan(output[kNaNAt]) && output[kInfAt] == INFINITY,
                     "%s: non-finite elements did not come back (%g, %g)", spec.c_str(),
                     output[kNaNAt], output[kInfAt]);
}

}  // namespace
}  // namespace terse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace terse;
  fuzz::quiet_logs();
  const std::string text(reinterpret_cast<const char*>(data), size);

  std::unique_ptr<Codec> codec;
  clear_last_error();
  ncclResult_t result = create_codec(text, &codec);
  fuzz::require_refusal_or_success(result, "create_codec", text);
  if (result == ncclSuccess) fuzz::require_working_codec(*codec);

  Policy policy;
  clear_last_error();
  result = Policy::from_codec_spec(text, &policy);
  fuzz::require_refusal_or_success(result, "Policy::from_codec_spec", text);
  if (result == ncclSuccess) {
    TERSE_FUZZ_REQUIRE(policy.rules().size() == 1, "'%s' made %zu rules", text.c_str(),
                       policy.rules().size());
  }
  return 0;
}
