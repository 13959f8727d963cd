// The settings ranks must agree on (agreed_settings.h): their canonical values from the
// environment, and the comparison and sentence of settings_agreement.h. The refusal at init with
// ranks as processes is tested in tests/plugin/test_settings_agreement.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "collectives/agreed_settings.h"
#include "collectives/settings_agreement.h"
#include "common/result.h"
#include "transport_test_support.h"

namespace terse {
namespace {

using test::ScopedEnv;

// The settings as ranks compare them, whether or not one of them is refused.
std::vector<AgreedSetting> collect_agreed_settings() {
  CommSettings settings;
  std::vector<AgreedSetting> compared;
  read_comm_settings(&settings, &compared);
  return compared;
}

// The value this rank's environment gives `name` (fails the test when it does not parse).
std::string value_of(const std::string& name) {
  for (const AgreedSetting& setting : collect_agreed_settings()) {
    if (setting.name == name) return setting.value;
  }
  ADD_FAILURE() << name << " is not collected";
  return "";
}

std::string value_with(const char* name, const char* text) {
  ScopedEnv env(name, text);
  return value_of(name);
}

TEST(AgreedSettings, ListsEverySettingThatChangesWhichMessagesFlow) {
  const std::vector<AgreedSetting> settings = collect_agreed_settings();
  std::vector<std::string> names;
  for (const AgreedSetting& setting : settings) names.push_back(setting.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "TERSE_CODEC", "TERSE_POLICY", "TERSE_COMPRESSED_ALGO", "TERSE_HIERARCHICAL",
                       "TERSE_PLANNER_LEARN", "TERSE_COMPRESSED_PIECE_BYTES",
                       "TERSE_MEMORY_MAX_BYTES", "TERSE_MEMORY_IDLE_STEPS", "TERSE_ALGO",
                       "TERSE_PIECE_BYTES", "TERSE_UCX_ERROR_MODE"}));
}

// The typed values the communicator and its engine are made from, each from its variable.
TEST(AgreedSettings, EachSettingIsParsedIntoItsTypedValue) {
  {
    CommSettings settings;
    std::vector<AgreedSetting> compared;
    ASSERT_EQ(read_comm_settings(&settings, &compared), ncclSuccess) << last_error();
    EXPECT_TRUE(settings.compression.policy.rules().empty());
    EXPECT_EQ(settings.compression.planner.forced, nullptr);
    EXPECT_EQ(settings.compression.planner.hierarchy, HierarchyMode::kAuto);
    EXPECT_TRUE(settings.compression.planner.learn);
    EXPECT_EQ(settings.compression.planner.piece_bytes, size_t{256} << 10);
    EXPECT_EQ(settings.compression.planner.dense_forced, "");
    EXPECT_EQ(settings.compression.planner.dense_piece_bytes, size_t{1} << 20);
    EXPECT_EQ(settings.compression.memory_max_bytes, uint64_t{1} << 30);
    EXPECT_EQ(settings.compression.memory_idle_steps, 8u);
    EXPECT_EQ(settings.selection.forced(CollectiveKind::kAllReduce), nullptr);
    EXPECT_EQ(settings.piece_bytes, size_t{1} << 20);
    EXPECT_EQ(compared.size(), 11u);
  }
  ScopedEnv codec("TERSE_CODEC", "int8:block=64");
  ScopedEnv algorithm("TERSE_COMPRESSED_ALGO", "ring");
  ScopedEnv hierarchical("TERSE_HIERARCHICAL", "0");
  ScopedEnv learn("TERSE_PLANNER_LEARN", "off");
  ScopedEnv compressed_piece("TERSE_COMPRESSED_PIECE_BYTES", "64K");
  ScopedEnv max_bytes("TERSE_MEMORY_MAX_BYTES", "3M");
  ScopedEnv idle_steps("TERSE_MEMORY_IDLE_STEPS", "5");
  ScopedEnv dense("TERSE_ALGO", "allreduce:recursive_doubling");
  ScopedEnv piece("TERSE_PIECE_BYTES", "2M");
  ScopedEnv error_mode("TERSE_UCX_ERROR_MODE", "peer");
  CommSettings settings;
  std::vector<AgreedSetting> compared;
  ASSERT_EQ(read_comm_settings(&settings, &compared), ncclSuccess) << last_error();
  ASSERT_EQ(settings.compression.policy.rules().size(), 1u);
  EXPECT_EQ(settings.compression.policy.rules()[0].codec.name, "int8");
  EXPECT_NE(settings.compression.policy.rules()[0].codec.spec.find("block=64"), std::string::npos);
  ASSERT_NE(settings.compression.planner.forced, nullptr);
  EXPECT_STREQ(settings.compression.planner.forced->name, "ring");
  EXPECT_EQ(settings.compression.planner.hierarchy, HierarchyMode::kOff);
  EXPECT_FALSE(settings.compression.planner.learn);
  EXPECT_EQ(settings.compression.planner.piece_bytes, size_t{64} << 10);
  EXPECT_EQ(settings.compression.memory_max_bytes, uint64_t{3} << 20);
  EXPECT_EQ(settings.compression.memory_idle_steps, 5u);
  ASSERT_NE(settings.selection.forced(CollectiveKind::kAllReduce), nullptr);
  EXPECT_STREQ(settings.selection.forced(CollectiveKind::kAllReduce)->name, "recursive_doubling");
  EXPECT_EQ(settings.selection.forced(CollectiveKind::kAllGather), nullptr);
  EXPECT_EQ(settings.compression.planner.dense_forced, "recursive_doubling");
  EXPECT_EQ(settings.piece_bytes, size_t{2} << 20);
  EXPECT_EQ(settings.compression.planner.dense_piece_bytes, size_t{2} << 20);
  EXPECT_EQ(settings.ucx_error_mode, UcxErrorModeSetting::kPeer);
}

