// Fuzz target: the net plugin's lossless decoder (plugin/net/lossless_codec.h), which reads the
// payload of a framed message off the network. Input: a 4-byte little-endian raw size (taken
// modulo 1 MiB + 1), then the encoded bytes.
//
// Any bytes: ncclSuccess or ncclRemoteError, nothing written past the raw size (ASan sees the
// exact-size buffer), and a successful decode's output encodes and decodes back to itself.
#include <cstring>
#include <vector>

#include "common/result.h"
#include "fuzz_support.h"
#include "plugin/net/lossless_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace terse::net;
  terse::fuzz::quiet_logs();
  if (size < 4) return 0;
  uint32_t raw = 0;
  std::memcpy(&raw, data, sizeof(raw));
  const size_t raw_bytes = raw % ((size_t{1} << 20) + 1);
  static LosslessCodec codec(1);
  std::vector<uint8_t> out(raw_bytes);
  const ncclResult_t result = codec.decode(data + 4, size - 4, out.data(), raw_bytes);
  TERSE_FUZZ_REQUIRE(result == ncclSuccess || result == ncclRemoteError,
                     "decode returned %d for %zu bytes", static_cast<int>(result), size - 4);
  if (result != ncclSuccess) return 0;
  std::vector<uint8_t> encoded(LosslessCodec::bound(raw_bytes));
  const size_t encoded_bytes = codec.encode(out.data(), raw_bytes, encoded.data(), encoded.size());
  if (encoded_bytes == 0) return 0;  // zstd may refuse; the plugin then sends the bytes as they are
  std::vector<uint8_t> back(raw_bytes);
  TERSE_FUZZ_REQUIRE(
      codec.decode(encoded.data(), encoded_bytes, back.data(), raw_bytes) == ncclSuccess &&
          back == out,
      "%zu decoded bytes do not survive their own encoding", raw_bytes);
  return 0;
}
