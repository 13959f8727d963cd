// Residual memory: one ResidualEntry per tensor (error-feedback residual, codec state, and the
// algorithm's stage residual), bounded by a byte cap with admission, not thrashing, resettable,
// with visible statistics (docs/design.md section 4).
//
// Admission: a tensor's entry is made when it fits under the cap; to make room, only entries
// whose tensors have been idle for more than `idle_steps` steps are evicted, least recently used
// first. A tensor that does not fit even then is not admitted (acquire() says so, and gives no
// entry): nothing in use is evicted for it, so the tensors that hold memory keep their error
// feedback instead of all losing it in turn. It is tried again at every acquire, and admitted
// once others have gone idle. The steps are a clock the owner sets (set_step): the compression
// engine sets its communicator's step, so every rank, making the same calls, decides alike.
//
// One per communicator (the compression engine owns it): admission must depend only on what all
// ranks of a communicator share, their own sequence of calls and the agreed cap, which a memory
// shared with other communicators would break.
//
// Thread-safe: a mutex guards the map. Entries are handed out as shared_ptr, so evicting or
// resetting an entry another thread is still encoding with only drops the memory's reference:
// that thread finishes on buffers that stay valid, its residual is then discarded, and the bytes
// leave the accounting at once. Entries' sizes are re-measured at acquires (codec states grow
// after creation), so a state may not grow while another thread acquires from the same memory.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "codecs/codec.h"
#include "collectives/compressed/memory/memory_kind.h"
#include "collectives/compressed/memory/residual_entry.h"
#include "collectives/compressed/memory/tensor_key.h"

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
  // fp32 elements of the entry's stage residual (ResidualEntry::stage_residual) with memory kind
  // residual: what the algorithm's later lossy stage keeps (scatter-reduce-allgather's owner
  // residual, CompressedAlgorithmInfo::stage_residual_elements). The largest chunk any rank
  // keeps (chunks differ by one element between ranks): every rank asks for the same bytes, so
  // admission decides alike everywhere.
  size_t stage_count = 0;
};

struct ResidualStats {
  size_t entries = 0;        // entries held now
  uint64_t bytes = 0;        // bytes they hold (residuals + codec states); above max_bytes only
                             // when admitted states grew past it and no idle entry was left
  uint64_t max_bytes = 0;    // the cap
  uint64_t idle_steps = 0;   // entries unused for more steps than this may be evicted
  uint64_t step = 0;         // the clock (set_step)
  uint64_t hits = 0;         // acquires that found a matching entry
  uint64_t misses = 0;       // acquires that admitted the tensor: a new entry (recreations
                             // included)
  uint64_t recreations = 0;  // entries replaced because the tensor's count, dtype, codec, memory
                             // kind, placement, shape or stage residual had changed
  uint64_t evictions = 0;    // idle entries dropped to make room (no other entry is evicted)
  uint64_t resets = 0;       // entries dropped by reset(), reset_comm() or reset_all()
  uint64_t refusals = 0;     // acquires that did not admit the tensor (each refused call counts)
};

// What acquire() decided for a tensor it had to make an entry for.
struct Admission {
  bool admitted = true;
  uint64_t needed = 0;  // bytes the entry holds, or would have held
  uint64_t held = 0;    // bytes all entries held at the decision
  uint64_t in_use = 0;  // of those, bytes of entries not idle: what admission never evicts
};

class ResidualMemory {
 public:
  static constexpr uint64_t kDefaultMaxBytes = 1ull << 30;
  // Long enough for tensors that skip a few steps (alternating updates, layers frozen for a
  // moment, accumulation schedules) to keep their memory; short enough that the entries of
  // tensors gone for good (a bucket moved to another address, a finished phase) are reclaimed
  // a few steps after they stopped.
  static constexpr uint64_t kDefaultIdleSteps = 8;

  // `max_bytes` caps the bytes of all entries together; an entry unused for more than
  // `idle_steps` steps may be evicted to admit another.
  explicit ResidualMemory(uint64_t max_bytes = kDefaultMaxBytes,
                          uint64_t idle_steps = kDefaultIdleSteps);
  ResidualMemory(const ResidualMemory&) = delete;
  ResidualMemory& operator=(const ResidualMemory&) = delete;

  // The cap from TERSE_MEMORY_MAX_BYTES (e.g. 512M; default 1 GiB); an error naming the
  // variable when it does not parse.
  static ncclResult_t max_bytes_from_env(uint64_t* max_bytes);
  // TERSE_MEMORY_IDLE_STEPS, a whole number of steps (default 8); an error naming the variable
  // when it is not one.
  static ncclResult_t idle_steps_from_env(uint64_t* idle_steps);

