// The planner: the one place that decides how a compressed allreduce runs (docs/design.md sections
// 3 and 5). Once per call it turns the tensor (count, dtype), the policy's codec (or `auto` with
// its max_rel_err), the node layout and link model from topology, and the codecs' measured speeds
// into a plan: codec, algorithm (hierarchical or flat, and the algorithm between node leaders),
// rank group and pipeline piece size, with the predicted time of every candidate it weighed
// (cost_model.h). Every compressed allreduce executes a plan.
//
// Candidates:
//   a fixed codec     what the rows of compressed_algorithm_table.h say: the codec family's own
//                     row if one accepts it (PowerSGD powersgd, shared-seed Random-K randomk,
//                     sparse codecs sparse_allgather), else every flat row auto weighs (tree,
//                     recursive_doubling and sra; the compressed ring is never chosen: sra moves
//                     the same bytes through two lossy steps instead of n); each flat and inside
//                     every composite row whose structure the communicator has: hierarchical
//                     where it spans nodes with several ranks on some node, rail-aligned where
//                     those nodes hold equal numbers of ranks and the codec keeps no per-tensor
//                     state (TERSE_HIERARCHICAL=off drops the composites, =on the flat ones).
//                     Each row's cost function predicts its time. TERSE_COMPRESSED_ALGO forces
//                     one algorithm.
//   auto              the candidates of every codec of kAutoCodecs whose stated error bound for
//                     the whole allreduce, (1 + c)^k - 1 with c the codec's per-encode bound and
//                     k the algorithm's lossy steps (compressed_error_bound.h), is at most
//                     max_rel_err; and the uncompressed allreduce (the ring or recursive
//                     doubling, as the communicator would run it), which wins wherever
//                     compression cannot pay.
// The fastest prediction wins; ties go to the earlier candidate. `auto` compresses only when the
// fastest compressed candidate is predicted kAutoMinGain times faster than the uncompressed
// allreduce: compression costs accuracy, and a model that is off by a little must not make a
// call slower for nothing.
//
// Codec speeds enter the model as measured by one thread (codec_speed.h), times the share of a
// core each rank of the busiest node gets (available cores / ranks on the node, at most 1), and,
// with error feedback, the pass that adds the residual (at the reduction's speed).
//
// Every rank reaches the same plan: the inputs are the same on every rank (the call, the agreed
// policy and host identities) or agreed explicitly: the link model when the planner is created,
// and each codec's speed the first time a plan needs it (a control allgather inside that call,
// which every rank makes at the same call because their decisions are the same), both taking the
// slowest rank's figures.
//
// Learning (TERSE_PLANNER_LEARN, on by default; issue 24). The figures above are a prior: every
// call the engine plans on host buffers refines them from what it measured, with no traffic of
// its own (learned_figures.h holds the arithmetic):
//   codec speeds   the call's encode and decode seconds (CompressionCounters) against the parts
//                  of its prediction that encode and decode make;
//   the rest       of the figures the call's time rests on most (the bandwidth or the latency of
//                  the link it crossed, between nodes once the communicator spans several, or, for
//                  an uncompressed call, which measured no codec work, the additions' speed), the
//                  factor under which the cost model, fed the call's own codec seconds, predicts
//                  the time the call took. Uncompressed calls of `auto` count too.
// The ranks agree on them (one control allgather of each rank's sums, at the start of a call
// every rank counts alike: after the first call, then at gaps that double up to 32 calls while
// every rank's calls stay within 1.5x of their predictions, back to every call when one does
// not); links take every rank's mean, codecs the slowest rank's. A factor that moved by more
// than 5% makes every plan stale: the next call of each tensor is planned again, keeping its
// choice while that is predicted within kKeepWithin (10%) of the best, so that choices do not
// flap between close candidates; a change of choice is logged at INFO with the predictions and
// figures behind it.
// Exploration keeps the figures of `auto`'s rejected codecs fresh: a tensor's 2nd and 4th calls
// run the two contenders (candidates predicted within kExploreWithin of the best that compress
// as the best does: a call the device route staged stays staged), and every kExplorePeriod-th
// call one of them in turn. The choice depends only on agreed figures and the tensor's calls, so
// every rank explores alike. A fixed codec's calls never explore: a policy that names a codec
// gets it on the algorithm predicted fastest, call after call. The residual carries over between
// stateless codecs of one layout (memory/residual_memory.h), so a call that explores drops none
// of it. Device buffers teach nothing (their time is the GPU's and the copies'), but explore
// alike.
//
// Sources: planner.cpp (the plan of a call: the candidates weighed and the selection, the cache
// of agreed plans), planner_agreement.cpp (the figures the ranks agree on, and a plan's figures
// from them), planner_candidates.cpp (a codec's candidates from the algorithm tables, and the
// uncompressed allreduce's prediction), planner_learning.cpp (Learning: observations,
// agreements, exploration, the estimates).
#pragma once

