// ncclCommSplit (Communicator::split): colors form new communicators ranked by key, with their
// own transports; NCCL_SPLIT_NOCOLOR gets none; the parent keeps working.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.h"
#include "communicator_test_support.h"

namespace terse {
namespace {

using test::CommunicatorWorld;

TEST(Split, ColorsByParityRankedByKeyWithOneRankLeftOut) {
  const int n = 5;
  CommunicatorWorld world(n);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<std::unique_ptr<Communicator>> children(n);
  world.run([&](Communicator& comm) {
    const int rank = comm.rank();
    // Ranks 0 and 2 form color 0, ranks 1 and 3 color 1; rank 4 stays out. Keys reverse the
    // order within each color.
    const int color = rank == 4 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    ASSERT_EQ(comm.split(color, -rank, &children[rank]), ncclSuccess) << last_error();
  });
  EXPECT_EQ(children[4], nullptr);
  const int expected_rank[] = {1, 1, 0, 0};
  for (int r = 0; r < 4; ++r) {
    ASSERT_NE(children[r], nullptr) << "rank " << r;
    EXPECT_EQ(children[r]->nranks(), 2);
    EXPECT_EQ(children[r]->rank(), expected_rank[r]) << "rank " << r;
  }

  // Each child communicator gathers its members' parent ranks in its own rank order, while the
  // parent runs a broadcast (rank 4 only takes part in that).
  std::vector<std::vector<int32_t>> gathered(n);
  std::vector<int32_t> broadcast(n, -1);
  world.run([&](Communicator& comm) {
    const int rank = comm.rank();
    if (children[rank] != nullptr) {
      int32_t mine = rank;
      gathered[rank].assign(2, -1);
      CollectiveArgs args;
      args.kind = CollectiveKind::kAllGather;
      args.send = &mine;
      args.recv = gathered[rank].data();
      args.count = 1;
      args.type = ncclInt32;
      ASSERT_EQ(children[rank]->run(args), ncclSuccess) << last_error();
    }
    int32_t value = rank == 4 ? 77 : 0;
    CollectiveArgs args;
    args.kind = CollectiveKind::kBroadcast;
    args.send = &value;
    args.recv = &value;
    args.count = 1;
    args.type = ncclInt32;
    args.root = 4;
    ASSERT_EQ(comm.run(args), ncclSuccess) << last_error();
    broadcast[rank] = value;
  });
  EXPECT_EQ(gathered[0], (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(gathered[2], (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(gathered[1], (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(gathered[3], (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(broadcast, std::vector<int32_t>(n, 77));

  // Children go first, all at once (closing flushes towards the other members).
  world.run([&](Communicator& comm) { children[comm.rank()].reset(); });
}

TEST(Split, ANegativeColorOtherThanNoColorIsRefused) {
  CommunicatorWorld world(1);
  ASSERT_TRUE(world.ok()) << world.error();
  std::unique_ptr<Communicator> child;
  EXPECT_EQ(world.comm(0).split(-7, 0, &child), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("color -7"), std::string::npos) << last_error();
  EXPECT_EQ(child, nullptr);
}

}  // namespace
}  // namespace terse
