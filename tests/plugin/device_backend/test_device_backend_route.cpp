// Device-buffer allreduces that libterse runs on its CUDA execution backend
// (plugin/backend_route.h), through the NCCL API as an application makes them: results equal to
// the reference model (model/) bit for bit, only encoded messages across PCIe
// (terseCommGetStats), the caller's stream order, the caller returning before its stream ran, and
// a rank with host buffers beside one with device buffers; hierarchical and rail plans on
// emulated nodes (ranks as processes) with their intra-node traffic counted too. A plan the
// backend cannot run (uncompressed) is staged, whole tensors counted.
//
// Runs on a GPU with the library's kernels, and without one under the CUDA runtime model with the
// same kernels built for the host (CTest's plugin_device_backend_on_host_kernels puts the model
// and the tests' build of libterse, tests/host_kernels, first on LD_LIBRARY_PATH); skips where
// no CUDA device is visible.
#include <cuda_runtime.h>
#include <nccl.h>
#include <terse/terse.h>

#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "codecs/codec_registry.h"
#include "codecs/powersgd.h"
#include "common/hex_bytes.h"
#include "launch/rank_processes.h"
#include "model/compressed_model.h"
#include "model/pcie_bytes.h"
#include "plugin/device_backend/device_rank_protocol.h"
#include "plugin/plugin_ranks.h"

namespace {

using plugin_test::run_ranks;
using terse::DType;

bool have_device() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return devices > 0;
}

#define REQUIRE_DEVICE() \
  if (!have_device()) GTEST_SKIP() << "no CUDA device: the device backend's route is not tested"

// Sets an environment variable for a scope (before any rank thread starts), restoring it after.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  bool had_ = false;
  std::string old_;
};

float input_value(int rank, uint64_t step, size_t i) {
  return static_cast<float>(((i * 37 + rank * 101 + step * 7) % 1000) / 250.0 - 2.0) *
         (1.0f + 0.25f * static_cast<float>(rank));
}

// What one rank did in one call.
struct RankCall {
  std::vector<uint8_t> output;
  terseStats stats{};
  std::string error;
};

// Each step, every rank: its input into its buffer (device: a copy on its stream, then a
// pattern over the output, both work the collective must follow), ncclAllReduce, the output
// copied back on the stream (work that must see the result), a stream synchronize.
// device[r]: whether rank r uses device buffers.
std::vector<std::vector<RankCall>> run_steps(const std::vector<bool>& device, size_t count,
                                             int steps, bool in_place) {
  const int n = static_cast<int>(device.size());
  std::vector<std::vector<RankCall>> calls(static_cast<size_t>(steps),
                                           std::vector<RankCall>(static_cast<size_t>(n)));
  const size_t bytes = count * sizeof(float);
  const std::string failure = run_ranks(n, [&](int rank, ncclComm_t comm) {
    cudaStream_t stream = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
    std::vector<float> host_send(count), host_recv(count);
    const bool on_device = device[static_cast<size_t>(rank)];
    if (on_device &&
        (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
         cudaMalloc(&send, bytes) != cudaSuccess || cudaMalloc(&recv, bytes) != cudaSuccess)) {
      calls[0][static_cast<size_t>(rank)].error = "CUDA setup failed";
      return;
    }
    for (int step = 0; step < steps; ++step) {
      RankCall& call = calls[static_cast<size_t>(step)][static_cast<size_t>(rank)];
      std::vector<float> input(count);
      for (size_t i = 0; i < count; ++i) input[i] = input_value(rank, step, i);
      ncclResult_t result = ncclSuccess;
      if (on_device) {
        void* out = in_place ? send : recv;
        cudaMemcpyAsync(send, input.data(), bytes, cudaMemcpyHostToDevice, stream);
        if (!in_place) cudaMemsetAsync(recv, 0x7f, bytes, stream);
        result = ncclAllReduce(send, out, count, ncclFloat32, ncclSum, comm, stream);
        call.output.resize(bytes);
        cudaMemcpyAsync(call.output.data(), out, bytes, cudaMemcpyDeviceToHost, stream);
        if (cudaStreamSynchronize(stream) != cudaSuccess) call.error = "cudaStreamSynchronize";
      } else {
        host_send = input;
        float* out = in_place ? host_send.data() : host_recv.data();
        result = ncclAllReduce(host_send.data(), out, count, ncclFloat32, ncclSum, comm, nullptr);
        call.output.assign(reinterpret_cast<uint8_t*>(out),
                           reinterpret_cast<uint8_t*>(out) + bytes);
      }
      if (result != ncclSuccess)
        call.error = std::string("ncclAllReduce: ") + ncclGetLastError(comm);
      if (terseCommGetStats(comm, &call.stats) != ncclSuccess) call.error = "terseCommGetStats";
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess) call.error = std::string("async: ") + ncclGetLastError(comm);
    }
    if (on_device) {
      cudaFree(send);
      cudaFree(recv);
      cudaStreamDestroy(stream);
    }
  });
  if (!failure.empty()) calls[0][0].error = failure;
  return calls;
}

// The model's result for `step` of the calls, from the inputs the ranks used and the seed, step
// and piece size the statistics report (the same on every rank).
terse::model::Expected model_step(terse::model::CompressedModel* model, int n, size_t count,
                                  int step, const terseStats& stats) {
  std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    std::vector<float> input(count);
    for (size_t i = 0; i < count; ++i) input[i] = input_value(r, step, i);
    inputs[static_cast<size_t>(r)].resize(count * sizeof(float));
    std::memcpy(inputs[static_cast<size_t>(r)].data(), input.data(), count * sizeof(float));
  }
  terse::model::CallSpec spec;
  spec.algorithm = stats.last_algorithm;
  spec.dtype = DType::kFloat32;
  spec.count = count;
  spec.seed = stats.last_seed;
  spec.step = stats.last_step;
  spec.piece_bytes = stats.last_piece_bytes;
  return model->call(spec, inputs);
}

