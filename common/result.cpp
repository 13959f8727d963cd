#include "common/result.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "common/log.h"

namespace terse {
namespace {
// A fixed buffer, not a std::string: recording an error must never allocate, because "out of
// memory" is one of the errors recorded (exception_guard.h).
constexpr size_t kLastErrorBytes = 1024;
thread_local char t_last_error[kLastErrorBytes];
}  // namespace

ncclResult_t fail(ncclResult_t code, const char* format, ...) {
  char text[kLastErrorBytes];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  memcpy(t_last_error, text, sizeof(text));
  log(LogLevel::kWarn, "%s: %s", result_string(code), text);
  return code;
}

const char* last_error() {
  return t_last_error;
}

void clear_last_error() {
  t_last_error[0] = '\0';
}

const char* result_string(ncclResult_t code) {
  switch (code) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

}  // namespace terse
