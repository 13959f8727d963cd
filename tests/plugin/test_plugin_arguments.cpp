// Bad arguments through the NCCL API: the code, and ncclGetLastError naming the argument. One
// single-rank communicator serves every call (nothing moves when an argument is refused).
#include <gtest/gtest.h>
#include <nccl.h>

#include <climits>
#include <cstdint>
#include <string>

namespace {

class PluginArguments : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(ncclCommInitAll(&comm_, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  }
  void TearDown() override { EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess); }

  // The call's code is `code` and the last error mentions `needle`.
  static void expect_error(ncclResult_t result, ncclResult_t code, const std::string& needle) {
    EXPECT_EQ(result, code) << ncclGetErrorString(result);
    const std::string message = ncclGetLastError(nullptr);
    EXPECT_NE(message.find(needle), std::string::npos) << "message: " << message;
  }

  ncclComm_t comm_ = nullptr;
  float buffer_[8] = {};
};

TEST_F(PluginArguments, NullCommunicator) {
  expect_error(ncclAllReduce(buffer_, buffer_, 8, ncclFloat32, ncclSum, nullptr, nullptr),
               ncclInvalidArgument, "comm");
  int count = 0;
  expect_error(ncclCommCount(nullptr, &count), ncclInvalidArgument, "comm");
}

TEST_F(PluginArguments, NullBuffers) {
  expect_error(ncclAllReduce(nullptr, buffer_, 8, ncclFloat32, ncclSum, comm_, nullptr),
               ncclInvalidArgument, "send");
  expect_error(ncclAllReduce(buffer_, nullptr, 8, ncclFloat32, ncclSum, comm_, nullptr),
               ncclInvalidArgument, "recv");
}

TEST_F(PluginArguments, CountOverflow) {
  expect_error(ncclAllReduce(buffer_, buffer_, SIZE_MAX / 2, ncclFloat32, ncclSum, comm_, nullptr),
               ncclInvalidArgument, "count");
}

TEST_F(PluginArguments, DatatypeOutsideTheEnum) {
  expect_error(
      ncclAllReduce(buffer_, buffer_, 8, static_cast<ncclDataType_t>(99), ncclSum, comm_, nullptr),
      ncclInvalidArgument, "datatype 99");
  expect_error(ncclAllGather(buffer_, buffer_, 1, static_cast<ncclDataType_t>(-1), comm_, nullptr),
               ncclInvalidArgument, "datatype -1");
}

TEST_F(PluginArguments, UnknownAndDestroyedOps) {
  expect_error(
      ncclAllReduce(buffer_, buffer_, 8, ncclFloat32, static_cast<ncclRedOp_t>(77), comm_, nullptr),
      ncclInvalidArgument, "op 77");
  float scalar = 2.0f;
  ncclRedOp_t op;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm_),
            ncclSuccess);
  expect_error(ncclAllReduce(buffer_, buffer_, 4, ncclFloat64, op, comm_, nullptr),
               ncclInvalidArgument, "created for datatype");
  ASSERT_EQ(ncclRedOpDestroy(op, comm_), ncclSuccess);
  expect_error(ncclAllReduce(buffer_, buffer_, 8, ncclFloat32, op, comm_, nullptr),
               ncclInvalidArgument, "op ");
  expect_error(ncclRedOpDestroy(op, comm_), ncclInvalidArgument, "op ");
}

TEST_F(PluginArguments, PreMulSumScalarReadAtEachCallWhenNotImmediate) {
  float scalar = 2.0f;
  ncclRedOp_t op;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarDevice, comm_),
            ncclSuccess);
  scalar = 3.0f;
  float value = 5.0f, result = 0.0f;
  ASSERT_EQ(ncclAllReduce(&value, &result, 1, ncclFloat32, op, comm_, nullptr), ncclSuccess);
  EXPECT_EQ(result, 15.0f);
  EXPECT_EQ(ncclRedOpDestroy(op, comm_), ncclSuccess);
}

TEST_F(PluginArguments, RootAndPeerOutOfRange) {
  expect_error(ncclBroadcast(buffer_, buffer_, 8, ncclFloat32, 5, comm_, nullptr),
               ncclInvalidArgument, "root");
  expect_error(ncclReduce(buffer_, buffer_, 8, ncclFloat32, ncclSum, -1, comm_, nullptr),
               ncclInvalidArgument, "root");
  expect_error(ncclSend(buffer_, 8, ncclFloat32, 3, comm_, nullptr), ncclInvalidArgument, "peer");
  expect_error(ncclRecv(buffer_, 8, ncclFloat32, -2, comm_, nullptr), ncclInvalidArgument, "peer");
}

TEST_F(PluginArguments, BadArgumentFailsTheGroup) {
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclBroadcast(buffer_, buffer_, 8, ncclFloat32, 9, comm_, nullptr),
            ncclInvalidArgument);
  expect_error(ncclGroupEnd(), ncclInvalidArgument, "root");
}

