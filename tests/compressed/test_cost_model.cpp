// The cost model (collectives/compressed/cost_model.h) against closed forms written here from
// the algorithms' own descriptions: the uncompressed ring, scatter-reduce-allgather over a
// network (wire and codec overlap) and over shared memory (they add up), a node's ranks sharing
// its link, and the hierarchical and rail forms.
#include <gtest/gtest.h>

#include <cmath>

#include "collectives/compressed/cost_model.h"

namespace terse {
namespace {

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
  ASSERT_TRUE(predict_flat("dense_ring", f, GroupShape{4, 4, 1}, model, 1 << 18, &p));
  const double wire = 1.5 * f.raw_bytes / 125e6;
  const double adds = 0.75 * f.input_bytes / 8e9;
  const double pieces = f.raw_bytes / 4 / (1 << 18);
  EXPECT_NEAR(p.seconds, 6 * 3 * 50e-6 + wire + adds / pieces, 1e-9);
  EXPECT_DOUBLE_EQ(p.wire_bytes, 1.5 * f.raw_bytes);
  // 16 KiB: 4 KiB per step, eager, one alpha each.
  CodecFigures small = f;
  small.raw_bytes = small.input_bytes = 16 << 10;
  ASSERT_TRUE(predict_flat("dense_ring", small, GroupShape{4, 4, 1}, model, 1 << 18, &p));
  EXPECT_NEAR(p.seconds, 6 * 50e-6 + 1.5 * small.raw_bytes / 125e6 + 0.75 * small.input_bytes / 8e9,
              1e-9);
  // One node of four ranks: the cores copy, so wire and additions add up.
  ASSERT_TRUE(predict_flat("dense_ring", f, GroupShape{4, 1, 4}, model, 1 << 18, &p));
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
  ASSERT_TRUE(predict_flat("dense_ring", f, GroupShape{4, 4, 1}, model, 1 << 18, &p));
  EXPECT_NEAR(p.seconds, 6 * 50e-6 + rest, 1e-9);
  // From exactly 16 KiB on: announce, answer, data.
  model.inter.rendezvous_bytes = 16 << 10;
  ASSERT_TRUE(predict_flat("dense_ring", f, GroupShape{4, 4, 1}, model, 1 << 18, &p));
  EXPECT_NEAR(p.seconds, 6 * 3 * 50e-6 + rest, 1e-9);
}

TEST(CostModel, SraOverlapsItsCodecWithANetworkButNotWithSharedMemory) {
  const CodecFigures f = int8_figures();
  const LinkModel model = links(2e-6, 4e9, 50e-6, 125e6);
  const double codec = f.input_bytes * (1 + 0.25) / 2e9 + 2 * f.input_bytes / 2e9;
  const double pieces = f.input_bytes / 4 / (1 << 18);
  Prediction p;
  ASSERT_TRUE(predict_flat("sra", f, GroupShape{4, 4, 1}, model, 1 << 18, &p));
  const double wire = 2 * 3 * (f.wire_bytes / 4) / 125e6;
  // Two phases, each of 3 messages in flight together over the network: one latency each, and
  // their rendezvous round trip (messages above 8 KiB) once.
  EXPECT_NEAR(p.seconds,
              2 * 50e-6 + 2 * 2 * 50e-6 + std::max(wire, codec) + std::min(wire, codec) / pieces,
              1e-9);
  EXPECT_DOUBLE_EQ(p.codec_seconds, codec);
  // Over shared memory the cores copy the 3 messages of a phase one after another.
  ASSERT_TRUE(predict_flat("sra", f, GroupShape{4, 1, 4}, model, 1 << 18, &p));
  EXPECT_NEAR(p.seconds, 6 * 2e-6 + 2 * 3 * (f.wire_bytes / 4) / 4e9 + codec, 1e-9);
}

TEST(CostModel, RanksOfANodeShareItsLinkInAllToAllPatterns) {
  const CodecFigures f = int8_figures();
  const LinkModel model = links(2e-6, 4e9, 50e-6, 125e6);
  Prediction one_per_node, two_per_node;
  ASSERT_TRUE(predict_flat("sra", f, GroupShape{4, 4, 1}, model, 1 << 18, &one_per_node));
  ASSERT_TRUE(predict_flat("sra", f, GroupShape{4, 2, 2}, model, 1 << 18, &two_per_node));
  // Two per node: each node's link carries 2 ranks x 2 remote peers' chunks, against 3.
  EXPECT_NEAR(two_per_node.wire_seconds / one_per_node.wire_seconds, 4.0 / 3.0, 1e-12);
}

TEST(CostModel, RailsShareTheNodesNicsAndSpreadTheCodecWork) {
  const CodecFigures f = int8_figures();
  Prediction leaders, rails_one_nic, rails_four_nics, inner;
  const GroupShape nodes{8, 2, 4};
  ASSERT_TRUE(
      predict_hierarchical("sra", f, nodes, links(2e-6, 8e9, 50e-6, 125e6), 1 << 18, &leaders));
  ASSERT_TRUE(
      predict_rail("sra", f, nodes, links(2e-6, 8e9, 50e-6, 125e6, 1), 1 << 18, &rails_one_nic));
  ASSERT_TRUE(
      predict_rail("sra", f, nodes, links(2e-6, 8e9, 50e-6, 125e6, 4), 1 << 18, &rails_four_nics));
  // A rail's chunk is a quarter of the tensor; its codec work a quarter of a leader's.
  ASSERT_TRUE(
      predict_flat("sra", f, GroupShape{2, 2, 1}, links(2e-6, 8e9, 50e-6, 125e6), 1 << 18, &inner));
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
  const auto seconds = [&](const char* collective, const char* algorithm, double bytes,
                           const GroupShape& group) {
    Prediction p;
    EXPECT_TRUE(predict_uncompressed(collective, algorithm, bytes, reduce, group, model, &p))
        << collective << " " << algorithm;
    return p.seconds;
  };
  const GroupShape node{5, 1, 5}, network{5, 5, 1};
  const double b = 4096, a = 2e-6, bw = 4e9;
  EXPECT_NEAR(seconds("broadcast", "tree", b, node), 3 * (a + b / bw), 1e-12);
  EXPECT_NEAR(seconds("broadcast", "chain", b, node), 4 * a + b / bw, 1e-12);
  EXPECT_NEAR(seconds("reduce", "tree", b, node), 3 * (a + b / bw + b * reduce), 1e-12);
  EXPECT_NEAR(seconds("reduce", "chain", b, node), 4 * a + b / bw + b * reduce, 1e-12);
  EXPECT_NEAR(seconds("allgather", "ring", b, node), 4 * (a + b / bw), 1e-12);
  EXPECT_NEAR(seconds("reducescatter", "ring", b, node), 4 * (a + b / bw + b * reduce), 1e-12);
  // Shared memory: every rank's cores copy its four blocks one after another.
  EXPECT_NEAR(seconds("alltoall", "pairwise", b, node), 4 * a + 4 * b / bw, 1e-12);
  EXPECT_NEAR(seconds("gather", "direct", b, node), a + 4 * b / bw, 1e-12);
  EXPECT_NEAR(seconds("scatter", "direct", b, node), a + 4 * b / bw, 1e-12);
  EXPECT_NEAR(seconds("send", "direct", b, node), a + b / bw, 1e-12);
  EXPECT_NEAR(seconds("recv", "direct", b, node), a + b / bw, 1e-12);
  // Over the network a large step is a rendezvous, and all-to-all messages share one latency.
  const double big = 1 << 20, step = 3 * 50e-6, net = 125e6;
  EXPECT_NEAR(seconds("allgather", "ring", big, network), 4 * (step + big / net), 1e-12);
  EXPECT_NEAR(seconds("alltoall", "pairwise", big, network), step + 4 * big / net, 1e-12);
  // One rank moves nothing.
  EXPECT_EQ(seconds("broadcast", "tree", b, GroupShape{1, 1, 1}), 0);
  Prediction p;
  EXPECT_FALSE(predict_uncompressed("broadcast", "ring", b, reduce, node, model, &p));
}

TEST(CostModel, UnknownAlgorithmsAreNotModelled) {
  Prediction p;
  EXPECT_FALSE(predict_flat("no_such", int8_figures(), GroupShape{2, 2, 1},
                            links(1e-6, 1e9, 1e-6, 1e9), 1 << 18, &p));
}

}  // namespace
}  // namespace terse
