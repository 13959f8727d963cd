#include "common/result.h"

#include <cstdarg>
#include <cstdio>

#include "common/log.h"

namespace terse {
namespace {
thread_local std::string t_last_error;
}

ncclResult_t fail(ncclResult_t code, const char* format, ...) {
  char text[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  t_last_error = text;
  log(LogLevel::kWarn, "%s: %s", result_string(code), text);
  return code;
}

const char* last_error() {
  return t_last_error.c_str();
}

void clear_last_error() {
  t_last_error.clear();
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
