// The compression engine inside the communicator: which allreduces it compresses (policy by
// name, size, dtype and op; the schedule by the tensor's step), which it leaves to the dense
// algorithms, and what its statistics say. Ranks as threads over the real transport.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/compressed/policy/policy.h"
#include "common/log.h"
#include "communicator_test_support.h"

namespace terse {
namespace {

using test::CommunicatorWorld;

CollectiveArgs allreduce_args(const std::vector<float>& send, std::vector<float>* recv,
                              const char* name) {
  CollectiveArgs args;
  args.kind = CollectiveKind::kAllReduce;
  args.send = send.data();
  args.recv = recv->data();
  args.count = send.size();
  args.type = ncclFloat32;
  if (name != nullptr) {
    auto tensor = std::make_shared<TensorRequest>();
    tensor->name = name;
    args.tensor = tensor;
  }
  return args;
}

Policy policy_from(const char* yaml) {
  Policy policy;
  EXPECT_EQ(Policy::from_yaml(yaml, "test", &policy), ncclSuccess);
  return policy;
}

TEST(CompressionEngine, PolicyDecidesByNameSizeAndOp) {
  CommunicatorWorld world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](Communicator& comm) {
    comm.compression()->set_policy(
        policy_from("rules:\n"
                    "  - match: {name: \"embedding\\\\..*\"}\n"
                    "    codec: none\n"
                    "  - match: {min_bytes: 64K}\n"
                    "    codec: int8\n"));
    std::vector<float> big(1 << 16, 1.0f), small(100, 1.0f), out_big(big.size()),
        out_small(small.size());
    std::string codec, algorithm;
    ASSERT_EQ(
        comm.compression()->decide(allreduce_args(big, &out_big, "layer.w"), &codec, &algorithm),
        ncclSuccess);
    EXPECT_EQ(codec.rfind("int8:", 0), 0u) << codec;
    // Which algorithm is the planner's business (test_planner.cpp); one of int8's.
    EXPECT_TRUE(algorithm == "sra" || algorithm == "recursive_doubling" || algorithm == "tree")
        << algorithm;
    ASSERT_EQ(comm.compression()->decide(allreduce_args(big, &out_big, "embedding.w"), &codec,
                                         &algorithm),
              ncclSuccess);
    EXPECT_EQ(codec, "none");
    ASSERT_EQ(
        comm.compression()->decide(allreduce_args(small, &out_small, nullptr), &codec, &algorithm),
        ncclSuccess);
    EXPECT_EQ(codec, "none");
    // max is not compressible, whatever the rules say.
    CollectiveArgs maximum = allreduce_args(big, &out_big, "layer.w");
    maximum.op.kind = ReduceKind::kMax;
    ASSERT_EQ(comm.compression()->decide(maximum, &codec, &algorithm), ncclSuccess);
    EXPECT_EQ(codec, "none");
    ASSERT_EQ(comm.run(maximum), ncclSuccess);
    EXPECT_EQ(out_big[0], 1.0f);
    EXPECT_EQ(comm.compression()->stats().traffic.compressed_calls, 0u);
  });
}

