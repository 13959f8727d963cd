// The dense allreduces over ordered rank groups (GroupPhase, allreduce_algorithms.h), ranks as
// threads over the real UCX transport: the whole communicator, its reverse, and subsets in a
// non-identity order (two disjoint groups at once), at the piece boundaries of the pipelined
// ring (1 element, fewer elements than ranks, counts no rank or piece count divides, pieces of a
// few elements, many pieces), on odd rank counts. Expected values come from a model in this file:
// integer inputs summed in float64 and compared exactly, and for the ring the exact float32
// order it promises (each block summed once by its owner, the partial sum travelling the ring
// from the owner's successor), compared bit for bit. Plus the tag steps of a phase and the
// traffic it reports.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "allreduce_test_support.h"
#include "collectives/allreduce_algorithms.h"
#include "collectives/ring_pattern.h"
#include "common/result.h"
#include "transport/transport.h"

namespace terse {
namespace {

using GroupAllreduce = ncclResult_t (*)(const CollectiveArgs&, const AlgorithmContext&,
                                        const GroupPhase&);

// Small integers: every sum over up to 8 ranks is exact in float32 and int32.
double integer_input(int rank, size_t i) {
  return static_cast<double>(static_cast<int>((rank * 131 + i * 7) % 23) - 11);
}
// Values with bits below the integer part, so the order of the additions shows in the result.
float fraction_input(int rank, size_t i) {
  return static_cast<float>(std::sin(rank * 1.7 + static_cast<double>(i) * 0.31) * 1000.0 +
                            rank * 0.001);
}

// The float32 result the ring promises for element i of a group whose position p holds
// inputs[p]: the owner c of i's block ends with x[c] + (x[c-1] + (... + (x[c+2] + x[c+1]))).
float ring_order_sum(const std::vector<std::vector<float>>& inputs, size_t count, size_t i) {
  const int n = static_cast<int>(inputs.size());
  int owner = 0;
  while (!(i < near_equal_block(count, n, owner).offset + near_equal_block(count, n, owner).count))
    ++owner;
  float partial = inputs[static_cast<size_t>((owner + 1) % n)][i];
  for (int k = 2; k <= n; ++k) partial = inputs[static_cast<size_t>((owner + k) % n)][i] + partial;
  return partial;
}

struct GroupCase {
  std::vector<std::vector<int>> groups;  // disjoint ordered groups; each rank is in at most one
  size_t count;
  size_t piece_bytes;
};

std::string describe(const GroupCase& c) {
  std::string text = "groups";
  for (const auto& group : c.groups) {
    text += " {";
    for (size_t p = 0; p < group.size(); ++p) text += (p ? "," : "") + std::to_string(group[p]);
    text += "}";
  }
  return text + " count " + std::to_string(c.count) + " pieces of " +
         std::to_string(c.piece_bytes) + " bytes";
}

// The group (and this rank's position in it) that holds `rank`, or false.
bool find_group(const GroupCase& c, int rank, PeerGroup* group) {
  for (const auto& ranks : c.groups) {
    for (size_t p = 0; p < ranks.size(); ++p) {
      if (ranks[p] != rank) continue;
      group->ranks = ranks;
      group->index = static_cast<int>(p);
      return true;
    }
  }
  return false;
}

// Runs every case on `nranks` threads: float32 sum of integers (exact), int32 sum (exact),
// float32 sum of fractions (bitwise against the ring's order when `ring_order`, else bitwise the
// same on every rank of a group), in place and out of place.
void run_group_cases(GroupAllreduce algorithm, int nranks, const std::vector<GroupCase>& cases,
                     bool ring_order) {
  std::mutex mutex;
  // results[case][rank]: the fraction case's result bits, for the identity check.
  std::vector<std::vector<std::vector<uint32_t>>> results(
      cases.size(), std::vector<std::vector<uint32_t>>(static_cast<size_t>(nranks)));
  test::run_with_transports(nranks, [&](Transport& transport) {
    const int rank = transport.rank();
    uint32_t sequence = 1;
    for (size_t index = 0; index < cases.size(); ++index, sequence += 3) {
      const GroupCase& c = cases[index];
      PeerGroup group;
      if (!find_group(c, rank, &group)) continue;
      const int n = group.size();
      AlgorithmContext context;
      context.transport = &transport;
      context.deadline = transport.default_deadline();
      context.piece_bytes = c.piece_bytes;
      const GroupPhase phase{&group, 7, nullptr};
      const std::string what = "rank " + std::to_string(rank) + ", " + describe(c);

      // float32 sum of integers, out of place; int32 sum of the same, in place.
      std::vector<float> send(c.count), recv(c.count, -1.0f);
      std::vector<int32_t> integers(c.count);
      for (size_t i = 0; i < c.count; ++i) {
        send[i] = static_cast<float>(integer_input(rank, i));
        integers[i] = static_cast<int32_t>(integer_input(rank, i));
      }
      CollectiveArgs args;
      args.send = send.data();
      args.recv = recv.data();
      args.count = c.count;
      args.type = ncclFloat32;
      context.sequence = sequence;
      ASSERT_EQ(algorithm(args, context, phase), ncclSuccess) << what << ": " << last_error();
      args.send = args.recv = integers.data();
      args.type = ncclInt32;
      context.sequence = sequence + 1;
      ASSERT_EQ(algorithm(args, context, phase), ncclSuccess) << what << ": " << last_error();
      int failures = 0;
      for (size_t i = 0; i < c.count && failures < 3; ++i) {
        double expected = 0;
        for (int member : group.ranks) expected += integer_input(member, i);
        if (recv[i] != expected || integers[i] != expected) {
          ++failures;
          ADD_FAILURE() << what << ": element " << i << " is " << recv[i] << " (float32) and "
                        << integers[i] << " (int32), expected " << expected;
        }
      }

      // float32 sum of fractions, in place.
      std::vector<float> values(c.count);
      for (size_t i = 0; i < c.count; ++i) values[i] = fraction_input(rank, i);
      args.send = args.recv = values.data();
      args.type = ncclFloat32;
      context.sequence = sequence + 2;
      ASSERT_EQ(algorithm(args, context, phase), ncclSuccess) << what << ": " << last_error();
      if (ring_order) {
        std::vector<std::vector<float>> inputs(static_cast<size_t>(n), std::vector<float>(c.count));
        for (int p = 0; p < n; ++p) {
          for (size_t i = 0; i < c.count; ++i) {
            inputs[static_cast<size_t>(p)][i] = fraction_input(group.rank_at(p), i);
          }
        }
        failures = 0;
        for (size_t i = 0; i < c.count && failures < 3; ++i) {
          const float expected = ring_order_sum(inputs, c.count, i);
          if (std::memcmp(&values[i], &expected, sizeof(float)) != 0) {
            ++failures;
            ADD_FAILURE() << what << ": element " << i << " is " << values[i]
                          << ", the ring's order gives " << expected;
          }
        }
      }
      std::vector<uint32_t> bits(c.count);
      std::memcpy(bits.data(), values.data(), c.count * sizeof(float));
      std::lock_guard<std::mutex> lock(mutex);
      results[index][static_cast<size_t>(rank)] = std::move(bits);
    }
  });
  for (size_t index = 0; index < cases.size(); ++index) {
    for (const auto& group : cases[index].groups) {
      for (int member : group) {
        EXPECT_EQ(results[index][static_cast<size_t>(member)],
                  results[index][static_cast<size_t>(group.front())])
            << describe(cases[index]) << ": rank " << member << " holds other bits than rank "
            << group.front();
      }
    }
  }
}

// Groups on `nranks` ranks: all in order, all reversed, and two disjoint subsets in scrambled
// orders.
std::vector<std::vector<std::vector<int>>> group_layouts(int nranks) {
  std::vector<int> all;
  for (int r = 0; r < nranks; ++r) all.push_back(r);
  const std::vector<int> reversed(all.rbegin(), all.rend());
  std::vector<std::vector<int>> subsets;
  switch (nranks) {
    case 2:
      subsets = {{1}, {0}};
      break;
    case 3:
      subsets = {{2, 0}, {1}};
      break;
    case 4:
      subsets = {{3, 0, 2}, {1}};
      break;
    default:
      subsets = {{3, 0, 4}, {2, 1}};
      break;  // 5 ranks
  }
  return {{all}, {reversed}, subsets};
}

std::vector<GroupCase> boundary_cases(int nranks) {
  std::vector<GroupCase> cases;
  for (const auto& groups : group_layouts(nranks)) {
    for (size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{1001}}) {
      cases.push_back(GroupCase{groups, count, kDefaultPieceBytes});
    }
    // Pieces of 3 floats (12 bytes; the blocks of 1001 elements hold 200 or 201 of them on 5
    // ranks, 333 or 334 on 3, so blocks end with short pieces), and of 4 KiB over ~1 MiB.
    cases.push_back(GroupCase{groups, 1001, 12});
    cases.push_back(GroupCase{groups, 29, 8});
    cases.push_back(GroupCase{groups, (size_t{1} << 18) + 13, 4096});
  }
  return cases;
}

class GroupAllreduceRanks : public ::testing::TestWithParam<int> {};

TEST_P(GroupAllreduceRanks, RingAtPieceBoundaries) {
  run_group_cases(ring_allreduce_in_group, GetParam(), boundary_cases(GetParam()),
                  /*ring_order=*/true);
}

TEST_P(GroupAllreduceRanks, RecursiveDoublingAtOddSizes) {
  run_group_cases(recursive_doubling_allreduce_in_group, GetParam(), boundary_cases(GetParam()),
                  /*ring_order=*/false);
}

INSTANTIATE_TEST_SUITE_P(Ranks, GroupAllreduceRanks, ::testing::Values(2, 3, 4, 5),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// Two phases of one operation on different groups of the same ranks, the second's steps right
// after the first's: they must not take each other's messages although a rank may start the
// second phase while its neighbours are still in the first. The ring reports what it sent: every
// block but its own in the reduce-scatter, every block but its successor's in the allgather, in
// pieces.
TEST(GroupAllreduce, PhasesOfOneOperationAndTheirTraffic) {
  constexpr int kRanks = 5;
  constexpr size_t kCount = 1003;
  const std::vector<int> first_order = {0, 1, 2, 3, 4}, second_order = {4, 2, 0, 3, 1};
  test::run_with_transports(kRanks, [&](Transport& transport) {
    const int rank = transport.rank();
    PeerGroup first, second;
    first.ranks = first_order;
    second.ranks = second_order;
    first.index = rank;
    for (int p = 0; p < kRanks; ++p) {
      if (second_order[static_cast<size_t>(p)] == rank) second.index = p;
    }
    AlgorithmContext context{&transport, 42, transport.default_deadline(), 64};  // 16 floats
    std::vector<float> a(kCount), b(kCount);
    for (size_t i = 0; i < kCount; ++i) {
      a[i] = static_cast<float>(integer_input(rank, i));
      b[i] = static_cast<float>(integer_input(rank, i + 5));
    }
    CollectiveArgs args;
    args.count = kCount;
    args.type = ncclFloat32;
    SentTraffic sent;
    args.send = args.recv = a.data();
    ASSERT_EQ(ring_allreduce_in_group(args, context, GroupPhase{&first, 0, &sent}), ncclSuccess)
        << last_error();
    args.send = args.recv = b.data();
    ASSERT_EQ(ring_allreduce_in_group(args, context,
                                      GroupPhase{&second, ring_allreduce_steps(kRanks), nullptr}),
              ncclSuccess)
        << last_error();
    for (size_t i = 0; i < kCount; ++i) {
      double sum_a = 0, sum_b = 0;
      for (int r = 0; r < kRanks; ++r) {
        sum_a += integer_input(r, i);
        sum_b += integer_input(r, i + 5);
      }
      ASSERT_EQ(a[i], sum_a) << "rank " << rank << " element " << i;
      ASSERT_EQ(b[i], sum_b) << "rank " << rank << " element " << i;
    }
    const size_t own = near_equal_block(kCount, kRanks, rank).count;
    const size_t successors = near_equal_block(kCount, kRanks, (rank + 1) % kRanks).count;
    EXPECT_EQ(sent.bytes, (2 * kCount - own - successors) * sizeof(float)) << "rank " << rank;
    // Blocks of 200 or 201 elements in pieces of 16: 13 pieces per step, 8 steps.
    EXPECT_EQ(sent.messages, 8u * 13) << "rank " << rank;
  });
}

TEST(GroupAllreduce, StepCounts) {
  EXPECT_EQ(ring_allreduce_steps(1), 0u);
  EXPECT_EQ(ring_allreduce_steps(5), 8u);
  EXPECT_EQ(recursive_doubling_allreduce_steps(1), 0u);
  EXPECT_EQ(recursive_doubling_allreduce_steps(4), 4u);  // fold, 2 rounds, unfold
  EXPECT_EQ(recursive_doubling_allreduce_steps(5), 4u);
  EXPECT_EQ(recursive_doubling_allreduce_steps(8), 5u);
}

}  // namespace
}  // namespace terse
