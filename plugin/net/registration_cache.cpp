#include "plugin/net/registration_cache.h"

namespace terse::net {

MemoryRegion* RegistrationCache::add(void* data, size_t size, int type) {
  uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  auto key = std::make_pair(begin, begin + size);
  auto found = regions_.find(key);
  if (found != regions_.end() && found->second->type == type) {
    ++found->second->references;
    return found->second.get();
  }
  auto region = std::make_unique<MemoryRegion>(MemoryRegion{begin, begin + size, type, 1});
  MemoryRegion* raw = region.get();
  regions_[key] = std::move(region);
  return raw;
}

bool RegistrationCache::remove(MemoryRegion* region) {
  if (region == nullptr) return false;
  auto found = regions_.find(std::make_pair(region->begin, region->end));
  if (found == regions_.end() || found->second.get() != region) return false;
  if (--region->references == 0) regions_.erase(found);
  return true;
}

bool RegistrationCache::covers(const MemoryRegion* region, const void* data, size_t size) {
  uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  return begin >= region->begin && begin <= region->end && size <= region->end - begin;
}

}  // namespace terse::net
