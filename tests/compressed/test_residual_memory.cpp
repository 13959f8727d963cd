// Residual memory: keying, admission under the byte cap (refusal without evicting anything in
// use, retry, eviction of idle entries least recently used first), statistics, resets,
// recreation, the error-feedback math (host, and device where a GPU exists) and concurrent use.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "codecs/codec_registry.h"
#include "codecs/codec_test_support.h"
#include "collectives/compressed/memory/residual_memory.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse {
namespace {

using ::terse::testing::from_dtype;
using ::terse::testing::random_normal;
using ::terse::testing::to_dtype;

// A state whose size the test controls (and can grow, as lazily allocated states do).
class SizedState : public CodecState {
 public:
  explicit SizedState(size_t bytes) : bytes_(bytes) {}
  size_t bytes() const override { return bytes_; }
  void grow_to(size_t bytes) { bytes_ = bytes; }

 private:
  size_t bytes_;
};

// A lossy stand-in codec: rounds every value to a whole number, stores it as fp32, and writes
// the rounding error to EncodeContext::error. Keeps a SizedState of `state_bytes` when nonzero.
// Needs no registry row, so these tests do not depend on which codecs exist.
class RoundingCodec : public Codec {
 public:
  explicit RoundingCodec(std::string spec = "rounding", size_t state_bytes = 0)
      : spec_(std::move(spec)), state_bytes_(state_bytes) {}

  CodecId id() const override { return CodecId::kInt8; }
  CodecFamily family() const override { return CodecFamily::kDense; }
  std::string spec() const override { return spec_; }
  size_t max_finite_bytes(size_t count, DType) const override { return count * sizeof(float); }
  size_t wire_bytes(size_t count, DType dtype, const MatrixShape&) const override {
    return max_finite_bytes(count, dtype);
  }
  bool stateful(size_t, DType, const MatrixShape&) const override { return state_bytes_ != 0; }

  std::unique_ptr<CodecState> make_state(size_t, DType, const MatrixShape&) const override {
    if (state_bytes_ == 0) return nullptr;
    return std::make_unique<SizedState>(state_bytes_);
  }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    if (capacity < count * sizeof(float)) return ncclInvalidArgument;
    float* payload = static_cast<float*>(message);
    for (size_t i = 0; i < count; ++i) {
      float value = load_element(input, dtype, i);
      payload[i] = std::nearbyint(value);
      if (context.error != nullptr) context.error[i] = value - payload[i];
    }
    *message_bytes = count * sizeof(float);
    return ncclSuccess;
  }

  ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate, const DecodeContext&) const override {
    if (message_bytes != count * sizeof(float)) return ncclInvalidArgument;
    const float* payload = static_cast<const float*>(message);
    for (size_t i = 0; i < count; ++i) {
      float value = payload[i] + (accumulate ? load_element(output, dtype, i) : 0.0f);
      store_element(output, dtype, i, value);
    }
    return ncclSuccess;
  }

 private:
  std::string spec_;
  size_t state_bytes_;
};

TensorKey anonymous(uint64_t address, size_t count, uint64_t comm = 1,
                    DType dtype = DType::kFloat32) {
  return TensorKey{comm, address, count, dtype, ""};
}

TensorKey named(const std::string& name, size_t count, uint64_t address = 0x1000,
                uint64_t comm = 1) {
  return TensorKey{comm, address, count, DType::kFloat32, name};
}

std::shared_ptr<ResidualEntry> acquire_ok(ResidualMemory& memory, const TensorKey& key,
                                          const Codec& codec,
                                          MemoryKind kind = MemoryKind::kResidual) {
  std::shared_ptr<ResidualEntry> entry;
  EXPECT_EQ(memory.acquire(key, codec, kind, {}, &entry), ncclSuccess) << last_error();
  return entry;
}

bool all_zero(const float* values, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (values[i] != 0.0f) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Keys

TEST(ResidualTensorKey, UnnamedTensorsAreIdentifiedByCommAndAddress) {
  TensorKey key = anonymous(0x100, 10);
  EXPECT_TRUE(same_tensor(key, anonymous(0x100, 99)));  // size is an attribute
  EXPECT_FALSE(same_tensor(key, anonymous(0x200, 10)));
  EXPECT_FALSE(same_tensor(key, anonymous(0x100, 10, /*comm=*/2)));
  EXPECT_EQ(TensorIdentityHash()(key), TensorIdentityHash()(anonymous(0x100, 99)));
}

TEST(ResidualTensorKey, NamedTensorsAreIdentifiedByCommAndNameWhateverTheAddress) {
  EXPECT_TRUE(same_tensor(named("w", 10, 0x100), named("w", 10, 0x900)));
  EXPECT_FALSE(same_tensor(named("w", 10), named("v", 10)));
  EXPECT_FALSE(same_tensor(named("w", 10, 0x100, 1), named("w", 10, 0x100, 2)));
  // A name never equals an anonymous buffer, even at the same address.
  EXPECT_FALSE(same_tensor(named("w", 10, 0x100), anonymous(0x100, 10)));
  EXPECT_EQ(TensorIdentityHash()(named("w", 10, 0x100)), TensorIdentityHash()(named("w", 10, 0x9)));
}

TEST(ResidualTensorKey, FullEqualityAndHashCoverEveryField) {
  TensorKey key = named("w", 10);
  EXPECT_EQ(key, named("w", 10));
  EXPECT_NE(key, named("w", 11));
  TensorKey other_dtype = key;
  other_dtype.dtype = DType::kBFloat16;
  EXPECT_NE(key, other_dtype);
  EXPECT_EQ(std::hash<TensorKey>()(key), std::hash<TensorKey>()(named("w", 10)));
}

TEST(ResidualTensorKey, DescribeNamesTheTensor) {
  EXPECT_NE(named("encoder.w", 12).describe().find("'encoder.w'"), std::string::npos);
  std::string text = anonymous(0xabc, 7).describe();
  EXPECT_NE(text.find("0xabc"), std::string::npos) << text;
  EXPECT_NE(text.find("7 x float"), std::string::npos) << text;
}

// ---------------------------------------------------------------------------------------------
// Entries and statistics

TEST(ResidualMemory, NewEntryHoldsAZeroedResidualAndIsCountedAsAMiss) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  auto entry = acquire_ok(memory, anonymous(0x10, 1000), codec);
  ASSERT_NE(entry, nullptr);
  ASSERT_NE(entry->residual(), nullptr);
  EXPECT_TRUE(all_zero(entry->residual(), 1000));
  EXPECT_EQ(entry->state(), nullptr);
  EXPECT_EQ(entry->bytes(), 4000u);
  EXPECT_EQ(entry->memory(), Memory::kHost);
  EXPECT_EQ(entry->codec_spec(), "rounding");
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, 4000u);
  EXPECT_EQ(stats.max_bytes, 1u << 20);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.hits, 0u);
}

