#include "common/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace terse {
namespace {

thread_local int t_rank = -1;

LogLevel parse_level(const char* text) {
  if (text == nullptr) return LogLevel::kWarn;
  if (strcasecmp(text, "NONE") == 0) return LogLevel::kNone;
  if (strcasecmp(text, "VERSION") == 0) return LogLevel::kVersion;
  if (strcasecmp(text, "WARN") == 0) return LogLevel::kWarn;
  if (strcasecmp(text, "INFO") == 0) return LogLevel::kInfo;
  if (strcasecmp(text, "TRACE") == 0) return LogLevel::kTrace;
  fprintf(stderr,
          "terse: TERSE_DEBUG=%s is not one of NONE, VERSION, WARN, INFO, TRACE; using WARN\n",
          text);
  return LogLevel::kWarn;
}

// Expands %h (host) and %p (pid) in TERSE_DEBUG_FILE as NCCL_DEBUG_FILE does.
FILE* open_log_file() {
  const char* pattern = getenv("TERSE_DEBUG_FILE");
  if (pattern == nullptr || *pattern == '\0') return stderr;
  char host[256] = "unknown";
  gethostname(host, sizeof(host) - 1);
  std::string path;
  for (const char* c = pattern; *c != '\0'; ++c) {
    if (c[0] == '%' && c[1] == 'h') {
      path += host;
      ++c;
    } else if (c[0] == '%' && c[1] == 'p') {
      path += std::to_string(getpid());
      ++c;
    } else {
      path += *c;
    }
  }
  FILE* file = fopen(path.c_str(), "w");
  if (file == nullptr) {
    fprintf(stderr, "terse: cannot open TERSE_DEBUG_FILE=%s (%s); logging to stderr\n",
            path.c_str(), strerror(errno));
    return stderr;
  }
  setvbuf(file, nullptr, _IOLBF, 0);
  return file;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kVersion:
      return "VERSION";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kTrace:
      return "TRACE";
    default:
      return "";
  }
}

// Settings read from the environment on first use; reload_log_settings() reads them again.
struct LogSettings {
  std::mutex mutex;
  std::atomic<bool> loaded{false};
  std::atomic<LogLevel> level{LogLevel::kWarn};
  FILE* sink = stderr;
};

LogSettings& settings() {
  static LogSettings instance;
  return instance;
}

void load(LogSettings& s) {
  if (s.sink != stderr) fclose(s.sink);
  s.level.store(parse_level(getenv("TERSE_DEBUG")));
  s.sink = open_log_file();
  s.loaded.store(true, std::memory_order_release);
}

}  // namespace

LogLevel log_level() {
  LogSettings& s = settings();
  if (!s.loaded.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.loaded) load(s);
  }
  return s.level;
}

void reload_log_settings() {
  LogSettings& s = settings();
  std::lock_guard<std::mutex> lock(s.mutex);
  load(s);
}

void set_log_rank(int rank) {
  t_rank = rank;
}

void log(LogLevel level, const char* format, ...) {
  // Logging reports failures, out of memory among them: it must not throw (the first call sets
  // up the settings and the host name, and those allocate). A line that cannot be set up is
  // lost; the error itself is still recorded for ncclGetLastError.
  try {
    if (log_level() < level) return;
  } catch (...) {
    return;
  }
  static const char* host = [] {
    static char name[256] = "unknown";
    gethostname(name, sizeof(name) - 1);
    char* dot = strchr(name, '.');
    if (dot != nullptr) *dot = '\0';
    return name;
  }();
  char text[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  // One fprintf per line keeps lines from different threads whole.
  fprintf(settings().sink, "%s:%d:%ld [%d] TERSE %s %s\n", host, getpid(),
          static_cast<long>(syscall(SYS_gettid)), t_rank, level_name(level), text);
}

}  // namespace terse