  // The step now. Only moves forward: a smaller value is ignored. An acquire stamps its entry
  // with it; an entry stamped more than idle_steps() before the step now is idle.
  void set_step(uint64_t step);

  // The entry of `key`'s tensor for `codec` with memory `kind`, created on first use if the
  // tensor is admitted.
  //
  // An existing entry is reused (a hit: it becomes the most recently used, stamped with the
  // step now) when the count, dtype, codec spec, memory kind, options.memory, options.shape and
  // options.stage_count all match. An entry of another stateless codec that otherwise matches,
  // with memory residual, carries over (a hit too): it serves `codec` from now on, its residuals
  // kept, since they hold what earlier calls did not send whichever codec sent the rest (auto
  // moving between codecs). Otherwise it is dropped and a fresh one made (a recreation:
  // its residual and state belonged to another layout). A new entry holds a zeroed residual of
  // key.count floats when kind is kResidual (and a zeroed stage residual of
  // options.stage_count), and codec.make_state(...) in every kind (so kNone still keeps
  // PowerSGD's warm-started Q; with a stateless codec its entry holds 0 bytes); kMomentum is
  // refused with ncclInvalidArgument for codecs that keep no state. A hit re-measures the entry,
  // since states may grow after creation, and evicts idle entries if that growth crossed the cap
  // (if none is idle the memory stays above its cap: an admitted tensor keeps its memory).
  //
  // Admission (see the file comment): a new entry that fits under the cap, after evicting idle
  // entries least recently used first, is made; one that does not (or alone exceeds the cap) is
  // not: the call returns ncclSuccess with *entry null, nothing is evicted, and it counts as a
  // refusal. *admission (optional) says what was decided and why.
  ncclResult_t acquire(const TensorKey& key, const Codec& codec, MemoryKind kind,
                       const EntryOptions& options, std::shared_ptr<ResidualEntry>* entry,
                       Admission* admission = nullptr);

  // What acquire() would decide for a new entry of `bytes` at step `step` (not before the step
  // now), changing nothing.
  bool would_admit(uint64_t bytes, uint64_t step) const;
  // The bytes an entry made for this request holds at creation (the codec's state measured by
  // making one).
  static uint64_t entry_bytes(const TensorKey& key, const Codec& codec, MemoryKind kind,
                              const EntryOptions& options);

  // Drops the entry of `key`'s tensor (identity as in same_tensor); its next acquire starts from
  // zero. Returns whether there was one.
  bool reset(const TensorKey& key);
  // Drops every entry of communicator `comm`; returns how many.
  size_t reset_comm(uint64_t comm);
  // Drops every entry.
  void reset_all();

  // Whether `key`'s tensor has an entry now (without touching its recency).
  bool contains(const TensorKey& key) const;
  // Its entry, or null; touches neither its recency nor the counters (for inspection: tests).
  std::shared_ptr<ResidualEntry> find(const TensorKey& key) const;

  ResidualStats stats() const;
  uint64_t max_bytes() const { return max_bytes_; }
  uint64_t idle_steps() const { return idle_steps_; }

 private:
  struct Slot {
    std::shared_ptr<ResidualEntry> entry;
    uint64_t charged;    // bytes counted for this entry in bytes_
    uint64_t last_step;  // the step of its last acquire
  };
  // Most recently used first. Acquires stamp the step now, which never decreases, so the
  // stamps decrease along the list and the idle entries are its tail.
  using LruList = std::list<Slot>;

  bool idle(const Slot& slot, uint64_t step) const { return step - slot.last_step > idle_steps_; }
  // Bytes of the idle entries at `step`. Requires mutex_.
  uint64_t idle_bytes(uint64_t step) const;
  // Whether a new entry of `bytes` fits once the idle entries at `step` are gone. Requires
  // mutex_.
  bool fits_after_idle_evictions(uint64_t bytes, uint64_t step) const;
  // Re-measures every entry (codec states grow after creation). Requires mutex_.
  void remeasure();
  // Removes `position`; the caller counts why. Requires mutex_.
  void drop(LruList::iterator position);
  // Evicts idle entries, least recently used first, until bytes_ + incoming <= max_bytes_ or
  // none is left. Requires mutex_.
  void evict_idle_for(uint64_t incoming);

  const uint64_t max_bytes_;
  const uint64_t idle_steps_;
  mutable std::mutex mutex_;
  uint64_t step_ = 0;
  LruList lru_;
  std::unordered_map<TensorKey, LruList::iterator, TensorIdentityHash, TensorIdentityEqual> index_;
  uint64_t bytes_ = 0;
  ResidualStats counters_;
};

}  // namespace terse
