// regMr/deregMr: the ranges NCCL registers with a comm, counted, so that the same buffer
// registered again (NCCL registers its buffers per connection, and again after a reconnect)
// gets the same handle, and isend/irecv can check that a buffer lies inside the registration
// NCCL names. No UCX call happens here: a host buffer needs none for tagged messages (UCX pins
// pages through its own registration cache when a protocol needs it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "plugin/net/net_abi.h"

namespace terse::net {

struct MemoryRegion {
  uintptr_t begin;
  uintptr_t end;
  int type;
  int references;
};

class RegistrationCache {
 public:
  // The region of exactly [data, data + size) of `type`, made or found.
  MemoryRegion* add(void* data, size_t size, int type);
  // Drops one reference; false when `region` is not one of this cache's.
  bool remove(MemoryRegion* region);
  size_t size() const { return regions_.size(); }
  // Whether [data, data + size) lies inside `region`.
  static bool covers(const MemoryRegion* region, const void* data, size_t size);

 private:
  std::map<std::pair<uintptr_t, uintptr_t>, std::unique_ptr<MemoryRegion>> regions_;
};

}  // namespace terse::net