TEST(ResidualMemory, SameTensorAgainIsAHitOnTheSameEntry) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  auto first = acquire_ok(memory, anonymous(0x10, 100), codec);
  first->residual()[3] = 1.5f;
  auto second = acquire_ok(memory, anonymous(0x10, 100), codec);
  EXPECT_EQ(first, second);
  EXPECT_EQ(second->residual()[3], 1.5f);
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.entries, 1u);
}

TEST(ResidualMemory, NamedTensorKeepsItsEntryWhenItsBufferMoves) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  auto first = acquire_ok(memory, named("layer1.w", 64, 0x1000), codec);
  auto moved = acquire_ok(memory, named("layer1.w", 64, 0x8000), codec);
  EXPECT_EQ(first, moved);
  auto other = acquire_ok(memory, named("layer2.w", 64, 0x1000), codec);
  EXPECT_NE(first, other);
  EXPECT_EQ(memory.stats().entries, 2u);
}

TEST(ResidualMemory, CommunicatorsDoNotShareEntries) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  auto a = acquire_ok(memory, anonymous(0x10, 8, /*comm=*/1), codec);
  auto b = acquire_ok(memory, anonymous(0x10, 8, /*comm=*/2), codec);
  EXPECT_NE(a, b);
  EXPECT_EQ(memory.stats().entries, 2u);
}

TEST(ResidualMemory, EntryBytesCountTheCodecState) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec("stateful", /*state_bytes=*/96);
  auto entry = acquire_ok(memory, anonymous(0x10, 10), codec);
  ASSERT_NE(entry->state(), nullptr);
  EXPECT_EQ(entry->bytes(), 40u + 96u);
  EXPECT_EQ(memory.stats().bytes, 136u);
}

TEST(ResidualMemory, StateGrowthIsChargedAtTheNextAcquire) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec("stateful", 16);
  auto entry = acquire_ok(memory, anonymous(0x10, 10), codec);
  static_cast<SizedState*>(entry->state())->grow_to(1000);
  EXPECT_EQ(memory.stats().bytes, 56u);  // measured at acquire time
  acquire_ok(memory, anonymous(0x10, 10), codec);
  EXPECT_EQ(memory.stats().bytes, 1040u);
}

TEST(ResidualMemory, MemoryNoneKeepsOnlyTheCodecState) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec("stateful", 64);
  auto entry = acquire_ok(memory, anonymous(0x10, 1000), codec, MemoryKind::kNone);
  EXPECT_EQ(entry->residual(), nullptr);
  EXPECT_NE(entry->state(), nullptr);
  EXPECT_EQ(entry->bytes(), 64u);
  EncodeContext context;
  entry->attach_to(&context);
  EXPECT_EQ(context.error, nullptr);
  EXPECT_EQ(context.state, entry->state());
}

TEST(ResidualMemory, MomentumKeepsTheCodecStateAndNoResidual) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec("dgc-like", 4000);
  auto entry = acquire_ok(memory, anonymous(0x10, 1000), codec, MemoryKind::kMomentum);
  EXPECT_EQ(entry->kind(), MemoryKind::kMomentum);
  EXPECT_EQ(entry->residual(), nullptr);
  EXPECT_NE(entry->state(), nullptr);
}

TEST(ResidualMemory, MomentumIsRefusedForACodecWithoutState) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  std::shared_ptr<ResidualEntry> entry;
  EXPECT_EQ(memory.acquire(anonymous(0x10, 8), codec, MemoryKind::kMomentum, {}, &entry),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("momentum"), std::string::npos) << last_error();
  EXPECT_EQ(entry, nullptr);
  EXPECT_EQ(memory.stats().entries, 0u);
}

// ---------------------------------------------------------------------------------------------
// Recreation

struct Recreation {
  const char* what;
  TensorKey key;
  const char* codec_spec;
  MemoryKind kind;
};

TEST(ResidualMemory, ChangedCountDtypeCodecOrKindRecreatesTheEntry) {
  const TensorKey base = anonymous(0x10, 100);
  TensorKey bigger = base;
  bigger.count = 200;
  TensorKey half = base;
  half.dtype = DType::kFloat16;
  const Recreation changes[] = {
      {"count", bigger, "rounding", MemoryKind::kResidual},
      {"dtype", half, "rounding", MemoryKind::kResidual},
      {"memory kind", base, "rounding", MemoryKind::kNone},
      {"codec spec, to a codec with state", base, "stateful", MemoryKind::kResidual},
  };
  for (const Recreation& change : changes) {
    SCOPED_TRACE(change.what);
    ResidualMemory memory(1 << 20);
    RoundingCodec codec;
    auto old_entry = acquire_ok(memory, base, codec);
    old_entry->residual()[0] = 7.0f;
    RoundingCodec new_codec(change.codec_spec,
                            std::string(change.codec_spec) == "stateful" ? 16 : 0);
    auto new_entry = acquire_ok(memory, change.key, new_codec, change.kind);
    EXPECT_NE(new_entry, old_entry);
    EXPECT_EQ(new_entry->key().count, change.key.count);
    if (new_entry->residual() != nullptr) {
      EXPECT_TRUE(all_zero(new_entry->residual(), change.key.count));
    }
    ResidualStats stats = memory.stats();
    EXPECT_EQ(stats.entries, 1u);
    EXPECT_EQ(stats.recreations, 1u);
    EXPECT_EQ(stats.misses, 2u);
    EXPECT_EQ(stats.evictions, 0u);
    EXPECT_EQ(stats.bytes, new_entry->bytes());
  }
}

