// Residual memory: one ResidualEntry per tensor (error-feedback residual + codec state), bounded
// by a byte cap with least-recently-used eviction, resettable, with visible statistics
// (DESIGN.md section 4).
//
// Thread-safe: collectives on several threads share one ResidualMemory; a mutex guards the map.
// Entries are handed out as shared_ptr, so evicting or resetting an entry another thread is
// still encoding with only drops the memory's reference: that thread finishes on buffers that
// stay valid, its residual is then discarded, and the bytes leave the accounting at once.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "codecs/codec.h"
#include "codecs/memory_kind.h"
#include "codecs/residual_entry.h"
#include "codecs/tensor_key.h"

namespace terse {

// Where an entry's buffers live and what its codec state needs.
struct EntryOptions {
  // The tensor's memory kind; the residual lives beside it.
  Memory memory = Memory::kHost;
  // cudaStream_t on which a new device residual is zeroed (work queued after acquire on the
  // same stream sees zeros). Unused for host memory.
  void* stream = nullptr;
  // Passed to Codec::make_state (PowerSGD's matrix view).
  MatrixShape shape;
};

struct ResidualStats {
  size_t entries = 0;        // entries held now
  uint64_t bytes = 0;        // bytes they hold (residuals + codec states)
  uint64_t max_bytes = 0;    // the cap
  uint64_t hits = 0;         // acquires that found a matching entry
  uint64_t misses = 0;       // acquires that created one (recreations included)
  uint64_t recreations = 0;  // misses that replaced an entry whose count, dtype, codec, memory
                             // kind, placement or shape had changed
  uint64_t evictions = 0;    // entries dropped to stay under the cap
  uint64_t resets = 0;       // entries dropped by reset(), reset_comm() or reset_all()
  uint64_t refusals = 0;     // acquires refused because one entry alone exceeds the cap
};

class ResidualMemory {
 public:
  static constexpr uint64_t kDefaultMaxBytes = 1ull << 30;

  // `max_bytes` caps the bytes of all entries together.
  explicit ResidualMemory(uint64_t max_bytes = kDefaultMaxBytes);
  ResidualMemory(const ResidualMemory&) = delete;
  ResidualMemory& operator=(const ResidualMemory&) = delete;

  // The cap from TERSE_MEMORY_MAX_BYTES (e.g. 512M; default 1 GiB); an error naming the
  // variable when it does not parse.
  static ncclResult_t max_bytes_from_env(uint64_t* max_bytes);

  // The entry of `key`'s tensor for `codec` with memory `kind`, created on first use.
  //
  // An existing entry is reused (a hit, and it becomes the most recently used) when the count,
  // dtype, codec spec, memory kind, options.memory and options.shape all match; otherwise it is
  // replaced by a fresh one (a recreation: its residual and state belonged to another layout).
  // A new entry holds a zeroed residual of key.count floats when kind is kResidual, and
  // codec.make_state(...) in every kind (so kNone still keeps PowerSGD's warm-started Q; with a
  // stateless codec its entry holds 0 bytes); kMomentum is refused for codecs that keep no state.
  // A hit re-measures the entry, since states may grow after creation, and evicts other entries
  // if that growth crossed the cap.
  //
  // Least recently used entries are evicted until the new one fits under the cap. An entry
  // larger than the whole cap is refused with ncclInvalidArgument naming the tensor and both
  // sizes, and nothing is evicted for it: running a lossy codec without the memory its rule
  // asked for would silently change convergence, so the caller decides (the collective layer
  // falls back to an uncompressed reduction of that tensor and says so).
  ncclResult_t acquire(const TensorKey& key, const Codec& codec, MemoryKind kind,
                       const EntryOptions& options, std::shared_ptr<ResidualEntry>* entry);

  // Drops the entry of `key`'s tensor (identity as in same_tensor); its next acquire starts from
  // zero. Returns whether there was one.
  bool reset(const TensorKey& key);
  // Drops every entry of communicator `comm` (at ncclCommDestroy); returns how many.
  size_t reset_comm(uint64_t comm);
  // Drops every entry.
  void reset_all();

  // Whether `key`'s tensor has an entry now (without touching its recency).
  bool contains(const TensorKey& key) const;

  ResidualStats stats() const;
  uint64_t max_bytes() const { return max_bytes_; }

 private:
  struct Slot {
    std::shared_ptr<ResidualEntry> entry;
    uint64_t charged;  // bytes counted for this entry in bytes_
  };
  using LruList = std::list<Slot>;  // most recently used first

  // Removes `position`; the caller counts why. Requires mutex_.
  void drop(LruList::iterator position);
  // Evicts least recently used entries, never `keep`, until bytes_ + incoming <= max_bytes_.
  // Requires mutex_.
  void evict_for(uint64_t incoming, const ResidualEntry* keep);

  const uint64_t max_bytes_;
  mutable std::mutex mutex_;
  LruList lru_;
  std::unordered_map<TensorKey, LruList::iterator, TensorIdentityHash, TensorIdentityEqual> index_;
  uint64_t bytes_ = 0;
  ResidualStats counters_;
};

}  // namespace terse
