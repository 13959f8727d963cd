#include "plugin/net/lossless_codec.h"

#include <zstd.h>

#include <cstring>

#include "plugin/net/net_log.h"

namespace terse::net {
namespace {

constexpr size_t kElementBytes = 4;

}  // namespace

void split_planes(const uint8_t* in, size_t bytes, uint8_t* out) {
  size_t elements = bytes / kElementBytes;
  uint8_t* plane0 = out;
  uint8_t* plane1 = out + elements;
  uint8_t* plane2 = out + 2 * elements;
  uint8_t* plane3 = out + 3 * elements;
  for (size_t i = 0; i < elements; ++i) {
    const uint8_t* element = in + kElementBytes * i;
    plane0[i] = element[0];
    plane1[i] = element[1];
    plane2[i] = element[2];
    plane3[i] = element[3];
  }
  size_t done = elements * kElementBytes;
  memcpy(out + done, in + done, bytes - done);
}

void join_planes(const uint8_t* in, size_t bytes, uint8_t* out) {
  size_t elements = bytes / kElementBytes;
  const uint8_t* plane0 = in;
  const uint8_t* plane1 = in + elements;
  const uint8_t* plane2 = in + 2 * elements;
  const uint8_t* plane3 = in + 3 * elements;
  for (size_t i = 0; i < elements; ++i) {
    uint8_t* element = out + kElementBytes * i;
    element[0] = plane0[i];
    element[1] = plane1[i];
    element[2] = plane2[i];
    element[3] = plane3[i];
  }
  size_t done = elements * kElementBytes;
  memcpy(out + done, in + done, bytes - done);
}

LosslessCodec::LosslessCodec(int level)
    : level_(level), encoder_(ZSTD_createCCtx()), decoder_(ZSTD_createDCtx()) {}

LosslessCodec::~LosslessCodec() {
  ZSTD_freeCCtx(encoder_);
  ZSTD_freeDCtx(decoder_);
}

size_t LosslessCodec::bound(size_t bytes) {
  return ZSTD_compressBound(bytes);
}

size_t LosslessCodec::encode(const void* in, size_t bytes, void* out, size_t capacity) {
  if (encoder_ == nullptr) return 0;
  planes_.resize(bytes);
  split_planes(static_cast<const uint8_t*>(in), bytes, planes_.data());
  size_t encoded = ZSTD_compressCCtx(encoder_, out, capacity, planes_.data(), bytes, level_);
  return ZSTD_isError(encoded) ? 0 : encoded;
}

ncclResult_t LosslessCodec::decode(const void* in, size_t bytes, void* out, size_t raw_bytes) {
  if (decoder_ == nullptr) return NET_FAIL(ncclSystemError, "zstd could not make a decoder");
  unsigned long long content = ZSTD_getFrameContentSize(in, bytes);
  if (content != raw_bytes) {
    return NET_FAIL(ncclRemoteError,
                    "a compressed message of %zu bytes does not announce the %zu bytes its header "
                    "says: corrupt or not a terse message",
                    bytes, raw_bytes);
  }
  planes_.resize(raw_bytes);
  size_t decoded = ZSTD_decompressDCtx(decoder_, planes_.data(), raw_bytes, in, bytes);
  if (ZSTD_isError(decoded) || decoded != raw_bytes) {
    return NET_FAIL(ncclRemoteError, "a compressed message of %zu bytes does not decode to %zu: %s",
                    bytes, raw_bytes, ZSTD_isError(decoded) ? ZSTD_getErrorName(decoded) : "short");
  }
  join_planes(planes_.data(), raw_bytes, static_cast<uint8_t*>(out));
  return ncclSuccess;
}

}  // namespace terse::net
