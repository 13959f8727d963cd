// The planner's agreed figures (planner.h): the link model every rank agrees on when the planner
// is made, each codec's speed agreed at the first plan that needs it, and the figures a plan's
// cost model reads from them.
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "collectives/compressed/node_groups.h"
#include "collectives/compressed/planner.h"
#include "common/log.h"
#include "common/result.h"
#include "topology/local_topology.h"
#include "transport/transport.h"

namespace terse {
namespace {

// What each rank contributes to the agreement when the planner is made: its link model, the
// reduction's speed and its share of a core; every rank then takes the slowest rank's.
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

ncclResult_t Planner::create(Transport* transport, const Settings& settings, CodecMaker make_codec,
                             std::unique_ptr<Planner>* out) {
  std::unique_ptr<Planner> planner(new Planner());
  planner->transport_ = transport;
  planner->settings_ = settings;
  planner->make_codec_ = std::move(make_codec);
  planner->rank_ = transport->rank();
  planner->learning_ = settings.learn;
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
  planner->learning_ = settings.learn;
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

ncclResult_t Planner::agree_auto_speeds() {
  std::vector<Codec*> codecs;
  for (const std::string& spec : auto_codec_candidates()) {
    Codec* codec = nullptr;
    TERSE_CHECK(make_codec_(spec, &codec));
    codecs.push_back(codec);
  }
  return speeds_of(codecs, /*may_agree=*/true);
}

CodecFigures Planner::figures_of(const Codec* codec, size_t count, DType dtype,
                                 bool error_feedback) const {
  CodecFigures figures;
  figures.raw_bytes = static_cast<double>(count * dtype_size(dtype));
  figures.input_bytes = static_cast<double>(count * sizeof(float));
  figures.reduce_seconds_per_byte = reduce_seconds_per_byte();
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
  // What the calls measured (Learning).
  figures.encode_seconds_per_byte *= learned_.encode_factor(spec);
  figures.decode_seconds_per_byte *= learned_.decode_factor(spec);
  return figures;
}

}  // namespace terse
