// The encode gate's rule alone (encode_gate.h): an encode pays when it saves at least 3%, and
// after 8 encodes in a row that did not, only every 32nd eligible message is tried.
#include <gtest/gtest.h>

#include <cstdint>

#include "plugin/net/encode_gate.h"

namespace terse::net {
namespace {

TEST(EncodeGate, PaysFromThreePercentSaved) {
  EXPECT_TRUE(encode_paid(97, 100));
  EXPECT_FALSE(encode_paid(98, 100));
  EXPECT_TRUE(encode_paid(1, 100));
  EXPECT_FALSE(encode_paid(0, 100));  // no encoding came out
  EXPECT_FALSE(encode_paid(120, 100));
}

TEST(EncodeGate, FutileAfterEightInARow) {
  EXPECT_FALSE(encodes_futile(0));
  EXPECT_FALSE(encodes_futile(7));
  EXPECT_TRUE(encodes_futile(8));
  EXPECT_TRUE(encodes_futile(100));
}

TEST(EncodeGate, RetriesEveryThirtySecond) {
  int retried = 0;
  for (uint64_t k = 1; k <= 320; ++k) retried += retry_encode(k) ? 1 : 0;
  EXPECT_EQ(retried, 10);
  EXPECT_FALSE(retry_encode(31));
  EXPECT_TRUE(retry_encode(32));
  EXPECT_FALSE(retry_encode(33));
}

}  // namespace
}  // namespace terse::net
