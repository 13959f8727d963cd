// include/terse/terse.h through libterse.so, ranks as threads: the policy from TERSE_CODEC and
// from terseCommSetCodec, terseAllReduceTensor's per-call codec and its refusals, statistics,
// residual resets and the error-bound queries. (Processes: test_plugin_processes.cpp.)
#include <gtest/gtest.h>
#include <nccl.h>
#include <terse/terse.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "plugin_ranks.h"
#include "transport_test_support.h"

namespace {

using terse::test::ScopedEnv;

class CompressionApi : public ::testing::Test {
 protected:
  ScopedEnv ifname_{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family_{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv comm_id_{"TERSE_COMM_ID", nullptr};
  ScopedEnv nccl_comm_id_{"NCCL_COMM_ID", nullptr};
  ScopedEnv timeout_{"TERSE_TIMEOUT_S", "30"};
  ScopedEnv policy_{"TERSE_POLICY", nullptr};
  ScopedEnv hostid_{"TERSE_HOSTID", nullptr};
};

float value(int rank, size_t i) {
  return static_cast<float>(std::cos(0.1 * double(i) * (rank + 1)));
}

// Spins until every one of `nranks` threads arrived (a test-only rendezvous between API calls).
void arrive_and_wait(std::atomic<int>* arrived, int nranks) {
  arrived->fetch_add(1);
  while (arrived->load() < nranks) std::this_thread::yield();
}

TEST_F(CompressionApi, TerseCodecCompressesEveryFloatSumWithinTheBound) {
  ScopedEnv codec("TERSE_CODEC", "int8");
  constexpr int kRanks = 4;
  constexpr size_t kCount = 1 << 16;
  const std::string error = plugin_test::run_ranks(kRanks, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(kCount), recv(kCount);
    for (size_t i = 0; i < kCount; ++i) send[i] = value(rank, i);
    if (plugin_test::failed(
            ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm, nullptr),
            "ncclAllReduce")) {
      return;
    }
    terseStats stats{};
    ASSERT_EQ(terseCommGetStats(comm, &stats), ncclSuccess);
    EXPECT_EQ(stats.calls, 1u);
    EXPECT_EQ(stats.compressed_calls, 1u);
    EXPECT_EQ(std::string(stats.last_codec).rfind("int8:", 0), 0u) << stats.last_codec;
    EXPECT_STREQ(stats.last_algorithm, "sra");
    EXPECT_EQ(stats.raw_bytes, kCount * 4);
    // int8 at block 256 is 0.258 of fp32 (+ headers): the traffic is about a quarter of the
    // dense ring's.
    EXPECT_LT(double(stats.wire_bytes), 0.3 * double(stats.dense_wire_bytes));
    EXPECT_GT(stats.wire_bytes, 0u);
    EXPECT_GT(stats.encode_seconds, 0.0);
    ASSERT_EQ(stats.nrows, 1);
    EXPECT_STREQ(stats.rows[0].codec, "int8");
    double factor = 0;
    terseNorm_t norm = terseNormL2;
    int steps = 0;
    ASSERT_EQ(terseCodecErrorBound(stats.last_codec, kCount, &factor, &norm), ncclSuccess);
    EXPECT_EQ(norm, terseNormMax);  // int8's bound is by the largest magnitude
    ASSERT_EQ(terseAlgorithmLossySteps(stats.last_algorithm, kRanks, &steps), ncclSuccess);
    const double bound = kRanks * (std::pow(1 + factor, steps) - 1) + 1e-5;  // max|x| <= 1
    double worst = 0;
    for (size_t i = 0; i < kCount; ++i) {
      double exact = 0;
      for (int r = 0; r < kRanks; ++r) exact += value(r, i);
      worst = std::max(worst, std::fabs(recv[i] - exact));
    }
    EXPECT_LE(worst, bound);
    EXPECT_GT(worst, 0.0);  // it really went through int8
  });
  EXPECT_EQ(error, "");
}

TEST_F(CompressionApi, WithoutAPolicyNothingIsCompressed) {
  ScopedEnv codec("TERSE_CODEC", nullptr);
  const std::string error = plugin_test::run_ranks(2, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(1000, float(rank + 1)), recv(1000);
    ASSERT_EQ(ncclAllReduce(send.data(), recv.data(), 1000, ncclFloat32, ncclSum, comm, nullptr),
              ncclSuccess);
    EXPECT_EQ(recv[999], 3.0f);
    terseStats stats{};
    ASSERT_EQ(terseCommGetStats(comm, &stats), ncclSuccess);
    EXPECT_EQ(stats.calls, 1u);
    EXPECT_EQ(stats.compressed_calls, 0u);
    ASSERT_EQ(stats.nrows, 1);
    EXPECT_STREQ(stats.rows[0].codec, "none");
    EXPECT_EQ(stats.wire_bytes, stats.rows[0].wire_bytes);
    ASSERT_EQ(terseCommResetStats(comm), ncclSuccess);
    ASSERT_EQ(terseCommGetStats(comm, &stats), ncclSuccess);
    EXPECT_EQ(stats.calls, 0u);
  });
  EXPECT_EQ(error, "");
}

