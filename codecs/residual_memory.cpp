#include "codecs/residual_memory.h"

#include <utility>

#include "common/env.h"
#include "common/log.h"
#include "common/result.h"

namespace terse {
namespace {

bool same_shape(const MatrixShape& a, const MatrixShape& b) {
  return a.rows == b.rows && a.cols == b.cols;
}

// Whether `entry` was made for this request, or must be recreated.
bool fits(const ResidualEntry& entry, const TensorKey& key, const std::string& codec_spec,
          MemoryKind kind, const EntryOptions& options) {
  return entry.key().count == key.count && entry.key().dtype == key.dtype && entry.kind() == kind &&
         entry.memory() == options.memory && entry.codec_spec() == codec_spec &&
         same_shape(entry.shape(), options.shape);
}

}  // namespace

ResidualMemory::ResidualMemory(uint64_t max_bytes) : max_bytes_(max_bytes) {
  counters_.max_bytes = max_bytes;
}

ncclResult_t ResidualMemory::max_bytes_from_env(uint64_t* max_bytes) {
  return env_bytes("TERSE_MEMORY_MAX_BYTES", kDefaultMaxBytes, max_bytes);
}

void ResidualMemory::drop(LruList::iterator position) {
  bytes_ -= position->charged;
  index_.erase(position->entry->key());
  lru_.erase(position);
}

void ResidualMemory::evict_for(uint64_t incoming, const ResidualEntry* keep) {
  // Walks from the least recently used end. drop(candidate++) leaves `candidate` on the element
  // after the dropped one (already visited), so the next --candidate reaches the one before it.
  auto candidate = lru_.end();
  while (bytes_ + incoming > max_bytes_ && candidate != lru_.begin()) {
    --candidate;
    if (candidate->entry.get() == keep) continue;
    TERSE_TRACE("residual memory: evicting %s (%llu bytes)",
                candidate->entry->key().describe().c_str(),
                static_cast<unsigned long long>(candidate->charged));
    drop(candidate++);
    ++counters_.evictions;
  }
}

ncclResult_t ResidualMemory::acquire(const TensorKey& key, const Codec& codec, MemoryKind kind,
                                     const EntryOptions& options,
                                     std::shared_ptr<ResidualEntry>* entry) {
  std::string codec_spec = codec.spec();
  std::lock_guard<std::mutex> lock(mutex_);

  auto found = index_.find(key);
  if (found != index_.end()) {
    LruList::iterator position = found->second;
    if (fits(*position->entry, key, codec_spec, kind, options)) {
      ++counters_.hits;
      lru_.splice(lru_.begin(), lru_, position);
      // A state may grow after creation (lazily allocated factors): charge what it holds now.
      uint64_t now = position->entry->bytes();
      bytes_ = bytes_ - position->charged + now;
      position->charged = now;
      evict_for(0, position->entry.get());
      *entry = position->entry;
      return ncclSuccess;
    }
    TERSE_INFO("residual memory: recreating the entry of %s (was %zu x %s, %s, %s)",
               key.describe().c_str(), position->entry->key().count,
               dtype_name(position->entry->key().dtype), position->entry->codec_spec().c_str(),
               memory_kind_name(position->entry->kind()));
    drop(position);
    ++counters_.recreations;
  }

  // The state first: its size is only known once made, and the cap check needs it.
  std::unique_ptr<CodecState> state = codec.make_state(key.count, key.dtype, options.shape);
  if (kind == MemoryKind::kMomentum && state == nullptr) {
    return fail(ncclInvalidArgument,
                "memory 'momentum' for %s needs a codec that keeps momentum state (dgc); codec "
                "'%s' keeps none",
                key.describe().c_str(), codec_spec.c_str());
  }
  size_t residual_count = kind == MemoryKind::kResidual ? key.count : 0;
  uint64_t needed = static_cast<uint64_t>(residual_count) * sizeof(float) +
                    (state ? static_cast<uint64_t>(state->bytes()) : 0);
  if (needed > max_bytes_) {
    ++counters_.refusals;
    return fail(ncclInvalidArgument,
                "residual memory for %s needs %llu bytes, more than the whole cap of %llu bytes "
                "(raise TERSE_MEMORY_MAX_BYTES or choose memory 'none' for this tensor)",
                key.describe().c_str(), static_cast<unsigned long long>(needed),
                static_cast<unsigned long long>(max_bytes_));
  }
  evict_for(needed, nullptr);

  ResidualBuffer residual;
  std::string what = key.describe();
  TERSE_CHECK(ResidualBuffer::allocate(residual_count, options.memory, options.stream, what.c_str(),
                                       &residual));
  auto created = std::make_shared<ResidualEntry>(key, kind, std::move(codec_spec), options.shape,
                                                 std::move(residual), std::move(state));
  lru_.push_front(Slot{created, needed});
  index_.emplace(key, lru_.begin());
  bytes_ += needed;
  ++counters_.misses;
  *entry = std::move(created);
  return ncclSuccess;
}

bool ResidualMemory::reset(const TensorKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = index_.find(key);
  if (found == index_.end()) return false;
  drop(found->second);
  ++counters_.resets;
  return true;
}

size_t ResidualMemory::reset_comm(uint64_t comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t dropped = 0;
  for (auto position = lru_.begin(); position != lru_.end();) {
    if (position->entry->key().comm == comm) {
      drop(position++);
      ++dropped;
    } else {
      ++position;
    }
  }
  counters_.resets += dropped;
  return dropped;
}

void ResidualMemory::reset_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.resets += lru_.size();
  lru_.clear();
  index_.clear();
  bytes_ = 0;
}

bool ResidualMemory::contains(const TensorKey& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return index_.count(key) != 0;
}

ResidualStats ResidualMemory::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ResidualStats stats = counters_;
  stats.entries = lru_.size();
  stats.bytes = bytes_;
  return stats;
}

}  // namespace terse