// auto moving a tensor between codecs (or exploring one) keeps what earlier calls did not send.
TEST(ResidualMemory, AnotherStatelessCodecOfTheSameLayoutCarriesTheResidualOver) {
  const TensorKey key = anonymous(0x10, 100);
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  auto old_entry = acquire_ok(memory, key, codec);
  old_entry->residual()[0] = 7.0f;
  RoundingCodec other("rounding:block=64");
  auto entry = acquire_ok(memory, key, other);
  EXPECT_EQ(entry, old_entry);
  EXPECT_EQ(entry->codec_spec(), "rounding:block=64");
  EXPECT_EQ(entry->residual()[0], 7.0f);
  EXPECT_TRUE(all_zero(entry->residual() + 1, key.count - 1));
  const ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.recreations, 0u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.hits, 1u);
  // Back to the first codec: the same entry again.
  EXPECT_EQ(acquire_ok(memory, key, codec), old_entry);
  EXPECT_EQ(old_entry->codec_spec(), codec.spec());
}

TEST(ResidualMemory, ChangedShapeRecreatesTheEntry) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec("lowrank", 8);
  std::shared_ptr<ResidualEntry> first, second;
  EntryOptions options;
  options.shape = {10, 10};
  ASSERT_EQ(memory.acquire(anonymous(0x10, 100), codec, MemoryKind::kResidual, options, &first),
            ncclSuccess);
  options.shape = {20, 5};
  ASSERT_EQ(memory.acquire(anonymous(0x10, 100), codec, MemoryKind::kResidual, options, &second),
            ncclSuccess);
  EXPECT_NE(first, second);
  EXPECT_EQ(memory.stats().recreations, 1u);
}

// ---------------------------------------------------------------------------------------------
// The byte cap: admission, idle eviction, refusal and retry

// Acquires at step `step`; the entry, or null when the tensor was not admitted (*admission says
// why when given).
std::shared_ptr<ResidualEntry> acquire_at(ResidualMemory& memory, uint64_t step,
                                          const TensorKey& key, const Codec& codec,
                                          Admission* admission = nullptr,
                                          const EntryOptions& options = {}) {
  memory.set_step(step);
  std::shared_ptr<ResidualEntry> entry;
  EXPECT_EQ(memory.acquire(key, codec, MemoryKind::kResidual, options, &entry, admission),
            ncclSuccess)
      << last_error();
  return entry;
}

TEST(ResidualMemory, ATensorThatDoesNotFitIsRefusedAndNothingInUseIsEvicted) {
  // Room for exactly three entries of 100 floats, all in use.
  ResidualMemory memory(3 * 400, /*idle_steps=*/8);
  RoundingCodec codec;
  const TensorKey a = anonymous(0xa, 100), b = anonymous(0xb, 100), c = anonymous(0xc, 100),
                  d = anonymous(0xd, 100);
  for (const TensorKey& key : {a, b, c}) ASSERT_NE(acquire_at(memory, 0, key, codec), nullptr);
  Admission admission;
  EXPECT_EQ(acquire_at(memory, 1, d, codec, &admission), nullptr);
  EXPECT_FALSE(admission.admitted);
  EXPECT_EQ(admission.needed, 400u);
  EXPECT_EQ(admission.held, 1200u);
  EXPECT_EQ(admission.in_use, 1200u);
  for (const TensorKey& key : {a, b, c}) EXPECT_TRUE(memory.contains(key));
  EXPECT_FALSE(memory.contains(d));
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.refusals, 1u);
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(stats.misses, 3u);
  EXPECT_EQ(stats.bytes, 1200u);
}

// The defect this replaced: under LRU eviction, three tensors used in turn under a cap for two
// evicted each other before every use, so none ever kept its residual.
TEST(ResidualMemory, TensorsUsedInTurnKeepTheirResidualsInsteadOfThrashing) {
  ResidualMemory memory(2 * 400);
  RoundingCodec codec;
  const TensorKey keys[] = {anonymous(0xa, 100), anonymous(0xb, 100), anonymous(0xc, 100)};
  for (uint64_t step = 0; step < 20; ++step) {
    for (const TensorKey& key : keys) {
      std::shared_ptr<ResidualEntry> entry = acquire_at(memory, step, key, codec);
      if (entry == nullptr) continue;
      EXPECT_EQ(entry->residual()[0], static_cast<float>(step)) << "kept since step 0";
      entry->residual()[0] += 1.0f;
    }
  }
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.misses, 2u);  // the first two, once
  EXPECT_EQ(stats.hits, 38u);
  EXPECT_EQ(stats.refusals, 20u);  // the third, at every step
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_FALSE(memory.contains(keys[2]));
}

TEST(ResidualMemory, ARefusedTensorIsAdmittedOnceAnotherHasBeenIdleForMoreThanTheIdleSteps) {
  ResidualMemory memory(3 * 400, /*idle_steps=*/2);
  RoundingCodec codec;
  const TensorKey a = anonymous(0xa, 100), b = anonymous(0xb, 100), c = anonymous(0xc, 100),
                  d = anonymous(0xd, 100);
  for (const TensorKey& key : {a, b, c}) acquire_at(memory, 0, key, codec);
  // c is not used after step 0; a and b are used every step; d asks every step.
  std::vector<uint64_t> refused_at;
  for (uint64_t step = 1; step <= 4; ++step) {
    acquire_at(memory, step, a, codec);
    acquire_at(memory, step, b, codec);
    if (acquire_at(memory, step, d, codec) == nullptr) refused_at.push_back(step);
  }
  // At step 2, c has been unused for 2 steps: not more than idle_steps yet. At step 3 it has.
  EXPECT_EQ(refused_at, (std::vector<uint64_t>{1, 2}));
  EXPECT_FALSE(memory.contains(c));
  EXPECT_TRUE(memory.contains(d));
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.refusals, 2u);
  EXPECT_EQ(stats.step, 4u);
  EXPECT_EQ(stats.idle_steps, 2u);
  // c comes back: a, b and d are in use, so c waits in turn.
  EXPECT_EQ(acquire_at(memory, 5, c, codec), nullptr);
}

