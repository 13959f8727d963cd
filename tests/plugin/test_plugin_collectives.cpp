// Every collective through the NCCL API, ranks as threads, results checked exactly (the values
// are small integers, exact in every type used).
#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <vector>

#include "plugin_ranks.h"

namespace {

using plugin_test::failed;
using plugin_test::run_ranks;

class PluginCollectives : public ::testing::TestWithParam<int> {};

TEST_P(PluginCollectives, AllReduceSumAvgAndPreMulSum) {
  const int n = GetParam();
  const size_t count = 1000;
  std::atomic<int> failures{0};
  auto error = run_ranks(n, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(count), recv(count, -1.0f);
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(rank + 1) * (i % 7);
    const float rank_sum = n * (n + 1) / 2.0f;
    if (failed(ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr),
               "ncclAllReduce")) {
      ++failures;
      return;
    }
    for (size_t i = 0; i < count; ++i) {
      if (recv[i] != rank_sum * (i % 7)) ++failures;
    }
    // Average of integers: the sum divided by n (truncating).
    std::vector<int32_t> ints(count, rank * 4), int_avg(count, -1);
    if (failed(ncclAllReduce(ints.data(), int_avg.data(), count, ncclInt32, ncclAvg, comm, nullptr),
               "ncclAllReduce")) {
      ++failures;
      return;
    }
    const int32_t expected_avg = (4 * n * (n - 1) / 2) / n;
    for (int32_t value : int_avg) {
      if (value != expected_avg) ++failures;
    }
    // Average of doubles, in place.
    std::vector<double> doubles(count, 2.0 * n);
    if (failed(ncclAllReduce(doubles.data(), doubles.data(), count, ncclFloat64, ncclAvg, comm,
                             nullptr),
               "ncclAllReduce")) {
      ++failures;
      return;
    }
    for (double value : doubles) {
      if (value != 2.0 * n) ++failures;
    }
    // PreMulSum with each rank's own scalar (rank + 1), immediate: sum of (rank+1) * 2.
    float scalar = static_cast<float>(rank + 1);
    ncclRedOp_t premul;
    if (failed(
            ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat32, ncclScalarHostImmediate, comm),
            "ncclRedOpCreatePreMulSum")) {
      ++failures;
      return;
    }
    scalar = 100.0f;  // read at creation, so this must not matter
    std::vector<float> twos(count, 2.0f), scaled(count, 0.0f);
    if (failed(ncclAllReduce(twos.data(), scaled.data(), count, ncclFloat32, premul, comm, nullptr),
               "ncclAllReduce")) {
      ++failures;
    }
    for (float value : scaled) {
      if (value != 2.0f * rank_sum) ++failures;
    }
    if (failed(ncclRedOpDestroy(premul, comm), "ncclRedOpDestroy")) ++failures;
  });
  EXPECT_EQ(error, "");
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(PluginCollectives, BroadcastAllGatherReduceScatterReduce) {
  const int n = GetParam();
  const size_t count = 513;
  std::atomic<int> failures{0};
  auto error = run_ranks(n, [&](int rank, ncclComm_t comm) {
    const int root = n - 1;
    std::vector<int64_t> data(count, rank == root ? 42 : 0);
    if (failed(ncclBroadcast(data.data(), data.data(), count, ncclInt64, root, comm, nullptr),
               "ncclBroadcast")) {
      ++failures;
      return;
    }
    for (int64_t value : data) {
      if (value != 42) ++failures;
    }
    std::vector<int32_t> mine(count, rank), gathered(count * n, -1);
    if (failed(ncclAllGather(mine.data(), gathered.data(), count, ncclInt32, comm, nullptr),
               "ncclAllGather")) {
      ++failures;
      return;
    }
    for (size_t i = 0; i < gathered.size(); ++i) {
      if (gathered[i] != static_cast<int32_t>(i / count)) ++failures;
    }
    // Reduce-scatter: element j of block b is b + j on every rank, so the sum is n * (b + j).
    std::vector<float> blocks(count * n), part(count, -1.0f);
    for (size_t i = 0; i < blocks.size(); ++i)
      blocks[i] = static_cast<float>(i / count + i % count);
    if (failed(ncclReduceScatter(blocks.data(), part.data(), count, ncclFloat32, ncclSum, comm,
                                 nullptr),
               "ncclReduceScatter")) {
      ++failures;
      return;
    }
    for (size_t j = 0; j < count; ++j) {
      if (part[j] != static_cast<float>(n * (rank + j))) ++failures;
    }
    std::vector<int32_t> values(count, rank + 1), maximum(count, -1);
    if (failed(
            ncclReduce(values.data(), maximum.data(), count, ncclInt32, ncclMax, 0, comm, nullptr),
            "ncclReduce")) {
      ++failures;
      return;
    }
    if (rank == 0) {
      for (int32_t value : maximum) {
        if (value != n) ++failures;
      }
    }
  });
  EXPECT_EQ(error, "");
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(PluginCollectives, SendRecvRingInAGroup) {
  const int n = GetParam();
  const size_t count = 300;
  std::atomic<int> failures{0};
  auto error = run_ranks(n, [&](int rank, ncclComm_t comm) {
    std::vector<uint8_t> send(count, static_cast<uint8_t>(rank + 10)), recv(count, 0);
    const int next = (rank + 1) % n, previous = (rank + n - 1) % n;
    // Receive first on every rank: only a group lets this order complete.
    if (failed(ncclGroupStart(), "ncclGroupStart") ||
        failed(ncclRecv(recv.data(), count, ncclUint8, previous, comm, nullptr), "ncclRecv") ||
        failed(ncclSend(send.data(), count, ncclUint8, next, comm, nullptr), "ncclSend") ||
        failed(ncclGroupEnd(), "ncclGroupEnd")) {
      ++failures;
      return;
    }
    for (uint8_t value : recv) {
      if (value != previous + 10) ++failures;
    }
  });
  EXPECT_EQ(error, "");
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(PluginCollectives, SplitByParity) {
  const int n = GetParam();
  std::atomic<int> failures{0};
  auto error = run_ranks(n, [&](int rank, ncclComm_t comm) {
    ncclComm_t half = nullptr;
    // Key reverses the order, so sub-ranks count down.
    if (failed(ncclCommSplit(comm, rank % 2, -rank, &half, nullptr), "ncclCommSplit") ||
        half == nullptr) {
      ++failures;
      return;
    }
    int count = 0, sub_rank = -1;
    ncclCommCount(half, &count);
    ncclCommUserRank(half, &sub_rank);
    const int expected_count = (n + 1 - rank % 2) / 2;
    if (count != expected_count) ++failures;
    if (sub_rank != expected_count - 1 - rank / 2) ++failures;
    int value = rank, sum = -1;
    if (failed(ncclAllReduce(&value, &sum, 1, ncclInt32, ncclSum, half, nullptr),
               "ncclAllReduce")) {
      ++failures;
    }
    int expected_sum = 0;
    for (int r = rank % 2; r < n; r += 2) expected_sum += r;
    if (sum != expected_sum) ++failures;
    if (failed(ncclCommDestroy(half), "ncclCommDestroy")) ++failures;
  });
  EXPECT_EQ(error, "");
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(PluginCollectives, AlltoAllGatherScatter) {
  const int n = GetParam();
  const size_t count = 37;
  std::atomic<int> failures{0};
  auto error = run_ranks(n, [&](int rank, ncclComm_t comm) {
    // Alltoall: block p of rank r's send is 100 * r + p; rank r receives 100 * p + r from p.
    std::vector<int32_t> send(count * n), recv(count * n, -1);
    for (size_t i = 0; i < send.size(); ++i) send[i] = 100 * rank + static_cast<int32_t>(i / count);
    if (failed(ncclAlltoAll(send.data(), recv.data(), count, ncclInt32, comm, nullptr),
               "ncclAlltoAll")) {
      ++failures;
      return;
    }
    for (size_t i = 0; i < recv.size(); ++i) {
      if (recv[i] != 100 * static_cast<int32_t>(i / count) + rank) ++failures;
    }
    const int root = 1 % n;
    std::vector<double> mine(count, rank * 2.0), gathered(count * n, -1.0);
    if (failed(ncclGather(mine.data(), gathered.data(), count, ncclFloat64, root, comm, nullptr),
               "ncclGather")) {
      ++failures;
      return;
    }
    if (rank == root) {
      for (size_t i = 0; i < gathered.size(); ++i) {
        if (gathered[i] != 2.0 * (i / count)) ++failures;
      }
    }
    std::vector<double> scattered(count, -1.0);
    if (failed(
            ncclScatter(gathered.data(), scattered.data(), count, ncclFloat64, root, comm, nullptr),
            "ncclScatter")) {
      ++failures;
      return;
    }
    for (double value : scattered) {
      if (value != rank * 2.0) ++failures;
    }
  });
  EXPECT_EQ(error, "");
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(PluginCollectives, SplitWithNoColorLeavesRankOut) {
  const int n = GetParam();
  std::atomic<int> failures{0};
  auto error = run_ranks(n, [&](int rank, ncclComm_t comm) {
    ncclComm_t rest = nullptr;
    const int color = rank == 0 ? NCCL_SPLIT_NOCOLOR : 7;
    if (failed(ncclCommSplit(comm, color, rank, &rest, nullptr), "ncclCommSplit")) {
      ++failures;
      return;
    }
    if (rank == 0) {
      if (rest != nullptr) ++failures;
      return;
    }
    int count = 0;
    if (rest == nullptr || failed(ncclCommCount(rest, &count), "ncclCommCount") || count != n - 1) {
      ++failures;
    }
    if (rest != nullptr && failed(ncclCommDestroy(rest), "ncclCommDestroy")) ++failures;
  });
  EXPECT_EQ(error, "");
  EXPECT_EQ(failures.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, PluginCollectives, ::testing::Values(2, 4));

// Every rank driven from this one thread: ncclCommInitRank inside a group, then a group of
// allreduces on every communicator.
TEST(PluginGroups, InitRankAndCollectivesFromOneThread) {
  const int n = 3;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(n, nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int rank = 0; rank < n; ++rank) {
    ASSERT_EQ(ncclCommInitRank(&comms[rank], n, id, rank), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<double>> data(n);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int rank = 0; rank < n; ++rank) {
    data[rank].assign(64, rank + 0.5);
    ASSERT_EQ(ncclAllReduce(data[rank].data(), data[rank].data(), 64, ncclFloat64, ncclSum,
                            comms[rank], nullptr),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int rank = 0; rank < n; ++rank) {
    for (double value : data[rank]) EXPECT_EQ(value, 0.5 + 1.5 + 2.5);
    int user_rank = -1;
    EXPECT_EQ(ncclCommUserRank(comms[rank], &user_rank), ncclSuccess);
    EXPECT_EQ(user_rank, rank);
  }
  // Finalize flushes, which needs every rank: from one thread, only inside a group.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (auto comm : comms) EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  // Destroy closes in the background, so one thread may destroy every rank in turn.
  for (auto comm : comms) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(PluginGroups, InitAllThenAbort) {
  const int n = 2;
  ncclComm_t comms[n] = {};
  ASSERT_EQ(ncclCommInitAll(comms, n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  int value[n] = {3, 4};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int rank = 0; rank < n; ++rank) {
    ASSERT_EQ(
        ncclAllReduce(&value[rank], &value[rank], 1, ncclInt32, ncclProd, comms[rank], nullptr),
        ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(value[0], 12);
  EXPECT_EQ(value[1], 12);
  ncclResult_t async = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  for (auto comm : comms) EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
}

}  // namespace