// The first refusal is the result, with its parser's message; the list stays complete.
TEST(AgreedSettings, TheFirstRefusalIsTheResultAndEverySettingIsStillListed) {
  ScopedEnv piece("TERSE_PIECE_BYTES", "0");
  ScopedEnv idle_steps("TERSE_MEMORY_IDLE_STEPS", "soon");
  CommSettings settings;
  std::vector<AgreedSetting> compared;
  EXPECT_EQ(read_comm_settings(&settings, &compared), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("TERSE_MEMORY_IDLE_STEPS=soon"), std::string::npos)
      << last_error();
  ASSERT_EQ(compared.size(), 11u);
  EXPECT_EQ(compared[9].name, "TERSE_PIECE_BYTES");
  EXPECT_NE(compared[9].value.find("TERSE_PIECE_BYTES is 0"), std::string::npos)
      << compared[9].value;
}

TEST(AgreedSettings, TwoSpellingsOfOneValueAgree) {
  EXPECT_EQ(value_with("TERSE_COMPRESSED_PIECE_BYTES", "1M"),
            value_with("TERSE_COMPRESSED_PIECE_BYTES", "1048576"));
  EXPECT_EQ(value_with("TERSE_COMPRESSED_PIECE_BYTES", "256K"),
            value_with("TERSE_COMPRESSED_PIECE_BYTES", nullptr));  // the default
  EXPECT_EQ(value_with("TERSE_PIECE_BYTES", "1M"), value_with("TERSE_PIECE_BYTES", ""));
  EXPECT_EQ(value_with("TERSE_MEMORY_MAX_BYTES", "1G"),
            value_with("TERSE_MEMORY_MAX_BYTES", "1073741824"));
  EXPECT_EQ(value_with("TERSE_CODEC", "int8"), value_with("TERSE_CODEC", "int8:block=256"));
  EXPECT_EQ(value_with("TERSE_HIERARCHICAL", "1"), value_with("TERSE_HIERARCHICAL", "on"));
  EXPECT_EQ(value_with("TERSE_HIERARCHICAL", "auto"), value_with("TERSE_HIERARCHICAL", nullptr));
  EXPECT_EQ(value_with("TERSE_PLANNER_LEARN", "1"), value_with("TERSE_PLANNER_LEARN", "on"));
  EXPECT_EQ(value_with("TERSE_PLANNER_LEARN", "on"), value_with("TERSE_PLANNER_LEARN", nullptr));
  EXPECT_NE(value_with("TERSE_PLANNER_LEARN", "0"), value_with("TERSE_PLANNER_LEARN", "1"));
  EXPECT_EQ(value_with("TERSE_ALGO", "ring"),
            value_with("TERSE_ALGO", "reducescatter:ring, allgather:ring,ALLREDUCE:ring"));
  EXPECT_EQ(value_with("TERSE_UCX_ERROR_MODE", "auto"),
            value_with("TERSE_UCX_ERROR_MODE", nullptr));
  EXPECT_EQ(value_with("TERSE_MEMORY_IDLE_STEPS", ""),
            value_with("TERSE_MEMORY_IDLE_STEPS", nullptr));
  EXPECT_EQ(value_with("TERSE_MEMORY_IDLE_STEPS", "8"),
            value_with("TERSE_MEMORY_IDLE_STEPS", nullptr));  // the default
  EXPECT_EQ(value_with("TERSE_MEMORY_IDLE_STEPS", "010"),
            value_with("TERSE_MEMORY_IDLE_STEPS", "10"));
  EXPECT_EQ(value_with("TERSE_CODEC", "sign;fallback=qsgd"),
            value_with("TERSE_CODEC", "sign:block=256;fallback=qsgd:levels=7"));
}