TEST(ResidualMemory, IdleEntriesGoLeastRecentlyUsedFirstAndOnlyAsManyAsNeeded) {
  ResidualMemory memory(3 * 400, /*idle_steps=*/1);
  RoundingCodec codec;
  const TensorKey x = anonymous(0x1, 100), y = anonymous(0x2, 100), z = anonymous(0x3, 100);
  acquire_at(memory, 0, x, codec);
  acquire_at(memory, 1, y, codec);
  acquire_at(memory, 2, z, codec);
  acquire_at(memory, 3, x, codec);  // x is now the most recently used
  // At step 10 all three are idle; one new entry evicts only the least recently used, y.
  ASSERT_NE(acquire_at(memory, 10, anonymous(0x4, 100), codec), nullptr);
  EXPECT_FALSE(memory.contains(y));
  EXPECT_TRUE(memory.contains(x));
  EXPECT_TRUE(memory.contains(z));
  // A new entry of two entries' size evicts the next two, z then x.
  ASSERT_NE(acquire_at(memory, 10, anonymous(0x5, 200), codec), nullptr);
  EXPECT_FALSE(memory.contains(z));
  EXPECT_FALSE(memory.contains(x));
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.evictions, 3u);
  EXPECT_EQ(stats.bytes, 1200u);
}

TEST(ResidualMemory, NoIdleEntryIsEvictedForATensorThatWouldNotFitAnyway) {
  ResidualMemory memory(1000, /*idle_steps=*/1);
  RoundingCodec codec;
  const TensorKey idle = anonymous(0x1, 100), busy = anonymous(0x2, 100);
  acquire_at(memory, 0, idle, codec);
  acquire_at(memory, 5, busy, codec);
  Admission admission;
  // 800 bytes: the idle entry's 400 would not make enough room beside the busy one's 400.
  EXPECT_EQ(acquire_at(memory, 5, anonymous(0x3, 200), codec, &admission), nullptr);
  EXPECT_EQ(admission.held, 800u);
  EXPECT_EQ(admission.in_use, 400u);
  EXPECT_TRUE(memory.contains(idle));
  EXPECT_EQ(memory.stats().evictions, 0u);
}

TEST(ResidualMemory, AnEntryLargerThanTheWholeCapIsRefusedAndEvictsNothing) {
  ResidualMemory memory(1000, /*idle_steps=*/0);
  RoundingCodec codec;
  acquire_at(memory, 0, anonymous(0x1, 100), codec);
  Admission admission;
  EXPECT_EQ(acquire_at(memory, 9, named("huge.embedding", 1000), codec, &admission), nullptr);
  EXPECT_FALSE(admission.admitted);
  EXPECT_EQ(admission.needed, 4000u);
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.refusals, 1u);
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_TRUE(memory.contains(anonymous(0x1, 100)));
  // Without a residual the same tensor fits (memory none keeps nothing here).
  std::shared_ptr<ResidualEntry> entry;
  EXPECT_EQ(memory.acquire(named("huge.embedding", 1000), codec, MemoryKind::kNone, {}, &entry),
            ncclSuccess);
  EXPECT_NE(entry, nullptr);
}

TEST(ResidualMemory, AZeroCapRefusesResidualsButNotStatelessEntries) {
  ResidualMemory memory(0);
  RoundingCodec codec;
  std::shared_ptr<ResidualEntry> entry;
  EXPECT_EQ(memory.acquire(anonymous(0x1, 1), codec, MemoryKind::kResidual, {}, &entry),
            ncclSuccess);
  EXPECT_EQ(entry, nullptr);
  EXPECT_EQ(memory.acquire(anonymous(0x1, 1), codec, MemoryKind::kNone, {}, &entry), ncclSuccess);
  EXPECT_NE(entry, nullptr);
}

TEST(ResidualMemory, GrownStatesAreChargedBeforeTheNextAdmission) {
  ResidualMemory memory(1000);
  RoundingCodec stateful("stateful", 16);
  RoundingCodec codec;
  auto grown = acquire_at(memory, 0, anonymous(0x1, 10), stateful);  // 40 + 16 bytes
  static_cast<SizedState*>(grown->state())->grow_to(900);
  // 400 more would fit beside what was charged (56) but not beside what it holds now (940).
  Admission admission;
  EXPECT_EQ(acquire_at(memory, 0, anonymous(0x2, 100), codec, &admission), nullptr);
  EXPECT_EQ(admission.held, 940u);
  EXPECT_EQ(memory.stats().bytes, 940u);
}

TEST(ResidualMemory, GrowthPastTheCapEvictsIdleEntriesButNeverTheGrowingOne) {
  ResidualMemory memory(1000, /*idle_steps=*/1);
  RoundingCodec stateful("stateful", 16);
  RoundingCodec codec;
  auto grown = acquire_at(memory, 0, anonymous(0x1, 10), stateful);
  acquire_at(memory, 0, anonymous(0x2, 100), codec);  // 400 bytes, then idle
  acquire_at(memory, 5, anonymous(0x3, 100), codec);  // 400 bytes, in use
  static_cast<SizedState*>(grown->state())->grow_to(900);
  ASSERT_EQ(acquire_at(memory, 5, anonymous(0x1, 10), stateful), grown);
  EXPECT_FALSE(memory.contains(anonymous(0x2, 100)));  // idle: evicted for the growth
  EXPECT_TRUE(memory.contains(anonymous(0x3, 100)));   // in use: kept
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.bytes, 940u + 400u);  // above the cap: admitted entries keep their memory
  EXPECT_GT(stats.bytes, stats.max_bytes);
  EXPECT_EQ(acquire_at(memory, 5, anonymous(0x4, 1), codec), nullptr);  // nothing new meanwhile
}