#include <nccl.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "codecs/codec.h"
#include "collectives/algorithm_table.h"
#include "collectives/collective_args.h"
#include "collectives/compressed/codec_speed.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/compressed/compressed_args.h"
#include "collectives/compressed/engine_statistics.h"
#include "collectives/compressed/learned_figures.h"
#include "collectives/cost_model.h"
#include "topology/link_model.h"

namespace terse {

class Transport;

// Whether TERSE_HIERARCHICAL lets a multi-node communicator run hierarchically.
enum class HierarchyMode { kAuto, kOn, kOff };
ncclResult_t parse_hierarchy_mode(const std::string& text, HierarchyMode* mode);

// How much faster than uncompressed `auto` wants a compressed plan to be (file comment).
constexpr double kAutoMinGain = 1.2;
// Exploration (Learning, file comment): the contenders a tensor's calls try now and then.
constexpr double kExploreWithin = 1.5;
constexpr size_t kMaxContenders = 2;
constexpr uint64_t kExplorePeriod = 50;
// A re-plan keeps the previous choice while it is predicted within this factor of the best.
constexpr double kKeepWithin = 1.1;

// The codecs `auto` weighs (canonical specs as the registry makes them from these).
const std::vector<std::string>& auto_codec_candidates();

struct PlanCandidate {
  std::string codec = "none";  // canonical spec; "none" for the uncompressed allreduce
  std::string algorithm;       // a table name, "hierarchical/<inner>", or "dense_ring" ...
  Prediction prediction;
  double error_bound = 0;  // relative bound of the result, (1 + c)^k - 1
  // What runs it: the codec (null for the uncompressed allreduce), the table row, and the row
  // between node leaders of a composite.
  Codec* codec_object = nullptr;
  const CompressedAlgorithmInfo* run = nullptr;
  const CompressedAlgorithmInfo* inner = nullptr;
};

struct CallPlan {
  Codec* codec = nullptr;  // null: run the uncompressed allreduce
  const CompressedAlgorithmInfo* algorithm = nullptr;
  // The algorithm between node leaders when `algorithm` is hierarchical.
  const CompressedAlgorithmInfo* inner = nullptr;
  PeerGroup group;
  size_t piece_bytes = 0;
  // With memory residual: the stage residual the algorithm keeps (EntryOptions::stage_count).
  size_t stage_elements = 0;
  std::vector<PlanCandidate> candidates;
  int chosen = -1;  // index into candidates: what runs
  int best = -1;    // the candidate predicted fastest (chosen, unless this call explores)
  // Every codec speed the plan used was agreed between the ranks, so every rank that asks the
  // same question gets this plan, even one made without agreeing (PlanRequest::may_agree false).
  bool agreed = false;

