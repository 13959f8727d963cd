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

// Logs at `level` into a fresh temporary TERSE_DEBUG_FILE while it lives; text() stops logging
// there (closing the file) and returns what was written. The file goes with the object.
class LogToTemporaryFile {
 public:
  explicit LogToTemporaryFile(const char* level) {
    const int fd = mkstemp(path_);
    made_ = fd >= 0;
    if (made_) close(fd);
    setenv("TERSE_DEBUG", level, 1);
    setenv("TERSE_DEBUG_FILE", path_, 1);
    reload_log_settings();
  }
  ~LogToTemporaryFile() {
    stop();
    if (made_) unlink(path_);
  }
  LogToTemporaryFile(const LogToTemporaryFile&) = delete;
  LogToTemporaryFile& operator=(const LogToTemporaryFile&) = delete;

  bool made() const { return made_; }
  std::string text() {
    stop();
    std::ifstream file(path_);
    std::stringstream stream;
    stream << file.rdbuf();
    return stream.str();
  }

 private:
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    unsetenv("TERSE_DEBUG");
    unsetenv("TERSE_DEBUG_FILE");
    reload_log_settings();  // closes the file
  }

  char path_[32] = "/tmp/terse_log_testXXXXXX";
  bool made_ = false;
  bool stopped_ = false;
};

TEST(Log, WritesNcclStyleLinesAtTheChosenLevelToTheDebugFile) {
  LogToTemporaryFile log("INFO");
  ASSERT_TRUE(log.made());
  set_log_rank(3);
  TERSE_INFO("hello %d", 42);
  TERSE_TRACE("not shown at INFO");
  EXPECT_EQ(log_level(), LogLevel::kInfo);
  const std::string text = log.text();
  set_log_rank(-1);
  // host:pid:tid [rank] TERSE INFO message
  EXPECT_NE(text.find(":" + std::to_string(getpid()) + ":"), std::string::npos) << text;
  EXPECT_NE(text.find("[3] TERSE INFO hello 42\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("not shown"), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
}

// An error passed on again is recorded but not logged a second time.
TEST(Log, RestoringAnErrorRecordsItWithoutLoggingIt) {
  LogToTemporaryFile log("WARN");
  ASSERT_TRUE(log.made());
  fail(Result::kInvalidArgument, "first refusal");
  fail(Result::kInvalidArgument, "second refusal");
  EXPECT_EQ(restore_error(Result::kInvalidUsage, "first refusal"), Result::kInvalidUsage);
  EXPECT_STREQ(last_error(), "first refusal");
  const std::string text = log.text();
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