TEST(ResidualMemory, TheStageResidualIsPartOfTheEntryAndOfItsAdmission) {
  ResidualMemory memory(1000);
  RoundingCodec codec;
  EntryOptions options;
  options.stage_count = 25;
  auto entry = acquire_at(memory, 0, named("w", 100), codec, nullptr, options);
  ASSERT_NE(entry, nullptr);
  ASSERT_NE(entry->stage_residual(), nullptr);
  EXPECT_EQ(entry->stage_count(), 25u);
  EXPECT_TRUE(all_zero(entry->stage_residual(), 25));
  EXPECT_EQ(entry->bytes(), 500u);
  EXPECT_EQ(memory.stats().bytes, 500u);
  // 100 floats and a stage of 26 (504 bytes) no longer fit beside it.
  EntryOptions larger;
  larger.stage_count = 26;
  Admission admission;
  EXPECT_EQ(acquire_at(memory, 0, named("v", 100), codec, &admission, larger), nullptr);
  EXPECT_EQ(admission.needed, 504u);
  // Another stage size is another layout: the entry is recreated.
  auto recreated = acquire_at(memory, 0, named("w", 100), codec, nullptr, larger);
  EXPECT_NE(recreated, entry);
  EXPECT_EQ(memory.stats().recreations, 1u);
  // Memory none keeps no stage residual, whatever is asked.
  std::shared_ptr<ResidualEntry> none;
  ASSERT_EQ(memory.acquire(named("u", 100), codec, MemoryKind::kNone, options, &none), ncclSuccess);
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->stage_residual(), nullptr);
  EXPECT_EQ(none->bytes(), 0u);
}

TEST(ResidualMemory, WouldAdmitAndEntryBytesChangeNothing) {
  ResidualMemory memory(1000, /*idle_steps=*/2);
  RoundingCodec codec;
  acquire_at(memory, 0, anonymous(0x1, 200), codec);  // 800 bytes
  EXPECT_TRUE(memory.would_admit(200, 0));
  EXPECT_FALSE(memory.would_admit(400, 0));
  EXPECT_FALSE(memory.would_admit(400, 2));
  EXPECT_TRUE(memory.would_admit(400, 3));  // the entry would be idle then
  EXPECT_FALSE(memory.would_admit(1001, 3));
  EXPECT_TRUE(memory.would_admit(0, 0));
  EntryOptions options;
  options.stage_count = 7;
  EXPECT_EQ(ResidualMemory::entry_bytes(anonymous(0x2, 10), codec, MemoryKind::kResidual, options),
            68u);
  RoundingCodec stateful("stateful", 12);
  EXPECT_EQ(ResidualMemory::entry_bytes(anonymous(0x2, 10), stateful, MemoryKind::kNone, options),
            12u);
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.step, 0u);
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(stats.refusals, 0u);
}

TEST(ResidualMemory, NeverHoldsMoreThanTheCap) {
  const uint64_t cap = 64 * 1024;
  ResidualMemory memory(cap, /*idle_steps=*/3);
  RoundingCodec codec("stateful", 100);
  uint64_t seed = 12345;
  uint64_t admitted = 0, refused = 0;
  for (int i = 0; i < 2000; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    size_t count = 1 + (seed >> 33) % 4000;
    uint64_t address = (seed >> 20) % 64;
    const auto entry =
        acquire_at(memory, static_cast<uint64_t>(i / 16), anonymous(address, count), codec);
    (entry != nullptr ? admitted : refused) += 1;
    ASSERT_LE(memory.stats().bytes, cap) << "after acquire " << i;
  }
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.hits + stats.misses, admitted);
  EXPECT_EQ(stats.refusals, refused);
  EXPECT_GT(stats.evictions, 0u);
  EXPECT_GT(stats.refusals, 0u);
  EXPECT_GT(stats.recreations, 0u);
}

TEST(ResidualMemory, AnEvictedEntryStaysValidForItsHolder) {
  ResidualMemory memory(400, /*idle_steps=*/0);
  RoundingCodec codec;
  auto held = acquire_at(memory, 0, anonymous(0x1, 100), codec);
  acquire_at(memory, 1, anonymous(0x2, 100), codec);  // evicts the held one, idle since step 0
  EXPECT_FALSE(memory.contains(anonymous(0x1, 100)));
  for (size_t i = 0; i < 100; ++i) held->residual()[i] = 1.0f;  // still ours to write
  EXPECT_EQ(memory.stats().bytes, 400u);                        // no longer charged
  auto fresh = acquire_at(memory, 2, anonymous(0x1, 100), codec);
  ASSERT_NE(fresh, nullptr);
  EXPECT_NE(fresh, held);
  EXPECT_TRUE(all_zero(fresh->residual(), 100));
}

TEST(ResidualMemory, FindReadsAnEntryWithoutTouchingIt) {
  ResidualMemory memory(1000, /*idle_steps=*/0);
  RoundingCodec codec;
  auto a = acquire_at(memory, 0, anonymous(0x1, 100), codec);
  EXPECT_EQ(memory.find(anonymous(0x1, 7)), a);  // identity, not count
  EXPECT_EQ(memory.find(anonymous(0x9, 100)), nullptr);
  acquire_at(memory, 1, anonymous(0x2, 100), codec);
  memory.find(anonymous(0x1, 100));  // not a use: a stays idle
  ASSERT_NE(acquire_at(memory, 2, anonymous(0x3, 100), codec), nullptr);
  EXPECT_FALSE(memory.contains(anonymous(0x1, 100)));
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.hits, 0u);
  EXPECT_EQ(stats.misses, 3u);
}