std::unique_ptr<terse::Codec> make_codec(const std::string& spec) {
  std::string name;
  terse::CodecParams params;
  std::unique_ptr<terse::Codec> codec;
  if (terse::parse_codec_spec(spec, &name, &params) != ncclSuccess ||
      terse::create_codec(name, params, &codec) != ncclSuccess) {
    return nullptr;
  }
  return codec;
}

// int8 over `algorithm` on `device` (one flag per rank), three steps with error feedback: every
// rank's result is the model's bit for bit, and each device rank copied exactly the encoded
// messages of the algorithm's steps (model::device_pcie_bytes: one piece per block at this size).
void expect_int8(const char* algorithm_name, const std::vector<bool>& device, bool in_place) {
  ScopedEnvironment codec("TERSE_CODEC", "int8");
  ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", algorithm_name);
  const int n = static_cast<int>(device.size());
  const size_t count = 20000 + static_cast<size_t>(n);  // chunks of unequal sizes
  const int steps = 3;
  const auto calls = run_steps(device, count, steps, in_place);
  terse::model::CompressedModel model("int8", n, terse::MemoryKind::kResidual);
  const std::unique_ptr<terse::Codec> int8 = make_codec("int8");
  ASSERT_NE(int8, nullptr);
  uint64_t before_host[8] = {}, before_device[8] = {};
  for (int step = 0; step < steps; ++step) {
    for (int r = 0; r < n; ++r) {
      const RankCall& call = calls[static_cast<size_t>(step)][static_cast<size_t>(r)];
      ASSERT_EQ(call.error, "") << "rank " << r << " step " << step;
      EXPECT_STREQ(call.stats.last_algorithm, algorithm_name);
    }
    const terseStats& stats = calls[static_cast<size_t>(step)][0].stats;
    const terse::model::Expected expected = model_step(&model, n, count, step, stats);
    for (int r = 0; r < n; ++r) {
      const RankCall& call = calls[static_cast<size_t>(step)][static_cast<size_t>(r)];
      const terse::model::Comparison c =
          terse::model::compare(expected, DType::kFloat32, call.output.data(), count);
      EXPECT_EQ(c.mismatches, 0u) << "rank " << r << " step " << step << ": " << c.first;
      terse::model::PcieBytes pcie;
      if (device[static_cast<size_t>(r)]) {
        pcie = terse::model::device_pcie_bytes(algorithm_name, *int8, count, n, r);
      }
      EXPECT_EQ(call.stats.pcie_bytes_to_host - before_host[r], pcie.to_host)
          << algorithm_name << " rank " << r;
      EXPECT_EQ(call.stats.pcie_bytes_to_device - before_device[r], pcie.to_device)
          << algorithm_name << " rank " << r;
      // Below the tensor's bytes: a staged call would copy all of them each way.
      EXPECT_LT(pcie.to_host, count * sizeof(float));
      before_host[r] = call.stats.pcie_bytes_to_host;
      before_device[r] = call.stats.pcie_bytes_to_device;
    }
  }
}

TEST(PluginDeviceBackendRoute, Int8OnTwoRanksEqualsTheModelAndCopiesOnlyMessages) {
  REQUIRE_DEVICE();
  expect_int8("sra", {true, true}, /*in_place=*/false);
}

TEST(PluginDeviceBackendRoute, Int8OnThreeRanksInPlaceEqualsTheModel) {
  REQUIRE_DEVICE();
  expect_int8("sra", {true, true, true}, /*in_place=*/true);
}

// The plan, and so the messages, do not depend on where a rank's buffers are.
TEST(PluginDeviceBackendRoute, HostBufferRankAndDeviceBufferRankAgree) {
  REQUIRE_DEVICE();
  expect_int8("sra", {false, true}, /*in_place=*/false);
  expect_int8("sra", {true, false, true}, /*in_place=*/false);
}

// The decode-add-re-encode algorithms take the backend too: on three
// device ranks, in place, and on four with one host-buffer rank among them.
TEST(PluginDeviceBackendRoute, RingRecursiveDoublingAndTreeRunOnTheBackend) {
  REQUIRE_DEVICE();
  for (const char* algorithm : {"ring", "recursive_doubling", "tree"}) {
    expect_int8(algorithm, {true, true, true}, /*in_place=*/true);
    expect_int8(algorithm, {true, false, true, true}, /*in_place=*/false);
  }
}

// Top-K's sparse allgather takes the backend too: on three device ranks, in place, and on three
// with a host-buffer rank among them, three steps with error feedback, every result the model's bit
// for bit. A fixed k keeps the whole way: each device rank copies its one message (header and k
// fp32 (index, value) pairs) to the host and every rank's message, its own included, to the device;
// the tensor never crosses.
TEST(PluginDeviceBackendRoute, TopKSparseAllgatherRunsOnTheBackend) {
  REQUIRE_DEVICE();
  const char* spec = "topk:k=60,method=exact";
  ScopedEnvironment codec("TERSE_CODEC", spec);
  ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", "sparse_allgather");
  const size_t count = 6000, k = 60;
  const uint64_t message = 32 + k * (4 + sizeof(float));
  const int steps = 3;
  for (const std::vector<bool>& device :
       {std::vector<bool>{true, true, true}, std::vector<bool>{true, false, true}}) {
    const int n = static_cast<int>(device.size());
    const bool in_place = device[1];
    const auto calls = run_steps(device, count, steps, in_place);
    terse::model::CompressedModel model(spec, n, terse::MemoryKind::kResidual);
    for (int step = 0; step < steps; ++step) {
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(calls[static_cast<size_t>(step)][static_cast<size_t>(r)].error, "")
            << "rank " << r << " step " << step;
      }
      const terse::model::Expected expected =
          model_step(&model, n, count, step, calls[static_cast<size_t>(step)][0].stats);
      for (int r = 0; r < n; ++r) {
        const RankCall& call = calls[static_cast<size_t>(step)][static_cast<size_t>(r)];
        EXPECT_STREQ(call.stats.last_algorithm, "sparse_allgather");
        const terse::model::Comparison c =
            terse::model::compare(expected, DType::kFloat32, call.output.data(), count);
        EXPECT_EQ(c.mismatches, 0u) << "rank " << r << " step " << step << ": " << c.first;
        const uint64_t calls_so_far = static_cast<uint64_t>(step) + 1;
        const bool on_device = device[static_cast<size_t>(r)];
        EXPECT_EQ(call.stats.pcie_bytes_to_host, on_device ? calls_so_far * message : 0u)
            << "rank " << r << " step " << step;
        EXPECT_EQ(call.stats.pcie_bytes_to_device,
                  on_device ? calls_so_far * static_cast<uint64_t>(n) * message : 0u)
            << "rank " << r << " step " << step;
      }
    }
  }
}

