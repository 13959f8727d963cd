// Groups (group.h): sends and receives in one group never wait on each other's order (a ring of
// send/recv, in either order per rank, with messages large enough for UCX's rendezvous), one
// thread can drive every rank of a job, collectives and point-to-point mix, and errors inside a
// group come back from group_end.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "collectives/group.h"
#include "common/result.h"
#include "communicator_test_support.h"

namespace terse {
namespace {

using test::CommunicatorWorld;
using K = CollectiveKind;

// rank * 1000003 + i: distinct per rank and element.
std::vector<int64_t> pattern(int rank, size_t count) {
  std::vector<int64_t> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<int64_t>(rank) * 1000003 + i;
  return values;
}

CollectiveArgs point_to_point(K kind, int peer, const void* send, void* recv, size_t count) {
  CollectiveArgs args;
  args.kind = kind;
  args.peer = peer;
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.type = ncclInt64;
  return args;
}

class GroupRanks : public ::testing::TestWithParam<int> {};

// 1 MiB per message: far past UCX's eager limit, so a send completes only once the matching
// receive is posted. Odd ranks queue the receive first, even ranks the send.
TEST_P(GroupRanks, RingOfSendAndReceiveDoesNotDeadlock) {
  const int n = GetParam();
  CommunicatorWorld world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  const size_t count = (size_t{1} << 20) / sizeof(int64_t) + 3;
  world.run([&](Communicator& comm) {
    const int rank = comm.rank(), next = (rank + 1) % n, previous = (rank + n - 1) % n;
    const std::vector<int64_t> mine = pattern(rank, count);
    std::vector<int64_t> got(count, -1);
    const CollectiveArgs send = point_to_point(K::kSend, next, mine.data(), nullptr, count);
    const CollectiveArgs recv = point_to_point(K::kRecv, previous, nullptr, got.data(), count);
    ASSERT_EQ(group_start(), ncclSuccess);
    if (rank % 2 == 1) {
      ASSERT_EQ(submit(&comm, recv), ncclSuccess);
      ASSERT_EQ(submit(&comm, send), ncclSuccess);
    } else {
      ASSERT_EQ(submit(&comm, send), ncclSuccess);
      ASSERT_EQ(submit(&comm, recv), ncclSuccess);
    }
    ASSERT_EQ(group_end(), ncclSuccess) << last_error();
    EXPECT_EQ(got, pattern(previous, count)) << "rank " << rank;
  });
}

// Several messages to one peer in one group arrive in the order they were queued, and a rank
// may send to itself.
TEST_P(GroupRanks, MessagesToOnePeerKeepTheirOrderAndSelfSendsWork) {
  const int n = GetParam();
  CommunicatorWorld world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](Communicator& comm) {
    const int rank = comm.rank(), next = (rank + 1) % n, previous = (rank + n - 1) % n;
    const std::vector<int64_t> a = pattern(rank, 7), b = pattern(rank + 100, 7);
    std::vector<int64_t> first(7), second(7), self(7);
    ASSERT_EQ(group_start(), ncclSuccess);
    ASSERT_EQ(submit(&comm, point_to_point(K::kRecv, previous, nullptr, first.data(), 7)),
              ncclSuccess);
    ASSERT_EQ(submit(&comm, point_to_point(K::kSend, next, a.data(), nullptr, 7)), ncclSuccess);
    ASSERT_EQ(submit(&comm, point_to_point(K::kSend, next, b.data(), nullptr, 7)), ncclSuccess);
    ASSERT_EQ(submit(&comm, point_to_point(K::kRecv, previous, nullptr, second.data(), 7)),
              ncclSuccess);
    ASSERT_EQ(submit(&comm, point_to_point(K::kSend, rank, a.data(), nullptr, 7)), ncclSuccess);
    ASSERT_EQ(submit(&comm, point_to_point(K::kRecv, rank, nullptr, self.data(), 7)), ncclSuccess);
    ASSERT_EQ(group_end(), ncclSuccess) << last_error();
    if (n == 1) {
      // Alone, the "ring" is this rank: four messages to itself, matched in order per direction.
      EXPECT_EQ(first, a);
      EXPECT_EQ(second, b);
    } else {
      EXPECT_EQ(first, pattern(previous, 7));
      EXPECT_EQ(second, pattern(previous + 100, 7));
    }
    EXPECT_EQ(self, a) << "rank " << rank;
  });
}

