// The compression engine of one communicator: consults the policy for every allreduce and, when
// it says compress, runs the call through a compressed algorithm with the tensor's residual
// memory (docs/design.md section 3). The communicator asks it first for every allreduce; calls it
// leaves alone run the dense algorithms exactly as before and are only counted.
//
// Per call:
//   1. the tensor key: the communicator plus the C API name, or the user's recvbuff (count and
//      dtype ride along as attributes, tensor_key.h); its step = how many allreduces of it this
//      communicator ran before. A tensor not reduced for kForgetIdleSteps communicator steps (or
//      TERSE_MEMORY_IDLE_STEPS, when larger) is forgotten, its step with its log and refusal
//      notes: the names and buffers of a long run come and go (phases, renamed tensors, anonymous
//      buffers at new addresses), and their bookkeeping must not grow with them. One that comes
//      back starts again at step 0 (its residual entry, unless evicted meanwhile, is kept);
//   2. the decision: the tensor's codec override (terseAllReduceTensor), else the policy
//      (TERSE_CODEC / TERSE_POLICY / terseCommSetPolicy) for {name, bytes, dtype, op, comm size,
//      link class, step};
//   3. the plan (planner.h): for the decision's codec, the algorithm (flat or hierarchical, and
//      the algorithm between node leaders) the cost model predicts fastest, or the one
//      TERSE_COMPRESSED_ALGO forces (refused if it cannot run the codec); for `auto`, also the
//      codec: the fastest whose stated bound keeps the rule's max_rel_err, or none when the
//      uncompressed allreduce is predicted fastest;
//   4. the tensor's residual entry, from this communicator's residual memory (cap
//      TERSE_MEMORY_MAX_BYTES, admission with idle eviction after TERSE_MEMORY_IDLE_STEPS,
//      memory/residual_memory.h), whose clock is the communicator's step: the largest step of
//      any of its tensors (with every tensor reduced once per iteration, the training
//      iteration). A tensor the memory does not admit runs a path that needs no memory: its
//      rule's fallback codec (policy `fallback`, memory none) or else the dense allreduce,
//      exactly; one WARN per tensor says so, naming it and the cap, and the statistics count
//      it. Every rank makes the same calls under the same agreed cap, so every rank decides
//      alike and takes the same path;
//   5. the run, with a seed every rank derives alike (communicator, operation, step), and the
//      statistics (terse.h: terseCommGetStats).
// TERSE_DEBUG=INFO prints each tensor's first decision at each size and type, with the plan's
// predicted times.
//
// Threading: allreduce()/record_dense() run under the communicator's call lock; the policy,
// statistics and residual calls of the C API may come from any thread (a mutex guards them,
// and is not held while an allreduce's messages are on the wire).
//
// Sources: compression_engine.cpp (creation, an allreduce's flow), compression_decision.cpp
// (1.-3.: key, step, decision, plan, and the predictions made of it), tensor_clock.cpp (steps and
// forgetting), residual_admission.cpp (4.), compression_hand_off.cpp (hand-offs to another
// runner), engine_statistics.cpp (5.'s statistics, engine_statistics.h, and the C API).
#pragma once

#include <nccl.h>
#include <atomic>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codecs/codec.h"
#include "collectives/collective_args.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/compressed/compressed_args.h"
#include "collectives/compressed/compression_scratch.h"
#include "collectives/compressed/engine_statistics.h"
#include "collectives/compressed/memory/residual_memory.h"
#include "collectives/compressed/memory/tensor_key.h"
#include "collectives/compressed/planner.h"
#include "collectives/compressed/policy/policy.h"

namespace terse {

// Pipeline pieces of the compressed algorithms, in bytes of fp32 input
// (TERSE_COMPRESSED_PIECE_BYTES). A quarter of the dense algorithms' 1 MiB: an int8 piece is then
// about 64 KiB on the wire, and at 1 Gbit/s, 4 nodes, 64 MiB, 256 KiB pieces gave int8 3.47x over
// uncompressed against 3.36x with 1 MiB and 2.7x with 4 MiB (perf/RESULTS.md).
constexpr size_t kDefaultCompressedPieceBytes = size_t{256} << 10;

// What the engine is made from: the compression settings the ranks agreed on, parsed once
// (agreed_settings.h reads them from the environment and the communicator passes them here).
struct CompressionSettings {
  Policy policy;  // TERSE_CODEC or TERSE_POLICY; empty: nothing is compressed
  // TERSE_COMPRESSED_ALGO, TERSE_HIERARCHICAL, TERSE_COMPRESSED_PIECE_BYTES, and how the
  // communicator runs an uncompressed allreduce (TERSE_ALGO, TERSE_PIECE_BYTES), which the
  // planner weighs against the rest.
  Planner::Settings planner;
  uint64_t memory_max_bytes = ResidualMemory::kDefaultMaxBytes;    // TERSE_MEMORY_MAX_BYTES
  uint64_t memory_idle_steps = ResidualMemory::kDefaultIdleSteps;  // TERSE_MEMORY_IDLE_STEPS
};

class CompressionEngine {
 public:
  // Makes the engine and its planner (collective: the planner agrees on the link model with
  // every rank).
  static ncclResult_t create(Transport* transport, const CompressionSettings& settings,
                             std::unique_ptr<CompressionEngine>* out);
  ~CompressionEngine();
  CompressionEngine(const CompressionEngine&) = delete;
  CompressionEngine& operator=(const CompressionEngine&) = delete;

