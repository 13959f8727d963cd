// What the planner's tests share: codecs made on demand, link models, host lists and the codec
// speeds this machine measured.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codecs/codec_registry.h"
#include "collectives/compressed/planner.h"

namespace terse {

// Codecs made on demand and kept, as the engine does.
class Codecs {
 public:
  Codec* get(const std::string& spec) {
    auto found = made_.find(spec);
    if (found == made_.end()) {
      std::unique_ptr<Codec> codec;
      EXPECT_EQ(create_codec(spec, &codec), ncclSuccess) << spec;
      found = made_.emplace(spec, std::move(codec)).first;
    }
    return found->second.get();
  }
  Planner::CodecMaker maker() {
    return [this](const std::string& spec, Codec** codec) {
      *codec = get(spec);
      return ncclSuccess;
    };
  }

 private:
  std::map<std::string, std::unique_ptr<Codec>> made_;
};

inline LinkModel links(double intra_latency, double intra_bandwidth, double inter_latency,
                       double inter_bandwidth) {
  LinkModel model;
  model.intra = LinkCost{intra_latency, intra_bandwidth};
  model.inter = LinkCost{inter_latency, inter_bandwidth};
  return model;
}

inline std::vector<std::string> hosts(int nodes, int ranks_per_node) {
  std::vector<std::string> names;
  for (int node = 0; node < nodes; ++node) {
    for (int r = 0; r < ranks_per_node; ++r) names.push_back("node" + std::to_string(node));
  }
  return names;
}

inline const PlanCandidate& chosen(const CallPlan& plan) {
  return plan.candidates.at(static_cast<size_t>(plan.chosen));
}

// Speeds as this machine's codec_perf measured them (perf/RESULTS.md, rounded), by spec as the
// registry spells each auto candidate.
inline std::map<std::string, CodecSpeed> realistic_speeds(Codecs& codecs) {
  const std::map<std::string, std::pair<double, double>> gbps = {{"fp16", {2.0, 4.0}},
                                                                 {"bf16", {2.0, 4.0}},
                                                                 {"int8", {1.5, 3.0}},
                                                                 {"int4", {1.2, 2.5}},
                                                                 {"int2", {1.2, 2.5}},
                                                                 {"sign", {1.0, 2.0}},
                                                                 {"topk:ratio=0.01", {0.3, 20.0}},
                                                                 {"powersgd:rank=4", {0.5, 2.0}}};
  std::map<std::string, CodecSpeed> speeds;
  for (const auto& [spec, speed] : gbps) {
    speeds[codecs.get(spec)->spec()] = CodecSpeed{speed.first * 1e9, speed.second * 1e9};
  }
  return speeds;
}

}  // namespace terse
