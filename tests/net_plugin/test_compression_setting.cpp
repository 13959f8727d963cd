// TERSE_NET_COMPRESS's rule alone: off never frames, lossless always, auto only where the link
// is slower than the encoder (measured once: far above 1 Mbit/s, far below 10 Pbit/s on any
// machine), and bad values refused by name.
#include <gtest/gtest.h>

#include <cstdlib>

#include "plugin/net/compression_setting.h"

namespace terse::net {
namespace {

TEST(CompressionSetting, AutoFramesOnlyBelowTheEncodersSpeed) {
  EXPECT_GT(encoder_bytes_per_second(), 0.0);
  EXPECT_TRUE(wants_framing(CompressMode::kAuto, 1));
  EXPECT_FALSE(wants_framing(CompressMode::kAuto, 1000000000));
  EXPECT_FALSE(wants_framing(CompressMode::kOff, 1));
  EXPECT_TRUE(wants_framing(CompressMode::kLossless, 1000000000));
}

TEST(CompressionSetting, ValuesAreParsedAndBadOnesRefused) {
  CompressMode mode = CompressMode::kOff;
  unsetenv("TERSE_NET_COMPRESS");
  ASSERT_EQ(compress_mode(&mode), ncclSuccess);
  EXPECT_EQ(mode, CompressMode::kAuto);
  setenv("TERSE_NET_COMPRESS", "lossless", 1);
  ASSERT_EQ(compress_mode(&mode), ncclSuccess);
  EXPECT_EQ(mode, CompressMode::kLossless);
  setenv("TERSE_NET_COMPRESS", "zip", 1);
  EXPECT_EQ(compress_mode(&mode), ncclInvalidArgument);
  unsetenv("TERSE_NET_COMPRESS");
  int level = 0;
  setenv("TERSE_NET_ZSTD_LEVEL", "12", 1);
  EXPECT_EQ(zstd_level(&level), ncclInvalidArgument);
  setenv("TERSE_NET_ZSTD_LEVEL", "-3", 1);
  ASSERT_EQ(zstd_level(&level), ncclSuccess);
  EXPECT_EQ(level, -3);
  unsetenv("TERSE_NET_ZSTD_LEVEL");
}

}  // namespace
}  // namespace terse::net
