#include "collectives/compressed/cost_model.h"

#include <algorithm>
#include <cmath>

#include "collectives/tree_pattern.h"

namespace terse {
namespace {

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
struct DoublingRounds {
  int total = 0;
  int far = 0;
};
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
Prediction ring_allreduce(double raw_bytes, double fp32_bytes, const CodecFigures& codec,
                          const GroupShape& group, const LinkModel& links, double piece_bytes) {
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

}  // namespace

bool predict_flat(const std::string& algorithm, const CodecFigures& codec, const GroupShape& group,
                  const LinkModel& links, double piece_bytes, Prediction* prediction) {
  Prediction p;
  const int n = std::max(1, group.ranks);
  const double b = codec.input_bytes;
  const double w = codec.wire_bytes;
  const double e = codec.encode_seconds_per_byte;
  const double d = codec.decode_seconds_per_byte;
  const LinkCost& link = link_of(group, links);
  if (n == 1) {
    // One rank: a copy (or an encode and decode of the tensor, for compressed algorithms).
    p.codec_seconds = algorithm.rfind("dense", 0) == 0 ? 0 : (e + d) * b;
    p.seconds = p.codec_seconds;
    *prediction = p;
    return true;
  }
  if (algorithm == "dense_ring") {
    p = ring_allreduce(codec.raw_bytes, b, codec, group, links, piece_bytes);
  } else if (algorithm == "dense_recursive_doubling") {
    const DoublingRounds rounds = doubling_rounds(group);
    p.wire_bytes = rounds.total * codec.raw_bytes;
    p.wire_seconds = doubling_wire(codec.raw_bytes, group, links);
    p.codec_seconds = rounds.total * b * codec.reduce_seconds_per_byte;
    p.seconds = p.wire_seconds + p.codec_seconds;
  } else if (algorithm == "sra") {
    // Encode all, all-to-all chunks, owners decode n versions and re-encode, allgather, decode.
    p.wire_bytes = 2.0 * (n - 1) / n * w;
    p.wire_seconds = 2 * all_to_all_wire(w / n, group, links);
    p.codec_seconds = e * b * (1.0 + 1.0 / n) + d * 2.0 * b;
    const double pieces = b / n / std::max(1.0, piece_bytes);
    const double message = w / n / std::max(1.0, pieces);
    p.seconds = 2 * all_to_all_latency(group, links, message) +
                pipelined(p.wire_seconds, p.codec_seconds, pieces, group);
  } else if (algorithm == "ring") {
    // Each hop decodes, adds and re-encodes a chunk; the allgather forwards and decodes.
    p.wire_bytes = 2.0 * (n - 1) / n * w;
    p.wire_seconds = p.wire_bytes / link.bytes_per_s;
    p.codec_seconds = (n - 1.0) / n * b * (e + d) + e * b / n + d * b;
    const double pieces = b / n / std::max(1.0, piece_bytes);
    const double message = w / n / std::max(1.0, pieces);
    p.seconds = 2.0 * (n - 1) * step_latency(group, links, message) +
                pipelined(p.wire_seconds, p.codec_seconds, pieces, group);
  } else if (algorithm == "recursive_doubling") {
    // Every round encodes the running sum, exchanges it whole and decodes the partner's.
    const DoublingRounds rounds = doubling_rounds(group);
    p.wire_bytes = rounds.total * w;
    p.wire_seconds = doubling_wire(w, group, links);
    p.codec_seconds = rounds.total * (e + d) * b;
    p.seconds = p.wire_seconds + p.codec_seconds;
  } else if (algorithm == "tree") {
    // Up: a parent receives two children's messages, decodes both and re-encodes the sum;
    // down: each level forwards the root's message; everyone decodes it once. A heap of n
    // positions is ceil(log2(n + 1)) - 1 edges deep (4 ranks: 2).
    const int depth = std::max(1, ceil_log2(n + 1) - 1);
    p.wire_bytes = 2 * w;
    p.wire_seconds = depth * (3 * w / link.bytes_per_s);
    p.codec_seconds = depth * (e + 2 * d) * b + d * b;
    p.seconds = 2 * depth * step_latency(group, links, w) + p.wire_seconds + p.codec_seconds;
  } else if (algorithm == "sparse_allgather") {
    // Encode once (the selection), every message straight to every rank, n scatter-adds; dense
    // when the messages together outweigh a dense ring of the tensor (sparse_allgather.cpp).
    const double dense_ring = 2.0 * (n - 1) / n * b;
    if (n * w > dense_ring) {
      p = ring_allreduce(b, b, codec, group, links, piece_bytes);
      p.codec_seconds += (e + d) * b;
      p.seconds += (e + d) * b;
    } else {
      p.wire_bytes = (n - 1) * w;
      p.wire_seconds = all_to_all_wire(w, group, links);
      p.codec_seconds = e * b + n * d * b;
      // The sizes to every rank, then the messages to every rank.
      p.seconds = all_to_all_latency(group, links, 0) + all_to_all_latency(group, links, w) +
                  p.wire_seconds + p.codec_seconds;
    }
  } else if (algorithm == "randomk" || algorithm == "powersgd") {
    // Encode (selection, or PowerSGD's products), exact rings of the small payload (PowerSGD:
    // P then Q, each about half of it), decode.
    const int rings = algorithm == "powersgd" ? 2 : 1;
    Prediction ring = ring_allreduce(w / rings, w / rings, codec, group, links, piece_bytes);
    p.wire_bytes = rings * ring.wire_bytes;
    p.wire_seconds = rings * ring.wire_seconds;
    p.codec_seconds = (e + d) * b + rings * ring.codec_seconds;
    p.seconds = rings * ring.seconds + (e + d) * b;
  } else {
    return false;
  }
  *prediction = p;
  return true;
}

bool predict_hierarchical(const std::string& inner, const CodecFigures& codec,
                          const GroupShape& group, const LinkModel& links, double piece_bytes,
                          Prediction* prediction) {
  const int local = std::min(group.most_ranks_per_node, group.ranks);
  // As the algorithm does: with one node, or one rank per node, the inner algorithm runs flat.
  if (group.nodes <= 1 || local <= 1) {
    return predict_flat(inner, codec, group, links, piece_bytes, prediction);
  }
  // The leaders reduce fp32 node sums.
  CodecFigures node_sum = codec;
  node_sum.raw_bytes = codec.input_bytes;
  if (inner.rfind("dense", 0) == 0) node_sum.wire_bytes = codec.input_bytes;
  GroupShape leaders{group.nodes, group.nodes, 1};
  Prediction between;
  if (!predict_flat(inner, node_sum, leaders, links, piece_bytes, &between)) return false;
  // A leader receives every member's tensor and adds it, piece by piece; then sends the result
  // to each member.
  const double gathered = (local - 1) * codec.raw_bytes;
  const double gather = links.intra.latency_s +
                        std::max(gathered / links.intra.bytes_per_s,
                                 (local - 1) * codec.input_bytes * codec.reduce_seconds_per_byte);
  const double broadcast = links.intra.latency_s + gathered / links.intra.bytes_per_s;
  Prediction p = between;
  p.seconds = gather + between.seconds + broadcast;
  p.codec_seconds += (local - 1) * codec.input_bytes * codec.reduce_seconds_per_byte;
  *prediction = p;
  return true;
}

bool predict_rail(const std::string& inner, const CodecFigures& codec, const GroupShape& group,
                  const LinkModel& links, double piece_bytes, Prediction* prediction) {
  const int local = std::min(group.most_ranks_per_node, group.ranks);
  if (group.nodes <= 1 || local <= 1) {
    return predict_flat(inner, codec, group, links, piece_bytes, prediction);
  }
  // Each rank's chunk, as fp32 node sums.
  CodecFigures chunk = codec;
  chunk.input_bytes = codec.input_bytes / local;
  chunk.raw_bytes = chunk.input_bytes;
  chunk.wire_bytes = codec.wire_bytes / local;
  if (inner.rfind("dense", 0) == 0) chunk.wire_bytes = chunk.input_bytes;
  // The rails share the node's NICs.
  LinkModel shared = links;
  const int per_nic = (local + std::max(1, links.nics) - 1) / std::max(1, links.nics);
  shared.inter.bytes_per_s = links.inter.bytes_per_s / per_nic;
  const GroupShape rail{group.nodes, group.nodes, 1};
  Prediction between;
  if (!predict_flat(inner, chunk, rail, shared, piece_bytes, &between)) return false;
  // Inside the node: every rank sends and receives (L - 1)/L of the tensor twice (reduce-scatter
  // and allgather), its cores copying it, and adds (L - 1) chunks.
  const double moved = (local - 1.0) / local * codec.raw_bytes;
  const double reduce = (local - 1.0) / local * codec.input_bytes * codec.reduce_seconds_per_byte;
  const double intra = 2 * links.intra.latency_s + 2 * moved / links.intra.bytes_per_s + reduce;
  Prediction p = between;
  p.seconds = intra + between.seconds;
  p.codec_seconds += reduce;
  *prediction = p;
  return true;
}

bool predict_uncompressed(const std::string& collective, const std::string& algorithm, double bytes,
                          double reduce_seconds_per_byte, const GroupShape& group,
                          const LinkModel& links, Prediction* prediction) {
  const int n = std::max(1, group.ranks);
  const LinkCost& link = link_of(group, links);
  const double hop = step_latency(group, links, bytes) + bytes / link.bytes_per_s;
  const double add = bytes * reduce_seconds_per_byte;
  Prediction p;
  if (collective == "broadcast" && algorithm == "tree") {
    p.wire_bytes = bytes;
    p.wire_seconds = ceil_log2(n) * bytes / link.bytes_per_s;
    p.seconds = ceil_log2(n) * hop;
  } else if (collective == "broadcast" && algorithm == "chain") {
    p.wire_bytes = bytes;
    p.wire_seconds = bytes / link.bytes_per_s;
    p.seconds = (n - 1) * step_latency(group, links, bytes) + p.wire_seconds;
  } else if (collective == "reduce" && algorithm == "tree") {
    p.wire_bytes = bytes;
    p.wire_seconds = ceil_log2(n) * bytes / link.bytes_per_s;
    p.codec_seconds = ceil_log2(n) * add;
    p.seconds = ceil_log2(n) * (hop + add);
  } else if (collective == "reduce" && algorithm == "chain") {
    p.wire_bytes = bytes;
    p.wire_seconds = bytes / link.bytes_per_s;
    p.codec_seconds = add;
    p.seconds = (n - 1) * step_latency(group, links, bytes) + p.wire_seconds + add;
  } else if ((collective == "allgather" || collective == "reducescatter") && algorithm == "ring") {
    const bool adds = collective == "reducescatter";
    p.wire_bytes = (n - 1) * bytes;
    p.wire_seconds = (n - 1) * bytes / link.bytes_per_s;
    p.codec_seconds = adds ? (n - 1) * add : 0;
    p.seconds = (n - 1) * hop + p.codec_seconds;
  } else if (collective == "alltoall" && algorithm == "pairwise") {
    p.wire_bytes = (n - 1) * bytes;
    p.wire_seconds = all_to_all_wire(bytes, group, links);
    p.seconds = all_to_all_latency(group, links, bytes) + p.wire_seconds;
  } else if ((collective == "gather" || collective == "scatter") && algorithm == "direct") {
    p.wire_bytes = (n - 1) * bytes;
    p.wire_seconds = (n - 1) * bytes / link.bytes_per_s;
    p.seconds = step_latency(group, links, bytes) + p.wire_seconds;
  } else if ((collective == "send" || collective == "recv") && algorithm == "direct") {
    p.wire_bytes = collective == "send" ? bytes : 0;
    p.wire_seconds = bytes / link.bytes_per_s;
    p.seconds = hop;
  } else {
    return false;
  }
  // One rank: a copy at most (send/recv to oneself still moves the message).
  if (n == 1 && collective != "send" && collective != "recv") p = Prediction{};
  *prediction = p;
  return true;
}

}  // namespace terse
