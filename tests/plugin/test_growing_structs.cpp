// include/terse/terse.h's version and its structs that grow ("Structs that grow"), through
// libterse.so: the library reports the header's version; a caller whose struct is larger than
// the library's (a newer header) gets only the members the library knows written and its own
// extra members left alone, and its input's extra members ignored; a zeroed size reads as the
// first layout; a size below it is refused naming the member; an array steps by its elements'
// size. The first layouts' sizes are written here, as a later header must keep them.
#include <gtest/gtest.h>
#include <nccl.h>
#include <terse/terse.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "plugin_ranks.h"
#include "transport_test_support.h"

namespace {

using terse::test::ScopedEnv;

class GrowingStructs : public ::testing::Test {
 protected:
  ScopedEnv ifname_{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family_{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv comm_id_{"TERSE_COMM_ID", nullptr};
  ScopedEnv timeout_{"TERSE_TIMEOUT_S", "30"};
  ScopedEnv codec_{"TERSE_CODEC", "int8"};
};

// What a newer header's struct looks like to this library: its own members, then more.
template <typename T>
struct Newer {
  T known;
  uint64_t later = 0x5eed5eed5eed5eedull;
};

TEST(TerseVersion, TheLibraryIsTheHeadersVersion) {
  int version = -1;
  ASSERT_EQ(terseGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, TERSE_VERSION);
  EXPECT_EQ(TERSE_VERSION, TERSE_MAJOR * 10000 + TERSE_MINOR * 100 + TERSE_PATCH);
  // The project's version, as CMake's project() states it.
  EXPECT_EQ(std::to_string(TERSE_MAJOR) + "." + std::to_string(TERSE_MINOR) + "." +
                std::to_string(TERSE_PATCH),
            TERSE_PROJECT_VERSION);
  EXPECT_EQ(terseGetVersion(nullptr), ncclInvalidArgument);
}

TEST(TerseVersion, FirstLayoutsKeepTheirSizes) {
  // A later header appends members; these are the layouts programs built today were built with.
  EXPECT_GE(sizeof(terseTensor), 96u);
  EXPECT_GE(sizeof(terseStats), 4232u);
  EXPECT_GE(sizeof(tersePsTensorDesc), 64u);
  EXPECT_GE(sizeof(tersePsStats), 64u);
  EXPECT_EQ(offsetof(terseTensor, size), 0u);
  EXPECT_EQ(offsetof(terseStats, size), 0u);
  EXPECT_EQ(offsetof(tersePsTensorDesc, size), 0u);
  EXPECT_EQ(offsetof(tersePsStats, size), 0u);
  const terseStats stats = TERSE_STATS_INITIALIZER;
  EXPECT_EQ(stats.size, sizeof(terseStats));
  const terseTensor tensor = TERSE_TENSOR_INITIALIZER;
  EXPECT_EQ(tensor.size, sizeof(terseTensor));
}

TEST_F(GrowingStructs, StatsAndTensorsOfOtherSizes) {
  constexpr size_t kCount = 4096;
  const std::string failure = plugin_test::run_ranks(2, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(kCount, 1.0f + rank), recv(kCount);
    // A newer caller's tensor: its extra member is not read.
    Newer<terseTensor> tensor;
    std::memset(&tensor.known, 0, sizeof(tensor.known));
    tensor.known.size = sizeof(tensor);
    tensor.known.name = "grown";
    tensor.known.codec = "int4";
    if (plugin_test::failed(terseAllReduceTensor(send.data(), recv.data(), kCount, ncclFloat32,
                                                 ncclSum, &tensor.known, comm, nullptr),
                            "terseAllReduceTensor")) {
      return;
    }
    // A newer caller's statistics: the library's members written, the rest and the size kept.
    Newer<terseStats> stats;
    std::memset(&stats.known, 0xff, sizeof(stats.known));
    stats.known.size = sizeof(stats);
    ASSERT_EQ(terseCommGetStats(comm, &stats.known), ncclSuccess);
    EXPECT_EQ(stats.known.size, sizeof(stats));
    EXPECT_EQ(stats.later, 0x5eed5eed5eed5eedull);
    EXPECT_EQ(stats.known.calls, 1u);
    EXPECT_EQ(std::string(stats.known.last_codec).rfind("int4:", 0), 0u) << stats.known.last_codec;
    // Zero reads as the first layout; below it is refused, naming the member.
    terseStats zeroed{};
    EXPECT_EQ(terseCommGetStats(comm, &zeroed), ncclSuccess);
    EXPECT_EQ(zeroed.calls, 1u);
    EXPECT_EQ(zeroed.size, 0u);
    terseStats small{};
    small.size = 8;
    EXPECT_EQ(terseCommGetStats(comm, &small), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("stats->size is 8"), std::string::npos)
        << ncclGetLastError(comm);
    terseTensor short_tensor = TERSE_TENSOR_INITIALIZER;
    short_tensor.size = 16;
    EXPECT_EQ(terseAllReduceTensor(send.data(), recv.data(), kCount, ncclFloat32, ncclSum,
                                   &short_tensor, comm, nullptr),
              ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("tensor->size is 16"), std::string::npos)
        << ncclGetLastError(comm);
  });
  EXPECT_EQ(failure, "");
}

TEST_F(GrowingStructs, ParameterServerDescriptorsStepByTheirSize) {
  constexpr size_t kCount = 100;
  const std::string failure = plugin_test::run_ranks(2, [&](int rank, ncclComm_t comm) {
    std::vector<float> a(kCount, 1.0f), b(2 * kCount, 2.0f);
    // An array of a newer header's descriptors: each element sizeof(Newer) bytes.
    Newer<tersePsTensorDesc> descs[2];
    for (auto& d : descs) {
      std::memset(&d.known, 0, sizeof(d.known));
      d.known.size = sizeof(d);
      d.known.datatype = ncclFloat32;
    }
    descs[0].known.name = "a";
    descs[0].known.data = a.data();
    descs[0].known.count = kCount;
    descs[1].known.name = "b";
    descs[1].known.data = b.data();
    descs[1].known.count = 2 * kCount;
    tersePsHandle_t handles[2] = {};
    if (plugin_test::failed(tersePsInitList(comm, &descs[0].known, 2, handles),
                            "tersePsInitList")) {
      return;
    }
    std::vector<float> got(2 * kCount, 0.0f);
    tersePsRequest_t sync = nullptr;
    ASSERT_EQ(tersePsReceive(handles[1], got.data(), &sync), ncclSuccess);
    ASSERT_EQ(tersePsSync(sync), ncclSuccess);
    EXPECT_EQ(got, b);
    Newer<tersePsStats> stats;
    stats.known.size = sizeof(stats);
    ASSERT_EQ(tersePsGetStats(handles[1], &stats.known), ncclSuccess);
    EXPECT_EQ(stats.known.receives, 1u);
    EXPECT_EQ(stats.later, 0x5eed5eed5eed5eedull);
    EXPECT_EQ(stats.known.size, sizeof(stats));
    for (tersePsHandle_t handle : handles) EXPECT_EQ(tersePsFree(handle), ncclSuccess);
    (void)rank;
  });
  EXPECT_EQ(failure, "");
}

TEST_F(GrowingStructs, AnArrayOfMixedSizesIsRefused) {
  const std::string failure = plugin_test::run_ranks(1, [&](int, ncclComm_t comm) {
    std::vector<float> a(10, 1.0f);
    tersePsTensorDesc descs[2] = {TERSE_PS_TENSOR_DESC_INITIALIZER,
                                  TERSE_PS_TENSOR_DESC_INITIALIZER};
    for (auto& d : descs) {
      d.data = a.data();
      d.count = a.size();
    }
    descs[1].size = sizeof(tersePsTensorDesc) + 8;
    tersePsHandle_t handles[2] = {};
    EXPECT_EQ(tersePsInitList(comm, descs, 2, handles), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("tensors[1].size"), std::string::npos)
        << ncclGetLastError(comm);
  });
  EXPECT_EQ(failure, "");
}

}  // namespace