TEST_F(CompressionApi, SetCodecAndPerTensorOverrideChooseTheAlgorithm) {
  ScopedEnv codec("TERSE_CODEC", nullptr);
  constexpr size_t kCount = 1 << 15;
  const std::string error = plugin_test::run_ranks(3, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(kCount), recv(kCount);
    for (size_t i = 0; i < kCount; ++i) send[i] = value(rank, i);
    terseStats stats{};
    ASSERT_EQ(terseCommSetCodec(comm, "topk:ratio=0.01"), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm, nullptr),
              ncclSuccess);
    ASSERT_EQ(terseCommGetStats(comm, &stats), ncclSuccess);
    EXPECT_STREQ(stats.last_algorithm, "sparse_allgather");

    terseTensor tensor{};
    tensor.name = "layer.weight";
    tensor.ndims = 2;
    tensor.shape[0] = 128;
    tensor.shape[1] = 256;
    tensor.codec = "powersgd:rank=2";
    ASSERT_EQ(terseAllReduceTensor(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, &tensor,
                                   comm, nullptr),
              ncclSuccess)
        << ncclGetLastError(comm);
    ASSERT_EQ(terseCommGetStats(comm, &stats), ncclSuccess);
    EXPECT_STREQ(stats.last_algorithm, "powersgd");
    EXPECT_EQ(std::string(stats.last_codec).rfind("powersgd:", 0), 0u);

    ASSERT_EQ(terseCommSetCodec(comm, "none"), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm, nullptr),
              ncclSuccess);
    ASSERT_EQ(terseCommGetStats(comm, &stats), ncclSuccess);
    EXPECT_EQ(stats.compressed_calls, 2u);
    EXPECT_EQ(stats.calls, 3u);
    EXPECT_STREQ(stats.last_codec, "none");
    EXPECT_EQ(terseCommSetCodec(comm, "nosuchcodec"), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("nosuchcodec"), std::string::npos);
  });
  EXPECT_EQ(error, "");
}

