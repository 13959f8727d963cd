#include "plugin/net/net_log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

#include "common/log.h"
#include "common/result.h"

namespace terse::net {
namespace {

std::atomic<netabi::Logger> g_logger{nullptr};

void emit(netabi::LogLevel level, const char* file, int line, const char* format, va_list args) {
  char text[1024];
  vsnprintf(text, sizeof(text), format, args);
  netabi::Logger logger = g_logger.load();
  if (logger != nullptr) {
    logger(level, netabi::kLogSubsystemNet, file, line, "NET/terse: %s", text);
  } else if (level == netabi::kLogWarn) {
    TERSE_WARN("NET/terse: %s", text);
  } else {
    TERSE_INFO("NET/terse: %s", text);
  }
}

}  // namespace

void set_logger(netabi::Logger logger) {
  g_logger.store(logger);
}

void log_warn(const char* file, int line, const char* format, ...) {
  va_list args;
  va_start(args, format);
  emit(netabi::kLogWarn, file, line, format, args);
  va_end(args);
}

void log_info(const char* file, int line, const char* format, ...) {
  va_list args;
  va_start(args, format);
  emit(netabi::kLogInfo, file, line, format, args);
  va_end(args);
}

ncclResult_t net_fail(ncclResult_t code, const char* file, int line, const char* format, ...) {
  va_list args;
  va_start(args, format);
  emit(netabi::kLogWarn, file, line, format, args);
  va_end(args);
  return code;
}

}  // namespace terse::net