// PowerSGD takes the backend too: its GEMMs, orthogonalisation, error and reconstruction on the
// device, only its factors over PCIe (per iteration P and Q_local to the host, Q and the summed
// P back; then the orthogonalised P out and the summed Q in), three steps with the warm start,
// within the model's tolerance.
TEST(PluginDeviceBackendRoute, PowerSgdRunsOnTheBackendFactorsAloneCounted) {
  REQUIRE_DEVICE();
  const char* spec = "powersgd:rank=2";
  ScopedEnvironment codec("TERSE_CODEC", spec);
  ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", "powersgd");
  const size_t count = 5000;
  terse::PowerSgdPlan plan;  // the codec's near-square view
  ASSERT_EQ(terse::plan_powersgd(count, DType::kFloat32, terse::MatrixShape{}, 2, &plan),
            ncclSuccess);
  const uint64_t p = plan.rows * 2 * sizeof(float), q = plan.cols * 2 * sizeof(float);
  const int n = 2, steps = 3;
  const auto calls = run_steps({true, true}, count, steps, false);
  terse::model::CompressedModel model(spec, n, terse::MemoryKind::kResidual);
  for (int step = 0; step < steps; ++step) {
    const terse::model::Expected expected =
        model_step(&model, n, count, step, calls[static_cast<size_t>(step)][0].stats);
    for (int r = 0; r < n; ++r) {
      const RankCall& call = calls[static_cast<size_t>(step)][static_cast<size_t>(r)];
      ASSERT_EQ(call.error, "") << "rank " << r << " step " << step;
      EXPECT_STREQ(call.stats.last_algorithm, "powersgd");
      const terse::model::Comparison c =
          terse::model::compare(expected, DType::kFloat32, call.output.data(), count);
      EXPECT_EQ(c.mismatches, 0u) << "rank " << r << " step " << step << ": " << c.first;
      const uint64_t calls_so_far = static_cast<uint64_t>(step) + 1;
      EXPECT_EQ(call.stats.pcie_bytes_to_host, calls_so_far * (2 * p + q)) << "rank " << r;
      EXPECT_EQ(call.stats.pcie_bytes_to_device, calls_so_far * (2 * q + p)) << "rank " << r;
    }
  }
}

// Hierarchical and rail plans run on the backend too. Ranks as processes
// (plugin_device_rank_process, device_rank_protocol.h), put on emulated nodes by TERSE_HOSTID:
// int8 over three steps with error feedback, every rank's result the reference model's bit for
// bit (the inner algorithm the planner chose, from the statistics), and its PCIe bytes exactly
// the inner algorithm's encoded messages plus the tensor bytes the uncompressed intra-node phases
// exchange through host memory (model::grouped_device_pcie_bytes: a hierarchical member's tensor
// out and result in; a leader's members' tensors in and its result out; a rail rank's tensor's
// bytes out and the parts of its chunk and the other chunks in).
struct NodesRun {
  const char* algorithm;
  int nranks;
  int ranks_per_node;
};

class PluginDeviceBackendNodes : public ::testing::TestWithParam<NodesRun> {};

// A directory made for one test and removed with everything in it when the test ends, also
// when an ASSERT returns early.
class TemporaryDirectory {
 public:
  explicit TemporaryDirectory(const char* prefix) {
    std::string name = std::string("/tmp/") + prefix + "XXXXXX";
    if (mkdtemp(name.data()) != nullptr) path_ = name;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;  // nothing left to report to: the test is over
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  // "" when it could not be made.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::map<std::string, std::string> read_values(const std::string& path) {
  std::map<std::string, std::string> values;
  std::ifstream file(path);
  std::string name, value;
  while (file >> name >> value) values[name] = value;
  return values;
}

TEST_P(PluginDeviceBackendNodes, RunOnTheBackendEqualToTheModel) {
  REQUIRE_DEVICE();
  const NodesRun& run = GetParam();
  const int n = run.nranks;
  using device_rank_test::kDeviceRankCount;
  const TemporaryDirectory made("terse_device_nodes_");
  ASSERT_NE(made.path(), "") << "mkdtemp failed";
  const std::string& dir = made.path();
  const std::string per_node = std::to_string(run.ranks_per_node);
  ScopedEnvironment codec("TERSE_CODEC", "int8");
  ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", run.algorithm);
  ScopedEnvironment nodes("PLUGIN_TEST_RANKS_PER_NODE", per_node.c_str());
  ScopedEnvironment results("PLUGIN_TEST_RESULT_DIR", dir.c_str());
  ScopedEnvironment ifname("TERSE_SOCKET_IFNAME", "lo");
  ScopedEnvironment family("TERSE_SOCKET_FAMILY", "AF_INET");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<terse::test::CommandLine> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back({TERSE_PLUGIN_DEVICE_RANK_PROCESS_PATH, std::to_string(r), std::to_string(n),
                     terse::bytes_to_hex(id.internal, sizeof(id.internal))});
  }
  const auto processes = terse::test::run_processes(ranks, 120);
  ASSERT_EQ(processes.size(), static_cast<size_t>(n));
  for (const auto& process : processes) {
    ASSERT_TRUE(process.exited && process.exit_code == 0) << terse::test::describe(process);
  }