TEST(CompressionEngine, AutoStaysUncompressedInsideOneNode) {
  // These threads share one host, whose shared memory (the model's default 32 Gbit/s) no codec
  // at a CPU's speed beats: the planner leaves a 4 MiB tensor uncompressed. The codec speeds are
  // tests/codec_speeds.txt's (what this project's 2-core CI machine measures with codec_perf),
  // which plugin/pinned_codec_speeds.cpp names before any test runs, so the outcome depends on
  // the model, not on how loaded the machine is. Speeds are read or measured once per process,
  // at the first plan or communicator: a table this test named itself went unread whenever
  // another test of the process had planned first, and the speeds probed then, under load,
  // could make int8 look 1.2x faster (about 1 run in 4 with two busy loops beside it).
  const char* table = std::getenv("TERSE_CODEC_SPEED");
  ASSERT_TRUE(table != nullptr && std::string(table) == TERSE_TEST_CODEC_SPEEDS)
      << "this test plans with " << TERSE_TEST_CODEC_SPEEDS
      << ", not TERSE_CODEC_SPEED=" << (table != nullptr ? table : "(unset)");
  test::EnvironmentSettings model({{"TERSE_SHM_GBPS", nullptr}, {"TERSE_SHM_LATENCY_US", nullptr}});
  CommunicatorWorld world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](Communicator& comm) {
    comm.compression()->set_policy(policy_from("rules:\n  - codec: auto\n"));
    std::vector<float> big(1 << 20, 1.0f), out(big.size());
    std::string codec, algorithm;
    ASSERT_EQ(comm.compression()->decide(allreduce_args(big, &out, "w"), &codec, &algorithm),
              ncclSuccess);
    EXPECT_EQ(codec, "none");
    EXPECT_EQ(algorithm, "");
  });
}

TEST(CompressionEngine, ScheduleCountsStepsPerTensor) {
  CommunicatorWorld world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](Communicator& comm) {
    // Compressed from the tensor's third call on, every second step.
    comm.compression()->set_policy(
        policy_from("rules:\n"
                    "  - codec: int8\n"
                    "    schedule: {start: 2, every: 2}\n"));
    std::vector<float> send(4096, 0.5f), recv(4096), other(4096);
    std::vector<uint64_t> compressed_after;
    for (int call = 0; call < 6; ++call) {
      ASSERT_EQ(comm.run(allreduce_args(send, &recv, "a")), ncclSuccess);
      compressed_after.push_back(comm.compression()->stats().traffic.compressed_calls);
    }
    // Steps 0 1 2 3 4 5: compressed at 2 and 4.
    EXPECT_EQ(compressed_after, (std::vector<uint64_t>{0, 0, 1, 1, 2, 2}));
    // Another tensor has steps of its own.
    ASSERT_EQ(comm.run(allreduce_args(send, &other, "b")), ncclSuccess);
    EXPECT_EQ(comm.compression()->stats().traffic.compressed_calls, 2u);
    const CompressionStats stats = comm.compression()->stats();
    EXPECT_EQ(stats.traffic.calls, 7u);
    ASSERT_EQ(stats.traffic.rows.size(), 2u);  // none and int8, each with its algorithm
    EXPECT_EQ(recv[0], 1.0f);  // 0.5 + 0.5 is exact in int8 min-max of a constant block
  });
}

// TERSE_DEBUG=INFO logs a tensor's plan once per size and type: a buffer reused at another size
// (all_reduce_perf sweeping sizes over one buffer) gets a line for each size's plan, and a size
// seen before gets none again.
TEST(CompressionEngine, InfoLogsAPlanOncePerBufferSizeAndType) {
  const std::string path =
      ::testing::TempDir() + "terse_engine_plan_log_" + std::to_string(getpid()) + ".txt";
  std::remove(path.c_str());
  {
    test::EnvironmentSettings debug({{"TERSE_DEBUG", "INFO"}, {"TERSE_DEBUG_FILE", path.c_str()}});
    reload_log_settings();
    {
      CommunicatorWorld world(2);
      ASSERT_TRUE(world.ok()) << world.error();
      world.run([&](Communicator& comm) {
        comm.compression()->set_policy(policy_from("rules:\n  - codec: int8\n"));
        // One anonymous buffer, as all_reduce_perf uses: 4096, 1024, 4096 and 1024 elements of
        // float, then 1024 of int32 (which int8 leaves uncompressed).
        std::vector<float> send(4096, 0.5f), recv(4096);
        for (const size_t count : {4096, 1024, 4096, 1024}) {
          CollectiveArgs args = allreduce_args(send, &recv, nullptr);
          args.count = count;
          ASSERT_EQ(comm.run(args), ncclSuccess);
        }
        std::vector<int32_t> integers(1024, 1);
        CollectiveArgs args = allreduce_args(send, &recv, nullptr);
        args.send = integers.data();
        args.count = integers.size();
        args.type = ncclInt32;
        ASSERT_EQ(comm.run(args), ncclSuccess);
      });
    }
  }
  reload_log_settings();  // TERSE_DEBUG and TERSE_DEBUG_FILE as they were; closes the file
  std::ifstream file(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) {
    if (line.find(": tensor at 0x") != std::string::npos) lines.push_back(line);
  }
  std::remove(path.c_str());
  const auto count_lines = [&](int rank, const std::string& text) {
    const std::string prefix = "rank " + std::to_string(rank) + ": tensor at 0x";
    return std::count_if(lines.begin(), lines.end(), [&](const std::string& line) {
      return line.find(prefix) != std::string::npos && line.find(text) != std::string::npos;
    });
  };
  std::string all;
  for (const std::string& line : lines) all += line + "\n";
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(count_lines(rank, "(4096 x float): codec int8"), 1) << all;
    EXPECT_EQ(count_lines(rank, "(1024 x float): codec int8"), 1) << all;
    EXPECT_EQ(count_lines(rank, "(1024 x float) (int32 x 1024): uncompressed"), 1) << all;
  }
  EXPECT_EQ(lines.size(), 6u) << all;
}

