#include "common/env.h"

#include <cerrno>
#include <cstdlib>

#include "common/result.h"

namespace terse {

std::string env_string(const char* name, const std::string& fallback) {
  const char* value = getenv(name);
  return (value == nullptr || *value == '\0') ? fallback : std::string(value);
}

bool parse_bytes(const std::string& text, uint64_t* value) {
  if (text.empty() || text[0] == '-') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long number = strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) return false;
  uint64_t scale = 1;
  switch (*end) {
    case '\0':
      break;
    case 'k':
    case 'K':
      scale = 1ull << 10;
      ++end;
      break;
    case 'm':
    case 'M':
      scale = 1ull << 20;
      ++end;
      break;
    case 'g':
    case 'G':
      scale = 1ull << 30;
      ++end;
      break;
    default:
      return false;
  }
  if (*end != '\0' || (number != 0 && scale > UINT64_MAX / number)) return false;
  *value = number * scale;
  return true;
}

Result env_bytes(const char* name, uint64_t fallback, uint64_t* value) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') {
    *value = fallback;
    return Result::kSuccess;
  }
  if (!parse_bytes(text, value)) {
    return fail(Result::kInvalidArgument,
                "%s=%s is not a byte count (expected e.g. 1048576, 64K, 2M, 1G)", name, text);
  }
  return Result::kSuccess;
}

Result env_int(const char* name, int64_t fallback, int64_t* value) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') {
    *value = fallback;
    return Result::kSuccess;
  }
  errno = 0;
  char* end = nullptr;
  long long number = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') {
    return fail(Result::kInvalidArgument, "%s=%s is not an integer", name, text);
  }
  *value = number;
  return Result::kSuccess;
}

}  // namespace terse
