// The compression engine's bookkeeping of tensors that are gone: a long run's names and buffers
// come and go (phases, renamed tensors, anonymous buffers at new addresses), and the engine
// forgets a tensor not reduced for CompressionEngine::kForgetIdleSteps communicator steps, so
// what it keeps per tensor (its step, its first-decision log, its refusal note) does not grow
// with them. perf/soak.sh found the growth: 200-400 bytes of heap per name ever used, up to
// 65,536 names per communicator. Ranks as threads over the real transport.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/compressed/policy/policy.h"
#include "communicator_test_support.h"

namespace terse {
namespace {

using test::CommunicatorWorld;

CollectiveArgs named_allreduce(const std::vector<float>& send, std::vector<float>* recv,
                               const std::string& name) {
  CollectiveArgs args;
  args.kind = CollectiveKind::kAllReduce;
  args.send = send.data();
  args.recv = recv->data();
  args.count = send.size();
  args.type = ncclFloat32;
  auto tensor = std::make_shared<TensorRequest>();
  tensor->name = name;
  args.tensor = tensor;
  return args;
}

void set_policy(Communicator& comm, const char* yaml) {
  Policy policy;
  ASSERT_EQ(Policy::from_yaml(yaml, "test", &policy), ncclSuccess);
  comm.compression()->set_policy(std::move(policy));
}

constexpr uint64_t kHorizon = CompressionEngine::kForgetIdleSteps;

TEST(ForgottenTensors, ANewNameEveryStepKeepsTheBookkeepingBounded) {
  CommunicatorWorld world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](Communicator& comm) {
    set_policy(comm, "rules:\n  - codec: none\n");  // every call planned, none compressed
    std::vector<float> send(4, 1.0f), recv(4);
    const uint64_t steps = 3 * kHorizon;
    for (uint64_t step = 0; step < steps; ++step) {
      // "stable" moves the communicator's step; each "phase.<step>" is used once, then gone.
      ASSERT_EQ(comm.run(named_allreduce(send, &recv, "stable")), ncclSuccess);
      ASSERT_EQ(comm.run(named_allreduce(send, &recv, "phase." + std::to_string(step))),
                ncclSuccess);
    }
    // Before: every name ever used (3,073 here). Now: those of the last horizon and a sweep.
    EXPECT_LE(comm.compression()->tracked_tensors(), kHorizon + 64 + 2);
    EXPECT_GE(comm.compression()->tracked_tensors(), kHorizon);
    EXPECT_EQ(recv[0], 2.0f);
  });
}

TEST(ForgottenTensors, ATensorKeepsItsStepUntilItIsGoneForTheHorizon) {
  CommunicatorWorld world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](Communicator& comm) {
    set_policy(comm, "rules:\n  - codec: int8\n");
    std::vector<float> send(64, 0.5f), recv(64);
    const auto step_of_call = [&](const std::string& name) {
      EXPECT_EQ(comm.run(named_allreduce(send, &recv, name)), ncclSuccess);
      return comm.compression()->stats().last_call.step;
    };
    EXPECT_EQ(step_of_call("returning"), 0u);
    uint64_t step = 0;
    for (; step < kHorizon / 2; ++step) step_of_call("stable");
    // Away for less than the horizon: its step goes on.
    EXPECT_EQ(step_of_call("returning"), 1u);
    for (; step < 3 * kHorizon; ++step) step_of_call("stable");
    // Away for longer: forgotten, it starts again at step 0, alike on every rank.
    EXPECT_EQ(step_of_call("returning"), 0u);
    EXPECT_EQ(step_of_call("returning"), 1u);
    EXPECT_EQ(step_of_call("stable"), 3 * kHorizon);
    EXPECT_EQ(recv[0], 1.0f);
  });
}

}  // namespace
}  // namespace terse