  std::vector<std::string> hosts;
  std::vector<std::map<std::string, std::string>> values;
  for (int r = 0; r < n; ++r) {
    hosts.push_back("node" + std::to_string(r / run.ranks_per_node));
    values.push_back(read_values(dir + "/rank" + std::to_string(r) + ".txt"));
  }
  const std::unique_ptr<terse::Codec> int8 = make_codec("int8");
  ASSERT_NE(int8, nullptr);
  terse::model::CompressedModel model("int8", n, terse::MemoryKind::kResidual);
  std::vector<uint64_t> to_host(static_cast<size_t>(n), 0), to_device(static_cast<size_t>(n), 0);
  for (int step = 0; step < device_rank_test::kDeviceRankSteps; ++step) {
    const std::string prefix = "step" + std::to_string(step) + "_";
    const auto& first = values[0];
    ASSERT_EQ(first.count(prefix + "algorithm"), 1u) << "rank 0 wrote nothing of step " << step;
    EXPECT_EQ(first.at(prefix + "algorithm"), run.algorithm);
    const std::string inner = first.at(prefix + "inner") == "-" ? "" : first.at(prefix + "inner");
    ASSERT_NE(inner, "") << "the statistics name no inner algorithm";
    std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      std::vector<float> input(kDeviceRankCount);
      for (size_t i = 0; i < kDeviceRankCount; ++i) {
        input[i] = device_rank_test::device_rank_input(r, step, i);
      }
      inputs[static_cast<size_t>(r)].resize(kDeviceRankCount * sizeof(float));
      std::memcpy(inputs[static_cast<size_t>(r)].data(), input.data(),
                  kDeviceRankCount * sizeof(float));
    }
    terse::model::CallSpec spec;
    spec.algorithm = run.algorithm;
    spec.inner_algorithm = inner;
    spec.dtype = DType::kFloat32;
    spec.count = kDeviceRankCount;
    spec.seed = std::stoull(first.at(prefix + "seed"));
    spec.step = std::stoull(first.at(prefix + "step"));
    spec.piece_bytes = std::stoull(first.at(prefix + "piece_bytes"));
    spec.hosts = hosts;
    const terse::model::Expected expected = model.call(spec, inputs);
    for (int r = 0; r < n; ++r) {
      const auto& mine = values[static_cast<size_t>(r)];
      EXPECT_EQ(mine.at(prefix + "inner"), first.at(prefix + "inner")) << "rank " << r;
      std::ifstream file(
          dir + "/rank" + std::to_string(r) + "_step" + std::to_string(step) + ".bin",
          std::ios::binary);
      const std::vector<uint8_t> output((std::istreambuf_iterator<char>(file)),
                                        std::istreambuf_iterator<char>());
      ASSERT_EQ(output.size(), kDeviceRankCount * sizeof(float)) << "rank " << r;
      const terse::model::Comparison c =
          terse::model::compare(expected, DType::kFloat32, output.data(), kDeviceRankCount);
      EXPECT_EQ(c.mismatches, 0u) << "rank " << r << " step " << step << ": " << c.first;
      const terse::model::PcieBytes pcie = terse::model::grouped_device_pcie_bytes(
          run.algorithm, inner, *int8, kDeviceRankCount, sizeof(float), hosts, r);
      const uint64_t host_now = std::stoull(mine.at(prefix + "to_host"));
      const uint64_t device_now = std::stoull(mine.at(prefix + "to_device"));
      EXPECT_EQ(host_now - to_host[static_cast<size_t>(r)], pcie.to_host)
          << run.algorithm << "/" << inner << " rank " << r << " step " << step;
      EXPECT_EQ(device_now - to_device[static_cast<size_t>(r)], pcie.to_device)
          << run.algorithm << "/" << inner << " rank " << r << " step " << step;
      to_host[static_cast<size_t>(r)] = host_now;
      to_device[static_cast<size_t>(r)] = device_now;
    }
  }
}

// Two nodes of two, nodes of two and one (hierarchical only: rails need equal nodes), and the
// rails of two nodes of two.
INSTANTIATE_TEST_SUITE_P(Layouts, PluginDeviceBackendNodes,
                         ::testing::Values(NodesRun{"hierarchical", 4, 2},
                                           NodesRun{"hierarchical", 3, 2}, NodesRun{"rail", 4, 2}),
                         [](const ::testing::TestParamInfo<NodesRun>& info) {
                           return std::string(info.param.algorithm) + "_" +
                                  std::to_string(info.param.nranks) + "ranks_" +
                                  std::to_string(info.param.ranks_per_node) + "pernode";
                         });

// Ranks as processes for the cases where a rank's stream is held (device_staging.h): ranks that
// share a process never hold one. run_rank_processes runs n plugin_device_rank_process with the
// environment the test set (device_rank_protocol.h) and writes into `dir`; "" when every rank
// exited 0, else what each that did not said.
std::string run_rank_processes(int n, const std::string& dir) {
  ScopedEnvironment results("PLUGIN_TEST_RESULT_DIR", dir.c_str());
  ScopedEnvironment ifname("TERSE_SOCKET_IFNAME", "lo");
  ScopedEnvironment family("TERSE_SOCKET_FAMILY", "AF_INET");
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    return std::string("ncclGetUniqueId: ") + ncclGetLastError(nullptr);
  }
  std::vector<terse::test::CommandLine> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back({TERSE_PLUGIN_DEVICE_RANK_PROCESS_PATH, std::to_string(r), std::to_string(n),
                     terse::bytes_to_hex(id.internal, sizeof(id.internal))});
  }
  std::string failures;
  for (const auto& process : terse::test::run_processes(ranks, 120)) {
    if (!process.exited || process.exit_code != 0) failures += terse::test::describe(process);
  }
  if (!failures.empty()) return failures;
  return "";
}