TEST_F(PluginArguments, ShrinkRefusesBadListsAndFlags) {
  ncclComm_t shrunk = nullptr;
  int self[] = {0};
  int outside[] = {1};
  expect_error(ncclCommShrink(comm_, nullptr, 0, nullptr, nullptr, NCCL_SHRINK_DEFAULT),
               ncclInvalidArgument, "newcomm");
  expect_error(ncclCommShrink(comm_, self, -1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT),
               ncclInvalidArgument, "excludeRanksCount -1");
  expect_error(ncclCommShrink(comm_, nullptr, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT),
               ncclInvalidArgument, "excludeRanksList is null");
  expect_error(ncclCommShrink(comm_, outside, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT),
               ncclInvalidArgument, "rank 1, outside");
  expect_error(ncclCommShrink(comm_, self, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT),
               ncclInvalidArgument, "the caller");
  expect_error(ncclCommShrink(comm_, nullptr, 0, &shrunk, nullptr, 7), ncclInvalidArgument,
               "shrinkFlags 7");
  EXPECT_EQ(shrunk, nullptr);
  // Nothing refused broke the parent.
  EXPECT_EQ(ncclAllReduce(buffer_, buffer_, 8, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
}

// Excluding nobody is a copy: the new communicator works, the parent too.
TEST_F(PluginArguments, ShrinkExcludingNobodyGivesAWorkingCommunicator) {
  ncclComm_t shrunk = nullptr;
  ASSERT_EQ(ncclCommShrink(comm_, nullptr, 0, &shrunk, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess)
      << ncclGetLastError(nullptr);
  int count = 0;
  EXPECT_EQ(ncclCommCount(shrunk, &count), ncclSuccess);
  EXPECT_EQ(count, 1);
  float in[3] = {1.5f, -2.0f, 7.0f}, out[3] = {};
  EXPECT_EQ(ncclAllReduce(in, out, 3, ncclFloat32, ncclSum, shrunk, nullptr), ncclSuccess);
  EXPECT_EQ(out[2], 7.0f);
  EXPECT_EQ(ncclAllReduce(in, out, 3, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(shrunk), ncclSuccess);
}

// A revoked communicator: calls and finalize refused (naming the revoke), its async state
// ncclSuccess, split and shrink still work; revoking twice is fine; bad flags refused.
TEST_F(PluginArguments, RevokedCommunicatorAllowsOnlySplitShrinkAndDestroy) {
  expect_error(ncclCommRevoke(comm_, 3), ncclInvalidArgument, "revokeFlags 3");
  EXPECT_EQ(ncclAllReduce(buffer_, buffer_, 8, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  ASSERT_EQ(ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT), ncclSuccess) << ncclGetLastError(nullptr);
  ncclResult_t async = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  expect_error(ncclAllReduce(buffer_, buffer_, 8, ncclFloat32, ncclSum, comm_, nullptr),
               ncclInvalidUsage, "revoked");
  expect_error(ncclCommFinalize(comm_), ncclInvalidUsage, "after ncclCommRevoke");
  EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess) << "a refused call broke a revoked communicator";
  ncclComm_t split = nullptr, shrunk = nullptr;
  ASSERT_EQ(ncclCommSplit(comm_, 0, 0, &split, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclCommShrink(comm_, nullptr, 0, &shrunk, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess)
      << ncclGetLastError(nullptr);
  float value = 4.0f;
  EXPECT_EQ(ncclAllReduce(&value, &value, 1, ncclFloat32, ncclSum, split, nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(&value, &value, 1, ncclFloat32, ncclSum, shrunk, nullptr), ncclSuccess);
  EXPECT_EQ(value, 4.0f);
  EXPECT_EQ(ncclCommDestroy(split), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(shrunk), ncclSuccess);
}

TEST(PluginInit, RefusesBadRanksAndConfigs) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("nranks 0"), std::string::npos);
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("rank 2"), std::string::npos);
  EXPECT_EQ(ncclCommInitRank(nullptr, 2, id, 0), ncclInvalidArgument);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("magic"), std::string::npos);
  config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 7;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("blocking 7"), std::string::npos);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(ncclCommInitAll(&comm, 0, nullptr), ncclInvalidArgument);
}

TEST(PluginInit, NonblockingConfigCompletesAtOnce) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclSuccess)
      << ncclGetLastError(nullptr);
  ncclResult_t async = ncclInProgress;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(PluginQueries, VersionStringsMemoryAndRegistration) {
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidArgument), "invalid argument");
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess);
  int count = 0, rank = -1, device = -2;
  EXPECT_EQ(ncclCommCount(comm, &count), ncclSuccess);
  EXPECT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
  EXPECT_EQ(ncclCommCuDevice(comm, &device), ncclSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(device, 0);  // InitAll without a devlist numbers devices 0..ndev-1
  void* memory = nullptr;
  ASSERT_EQ(ncclMemAlloc(&memory, 1000), ncclSuccess);
  // Page-aligned host memory without a GPU; cudaMalloc memory (at least 256-byte aligned) with
  // one (test_plugin_device_buffers.cpp checks which).
  EXPECT_EQ(reinterpret_cast<uintptr_t>(memory) % 256, 0u);
  void* handle = nullptr;
  EXPECT_EQ(ncclCommRegister(comm, memory, 1000, &handle), ncclSuccess);
  EXPECT_NE(handle, nullptr);
  EXPECT_EQ(ncclCommDeregister(comm, handle), ncclSuccess);
  EXPECT_EQ(ncclMemFree(memory), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