  // "int8 sra 12.3 ms (of: none dense_ring 80.1 ms, int8 tree 40.2 ms, ...)", for the log.
  std::string describe() const;
  // "int8 sra": the chosen candidate's codec and algorithm.
  std::string choice() const;
};

struct PlanRequest {
  size_t count = 0;
  DType dtype = DType::kFloat32;
  Codec* codec = nullptr;       // the policy's codec, or null for `auto`
  double max_rel_err = 0;       // `auto`'s bound
  bool error_feedback = false;  // the call adds a residual before encoding (memory residual)
  // Whether this call may agree on codec speeds with the other ranks (a control allgather):
  // true inside an allreduce, false for questions (CompressionEngine::decide), which then use
  // this rank's own figures where none were agreed yet.
  bool may_agree = true;
};

class Planner {
 public:
  struct Settings {
    const CompressedAlgorithmInfo* forced = nullptr;  // TERSE_COMPRESSED_ALGO
    HierarchyMode hierarchy = HierarchyMode::kAuto;
    size_t piece_bytes = 0;
    // The uncompressed allreduce as the communicator runs it: TERSE_ALGO's allreduce algorithm
    // ("ring", "recursive_doubling"; "" for the size rule of allreduce_selection.h), and its
    // pipeline pieces (TERSE_PIECE_BYTES).
    std::string dense_forced;
    size_t dense_piece_bytes = size_t{1} << 20;
    // TERSE_PLANNER_LEARN: whether the figures are learned from the calls and candidates
    // explored (Learning, above); off, every plan stays on the nominal figures and probes.
    bool learn = true;
  };
  // Makes (once) the codec of a canonical spec: auto's candidates.
  using CodecMaker = std::function<ncclResult_t(const std::string& spec, Codec** codec)>;

  // Collective: every rank of `transport` calls it at communicator creation. Learns the nodes
  // from the ranks' host identities, this process's link model from topology, and agrees on the
  // link model with every rank (the slowest link, the longest latency).
  static ncclResult_t create(Transport* transport, const Settings& settings, CodecMaker make_codec,
                             std::unique_ptr<Planner>* out);

  // The plan for `request`; plans made with agreed figures (may_agree) are kept and reused.
  ncclResult_t plan(const PlanRequest& request, CallPlan* plan);

  // Collective: measures and agrees now the speeds of every codec `auto` may weigh, so that
  // later plans of `auto` are agreed (CallPlan::agreed) without a call agreeing on them.
  ncclResult_t agree_auto_speeds();

  // ---- Learning (file comment) ----
  // Collective, at the start of every allreduce the engine plans (every rank counts them alike):
  // agrees on what the ranks measured since the last agreement when one is due.
  ncclResult_t begin_call();
  // What a call that ran `plan` (made for `request`) measured on this rank.
  struct Measured {
    double seconds = 0;         // the whole call
    double encode_seconds = 0;  // in encodes (CompressionCounters)
    double decode_seconds = 0;
  };
  void observe(const PlanRequest& request, const CallPlan& plan, const Measured& measured);
  // From now on nothing is learned or explored (a communicator that hands calls off decides
  // them outside the calls that agree, so its figures must stay as they are).
  void stop_learning() { learning_ = false; }
  // The current estimates, for the statistics.
  PlannerEstimates estimates() const;

  // Whether the communicator spans several nodes (the policy's link class).
  bool multi_node() const { return shape_.nodes > 1; }

  // Predicted seconds of an uncompressed collective of `kind` as the communicator runs it:
  // `algorithm` is the dense table's name (algorithm_table.h), whose row holds its cost, the
  // call `count` elements of `element_bytes`; on the agreed link model, so every rank predicts
  // alike. 0 for an algorithm the table does not hold.
  double predict_uncompressed(CollectiveKind kind, const std::string& algorithm, size_t count,
                              size_t element_bytes) const;

  // For tests: a planner over given figures, without a transport (speeds are never measured
  // or agreed: `speeds` must hold every codec the plans need, by spec, and "reduce").
  static std::unique_ptr<Planner> for_figures(int rank, const std::vector<std::string>& hosts,
                                              const LinkModel& links, const Settings& settings,
                                              CodecMaker make_codec,
                                              std::map<std::string, CodecSpeed> speeds,
                                              double reduce_bytes_per_s, double cpu_share = 1.0);

