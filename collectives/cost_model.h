// The alpha-beta cost model of the planner (docs/design.md sections 5 and 7): how long one
// collective takes with a given algorithm, from what every rank agreed on: the latency and
// bandwidth of the intra-node and inter-node links (topology/link_model.h), the node layout, and
// each codec's measured speed (collectives/compressed/codec_speed.h). Pure arithmetic: no
// transport, no codec calls, so tests feed it figures of their own.
//
// Each algorithm's cost is a function beside its row in the algorithm tables: the dense ones here
// (algorithm_table.cpp's rows), the compressed ones in compressed/compressed_cost.h
// (compressed_algorithm_table.cpp's rows). They share the arithmetic below. Each algorithm is
// modelled as it is written:
//   bytes on the busiest link / bandwidth + messages in sequence * latency (over a network the
//   messages a rank posts to its n - 1 peers at once share one latency; over shared memory its
//   cores copy them one after another), and the codec work
//   on one rank (encode and decode seconds per byte of fp32 input, times the bytes it touches).
// Pipelined algorithms (the dense ring, sra, the compressed ring) overlap a network's wire time
// with the codec work: max(wire, codec) plus one piece of the smaller as the pipeline's fill.
// Over shared memory, where the ranks' own cores copy the bytes, and in the algorithms that run
// their phases one after the other, wire and codec add up. On a group that spans nodes, the link is
// the inter-node one, and traffic that several ranks of a node send across at once shares the
// node's link (all-to-all patterns: sra, sparse allgather, and recursive doubling's far rounds).
#pragma once

#include "topology/link_model.h"

namespace terse {

// What the model needs to know about a codec on one tensor.
struct CodecFigures {
  double raw_bytes = 0;    // the tensor in its own dtype (what an uncompressed call moves)
  double input_bytes = 0;  // the tensor as fp32 (what codecs and reductions read)
  double wire_bytes = 0;   // one whole-tensor message of the codec (raw_bytes for none)
  // Per byte of fp32 input; 0 for none. With error feedback it includes adding the residual.
  double encode_seconds_per_byte = 0;
  double decode_seconds_per_byte = 0;  // decode-accumulate, per byte of fp32 output
  double reduce_seconds_per_byte = 0;  // an fp32 add of two buffers, per byte
};

// The ranks a call spans, as nodes: how many nodes, and the most ranks one node holds.
struct GroupShape {
  int ranks = 1;
  int nodes = 1;
  int most_ranks_per_node = 1;
};

struct Prediction {
  double seconds = 0;
  double wire_seconds = 0;   // the busiest link's share
  double codec_seconds = 0;  // encode, decode and reductions on one rank
  double wire_bytes = 0;     // sent by one rank
};

// One question to the model: a call's figures on a group over the agreed links, pipelined
// algorithms cutting it into pieces of `piece_bytes`.
struct CostQuery {
  CodecFigures codec;
  GroupShape group;
  LinkModel links;
  double piece_bytes = 0;
};

// An algorithm's cost, as its table row holds it. Called for groups of two ranks or more (the
// tables' predict functions answer for one rank).
using CostFunction = Prediction (*)(const CostQuery& query);

// ---- the arithmetic the algorithms' costs share ----

// The link a group's messages cross: the network once it spans nodes.
const LinkCost& link_of(const GroupShape& group, const LinkModel& links);

// The latency of one step that sends a message of `bytes` over `group`'s link (a rendezvous
// message pays one round trip more than an eager one over a network).
double step_latency(const GroupShape& group, const LinkModel& links, double bytes);

// The latency of one phase in which every rank sends a message of `bytes` to each of its n - 1
// peers, all posted at once.
double all_to_all_latency(const GroupShape& group, const LinkModel& links, double bytes);

// A pipeline of `pieces` pieces: wire and codec overlap over a network, add up over shared memory.
double pipelined(double wire, double codec, double pieces, const GroupShape& group);

// Seconds for every rank to send `bytes` to every other rank at once: across nodes, the ranks of
// a node share its link.
double all_to_all_wire(double bytes, const GroupShape& group, const LinkModel& links);

// Rounds of recursive doubling, and those that cross nodes.
struct DoublingRounds {
  int total = 0;
  int far = 0;
};
DoublingRounds doubling_rounds(const GroupShape& group);

// One message of `bytes` per round of recursive doubling, the far rounds on the network.
double doubling_wire(double bytes, const GroupShape& group, const LinkModel& links);

// An exact fp32 ring allreduce of `raw_bytes` (`fp32_bytes` as fp32): PowerSGD's factors,
// Random-K's values, the dense fallback of sparse allgather, and the uncompressed ring itself.
Prediction ring_allreduce_cost(double raw_bytes, double fp32_bytes, const CostQuery& query);

// ---- the dense algorithms' costs (algorithm_table.cpp's rows) ----
// An allreduce moves codec.raw_bytes and adds codec.input_bytes as fp32. The other collectives
// move codec.raw_bytes, the count NCCL names in bytes (per rank for allgather, reduce-scatter,
// gather, scatter and alltoall's blocks, the message for send and recv), and add it at
// codec.reduce_seconds_per_byte per byte of the buffer's own type (an approximation for 16-bit
// and integer types, which the reduction widens). Steps that follow each other add up, each a
// latency and its message over the group's link (the network once it spans nodes):
//   allreduce ring          2(n - 1) pipelined steps of 1/n of the buffer, (n - 1)/n of it added
//   allreduce rec. doubling one whole-buffer exchange and addition per round
//   broadcast tree          ceil(log2 n) hops of the whole buffer
//   broadcast chain         n - 1 latencies, the buffer once (its pieces flow down the chain)
//   reduce tree             ceil(log2 n) hops of the whole buffer, each adding it
//   reduce chain            n - 1 latencies, the buffer once, one addition of it
//   allgather ring          n - 1 steps of one block
//   reduce-scatter ring     n - 1 steps of one block, each adding it
//   alltoall pairwise       every block to every rank at once (all-to-all, as sra's phases)
//   gather, scatter direct  one latency, the n - 1 blocks through the root's link
//   send, recv direct       one latency, the message
Prediction dense_ring_allreduce_cost(const CostQuery& query);
Prediction dense_recursive_doubling_allreduce_cost(const CostQuery& query);
Prediction broadcast_tree_cost(const CostQuery& query);
Prediction broadcast_chain_cost(const CostQuery& query);
Prediction reduce_tree_cost(const CostQuery& query);
Prediction reduce_chain_cost(const CostQuery& query);
Prediction allgather_ring_cost(const CostQuery& query);
Prediction reduce_scatter_ring_cost(const CostQuery& query);
Prediction alltoall_pairwise_cost(const CostQuery& query);
Prediction gather_scatter_direct_cost(const CostQuery& query);
Prediction send_direct_cost(const CostQuery& query);
Prediction recv_direct_cost(const CostQuery& query);

}  // namespace terse