TEST(AgreedSettings, DifferentValuesDiffer) {
  EXPECT_NE(value_with("TERSE_COMPRESSED_PIECE_BYTES", "1M"),
            value_with("TERSE_COMPRESSED_PIECE_BYTES", "2M"));
  EXPECT_NE(value_with("TERSE_CODEC", "int8"), value_with("TERSE_CODEC", "int8:block=128"));
  EXPECT_NE(value_with("TERSE_CODEC", "int8"), value_with("TERSE_CODEC", nullptr));
  EXPECT_NE(value_with("TERSE_ALGO", "ring"), value_with("TERSE_ALGO", "allreduce:ring"));
  EXPECT_NE(value_with("TERSE_HIERARCHICAL", "on"), value_with("TERSE_HIERARCHICAL", "off"));
  EXPECT_NE(value_with("TERSE_UCX_ERROR_MODE", "peer"), value_with("TERSE_UCX_ERROR_MODE", "none"));
  EXPECT_NE(value_with("TERSE_MEMORY_IDLE_STEPS", "10"), value_with("TERSE_MEMORY_IDLE_STEPS", ""));
  EXPECT_NE(value_with("TERSE_CODEC", "sign;fallback=qsgd"), value_with("TERSE_CODEC", "sign"));
  EXPECT_NE(value_with("TERSE_COMPRESSED_ALGO", "ring"),
            value_with("TERSE_COMPRESSED_ALGO", "tree"));
}

TEST(AgreedSettings, APolicyFileIsComparedByItsContents) {
  char pattern[] = "/tmp/terse-policy-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string directory = pattern;
  const std::string a = directory + "/a.yaml", b = directory + "/b.yaml", c = directory + "/c.yaml";
  std::ofstream(a) << "rules:\n  - codec: int8\n";
  std::ofstream(b) << "rules:\n  - codec: int8\n";
  std::ofstream(c) << "rules:\n  - codec: int4\n";
  const std::string value_a = value_with("TERSE_POLICY", a.c_str());
  EXPECT_EQ(value_a, value_with("TERSE_POLICY", b.c_str()));
  EXPECT_NE(value_a, value_with("TERSE_POLICY", c.c_str()));
  EXPECT_NE(value_a, value_with("TERSE_POLICY", nullptr));
  {
    ScopedEnv policy("TERSE_POLICY", a.c_str());
    const std::vector<AgreedSetting> settings = collect_agreed_settings();
    EXPECT_EQ(settings[1].shown, "\"" + a + "\" (" + value_a + ")");
  }
  for (const std::string& file : {a, b, c}) unlink(file.c_str());
  rmdir(directory.c_str());
}

