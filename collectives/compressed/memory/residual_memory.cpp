#include "collectives/compressed/memory/residual_memory.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iterator>
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
         same_shape(entry.shape(), options.shape) &&
         entry.stage_count() == (kind == MemoryKind::kResidual ? options.stage_count : 0);
}

// Whether `entry`, made for another codec, carries over to `codec` as it is: it fits but for the
// codec, and both keep a residual and no state. The residual is what earlier calls did not send,
// whichever codec sent the rest, so it compensates the next call of any codec (auto's choice
// moving between codecs, or exploring one, loses nothing).
bool carries_over(const ResidualEntry& entry, const TensorKey& key, const Codec& codec,
                  MemoryKind kind, const EntryOptions& options) {
  return kind == MemoryKind::kResidual && entry.state() == nullptr &&
         !codec.stateful(key.count, key.dtype, options.shape) &&
         fits(entry, key, entry.codec_spec(), kind, options);
}

// Bytes of an entry with `state` for this request.
uint64_t bytes_with_state(const TensorKey& key, MemoryKind kind, const EntryOptions& options,
                          const CodecState* state) {
  const uint64_t residuals =
      kind == MemoryKind::kResidual ? uint64_t{key.count} + options.stage_count : 0;
  return residuals * sizeof(float) + (state ? static_cast<uint64_t>(state->bytes()) : 0);
}

}  // namespace

ResidualMemory::ResidualMemory(uint64_t max_bytes, uint64_t idle_steps)
    : max_bytes_(max_bytes), idle_steps_(idle_steps) {
  counters_.max_bytes = max_bytes;
  counters_.idle_steps = idle_steps;
}

ncclResult_t ResidualMemory::max_bytes_from_env(uint64_t* max_bytes) {
  return env_bytes("TERSE_MEMORY_MAX_BYTES", kDefaultMaxBytes, max_bytes);
}

ncclResult_t ResidualMemory::idle_steps_from_env(uint64_t* idle_steps) {
  const std::string text = env_string("TERSE_MEMORY_IDLE_STEPS", "");
  if (text.empty()) {
    *idle_steps = kDefaultIdleSteps;
    return ncclSuccess;
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long steps = strtoull(text.c_str(), &end, 10);
  if (text[0] < '0' || text[0] > '9' || errno != 0 || *end != '\0') {
    return fail(ncclInvalidArgument,
                "TERSE_MEMORY_IDLE_STEPS=%s is not a whole number of steps (0 or more; default "
                "%llu)",
                text.c_str(), static_cast<unsigned long long>(kDefaultIdleSteps));
  }
  *idle_steps = steps;
  return ncclSuccess;
}

void ResidualMemory::set_step(uint64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = std::max(step_, step);
}

void ResidualMemory::drop(LruList::iterator position) {
  bytes_ -= position->charged;
  index_.erase(position->entry->key());
  lru_.erase(position);
}

uint64_t ResidualMemory::idle_bytes(uint64_t step) const {
  uint64_t idle_total = 0;
  for (auto slot = lru_.rbegin(); slot != lru_.rend() && idle(*slot, step); ++slot) {
    idle_total += slot->charged;
  }
  return idle_total;
}

bool ResidualMemory::fits_after_idle_evictions(uint64_t bytes, uint64_t step) const {
  if (bytes == 0) return true;  // holds nothing: never a reason to refuse
  if (bytes > max_bytes_) return false;
  const uint64_t kept = bytes_ - idle_bytes(step);
  return kept <= max_bytes_ - bytes;
}

void ResidualMemory::remeasure() {
  for (Slot& slot : lru_) {
    const uint64_t now = slot.entry->bytes();
    bytes_ = bytes_ - slot.charged + now;
    slot.charged = now;
  }
}

void ResidualMemory::evict_idle_for(uint64_t incoming) {
  while (!lru_.empty() && bytes_ + incoming > max_bytes_ && idle(lru_.back(), step_)) {
    auto oldest = std::prev(lru_.end());
    TERSE_TRACE(
        "residual memory: evicting %s (%llu bytes, unused since step %llu, now %llu)",
        oldest->entry->key().describe().c_str(), static_cast<unsigned long long>(oldest->charged),
        static_cast<unsigned long long>(oldest->last_step), static_cast<unsigned long long>(step_));
    drop(oldest);
    ++counters_.evictions;
  }
}

uint64_t ResidualMemory::entry_bytes(const TensorKey& key, const Codec& codec, MemoryKind kind,
                                     const EntryOptions& options) {
  const std::unique_ptr<CodecState> state = codec.make_state(key.count, key.dtype, options.shape);
  return bytes_with_state(key, kind, options, state.get());
}

bool ResidualMemory::would_admit(uint64_t bytes, uint64_t step) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fits_after_idle_evictions(bytes, std::max(step, step_));
}