  // An allreduce: runs it compressed when the policy says so (*handled = true, the result is
  // the call's). Otherwise *handled = false and nothing happened: the caller runs the dense
  // algorithm and reports it with record_dense().
  ncclResult_t allreduce(const CollectiveArgs& args, const AlgorithmContext& context,
                         bool* handled);
  void record_dense(const CollectiveArgs& args, const char* algorithm, uint64_t wire_bytes,
                    double seconds);
  // Steps that the calls of an open group take before they run (or instead of running, when
  // the group is simulated): kept by the caller that issues the group, never in the engine, so
  // that they reach only the plans made for that group (hand_off_uncompressed, simulate) and
  // never allreduce(), which the stream proxy may run at any moment for a call queued earlier.
  class PendingSteps;
  // A call hand_off_uncompressed gives to another runner, counted once that runner took it.
  class HandOff;

  // Wrap mode (plugin/comm_mode.h) runs the allreduces the policy leaves alone on a real NCCL.
  // *elsewhere = true when `args` is one: the policy's plan at the tensor's next step (after the
  // steps `pending` holds, when the call is in a group) is no compression. Nothing is counted
  // yet: once the runner has taken the call, count_hand_off counts it.
  // A tensor whose rule says `auto` is handed off when auto keeps it uncompressed on codec speeds
  // the ranks have agreed on (prepare_hand_off); otherwise it stays here (*elsewhere = false),
  // where allreduce() agrees on them and decides alike on every rank.
  ncclResult_t hand_off_uncompressed(const CollectiveArgs& args, const PendingSteps* pending,
                                     bool* elsewhere, HandOff* hand_off);
  // A call handed off (hand_off_uncompressed said *elsewhere) that `runner` accepted, counted as
  // allreduce() would count it: the tensor's step moves, so that schedules see every call, and
  // the statistics record codec none, algorithm `runner`. At once when `pending` is null; in a
  // group (which runs at its end, or never when it is simulated) as a step of `pending` only,
  // which later plans of the group see, until commit() counts it for good; a simulated group
  // just drops `pending`.
  void count_hand_off(HandOff hand_off, const char* runner, PendingSteps* pending);
  // The hand-offs `pending` holds, in their order, counted as the calls they were once their
  // group has run (steps, statistics, the decision log); `pending` is left empty.
  void commit(PendingSteps* pending);
  // Collective, once at creation of a communicator that hands calls off: when the policy has an
  // `auto` rule, agrees on the speeds of every codec auto weighs (a probe of each, then one
  // allgather), so that hand_off_uncompressed can decide auto's calls alike on every rank.
  ncclResult_t prepare_hand_off();

  // Device buffers (collectives/device_buffers.h): whether allreduce() would run `args` on the
  // device backend at the tensor's next step, as this rank sees it now: whether it would
  // compress it (every compressed algorithm runs on the backend; the plan never depends on
  // memory kinds, so every rank plans alike whatever its buffers). No agreement: the
  // algorithm's codec speeds may not be agreed yet, and calls queued before it have not moved
  // the tensor's step yet. A prediction for the API layer's choice of route only; allreduce()
  // decides on its own plan, alike on every rank.
  ncclResult_t predicts_backend(const CollectiveArgs& args, bool* backend);
  // ncclGroupSimulateEnd: the seconds the planner predicts for `args`, a call of a group that is
  // simulated instead of run. An allreduce gets the plan allreduce() would make at the
  // tensor's next step as decide() sees it (this rank's codec speeds where none were agreed
  // yet, residual admission as it stands), after the steps `pending` holds: the chosen
  // candidate's prediction when it compresses, else the uncompressed allreduce the
  // communicator runs (`dense_algorithm`, its table name). Other collectives:
  // `dense_algorithm` through the cost model (Planner::predict_uncompressed). Nothing here
  // moves and nothing is counted; the call becomes a step of `pending`, so that a later call of
  // the same tensor in the group is planned at the step after it, as a run would plan it.
  ncclResult_t simulate(const CollectiveArgs& args, const char* dense_algorithm,
                        PendingSteps* pending, double* seconds);