// ncclGroupSimulateEnd plans a group's calls without running them. The steps its calls take
// are the simulation's alone: a plan made meanwhile by anyone else, such as the stream proxy
// running an allreduce of the tensor queued before the group, must see the tensor's steps as
// they are, or that rank runs the call at another step than its peers.
TEST(CompressionEngine, SimulatedStepsAreSeenByNoOtherPlan) {
  CommunicatorWorld world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](Communicator& comm) {
    comm.compression()->set_policy(
        policy_from("rules:\n"
                    "  - codec: int8\n"
                    "    schedule: {start: 1}\n"));
    std::vector<float> send(4096, 0.5f), recv(4096);
    const CollectiveArgs args = allreduce_args(send, &recv, "a");
    ASSERT_EQ(comm.run(args), ncclSuccess);  // step 0
    // Two simulated calls of the tensor (its steps 1 and 2 in the simulation), then a real call
    // while the simulation is still in progress.
    CompressionEngine::PendingSteps simulation;
    double first = 0, second = 0;
    ASSERT_EQ(comm.simulate(args, &simulation, &first), ncclSuccess);
    ASSERT_EQ(comm.simulate(args, &simulation, &second), ncclSuccess);
    ASSERT_EQ(comm.run(args), ncclSuccess);
    EXPECT_EQ(comm.compression()->stats().last_call.step, 1u);
    EXPECT_EQ(comm.compression()->residual_stats().step, 1u);
    ASSERT_EQ(comm.run(args), ncclSuccess);
    EXPECT_EQ(comm.compression()->stats().last_call.step, 2u);
  });
}

TEST(CompressionEngine, ForcedAlgorithmMustAcceptTheCodec) {
  CommunicatorWorld world(2,
                          {{"TERSE_CODEC", "topk:ratio=0.1"}, {"TERSE_COMPRESSED_ALGO", "ring"}});
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](Communicator& comm) {
    std::vector<float> send(4096, 1.0f), recv(4096);
    EXPECT_EQ(comm.run(allreduce_args(send, &recv, nullptr)), ncclSuccess);
    EXPECT_EQ(comm.compression()->stats().last_call.algorithm, "ring");
    comm.compression()->set_policy([] {
      Policy policy;
      EXPECT_EQ(Policy::from_codec_spec("powersgd", &policy), ncclSuccess);
      return policy;
    }());
    EXPECT_EQ(comm.run(allreduce_args(send, &recv, nullptr)), ncclInvalidArgument);
    // A refused decision is the caller's error: the communicator stays usable.
    EXPECT_EQ(comm.async_error(), ncclSuccess);
  });
}

