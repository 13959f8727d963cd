// The communicator's own behaviour: argument checks with messages that name the argument, the
// error state (a failure breaks it; later calls fail at once), abort from another thread,
// finalize, and the settings it reads at creation.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithm_table.h"
#include "common/result.h"
#include "communicator_test_support.h"
#include "transport/deadline.h"
#include "transport/unique_id.h"

namespace terse {
namespace {

using test::CommunicatorWorld;
using K = CollectiveKind;

CollectiveArgs call(K kind, const void* send, void* recv, size_t count,
                    ncclDataType_t type = ncclFloat32) {
  CollectiveArgs args;
  args.kind = kind;
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.type = type;
  return args;
}

bool mentions(const std::string& text) {
  return std::string(last_error()).find(text) != std::string::npos;
}

TEST(CommunicatorArguments, RefusedWithAMessageNamingTheArgument) {
  CommunicatorWorld world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  Communicator& comm = world.comm(1);
  float buffer[8] = {};

  CollectiveArgs args = call(K::kBroadcast, buffer, buffer, 8);
  args.root = 2;
  EXPECT_EQ(comm.check_arguments(args), ncclInvalidArgument);
  EXPECT_TRUE(mentions("root 2")) << last_error();
  args.root = -1;
  EXPECT_EQ(comm.check_arguments(args), ncclInvalidArgument);

  args = call(K::kSend, buffer, nullptr, 8);
  args.peer = 5;
  EXPECT_EQ(comm.check_arguments(args), ncclInvalidArgument);
  EXPECT_TRUE(mentions("peer 5")) << last_error();

  EXPECT_EQ(comm.check_arguments(call(K::kAllGather, nullptr, buffer, 4)), ncclInvalidArgument);
  EXPECT_TRUE(mentions("sendbuff is NULL")) << last_error();
  EXPECT_EQ(comm.check_arguments(call(K::kReduceScatter, buffer, nullptr, 4)), ncclInvalidArgument);
  EXPECT_TRUE(mentions("recvbuff is NULL")) << last_error();

  EXPECT_EQ(comm.check_arguments(
                call(K::kAllToAll, buffer, buffer, 1, static_cast<ncclDataType_t>(ncclNumTypes))),
            ncclInvalidArgument);
  EXPECT_TRUE(mentions("datatype 12")) << last_error();

  // count * 4 bytes fits size_t, but the allgather's output (2 blocks) does not.
  EXPECT_EQ(comm.check_arguments(call(K::kAllGather, buffer, buffer, SIZE_MAX / 6)),
            ncclInvalidArgument);
  EXPECT_TRUE(mentions("overflows")) << last_error();
  EXPECT_EQ(comm.check_arguments(call(K::kBroadcast, buffer, buffer, SIZE_MAX / 2)),
            ncclInvalidArgument);

  // Buffers a rank does not use may be NULL: recvbuff off the root of a reduce or gather,
  // sendbuff off the root of a broadcast or scatter (rank 1 is not root 0 here).
  EXPECT_EQ(comm.check_arguments(call(K::kReduce, buffer, nullptr, 8)), ncclSuccess);
  EXPECT_EQ(comm.check_arguments(call(K::kGather, buffer, nullptr, 8)), ncclSuccess);
  EXPECT_EQ(comm.check_arguments(call(K::kBroadcast, nullptr, buffer, 8)), ncclSuccess);
  EXPECT_EQ(comm.check_arguments(call(K::kScatter, nullptr, buffer, 8)), ncclSuccess);
  EXPECT_EQ(world.comm(0).check_arguments(call(K::kScatter, nullptr, buffer, 8)),
            ncclInvalidArgument);
  // And any buffer may be NULL when there is nothing to move.
  EXPECT_EQ(comm.check_arguments(call(K::kAllToAll, nullptr, nullptr, 0)), ncclSuccess);

  // A refused call leaves the communicator healthy.
  EXPECT_EQ(comm.async_error(), ncclSuccess);
}

// Ranks that disagree about a count: the receiving rank sees a message of the wrong size
// (ncclInvalidUsage naming the sizes), and its communicator is broken from then on: every
// later call fails at once with the same error, and ncclCommGetAsyncError reports it.
TEST(CommunicatorErrors, MismatchedCountsBreakTheReceivingCommunicator) {
  for (size_t receiver_count : {20, 5}) {
    CommunicatorWorld world(2);
    ASSERT_TRUE(world.ok()) << world.error();
    std::vector<ncclResult_t> results(2);
    std::vector<std::string> messages(2);
    world.run([&](Communicator& comm) {
      std::vector<float> data(20, 1.0f);
      CollectiveArgs args =
          call(K::kBroadcast, data.data(), data.data(), comm.rank() == 0 ? 10 : receiver_count);
      args.root = 0;
      results[comm.rank()] = comm.run(args);
      messages[comm.rank()] = last_error();
    });
    EXPECT_EQ(results[0], ncclSuccess) << messages[0];
    EXPECT_EQ(results[1], ncclInvalidUsage) << messages[1];
    EXPECT_NE(messages[1].find("bytes"), std::string::npos) << messages[1];
    Communicator& broken = world.comm(1);
    EXPECT_EQ(broken.async_error(), ncclInvalidUsage);
    EXPECT_EQ(broken.async_error_message(), messages[1]);
    float value = 0;
    CollectiveArgs args = call(K::kAllGather, &value, &value, 0);
    EXPECT_EQ(broken.run(args), ncclInvalidUsage);
    EXPECT_TRUE(mentions("failed earlier")) << last_error();
  }
}

// A collective blocked on a peer that never comes (rank 1 never calls it) ends with
// ncclRemoteError as soon as another thread aborts the communicator, long before
// TERSE_TIMEOUT_S; abort returns; the aborted communicator refuses further calls.
TEST(CommunicatorAbort, FromAnotherThreadEndsABlockedCollective) {
  CommunicatorWorld world(2, {{"TERSE_TIMEOUT_S", "120"}});
  ASSERT_TRUE(world.ok()) << world.error();
  Communicator& comm = world.comm(0);
  std::vector<float> mine(4096, 1.0f), data(2 * mine.size());
  ncclResult_t result = ncclSuccess;
  using Clock = std::chrono::steady_clock;
  Clock::time_point returned;
  const uint64_t sent_before = comm.transport()->bytes_sent();
  std::thread blocked([&] {
    // An allgather: rank 0 sends its block to rank 1, then waits for rank 1's, which never comes.
    result = comm.run(call(K::kAllGather, mine.data(), data.data(), mine.size()));
    returned = Clock::now();
  });
  // Abort once the call is under way, as its first send shows (the call holds the call lock from
  // before that send until it returns): an abort before the call began would have it refused as
  // aborted instead, and no time slept makes sure it began. The deadline only turns a hang into a
  // failure.
  const Deadline give_up = Deadline::after_seconds(60);
  while (comm.transport()->bytes_sent() == sent_before && !give_up.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GT(comm.transport()->bytes_sent(), sent_before) << "the allgather never sent";
  const Clock::time_point aborted = Clock::now();
  comm.abort();
  const double abort_seconds = std::chrono::duration<double>(Clock::now() - aborted).count();
  blocked.join();
  EXPECT_EQ(result, ncclRemoteError);
  // Far below the 120 s deadline: the abort, not the deadline, ended the wait.
  EXPECT_LT(std::chrono::duration<double>(returned - aborted).count(), 60.0);
  EXPECT_LT(abort_seconds, 60.0);
  CollectiveArgs args = call(K::kAllGather, data.data(), data.data(), 1);
  EXPECT_EQ(comm.run(args), ncclInvalidUsage);
  EXPECT_TRUE(mentions("aborted")) << last_error();
  comm.abort();  // again: nothing to do
  // The peer leaves too (its endpoint to the aborted rank is gone; abort needs no peer).
  world.comm(1).abort();
}

TEST(CommunicatorAbort, IdleCommunicatorsAbortOnEveryRank) {
  CommunicatorWorld world(3);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([](Communicator& comm) { comm.abort(); });
}

TEST(CommunicatorLifecycle, FinalizeThenCallsAreRefused) {
  CommunicatorWorld world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([](Communicator& comm) {
    int32_t value = comm.rank(), all[2] = {-1, -1};
    ASSERT_EQ(comm.run(call(K::kAllGather, &value, all, 1, ncclInt32)), ncclSuccess);
    EXPECT_EQ(all[0], 0);
    EXPECT_EQ(all[1], 1);
    EXPECT_EQ(comm.finalize(), ncclSuccess);
    EXPECT_EQ(comm.finalize(), ncclSuccess);
    EXPECT_EQ(comm.run(call(K::kAllGather, &value, all, 1, ncclInt32)), ncclInvalidUsage);
    EXPECT_TRUE(mentions("finalized")) << last_error();
  });
}

// Settings are read when the communicator is created, so a bad one fails ncclCommInitRank.
// Refused once the ranks have met and compared their settings (every rank then refuses alike), so
// each attempt needs a rendezvous of its own.
TEST(CommunicatorSettings, BadValuesAreRefusedAtCreation) {
  test::EnvironmentSettings loopback(test::loopback_settings());
  UniqueId id;
  std::unique_ptr<Communicator> comm;
  {
    ASSERT_EQ(create_unique_id(&id), ncclSuccess) << last_error();
    test::EnvironmentSettings bad({{std::string("TERSE_ALGO"), "broadcast:warp"}});
    EXPECT_EQ(Communicator::create(id, 0, 1, -1, &comm), ncclInvalidArgument);
    EXPECT_TRUE(mentions("warp")) << last_error();
    EXPECT_TRUE(mentions("broadcast:chain")) << last_error();
  }
  {
    ASSERT_EQ(create_unique_id(&id), ncclSuccess) << last_error();
    test::EnvironmentSettings bad({{std::string("TERSE_PIECE_BYTES"), "0"}});
    EXPECT_EQ(Communicator::create(id, 0, 1, -1, &comm), ncclInvalidArgument);
    EXPECT_TRUE(mentions("TERSE_PIECE_BYTES")) << last_error();
  }
  EXPECT_EQ(comm, nullptr);
}

TEST(CommunicatorSettings, TerseAlgoChoosesTheAlgorithm) {
  CommunicatorWorld chained(1, {{"TERSE_ALGO", "broadcast:chain"}});
  ASSERT_TRUE(chained.ok()) << chained.error();
  CommunicatorWorld plain(1, {{"TERSE_ALGO", ""}});
  ASSERT_TRUE(plain.ok()) << plain.error();
  float value = 0;
  CollectiveArgs args = call(K::kBroadcast, &value, &value, 1);
  EXPECT_STREQ(chained.comm(0).choose_algorithm(args)->name, "chain");
  EXPECT_STREQ(plain.comm(0).choose_algorithm(args)->name, "tree");
  EXPECT_EQ(chained.comm(0).run(args), ncclSuccess) << last_error();
  EXPECT_EQ(chained.comm(0).rank(), 0);
  EXPECT_EQ(chained.comm(0).nranks(), 1);
  EXPECT_EQ(chained.comm(0).cuda_device(), -1);
}

}  // namespace
}  // namespace terse