TEST(ResidualMemory, CapAndIdleStepsComeFromTheEnvironment) {
  uint64_t cap = 0;
  unsetenv("TERSE_MEMORY_MAX_BYTES");
  ASSERT_EQ(ResidualMemory::max_bytes_from_env(&cap), ncclSuccess);
  EXPECT_EQ(cap, ResidualMemory::kDefaultMaxBytes);
  EXPECT_EQ(cap, 1ull << 30);
  setenv("TERSE_MEMORY_MAX_BYTES", "512M", 1);
  ASSERT_EQ(ResidualMemory::max_bytes_from_env(&cap), ncclSuccess);
  EXPECT_EQ(cap, 512ull << 20);
  setenv("TERSE_MEMORY_MAX_BYTES", "lots", 1);
  EXPECT_EQ(ResidualMemory::max_bytes_from_env(&cap), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("TERSE_MEMORY_MAX_BYTES=lots"), std::string::npos);
  unsetenv("TERSE_MEMORY_MAX_BYTES");

  uint64_t steps = 0;
  unsetenv("TERSE_MEMORY_IDLE_STEPS");
  ASSERT_EQ(ResidualMemory::idle_steps_from_env(&steps), ncclSuccess);
  EXPECT_EQ(steps, ResidualMemory::kDefaultIdleSteps);
  EXPECT_EQ(steps, 8u);
  setenv("TERSE_MEMORY_IDLE_STEPS", "0", 1);
  ASSERT_EQ(ResidualMemory::idle_steps_from_env(&steps), ncclSuccess);
  EXPECT_EQ(steps, 0u);
  setenv("TERSE_MEMORY_IDLE_STEPS", "100", 1);
  ASSERT_EQ(ResidualMemory::idle_steps_from_env(&steps), ncclSuccess);
  EXPECT_EQ(steps, 100u);
  for (const char* bad : {"-1", "soon", "8 steps", "1e3"}) {
    setenv("TERSE_MEMORY_IDLE_STEPS", bad, 1);
    EXPECT_EQ(ResidualMemory::idle_steps_from_env(&steps), ncclInvalidArgument) << bad;
    EXPECT_NE(std::string(last_error()).find(std::string("TERSE_MEMORY_IDLE_STEPS=") + bad),
              std::string::npos)
        << last_error();
  }
  unsetenv("TERSE_MEMORY_IDLE_STEPS");
}

// ---------------------------------------------------------------------------------------------
// Resets

TEST(ResidualMemory, ResetDropsOneTensorAndItStartsFromZero) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  auto entry = acquire_ok(memory, named("w", 10), codec);
  entry->residual()[0] = 3.0f;
  acquire_ok(memory, named("v", 10), codec);
  EXPECT_TRUE(memory.reset(named("w", 10, /*address=*/0x4242)));  // identity, not address
  EXPECT_FALSE(memory.contains(named("w", 10)));
  EXPECT_TRUE(memory.contains(named("v", 10)));
  EXPECT_FALSE(memory.reset(named("never", 10)));
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.resets, 1u);
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, 40u);
  auto again = acquire_ok(memory, named("w", 10), codec);
  EXPECT_EQ(again->residual()[0], 0.0f);
  EXPECT_EQ(memory.stats().misses, 3u);
}

TEST(ResidualMemory, ResetCommDropsOnlyThatCommunicatorsEntries) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  for (uint64_t comm = 1; comm <= 2; ++comm) {
    for (uint64_t address = 0; address < 3; ++address) {
      acquire_ok(memory, anonymous(address, 4, comm), codec);
    }
  }
  EXPECT_EQ(memory.reset_comm(1), 3u);
  EXPECT_EQ(memory.reset_comm(7), 0u);
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.entries, 3u);
  EXPECT_EQ(stats.resets, 3u);
  EXPECT_TRUE(memory.contains(anonymous(0, 4, 2)));
  EXPECT_FALSE(memory.contains(anonymous(0, 4, 1)));
}

TEST(ResidualMemory, ResetAllEmptiesTheMemoryButKeepsTheCounters) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  acquire_ok(memory, anonymous(1, 4), codec);
  acquire_ok(memory, anonymous(2, 4), codec);
  acquire_ok(memory, anonymous(2, 4), codec);
  memory.reset_all();
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.entries, 0u);
  EXPECT_EQ(stats.bytes, 0u);
  EXPECT_EQ(stats.resets, 2u);
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 2u);
}

// ---------------------------------------------------------------------------------------------
// Error-feedback math

class ResidualCompensate : public ::testing::TestWithParam<DType> {};

TEST_P(ResidualCompensate, AddsTheResidualToTheInputInFp32) {
  const DType dtype = GetParam();
  const size_t count = 1037;  // not a multiple of any vector width
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  auto entry = acquire_ok(memory, anonymous(0x10, count, 1, dtype), codec);
  std::vector<float> residual = random_normal(count, 7);
  memcpy(entry->residual(), residual.data(), count * sizeof(float));
  std::vector<uint8_t> input = to_dtype(random_normal(count, 8), dtype);
  std::vector<float> input_values = from_dtype(input, dtype);
  std::vector<float> compensated(count);
  ASSERT_EQ(entry->compensate(input.data(), count, dtype, compensated.data()), ncclSuccess)
      << last_error();
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(compensated[i], input_values[i] + residual[i]) << "element " << i;
  }
}