// A value that does not parse takes part as its refusal: it differs from every good value, and
// says why (the parser's message names the variable), so the peers of a rank with a typo refuse
// with it instead of waiting for it.
TEST(AgreedSettings, AValueThatDoesNotParseIsComparedAsItsRefusal) {
  const char* bad[][2] = {
      {"TERSE_HIERARCHICAL", "sideways"},    {"TERSE_COMPRESSED_PIECE_BYTES", "lots"},
      {"TERSE_PIECE_BYTES", "-1"},           {"TERSE_CODEC", "int9"},
      {"TERSE_COMPRESSED_ALGO", "teleport"}, {"TERSE_ALGO", "allreduce:teleport"},
      {"TERSE_UCX_ERROR_MODE", "maybe"},     {"TERSE_POLICY", "/nonexistent/policy.yaml"},
      {"TERSE_MEMORY_MAX_BYTES", "plenty"},  {"TERSE_MEMORY_IDLE_STEPS", "soon"},
      {"TERSE_MEMORY_IDLE_STEPS", "-1"},     {"TERSE_CODEC", "sign;fallback=topk"}};
  for (const auto& [name, text] : bad) {
    const std::string good = value_of(name);
    ScopedEnv env(name, text);
    bool found = false;
    for (const AgreedSetting& setting : collect_agreed_settings()) {
      if (setting.name != name) continue;
      found = true;
      EXPECT_NE(setting.value, good) << name << "=" << text;
      EXPECT_EQ(setting.value.rfind("refused: ", 0), 0u) << setting.value;
      EXPECT_NE(setting.value.find(name), std::string::npos) << setting.value;
      EXPECT_NE(setting.shown.find(std::string("\"") + text + "\", which does not parse"),
                std::string::npos)
          << setting.shown;
    }
    EXPECT_TRUE(found) << name;
  }
}

TEST(AgreedSettings, ShowsWhatWasWrittenAndWhatItMeans) {
  EXPECT_EQ(make_agreed_setting("TERSE_PIECE_BYTES", "1M", "1048576").shown, "\"1M\" (1048576)");
  EXPECT_EQ(make_agreed_setting("TERSE_PIECE_BYTES", "1048576", "1048576").shown, "\"1048576\"");
  EXPECT_EQ(make_agreed_setting("TERSE_PIECE_BYTES", "", "1048576").shown,
            "it unset (default 1048576)");
  EXPECT_EQ(make_agreed_setting("TERSE_CODEC", "", "").shown, "it unset");
}

TEST(AgreedSettings, LongTextsAreShortenedButStillCompare) {
  const std::string a(500, 'a'), b = std::string(499, 'a') + "b";
  const AgreedSetting long_a = make_agreed_setting("TERSE_MEMORY_IDLE_STEPS", a, a);
  const AgreedSetting long_b = make_agreed_setting("TERSE_MEMORY_IDLE_STEPS", b, b);
  EXPECT_LT(long_a.value.size(), 150u);
  EXPECT_LT(long_a.shown.size(), 300u);
  EXPECT_NE(long_a.value, long_b.value);
  EXPECT_EQ(long_a.value, make_agreed_setting("TERSE_MEMORY_IDLE_STEPS", a, a).value);
}

// Rank r's settings: `name` with `values[r]`, shown as written.
std::vector<std::vector<AgreedSetting>> ranks_with(const std::string& name,
                                                   const std::vector<std::string>& values) {
  std::vector<std::vector<AgreedSetting>> by_rank;
  for (const std::string& value : values) {
    by_rank.push_back(
        {make_agreed_setting("TERSE_ALGO", "", ""), make_agreed_setting(name, value, value)});
  }
  return by_rank;
}

TEST(SettingsAgreement, EqualSettingsSayNothing) {
  EXPECT_EQ(describe_disagreement(ranks_with("TERSE_CODEC", {"int8", "int8", "int8"})), "");
  EXPECT_EQ(describe_disagreement(ranks_with("TERSE_CODEC", {"int8"})), "");
  EXPECT_EQ(describe_disagreement({}), "");
}

TEST(SettingsAgreement, NamesTheVariableItsValuesAndTheirRanks) {
  EXPECT_EQ(describe_disagreement(ranks_with("TERSE_CODEC", {"int8", "int8", "sign"})),
            "TERSE_CODEC differs across ranks: ranks 0-1 have \"int8\", rank 2 has \"sign\"; "
            "every rank must set the same value");
  EXPECT_EQ(describe_disagreement(ranks_with("TERSE_CODEC", {"sign", "int8", "sign", "sign"})),
            "TERSE_CODEC differs across ranks: ranks 0,2-3 have \"sign\", rank 1 has \"int8\"; "
            "every rank must set the same value");
}

