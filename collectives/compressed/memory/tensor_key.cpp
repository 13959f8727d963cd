#include "collectives/compressed/memory/tensor_key.h"

#include <cinttypes>
#include <cstdio>

#include "common/counter_rng.h"

namespace terse {

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
  // The counter generator's mix (common/counter_rng.h) spreads nearby addresses (buffers 256
  // bytes apart) over all buckets.
  return static_cast<size_t>(
      counter_random(counter_random(mix64(key.comm), key.named() ? 1 : 0), identity));
}

}  // namespace terse

size_t std::hash<terse::TensorKey>::operator()(const terse::TensorKey& key) const {
  uint64_t hash = terse::TensorIdentityHash()(key);
  hash = terse::counter_random(hash, key.address);
  hash = terse::counter_random(hash, key.count);
  return static_cast<size_t>(terse::counter_random(hash, static_cast<uint64_t>(key.dtype)));
}
