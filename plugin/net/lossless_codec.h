// Lossless coding of the bytes NCCL sends: a byte-plane split, then zstd. NCCL's buffers are
// opaque to a net plugin (partial sums, fp8, indices, anything), so only an exact coding fits;
// for float data the split helps because the bytes holding sign and exponent repeat a few
// values while the low mantissa bytes look random: gathered into planes, the former compress
// well and the latter cost little. The split uses a 4-byte element: fp32 lands one plane per
// byte position, and bf16/fp16 put their exponent bytes in planes 1 and 3. A tail shorter than
// one element goes after the planes unchanged.
//
// Encoded form: one zstd frame of the planes (its content size is the raw size, so decode
// checks that the frame yields exactly the bytes expected).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "plugin/net/net_abi.h"

struct ZSTD_CCtx_s;
struct ZSTD_DCtx_s;

namespace terse::net {

class LosslessCodec {
 public:
  // zstd `level` (1 by default: TERSE_NET_ZSTD_LEVEL; negative levels are faster, weaker).
  explicit LosslessCodec(int level);
  ~LosslessCodec();
  LosslessCodec(const LosslessCodec&) = delete;
  LosslessCodec& operator=(const LosslessCodec&) = delete;

  // The most bytes encode() may write for `bytes` of input.
  static size_t bound(size_t bytes);

  // Encodes `bytes` at `in` into `out` (room for bound(bytes)); returns the encoded size, or 0
  // when zstd fails (the caller then sends the bytes as they are).
  size_t encode(const void* in, size_t bytes, void* out, size_t capacity);

  // Decodes `bytes` at `in` into exactly `raw_bytes` at `out`. ncclRemoteError when the input is
  // not an encoding of that many bytes (whatever arrives, nothing is written past `raw_bytes`).
  ncclResult_t decode(const void* in, size_t bytes, void* out, size_t raw_bytes);

 private:
  int level_;
  ZSTD_CCtx_s* encoder_;
  ZSTD_DCtx_s* decoder_;
  std::vector<uint8_t> planes_;
};

// Splits `bytes` at `in` into byte planes at `out` (same size), and back.
void split_planes(const uint8_t* in, size_t bytes, uint8_t* out);
void join_planes(const uint8_t* in, size_t bytes, uint8_t* out);

}  // namespace terse::net