 private:
  Planner() = default;
  ncclResult_t make_plan(const PlanRequest& request, CallPlan* plan);
  // A re-plan keeps the request's `previous` choice ("codec algorithm") while it is predicted
  // within kKeepWithin of the fresh best: choices do not flap between close candidates (a fixed
  // codec moving to an algorithm with another stage residual recreates its tensors' entries).
  void keep_unless_clearly_slower(const PlanRequest& request, const std::string& previous,
                                  CallPlan* fresh) const;
  // Makes candidate `index` the one that runs.
  void choose(const PlanRequest& request, int index, CallPlan* plan) const;
  // The candidate this call of a tensor explores instead of the best, or -1 (Learning, above):
  // `calls` counts the tensor's calls so far, this one included.
  int exploration(const CallPlan& plan, uint64_t calls) const;
  // The link model with the learned factors applied.
  LinkModel effective_links() const;
  // Seconds per byte of an fp32 addition on one rank, the learned factor applied.
  double reduce_seconds_per_byte() const;
  // A candidate's prediction on `figures` and `links`.
  Prediction predict_candidate(const PlanCandidate& candidate, const CodecFigures& figures,
                               const LinkModel& links, size_t bytes) const;
  // One line of the learned figures, for the log.
  std::string describe_figures() const;
  // The dense allreduce the communicator runs for `bytes` (TERSE_ALGO's, else the table's
  // default); never null.
  const AlgorithmInfo* dense_allreduce(size_t bytes) const;
  // The question to the cost model for `figures` on this communicator, in pieces of `piece`.
  CostQuery query(const CodecFigures& figures, size_t piece_bytes) const;
  // Agreed speeds of `codecs` (and of the reduction), measuring and agreeing what is missing
  // when `may_agree`, else this rank's own figures for those.
  ncclResult_t speeds_of(const std::vector<Codec*>& codecs, bool may_agree);
  CodecFigures figures_of(const Codec* codec, size_t count, DType dtype, bool error_feedback) const;
  // The algorithms `codec` may run here, as the file comment lists them.
  std::vector<const CompressedAlgorithmInfo*> algorithms_for(const Codec& codec,
                                                             size_t count) const;
  void add_candidates(Codec& codec, const PlanRequest& request, bool bounded, CallPlan* plan) const;

  Transport* transport_ = nullptr;
  Settings settings_;
  CodecMaker make_codec_;
  int rank_ = 0;
  std::vector<std::string> hosts_;
  GroupShape shape_;
  bool equal_nodes_ = true;  // every node holds as many ranks (rails apply)
  LinkModel links_;
  // Plans made with agreed figures, by request (at most kMaxCachedPlans; then started over).
  struct PlanKey {
    const Codec* codec;
    size_t count;
    DType dtype;
    double max_rel_err;
    bool error_feedback;
    static PlanKey of(const PlanRequest& request) {
      return PlanKey{request.codec, request.count, request.dtype, request.max_rel_err,
                     request.error_feedback};
    }
    bool operator<(const PlanKey& other) const {
      return std::tie(codec, count, dtype, max_rel_err, error_feedback) <
             std::tie(other.codec, other.count, other.dtype, other.max_rel_err,
                      other.error_feedback);
    }
  };
  static constexpr size_t kMaxCachedPlans = 4096;
  // A request's plan, made on the figures of `generation`, and what its calls did.
  struct KeyState {
    CallPlan plan;
    uint64_t generation = 0;
    uint64_t calls = 0;
    double last_measured = 0;  // seconds of its last observed call
    std::string last_choice;   // what that call ran
  };
  std::map<PlanKey, KeyState> plans_;
  // Learning (file comment): the learned factors, the calls counted for their agreements, and the
  // generation of the figures (plans made on an older one are made again).
  bool learning_ = false;
  LearnedFigures learned_;
  uint64_t calls_ = 0;
  uint64_t generation_ = 0;
  uint64_t plan_changes_ = 0;
  uint64_t explorations_ = 0;
  std::map<std::string, CodecSpeed> agreed_;  // by spec
  std::map<std::string, CodecSpeed> own_;     // this rank's, not yet agreed
  double reduce_bytes_per_s_ = 0;             // agreed with the link model
  double cpu_share_ = 1;                      // of a core, per rank of the busiest node
};

}  // namespace terse