TEST_P(ResidualCompensate, UpdateStoresCompensatedMinusDecoded) {
  const DType dtype = GetParam();
  const size_t count = 515;
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  auto entry = acquire_ok(memory, anonymous(0x10, count), codec);
  std::vector<float> compensated = random_normal(count, 9);
  std::vector<uint8_t> decoded = to_dtype(random_normal(count, 10), dtype);
  std::vector<float> decoded_values = from_dtype(decoded, dtype);
  ASSERT_EQ(entry->update(compensated.data(), decoded.data(), dtype, count), ncclSuccess)
      << last_error();
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(entry->residual()[i], compensated[i] - decoded_values[i]) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, ResidualCompensate,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(ResidualMemory, CompensateRefusesMismatchedCallsAndAliasing) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  auto entry = acquire_ok(memory, anonymous(0x10, 16), codec);
  std::vector<float> input(16, 1.0f), output(16);
  EXPECT_EQ(entry->compensate(input.data(), 15, DType::kFloat32, output.data()),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("count 15"), std::string::npos) << last_error();
  EXPECT_EQ(entry->compensate(input.data(), 16, DType::kBFloat16, output.data()),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("dtype bfloat16"), std::string::npos) << last_error();
  EXPECT_EQ(entry->compensate(input.data(), 16, DType::kFloat32, entry->residual()),
            ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("overlaps"), std::string::npos) << last_error();
  EXPECT_EQ(entry->compensate(input.data(), 16, DType::kFloat32, entry->residual() + 8),
            ncclInvalidArgument);
  EXPECT_EQ(entry->compensate(nullptr, 16, DType::kFloat32, output.data()), ncclInvalidArgument);
  EXPECT_EQ(entry->update(output.data(), input.data(), DType::kFloat32, 17), ncclInvalidArgument);

  auto stateless = acquire_ok(memory, anonymous(0x20, 16), codec, MemoryKind::kNone);
  EXPECT_EQ(stateless->compensate(input.data(), 16, DType::kFloat32, output.data()),
            ncclInvalidUsage);
  EXPECT_NE(std::string(last_error()).find("keeps no residual"), std::string::npos);
  EXPECT_EQ(stateless->update(output.data(), input.data(), DType::kFloat32, 16), ncclInvalidUsage);
}

// Error feedback telescopes: after T steps, the decoded messages plus the residual left over
// sum to exactly the gradients fed in (up to fp32 rounding), so nothing is lost, only delayed.
void check_error_feedback_telescopes(Codec& codec, bool fused) {
  const size_t count = 256;
  const int steps = 20;
  ResidualMemory memory(1 << 20);
  std::vector<double> sent(count, 0.0), fed(count, 0.0);
  for (int step = 0; step < steps; ++step) {
    std::shared_ptr<ResidualEntry> entry;
    ASSERT_EQ(memory.acquire(named("w", count), codec, MemoryKind::kResidual, {}, &entry),
              ncclSuccess)
        << last_error();
    std::vector<float> gradient = random_normal(count, 100 + step);
    for (float& value : gradient) value *= 0.3f;  // mostly below the rounding step
    std::vector<float> compensated(count);
    ASSERT_EQ(entry->compensate(gradient.data(), count, DType::kFloat32, compensated.data()),
              ncclSuccess);
    EncodeContext context;
    if (fused) entry->attach_to(&context);
    std::vector<uint8_t> message(codec.max_encoded_bytes(count, DType::kFloat32));
    size_t bytes = 0;
    ASSERT_EQ(codec.encode(compensated.data(), count, DType::kFloat32, context, message.data(),
                           message.size(), &bytes),
              ncclSuccess)
        << last_error();
    std::vector<float> decoded(count);
    ASSERT_EQ(codec.decode(message.data(), bytes, decoded.data(), count, DType::kFloat32, false,
                           DecodeContext{}),
              ncclSuccess);
    if (!fused) {
      ASSERT_EQ(entry->update(compensated.data(), decoded.data(), DType::kFloat32, count),
                ncclSuccess);
    }
    for (size_t i = 0; i < count; ++i) {
      fed[i] += gradient[i];
      sent[i] += decoded[i];
    }
  }
  std::shared_ptr<ResidualEntry> entry;
  ASSERT_EQ(memory.acquire(named("w", count), codec, MemoryKind::kResidual, {}, &entry),
            ncclSuccess);
  EXPECT_EQ(memory.stats().misses, 1u);
  double largest_residual = 0.0;
  for (size_t i = 0; i < count; ++i) {
    EXPECT_NEAR(sent[i] + entry->residual()[i], fed[i], 1e-4) << "element " << i;
    largest_residual = std::max(largest_residual, std::fabs(double(entry->residual()[i])));
  }
  EXPECT_GT(largest_residual, 0.0);  // the codec was lossy, and the memory remembered it
}

TEST(ResidualMemory, FusedErrorFeedbackLosesNothingOverSteps) {
  RoundingCodec codec;
  check_error_feedback_telescopes(codec, /*fused=*/true);
}

TEST(ResidualMemory, UnfusedErrorFeedbackLosesNothingOverSteps) {
  RoundingCodec codec;
  check_error_feedback_telescopes(codec, /*fused=*/false);
}

TEST(ResidualMemory, FusedErrorFeedbackWithRegisteredCodecs) {
  // A cast, a quantizer and a sparsifier: each writes EncodeContext::error in the encode.
  for (const char* spec : {"bf16", "int8", "topk"}) {
    SCOPED_TRACE(spec);
    std::unique_ptr<Codec> codec;
    ASSERT_EQ(create_codec(spec, &codec), ncclSuccess) << last_error();
    check_error_feedback_telescopes(*codec, /*fused=*/true);
  }
}

TEST(ResidualMemory, MomentumEntryDrivesDgcWithItsStateAlone) {
  std::unique_ptr<Codec> codec;
  ASSERT_EQ(create_codec("dgc:ratio=0.1", &codec), ncclSuccess) << last_error();
  ResidualMemory memory(1 << 20);
  const size_t count = 1000;
  std::shared_ptr<ResidualEntry> entry;
  for (int step = 0; step < 3; ++step) {
    ASSERT_EQ(memory.acquire(named("w", count), *codec, MemoryKind::kMomentum, {}, &entry),
              ncclSuccess)
        << last_error();
    EncodeContext context;
    entry->attach_to(&context);
    ASSERT_EQ(context.error, nullptr);  // DGC keeps its residual (velocity) in its state
    ASSERT_NE(context.state, nullptr);
    context.step = step;
    std::vector<float> gradient = random_normal(count, 40 + step);
    std::vector<uint8_t> message(codec->max_encoded_bytes(count, DType::kFloat32));
    size_t bytes = 0;
    ASSERT_EQ(codec->encode(gradient.data(), count, DType::kFloat32, context, message.data(),
                            message.size(), &bytes),
              ncclSuccess)
        << last_error();
  }
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.hits, 2u);
  EXPECT_EQ(stats.bytes, entry->state()->bytes());
  EXPECT_GE(stats.bytes, 2 * count * sizeof(float));  // momentum and velocity
}

