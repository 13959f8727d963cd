// The alpha-beta cost model of the planner (docs/design.md sections 5 and 7): how long one
// allreduce of a tensor takes with a given (codec, algorithm) pair, from what every rank agreed on:
// the latency and bandwidth of the intra-node and inter-node links (topology/link_model.h), the
// node layout, and each codec's measured speed (codec_speed.h). Pure arithmetic: no transport,
// no codec calls, so tests feed it figures of their own.
//
// Each algorithm is modelled as it is written (collectives/compressed/*.cpp):
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

#include <string>
#include <vector>

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

// Seconds of `algorithm` (a name of the compressed table, or "dense_ring" /
// "dense_recursive_doubling" for the uncompressed allreduce) on `group` with `codec`, the codec
// cut into pieces of `piece_bytes` of fp32 by pipelined algorithms. False for a name it does not
// model.
bool predict_flat(const std::string& algorithm, const CodecFigures& codec, const GroupShape& group,
                  const LinkModel& links, double piece_bytes, Prediction* prediction);

// The hierarchical algorithm: the node sums gathered at each node's leader over the intra-node
// link, `inner` (flat) between the leaders over the inter-node link, the result broadcast back.
bool predict_hierarchical(const std::string& inner, const CodecFigures& codec,
                          const GroupShape& group, const LinkModel& links, double piece_bytes,
                          Prediction* prediction);

// The rail-aligned algorithm: a reduce-scatter inside each node, `inner` (flat) on each rank's
// 1/L chunk between local rank i of every node, the L rails sharing the node's links.nics NICs,
// an allgather inside each node. `group` must have nodes of equal size.
bool predict_rail(const std::string& inner, const CodecFigures& codec, const GroupShape& group,
                  const LinkModel& links, double piece_bytes, Prediction* prediction);

// The other dense collectives, as collectives/algorithm_table.cpp runs them, for
// ncclGroupSimulateEnd (an allreduce is predict_flat's "dense_ring" or
// "dense_recursive_doubling"). `collective` and `algorithm` are the table's names
// (collective_name(): "broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather",
// "scatter", "send", "recv"; "tree", "chain", "ring", "pairwise", "direct"), `bytes` the count
// NCCL names in bytes (per rank for allgather, reduce-scatter, gather, scatter and alltoall's
// blocks, the message for send and recv). Steps that follow each other add up, each a latency
// and its message over the group's link (the network once it spans nodes):
//   broadcast tree   ceil(log2 n) hops of the whole buffer
//   broadcast chain  n - 1 latencies, the buffer once (its pieces flow down the chain)
//   reduce tree      ceil(log2 n) hops of the whole buffer, each adding it
//   reduce chain     n - 1 latencies, the buffer once, one addition of it
//   allgather ring   n - 1 steps of one block
//   reduce-scatter   n - 1 steps of one block, each adding it
//   alltoall         every block to every rank at once (all-to-all, as sra's phases)
//   gather, scatter  one latency, the n - 1 blocks through the root's link
//   send, recv       one latency, the message
// Additions run at codec.reduce_seconds_per_byte per byte of the buffer's own type (an
// approximation for 16-bit and integer types, which the reduction widens). One rank: nothing
// moves, 0. False for a name it does not model.
bool predict_uncompressed(const std::string& collective, const std::string& algorithm, double bytes,
                          double reduce_seconds_per_byte, const GroupShape& group,
                          const LinkModel& links, Prediction* prediction);

}  // namespace terse
