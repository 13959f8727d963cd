// Device-buffer allreduces that libterse runs on its CUDA execution backend
// (plugin/backend_route.h), through the NCCL API as an application makes them: results equal to
// the reference model (tests/model) bit for bit, only encoded messages across PCIe
// (terseCommGetStats), the caller's stream order, the caller returning before its stream ran, and
// a rank with host buffers beside one with device buffers; hierarchical and rail plans on
// emulated nodes (ranks as processes) with their intra-node traffic counted too. A plan the
// backend cannot run (uncompressed) is staged, whole tensors counted.
//
// Runs on a GPU with the real kernels, and without one under the fake CUDA runtime with the
// emulated kernels (CTest's plugin_device_backend_on_fake_cudart sets LD_LIBRARY_PATH and
// TERSE_TEST_DEVICE_COMPUTE); skips where no CUDA device is visible.
#include <cuda_runtime.h>
#include <nccl.h>
#include <terse/terse.h>

#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "codecs/codec_registry.h"
#include "codecs/powersgd.h"
#include "launch/hex_bytes.h"
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
                     terse_test::bytes_to_hex(id.internal, sizeof(id.internal))});
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

// The route is chosen from a prediction made when the call is enqueued; the plan the proxy makes
// later decides. Two calls of one tensor enqueued while the stream is held are both predicted
// at step 0 (int8: the backend), but the policy leaves step 1 uncompressed: the proxy then
// stages that call itself (the dense allreduce on host copies, the whole tensor counted) and
// the result is the exact sum.
TEST(PluginDeviceBackendRoute, APlanTheBackendCannotRunIsStagedByTheProxy) {
  REQUIRE_DEVICE();
  char path[] = "/tmp/terse_route_policy_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string policy = "rules:\n  - codec: int8\n    schedule: {start: 0, end: 3}\n";
  ASSERT_EQ(write(fd, policy.data(), policy.size()), static_cast<ssize_t>(policy.size()));
  close(fd);
  ScopedEnvironment file("TERSE_POLICY", path);
  ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", "sra");
  const int n = 2;
  const size_t count = 6000;
  const size_t bytes = count * sizeof(float);
  struct Gate {
    std::atomic<bool> open{false};
  };
  Gate gates[n];
  constexpr int kWarm = 2;  // ungated calls (steps 0 and 1) before the gated ones
  std::vector<std::vector<std::vector<float>>> warm(
      kWarm, std::vector<std::vector<float>>(n, std::vector<float>(count)));
  std::vector<std::string> errors(n);
  std::vector<std::vector<terseStats>> warm_stats(kWarm, std::vector<terseStats>(n));
  std::vector<terseStats> stats(n);
  // Pinned, so that the copies into them queue behind the gate instead of waiting for it (a copy
  // into pageable memory returns only once the stream ran it).
  float* first[n] = {};
  float* second[n] = {};
  const std::string failure = run_ranks(n, [&](int rank, ncclComm_t comm) {
    cudaStream_t stream = nullptr;
    void *send = nullptr, *recv = nullptr;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    cudaMalloc(&send, bytes);
    cudaMalloc(&recv, bytes);
    cudaMallocHost(reinterpret_cast<void**>(&first[rank]), bytes);
    cudaMallocHost(reinterpret_cast<void**>(&second[rank]), bytes);
    std::vector<float> w(count), a(count), b(count);
    for (size_t i = 0; i < count; ++i) {
      a[i] = input_value(rank, kWarm, i);
      b[i] = input_value(rank, kWarm + 1, i);
    }
    // The tensor's first two calls (int8) run without a hold (device_staging.h).
    for (int step = 0; step < kWarm; ++step) {
      for (size_t i = 0; i < count; ++i) w[i] = input_value(rank, step, i);
      cudaMemcpyAsync(send, w.data(), bytes, cudaMemcpyHostToDevice, stream);
      if (ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) {
        errors[rank] = ncclGetLastError(comm);
      }
      cudaMemcpyAsync(warm[step][rank].data(), recv, bytes, cudaMemcpyDeviceToHost, stream);
      cudaStreamSynchronize(stream);
      terseCommGetStats(comm, &warm_stats[step][rank]);
    }
    auto hold = [](void* argument) {
      Gate* held = static_cast<Gate*>(argument);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!held->open.load() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
    // Behind the gate, both predicted at step 2 (int8, the backend); the proxy runs the second
    // at step 3, where the policy says none, and stages it.
    cudaLaunchHostFunc(stream, hold, &gates[rank]);
    cudaMemcpyAsync(send, a.data(), bytes, cudaMemcpyHostToDevice, stream);
    if (ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) {
      errors[rank] = ncclGetLastError(comm);
    }
    cudaMemcpyAsync(first[rank], recv, bytes, cudaMemcpyDeviceToHost, stream);
    cudaMemcpyAsync(send, b.data(), bytes, cudaMemcpyHostToDevice, stream);
    if (ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) {
      errors[rank] = ncclGetLastError(comm);
    }
    cudaMemcpyAsync(second[rank], recv, bytes, cudaMemcpyDeviceToHost, stream);
    gates[rank].open = true;
    if (cudaStreamSynchronize(stream) != cudaSuccess) errors[rank] = "cudaStreamSynchronize";
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess) errors[rank] = std::string("async: ") + ncclGetLastError(comm);
    terseCommGetStats(comm, &stats[rank]);
    cudaFree(send);
    cudaFree(recv);
    cudaStreamDestroy(stream);
  });
  unlink(path);
  ASSERT_EQ(failure, "");
  const std::unique_ptr<terse::Codec> int8 = make_codec("int8");
  ASSERT_NE(int8, nullptr);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_STREQ(stats[r].last_codec, "none") << "rank " << r;
    const terse::model::PcieBytes pcie = terse::model::device_pcie_bytes("sra", *int8, count, n, r);
    // Three compressed calls' messages, then the staged call's whole tensor each way.
    EXPECT_EQ(stats[r].pcie_bytes_to_host, (kWarm + 1) * pcie.to_host + bytes) << "rank " << r;
    EXPECT_EQ(stats[r].pcie_bytes_to_device, (kWarm + 1) * pcie.to_device + bytes) << "rank " << r;
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      // Two ranks: the ring's sum is a + b exactly.
      wrong += second[r][i] != input_value(0, kWarm + 1, i) + input_value(1, kWarm + 1, i) ? 1 : 0;
    }
    EXPECT_EQ(wrong, 0u) << "rank " << r << ": the staged call's result";
  }
  // The three calls on the backend: the model's int8 results (the gated one's seed, step and
  // pieces are those of the last compressed call, which the dense one after it leaves in the
  // statistics).
  terse::model::CompressedModel model("int8", n, terse::MemoryKind::kResidual);
  for (int step = 0; step < kWarm; ++step) {
    const terse::model::Expected expected_warm =
        model_step(&model, n, count, step, warm_stats[step][0]);
    for (int r = 0; r < n; ++r) {
      const auto* warm_got = reinterpret_cast<const uint8_t*>(warm[step][r].data());
      EXPECT_EQ(terse::model::compare(expected_warm, DType::kFloat32, warm_got, count).mismatches,
                0u)
          << "rank " << r << ": ungated call " << step;
    }
  }
  terseStats gated_call = stats[0];
  std::snprintf(gated_call.last_algorithm, sizeof(gated_call.last_algorithm), "sra");
  const terse::model::Expected expected = model_step(&model, n, count, kWarm, gated_call);
  for (int r = 0; r < n; ++r) {
    const auto* got = reinterpret_cast<const uint8_t*>(first[r]);
    EXPECT_EQ(terse::model::compare(expected, DType::kFloat32, got, count).mismatches, 0u)
        << "rank " << r << ": the gated backend call's result";
    cudaFreeHost(first[r]);
    cudaFreeHost(second[r]);
  }
}

