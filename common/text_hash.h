// FNV-1a over a text: equal texts give equal 64-bit values in every process, which is all its
// users ask (a secret derived from NCCL_COMM_ID, settings compared across ranks by hash, a host
// named by a number). Not for anything an adversary chooses.
#pragma once

#include <cstdint>
#include <string>

namespace terse {

inline uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace terse
