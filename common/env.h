// Reading TERSE_* settings from the environment. Every setting the library reads goes through
// these, so a bad value is refused the same way everywhere: an error naming the variable.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace terse {

// The variable's value, or `fallback` when unset or empty.
std::string env_string(const char* name, const std::string& fallback);

// A byte count with an optional K/M/G suffix (1024-based), e.g. TERSE_MEMORY_MAX_BYTES=512M.
Result env_bytes(const char* name, uint64_t fallback, uint64_t* value);

// A plain integer.
Result env_int(const char* name, int64_t fallback, int64_t* value);

// Parses "123", "64K", "2M", "1G" (1024-based). Returns false on anything else.
bool parse_bytes(const std::string& text, uint64_t* value);

}  // namespace terse
