// What the soak reduces: a training loop's worth of tensors, the same on every rank. Each
// iteration makes one allreduce of each of kSlots slots, in slot order:
//   - stable tensors, reduced every iteration: one per codec (int8, int4, int2, qsgd, terngrad,
//     sign, topk, randomk, dgc, powersgd) with a per-call codec (terseTensor::codec), fp32, fp16
//     and bf16, sum and avg, sizes that run every default algorithm (tree, recursive doubling,
//     scatter-reduce-allgather, sparse allgather, randomk, powersgd); the fp16 cast, "none" and
//     int32 on small integers, which must come back exact;
//   - tensors decided by the policy (kPolicy, set with terseCommSetPolicy): a scheduled int8
//     (compressed every other step); an anonymous ncclAllReduce keyed by its buffer (the bf16
//     cast, on small integers: exact); and a tensor whose residual entry alone exceeds the cap
//     the soak sets (2 MiB: its residual is 2 MiB, its owner residual more), which residual
//     memory never admits: it runs its rule's fallback codec every call (one WARN per rank);
//   - a tensor whose element count changes every kResizeIterations (its entry is recreated);
//   - phase tensors, whose names carry a generation that changes every kGenerationIterations:
//     the old names go idle for good, and residual memory evicts them to admit the new ones
//     (TERSE_MEMORY_IDLE_STEPS; the cap holds two generations beside the stable tensors).
// A rotation of the compressed tensors is checked against the reference model: on iteration i,
// the tensor of kModelRotation[i % kCheckpointIterations] (when there is one) has its residual
// reset on every rank before its call (terseCommResetResidual), so the model can replay the call
// from empty memory. Every pattern repeats every kCheckpointIterations iterations, where the
// soak samples the process: checkpoints compare like with like.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace terse {
namespace soak {

constexpr int kSlots = 20;
constexpr uint64_t kCheckpointIterations = 20;
constexpr uint64_t kCheckpointCalls = kSlots * kCheckpointIterations;
constexpr uint64_t kGenerationIterations = 2;
constexpr uint64_t kResizeIterations = 10;

// What every element of a tensor's inputs is.
enum class Values {
  kIntegers,  // small integers (|x| <= 30): every sum of up to 8 ranks is exact in every dtype
  kNoise,     // floats in [-1, 1)
};

struct Slot {
  const char* name;  // "" for an anonymous ncclAllReduce; phase tensors append ".g<generation>"
  size_t count;
  size_t resized_count;  // the count on odd resize periods, 0 when it never changes
  ncclDataType_t type;
  bool average;       // ncclAvg, else ncclSum
  const char* codec;  // per-call codec, nullptr to let the policy decide
  Values values;
  size_t rows;  // a matrix view of rows x count/rows (PowerSGD), 0 for none
  bool phase;   // renamed every generation
};

const Slot& slot(int index);

// The policy the soak sets on its communicator (terseCommSetPolicy).
extern const char* const kPolicy;

// One call of an iteration.
struct PlannedCall {
  int slot = 0;
  std::string name;  // "" anonymous
  size_t count = 0;
  uint64_t generation = 0;   // of a phase tensor, 0 otherwise
  bool model_check = false;  // reset before, checked against the model after
};

PlannedCall plan_call(int slot_index, uint64_t iteration);

// Rank `rank`'s inputs of a call at `iteration` are input_value(values, input_seed(...), i): the
// same functions on every rank, so each can recompute the others' inputs.
uint64_t input_seed(const PlannedCall& call, uint64_t iteration, int rank);
double input_value(Values values, uint64_t seed, size_t i);

}  // namespace soak
}  // namespace terse