  // Bytes the API layer copied between device and host memory for this communicator's calls
  // (its staging of whole tensors), for the statistics.
  void count_staging_copies(uint64_t to_host, uint64_t to_device);

  // The C API (terse.h).
  CompressionStats stats() const;
  void reset_stats();
  // Replaces the policy (every rank must do the same before its next allreduce).
  void set_policy(Policy policy);
  // How many times set_policy ran: a tensor's plan may have changed since a count read before
  // (the device backend's calls then run without holding their stream: new kernels, new memory).
  uint64_t policy_generation() const { return policy_generation_.load(); }
  // Forgets the residual and codec state of the tensor named `name`, or of every tensor of this
  // communicator when `name` is empty; how many entries went.
  size_t reset_residuals(const std::string& name);
  // What allreduce() would do with `args` at the tensor's next step: codec spec ("none") and
  // algorithm ("" when uncompressed); for a tensor without memory that residual memory would not
  // admit now, its fallback.
  ncclResult_t decide(const CollectiveArgs& args, std::string* codec, std::string* algorithm);
  // This communicator's residual memory.
  ResidualStats residual_stats() const;
  // The codec the policy gives parameter-server receives of a tensor (its matching rule's
  // `ps_receive`, policy/policy.h), "none" when no rule says one.
  std::string ps_receive_codec(const std::string& name, size_t count, ncclDataType_t type) const;
  // Tensors whose step this engine keeps now (for tests: bounded by the tensors used in the
  // last kForgetIdleSteps steps).
  size_t tracked_tensors() const;

  // A tensor not reduced for this many communicator steps is forgotten (the file comment, 1.).
  static constexpr uint64_t kForgetIdleSteps = 1024;

  // Bytes an uncompressed ring allreduce of `bytes` sends from each of `nranks` ranks.
  static uint64_t dense_wire_bytes(uint64_t bytes, int nranks);

 private:
  struct Plan {
    bool compressed = false;
    bool automatic = false;  // the rule said auto (the planner chose the codec or none)
    std::string why;         // for the log when not compressed
    Decision decision;
    Codec* codec = nullptr;
    const CompressedAlgorithmInfo* algorithm = nullptr;
    CallPlan call;        // the planner's plan: algorithm, group, pieces, predictions
    PlanRequest request;  // what the planner was asked for it
    TensorKey key;
    MatrixShape shape;
    DType dtype = DType::kFloat32;
    uint64_t step = 0;
  };

  CompressionEngine() = default;
  // The tensor key, its step (after those `pending` holds, when not null), the decision, codec
  // and algorithm for `args` (mutex_ held); `may_agree`: inside an allreduce, where the planner
  // may agree on codec speeds.
  ncclResult_t plan(const CollectiveArgs& args, bool may_agree, const PendingSteps* pending,
                    Plan* plan);
  // The planner's plan for `codec` (null: auto within `max_rel_err`) on `plan`'s tensor.
  ncclResult_t plan_call(Codec* codec, double max_rel_err, bool may_agree, Plan* plan);
  // The codec of canonical spec `spec`, made once from `name` and `params`.
  ncclResult_t codec_for(const std::string& spec, const std::string& name,
                         const CodecParams& params, Codec** codec);
  // Counts a call of `plan`'s tensor and moves the communicator's step (mutex_ held).
  void advance_clock(const Plan& plan);
  // Forgets the tensors not reduced for kForgetIdleSteps (or the residual memory's idle steps,
  // when larger) communicator steps: their steps, log and refusal notes (mutex_ held).
  void forget_idle_tensors();
  // Whether `plan` keeps a residual entry (memory other than none, or a codec with state), and
  // the entry it asks residual memory for.
  bool needs_entry(const Plan& plan) const;
  // `memory`, `stream`: where the call's residual lives (EntryOptions).
  EntryOptions entry_options(const Plan& plan, Memory memory = Memory::kHost,
                             void* stream = nullptr) const;
  // decide()'s plan (mutex_ held): the plan at the tensor's next step (after those `pending`
  // holds), its fallback when residual memory would not admit it now.
  ncclResult_t predict(const CollectiveArgs& args, const PendingSteps* pending, Plan* plan);
  // Turns `plan` into its rule's fallback: the fallback codec with memory none when the rule
  // names one and the algorithm can run it, else uncompressed; `path` says which, for messages.
  ncclResult_t switch_to_fallback(Plan* plan, bool may_agree, std::string* path);
  // switch_to_fallback for a call the memory refused, counted, with one WARN per tensor.
  ncclResult_t fall_back(const Admission& admission, Plan* plan);
  // After an admission: an INFO line when the tensor had been refused before.
  void note_admitted(const TensorKey& key);
  // The decision of the one-rule policy naming `spec` (mutex_ held).
  ncclResult_t decide_with_spec(const std::string& spec, const TensorInfo& info,
                                Decision* decision);
  void log_first_decision(const Plan& plan, const CollectiveArgs& args);
  // count_hand_off's counting (mutex_ held).
  void count_hand_off_locked(const HandOff& hand_off);
  void record(const std::string& codec, const std::string& algorithm, uint64_t raw_bytes,
              uint64_t wire_bytes, const CompressionCounters& counters, double seconds,
              bool compressed);