std::vector<uint8_t> read_output(const std::string& dir, int rank, int step) {
  std::ifstream file(dir + "/rank" + std::to_string(rank) + "_step" + std::to_string(step) + ".bin",
                     std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(file)),
                              std::istreambuf_iterator<char>());
}

// The statistics a rank process wrote for `step`, as model_step reads them.
terseStats stats_of(const std::map<std::string, std::string>& values, int step) {
  const std::string p = "step" + std::to_string(step) + "_";
  terseStats stats{};
  auto number = [&](const std::string& name) -> uint64_t {
    auto it = values.find(p + name);
    return it == values.end() ? 0 : std::stoull(it->second);
  };
  auto text = [&](const std::string& name, char* out, size_t size) {
    auto it = values.find(p + name);
    std::snprintf(out, size, "%s", it == values.end() ? "" : it->second.c_str());
  };
  text("algorithm", stats.last_algorithm, sizeof(stats.last_algorithm));
  text("codec", stats.last_codec, sizeof(stats.last_codec));
  stats.last_seed = number("seed");
  stats.last_step = number("step");
  stats.last_piece_bytes = number("piece_bytes");
  stats.pcie_bytes_to_host = number("to_host");
  stats.pcie_bytes_to_device = number("to_device");
  return stats;
}

// The calls' results against the model, steps [first, last): each step's seed, step and pieces
// from rank 0's statistics (all ranks agree).
void expect_model_steps(terse::model::CompressedModel* model, const std::string& dir, int n,
                        size_t count, int first, int last,
                        const std::vector<std::map<std::string, std::string>>& values) {
  for (int step = first; step < last; ++step) {
    const terse::model::Expected expected =
        model_step(model, n, count, step, stats_of(values[0], step));
    for (int r = 0; r < n; ++r) {
      const std::vector<uint8_t> output = read_output(dir, r, step);
      ASSERT_EQ(output.size(), count * sizeof(float)) << "rank " << r << " step " << step;
      const terse::model::Comparison c =
          terse::model::compare(expected, DType::kFloat32, output.data(), count);
      EXPECT_EQ(c.mismatches, 0u) << "rank " << r << " step " << step << ": " << c.first;
    }
  }
}

std::vector<std::map<std::string, std::string>> read_all_values(const std::string& dir, int n) {
  std::vector<std::map<std::string, std::string>> values;
  for (int r = 0; r < n; ++r) {
    values.push_back(read_values(dir + "/rank" + std::to_string(r) + ".txt"));
  }
  return values;
}

// The route is chosen from a prediction made when the call is enqueued; the plan the proxy makes
// later decides. Two calls of one tensor enqueued while the stream is held are both predicted
// at step 2 (int8: the backend), but the policy leaves step 3 uncompressed: the proxy then
// stages that call itself (the dense allreduce on host copies, the whole tensor counted) and
// the result is the exact sum. Steps 0 and 1 run without a hold (a shape's first calls).
TEST(PluginDeviceBackendRoute, APlanTheBackendCannotRunIsStagedByTheProxy) {
  REQUIRE_DEVICE();
  char path[] = "/tmp/terse_route_policy_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string policy = "rules:\n  - codec: int8\n    schedule: {start: 0, end: 3}\n";
  ASSERT_EQ(write(fd, policy.data(), policy.size()), static_cast<ssize_t>(policy.size()));
  close(fd);
  const TemporaryDirectory made("terse_route_staged_");
  ASSERT_NE(made.path(), "") << "mkdtemp failed";
  const int n = 2, steps = 4, gate = 2;
  const size_t count = 6000, bytes = count * sizeof(float);
  {
    ScopedEnvironment file("TERSE_POLICY", path);
    ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", "sra");
    ScopedEnvironment step_count("PLUGIN_TEST_STEPS", std::to_string(steps).c_str());
    ScopedEnvironment elements("PLUGIN_TEST_COUNT", std::to_string(count).c_str());
    ScopedEnvironment gate_step("PLUGIN_TEST_GATE_STEP", std::to_string(gate).c_str());
    ScopedEnvironment gate_calls("PLUGIN_TEST_GATE_CALLS", "2");
    const std::string failure = run_rank_processes(n, made.path());
    unlink(path);
    ASSERT_EQ(failure, "");
  }
  const auto values = read_all_values(made.path(), n);
  const std::unique_ptr<terse::Codec> int8 = make_codec("int8");
  ASSERT_NE(int8, nullptr);
  for (int r = 0; r < n; ++r) {
    const terseStats last = stats_of(values[r], steps - 1);
    EXPECT_STREQ(last.last_codec, "none") << "rank " << r;
    EXPECT_EQ(values[r].at("gate"), "passed") << "rank " << r;
    for (int s = gate; s < steps; ++s) {
      EXPECT_EQ(values[r].at("step" + std::to_string(s) + "_returned_first"), "1")
          << "rank " << r << " step " << s << " waited for its stream";
    }
    const terse::model::PcieBytes pcie = terse::model::device_pcie_bytes("sra", *int8, count, n, r);
    // Three compressed calls' messages, then the staged call's whole tensor each way.
    EXPECT_EQ(last.pcie_bytes_to_host, 3 * pcie.to_host + bytes) << "rank " << r;
    EXPECT_EQ(last.pcie_bytes_to_device, 3 * pcie.to_device + bytes) << "rank " << r;
    const std::vector<uint8_t> output = read_output(made.path(), r, steps - 1);
    ASSERT_EQ(output.size(), bytes);
    std::vector<float> second(count);
    std::memcpy(second.data(), output.data(), bytes);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      // Two ranks: the ring's sum is a + b exactly.
      wrong += second[i] != input_value(0, steps - 1, i) + input_value(1, steps - 1, i) ? 1 : 0;
    }
    EXPECT_EQ(wrong, 0u) << "rank " << r << ": the staged call's result";
  }
  terse::model::CompressedModel model("int8", n, terse::MemoryKind::kResidual);
  expect_model_steps(&model, made.path(), n, count, 0, gate, values);
  // The gated backend call: its seed, step and pieces are those of the last compressed call,
  // which the dense one after it leaves in the statistics.
  terseStats gated_call = stats_of(values[0], gate);
  std::snprintf(gated_call.last_algorithm, sizeof(gated_call.last_algorithm), "sra");
  const terse::model::Expected expected = model_step(&model, n, count, gate, gated_call);
  for (int r = 0; r < n; ++r) {
    const std::vector<uint8_t> output = read_output(made.path(), r, gate);
    ASSERT_EQ(output.size(), bytes);
    EXPECT_EQ(terse::model::compare(expected, DType::kFloat32, output.data(), count).mismatches, 0u)
        << "rank " << r << ": the gated backend call's result";
  }
}