TEST(SettingsAgreement, ComparesValuesNotSpellings) {
  std::vector<std::vector<AgreedSetting>> by_rank = {
      {make_agreed_setting("TERSE_PIECE_BYTES", "1M", "1048576")},
      {make_agreed_setting("TERSE_PIECE_BYTES", "1048576", "1048576")},
      {make_agreed_setting("TERSE_PIECE_BYTES", "", "1048576")}};
  EXPECT_EQ(describe_disagreement(by_rank), "");
  by_rank.push_back({make_agreed_setting("TERSE_PIECE_BYTES", "2M", "2097152")});
  EXPECT_EQ(describe_disagreement(by_rank),
            "TERSE_PIECE_BYTES differs across ranks: ranks 0-2 have \"1M\" (1048576), rank 3 has "
            "\"2M\" (2097152); every rank must set the same value");
}

TEST(SettingsAgreement, NamesTheOtherSettingsThatDifferToo) {
  std::vector<std::vector<AgreedSetting>> by_rank = {
      {make_agreed_setting("TERSE_CODEC", "int8", "int8"),
       make_agreed_setting("TERSE_ALGO", "ring", "ring"),
       make_agreed_setting("TERSE_PIECE_BYTES", "1", "1")},
      {make_agreed_setting("TERSE_CODEC", "sign", "sign"),
       make_agreed_setting("TERSE_ALGO", "", ""),
       make_agreed_setting("TERSE_PIECE_BYTES", "2", "2")}};
  const std::string sentence = describe_disagreement(by_rank);
  EXPECT_EQ(sentence.find("TERSE_CODEC differs across ranks: rank 0 has \"int8\", rank 1 has "
                          "\"sign\"; every rank must set the same value"),
            0u)
      << sentence;
  EXPECT_NE(sentence.find("(also differing: TERSE_ALGO, TERSE_PIECE_BYTES)"), std::string::npos)
      << sentence;
}

TEST(SettingsAgreement, ASettingOneRankDoesNotKnowDiffers) {
  std::vector<std::vector<AgreedSetting>> by_rank = ranks_with("TERSE_CODEC", {"int8", "int8"});
  by_rank[1].pop_back();
  EXPECT_EQ(describe_disagreement(by_rank),
            "TERSE_CODEC differs across ranks: rank 0 has \"int8\", rank 1 has no such setting "
            "(another version of terse?); every rank must set the same value");
}

TEST(SettingsAgreement, ManyRanksAndValuesStayWithinAMessage) {
  std::vector<std::string> values;
  for (int rank = 0; rank < 1000; ++rank) values.push_back(std::to_string(rank % 7 * 1000));
  const std::string sentence = describe_disagreement(ranks_with("TERSE_PIECE_BYTES", values));
  EXPECT_EQ(sentence.find("TERSE_PIECE_BYTES differs across ranks: ranks 0,7,14,21,28,35,42,49,..."
                          " have \"0\""),
            0u)
      << sentence;
  EXPECT_NE(sentence.find(", and 4 more values; every rank must set the same value"),
            std::string::npos)
      << sentence;
  EXPECT_LT(sentence.size(), 1000u);
}

TEST(SettingsAgreement, EncodingRoundTrips) {
  std::vector<AgreedSetting> settings = collect_agreed_settings();
  settings.push_back(make_agreed_setting("TERSE_CODEC", "int8", "int8:block=256"));
  const std::string encoded = encode_settings(settings);
  const std::vector<AgreedSetting> decoded = decode_settings(encoded);
  ASSERT_EQ(decoded.size(), settings.size());
  for (size_t i = 0; i < settings.size(); ++i) {
    EXPECT_EQ(decoded[i].name, settings[i].name);
    EXPECT_EQ(decoded[i].value, settings[i].value);
    EXPECT_EQ(decoded[i].shown, settings[i].shown);
  }
  EXPECT_LT(encoded.size(), kMaxEncodedSettingsBytes);
  // A cut encoding loses its incomplete last setting, and nothing is read past its end.
  EXPECT_EQ(decode_settings(encoded.substr(0, encoded.size() - 1)).size(), settings.size() - 1);
  EXPECT_TRUE(decode_settings("").empty());
  EXPECT_TRUE(decode_settings(std::string("no terminator")).empty());
}

}  // namespace
}  // namespace terse
