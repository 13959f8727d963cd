#include "collectives/compressed/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <set>

#include <sched.h>

#include "collectives/compressed/compressed_error_bound.h"
#include "collectives/compressed/node_groups.h"
#include "common/log.h"
#include "common/result.h"
#include "topology/local_topology.h"
#include "transport/transport.h"

namespace terse {
namespace {

double relative_bound(const ErrorBound& bound, int lossy_steps) {
  if (!bound.stated) return INFINITY;
  return std::pow(1.0 + bound.factor, lossy_steps) - 1.0;
}

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g ms", seconds * 1e3);
  return text;
}

struct AgreedFigures {
  double intra_latency, intra_bandwidth, inter_latency, inter_bandwidth, inter_rendezvous, reduce,
      cpu_share, nics;
};

// Cores this process may run on.
int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace

ncclResult_t parse_hierarchy_mode(const std::string& text, HierarchyMode* mode) {
  if (text.empty() || text == "auto") {
    *mode = HierarchyMode::kAuto;
  } else if (text == "on" || text == "1") {
    *mode = HierarchyMode::kOn;
  } else if (text == "off" || text == "0") {
    *mode = HierarchyMode::kOff;
  } else {
    return fail(ncclInvalidArgument, "TERSE_HIERARCHICAL=%s: expected auto, on or off",
                text.c_str());
  }
  return ncclSuccess;
}

const std::vector<std::string>& auto_codec_candidates() {
  // Stable under error feedback (auto's memory is residual by default), from the most exact to
  // the smallest on the wire; max_rel_err decides how far down the list a call may go. The
  // block-scaled formats are left out: by their stated bounds each is dominated by int4 (mxfp8
  // M/8 at 0.258 of fp32, mxfp4 M/4 at 0.133, nvfp4 0.177 M at 0.141, against int4's 0.067 M at
  // 0.133), so no max_rel_err makes one the smaller choice; a policy may still name them.
  static const std::vector<std::string> candidates = {
      "fp16", "bf16", "int8", "int4", "int2", "sign", "topk:ratio=0.01", "powersgd:rank=4"};
  return candidates;
}

std::string CallPlan::describe() const {
  std::string text;
  if (chosen >= 0) {
    const PlanCandidate& best = candidates[static_cast<size_t>(chosen)];
    text = best.codec + " " + best.algorithm + " " + milliseconds(best.prediction.seconds);
  }
  if (candidates.size() > 1) {
    text += " (predicted:";
    for (size_t i = 0; i < candidates.size(); ++i) {
      const PlanCandidate& c = candidates[i];
      text += (i == 0 ? " " : ", ") + c.codec + " " + c.algorithm + " " +
              milliseconds(c.prediction.seconds);
    }
    text += ")";
  }
  return text;
}

ncclResult_t Planner::create(Transport* transport, const Settings& settings, CodecMaker make_codec,
                             std::unique_ptr<Planner>* out) {
  std::unique_ptr<Planner> planner(new Planner());
  planner->transport_ = transport;
  planner->settings_ = settings;
  planner->make_codec_ = std::move(make_codec);
  planner->rank_ = transport->rank();
  for (int r = 0; r < transport->nranks(); ++r) {
    planner->hosts_.push_back(transport->host_identity(r));
  }
  const NodeLayout layout = group_into_nodes(planner->hosts_);
  planner->shape_ = shape_of(layout, transport->nranks());
  planner->equal_nodes_ = equal_nodes(layout);

  LinkModel mine;
  TERSE_CHECK(assumed_link_model(local_topology(), "", &mine));
  double reduce = 0;
  TERSE_CHECK(reduce_speed(&reduce));
  // The ranks of this rank's node share its cores (ranks of one process included), and so do
  // ranks of other emulated nodes on this same machine (TERSE_HOSTID splits one machine into
  // nodes; their process spaces still match).
  int local_ranks = static_cast<int>(
      layout.members[static_cast<size_t>(layout.node_of[transport->rank()])].size());
  int same_machine = 0;
  const ProcessIdentity& me = transport->process(transport->rank());
  for (int r = 0; r < transport->nranks(); ++r) {
    same_machine += shares_process_space(me, transport->process(r)) ? 1 : 0;
  }
  local_ranks = std::max(local_ranks, same_machine);
  const double cpu_share = std::min(1.0, double(available_cores()) / std::max(1, local_ranks));
  // The rendezvous size UCX chose for this rank's endpoints to other hosts (SIZE_MAX: never).
  if (const std::optional<size_t> threshold = transport->network_rendezvous_threshold()) {
    mine.inter.rendezvous_bytes = static_cast<double>(*threshold);
  }
  const AgreedFigures own{mine.intra.latency_s,
                          mine.intra.bytes_per_s,
                          mine.inter.latency_s,
                          mine.inter.bytes_per_s,
                          mine.inter.rendezvous_bytes,
                          reduce,
                          cpu_share,
                          static_cast<double>(mine.nics)};
  std::vector<AgreedFigures> all(static_cast<size_t>(transport->nranks()));
  TERSE_CHECK(transport->allgather(&own, sizeof own, all.data()));
  AgreedFigures agreed = own;
  for (const AgreedFigures& f : all) {
    agreed.intra_latency = std::max(agreed.intra_latency, f.intra_latency);
    agreed.intra_bandwidth = std::min(agreed.intra_bandwidth, f.intra_bandwidth);
    agreed.inter_latency = std::max(agreed.inter_latency, f.inter_latency);
    agreed.inter_bandwidth = std::min(agreed.inter_bandwidth, f.inter_bandwidth);
    agreed.inter_rendezvous = std::min(agreed.inter_rendezvous, f.inter_rendezvous);
    agreed.reduce = std::min(agreed.reduce, f.reduce);
    agreed.cpu_share = std::min(agreed.cpu_share, f.cpu_share);
    agreed.nics = std::min(agreed.nics, f.nics);
  }
  planner->links_ = mine;
  planner->links_.intra = LinkCost{agreed.intra_latency, agreed.intra_bandwidth};
  planner->links_.inter =
      LinkCost{agreed.inter_latency, agreed.inter_bandwidth, agreed.inter_rendezvous};
  planner->links_.nics = static_cast<int>(agreed.nics);
  planner->reduce_bytes_per_s_ = agreed.reduce;
  planner->cpu_share_ = agreed.cpu_share;
  if (planner->rank_ == 0) {
    const LinkModel& links = planner->links_;
    const std::string rendezvous =
        links.inter.rendezvous_bytes >= 0x1p64
            ? "never"
            : std::to_string(static_cast<unsigned long long>(links.inter.rendezvous_bytes));
    TERSE_INFO(
        "planner: links agreed by %d ranks: inside a node %.3g us, %.3g GB/s; between nodes "
        "%.3g us, %.3g GB/s, rendezvous from %s bytes, %d NIC(s); additions %.3g GB/s, core "
        "share %.2g",
        transport->nranks(), links.intra.latency_s * 1e6, links.intra.bytes_per_s / 1e9,
        links.inter.latency_s * 1e6, links.inter.bytes_per_s / 1e9, rendezvous.c_str(), links.nics,
        planner->reduce_bytes_per_s_ / 1e9, planner->cpu_share_);
  }
  *out = std::move(planner);
  return ncclSuccess;
}

std::unique_ptr<Planner> Planner::for_figures(int rank, const std::vector<std::string>& hosts,
                                              const LinkModel& links, const Settings& settings,
                                              CodecMaker make_codec,
                                              std::map<std::string, CodecSpeed> speeds,
                                              double reduce_bytes_per_s, double cpu_share) {
  std::unique_ptr<Planner> planner(new Planner());
  planner->settings_ = settings;
  planner->make_codec_ = std::move(make_codec);
  planner->rank_ = rank;
  planner->hosts_ = hosts;
  const NodeLayout layout = group_into_nodes(hosts);
  planner->shape_ = shape_of(layout, static_cast<int>(hosts.size()));
  planner->equal_nodes_ = equal_nodes(layout);
  planner->links_ = links;
  planner->agreed_ = std::move(speeds);
  planner->reduce_bytes_per_s_ = reduce_bytes_per_s;
  planner->cpu_share_ = cpu_share;
  return planner;
}

ncclResult_t Planner::speeds_of(const std::vector<Codec*>& codecs, bool may_agree) {
  std::vector<std::string> missing_specs;
  std::vector<double> mine;
  std::set<std::string> seen;
  for (Codec* codec : codecs) {
    const std::string spec = codec->spec();
    if (agreed_.count(spec) != 0 || !seen.insert(spec).second) continue;
    CodecSpeed speed;
    const auto known = own_.find(spec);
    if (known != own_.end()) {
      speed = known->second;
    } else {
      TERSE_CHECK(codec_speed(*codec, &speed));
      own_[spec] = speed;
    }
    missing_specs.push_back(spec);
    mine.push_back(speed.encode_bytes_per_s);
    mine.push_back(speed.decode_bytes_per_s);
  }
  if (missing_specs.empty() || !may_agree || transport_ == nullptr) return ncclSuccess;
  // Every rank asks for the same specs in the same order (their plans are the same so far).
  const size_t n = static_cast<size_t>(transport_->nranks());
  std::vector<double> all(n * mine.size());
  TERSE_CHECK(transport_->allgather(mine.data(), mine.size() * sizeof(double), all.data()));
  for (size_t i = 0; i < missing_specs.size(); ++i) {
    CodecSpeed slowest{INFINITY, INFINITY};
    for (size_t r = 0; r < n; ++r) {
      slowest.encode_bytes_per_s =
          std::min(slowest.encode_bytes_per_s, all[r * mine.size() + 2 * i]);
      slowest.decode_bytes_per_s =
          std::min(slowest.decode_bytes_per_s, all[r * mine.size() + 2 * i + 1]);
    }
    agreed_[missing_specs[i]] = slowest;
    own_.erase(missing_specs[i]);
    if (rank_ == 0) {
      TERSE_INFO(
          "planner: codec %s: encode %.3g GB/s, decode %.3g GB/s on a core (the slowest "
          "rank's), times a core share of %.2g",
          missing_specs[i].c_str(), slowest.encode_bytes_per_s / 1e9,
          slowest.decode_bytes_per_s / 1e9, cpu_share_);
    }
  }
  return ncclSuccess;
}

CodecFigures Planner::figures_of(const Codec* codec, size_t count, DType dtype,
                                 bool error_feedback) const {
  CodecFigures figures;
  figures.raw_bytes = static_cast<double>(count * dtype_size(dtype));
  figures.input_bytes = static_cast<double>(count * sizeof(float));
  figures.reduce_seconds_per_byte = 1.0 / std::max(reduce_bytes_per_s_ * cpu_share_, 1.0);
  if (codec == nullptr) {
    figures.wire_bytes = figures.raw_bytes;
    return figures;
  }
  figures.wire_bytes = static_cast<double>(codec->wire_bytes(count, dtype, MatrixShape{}));
  const std::string spec = codec->spec();
  const CodecSpeed* speed = nullptr;
  if (const auto agreed = agreed_.find(spec); agreed != agreed_.end()) {
    speed = &agreed->second;
  } else if (const auto own = own_.find(spec); own != own_.end()) {
    speed = &own->second;
  }
  if (speed != nullptr) {
    figures.encode_seconds_per_byte = 1.0 / std::max(speed->encode_bytes_per_s * cpu_share_, 1.0);
    figures.decode_seconds_per_byte = 1.0 / std::max(speed->decode_bytes_per_s * cpu_share_, 1.0);
  }
  if (error_feedback) figures.encode_seconds_per_byte += figures.reduce_seconds_per_byte;
  return figures;
}

std::vector<const CompressedAlgorithmInfo*> Planner::algorithms_for(const Codec& codec,
                                                                    size_t count) const {
  // The family's own algorithm first: a sparse or low-rank codec runs only that one.
  for (const CompressedAlgorithmInfo& algorithm : compressed_algorithm_table()) {
    if (algorithm.role == CompressedRole::kFamily && algorithm.accepts(codec, count)) {
      return {&algorithm};
    }
  }
  std::vector<const CompressedAlgorithmInfo*> algorithms;
  for (const CompressedAlgorithmInfo& algorithm : compressed_algorithm_table()) {
    if (algorithm.role == CompressedRole::kFlat && algorithm.automatic &&
        algorithm.accepts(codec, count)) {
      algorithms.push_back(&algorithm);
    }
  }
  return algorithms;
}

void Planner::add_candidates(Codec& codec, const PlanRequest& request, bool bounded, CallPlan* plan,
                             std::vector<const CompressedAlgorithmInfo*>* runs,
                             std::vector<const CompressedAlgorithmInfo*>* inners) const {
  const CodecFigures figures =
      figures_of(&codec, request.count, request.dtype, request.error_feedback);
  const CostQuery cost_query = query(figures, settings_.piece_bytes);
  const ErrorBound bound = codec.error_bound(request.count);
  const CompressedAlgorithmInfo* forced = settings_.forced;
  const bool forced_flat = forced != nullptr && forced->role != CompressedRole::kComposite;
  // The composites (hierarchical, rail) pay only where a node holds several ranks;
  // TERSE_HIERARCHICAL=on asks for them on any multi-node communicator, =off never; a forced
  // algorithm is run as it is.
  const bool composites_weighed =
      forced == nullptr && shape_.nodes > 1 && settings_.hierarchy != HierarchyMode::kOff &&
      (shape_.most_ranks_per_node > 1 || settings_.hierarchy == HierarchyMode::kOn);
  const bool flat_candidates =
      forced_flat ||
      (forced == nullptr && !(shape_.nodes > 1 && settings_.hierarchy == HierarchyMode::kOn));
  std::vector<const CompressedAlgorithmInfo*> composites;
  for (const CompressedAlgorithmInfo& row : compressed_algorithm_table()) {
    if (row.role != CompressedRole::kComposite || !row.accepts(codec, request.count)) continue;
    if (forced == &row ||
        (composites_weighed && row.automatic && row.applies(shape_, equal_nodes_))) {
      composites.push_back(&row);
    }
  }
  // Where a composite runs its inner algorithm: between nodes, or on the whole group when that
  // gains nothing (one node, or one rank per node).
  const bool nodes_apart = shape_.nodes > 1 && shape_.most_ranks_per_node > 1;
  const int inner_ranks = nodes_apart ? shape_.nodes : shape_.ranks;

  std::vector<const CompressedAlgorithmInfo*> algorithms;
  if (!forced_flat) {
    algorithms = algorithms_for(codec, request.count);
  } else if (forced->accepts(codec, request.count)) {
    algorithms = {forced};
  }
  auto consider = [&](const CompressedAlgorithmInfo* run, const CompressedAlgorithmInfo* inner,
                      const std::string& name, int lossy_ranks) {
    PlanCandidate candidate;
    candidate.codec = codec.spec();
    candidate.algorithm = name;
    const CompressedAlgorithmInfo* lossy = inner != nullptr ? inner : run;
    candidate.error_bound = relative_bound(bound, lossy->lossy_steps(lossy_ranks));
    if (bounded && candidate.error_bound > request.max_rel_err) return;
    candidate.prediction = predict(*run, cost_query, inner);
    plan->candidates.push_back(candidate);
    runs->push_back(run);
    inners->push_back(inner);
  };
  for (const CompressedAlgorithmInfo* algorithm : algorithms) {
    if (flat_candidates) consider(algorithm, nullptr, algorithm->name, shape_.ranks);
    for (const CompressedAlgorithmInfo* composite : composites) {
      consider(composite, algorithm, std::string(composite->name) + "/" + algorithm->name,
               inner_ranks);
    }
  }
}

ncclResult_t Planner::plan(const PlanRequest& request, CallPlan* plan) {
  // A training step asks the same questions every time: the agreed figures never change once
  // agreed, so a plan made with them holds for every later call with the same request.
  const PlanKey key{request.codec, request.count, request.dtype, request.max_rel_err,
                    request.error_feedback};
  if (request.may_agree) {
    const auto known = plans_.find(key);
    if (known != plans_.end()) {
      *plan = known->second;
      return ncclSuccess;
    }
  }
  TERSE_CHECK(make_plan(request, plan));
  if (request.may_agree) {
    if (plans_.size() >= kMaxCachedPlans) plans_.clear();
    plans_.emplace(key, *plan);
  }
  return ncclSuccess;
}

ncclResult_t Planner::agree_auto_speeds() {
  std::vector<Codec*> codecs;
  for (const std::string& spec : auto_codec_candidates()) {
    Codec* codec = nullptr;
    TERSE_CHECK(make_codec_(spec, &codec));
    codecs.push_back(codec);
  }
  return speeds_of(codecs, /*may_agree=*/true);
}

CostQuery Planner::query(const CodecFigures& figures, size_t piece_bytes) const {
  CostQuery query;
  query.codec = figures;
  query.group = shape_;
  query.links = links_;
  query.piece_bytes = static_cast<double>(piece_bytes);
  return query;
}

double Planner::predict_uncompressed(CollectiveKind kind, const std::string& algorithm,
                                     size_t count, size_t element_bytes) const {
  const AlgorithmInfo* row = find_algorithm(kind, algorithm);
  if (row == nullptr) return 0;
  CodecFigures raw;
  raw.raw_bytes = static_cast<double>(count * element_bytes);
  raw.input_bytes = static_cast<double>(count * sizeof(float));
  raw.wire_bytes = raw.raw_bytes;
  raw.reduce_seconds_per_byte = 1.0 / std::max(reduce_bytes_per_s_ * cpu_share_, 1.0);
  return predict(*row, query(raw, settings_.dense_piece_bytes)).seconds;
}

const AlgorithmInfo* Planner::dense_allreduce(size_t bytes) const {
  if (!settings_.dense_forced.empty()) {
    if (const AlgorithmInfo* forced =
            find_algorithm(CollectiveKind::kAllReduce, settings_.dense_forced)) {
      return forced;
    }
  }
  return default_algorithm(CollectiveKind::kAllReduce, bytes, shape_.ranks);
}

ncclResult_t Planner::make_plan(const PlanRequest& request, CallPlan* plan) {
  *plan = CallPlan{};
  plan->piece_bytes = settings_.piece_bytes;
  plan->group = PeerGroup::whole(rank_, static_cast<int>(hosts_.size()));
  plan->group.hosts = hosts_;

  std::vector<Codec*> codecs;
  if (request.codec != nullptr) {
    codecs.push_back(request.codec);
  } else {
    for (const std::string& spec : auto_codec_candidates()) {
      Codec* codec = nullptr;
      TERSE_CHECK(make_codec_(spec, &codec));
      // Only the codecs whose bound can hold on some algorithm are worth measuring.
      const ErrorBound bound = codec->error_bound(request.count);
      if (relative_bound(bound, 1) <= request.max_rel_err) codecs.push_back(codec);
    }
  }
  TERSE_CHECK(speeds_of(codecs, request.may_agree));
  plan->agreed = std::all_of(codecs.begin(), codecs.end(),
                             [&](Codec* codec) { return agreed_.count(codec->spec()) != 0; });

  std::vector<const CompressedAlgorithmInfo*> runs, inners;
  std::vector<Codec*> codec_of;
  if (request.codec == nullptr) {
    // The uncompressed allreduce, as the communicator runs it (allreduce_selection.h and
    // TERSE_ALGO): candidate 0.
    const CodecFigures raw = figures_of(nullptr, request.count, request.dtype, false);
    const AlgorithmInfo* dense = dense_allreduce(request.count * dtype_size(request.dtype));
    PlanCandidate candidate;
    candidate.algorithm = std::string("dense_") + dense->name;
    candidate.prediction = predict(*dense, query(raw, settings_.dense_piece_bytes));
    plan->candidates.push_back(candidate);
    runs.push_back(nullptr);
    inners.push_back(nullptr);
    codec_of.push_back(nullptr);
  }
  for (Codec* codec : codecs) {
    add_candidates(*codec, request, request.codec == nullptr, plan, &runs, &inners);
    codec_of.resize(plan->candidates.size(), codec);
  }
  if (plan->candidates.empty()) {
    // A fixed codec always has an algorithm; only a forced one that cannot run it leaves none.
    return fail(ncclInvalidArgument,
                "TERSE_COMPRESSED_ALGO=%s cannot run codec %s here (it needs another family, a "
                "codec without per-tensor state, or a communicator over several nodes; unset it "
                "to let terse choose)",
                settings_.forced != nullptr ? settings_.forced->name : "?",
                request.codec != nullptr ? request.codec->spec().c_str() : "auto");
  }
  int best = 0;
  for (size_t i = 1; i < plan->candidates.size(); ++i) {
    if (plan->candidates[i].prediction.seconds <
        plan->candidates[static_cast<size_t>(best)].prediction.seconds) {
      best = static_cast<int>(i);
    }
  }
  if (request.codec == nullptr && codec_of[static_cast<size_t>(best)] != nullptr) {
    // auto: the uncompressed candidate comes first; compression must win clearly.
    if (plan->candidates[static_cast<size_t>(best)].prediction.seconds * kAutoMinGain >
        plan->candidates[0].prediction.seconds) {
      best = 0;
    }
  }
  plan->chosen = best;
  const size_t chosen = static_cast<size_t>(best);
  plan->codec = codec_of[chosen];
  plan->algorithm = runs[chosen];
  plan->inner = inners[chosen];
  if (plan->codec != nullptr && plan->algorithm != nullptr) {
    plan->stage_elements = plan->algorithm->stage_elements(*plan->codec, request.count,
                                                           request.dtype, plan->group, plan->inner);
  }
  return ncclSuccess;
}

}  // namespace terse
