// Ranks whose environments disagree on a setting that changes which messages flow are refused
// at communicator creation, on every rank, at once: ncclInvalidUsage and an ncclGetLastError
// that names the variable, instead of a hang until TERSE_TIMEOUT_S. Ranks are processes
// (plugin_rank_process, scenario "init-result"), each started through /usr/bin/env with its own
// values; equal values, however spelled, are accepted.
#include <gtest/gtest.h>
#include <nccl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "rank_process/plugin_rank_protocol.h"
#include "rank_processes.h"
#include "transport_test_support.h"

namespace {

using terse::test::CommandLine;
using terse::test::RankProcessResult;
using terse::test::ScopedEnv;

constexpr int kRanks = 3;
// TERSE_TIMEOUT_S for the ranks: a rank that hangs instead of being refused shows as one that
// took about this long.
constexpr const char* kRankTimeout = "20";
// A refusal must come well before the timeout: it needs no waiting for anyone.
constexpr double kRefusalSeconds = 10;
constexpr double kSecondsAllowed = 60;

// The environment of one rank: `name` set to `value`, or unset when `value` is null. Extra
// assignments ("NAME=value") follow.
CommandLine rank_command(const char* name, const char* value, int rank, const std::string& id,
                         const std::vector<std::string>& extra = {}) {
  CommandLine command = {"/usr/bin/env"};
  if (value == nullptr) {
    command.insert(command.end(), {"-u", name});
  } else {
    command.push_back(std::string(name) + "=" + value);
  }
  command.insert(command.end(), extra.begin(), extra.end());
  command.insert(command.end(), {TERSE_PLUGIN_RANK_PROCESS_PATH, plugin_test::kScenarioInitResult,
                                 std::to_string(rank), std::to_string(kRanks), id});
  return command;
}

// What a rank printed after "<what> result: " or "<what> message: " (the scenario's lines).
std::string printed(const RankProcessResult& result, const std::string& prefix) {
  const size_t at = result.output.find(prefix);
  if (at == std::string::npos) return "(not printed)";
  const size_t start = at + prefix.size();
  return result.output.substr(start, result.output.find('\n', start) - start);
}

int result_code(const RankProcessResult& result, const char* what) {
  const std::string text = printed(result, std::string(what) + " result: ");
  return text == "(not printed)" ? -1 : atoi(text.c_str());
}

std::string message(const RankProcessResult& result, const char* what) {
  return printed(result, std::string(what) + " message: ");
}

class SettingsAgreement : public ::testing::Test {
 protected:
  static std::string new_id() {
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
    return plugin_test::unique_id_to_hex(id);
  }

  // Ranks 0 to kRanks - 2 with `most`, the last rank with `last` (null: unset).
  static std::vector<RankProcessResult> run_ranks(const char* name, const char* most,
                                                  const char* last) {
    const std::string id = new_id();
    std::vector<CommandLine> ranks;
    for (int rank = 0; rank < kRanks; ++rank) {
      ranks.push_back(rank_command(name, rank == kRanks - 1 ? last : most, rank, id));
    }
    return terse::test::run_processes(ranks, kSecondsAllowed);
  }

  // Every rank refused, in time, with a sentence naming `name`.
  static void expect_refused(const std::vector<RankProcessResult>& results, const char* name) {
    ASSERT_EQ(results.size(), static_cast<size_t>(kRanks));
    for (const RankProcessResult& result : results) {
      EXPECT_TRUE(result.exited && result.exit_code == plugin_test::kPluginRankOk)
          << describe(result);
      EXPECT_LT(result.seconds, kRefusalSeconds) << describe(result);
      EXPECT_EQ(result_code(result, "init"), static_cast<int>(ncclInvalidUsage))
          << describe(result);
      EXPECT_NE(message(result, "init").find(std::string(name) + " differs across ranks"),
                std::string::npos)
          << describe(result);
    }
  }

  static void expect_accepted(const std::vector<RankProcessResult>& results) {
    ASSERT_EQ(results.size(), static_cast<size_t>(kRanks));
    for (const RankProcessResult& result : results) {
      EXPECT_TRUE(result.exited && result.exit_code == plugin_test::kPluginRankOk)
          << describe(result);
      EXPECT_EQ(result_code(result, "init"), static_cast<int>(ncclSuccess)) << describe(result);
      EXPECT_EQ(result_code(result, "split"), static_cast<int>(ncclSuccess)) << describe(result);
    }
  }

