#include "perf/soak/soak_workload.h"

#include "common/text_hash.h"

namespace terse {
namespace soak {
namespace {

// Sizes by algorithm (a dense codec's default by bytes: tree below 16 KiB, recursive doubling
// below 256 KiB, scatter-reduce-allgather from 256 KiB).
const Slot kTable[kSlots] = {
    // name                 count   resized type          avg    codec  values  rows  phase
    {"stable.int8", 65536, 0, ncclFloat32, false, "int8", Values::kNoise, 0, false},
    {"stable.int4", 12289, 0, ncclFloat32, true, "int4", Values::kNoise, 0, false},
    {"stable.int2", 3000, 0, ncclFloat32, false, "int2:mode=absmax", Values::kNoise, 0, false},
    {"stable.qsgd", 30000, 0, ncclFloat32, false, "qsgd", Values::kNoise, 0, false},
    {"stable.terngrad", 8192, 0, ncclFloat16, false, "terngrad", Values::kNoise, 0, false},
    {"stable.sign", 20000, 0, ncclBfloat16, false, "sign", Values::kNoise, 0, false},
    {"stable.topk", 50000, 0, ncclFloat32, false, "topk:ratio=0.02", Values::kNoise, 0, false},
    {"stable.randomk", 40000, 0, ncclFloat32, false, "randomk:ratio=0.05", Values::kNoise, 0,
     false},
    {"stable.dgc", 40000, 0, ncclFloat32, false, "dgc:ratio=0.02", Values::kNoise, 0, false},
    {"stable.powersgd", 12288, 0, ncclFloat32, false, "powersgd:rank=2", Values::kNoise, 96, false},
    {"stable.fp16", 10000, 0, ncclFloat32, false, "fp16", Values::kIntegers, 0, false},
    {"policy.big", 524288, 0, ncclBfloat16, false, nullptr, Values::kNoise, 0, false},
    {"stable.none", 5000, 0, ncclFloat32, false, "none", Values::kIntegers, 0, false},
    {"stable.int32", 4096, 0, ncclInt32, false, nullptr, Values::kIntegers, 0, false},
    {"policy.enc", 16384, 0, ncclFloat32, false, nullptr, Values::kNoise, 0, false},
    {"", 8192, 0, ncclFloat32, false, nullptr, Values::kIntegers, 0, false},
    {"resize.qsgd", 7000, 9000, ncclFloat32, false, "qsgd:levels=15", Values::kNoise, 0, false},
    {"phase.a", 20000, 0, ncclFloat32, false, "int8:block=64", Values::kNoise, 0, true},
    {"phase.b", 10000, 0, ncclFloat16, true, nullptr, Values::kNoise, 0, true},
    {"phase.c", 5120, 0, ncclFloat32, false, "powersgd:rank=1", Values::kNoise, 64, true},
};

// The slots checked against the model, one per iteration of a checkpoint period (the rest of
// the period checks none): every compressed tensor.
// policy.enc (14) is compressed on even steps only, so it comes at an even position.
const int kModelRotation[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 16, 14, 17, 18, 19};
constexpr size_t kRotationLength = sizeof(kModelRotation) / sizeof(kModelRotation[0]);
static_assert(kRotationLength <= kCheckpointIterations, "one check per iteration at most");
static_assert(kCheckpointIterations % kGenerationIterations == 0, "patterns repeat per period");
static_assert(kCheckpointIterations % (2 * kResizeIterations) == 0, "patterns repeat per period");

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

const char* const kPolicy = R"(rules:
  - match: {name: "policy\\.enc"}
    codec: int8
    params: {block: 128, rounding: stochastic}
    schedule: {start: 2, every: 2}
  - match: {name: "policy\\.big"}
    codec: int8
    fallback: "qsgd:levels=15"
  - match: {name: "phase\\.b\\.g[0-9]+"}
    codec: "topk:ratio=0.05"
    fallback: "qsgd:levels=15"
  - match: {name: ""}
    codec: bf16
  - codec: none
)";

const Slot& slot(int index) {
  return kTable[index];
}

PlannedCall plan_call(int slot_index, uint64_t iteration) {
  const Slot& s = kTable[slot_index];
  PlannedCall call;
  call.slot = slot_index;
  call.name = s.name;
  call.count = s.count;
  if (s.resized_count != 0 && (iteration / kResizeIterations) % 2 == 1) {
    call.count = s.resized_count;
  }
  if (s.phase) {
    call.generation = iteration / kGenerationIterations;
    call.name += ".g" + std::to_string(call.generation);
  }
  const uint64_t position = iteration % kCheckpointIterations;
  call.model_check = position < kRotationLength && kModelRotation[position] == slot_index;
  return call;
}

uint64_t input_seed(const PlannedCall& call, uint64_t iteration, int rank) {
  return mix(fnv1a(call.name) ^ mix(iteration) ^ (uint64_t(call.slot) << 48) ^
             (uint64_t(rank) << 56));
}

double input_value(Values values, uint64_t seed, size_t i) {
  const uint64_t h = mix(seed + i * 0x9e3779b97f4a7c15ull);
  if (values == Values::kIntegers) return double(int64_t((h >> 40) % 61) - 30);
  return double(h >> 40) * 0x1p-23 - 1.0;  // [-1, 1)
}

}  // namespace soak
}  // namespace terse
