// How the environment decides the launch: alone, under mpirun, or torchrun style.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "perf/nccl_tests/launch_plan.h"

namespace terse {
namespace perf {
namespace {

EnvironmentLookup environment(const std::map<std::string, std::string>& values) {
  return [values](const char* name) -> const char* {
    auto found = values.find(name);
    return found == values.end() ? nullptr : found->second.c_str();
  };
}

TEST(PerfLaunchPlan, NoLauncherMeansOneProcess) {
  LaunchPlan plan;
  std::string error;
  ASSERT_TRUE(plan_launch(environment({}), true, &plan, &error)) << error;
  EXPECT_EQ(plan.launcher, Launcher::kThreads);
  EXPECT_EQ(plan.processes, 1);
  EXPECT_EQ(plan.process, 0);
}

TEST(PerfLaunchPlan, OpenMpiOrPmi) {
  LaunchPlan plan;
  std::string error;
  ASSERT_TRUE(
      plan_launch(environment({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}),
                  true, &plan, &error))
      << error;
  EXPECT_EQ(plan.launcher, Launcher::kMpi);
  EXPECT_EQ(plan.processes, 4);
  EXPECT_EQ(plan.local_rank, 1);
  ASSERT_TRUE(plan_launch(environment({{"PMI_SIZE", "2"}}), true, &plan, &error)) << error;
  EXPECT_EQ(plan.launcher, Launcher::kMpi);
  // MPI wins over torchrun variables (mpirun may export RANK-like variables of its own).
  ASSERT_TRUE(
      plan_launch(environment({{"OMPI_COMM_WORLD_SIZE", "2"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}}),
                  true, &plan, &error));
  EXPECT_EQ(plan.launcher, Launcher::kMpi);
}

TEST(PerfLaunchPlan, MpiLaunchWithoutMpiBuildIsRefused) {
  LaunchPlan plan;
  std::string error;
  EXPECT_FALSE(plan_launch(environment({{"OMPI_COMM_WORLD_SIZE", "2"}}), false, &plan, &error));
  EXPECT_NE(error.find("built without MPI"), std::string::npos) << error;
  // One process needs nothing from MPI.
  EXPECT_TRUE(plan_launch(environment({{"OMPI_COMM_WORLD_SIZE", "1"}}), false, &plan, &error));
  EXPECT_EQ(plan.launcher, Launcher::kThreads);
}

TEST(PerfLaunchPlan, TorchrunStyle) {
  LaunchPlan plan;
  std::string error;
  ASSERT_TRUE(plan_launch(environment({{"RANK", "1"},
                                       {"WORLD_SIZE", "2"},
                                       {"LOCAL_RANK", "1"},
                                       {"MASTER_ADDR", "127.0.0.1"},
                                       {"MASTER_PORT", "29500"}}),
                          true, &plan, &error))
      << error;
  EXPECT_EQ(plan.launcher, Launcher::kTorchrun);
  EXPECT_EQ(plan.process, 1);
  EXPECT_EQ(plan.processes, 2);
  EXPECT_EQ(plan.local_rank, 1);
  EXPECT_EQ(plan.comm_id, "127.0.0.1:29501");  // MASTER_PORT + 1
}

TEST(PerfLaunchPlan, TorchrunIpv6AddressGetsBrackets) {
  LaunchPlan plan;
  std::string error;
  ASSERT_TRUE(plan_launch(environment({{"RANK", "0"},
                                       {"WORLD_SIZE", "2"},
                                       {"MASTER_ADDR", "fd00::1"},
                                       {"MASTER_PORT", "29500"}}),
                          true, &plan, &error));
  EXPECT_EQ(plan.comm_id, "[fd00::1]:29501");
}

TEST(PerfLaunchPlan, AnExistingCommIdWins) {
  LaunchPlan plan;
  std::string error;
  ASSERT_TRUE(plan_launch(environment({{"RANK", "0"},
                                       {"WORLD_SIZE", "2"},
                                       {"MASTER_ADDR", "10.0.0.1"},
                                       {"MASTER_PORT", "29500"},
                                       {"TERSE_COMM_ID", "10.0.0.1:4000"}}),
                          true, &plan, &error));
  EXPECT_EQ(plan.launcher, Launcher::kTorchrun);
  EXPECT_EQ(plan.comm_id, "");
}

TEST(PerfLaunchPlan, IncompleteTorchrunEnvironmentsAreRefused) {
  LaunchPlan plan;
  std::string error;
  EXPECT_FALSE(plan_launch(environment({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}),
                           true, &plan, &error));
  EXPECT_NE(error.find("MASTER_ADDR is not set"), std::string::npos) << error;
  EXPECT_FALSE(plan_launch(environment({{"RANK", "0"},
                                        {"WORLD_SIZE", "2"},
                                        {"MASTER_ADDR", "127.0.0.1"},
                                        {"MASTER_PORT", "65535"}}),
                           true, &plan, &error));
  EXPECT_NE(error.find("MASTER_PORT=65535"), std::string::npos) << error;
  EXPECT_FALSE(plan_launch(environment({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), true, &plan, &error));
  EXPECT_NE(error.find("RANK=2 is outside WORLD_SIZE=2"), std::string::npos) << error;
  EXPECT_FALSE(plan_launch(environment({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), true, &plan, &error));
  EXPECT_NE(error.find("RANK=x is not a whole number"), std::string::npos) << error;
  EXPECT_FALSE(plan_launch(environment({{"RANK", "0"}}), true, &plan, &error));
  EXPECT_NE(error.find("together"), std::string::npos) << error;
  // WORLD_SIZE=1 is one process, whatever else is missing.
  EXPECT_TRUE(plan_launch(environment({{"RANK", "0"}, {"WORLD_SIZE", "1"}}), true, &plan, &error));
  EXPECT_EQ(plan.launcher, Launcher::kThreads);
}

}  // namespace
}  // namespace perf
}  // namespace terse
