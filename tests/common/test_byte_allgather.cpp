// The variable-length allgather (common/byte_allgather.h) over a fixed-size allgather that this
// test writes itself: ranks as threads meeting at a barrier over one shared buffer.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/byte_allgather.h"

namespace terse {
namespace {

// A fixed-size allgather among `nranks` threads: each writes its bytes at its slot, all wait for
// every slot, each copies the whole buffer. Counts the rounds, as a transport would count its
// collectives.
class ThreadAllgather {
 public:
  explicit ThreadAllgather(int nranks) : nranks_(nranks) {}

  FixedAllgather for_rank(int rank) {
    return [this, rank](const void* mine, size_t bytes, void* all) -> Result {
      std::unique_lock<std::mutex> lock(mutex_);
      const int round = round_;
      if (arrived_ == 0) buffer_.assign(bytes * static_cast<size_t>(nranks_), 0xEE);
      std::memcpy(buffer_.data() + bytes * static_cast<size_t>(rank), mine, bytes);
      if (++arrived_ == nranks_) {
        std::memcpy(all, buffer_.data(), buffer_.size());
        result_ = buffer_;
        arrived_ = 0;
        ++round_;
        ++rounds_;
        wake_.notify_all();
        return Result::kSuccess;
      }
      wake_.wait(lock, [&] { return round_ != round; });
      std::memcpy(all, result_.data(), result_.size());
      return Result::kSuccess;
    };
  }

  int rounds() const { return rounds_; }

 private:
  int nranks_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<uint8_t> buffer_, result_;
  int arrived_ = 0, round_ = 0, rounds_ = 0;
};

std::vector<uint8_t> bytes_of(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

struct RankOutcome {
  Result result = Result::kInternalError;
  std::string error;
  std::vector<std::vector<uint8_t>> table;
};

std::vector<RankOutcome> run(const std::vector<std::string>& strings, uint64_t max_bytes,
                             int* rounds) {
  const int nranks = static_cast<int>(strings.size());
  ThreadAllgather fixed(nranks);
  std::vector<RankOutcome> outcomes(strings.size());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] {
      RankOutcome& outcome = outcomes[static_cast<size_t>(rank)];
      outcome.result = allgather_bytes(fixed.for_rank(rank), nranks,
                                       bytes_of(strings[static_cast<size_t>(rank)]), max_bytes,
                                       "test strings", &outcome.table);
      outcome.error = last_error();
    });
  }
  for (std::thread& thread : threads) thread.join();
  *rounds = fixed.rounds();
  return outcomes;
}

TEST(ByteAllgather, EveryRankReceivesEveryStringAtItsOwnLength) {
  const std::vector<std::string> strings = {"", "five!", std::string(300, 'x') + "end", "\0a"};
  int rounds = 0;
  const std::vector<RankOutcome> outcomes = run(strings, 1 << 10, &rounds);
  EXPECT_EQ(rounds, 2);  // the lengths, then the padded strings
  for (const RankOutcome& outcome : outcomes) {
    ASSERT_EQ(outcome.result, Result::kSuccess) << outcome.error;
    ASSERT_EQ(outcome.table.size(), strings.size());
    for (size_t rank = 0; rank < strings.size(); ++rank) {
      EXPECT_EQ(outcome.table[rank], bytes_of(strings[rank])) << "rank " << rank;
    }
  }
}

TEST(ByteAllgather, EmptyStringsEverywhereTakeOneRound) {
  int rounds = 0;
  const std::vector<RankOutcome> outcomes = run({"", "", ""}, 16, &rounds);
  EXPECT_EQ(rounds, 1);
  for (const RankOutcome& outcome : outcomes) {
    ASSERT_EQ(outcome.result, Result::kSuccess);
    EXPECT_EQ(outcome.table, std::vector<std::vector<uint8_t>>(3));
  }
}

TEST(ByteAllgather, AStringOverTheLimitFailsEveryRankBeforeAnyStringIsSent) {
  int rounds = 0;
  const std::vector<RankOutcome> outcomes = run({"ok", std::string(17, 'y'), "fine"}, 16, &rounds);
  EXPECT_EQ(rounds, 1);  // only the lengths
  for (const RankOutcome& outcome : outcomes) {
    EXPECT_EQ(outcome.result, Result::kInvalidUsage);
    EXPECT_NE(outcome.error.find("rank 1 would send 17 bytes of test strings, more than the 16"),
              std::string::npos)
        << outcome.error;
  }
}

}  // namespace
}  // namespace terse
