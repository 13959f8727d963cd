// The cost model (collectives/cost_model.h, compressed/compressed_cost.h), read through the
// algorithm tables' rows as the planner reads it, against closed forms written here from the
// algorithms' own descriptions: the uncompressed ring, scatter-reduce-allgather over a network
// (wire and codec overlap) and over shared memory (they add up), a node's ranks sharing its link,
// and the hierarchical and rail forms.
#include <gtest/gtest.h>

#include <cmath>

#include "collectives/algorithm_table.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/cost_model.h"

namespace terse {
namespace {

// The prediction of the compressed row `name` (around the flat row `inner` for a composite).
Prediction compressed(const char* name, const CodecFigures& figures, const GroupShape& group,
                      const LinkModel& links, double piece_bytes, const char* inner = nullptr) {
  const CompressedAlgorithmInfo* row = find_compressed_algorithm(name);
  EXPECT_NE(row, nullptr) << name;
  if (row == nullptr) return Prediction{};
  return predict(*row, CostQuery{figures, group, links, piece_bytes},
                 inner != nullptr ? find_compressed_algorithm(inner) : nullptr);
}

// The prediction of the dense row `name` of `kind`.
Prediction dense(CollectiveKind kind, const char* name, const CodecFigures& figures,
                 const GroupShape& group, const LinkModel& links, double piece_bytes = 0) {
  const AlgorithmInfo* row = find_algorithm(kind, name);
  EXPECT_NE(row, nullptr) << name;
  if (row == nullptr) return Prediction{};
  return predict(*row, CostQuery{figures, group, links, piece_bytes});
}

LinkModel links(double intra_latency, double intra_bandwidth, double inter_latency,
                double inter_bandwidth, int nics = 1) {
  LinkModel model;
  model.intra = LinkCost{intra_latency, intra_bandwidth};
  model.inter = LinkCost{inter_latency, inter_bandwidth};
  model.nics = nics;
  return model;
}

// 64 MiB of fp32 through int8 (a quarter on the wire), codecs at 2 GB/s, additions at 8 GB/s.
CodecFigures int8_figures() {
  CodecFigures f;
  f.raw_bytes = 64.0 * (1 << 20);
  f.input_bytes = f.raw_bytes;
  f.wire_bytes = f.raw_bytes / 4;
  f.encode_seconds_per_byte = 1 / 2e9;
  f.decode_seconds_per_byte = 1 / 2e9;
  f.reduce_seconds_per_byte = 1 / 8e9;
  return f;
}

TEST(CostModel, UncompressedRingIsLatencyPlusTwiceTheShareOfTheTensor) {
  const CodecFigures f = int8_figures();
  const LinkModel model = links(2e-6, 4e9, 50e-6, 125e6);
  Prediction p;
  // Four nodes of one rank: 6 steps, each a rendezvous message (256 KiB pieces: announce,
  // answer, data: 3 alpha), 1.5 tensors over the network, additions overlap.
  p = dense(CollectiveKind::kAllReduce, "ring", f, GroupShape{4, 4, 1}, model, 1 << 18);
  const double wire = 1.5 * f.raw_bytes / 125e6;
  const double adds = 0.75 * f.input_bytes / 8e9;
  const double pieces = f.raw_bytes / 4 / (1 << 18);
  EXPECT_NEAR(p.seconds, 6 * 3 * 50e-6 + wire + adds / pieces, 1e-9);
  EXPECT_DOUBLE_EQ(p.wire_bytes, 1.5 * f.raw_bytes);
  // 16 KiB: 4 KiB per step, eager, one alpha each.
  CodecFigures small = f;
  small.raw_bytes = small.input_bytes = 16 << 10;
  p = dense(CollectiveKind::kAllReduce, "ring", small, GroupShape{4, 4, 1}, model, 1 << 18);
  EXPECT_NEAR(p.seconds, 6 * 50e-6 + 1.5 * small.raw_bytes / 125e6 + 0.75 * small.input_bytes / 8e9,
              1e-9);
  // One node of four ranks: the cores copy, so wire and additions add up.
  p = dense(CollectiveKind::kAllReduce, "ring", f, GroupShape{4, 1, 4}, model, 1 << 18);
  EXPECT_NEAR(p.seconds, 6 * 2e-6 + 1.5 * f.raw_bytes / 4e9 + adds, 1e-9);
}

TEST(CostModel, AMessageFromTheLinksRendezvousSizeCostsARoundTripMore) {
  // 64 KiB through a dense ring of 4 nodes: 6 steps of 16 KiB messages.
  CodecFigures f = int8_figures();
  f.raw_bytes = f.input_bytes = 64 << 10;
  LinkModel model = links(2e-6, 4e9, 50e-6, 125e6);
  const double rest = 1.5 * f.raw_bytes / 125e6 + 0.75 * f.input_bytes / 8e9;
  Prediction p;
  // UCX's TCP choice on a 10 Gbit/s interface: 16 KiB messages go eagerly, one alpha a step.
  model.inter.rendezvous_bytes = 19522;
  p = dense(CollectiveKind::kAllReduce, "ring", f, GroupShape{4, 4, 1}, model, 1 << 18);
  EXPECT_NEAR(p.seconds, 6 * 50e-6 + rest, 1e-9);
  // From exactly 16 KiB on: announce, answer, data.
  model.inter.rendezvous_bytes = 16 << 10;
  p = dense(CollectiveKind::kAllReduce, "ring", f, GroupShape{4, 4, 1}, model, 1 << 18);
  EXPECT_NEAR(p.seconds, 6 * 3 * 50e-6 + rest, 1e-9);
}

TEST(CostModel, SraOverlapsItsCodecWithANetworkButNotWithSharedMemory) {
  const CodecFigures f = int8_figures();
  const LinkModel model = links(2e-6, 4e9, 50e-6, 125e6);
  const double codec = f.input_bytes * (1 + 0.25) / 2e9 + 2 * f.input_bytes / 2e9;
  const double pieces = f.input_bytes / 4 / (1 << 18);
  Prediction p;
  p = compressed("sra", f, GroupShape{4, 4, 1}, model, 1 << 18);
  const double wire = 2 * 3 * (f.wire_bytes / 4) / 125e6;
  // Two phases, each of 3 messages in flight together over the network: one latency each, and
  // their rendezvous round trip (messages above 8 KiB) once.
  EXPECT_NEAR(p.seconds,
              2 * 50e-6 + 2 * 2 * 50e-6 + std::max(wire, codec) + std::min(wire, codec) / pieces,
              1e-9);
  EXPECT_DOUBLE_EQ(p.codec_seconds, codec);
  // Over shared memory the cores copy the 3 messages of a phase one after another.
  p = compressed("sra", f, GroupShape{4, 1, 4}, model, 1 << 18);
  EXPECT_NEAR(p.seconds, 6 * 2e-6 + 2 * 3 * (f.wire_bytes / 4) / 4e9 + codec, 1e-9);
}

TEST(CostModel, RanksOfANodeShareItsLinkInAllToAllPatterns) {
  const CodecFigures f = int8_figures();
  const LinkModel model = links(2e-6, 4e9, 50e-6, 125e6);
  Prediction one_per_node, two_per_node;
  one_per_node = compressed("sra", f, GroupShape{4, 4, 1}, model, 1 << 18);
  two_per_node = compressed("sra", f, GroupShape{4, 2, 2}, model, 1 << 18);
  // Two per node: each node's link carries 2 ranks x 2 remote peers' chunks, against 3.
  EXPECT_NEAR(two_per_node.wire_seconds / one_per_node.wire_seconds, 4.0 / 3.0, 1e-12);
}

TEST(CostModel, RailsShareTheNodesNicsAndSpreadTheCodecWork) {
  const CodecFigures f = int8_figures();
  Prediction leaders, rails_one_nic, rails_four_nics, inner;
  const GroupShape nodes{8, 2, 4};
  leaders = compressed("hierarchical", f, nodes, links(2e-6, 8e9, 50e-6, 125e6), 1 << 18, "sra");
  rails_one_nic = compressed("rail", f, nodes, links(2e-6, 8e9, 50e-6, 125e6, 1), 1 << 18, "sra");
  rails_four_nics = compressed("rail", f, nodes, links(2e-6, 8e9, 50e-6, 125e6, 4), 1 << 18, "sra");
  // A rail's chunk is a quarter of the tensor; its codec work a quarter of a leader's.
  inner = compressed("sra", f, GroupShape{2, 2, 1}, links(2e-6, 8e9, 50e-6, 125e6), 1 << 18);
  EXPECT_NEAR(rails_four_nics.codec_seconds - 0.75 * f.input_bytes * f.reduce_seconds_per_byte,
              inner.codec_seconds / 4, 1e-9);
  // Four rails on one NIC move as many bytes through it as the leader does.
  EXPECT_NEAR(rails_one_nic.wire_seconds, inner.wire_seconds, 1e-9);
  EXPECT_NEAR(rails_four_nics.wire_seconds, inner.wire_seconds / 4, 1e-9);
  EXPECT_LT(rails_four_nics.seconds, rails_one_nic.seconds);
  EXPECT_LT(rails_one_nic.seconds, leaders.seconds);
}

// The other dense collectives (for ncclGroupSimulateEnd), as the algorithm table runs them: 5
// ranks on one node (ceil(log2 5) = 3 tree hops), 4 KiB each (eager), and on 5 nodes of one rank
// over the network with 1 MiB (rendezvous: 3 latencies a step).
TEST(CostModel, TheOtherDenseCollectivesAreStepsOfLatencyAndBytes) {
  const LinkModel model = links(2e-6, 4e9, 50e-6, 125e6);
  const double reduce = 1 / 8e9;
  const auto seconds = [&](CollectiveKind kind, const char* algorithm, double bytes,
                           const GroupShape& group) {
    CodecFigures figures;
    figures.raw_bytes = bytes;
    figures.reduce_seconds_per_byte = reduce;
    return dense(kind, algorithm, figures, group, model).seconds;
  };
  const GroupShape node{5, 1, 5}, network{5, 5, 1};
  const double b = 4096, a = 2e-6, bw = 4e9;
  EXPECT_NEAR(seconds(CollectiveKind::kBroadcast, "tree", b, node), 3 * (a + b / bw), 1e-12);
  EXPECT_NEAR(seconds(CollectiveKind::kBroadcast, "chain", b, node), 4 * a + b / bw, 1e-12);
  EXPECT_NEAR(seconds(CollectiveKind::kReduce, "tree", b, node), 3 * (a + b / bw + b * reduce),
              1e-12);
  EXPECT_NEAR(seconds(CollectiveKind::kReduce, "chain", b, node), 4 * a + b / bw + b * reduce,
              1e-12);
  EXPECT_NEAR(seconds(CollectiveKind::kAllGather, "ring", b, node), 4 * (a + b / bw), 1e-12);
  EXPECT_NEAR(seconds(CollectiveKind::kReduceScatter, "ring", b, node),
              4 * (a + b / bw + b * reduce), 1e-12);
  // Shared memory: every rank's cores copy its four blocks one after another.
  EXPECT_NEAR(seconds(CollectiveKind::kAllToAll, "pairwise", b, node), 4 * a + 4 * b / bw, 1e-12);
  EXPECT_NEAR(seconds(CollectiveKind::kGather, "direct", b, node), a + 4 * b / bw, 1e-12);
  EXPECT_NEAR(seconds(CollectiveKind::kScatter, "direct", b, node), a + 4 * b / bw, 1e-12);
  EXPECT_NEAR(seconds(CollectiveKind::kSend, "direct", b, node), a + b / bw, 1e-12);
  EXPECT_NEAR(seconds(CollectiveKind::kRecv, "direct", b, node), a + b / bw, 1e-12);
  // Over the network a large step is a rendezvous, and all-to-all messages share one latency.
  const double big = 1 << 20, step = 3 * 50e-6, net = 125e6;
  EXPECT_NEAR(seconds(CollectiveKind::kAllGather, "ring", big, network), 4 * (step + big / net),
              1e-12);
  EXPECT_NEAR(seconds(CollectiveKind::kAllToAll, "pairwise", big, network), step + 4 * big / net,
              1e-12);
  // One rank moves nothing.
  EXPECT_EQ(seconds(CollectiveKind::kBroadcast, "tree", b, GroupShape{1, 1, 1}), 0);
  // A send to oneself still moves its message.
  EXPECT_NEAR(seconds(CollectiveKind::kSend, "direct", b, GroupShape{1, 1, 1}), a + b / bw, 1e-12);
}

// Every row of both tables carries its cost (adding an algorithm is its file plus its row): a
// finite, positive time on two nodes of two ranks, which grows with the tensor.
TEST(CostModel, EveryRowOfBothTablesPredictsItsTime) {
  const LinkModel model = links(2e-6, 4e9, 50e-6, 125e6);
  const GroupShape group{4, 2, 2};
  CodecFigures small = int8_figures(), large = int8_figures();
  small.raw_bytes = small.input_bytes = 1 << 16;
  small.wire_bytes = small.raw_bytes / 4;
  for (const AlgorithmInfo& row : algorithm_table()) {
    ASSERT_NE(row.cost, nullptr) << row.name;
    const double a = predict(row, CostQuery{small, group, model, 1 << 18}).seconds;
    const double b = predict(row, CostQuery{large, group, model, 1 << 18}).seconds;
    EXPECT_GT(a, 0) << row.name;
    EXPECT_GT(b, a) << row.name;
  }
  const CompressedAlgorithmInfo* sra = find_compressed_algorithm("sra");
  for (const CompressedAlgorithmInfo& row : compressed_algorithm_table()) {
    const bool composite = row.role == CompressedRole::kComposite;
    EXPECT_EQ(row.cost != nullptr, !composite) << row.name;
    EXPECT_EQ(row.composite_cost != nullptr, composite) << row.name;
    EXPECT_EQ(row.applies != nullptr, composite) << row.name;
    const CompressedAlgorithmInfo* inner = composite ? sra : nullptr;
    const double a = predict(row, CostQuery{small, group, model, 1 << 18}, inner).seconds;
    const double b = predict(row, CostQuery{large, group, model, 1 << 18}, inner).seconds;
    EXPECT_TRUE(std::isfinite(a) && a > 0) << row.name;
    EXPECT_GT(b, a) << row.name;
  }
  // A composite without its inner algorithm is never chosen.
  EXPECT_TRUE(std::isinf(
      predict(*find_compressed_algorithm("rail"), CostQuery{large, group, model, 1 << 18})
          .seconds));
  EXPECT_EQ(find_compressed_algorithm("no_such"), nullptr);
}

}  // namespace
}  // namespace terse
