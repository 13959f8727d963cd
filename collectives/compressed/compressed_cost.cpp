#include "collectives/compressed/compressed_cost.h"

#include <algorithm>

#include "collectives/tree_pattern.h"

namespace terse {
namespace {

// What every compressed cost reads: the ranks, the tensor as fp32 (b), one whole-tensor message
// (w), and the encode and decode seconds per byte of fp32 (e, d).
struct CostTerms {
  int n;
  double b, w, e, d;
};

CostTerms terms_of(const CostQuery& query) {
  return CostTerms{query.group.ranks, query.codec.input_bytes, query.codec.wire_bytes,
                   query.codec.encode_seconds_per_byte, query.codec.decode_seconds_per_byte};
}

}  // namespace

Prediction one_rank_compressed_cost(const CostQuery& query) {
  Prediction p;
  p.codec_seconds = (query.codec.encode_seconds_per_byte + query.codec.decode_seconds_per_byte) *
                    query.codec.input_bytes;
  p.seconds = p.codec_seconds;
  return p;
}

// Encode all, all-to-all chunks, owners decode n versions and re-encode, allgather, decode.
Prediction sra_cost(const CostQuery& query) {
  const GroupShape& group = query.group;
  const auto [n, b, w, e, d] = terms_of(query);
  Prediction p;
  p.wire_bytes = 2.0 * (n - 1) / n * w;
  p.wire_seconds = 2 * all_to_all_wire(w / n, group, query.links);
  p.codec_seconds = e * b * (1.0 + 1.0 / n) + d * 2.0 * b;
  const double pieces = b / n / std::max(1.0, query.piece_bytes);
  const double message = w / n / std::max(1.0, pieces);
  p.seconds = 2 * all_to_all_latency(group, query.links, message) +
              pipelined(p.wire_seconds, p.codec_seconds, pieces, group);
  return p;
}

// Each hop decodes, adds and re-encodes a chunk; the allgather forwards and decodes.
Prediction compressed_ring_cost(const CostQuery& query) {
  const GroupShape& group = query.group;
  const auto [n, b, w, e, d] = terms_of(query);
  Prediction p;
  p.wire_bytes = 2.0 * (n - 1) / n * w;
  p.wire_seconds = p.wire_bytes / link_of(group, query.links).bytes_per_s;
  p.codec_seconds = (n - 1.0) / n * b * (e + d) + e * b / n + d * b;
  const double pieces = b / n / std::max(1.0, query.piece_bytes);
  const double message = w / n / std::max(1.0, pieces);
  p.seconds = 2.0 * (n - 1) * step_latency(group, query.links, message) +
              pipelined(p.wire_seconds, p.codec_seconds, pieces, group);
  return p;
}

// Every round encodes the running sum, exchanges it whole and decodes the partner's.
Prediction compressed_recursive_doubling_cost(const CostQuery& query) {
  const auto [n, b, w, e, d] = terms_of(query);
  const DoublingRounds rounds = doubling_rounds(query.group);
  Prediction p;
  p.wire_bytes = rounds.total * w;
  p.wire_seconds = doubling_wire(w, query.group, query.links);
  p.codec_seconds = rounds.total * (e + d) * b;
  p.seconds = p.wire_seconds + p.codec_seconds;
  return p;
}

// Up: a parent receives two children's messages, decodes both and re-encodes the sum; down: each
// level forwards the root's message; everyone decodes it once. A heap of n positions is
// ceil(log2(n + 1)) - 1 edges deep (4 ranks: 2).
Prediction compressed_tree_cost(const CostQuery& query) {
  const auto [n, b, w, e, d] = terms_of(query);
  const int depth = std::max(1, ceil_log2(n + 1) - 1);
  Prediction p;
  p.wire_bytes = 2 * w;
  p.wire_seconds = depth * (3 * w / link_of(query.group, query.links).bytes_per_s);
  p.codec_seconds = depth * (e + 2 * d) * b + d * b;
  p.seconds =
      2 * depth * step_latency(query.group, query.links, w) + p.wire_seconds + p.codec_seconds;
  return p;
}

// Encode once (the selection), every message straight to every rank, n scatter-adds; dense when
// the messages together outweigh a dense ring of the tensor (sparse_allgather.cpp).
Prediction sparse_allgather_cost(const CostQuery& query) {
  const GroupShape& group = query.group;
  const auto [n, b, w, e, d] = terms_of(query);
  const double dense_ring = 2.0 * (n - 1) / n * b;
  Prediction p;
  if (n * w > dense_ring) {
    p = ring_allreduce_cost(b, b, query);
    p.codec_seconds += (e + d) * b;
    p.seconds += (e + d) * b;
  } else {
    p.wire_bytes = (n - 1) * w;
    p.wire_seconds = all_to_all_wire(w, group, query.links);
    p.codec_seconds = e * b + n * d * b;
    // The sizes to every rank, then the messages to every rank.
    p.seconds = all_to_all_latency(group, query.links, 0) +
                all_to_all_latency(group, query.links, w) + p.wire_seconds + p.codec_seconds;
  }
  return p;
}

namespace {

// Encode (selection, or PowerSGD's products), exact rings of the small payload (PowerSGD: P then
// Q, each about half of it), decode.
Prediction small_payload_rings(const CostQuery& query, int rings) {
  const auto [n, b, w, e, d] = terms_of(query);
  const Prediction ring = ring_allreduce_cost(w / rings, w / rings, query);
  Prediction p;
  p.wire_bytes = rings * ring.wire_bytes;
  p.wire_seconds = rings * ring.wire_seconds;
  p.codec_seconds = (e + d) * b + rings * ring.codec_seconds;
  p.seconds = rings * ring.seconds + (e + d) * b;
  return p;
}

}  // namespace

Prediction randomk_cost(const CostQuery& query) {
  return small_payload_rings(query, 1);
}

Prediction powersgd_cost(const CostQuery& query) {
  return small_payload_rings(query, 2);
}

Prediction hierarchical_cost(CostFunction inner, const CostQuery& query) {
  const GroupShape& group = query.group;
  const LinkModel& links = query.links;
  const CodecFigures& codec = query.codec;
  const int local = std::min(group.most_ranks_per_node, group.ranks);
  // As the algorithm does: with one node, or one rank per node, the inner algorithm runs flat.
  if (group.ranks <= 1) return one_rank_compressed_cost(query);
  if (group.nodes <= 1 || local <= 1) return inner(query);
  // The leaders reduce fp32 node sums.
  CostQuery leaders = query;
  leaders.codec.raw_bytes = codec.input_bytes;
  leaders.group = GroupShape{group.nodes, group.nodes, 1};
  const Prediction between = inner(leaders);
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
  return p;
}

Prediction rail_cost(CostFunction inner, const CostQuery& query) {
  const GroupShape& group = query.group;
  const LinkModel& links = query.links;
  const CodecFigures& codec = query.codec;
  const int local = std::min(group.most_ranks_per_node, group.ranks);
  if (group.ranks <= 1) return one_rank_compressed_cost(query);
  if (group.nodes <= 1 || local <= 1) return inner(query);
  // Each rank's chunk, as fp32 node sums, on a rail of one rank per node; the rails share the
  // node's NICs.
  CostQuery rail = query;
  rail.codec.input_bytes = codec.input_bytes / local;
  rail.codec.raw_bytes = rail.codec.input_bytes;
  rail.codec.wire_bytes = codec.wire_bytes / local;
  const int per_nic = (local + std::max(1, links.nics) - 1) / std::max(1, links.nics);
  rail.links.inter.bytes_per_s = links.inter.bytes_per_s / per_nic;
  rail.group = GroupShape{group.nodes, group.nodes, 1};
  const Prediction between = inner(rail);
  // Inside the node: every rank sends and receives (L - 1)/L of the tensor twice (reduce-scatter
  // and allgather), its cores copying it, and adds (L - 1) chunks.
  const double moved = (local - 1.0) / local * codec.raw_bytes;
  const double reduce = (local - 1.0) / local * codec.input_bytes * codec.reduce_seconds_per_byte;
  const double intra = 2 * links.intra.latency_s + 2 * moved / links.intra.bytes_per_s + reduce;
  Prediction p = between;
  p.seconds = intra + between.seconds;
  p.codec_seconds += reduce;
  return p;
}

}  // namespace terse