  ScopedEnv ifname_{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family_{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv terse_comm_id_{"TERSE_COMM_ID", nullptr};
  ScopedEnv nccl_comm_id_{"NCCL_COMM_ID", nullptr};
  ScopedEnv timeout_{"TERSE_TIMEOUT_S", kRankTimeout};
  ScopedEnv hostid_{"TERSE_HOSTID", nullptr};
  ScopedEnv split_env_{"PLUGIN_TEST_SPLIT_ENV", nullptr};
  ScopedEnv init_call_{"PLUGIN_TEST_INIT_CALL", nullptr};
  // Every agreed setting starts unset; each test sets what it compares.
  ScopedEnv codec_{"TERSE_CODEC", nullptr};
  ScopedEnv policy_{"TERSE_POLICY", nullptr};
  ScopedEnv compressed_algo_{"TERSE_COMPRESSED_ALGO", nullptr};
  ScopedEnv hierarchical_{"TERSE_HIERARCHICAL", nullptr};
  ScopedEnv compressed_piece_{"TERSE_COMPRESSED_PIECE_BYTES", nullptr};
  ScopedEnv memory_max_{"TERSE_MEMORY_MAX_BYTES", nullptr};
  ScopedEnv memory_idle_{"TERSE_MEMORY_IDLE_STEPS", nullptr};
  ScopedEnv algo_{"TERSE_ALGO", nullptr};
  ScopedEnv piece_{"TERSE_PIECE_BYTES", nullptr};
  ScopedEnv error_mode_{"TERSE_UCX_ERROR_MODE", nullptr};
};

// One setting, two values: what the first ranks have and what the last has (null: unset), and
// what the sentence shows of the last one.
struct SettingValues {
  const char* name;
  const char* most;
  const char* last;
  const char* last_shown;
};

void PrintTo(const SettingValues& values, std::ostream* out) {
  *out << values.name << ": " << (values.most ? values.most : "(unset)") << " on the first ranks, "
       << (values.last ? values.last : "(unset)") << " on the last";
}

class DifferingSetting : public SettingsAgreement,
                         public ::testing::WithParamInterface<SettingValues> {};

TEST_P(DifferingSetting, IsRefusedOnEveryRankAtInit) {
  const SettingValues& values = GetParam();
  const std::vector<RankProcessResult> results = run_ranks(values.name, values.most, values.last);
  expect_refused(results, values.name);
  // Every rank decided from the same data: the same sentence everywhere, naming both values.
  for (const RankProcessResult& result : results) {
    EXPECT_EQ(message(result, "init"), message(results[0], "init"));
    EXPECT_NE(message(result, "init").find(std::string("rank 2 has ") + values.last_shown),
              std::string::npos)
        << message(result, "init");
    EXPECT_NE(message(result, "init").find("ranks 0-1 have "), std::string::npos)
        << message(result, "init");
  }
}

INSTANTIATE_TEST_SUITE_P(
    EverySetting, DifferingSetting,
    ::testing::Values(SettingValues{"TERSE_CODEC", "int8", "sign", "\"sign\""},
                      SettingValues{"TERSE_CODEC", nullptr, "int8", "\"int8\""},
                      SettingValues{"TERSE_COMPRESSED_ALGO", "ring", "tree", "\"tree\""},
                      SettingValues{"TERSE_HIERARCHICAL", "on", "off", "\"off\""},
                      SettingValues{"TERSE_COMPRESSED_PIECE_BYTES", "1M", "2M", "\"2M\" (2097152)"},
                      SettingValues{"TERSE_MEMORY_MAX_BYTES", "512M", nullptr,
                                    "it unset (default 1073741824)"},
                      SettingValues{"TERSE_MEMORY_IDLE_STEPS", "10", "20", "\"20\""},
                      SettingValues{"TERSE_ALGO", "allreduce:ring", "allreduce:recursive_doubling",
                                    "\"allreduce:recursive_doubling\""},
                      SettingValues{"TERSE_PIECE_BYTES", "1M", "512K", "\"512K\" (524288)"},
                      SettingValues{"TERSE_UCX_ERROR_MODE", nullptr, "peer", "\"peer\""}),
    [](const ::testing::TestParamInfo<SettingValues>& info) {
      return std::string(info.param.name).substr(6) + (info.param.most ? "" : "_unset_on_most");
    });

class AgreeingSetting : public SettingsAgreement,
                        public ::testing::WithParamInterface<SettingValues> {};

TEST_P(AgreeingSetting, IsAcceptedHoweverSpelled) {
  const SettingValues& values = GetParam();
  expect_accepted(run_ranks(values.name, values.most, values.last));
}

INSTANTIATE_TEST_SUITE_P(
    Spellings, AgreeingSetting,
    ::testing::Values(
        SettingValues{"TERSE_COMPRESSED_PIECE_BYTES", "1M", "1048576", ""},
        SettingValues{"TERSE_PIECE_BYTES", "1048576", nullptr, ""},  // the default, spelled out
        SettingValues{"TERSE_CODEC", "int8", "int8:block=256", ""},
        SettingValues{"TERSE_HIERARCHICAL", "on", "1", ""},
        SettingValues{"TERSE_ALGO", "ring", "allreduce:ring,allgather:ring,reducescatter:ring", ""},
        SettingValues{"TERSE_MEMORY_IDLE_STEPS", "", nullptr, ""}),  // empty is unset
    [](const ::testing::TestParamInfo<SettingValues>& info) {
      return std::string(info.param.name).substr(6);
    });

// A fallback is part of TERSE_CODEC's value; an idle-step count is compared as a number.
INSTANTIATE_TEST_SUITE_P(Fallback, DifferingSetting,
                         ::testing::Values(SettingValues{"TERSE_CODEC", "sign;fallback=qsgd",
                                                         "sign", "\"sign\""}));
// A typo on one rank: it is compared as its refusal, so every rank refuses at once, naming the
// variable (before, that rank gave up before the exchange and its peers waited for it until
// TERSE_TIMEOUT_S).
INSTANTIATE_TEST_SUITE_P(TypoOnOneRank, DifferingSetting,
                         ::testing::Values(SettingValues{"TERSE_CODEC", "int8", "int9",
                                                         "\"int9\", which does not parse"},
                                           SettingValues{"TERSE_COMPRESSED_PIECE_BYTES", "1M",
                                                         "lots", "\"lots\", which does not parse"},
                                           SettingValues{
                                               "TERSE_ALGO", "allreduce:ring", "allreduce:teleport",
                                               "\"allreduce:teleport\", which does not parse"},
                                           SettingValues{"TERSE_MEMORY_IDLE_STEPS", "8", "soon",
                                                         "\"soon\", which does not parse"}),
                         [](const ::testing::TestParamInfo<SettingValues>& info) {
                           return std::string(info.param.name).substr(6);
                         });

// The same typo on every rank: they agree, and each refuses it where it is read, at once, with
// the parser's message.
TEST_F(SettingsAgreement, ATypoOnEveryRankIsRefusedOnEveryRankByItsParser) {
  const std::vector<RankProcessResult> results = run_ranks("TERSE_CODEC", "int9", "int9");
  ASSERT_EQ(results.size(), static_cast<size_t>(kRanks));
  for (const RankProcessResult& result : results) {
    EXPECT_LT(result.seconds, kRefusalSeconds) << describe(result);
    EXPECT_EQ(result_code(result, "init"), static_cast<int>(ncclInvalidArgument))
        << describe(result);
    EXPECT_NE(message(result, "init").find("unknown codec 'int9'"), std::string::npos)
        << describe(result);
  }
}

INSTANTIATE_TEST_SUITE_P(DefaultSpelledOut, AgreeingSetting,
                         ::testing::Values(SettingValues{"TERSE_MEMORY_IDLE_STEPS", "8", nullptr,
                                                         ""}));

TEST_F(SettingsAgreement, AllEqualSettingsAreAccepted) {
  ScopedEnv codec("TERSE_CODEC", "int8");
  ScopedEnv compressed_algo("TERSE_COMPRESSED_ALGO", "ring");
  ScopedEnv hierarchical("TERSE_HIERARCHICAL", "off");
  ScopedEnv compressed_piece("TERSE_COMPRESSED_PIECE_BYTES", "128K");
  ScopedEnv memory_max("TERSE_MEMORY_MAX_BYTES", "256M");
  ScopedEnv memory_idle("TERSE_MEMORY_IDLE_STEPS", "100");
  ScopedEnv algo("TERSE_ALGO", "broadcast:chain");
  ScopedEnv piece("TERSE_PIECE_BYTES", "512K");
  ScopedEnv error_mode("TERSE_UCX_ERROR_MODE", "auto");
  // Every variable inherited alike; the one on the command line is the same as well.
  expect_accepted(run_ranks("TERSE_CODEC", "int8", "int8"));
}

TEST_F(SettingsAgreement, AllDefaultSettingsAreAccepted) {
  expect_accepted(run_ranks("TERSE_CODEC", nullptr, nullptr));
}

// The settings of ncclCommInitRankConfig's and a group's ncclCommInitRank are compared alike.
class DifferingSettingThroughInitCall : public SettingsAgreement,
                                        public ::testing::WithParamInterface<const char*> {};

TEST_P(DifferingSettingThroughInitCall, IsRefusedOnEveryRank) {
  ScopedEnv init_call("PLUGIN_TEST_INIT_CALL", GetParam());
  expect_refused(run_ranks("TERSE_CODEC", "int8", "sign"), "TERSE_CODEC");
}

INSTANTIATE_TEST_SUITE_P(InitCalls, DifferingSettingThroughInitCall,
                         ::testing::Values("config", "group"));

// ncclCommSplit's child compares its members' settings when it is created: here the last rank
// changed TERSE_CODEC after the parent was made. The parent keeps working.
TEST_F(SettingsAgreement, ASplitWhoseMembersDifferIsRefusedOnEveryRank) {
  const std::string id = new_id();
  std::vector<CommandLine> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    std::vector<std::string> extra;
    if (rank == kRanks - 1) extra.push_back("PLUGIN_TEST_SPLIT_ENV=TERSE_CODEC=sign");
    ranks.push_back(rank_command("TERSE_CODEC", nullptr, rank, id, extra));
  }
  const std::vector<RankProcessResult> results = terse::test::run_processes(ranks, kSecondsAllowed);
  ASSERT_EQ(results.size(), static_cast<size_t>(kRanks));
  for (const RankProcessResult& result : results) {
    EXPECT_TRUE(result.exited && result.exit_code == plugin_test::kPluginRankOk)
        << describe(result);
    EXPECT_LT(result.seconds, kRefusalSeconds) << describe(result);
    EXPECT_EQ(result_code(result, "init"), static_cast<int>(ncclSuccess)) << describe(result);
    EXPECT_EQ(result_code(result, "split"), static_cast<int>(ncclInvalidUsage)) << describe(result);
    EXPECT_NE(message(result, "split").find("TERSE_CODEC differs across ranks"), std::string::npos)
        << describe(result);
  }
}

// TERSE_POLICY compares the files' contents: different rules are refused (the sentence shows
// each rank's path), the same rules at two paths are accepted.
class PolicyFiles : public SettingsAgreement {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/terse-policy-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    write("int8.yaml", "rules:\n  - codec: int8\n");
    write("int8-copy.yaml", "rules:\n  - codec: int8\n");
    write("sign.yaml", "rules:\n  - codec: sign\n");
  }
  void TearDown() override {
    for (const char* file : {"int8.yaml", "int8-copy.yaml", "sign.yaml"}) {
      unlink(path(file).c_str());
    }
    rmdir(directory_.c_str());
  }
  std::string path(const char* file) const { return directory_ + "/" + file; }
  void write(const char* file, const char* text) const { std::ofstream(path(file)) << text; }

  std::string directory_;
};

TEST_F(PolicyFiles, DifferentContentsAreRefused) {
  const std::vector<RankProcessResult> results =
      run_ranks("TERSE_POLICY", path("int8.yaml").c_str(), path("sign.yaml").c_str());
  expect_refused(results, "TERSE_POLICY");
  for (const RankProcessResult& result : results) {
    EXPECT_NE(message(result, "init").find("rank 2 has \"" + path("sign.yaml") + "\""),
              std::string::npos)
        << message(result, "init");
  }
}

TEST_F(PolicyFiles, EqualContentsAtDifferentPathsAreAccepted) {
  expect_accepted(
      run_ranks("TERSE_POLICY", path("int8.yaml").c_str(), path("int8-copy.yaml").c_str()));
}

}  // namespace