// The call returns before its stream reaches it: each rank's stream is held by a host function
// that the rank releases only after ncclAllReduce returned (a call that waited for its stream
// would return only when the gate gives up); the result still follows the upload enqueued before
// the gate. Ranks as processes: steps 0 and 1 run without a hold, step 2 is gated.
TEST(PluginDeviceBackendRoute, CallReturnsBeforeItsStreamRuns) {
  REQUIRE_DEVICE();
  const TemporaryDirectory made("terse_route_gated_");
  ASSERT_NE(made.path(), "") << "mkdtemp failed";
  const int n = 2, steps = 3, gate = 2;
  const size_t count = 4096;
  {
    ScopedEnvironment codec("TERSE_CODEC", "int8");
    ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", "sra");
    ScopedEnvironment step_count("PLUGIN_TEST_STEPS", std::to_string(steps).c_str());
    ScopedEnvironment elements("PLUGIN_TEST_COUNT", std::to_string(count).c_str());
    ScopedEnvironment in_place("PLUGIN_TEST_IN_PLACE", "1");
    ScopedEnvironment gate_step("PLUGIN_TEST_GATE_STEP", std::to_string(gate).c_str());
    ASSERT_EQ(run_rank_processes(n, made.path()), "");
  }
  const auto values = read_all_values(made.path(), n);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(values[r].at("gate"), "passed") << "rank " << r;
    EXPECT_EQ(values[r].at("step2_returned_first"), "1") << "rank " << r << " waited";
    // The gated call's own copies: messages, not the tensor.
    EXPECT_LT(stats_of(values[r], gate).pcie_bytes_to_host -
                  stats_of(values[r], gate - 1).pcie_bytes_to_host,
              count * sizeof(float) / 2)
        << "staged, not the backend";
  }
  terse::model::CompressedModel model("int8", n, terse::MemoryKind::kResidual);
  expect_model_steps(&model, made.path(), n, count, 0, steps, values);
}

// A codec first used after its tensor's shape ran (terseCommSetCodec between steps) launches
// kernels no call has launched before. With lazy loading (CUDA's default) a kernel's first launch
// waits for the device to be idle, so it must not come while the caller's stream is held: under
// the CUDA runtime model, which reports such a wait as the deadlock it is, every step completes
// and the last ones run the new codec. Ranks as processes (threads never hold).
TEST(PluginDeviceBackendRoute, ACodecFirstUsedLaterLoadsItsKernelsWithoutAHeldStream) {
  REQUIRE_DEVICE();
  const TemporaryDirectory made("terse_route_codec_");
  ASSERT_NE(made.path(), "") << "mkdtemp failed";
  const int n = 2, steps = 4;
  {
    ScopedEnvironment codec("TERSE_CODEC", "int8");
    ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", "sra");
    ScopedEnvironment loading("CUDA_MODULE_LOADING", "LAZY");
    ScopedEnvironment deadlock("FAKE_DEADLOCK_MS", "5000");
    ScopedEnvironment step_count("PLUGIN_TEST_STEPS", std::to_string(steps).c_str());
    ScopedEnvironment elements("PLUGIN_TEST_COUNT", "4096");
    ScopedEnvironment codec_step("PLUGIN_TEST_CODEC_STEP", "2");
    ScopedEnvironment new_codec("PLUGIN_TEST_CODEC", "int4");
    ASSERT_EQ(run_rank_processes(n, made.path()), "");
  }
  const auto values = read_all_values(made.path(), n);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(values[r].at("step1_codec").rfind("int8", 0), 0u) << values[r].at("step1_codec");
    EXPECT_EQ(values[r].at("step3_codec").rfind("int4", 0), 0u) << values[r].at("step3_codec");
  }
}

