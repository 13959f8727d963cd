#include "collectives/cost_model.h"

#include <algorithm>
#include <cmath>

#include "collectives/tree_pattern.h"

namespace terse {

// The link a group's messages cross: the network once it spans nodes.
const LinkCost& link_of(const GroupShape& group, const LinkModel& links) {
  return group.nodes > 1 ? links.inter : links.intra;
}

// The latency of one step that sends a message of `bytes` over `group`'s link. Over a network,
// UCX sends a message from the link's rendezvous size on with its rendezvous protocol: the sender
// announces it and the data follows once the receiver has answered, one round trip more than an
// eager message. Measured on the emulated cluster at 10 ms RTT: an uncompressed ring of 256 KiB
// took 92 ms, and 31 ms with UCX_RNDV_THRESH=inf (perf/RESULTS.md, issue 11).
double step_latency(const GroupShape& group, const LinkModel& links, double bytes) {
  if (group.nodes <= 1) return links.intra.latency_s;
  return bytes >= links.inter.rendezvous_bytes ? 3 * links.inter.latency_s : links.inter.latency_s;
}

// The latency of one phase in which every rank sends a message of `bytes` to each of its n - 1
// peers, all posted at once. Over shared memory the ranks' cores copy them one after another:
// n - 1 latencies. Over a network they are in flight together: one step's latency (measured on
// the emulated cluster at 10 ms RTT: sra's two phases took 14 ms at 256 KiB, where n - 1
// latencies a phase would be 30 ms; perf/RESULTS.md, issue 11).
double all_to_all_latency(const GroupShape& group, const LinkModel& links, double bytes) {
  if (group.nodes <= 1) return (group.ranks - 1) * links.intra.latency_s;
  return step_latency(group, links, bytes);
}

// A pipeline of `pieces` pieces. Over a network the wire and the codec work overlap: the longer
// of the two, plus one piece of the shorter (the first piece's encode before anything is sent,
// or the last piece's decode after everything arrived). Over shared memory the "wire" is a copy
// the ranks' own cores make (cma, shared-memory fragments), competing with the codec for them:
// the two add up.
double pipelined(double wire, double codec, double pieces, const GroupShape& group) {
  if (group.nodes <= 1) return wire + codec;
  return std::max(wire, codec) + std::min(wire, codec) / std::max(1.0, pieces);
}

// Seconds for every rank to send `bytes` to every other rank at once (a direct all-to-all or
// allgatherv, `bytes` per destination): across nodes, the ranks of a node share its link.
double all_to_all_wire(double bytes, const GroupShape& group, const LinkModel& links) {
  const int n = group.ranks;
  if (group.nodes <= 1) return (n - 1) * bytes / links.intra.bytes_per_s;
  const int local = std::min(group.most_ranks_per_node, n);
  return static_cast<double>(local) * (n - local) * bytes / links.inter.bytes_per_s;
}

// Rounds of recursive doubling that cross nodes (partners further apart than a node), and the
// ranks of a node that then share its link; the other rounds stay on the node.
DoublingRounds doubling_rounds(const GroupShape& group) {
  DoublingRounds rounds;
  rounds.total = ceil_log2(group.ranks);
  // Ranks beyond a power of two fold in before and get the result after: two more exchanges.
  if ((1 << rounds.total) != group.ranks && group.ranks > 1) rounds.total += 1;
  rounds.far = group.nodes > 1 ? std::min(rounds.total, ceil_log2(group.nodes)) : 0;
  return rounds;
}

// One message of `bytes` per round of recursive doubling, the far rounds on the network.
double doubling_wire(double bytes, const GroupShape& group, const LinkModel& links) {
  const DoublingRounds rounds = doubling_rounds(group);
  const double far_share = group.nodes > 1 ? std::min(group.most_ranks_per_node, group.ranks) : 1;
  const double near =
      (rounds.total - rounds.far) * (links.intra.latency_s + bytes / links.intra.bytes_per_s);
  const GroupShape network{2, 2, 1};
  const double far = rounds.far * (step_latency(network, links, bytes) +
                                   far_share * bytes / links.inter.bytes_per_s);
  return near + far;
}

// An exact fp32 ring allreduce of `bytes` (PowerSGD's factors, Random-K's values, the dense
// fallback of sparse allgather, and the uncompressed ring itself with the tensor's raw bytes).
Prediction ring_allreduce_cost(double raw_bytes, double fp32_bytes, const CostQuery& query) {
  const CodecFigures& codec = query.codec;
  const GroupShape& group = query.group;
  const LinkModel& links = query.links;
  const double piece_bytes = query.piece_bytes;
  const int n = group.ranks;
  const LinkCost& link = link_of(group, links);
  Prediction p;
  p.wire_bytes = 2.0 * (n - 1) / n * raw_bytes;
  p.wire_seconds = p.wire_bytes / link.bytes_per_s;
  p.codec_seconds = (n - 1.0) / n * fp32_bytes * codec.reduce_seconds_per_byte;
  const double pieces = raw_bytes / n / std::max(1.0, piece_bytes);
  const double message = std::min(raw_bytes / n, std::max(1.0, piece_bytes));
  p.seconds = 2.0 * (n - 1) * step_latency(group, links, message) +
              pipelined(p.wire_seconds, p.codec_seconds, pieces, group);
  return p;
}

// ---- the dense algorithms ----

Prediction dense_ring_allreduce_cost(const CostQuery& query) {
  return ring_allreduce_cost(query.codec.raw_bytes, query.codec.input_bytes, query);
}

Prediction dense_recursive_doubling_allreduce_cost(const CostQuery& query) {
  const DoublingRounds rounds = doubling_rounds(query.group);
  Prediction p;
  p.wire_bytes = rounds.total * query.codec.raw_bytes;
  p.wire_seconds = doubling_wire(query.codec.raw_bytes, query.group, query.links);
  p.codec_seconds = rounds.total * query.codec.input_bytes * query.codec.reduce_seconds_per_byte;
  p.seconds = p.wire_seconds + p.codec_seconds;
  return p;
}

namespace {

// The figures every other dense collective's cost starts from.
struct DenseStep {
  int n;
  double bytes;
  double add;  // seconds to add the buffer once
  double hop;  // one step of the whole buffer over the group's link
  const LinkCost& link;
};

DenseStep dense_step(const CostQuery& query) {
  const double bytes = query.codec.raw_bytes;
  const LinkCost& link = link_of(query.group, query.links);
  return DenseStep{query.group.ranks, bytes, bytes * query.codec.reduce_seconds_per_byte,
                   step_latency(query.group, query.links, bytes) + bytes / link.bytes_per_s, link};
}

}  // namespace

Prediction broadcast_tree_cost(const CostQuery& query) {
  const DenseStep s = dense_step(query);
  Prediction p;
  p.wire_bytes = s.bytes;
  p.wire_seconds = ceil_log2(s.n) * s.bytes / s.link.bytes_per_s;
  p.seconds = ceil_log2(s.n) * s.hop;
  return p;
}

Prediction broadcast_chain_cost(const CostQuery& query) {
  const DenseStep s = dense_step(query);
  Prediction p;
  p.wire_bytes = s.bytes;
  p.wire_seconds = s.bytes / s.link.bytes_per_s;
  p.seconds = (s.n - 1) * step_latency(query.group, query.links, s.bytes) + p.wire_seconds;
  return p;
}

Prediction reduce_tree_cost(const CostQuery& query) {
  const DenseStep s = dense_step(query);
  Prediction p;
  p.wire_bytes = s.bytes;
  p.wire_seconds = ceil_log2(s.n) * s.bytes / s.link.bytes_per_s;
  p.codec_seconds = ceil_log2(s.n) * s.add;
  p.seconds = ceil_log2(s.n) * (s.hop + s.add);
  return p;
}

Prediction reduce_chain_cost(const CostQuery& query) {
  const DenseStep s = dense_step(query);
  Prediction p;
  p.wire_bytes = s.bytes;
  p.wire_seconds = s.bytes / s.link.bytes_per_s;
  p.codec_seconds = s.add;
  p.seconds = (s.n - 1) * step_latency(query.group, query.links, s.bytes) + p.wire_seconds + s.add;
  return p;
}

namespace {

Prediction ring_steps_cost(const CostQuery& query, bool adds) {
  const DenseStep s = dense_step(query);
  Prediction p;
  p.wire_bytes = (s.n - 1) * s.bytes;
  p.wire_seconds = (s.n - 1) * s.bytes / s.link.bytes_per_s;
  p.codec_seconds = adds ? (s.n - 1) * s.add : 0;
  p.seconds = (s.n - 1) * s.hop + p.codec_seconds;
  return p;
}

}  // namespace

Prediction allgather_ring_cost(const CostQuery& query) {
  return ring_steps_cost(query, /*adds=*/false);
}

Prediction reduce_scatter_ring_cost(const CostQuery& query) {
  return ring_steps_cost(query, /*adds=*/true);
}

Prediction alltoall_pairwise_cost(const CostQuery& query) {
  const DenseStep s = dense_step(query);
  Prediction p;
  p.wire_bytes = (s.n - 1) * s.bytes;
  p.wire_seconds = all_to_all_wire(s.bytes, query.group, query.links);
  p.seconds = all_to_all_latency(query.group, query.links, s.bytes) + p.wire_seconds;
  return p;
}

Prediction gather_scatter_direct_cost(const CostQuery& query) {
  const DenseStep s = dense_step(query);
  Prediction p;
  p.wire_bytes = (s.n - 1) * s.bytes;
  p.wire_seconds = (s.n - 1) * s.bytes / s.link.bytes_per_s;
  p.seconds = step_latency(query.group, query.links, s.bytes) + p.wire_seconds;
  return p;
}

Prediction send_direct_cost(const CostQuery& query) {
  const DenseStep s = dense_step(query);
  Prediction p;
  p.wire_bytes = s.bytes;
  p.wire_seconds = s.bytes / s.link.bytes_per_s;
  p.seconds = s.hop;
  return p;
}

Prediction recv_direct_cost(const CostQuery& query) {
  Prediction p = send_direct_cost(query);
  p.wire_bytes = 0;
  return p;
}

}  // namespace terse
