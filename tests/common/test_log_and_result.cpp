#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/log.h"
#include "common/result.h"

namespace terse {
namespace {

TEST(Result, FailRecordsTheSentenceAndReturnsTheCode) {
  clear_last_error();
  EXPECT_STREQ(last_error(), "");
  EXPECT_EQ(fail(Result::kInvalidArgument, "count %d is negative", -3), Result::kInvalidArgument);
  EXPECT_STREQ(last_error(), "count -3 is negative");
  EXPECT_STREQ(result_string(Result::kInvalidArgument), "invalid argument");
  EXPECT_STREQ(result_string(Result::kRemoteError),
               "remote process exited or there was a network error");
}

TEST(Result, LastErrorIsPerThread) {
  fail(Result::kInternalError, "main thread");
  std::string seen;
  std::thread other([&] { seen = last_error(); });
  other.join();
  EXPECT_EQ(seen, "");
  EXPECT_STREQ(last_error(), "main thread");
}

TEST(Result, CheckMacroPropagatesFailures) {
  auto inner = [](bool ok) { return ok ? Result::kSuccess : Result::kSystemError; };
  auto outer = [&](bool ok) -> Result {
    TERSE_CHECK(inner(ok));
    return Result::kInProgress;
  };
  EXPECT_EQ(outer(true), Result::kInProgress);
  EXPECT_EQ(outer(false), Result::kSystemError);
}

TEST(Log, WritesNcclStyleLinesAtTheChosenLevelToTheDebugFile) {
  char path[] = "/tmp/terse_log_testXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  setenv("TERSE_DEBUG", "INFO", 1);
  setenv("TERSE_DEBUG_FILE", path, 1);
  reload_log_settings();
  set_log_rank(3);
  TERSE_INFO("hello %d", 42);
  TERSE_TRACE("not shown at INFO");
  EXPECT_EQ(log_level(), LogLevel::kInfo);
  unsetenv("TERSE_DEBUG");
  unsetenv("TERSE_DEBUG_FILE");
  reload_log_settings();  // closes the file
  set_log_rank(-1);
  std::ifstream file(path);
  std::stringstream stream;
  stream << file.rdbuf();
  std::string text = stream.str();
  unlink(path);
  // host:pid:tid [rank] TERSE INFO message
  EXPECT_NE(text.find(":" + std::to_string(getpid()) + ":"), std::string::npos) << text;
  EXPECT_NE(text.find("[3] TERSE INFO hello 42\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("not shown"), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
}

// An error passed on again is recorded but not logged a second time.
TEST(Log, RestoringAnErrorRecordsItWithoutLoggingIt) {
  char path[] = "/tmp/terse_log_testXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  setenv("TERSE_DEBUG", "WARN", 1);
  setenv("TERSE_DEBUG_FILE", path, 1);
  reload_log_settings();
  fail(Result::kInvalidArgument, "first refusal");
  fail(Result::kInvalidArgument, "second refusal");
  EXPECT_EQ(restore_error(Result::kInvalidUsage, "first refusal"), Result::kInvalidUsage);
  EXPECT_STREQ(last_error(), "first refusal");
  unsetenv("TERSE_DEBUG");
  unsetenv("TERSE_DEBUG_FILE");
  reload_log_settings();  // closes the file
  std::ifstream file(path);
  std::stringstream stream;
  stream << file.rdbuf();
  const std::string text = stream.str();
  unlink(path);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
}

TEST(Log, UnknownLevelFallsBackToWarn) {
  setenv("TERSE_DEBUG", "LOUD", 1);
  reload_log_settings();
  EXPECT_EQ(log_level(), LogLevel::kWarn);
  unsetenv("TERSE_DEBUG");
  reload_log_settings();
}

}  // namespace
}  // namespace terse
