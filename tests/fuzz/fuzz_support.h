// What every fuzz target shares: quiet logs, and a check that turns a broken promise into a
// crash libFuzzer records (sanitizer reports already are; a wrong result code must be too).
#pragma once

#include <cstdio>
#include <cstdlib>

#include "common/log.h"

namespace terse::fuzz {

// Refusals log a WARN line each by design; millions of them would drown libFuzzer's output and
// cost more than the decode. Set before the first log call (TERSE_DEBUG is read on first use);
// an explicit TERSE_DEBUG in the environment still wins, for debugging a reproducer.
inline void quiet_logs() {
  static const bool once = [] {
    setenv("TERSE_DEBUG", "NONE", 0);
    reload_log_settings();
    return true;
  }();
  (void)once;
}

}  // namespace terse::fuzz

// Aborts with the condition and a formatted reason: libFuzzer saves the input as a crash.
#define TERSE_FUZZ_REQUIRE(condition, ...)                                               \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      fprintf(stderr, "terse fuzz: %s:%d: %s failed: ", __FILE__, __LINE__, #condition); \
      fprintf(stderr, __VA_ARGS__);                                                      \
      fprintf(stderr, "\n");                                                             \
      abort();                                                                           \
    }                                                                                    \
  } while (0)
