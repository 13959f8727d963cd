#include "plugin/net/compression_setting.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/counter_rng.h"
#include "common/env.h"
#include "common/float_convert.h"
#include "plugin/net/lossless_codec.h"
#include "plugin/net/net_log.h"

namespace terse::net {

ncclResult_t compress_mode(CompressMode* mode) {
  std::string text = env_string("TERSE_NET_COMPRESS", "auto");
  if (text == "off") {
    *mode = CompressMode::kOff;
  } else if (text == "lossless") {
    *mode = CompressMode::kLossless;
  } else if (text == "auto") {
    *mode = CompressMode::kAuto;
  } else {
    return NET_FAIL(ncclInvalidArgument, "TERSE_NET_COMPRESS=%s is not 'off', 'lossless' or 'auto'",
                    text.c_str());
  }
  return ncclSuccess;
}

ncclResult_t zstd_level(int* level) {
  int64_t value = 1;
  if (env_int("TERSE_NET_ZSTD_LEVEL", 1, &value) != ncclSuccess || value < -7 || value > 9) {
    return NET_FAIL(ncclInvalidArgument, "TERSE_NET_ZSTD_LEVEL=%s is not a level from -7 to 9",
                    env_string("TERSE_NET_ZSTD_LEVEL", "").c_str());
  }
  *level = static_cast<int>(value);
  return ncclSuccess;
}

double encoder_bytes_per_second() {
  static std::once_flag once;
  static double speed = 0;
  std::call_once(once, [] {
    // 1 MiB of bf16 values shaped like gradients (normal, scale 1e-3), from a fixed seed.
    constexpr size_t kValues = 512 * 1024;
    constexpr uint64_t kProbeSeed = 1;
    std::vector<uint16_t> values(kValues);
    for (size_t i = 0; i < kValues; ++i) {
      double u1 = ((counter_random(kProbeSeed, 2 * i) >> 11) + 1) * 0x1.0p-53;
      double u2 = (counter_random(kProbeSeed, 2 * i + 1) >> 11) * 0x1.0p-53;
      double normal = std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      values[i] = float_to_bf16(static_cast<float>(1e-3 * normal));
    }
    int level = 1;
    if (zstd_level(&level) != ncclSuccess) level = 1;
    LosslessCodec codec(level);
    std::vector<uint8_t> out(LosslessCodec::bound(kValues * 2));
    codec.encode(values.data(), kValues * 2, out.data(), out.size());  // warm-up
    auto start = std::chrono::steady_clock::now();
    codec.encode(values.data(), kValues * 2, out.data(), out.size());
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    speed = kValues * 2 / std::max(seconds, 1e-9);
  });
  return speed;
}

bool wants_framing(CompressMode mode, int speed_mbps) {
  switch (mode) {
    case CompressMode::kOff:
      return false;
    case CompressMode::kLossless:
      return true;
    case CompressMode::kAuto:
      return speed_mbps * 1e6 / 8 < encoder_bytes_per_second();
  }
  return false;
}

const char* compress_mode_name(CompressMode mode) {
  switch (mode) {
    case CompressMode::kOff:
      return "off";
    case CompressMode::kLossless:
      return "lossless";
    case CompressMode::kAuto:
      return "auto";
  }
  return "?";
}

}  // namespace terse::net
