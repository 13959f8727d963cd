#include "common/result.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ostream>

#include "common/log.h"

namespace terse {
namespace {
// A fixed buffer, not a std::string: recording an error must never allocate, because "out of
// memory" is one of the errors recorded (exception_guard.h).
constexpr size_t kLastErrorBytes = 1024;
thread_local char t_last_error[kLastErrorBytes];
}  // namespace

Result fail(Result code, const char* format, ...) {
  char text[kLastErrorBytes];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  memcpy(t_last_error, text, sizeof(text));
  log(LogLevel::kWarn, "%s: %s", result_string(code), text);
  return code;
}

Result restore_error(Result code, const char* message) {
  snprintf(t_last_error, sizeof(t_last_error), "%s", message);
  return code;
}

const char* last_error() {
  return t_last_error;
}

void clear_last_error() {
  t_last_error[0] = '\0';
}

const char* result_string(Result code) {
  // NCCL's wording, by NCCL's number.
  static const char* const kNames[] = {
      "no error",
      "unhandled cuda error",
      "unhandled system error",
      "internal error",
      "invalid argument",
      "invalid usage",
      "remote process exited or there was a network error",
      "NCCL operation in progress",
  };
  const int number = code.code();
  if (number < 0 || number >= static_cast<int>(sizeof(kNames) / sizeof(kNames[0]))) {
    return "unknown result code";
  }
  return kNames[number];
}

void PrintTo(Result code, std::ostream* out) {
  *out << result_string(code) << " (" << code.code() << ")";
}

}  // namespace terse
