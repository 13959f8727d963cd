#include "collectives/compressed/memory/tensor_key.h"

#include <cinttypes>
#include <cstdio>

namespace terse {
namespace {

// splitmix64's finaliser: spreads nearby addresses (buffers 256 bytes apart) over all buckets.
uint64_t mix(uint64_t value) {
  value ^= value >> 30;
  value *= 0xbf58476d1ce4e5b9ull;
  value ^= value >> 27;
  value *= 0x94d049bb133111ebull;
  value ^= value >> 31;
  return value;
}

uint64_t combine(uint64_t seed, uint64_t value) {
  return mix(seed ^ (value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2)));
}

}  // namespace

std::string TensorKey::describe() const {
  char text[160];
  if (named()) {
    snprintf(text, sizeof(text), "on comm 0x%" PRIx64 " (%zu x %s)", comm, count,
             dtype_name(dtype));
    return "tensor '" + name + "' " + text;
  }
  snprintf(text, sizeof(text), "tensor at 0x%" PRIx64 " on comm 0x%" PRIx64 " (%zu x %s)", address,
           comm, count, dtype_name(dtype));
  return text;
}

bool operator==(const TensorKey& a, const TensorKey& b) {
  return a.comm == b.comm && a.address == b.address && a.count == b.count && a.dtype == b.dtype &&
         a.name == b.name;
}

bool same_tensor(const TensorKey& a, const TensorKey& b) {
  if (a.comm != b.comm || a.named() != b.named()) return false;
  return a.named() ? a.name == b.name : a.address == b.address;
}

size_t TensorIdentityHash::operator()(const TensorKey& key) const {
  uint64_t identity = key.named() ? std::hash<std::string>()(key.name) : key.address;
  return static_cast<size_t>(combine(combine(mix(key.comm), key.named() ? 1 : 0), identity));
}

}  // namespace terse

size_t std::hash<terse::TensorKey>::operator()(const terse::TensorKey& key) const {
  uint64_t hash = terse::TensorIdentityHash()(key);
  hash = terse::combine(hash, key.address);
  hash = terse::combine(hash, key.count);
  return static_cast<size_t>(terse::combine(hash, static_cast<uint64_t>(key.dtype)));
}
