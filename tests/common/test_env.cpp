#include <gtest/gtest.h>

#include <cstdlib>

#include "common/env.h"
#include "common/result.h"

namespace terse {
namespace {

TEST(ParseBytes, AcceptsPlainAndSuffixedCounts) {
  uint64_t value = 0;
  EXPECT_TRUE(parse_bytes("0", &value));
  EXPECT_EQ(value, 0u);
  EXPECT_TRUE(parse_bytes("4096", &value));
  EXPECT_EQ(value, 4096u);
  EXPECT_TRUE(parse_bytes("64K", &value));
  EXPECT_EQ(value, 64u << 10);
  EXPECT_TRUE(parse_bytes("2m", &value));
  EXPECT_EQ(value, 2u << 20);
  EXPECT_TRUE(parse_bytes("1G", &value));
  EXPECT_EQ(value, 1ull << 30);
}

TEST(ParseBytes, RefusesGarbageNegativeAndOverflow) {
  uint64_t value = 7;
  EXPECT_FALSE(parse_bytes("", &value));
  EXPECT_FALSE(parse_bytes("-1", &value));
  EXPECT_FALSE(parse_bytes("12X", &value));
  EXPECT_FALSE(parse_bytes("1MB", &value));
  EXPECT_FALSE(parse_bytes("99999999999999999999G", &value));
  EXPECT_FALSE(parse_bytes("17179869184G", &value));
  EXPECT_EQ(value, 7u);
}

TEST(EnvBytes, NamesTheVariableInTheError) {
  setenv("TERSE_TEST_BYTES", "lots", 1);
  uint64_t value = 0;
  EXPECT_EQ(env_bytes("TERSE_TEST_BYTES", 5, &value), Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("TERSE_TEST_BYTES=lots"), std::string::npos);
  unsetenv("TERSE_TEST_BYTES");
  EXPECT_EQ(env_bytes("TERSE_TEST_BYTES", 5, &value), Result::kSuccess);
  EXPECT_EQ(value, 5u);
}

TEST(EnvInt, ParsesAndRefuses) {
  int64_t value = 0;
  setenv("TERSE_TEST_INT", "-42", 1);
  EXPECT_EQ(env_int("TERSE_TEST_INT", 0, &value), Result::kSuccess);
  EXPECT_EQ(value, -42);
  setenv("TERSE_TEST_INT", "4x", 1);
  EXPECT_EQ(env_int("TERSE_TEST_INT", 0, &value), Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("TERSE_TEST_INT"), std::string::npos);
  unsetenv("TERSE_TEST_INT");
}

TEST(EnvString, FallsBackWhenUnsetOrEmpty) {
  unsetenv("TERSE_TEST_STRING");
  EXPECT_EQ(env_string("TERSE_TEST_STRING", "x"), "x");
  setenv("TERSE_TEST_STRING", "", 1);
  EXPECT_EQ(env_string("TERSE_TEST_STRING", "x"), "x");
  setenv("TERSE_TEST_STRING", "y", 1);
  EXPECT_EQ(env_string("TERSE_TEST_STRING", "x"), "y");
  unsetenv("TERSE_TEST_STRING");
}

}  // namespace
}  // namespace terse