// The planner learns from the calls (planner.h, Learning): told that shared memory moves 125
// GB/s, four ranks on two cores see auto's uncompressed calls take several times what that
// predicts, learn slower figures, agree on them (every rank holds the same figures, bit for bit),
// and predict the later calls longer; the statistics show them. (How close the predictions come
// is the perf check's to show: perf/planner_check.sh. A unit test on a loaded machine cannot.)
TEST(CompressionEngine, RanksLearnFromTheirCallsAndAgreeOnWhatTheyLearned) {
  CommunicatorWorld world(4, {{"TERSE_SHM_GBPS", "1000"}});
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<PlannerEstimates> seen(4);
  std::vector<double> first_ratio(4), first_predicted(4), last_predicted(4);
  std::vector<float> results(4);
  world.run([&](Communicator& comm) {
    comm.compression()->set_policy(policy_from("rules:\n  - codec: auto\n"));
    std::vector<float> send(1 << 22, 1.0f), recv(send.size());
    const size_t r = static_cast<size_t>(comm.rank());
    double before = 0;
    for (int call = 0; call < 16; ++call) {
      ASSERT_EQ(comm.run(allreduce_args(send, &recv, "w")), ncclSuccess);
      const CompressionStats stats = comm.compression()->stats();
      const double seconds = stats.traffic.rows.at(0).seconds - before;
      before = stats.traffic.rows.at(0).seconds;
      if (call == 0) {
        first_ratio[r] = seconds / stats.last_call.predicted_seconds;
        first_predicted[r] = stats.last_call.predicted_seconds;
      }
      last_predicted[r] = stats.last_call.predicted_seconds;
    }
    seen[r] = comm.compression()->stats().planner;
    results[r] = recv[0];
  });
  const PlannerEstimates& first = seen[0];
  EXPECT_TRUE(first.learning);
  EXPECT_GE(first.agreements, 4u);  // at calls 2, 4, 8 and 16 at least
  EXPECT_EQ(first.intra.nominal_bytes_per_s, 125e9);
  // What moved: slower than told, the link or the additions.
  EXPECT_LT(first.intra.bytes_per_s / first.intra.nominal_bytes_per_s * first.reduce_bytes_per_s /
                first.nominal_reduce_bytes_per_s,
            0.5);
  for (size_t r = 0; r < seen.size(); ++r) {
    EXPECT_EQ(seen[r].intra.bytes_per_s, first.intra.bytes_per_s) << r;
    EXPECT_EQ(seen[r].intra.latency_s, first.intra.latency_s) << r;
    EXPECT_EQ(seen[r].reduce_bytes_per_s, first.reduce_bytes_per_s) << r;
    EXPECT_EQ(seen[r].agreements, first.agreements) << r;
    EXPECT_EQ(seen[r].plan_changes, first.plan_changes) << r;
    // The first call took more than twice its prediction; the last is predicted longer.
    EXPECT_GT(first_ratio[r], 2.0) << r;
    EXPECT_GT(last_predicted[r], 2 * first_predicted[r]) << r;
    EXPECT_EQ(last_predicted[r], last_predicted[0]) << r;
  }
  for (float result : results) EXPECT_NEAR(result, 4.0f, 0.05f);
}

TEST(CompressionEngine, UnknownSettingsAreRefusedAtCreation) {
  for (const auto& setting :
       std::vector<std::pair<std::string, std::string>>{{"TERSE_COMPRESSED_ALGO", "nosuch"},
                                                        {"TERSE_HIERARCHICAL", "sometimes"},
                                                        {"TERSE_CODEC", "int8:block=3"},
                                                        {"TERSE_MEMORY_MAX_BYTES", "plenty"},
                                                        {"TERSE_MEMORY_IDLE_STEPS", "-3"},
                                                        {"TERSE_PLANNER_LEARN", "maybe"}}) {
    CommunicatorWorld world(1, {setting});
    EXPECT_FALSE(world.ok()) << setting.first;
    EXPECT_NE(world.error().find(setting.first), std::string::npos) << world.error();
  }
}

}  // namespace
}  // namespace terse
