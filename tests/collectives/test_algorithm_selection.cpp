// The algorithm table and TERSE_ALGO (algorithm_selection.h): rows are unique, every collective
// but allreduce has its algorithms here (allreduce's own tests cover its rows), defaults follow
// the rows' byte ranges, and overrides are parsed strictly.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "collectives/algorithm_selection.h"
#include "collectives/algorithm_table.h"
#include "common/result.h"

namespace terse {
namespace {

using K = CollectiveKind;

CollectiveArgs sized(K kind, size_t count, ncclDataType_t type = ncclInt8) {
  CollectiveArgs args;
  args.kind = kind;
  args.count = count;
  args.type = type;
  return args;
}

TEST(AlgorithmTable, IdsAndNamesAreUniqueAndEveryCollectiveHasOne) {
  std::set<int> ids;
  std::set<std::pair<int, std::string>> names;
  std::set<int> kinds;
  for (const AlgorithmInfo& info : algorithm_table()) {
    EXPECT_TRUE(ids.insert(info.id).second) << "id " << info.id;
    EXPECT_TRUE(names.insert({static_cast<int>(info.kind), info.name}).second) << info.name;
    EXPECT_NE(info.run, nullptr) << info.name;
    EXPECT_GT(std::string(info.description).size(), 0u) << info.name;
    EXPECT_LT(info.default_min_bytes, info.default_max_bytes) << info.name;
    kinds.insert(static_cast<int>(info.kind));
  }
  for (int k = static_cast<int>(K::kBroadcast); k < kCollectiveKinds; ++k) {
    EXPECT_EQ(kinds.count(k), 1u) << collective_name(static_cast<K>(k));
  }
}

TEST(AlgorithmTable, FindIgnoresCaseAndKnowsItsCollective) {
  ASSERT_NE(find_algorithm(K::kBroadcast, "CHAIN"), nullptr);
  EXPECT_STREQ(find_algorithm(K::kBroadcast, "CHAIN")->name, "chain");
  EXPECT_EQ(find_algorithm(K::kGather, "chain"), nullptr);
  EXPECT_STREQ(collective_name(K::kReduceScatter), "reducescatter");
  EXPECT_NE(algorithm_names().find("alltoall:pairwise"), std::string::npos);
}

TEST(AlgorithmSelection, DefaultsFollowTheMessageSize) {
  AlgorithmSelection defaults;
  EXPECT_STREQ(defaults.choose(sized(K::kBroadcast, 1), 4)->name, "tree");
  EXPECT_STREQ(defaults.choose(sized(K::kBroadcast, 64 << 10), 4)->name, "chain");
  // The size counts bytes, not elements.
  EXPECT_STREQ(defaults.choose(sized(K::kBroadcast, 16 << 10, ncclFloat32), 4)->name, "chain");
  EXPECT_STREQ(defaults.choose(sized(K::kReduce, 100), 4)->name, "tree");
  EXPECT_STREQ(defaults.choose(sized(K::kReduce, 1 << 20), 4)->name, "chain");
  EXPECT_STREQ(defaults.choose(sized(K::kAllGather, 0), 4)->name, "ring");
  EXPECT_STREQ(defaults.choose(sized(K::kScatter, 5), 4)->name, "direct");
}

TEST(AlgorithmSelection, OverridesByCollectiveOrByName) {
  AlgorithmSelection selection;
  ASSERT_EQ(AlgorithmSelection::parse(" Broadcast:Chain , reduce:tree", &selection), ncclSuccess)
      << last_error();
  EXPECT_STREQ(selection.choose(sized(K::kBroadcast, 1), 4)->name, "chain");
  EXPECT_STREQ(selection.choose(sized(K::kReduce, 1 << 20), 4)->name, "tree");
  EXPECT_EQ(selection.forced(K::kGather), nullptr);

  // A bare name applies to every collective that has an algorithm of that name.
  ASSERT_EQ(AlgorithmSelection::parse("chain", &selection), ncclSuccess) << last_error();
  EXPECT_STREQ(selection.forced(K::kBroadcast)->name, "chain");
  EXPECT_STREQ(selection.forced(K::kReduce)->name, "chain");
  EXPECT_EQ(selection.forced(K::kAllGather), nullptr);

  ASSERT_EQ(AlgorithmSelection::parse("", &selection), ncclSuccess);
  EXPECT_EQ(selection.forced(K::kBroadcast), nullptr);
}

TEST(AlgorithmSelection, UnknownNamesAreRefusedWithTheList) {
  AlgorithmSelection selection;
  ASSERT_EQ(AlgorithmSelection::parse("broadcast:chain", &selection), ncclSuccess);
  for (const char* text : {"warp", "broadcast:ring", "bcast:chain", "broadcast:"}) {
    EXPECT_EQ(AlgorithmSelection::parse(text, &selection), ncclInvalidArgument) << text;
    const std::string message = last_error();
    EXPECT_NE(message.find("TERSE_ALGO"), std::string::npos) << message;
    EXPECT_NE(message.find("broadcast:tree"), std::string::npos) << message;
  }
  // A refused value leaves the previous selection alone.
  EXPECT_STREQ(selection.forced(K::kBroadcast)->name, "chain");
}

}  // namespace
}  // namespace terse
