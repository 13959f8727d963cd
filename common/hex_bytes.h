// Bytes <-> lowercase hex, for passing a unique id (ncclUniqueId or terse's UniqueId, both 128
// bytes) to rank processes on their command line. Header-only: the rank processes that see
// only <nccl.h> and libterse use it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace terse {

inline std::string bytes_to_hex(const char* bytes, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < size; ++i) {
    const uint8_t byte = static_cast<uint8_t>(bytes[i]);
    hex += digits[byte >> 4];
    hex += digits[byte & 15];
  }
  return hex;
}

// False unless `hex` is exactly 2 * `size` lowercase hex digits.
inline bool hex_to_bytes(const std::string& hex, char* bytes, size_t size) {
  if (hex.size() != 2 * size) return false;
  auto value = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t i = 0; i < size; ++i) {
    const int high = value(hex[2 * i]), low = value(hex[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    bytes[i] = static_cast<char>(high * 16 + low);
  }
  return true;
}

}  // namespace terse