// The call returns before its stream reaches it: each rank's stream is held by a host function
// that the test releases only after ncclAllReduce returned (a call that waited for its stream
// would return only when the gate gives up, and fail here); the result still follows the
// upload enqueued before the gate. The tensor's first two calls come before the gate: a call of
// a shape runs under a hold only once one before it needed no new memory (device_staging.h).
TEST(PluginDeviceBackendRoute, CallReturnsBeforeItsStreamRuns) {
  REQUIRE_DEVICE();
  ScopedEnvironment codec("TERSE_CODEC", "int8");
  ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", "sra");
  const int n = 2;
  const size_t count = 4096;
  enum GateState : int { kClosed = 0, kPassed = 1, kGaveUp = 2 };
  struct Gate {
    std::atomic<bool> open{false};
    std::atomic<int> state{kClosed};
  };
  Gate gates[n];
  constexpr int kWarm = 2;  // ungated calls before the gated one
  std::vector<std::vector<std::vector<uint8_t>>> warm_outputs(
      kWarm, std::vector<std::vector<uint8_t>>(n, std::vector<uint8_t>(count * sizeof(float))));
  std::vector<std::vector<uint8_t>> outputs(n, std::vector<uint8_t>(count * sizeof(float)));
  std::vector<std::string> errors(n);
  std::vector<std::vector<terseStats>> warm_stats(kWarm, std::vector<terseStats>(n));
  std::vector<terseStats> stats(n);
  const std::string failure = run_ranks(n, [&](int rank, ncclComm_t comm) {
    cudaStream_t stream = nullptr;
    void* data = nullptr;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    cudaMalloc(&data, count * sizeof(float));
    std::vector<float> input(count);
    for (int step = 0; step < kWarm; ++step) {
      for (size_t i = 0; i < count; ++i) input[i] = input_value(rank, step, i);
      cudaMemcpyAsync(data, input.data(), count * sizeof(float), cudaMemcpyHostToDevice, stream);
      if (ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) {
        errors[rank] = std::string("ungated call: ") + ncclGetLastError(comm);
      }
      cudaMemcpyAsync(warm_outputs[step][rank].data(), data, count * sizeof(float),
                      cudaMemcpyDeviceToHost, stream);
      cudaStreamSynchronize(stream);
      terseCommGetStats(comm, &warm_stats[step][rank]);
    }
    for (size_t i = 0; i < count; ++i) input[i] = input_value(rank, kWarm, i);
    auto hold = [](void* argument) {
      Gate* held = static_cast<Gate*>(argument);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!held->open.load() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      held->state = held->open.load() ? kPassed : kGaveUp;
    };
    cudaLaunchHostFunc(stream, hold, &gates[rank]);
    cudaMemcpyAsync(data, input.data(), count * sizeof(float), cudaMemcpyHostToDevice, stream);
    const ncclResult_t result =
        ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream);
    if (gates[rank].state.load() != kClosed) errors[rank] = "returned after its stream ran";
    gates[rank].open = true;
    if (result != ncclSuccess) errors[rank] = ncclGetLastError(comm);
    cudaMemcpyAsync(outputs[rank].data(), data, count * sizeof(float), cudaMemcpyDeviceToHost,
                    stream);
    cudaStreamSynchronize(stream);
    terseCommGetStats(comm, &stats[rank]);
    cudaFree(data);
    cudaStreamDestroy(stream);
  });
  ASSERT_EQ(failure, "");
  terse::model::CompressedModel model("int8", n, terse::MemoryKind::kResidual);
  for (int step = 0; step < kWarm; ++step) {
    const terse::model::Expected warm = model_step(&model, n, count, step, warm_stats[step][0]);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(terse::model::compare(warm, DType::kFloat32, warm_outputs[step][r].data(), count)
                    .mismatches,
                0u)
          << "rank " << r << ": ungated call " << step;
    }
  }
  const terse::model::Expected expected = model_step(&model, n, count, kWarm, stats[0]);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(gates[r].state.load(), kPassed) << "rank " << r;
    EXPECT_EQ(terse::model::compare(expected, DType::kFloat32, outputs[r].data(), count).mismatches,
              0u)
        << "rank " << r;
    // The gated call's own copies: messages, not the tensor.
    EXPECT_LT(stats[r].pcie_bytes_to_host - warm_stats[kWarm - 1][r].pcie_bytes_to_host,
              count * sizeof(float) / 2)
        << "staged, not the backend";
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
  ScopedEnvironment codec("TERSE_CODEC", "int8");
  ScopedEnvironment algorithm("TERSE_COMPRESSED_ALGO", "sra");
  const int n = 2;
  const size_t count = 4096;
  struct Gate {
    std::atomic<bool> open{false};
  };
  Gate gates[n];
  // Steps 0 and 1 run without a hold (the first makes the tensor's memory, the second shows that
  // none more is needed: device_staging.h); step 2 is gated.
  const int steps = 4;
  const int gated = 2;
  std::vector<std::vector<RankCall>> calls(steps, std::vector<RankCall>(n));
  std::vector<float> estimates(n, 0.0f);
  const std::string failure = run_ranks(n, [&](int rank, ncclComm_t comm) {
    cudaStream_t stream = nullptr;
    void* data = nullptr;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMalloc(&data, count * sizeof(float)) != cudaSuccess) {
      calls[0][rank].error = "CUDA setup failed";
      return;
    }
    auto hold = [](void* argument) {
      Gate* held = static_cast<Gate*>(argument);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!held->open.load() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
    for (int step = 0; step < steps; ++step) {
      RankCall& call = calls[step][rank];
      std::vector<float> input(count);
      for (size_t i = 0; i < count; ++i) input[i] = input_value(rank, step, i);
      if (step == gated) cudaLaunchHostFunc(stream, hold, &gates[rank]);
      cudaMemcpyAsync(data, input.data(), count * sizeof(float), cudaMemcpyHostToDevice, stream);
      ncclResult_t result = ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream);
      if (step == gated) {
        // The tensor's next two calls, simulated while step 0 waits for its stream.
        ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
        if (result == ncclSuccess) result = ncclGroupStart();
        for (int k = 0; k < 2 && result == ncclSuccess; ++k) {
          result = ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream);
        }
        if (result == ncclSuccess) result = ncclGroupSimulateEnd(&info);
        estimates[rank] = info.estimatedTime;
        gates[rank].open = true;
      }
      if (result != ncclSuccess)
        call.error = std::string("ncclAllReduce: ") + ncclGetLastError(comm);
      call.output.resize(count * sizeof(float));
      cudaMemcpyAsync(call.output.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost,
                      stream);
      if (cudaStreamSynchronize(stream) != cudaSuccess) call.error = "cudaStreamSynchronize";
      if (terseCommGetStats(comm, &call.stats) != ncclSuccess) call.error = "terseCommGetStats";
    }
    cudaFree(data);
    cudaStreamDestroy(stream);
  });
  ASSERT_EQ(failure, "");
  terse::model::CompressedModel model("int8", n, terse::MemoryKind::kResidual);
  for (int step = 0; step < steps; ++step) {
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(calls[step][r].error, "") << "rank " << r << " step " << step;
      EXPECT_EQ(calls[step][r].stats.last_step, static_cast<uint64_t>(step)) << "rank " << r;
    }
    const terse::model::Expected expected =
        model_step(&model, n, count, step, calls[step][0].stats);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(
          terse::model::compare(expected, DType::kFloat32, calls[step][r].output.data(), count)
              .mismatches,
          0u)
          << "rank " << r << " step " << step;
    }
  }
  for (int r = 0; r < n; ++r) EXPECT_GT(estimates[r], 0.0f) << "rank " << r;
}

}  // namespace