// Collectives and point-to-point in one group, queued in different orders on different ranks.
TEST_P(GroupRanks, CollectivesAndPointToPointMix) {
  const int n = GetParam();
  CommunicatorWorld world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](Communicator& comm) {
    const int rank = comm.rank(), next = (rank + 1) % n, previous = (rank + n - 1) % n;
    const std::vector<int64_t> mine = pattern(rank, 100);
    std::vector<int64_t> got(100), gathered(100 * static_cast<size_t>(n));
    CollectiveArgs allgather;
    allgather.kind = K::kAllGather;
    allgather.send = mine.data();
    allgather.recv = gathered.data();
    allgather.count = 100;
    allgather.type = ncclInt64;
    ASSERT_EQ(group_start(), ncclSuccess);
    if (rank % 2 == 0) {
      ASSERT_EQ(submit(&comm, allgather), ncclSuccess);
    }
    ASSERT_EQ(submit(&comm, point_to_point(K::kRecv, previous, nullptr, got.data(), 100)),
              ncclSuccess);
    ASSERT_EQ(submit(&comm, point_to_point(K::kSend, next, mine.data(), nullptr, 100)),
              ncclSuccess);
    if (rank % 2 == 1) {
      ASSERT_EQ(submit(&comm, allgather), ncclSuccess);
    }
    ASSERT_EQ(group_end(), ncclSuccess) << last_error();
    EXPECT_EQ(got, pattern(previous, 100));
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(std::vector<int64_t>(gathered.begin() + 100 * r, gathered.begin() + 100 * (r + 1)),
                pattern(r, 100));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, GroupRanks, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// The single-process multi-device pattern: one thread issues every rank's calls inside one
// group; the ranks must progress together at group_end.
TEST(Group, OneThreadDrivesEveryRank) {
  const int n = 4;
  CommunicatorWorld world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  const size_t count = (size_t{1} << 19) / sizeof(int64_t);
  std::vector<std::vector<int64_t>> mine, broadcast(n), got(n, std::vector<int64_t>(count));
  for (int r = 0; r < n; ++r) {
    mine.push_back(pattern(r, count));
    broadcast[r] = r == 2 ? pattern(42, count) : std::vector<int64_t>(count, 0);
  }
  ASSERT_EQ(group_start(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    CollectiveArgs args;
    args.kind = K::kBroadcast;
    args.send = broadcast[r].data();
    args.recv = broadcast[r].data();
    args.count = count;
    args.type = ncclInt64;
    args.root = 2;
    ASSERT_EQ(submit(&world.comm(r), args), ncclSuccess);
    ASSERT_EQ(submit(&world.comm(r),
                     point_to_point(K::kSend, (r + 1) % n, mine[r].data(), nullptr, count)),
              ncclSuccess);
    ASSERT_EQ(submit(&world.comm(r),
                     point_to_point(K::kRecv, (r + n - 1) % n, nullptr, got[r].data(), count)),
              ncclSuccess);
  }
  ASSERT_EQ(group_end(), ncclSuccess) << last_error();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(broadcast[r], pattern(42, count)) << "rank " << r;
    EXPECT_EQ(got[r], pattern((r + n - 1) % n, count)) << "rank " << r;
  }
}

TEST(Group, NestedGroupsRunAtTheOutermostEnd) {
  CommunicatorWorld world(1);
  ASSERT_TRUE(world.ok()) << world.error();
  const std::vector<int64_t> mine = pattern(3, 5);
  std::vector<int64_t> got(5, 0);
  ASSERT_EQ(group_start(), ncclSuccess);
  ASSERT_EQ(group_start(), ncclSuccess);
  EXPECT_EQ(group_depth(), 2);
  ASSERT_EQ(submit(&world.comm(0), point_to_point(K::kSend, 0, mine.data(), nullptr, 5)),
            ncclSuccess);
  ASSERT_EQ(submit(&world.comm(0), point_to_point(K::kRecv, 0, nullptr, got.data(), 5)),
            ncclSuccess);
  ASSERT_EQ(group_end(), ncclSuccess);
  EXPECT_EQ(got, std::vector<int64_t>(5, 0)) << "ran before the outermost group_end";
  ASSERT_EQ(group_end(), ncclSuccess) << last_error();
  EXPECT_EQ(got, mine);
  EXPECT_EQ(group_depth(), 0);
}

TEST(Group, EndWithoutStartIsInvalidUsage) {
  EXPECT_EQ(group_end(), ncclInvalidUsage);
  EXPECT_NE(std::string(last_error()).find("ncclGroupStart"), std::string::npos);
}

// A bad call inside a group returns its error at once, and group_end returns it again without
// running the rest (which would otherwise wait for peers that gave up).
TEST(Group, ABadCallFailsTheWholeGroup) {
  CommunicatorWorld world(1);
  ASSERT_TRUE(world.ok()) << world.error();
  const std::vector<int64_t> mine = pattern(1, 5);
  std::vector<int64_t> got(5, 0);
  ASSERT_EQ(group_start(), ncclSuccess);
  ASSERT_EQ(submit(&world.comm(0), point_to_point(K::kSend, 0, mine.data(), nullptr, 5)),
            ncclSuccess);
  ASSERT_EQ(submit(&world.comm(0), point_to_point(K::kRecv, 0, nullptr, got.data(), 5)),
            ncclSuccess);
  EXPECT_EQ(submit(&world.comm(0), point_to_point(K::kRecv, 3, nullptr, got.data(), 5)),
            ncclInvalidArgument);
  EXPECT_EQ(group_end(), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("peer 3"), std::string::npos) << last_error();
  EXPECT_EQ(got, std::vector<int64_t>(5, 0));
  // The communicator is unharmed and the next group starts clean.
  ASSERT_EQ(group_start(), ncclSuccess);
  ASSERT_EQ(submit(&world.comm(0), point_to_point(K::kSend, 0, mine.data(), nullptr, 5)),
            ncclSuccess);
  ASSERT_EQ(submit(&world.comm(0), point_to_point(K::kRecv, 0, nullptr, got.data(), 5)),
            ncclSuccess);
  EXPECT_EQ(group_end(), ncclSuccess) << last_error();
  EXPECT_EQ(got, mine);
}

// Outside a group, send and receive run at once; an empty one is nothing to do on either side.
TEST(PointToPoint, OutsideAGroupAndEmpty) {
  CommunicatorWorld world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](Communicator& comm) {
    const std::vector<int64_t> mine = pattern(comm.rank(), 1001);
    std::vector<int64_t> got(1001, 0);
    if (comm.rank() == 0) {
      ASSERT_EQ(submit(&comm, point_to_point(K::kSend, 1, mine.data(), nullptr, 1001)), ncclSuccess)
          << last_error();
      ASSERT_EQ(submit(&comm, point_to_point(K::kSend, 1, nullptr, nullptr, 0)), ncclSuccess);
    } else {
      ASSERT_EQ(submit(&comm, point_to_point(K::kRecv, 0, nullptr, got.data(), 1001)), ncclSuccess)
          << last_error();
      ASSERT_EQ(submit(&comm, point_to_point(K::kRecv, 0, nullptr, nullptr, 0)), ncclSuccess);
      EXPECT_EQ(got, pattern(0, 1001));
    }
  });
}

}  // namespace
}  // namespace terse
