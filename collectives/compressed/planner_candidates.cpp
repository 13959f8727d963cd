// The planner's candidates (planner.h): for a codec, the algorithms the table's rows let it run,
// flat and inside the composites, each with its error bound and predicted time; and the
// uncompressed allreduce's prediction.
#include <algorithm>
#include <string>
#include <vector>

#include "collectives/compressed/planner.h"
#include "collectives/compressed/planner_internal.h"

namespace terse {

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

void Planner::add_candidates(Codec& codec, const PlanRequest& request, bool bounded,
                             CallPlan* plan) const {
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
    candidate.codec_object = &codec;
    candidate.run = run;
    candidate.inner = inner;
    plan->candidates.push_back(candidate);
  };
  for (const CompressedAlgorithmInfo* algorithm : algorithms) {
    if (flat_candidates) consider(algorithm, nullptr, algorithm->name, shape_.ranks);
    for (const CompressedAlgorithmInfo* composite : composites) {
      consider(composite, algorithm, std::string(composite->name) + "/" + algorithm->name,
               inner_ranks);
    }
  }
}

CostQuery Planner::query(const CodecFigures& figures, size_t piece_bytes) const {
  CostQuery query;
  query.codec = figures;
  query.group = shape_;
  query.links = effective_links();
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
  raw.reduce_seconds_per_byte = reduce_seconds_per_byte();
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

}  // namespace terse
