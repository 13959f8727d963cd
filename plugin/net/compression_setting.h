// TERSE_NET_COMPRESS=off|lossless|auto (default auto): whether a receive comm asks its sender for
// framed messages that may carry lossless_codec.h's encoding. auto asks only when the device's
// link is slower than the encoder, measured once per process on gradient-like bf16 bytes:
// compressing then shortens the wire time by more than it costs. The sender still sends a
// message as it is when encoding would not make it smaller (or it is under kMinEncodedBytes).
#pragma once

#include <cstddef>

#include "plugin/net/net_abi.h"

namespace terse::net {

enum class CompressMode { kOff, kLossless, kAuto };

// Below this a message goes as it is: zstd's frame and the time to start it outweigh the gain.
constexpr size_t kMinEncodedBytes = 4096;

// TERSE_NET_COMPRESS, read per call (each listen and connect); the error names the value.
ncclResult_t compress_mode(CompressMode* mode);
// TERSE_NET_ZSTD_LEVEL (default 1, -7 to 9).
ncclResult_t zstd_level(int* level);
// The encoder's speed in bytes per second, measured on first use.
double encoder_bytes_per_second();
// Whether a receive comm on a link of `speed_mbps` asks for framed messages.
bool wants_framing(CompressMode mode, int speed_mbps);
const char* compress_mode_name(CompressMode mode);

}  // namespace terse::net
