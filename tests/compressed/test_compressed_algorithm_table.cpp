// The compressed algorithm table: unique names and ids, who accepts which codec, the default
// choice by codec family and size, and the lossy-step counts the error bounds rely on.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "codecs/codec_registry.h"
#include "collectives/compressed/compressed_algorithm_table.h"

namespace terse {
namespace {

std::unique_ptr<Codec> codec(const std::string& spec) {
  std::unique_ptr<Codec> made;
  EXPECT_EQ(create_codec(spec, &made), ncclSuccess) << spec;
  return made;
}

TEST(CompressedAlgorithmTable, NamesAndIdsAreUnique) {
  std::set<std::string> names;
  std::set<int> ids;
  for (const CompressedAlgorithmInfo& info : compressed_algorithm_table()) {
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_TRUE(ids.insert(info.id).second) << info.id;
    EXPECT_EQ(find_compressed_algorithm(info.name), &info);
    EXPECT_NE(compressed_algorithm_names().find(info.name), std::string::npos);
  }
  EXPECT_EQ(find_compressed_algorithm("no_such"), nullptr);
}

TEST(CompressedAlgorithmTable, DefaultChoiceFollowsCodecFamilyAndSize) {
  const auto int8 = codec("int8");
  EXPECT_STREQ(default_compressed_algorithm(*int8, 1024, 4)->name, "tree");
  EXPECT_STREQ(default_compressed_algorithm(*int8, 16 * 1024, 4)->name, "recursive_doubling");
  EXPECT_STREQ(default_compressed_algorithm(*int8, 1 << 20, 4)->name, "sra");
  EXPECT_STREQ(default_compressed_algorithm(*codec("topk"), 1 << 20, 4)->name, "sparse_allgather");
  EXPECT_STREQ(default_compressed_algorithm(*codec("dgc"), 1 << 20, 4)->name, "sparse_allgather");
  EXPECT_STREQ(default_compressed_algorithm(*codec("randomk"), 1 << 20, 4)->name, "randomk");
  EXPECT_STREQ(default_compressed_algorithm(*codec("randomk:shared_seed=false"), 1 << 20, 4)->name,
               "sparse_allgather");
  EXPECT_STREQ(default_compressed_algorithm(*codec("powersgd"), 1 << 20, 4)->name, "powersgd");
}

TEST(CompressedAlgorithmTable, AcceptanceMatchesWhatEachAlgorithmNeeds) {
  const auto* sra = find_compressed_algorithm("sra");
  const auto* sparse = find_compressed_algorithm("sparse_allgather");
  const auto* randomk = find_compressed_algorithm("randomk");
  const auto* powersgd = find_compressed_algorithm("powersgd");
  EXPECT_TRUE(sra->accepts(*codec("int4"), 4096));
  EXPECT_TRUE(sra->accepts(*codec("topk"), 4096));
  EXPECT_FALSE(sra->accepts(*codec("dgc"), 4096));  // momentum state describes the whole tensor
  EXPECT_FALSE(sra->accepts(*codec("powersgd"), 4096));
  EXPECT_TRUE(sparse->accepts(*codec("dgc"), 4096));
  EXPECT_FALSE(sparse->accepts(*codec("int8"), 4096));
  EXPECT_TRUE(randomk->accepts(*codec("randomk"), 4096));
  EXPECT_FALSE(randomk->accepts(*codec("randomk:shared_seed=false"), 4096));
  EXPECT_TRUE(powersgd->accepts(*codec("powersgd"), 4096));
  EXPECT_FALSE(powersgd->accepts(*codec("int8"), 4096));
}

TEST(CompressedAlgorithmTable, LossyStepsAsTheBoundsState) {
  const auto steps = [](const char* name, int n) {
    return find_compressed_algorithm(name)->lossy_steps(n);
  };
  for (const CompressedAlgorithmInfo& info : compressed_algorithm_table()) {
    EXPECT_EQ(info.lossy_steps(1), 0) << info.name;  // one rank: an exact copy
  }
  EXPECT_EQ(steps("sra", 2), 2);
  EXPECT_EQ(steps("sra", 8), 2);
  EXPECT_EQ(steps("ring", 3), 3);
  EXPECT_EQ(steps("ring", 8), 8);
  EXPECT_EQ(steps("recursive_doubling", 2), 1);
  EXPECT_EQ(steps("recursive_doubling", 4), 2);
  EXPECT_EQ(steps("recursive_doubling", 3), 3);  // fold in, one round, result back out
  EXPECT_EQ(steps("recursive_doubling", 5), 4);  // log2 p + 2 beyond a power of two
  EXPECT_EQ(steps("recursive_doubling", 7), 4);
  EXPECT_EQ(steps("recursive_doubling", 8), 3);
  EXPECT_EQ(steps("tree", 2), 2);  // depth + 1 = floor(log2 n) + 1
  EXPECT_EQ(steps("tree", 3), 2);
  EXPECT_EQ(steps("tree", 4), 3);
  EXPECT_EQ(steps("tree", 7), 3);
  EXPECT_EQ(steps("tree", 8), 4);
  EXPECT_EQ(steps("sparse_allgather", 8), 1);
  EXPECT_EQ(steps("powersgd", 8), 1);
}

}  // namespace
}  // namespace terse