// One rank's gradient holds an Inf in a warm step (its stream held while the proxy runs it): as
// NCCL gives, that element of the sum is +Inf on every rank and every other element is finite;
// the communicator stays whole and the next step is finite everywhere. Int8 and top-k, on the
// kernels' device path (device messages escape non-finite values as host ones do).
TEST(PluginDeviceBackendRoute, AnInfInOneRanksGradientGivesNcclsAnswerOnAHeldStream) {
  REQUIRE_DEVICE();
  for (const char* spec : {"int8", "topk:k=60,method=exact"}) {
    SCOPED_TRACE(spec);
    const TemporaryDirectory made("terse_route_inf_");
    ASSERT_NE(made.path(), "") << "mkdtemp failed";
    const int n = 2, steps = 4, inf_step = 2;
    const size_t count = 4096;
    {
      ScopedEnvironment codec("TERSE_CODEC", spec);
      ScopedEnvironment loading("CUDA_MODULE_LOADING", "LAZY");
      ScopedEnvironment deadlock("FAKE_DEADLOCK_MS", "5000");
      ScopedEnvironment step_count("PLUGIN_TEST_STEPS", std::to_string(steps).c_str());
      ScopedEnvironment elements("PLUGIN_TEST_COUNT", std::to_string(count).c_str());
      ScopedEnvironment inf("PLUGIN_TEST_INF_STEP", std::to_string(inf_step).c_str());
      ASSERT_EQ(run_rank_processes(n, made.path()), "");
    }
    for (int r = 0; r < n; ++r) {
      for (int step = inf_step; step < steps; ++step) {
        const std::vector<uint8_t> bytes = read_output(made.path(), r, step);
        ASSERT_EQ(bytes.size(), count * sizeof(float)) << "rank " << r << " step " << step;
        std::vector<float> out(count);
        std::memcpy(out.data(), bytes.data(), bytes.size());
        for (size_t i = 0; i < count; ++i) {
          if (step == inf_step && i == 5) {
            EXPECT_EQ(out[i], std::numeric_limits<float>::infinity()) << "rank " << r;
          } else {
            ASSERT_TRUE(std::isfinite(out[i])) << "rank " << r << " step " << step << " at " << i;
          }
        }
      }
    }
  }
}

// An unmodified CUDA program (plugin_device_rank_process: cudaMalloc'd buffers, a stream of its
// own, ncclAllReduce, the result copied back, cudaStreamSynchronize) on 2 and 4 processes, lazy
// loading, one rank's gradient holding an Inf at step 2 of 4: every step's result equals the
// same program's on host buffers, bit for bit (PowerSGD: within GEMM rounding, as the device
// GEMM sums in another order), element 5 of step 2 +Inf everywhere. Both runs plan on the nominal
// figures (TERSE_PLANNER_LEARN=off): host calls teach the planner and device calls do not, so a
// learning host run may move a tensor to another algorithm the device run keeps.
TEST(PluginDeviceBackendRoute, AnUnmodifiedCudaProgramGivesItsHostBufferAnswer) {
  REQUIRE_DEVICE();
  const int steps = 4, inf_step = 2;
  const size_t count = 6000;
  for (const char* spec : {"none", "int8", "topk:ratio=0.05", "powersgd:rank=2"}) {
    for (int n : {2, 4}) {
      SCOPED_TRACE(std::string(spec) + " on " + std::to_string(n) + " processes");
      std::vector<std::vector<std::vector<uint8_t>>> outputs[2];  // [host, device][rank][step]
      for (int device = 0; device < 2; ++device) {
        const TemporaryDirectory made("terse_route_program_");
        ASSERT_NE(made.path(), "") << "mkdtemp failed";
        {
          ScopedEnvironment codec("TERSE_CODEC", spec);
          ScopedEnvironment nominal("TERSE_PLANNER_LEARN", "off");
          ScopedEnvironment loading("CUDA_MODULE_LOADING", "LAZY");
          ScopedEnvironment deadlock("FAKE_DEADLOCK_MS", "5000");
          ScopedEnvironment step_count("PLUGIN_TEST_STEPS", std::to_string(steps).c_str());
          ScopedEnvironment elements("PLUGIN_TEST_COUNT", std::to_string(count).c_str());
          ScopedEnvironment inf("PLUGIN_TEST_INF_STEP", std::to_string(inf_step).c_str());
          ScopedEnvironment host("PLUGIN_TEST_HOST_BUFFERS", device ? "0" : "1");
          ASSERT_EQ(run_rank_processes(n, made.path()), "");
        }
        for (int r = 0; r < n; ++r) {
          outputs[device].emplace_back();
          for (int step = 0; step < steps; ++step) {
            outputs[device].back().push_back(read_output(made.path(), r, step));
          }
        }
      }
      const bool exact = std::string(spec).rfind("powersgd", 0) != 0;
      for (int r = 0; r < n; ++r) {
        for (int step = 0; step < steps; ++step) {
          const std::vector<uint8_t>& host = outputs[0][r][step];
          const std::vector<uint8_t>& device = outputs[1][r][step];
          ASSERT_EQ(device.size(), count * sizeof(float)) << "rank " << r << " step " << step;
          ASSERT_EQ(host.size(), device.size());
          std::vector<float> h(count), d(count);
          std::memcpy(h.data(), host.data(), host.size());
          std::memcpy(d.data(), device.data(), device.size());
          if (step == inf_step) {
            EXPECT_EQ(d[5], std::numeric_limits<float>::infinity()) << "rank " << r;
          }
          size_t wrong = 0;
          for (size_t i = 0; i < count; ++i) {
            const bool same = exact ? std::memcmp(&h[i], &d[i], sizeof(float)) == 0
                                    : (std::isinf(h[i]) ? d[i] == h[i]
                                                        : std::fabs(d[i] - h[i]) <=
                                                              1e-4f * (1.0f + std::fabs(h[i])));
            if (!same && wrong++ == 0) {
              ADD_FAILURE() << "rank " << r << " step " << step << " element " << i << ": device "
                            << d[i] << ", host " << h[i];
            }
          }
          EXPECT_EQ(wrong, 0u) << "rank " << r << " step " << step;
        }
      }
    }
  }
}