TEST(ResidualMemory, AttachToPointsTheEncodeAtTheEntry) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec("stateful", 8);
  auto entry = acquire_ok(memory, anonymous(0x10, 4), codec);
  EncodeContext context;
  entry->attach_to(&context);
  EXPECT_EQ(context.error, entry->residual());
  EXPECT_EQ(context.state, entry->state());
  EXPECT_EQ(context.memory, Memory::kHost);
}

// ---------------------------------------------------------------------------------------------
// Concurrency

TEST(ResidualMemory, ManyThreadsAcquireAndEvictConcurrently) {
  const int threads = 8;
  const int rounds = 2000;
  const uint64_t cap = 40 * 1024;  // about half of what the threads would like to keep
  ResidualMemory memory(cap, /*idle_steps=*/2);
  RoundingCodec codec("stateful", 32);
  std::vector<std::thread> workers;
  std::atomic<uint64_t> refused{0};
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int round = 0; round < rounds; ++round) {
        // Each thread owns its communicator, so no two threads use one entry at a time (as
        // with NCCL), while all of them share the map, the LRU list, the clock and the cap.
        if (t == 0) memory.set_step(static_cast<uint64_t>(round));
        TensorKey key = anonymous(round % 10, 64 + (round % 3) * 64, /*comm=*/t + 1);
        std::shared_ptr<ResidualEntry> entry;
        if (memory.acquire(key, codec, MemoryKind::kResidual, {}, &entry) != ncclSuccess) {
          ADD_FAILURE() << last_error();
          return;
        }
        if (entry == nullptr) {
          refused.fetch_add(1);
          continue;
        }
        for (size_t i = 0; i < key.count; ++i) entry->residual()[i] += 1.0f;
        if (round % 97 == 0) memory.reset(key);
        if (t == 0 && round % 500 == 0) memory.stats();
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  ResidualStats stats = memory.stats();
  EXPECT_EQ(stats.hits + stats.misses + stats.refusals, uint64_t(threads) * rounds);
  EXPECT_EQ(stats.refusals, refused.load());
  EXPECT_LE(stats.bytes, cap);
  EXPECT_GT(stats.evictions, 0u);
  EXPECT_GT(stats.resets, 0u);
  EXPECT_LE(stats.entries, size_t(threads) * 10);
}

// ---------------------------------------------------------------------------------------------
// Device memory

#if !TERSE_HAVE_CUDA
TEST(ResidualMemory, DeviceMemoryIsRefusedWithoutCuda) {
  ResidualMemory memory(1 << 20);
  RoundingCodec codec;
  EntryOptions options;
  options.memory = Memory::kDevice;
  std::shared_ptr<ResidualEntry> entry;
  EXPECT_EQ(memory.acquire(anonymous(0x10, 8), codec, MemoryKind::kResidual, options, &entry),
            ncclInvalidUsage);
  EXPECT_NE(std::string(last_error()).find("without CUDA"), std::string::npos) << last_error();
  EXPECT_EQ(memory.stats().entries, 0u);
}
#else
// Compensate and update on the GPU give the host's bytes.
TEST(ResidualMemory, DeviceCompensateAndUpdateMatchTheHost) {
  TERSE_REQUIRE_GPU();
  const size_t count = 100003;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    ResidualMemory memory(1 << 30);
    RoundingCodec codec;
    EntryOptions device;
    device.memory = Memory::kDevice;
    std::shared_ptr<ResidualEntry> on_device, on_host;
    TensorKey key = anonymous(0x10, count, 1, dtype);
    ASSERT_EQ(memory.acquire(key, codec, MemoryKind::kResidual, device, &on_device), ncclSuccess)
        << last_error();
    key.comm = 2;
    ASSERT_EQ(memory.acquire(key, codec, MemoryKind::kResidual, {}, &on_host), ncclSuccess);
    ASSERT_EQ(on_device->memory(), Memory::kDevice);

    std::vector<float> zeros(count, 1.0f);
    ASSERT_EQ(cudaMemcpy(zeros.data(), on_device->residual(), count * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_TRUE(all_zero(zeros.data(), count));

    std::vector<uint8_t> input = to_dtype(random_normal(count, 21), dtype);
    std::vector<float> residual = random_normal(count, 22);
    memcpy(on_host->residual(), residual.data(), count * 4);
    void* device_input = nullptr;
    float* device_out = nullptr;
    ASSERT_EQ(cudaMalloc(&device_input, input.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device_out), count * 4), cudaSuccess);
    cudaMemcpy(device_input, input.data(), input.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(on_device->residual(), residual.data(), count * 4, cudaMemcpyHostToDevice);

    std::vector<float> host_out(count), device_result(count);
    ASSERT_EQ(on_host->compensate(input.data(), count, dtype, host_out.data()), ncclSuccess);
    ASSERT_EQ(on_device->compensate(device_input, count, dtype, device_out, nullptr), ncclSuccess)
        << last_error();
    cudaMemcpy(device_result.data(), device_out, count * 4, cudaMemcpyDeviceToHost);
    EXPECT_EQ(memcmp(host_out.data(), device_result.data(), count * 4), 0);

    // update: residual = compensated - decoded, decoded = the input itself.
    ASSERT_EQ(on_host->update(host_out.data(), input.data(), dtype, count), ncclSuccess);
    ASSERT_EQ(on_device->update(device_out, device_input, dtype, count, nullptr), ncclSuccess);
    cudaMemcpy(device_result.data(), on_device->residual(), count * 4, cudaMemcpyDeviceToHost);
    EXPECT_EQ(memcmp(on_host->residual(), device_result.data(), count * 4), 0);
    cudaFree(device_input);
    cudaFree(device_out);
  }
}
#endif

}  // namespace
}  // namespace terse