TEST_F(CompressionApi, BadTensorDescriptorsAreRefusedNamingTheMember) {
  const std::string error = plugin_test::run_ranks(1, [&](int, ncclComm_t comm) {
    std::vector<float> send(12), recv(12);
    const auto refused = [&](const terseTensor& tensor, const char* member) {
      EXPECT_EQ(terseAllReduceTensor(send.data(), recv.data(), 12, ncclFloat32, ncclSum, &tensor,
                                     comm, nullptr),
                ncclInvalidArgument);
      EXPECT_NE(std::string(ncclGetLastError(comm)).find(member), std::string::npos)
          << ncclGetLastError(comm);
    };
    terseTensor tensor{};
    tensor.ndims = TERSE_MAX_DIMS + 1;
    refused(tensor, "tensor->ndims");
    tensor.ndims = 2;
    tensor.shape[0] = 3;
    tensor.shape[1] = 5;
    refused(tensor, "tensor->shape");
    tensor.shape[1] = 0;
    refused(tensor, "tensor->shape[1]");
    tensor.shape[1] = 4;
    tensor.codec = "int8:block=3";
    refused(tensor, "tensor->codec");
    tensor.codec = nullptr;
    EXPECT_EQ(terseAllReduceTensor(send.data(), recv.data(), 12, ncclFloat32, ncclSum, &tensor,
                                   comm, nullptr),
              ncclSuccess);
    EXPECT_EQ(terseCommGetStats(comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(terseCommGetStats(nullptr, nullptr), ncclInvalidArgument);
    EXPECT_EQ(terseCommSetPolicy(comm, "rules: [oops"), ncclInvalidArgument);
  });
  EXPECT_EQ(error, "");
}

TEST_F(CompressionApi, ResidualResetForgetsTheTensorsOfTheCommunicator) {
  ScopedEnv codec("TERSE_CODEC", "int8");
  std::atomic<int> after_call{0}, after_look{0}, after_reset{0};
  const std::string error = plugin_test::run_ranks(2, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(4096), recv(4096);
    for (size_t i = 0; i < send.size(); ++i) send[i] = value(rank, i);
    terseTensor tensor{};
    tensor.name = "w";
    ASSERT_EQ(terseAllReduceTensor(send.data(), recv.data(), send.size(), ncclFloat32, ncclSum,
                                   &tensor, comm, nullptr),
              ncclSuccess);
    arrive_and_wait(&after_call, 2);
    terseStats stats{};
    ASSERT_EQ(terseCommGetStats(comm, &stats), ncclSuccess);
    EXPECT_EQ(stats.residual_entries, 1u);  // this communicator's own memory: its one tensor
    EXPECT_EQ(stats.residual_bytes, 4096u * 4);
    EXPECT_EQ(stats.residual_admitted, 1u);
    arrive_and_wait(&after_look, 2);
    EXPECT_EQ(terseCommResetResidual(comm, "w"), ncclSuccess);
    arrive_and_wait(&after_reset, 2);
    ASSERT_EQ(terseCommGetStats(comm, &stats), ncclSuccess);
    EXPECT_EQ(stats.residual_entries, 0u);
  });
  EXPECT_EQ(error, "");
}

TEST(CompressionApiBounds, BoundsAndLossyStepsAsDocumented) {
  double factor = 0;
  terseNorm_t norm = terseNormL2;
  int steps = -1;
  ASSERT_EQ(terseCodecErrorBound("int8", 1000, &factor, &norm), ncclSuccess);
  EXPECT_NEAR(factor, 1.0 / 255, 1e-5);  // half a step of 2 max|x| / 255
  EXPECT_EQ(norm, terseNormMax);
  ASSERT_EQ(terseCodecErrorBound("powersgd", 1000, &factor, &norm), ncclSuccess);
  EXPECT_EQ(norm, terseNormL2);
  EXPECT_EQ(terseCodecErrorBound("bogus", 1000, &factor, &norm), ncclInvalidArgument);
  ASSERT_EQ(terseAlgorithmLossySteps("sra", 8, &steps), ncclSuccess);
  EXPECT_EQ(steps, 2);
  ASSERT_EQ(terseAlgorithmLossySteps("ring", 8, &steps), ncclSuccess);
  EXPECT_EQ(steps, 8);
  ASSERT_EQ(terseAlgorithmLossySteps("recursive_doubling", 8, &steps), ncclSuccess);  // dense
  ASSERT_EQ(terseAlgorithmLossySteps("no_such", 8, &steps), ncclSuccess);
  EXPECT_EQ(steps, 0);  // dense algorithms are exact
  EXPECT_EQ(terseAlgorithmLossySteps("sra", 0, &steps), ncclInvalidArgument);
}

}  // namespace