// A kernel that faults in a held call (the model's fault on request: the int8 encode's third
// launch, a warm step) is a sticky CUDA error: every rank's program fails within the timeout
// instead of hanging, and the faulting rank's error names the work that ran on its stream.
TEST(PluginDeviceBackendRoute, AKernelFaultFailsEveryRankNamingTheWork) {
  REQUIRE_DEVICE();
  const TemporaryDirectory made("terse_route_fault_");
  ASSERT_NE(made.path(), "") << "mkdtemp failed";
  std::string failure;
  {
    ScopedEnvironment codec("TERSE_CODEC", "int8");
    ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", "sra");
    ScopedEnvironment timeout("TERSE_TIMEOUT_S", "10");
    ScopedEnvironment step_count("PLUGIN_TEST_STEPS", "4");
    ScopedEnvironment elements("PLUGIN_TEST_COUNT", "4096");
    ScopedEnvironment fault("FAKE_FAIL", "fault:int_quant_encode_compensated_kernel:3");
    ScopedEnvironment warnings("TERSE_DEBUG", "WARN");  // the asynchronous error, logged
    failure = run_rank_processes(2, made.path());
  }
  EXPECT_NE(failure.find("rank 0 exited with 1"), std::string::npos) << failure;
  EXPECT_NE(failure.find("rank 1 exited with 1"), std::string::npos) << failure;
  EXPECT_NE(failure.find("unspecified launch failure (a kernel fault shows at the next wait; the "
                         "stream's latest kernels: int8:"),
            std::string::npos)
      << failure;
  EXPECT_NE(failure.find(" encode of 2048 elements"), std::string::npos) << failure;
}

// Ranks that share a process (threads) never hold a stream: one's first calls of a shape
// allocate, which CUDA makes wait for another's held stream (device_staging.h). Each call has
// run when it returns: the stream has nothing left to do, on the third call too, where ranks
// as processes hold.
TEST(PluginDeviceBackendRoute, RanksSharingAProcessReturnOnceTheCallRan) {
  REQUIRE_DEVICE();
  ScopedEnvironment codec("TERSE_CODEC", "int8");
  ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", "sra");
  const int n = 2, steps = 4;
  const size_t count = 4096, bytes = count * sizeof(float);
  std::vector<std::vector<cudaError_t>> queried(steps, std::vector<cudaError_t>(n));
  std::vector<std::vector<RankCall>> calls(steps, std::vector<RankCall>(n));
  const std::string failure = run_ranks(n, [&](int rank, ncclComm_t comm) {
    cudaStream_t stream = nullptr;
    void* data = nullptr;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMalloc(&data, bytes) != cudaSuccess) {
      calls[0][rank].error = "CUDA setup failed";
      return;
    }
    for (int step = 0; step < steps; ++step) {
      RankCall& call = calls[step][rank];
      std::vector<float> input(count);
      for (size_t i = 0; i < count; ++i) input[i] = input_value(rank, step, i);
      cudaMemcpyAsync(data, input.data(), bytes, cudaMemcpyHostToDevice, stream);
      if (ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) {
        call.error = std::string("ncclAllReduce: ") + ncclGetLastError(comm);
      }
      queried[step][rank] = cudaStreamQuery(stream);
      call.output.resize(bytes);
      cudaMemcpyAsync(call.output.data(), data, bytes, cudaMemcpyDeviceToHost, stream);
      if (cudaStreamSynchronize(stream) != cudaSuccess) call.error = "cudaStreamSynchronize";
      if (terseCommGetStats(comm, &call.stats) != ncclSuccess) call.error = "terseCommGetStats";
    }
    cudaFree(data);
    cudaStreamDestroy(stream);
  });
  ASSERT_EQ(failure, "");
  terse::model::CompressedModel model("int8", n, terse::MemoryKind::kResidual);
  for (int step = 0; step < steps; ++step) {
    const terse::model::Expected expected =
        model_step(&model, n, count, step, calls[step][0].stats);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(calls[step][r].error, "") << "rank " << r << " step " << step;
      EXPECT_EQ(queried[step][r], cudaSuccess)
          << "rank " << r << " step " << step << ": the stream still had work when the call "
          << "returned (" << cudaGetErrorString(queried[step][r]) << ")";
      EXPECT_EQ(
          terse::model::compare(expected, DType::kFloat32, calls[step][r].output.data(), count)
              .mismatches,
          0u)
          << "rank " << r << " step " << step;
    }
  }
}

// ncclGroupSimulateEnd while a device-buffer allreduce of the same tensor is still queued on
// the stream proxy (its stream held by a gate): the queued call is planned by the proxy whenever
// its stream releases it, possibly while the simulation plans its own calls of the tensor; the
// simulation's steps are its own (CompressionEngine::PendingSteps), so the queued call runs at
// step 2 (after the tensor's two ungated calls) and the next one at step 3 on every rank, each
// equal to the model bit for bit. The interleaving cannot be forced from outside; compressed_tests'
// SimulatedStepsAreSeenByNoOtherPlan plans a real call in the middle of a simulation.
TEST(PluginDeviceBackendRoute, ASimulationBesideAQueuedCallMovesNoStep) {
  REQUIRE_DEVICE();
  const TemporaryDirectory made("terse_route_simulated_");
  ASSERT_NE(made.path(), "") << "mkdtemp failed";
  const int n = 2, steps = 4;
  const size_t count = 4096;
  {
    ScopedEnvironment codec("TERSE_CODEC", "int8");
    ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", "sra");
    ScopedEnvironment step_count("PLUGIN_TEST_STEPS", std::to_string(steps).c_str());
    ScopedEnvironment elements("PLUGIN_TEST_COUNT", std::to_string(count).c_str());
    ScopedEnvironment in_place("PLUGIN_TEST_IN_PLACE", "1");
    ScopedEnvironment gate_step("PLUGIN_TEST_GATE_STEP", "2");
    ScopedEnvironment simulate("PLUGIN_TEST_SIMULATE_AT_GATE", "1");
    ASSERT_EQ(run_rank_processes(n, made.path()), "");
  }
  const auto values = read_all_values(made.path(), n);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(values[r].at("step2_returned_first"), "1") << "rank " << r;
    EXPECT_GT(std::stod(values[r].at("estimate")), 0.0) << "rank " << r;
    for (int step = 0; step < steps; ++step) {
      EXPECT_EQ(stats_of(values[r], step).last_step, static_cast<uint64_t>(step)) << "rank " << r;
    }
  }
  terse::model::CompressedModel model("int8", n, terse::MemoryKind::kResidual);
  expect_model_steps(&model, made.path(), n, count, 0, steps, values);
}

}  // namespace