  Transport* transport_ = nullptr;
  uint64_t comm_id_ = 0;  // TensorKey::comm of this communicator's tensors
  LinkClass link_ = LinkClass::kIntra;
  std::unique_ptr<Planner> planner_;
  // This communicator's error-feedback memory (thread-safe on its own).
  std::unique_ptr<ResidualMemory> residuals_;

  mutable std::mutex mutex_;
  std::atomic<uint64_t> policy_generation_{0};
  Policy policy_;
  std::map<std::string, std::unique_ptr<Codec>> codecs_;  // by canonical spec
  // One-rule policies of per-call codecs and of `auto`'s choices, by spec as given.
  std::map<std::string, Policy> one_rule_policies_;
  // Per tensor: its allreduces so far (its step) and the communicator's step at its last.
  struct TensorRecord {
    uint64_t calls = 0;
    uint64_t last_used = 0;
  };
  std::unordered_map<TensorKey, TensorRecord, TensorIdentityHash, TensorIdentityEqual> steps_;
  // The communicator step at which forget_idle_tensors() looks again.
  uint64_t next_forget_ = 0;
  // The communicator's step, residual memory's clock: the largest step of any tensor so far,
  // counted on from step_base_ (its value + 1) since steps_ last started over.
  uint64_t comm_step_ = 0;
  uint64_t step_base_ = 0;
  // The plans logged at INFO (log_first_decision): one line per tensor identity, element count
  // and NCCL type, so a buffer that comes back at another size or type (a size sweep over one
  // buffer, a resized bucket) is logged again with its new plan. TensorKey's dtype is float32
  // for the integer types, hence the NCCL type beside it.
  struct LoggedPlan {
    TensorKey key;
    ncclDataType_t type = ncclFloat32;
  };
  struct LoggedPlanHash {
    size_t operator()(const LoggedPlan& logged) const;
  };
  struct LoggedPlanEqual {
    bool operator()(const LoggedPlan& a, const LoggedPlan& b) const {
      return same_tensor(a.key, b.key) && a.key.count == b.key.count && a.type == b.type;
    }
  };
  std::unordered_set<LoggedPlan, LoggedPlanHash, LoggedPlanEqual> logged_;
  // Tensors residual memory refused (warned about once each): whether they are without memory
  // now.
  std::unordered_map<TensorKey, bool, TensorIdentityHash, TensorIdentityEqual> refused_;
  CompressionStats stats_;
  CompressionScratch scratch_;
  // An uncompressed call `auto` planned, which the communicator is running now: record_dense
  // gives the planner its time (planner.h, Learning).
  struct DenseCall {
    PlanRequest request;
    CallPlan plan;
  };
  std::optional<DenseCall> dense_to_observe_;
};

class CompressionEngine::HandOff {
 private:
  friend class CompressionEngine;
  bool planned = false;  // a plan was made (the policy has rules): the tensor's step moves
  Plan plan;
  CollectiveArgs args;
  std::string runner;
};

class CompressionEngine::PendingSteps {
 public:
  bool empty() const { return steps_.empty() && hand_offs_.empty(); }

 private:
  friend class CompressionEngine;
  // Per tensor, how many of the group's calls count as its steps beyond those of the engine.
  std::unordered_map<TensorKey, uint64_t, TensorIdentityHash, TensorIdentityEqual> steps_;
  // The group's hand-offs, in issue order, to count when the group has run.
  std::vector<HandOff> hand_offs_;
};

}  // namespace terse