ncclResult_t ResidualMemory::acquire(const TensorKey& key, const Codec& codec, MemoryKind kind,
                                     const EntryOptions& options,
                                     std::shared_ptr<ResidualEntry>* entry, Admission* admission) {
  entry->reset();
  Admission decided;
  std::string codec_spec = codec.spec();
  std::lock_guard<std::mutex> lock(mutex_);

  auto found = index_.find(key);
  if (found != index_.end()) {
    LruList::iterator position = found->second;
    if (!fits(*position->entry, key, codec_spec, kind, options) &&
        carries_over(*position->entry, key, codec, kind, options)) {
      TERSE_TRACE("residual memory: %s's residual carries over from %s to %s",
                  key.describe().c_str(), position->entry->codec_spec().c_str(),
                  codec_spec.c_str());
      position->entry->serve_codec(codec_spec);
    }
    if (fits(*position->entry, key, codec_spec, kind, options)) {
      ++counters_.hits;
      lru_.splice(lru_.begin(), lru_, position);
      position->last_step = step_;
      // A state may grow after creation (lazily allocated factors): charge what it holds now.
      const uint64_t now = position->entry->bytes();
      bytes_ = bytes_ - position->charged + now;
      position->charged = now;
      evict_idle_for(0);
      decided.needed = now;
      decided.held = bytes_;
      if (admission != nullptr) *admission = decided;
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

  // The state first: its size is only known once made, and admission needs it.
  std::unique_ptr<CodecState> state = codec.make_state(key.count, key.dtype, options.shape);
  if (kind == MemoryKind::kMomentum && state == nullptr) {
    return fail(ncclInvalidArgument,
                "memory 'momentum' for %s needs a codec that keeps momentum state (dgc); codec "
                "'%s' keeps none",
                key.describe().c_str(), codec_spec.c_str());
  }
  remeasure();  // the decision below weighs what every entry holds now
  decided.needed = bytes_with_state(key, kind, options, state.get());
  decided.held = bytes_;
  decided.in_use = bytes_ - idle_bytes(step_);
  if (!fits_after_idle_evictions(decided.needed, step_)) {
    ++counters_.refusals;
    decided.admitted = false;
    if (admission != nullptr) *admission = decided;
    return ncclSuccess;
  }
  evict_idle_for(decided.needed);

  const bool keeps_residual = kind == MemoryKind::kResidual;
  ResidualBuffer residual, stage_residual;
  const std::string what = key.describe();
  TERSE_CHECK(ResidualBuffer::allocate(keeps_residual ? key.count : 0, options.memory,
                                       options.stream, what.c_str(), &residual));
  // Beside the residual: an algorithm that runs on the tensor's own memory (a device execution
  // backend) adds the stage residual there too.
  TERSE_CHECK(ResidualBuffer::allocate(keeps_residual ? options.stage_count : 0, options.memory,
                                       options.stream, what.c_str(), &stage_residual));
  auto created = std::make_shared<ResidualEntry>(key, kind, std::move(codec_spec), options.shape,
                                                 std::move(residual), std::move(state),
                                                 std::move(stage_residual));
  lru_.push_front(Slot{created, decided.needed, step_});
  index_.emplace(key, lru_.begin());
  bytes_ += decided.needed;
  ++counters_.misses;
  if (admission != nullptr) *admission = decided;
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

std::shared_ptr<ResidualEntry> ResidualMemory::find(const TensorKey& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = index_.find(key);
  return found == index_.end() ? nullptr : found->second->entry;
}

ResidualStats ResidualMemory::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ResidualStats stats = counters_;
  stats.entries = lru_.size();
  stats.bytes = bytes_;
  stats.step = step_;
  return stats;
}

}  // namespace terse
