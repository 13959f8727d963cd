// TERSE_DEBUG logging in NCCL's line format: "host:pid:tid [rank] TERSE LEVEL message", to stderr.
// TERSE_DEBUG=VERSION|WARN|INFO|TRACE (default WARN); TERSE_DEBUG_FILE=path.%h.%p redirects.
#pragma once

namespace terse {

enum class LogLevel : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

// The level chosen by TERSE_DEBUG, read once.
LogLevel log_level();

// Reads TERSE_DEBUG and TERSE_DEBUG_FILE again (they are otherwise read once, on first use).
// Not to be called while other threads log: it closes the previous file.
void reload_log_settings();

// Sets the rank shown in brackets for this thread's lines (-1 hides it until a comm exists).
void set_log_rank(int rank);

void log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace terse

#define TERSE_INFO(...)                                     \
  do {                                                      \
    if (::terse::log_level() >= ::terse::LogLevel::kInfo) { \
      ::terse::log(::terse::LogLevel::kInfo, __VA_ARGS__);  \
    }                                                       \
  } while (0)
#define TERSE_TRACE(...)                                     \
  do {                                                       \
    if (::terse::log_level() >= ::terse::LogLevel::kTrace) { \
      ::terse::log(::terse::LogLevel::kTrace, __VA_ARGS__);  \
    }                                                        \
  } while (0)
#define TERSE_WARN(...) ::terse::log(::terse::LogLevel::kWarn, __VA_ARGS__)
