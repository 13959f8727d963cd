// The stream proxy's rules (plugin/stream_proxy.h), with plain memory as the flag and the test
// marking units ready where a CUDA host function would: units run in issue order whatever
// order they become ready in; each publishes its sequence, failed or not; stopping abandons or
// finishes what is queued and always publishes, so no stream is left waiting.
#include "plugin/stream_proxy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"

namespace terse {
namespace {

uint32_t read_flag(const uint32_t& flag) {
  return __atomic_load_n(&flag, __ATOMIC_ACQUIRE);
}

// Records which units ran, in order.
class RunOrder {
 public:
  StreamProxy::Work work(int id, ncclResult_t result = ncclSuccess) {
    return [this, id, result]() -> ncclResult_t {
      std::lock_guard<std::mutex> lock(mutex_);
      order_.push_back(id);
      if (result != ncclSuccess) return fail(result, "unit %d failed on purpose", id);
      return ncclSuccess;
    };
  }
  std::vector<int> order() {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_;
  }

 private:
  std::mutex mutex_;
  std::vector<int> order_;
};

TEST(StreamProxy, RunsInIssueOrderWhateverOrderUnitsBecomeReady) {
  uint32_t flag = 0;
  RunOrder ran;
  StreamProxy proxy(&flag);
  std::shared_ptr<StreamProxy::Unit> first, second, third;
  uint32_t s1 = 0, s2 = 0, s3 = 0;
  ASSERT_EQ(proxy.enqueue(ran.work(1), false, &first, &s1), ncclSuccess);
  ASSERT_EQ(proxy.enqueue(ran.work(2), false, &second, &s2), ncclSuccess);
  ASSERT_EQ(proxy.enqueue(ran.work(3), true, &third, &s3), ncclSuccess);
  EXPECT_EQ(s2, s1 + 1);
  EXPECT_EQ(s3, s2 + 1);
  EXPECT_EQ(proxy.last_sequence(), s3);
  // The later units are ready first; they still wait for the first.
  StreamProxy::mark_ready(second);
  StreamProxy::mark_ready(first);
  EXPECT_EQ(StreamProxy::wait(third), ncclSuccess);
  EXPECT_EQ(ran.order(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(read_flag(flag), s3);
  EXPECT_EQ(StreamProxy::wait(first), ncclSuccess);
}

TEST(StreamProxy, AWaitBehindAStreamThatNeverMovesEndsAtItsDeadlineAndTheCallNeverRuns) {
  uint32_t flag = 0;
  RunOrder ran;
  StreamProxy proxy(&flag, /*wait_seconds=*/0.2);
  std::shared_ptr<StreamProxy::Unit> stuck, behind;
  uint32_t s1 = 0, s2 = 0;
  // A device call whose stream has not reached its host function, then a host call behind it.
  ASSERT_EQ(proxy.enqueue(ran.work(1), false, &stuck, &s1), ncclSuccess);
  ASSERT_EQ(proxy.enqueue(ran.work(2), true, &behind, &s2), ncclSuccess);
  EXPECT_EQ(StreamProxy::wait(behind), ncclSystemError);
  EXPECT_NE(std::string(last_error()).find("TERSE_TIMEOUT_S"), std::string::npos) << last_error();
  EXPECT_TRUE(StreamProxy::cancelled(behind));
  EXPECT_FALSE(StreamProxy::cancelled(stuck));
  // When the stream finally moves, the first call runs; the cancelled one is skipped, yet its
  // sequence is published so that no stream waits for it.
  StreamProxy::mark_ready(stuck);
  EXPECT_EQ(StreamProxy::wait(stuck), ncclSuccess);
  std::shared_ptr<StreamProxy::Unit> after;
  uint32_t s3 = 0;
  ASSERT_EQ(proxy.enqueue(ran.work(3), true, &after, &s3), ncclSuccess);
  EXPECT_EQ(StreamProxy::wait(after), ncclSuccess);
  EXPECT_EQ(ran.order(), (std::vector<int>{1, 3}));
  EXPECT_EQ(read_flag(flag), s3);
  EXPECT_GT(s3, s2);
}

TEST(StreamProxy, RunInOrderWaitsForEarlierUnits) {
  uint32_t flag = 0;
  RunOrder ran;
  StreamProxy proxy(&flag);
  std::shared_ptr<StreamProxy::Unit> staged;
  uint32_t sequence = 0;
  ASSERT_EQ(proxy.enqueue(ran.work(1), false, &staged, &sequence), ncclSuccess);
  std::atomic<bool> host_call_returned{false};
  std::thread host_call([&] {
    EXPECT_EQ(proxy.run_in_order(ran.work(2)), ncclSuccess);
    host_call_returned = true;
  });
  // The host call is queued behind the staged one, which no stream has made ready yet.
  while (proxy.last_sequence() != sequence + 1) std::this_thread::yield();
  EXPECT_FALSE(host_call_returned.load());
  EXPECT_TRUE(ran.order().empty());
  StreamProxy::mark_ready(staged);
  host_call.join();
  EXPECT_EQ(ran.order(), (std::vector<int>{1, 2}));
  EXPECT_EQ(read_flag(flag), sequence + 1);
}

TEST(StreamProxy, AFailedUnitStillPublishesAndReportsItsError) {
  uint32_t flag = 0;
  RunOrder ran;
  StreamProxy proxy(&flag);
  std::shared_ptr<StreamProxy::Unit> failing, next;
  uint32_t s1 = 0, s2 = 0;
  ASSERT_EQ(proxy.enqueue(ran.work(1, ncclRemoteError), true, &failing, &s1), ncclSuccess);
  EXPECT_EQ(StreamProxy::wait(failing), ncclRemoteError);
  EXPECT_NE(std::string(last_error()).find("unit 1 failed on purpose"), std::string::npos)
      << last_error();
  EXPECT_EQ(read_flag(flag), s1);
  // The proxy goes on: breaking the communicator is the work's business, not the queue's.
  ASSERT_EQ(proxy.enqueue(ran.work(2), true, &next, &s2), ncclSuccess);
  EXPECT_EQ(StreamProxy::wait(next), ncclSuccess);
  EXPECT_EQ(read_flag(flag), s2);
}

TEST(StreamProxy, AbandonReleasesEveryQueuedSequence) {
  uint32_t flag = 0;
  RunOrder ran;
  StreamProxy proxy(&flag);
  std::shared_ptr<StreamProxy::Unit> waiting, behind;
  uint32_t s1 = 0, s2 = 0;
  ASSERT_EQ(proxy.enqueue(ran.work(1), false, &waiting, &s1), ncclSuccess);
  ASSERT_EQ(proxy.enqueue(ran.work(2), true, &behind, &s2), ncclSuccess);
  proxy.stop(StreamProxy::StopMode::kAbandon);
  proxy.join();
  EXPECT_TRUE(ran.order().empty());
  EXPECT_EQ(read_flag(flag), s2);  // a stream waiting for either unit goes on
  EXPECT_EQ(StreamProxy::wait(waiting), ncclInvalidUsage);
  EXPECT_NE(std::string(last_error()).find("aborted"), std::string::npos) << last_error();
  EXPECT_EQ(StreamProxy::wait(behind), ncclInvalidUsage);
  // A host function firing late is harmless; nothing more can be queued.
  StreamProxy::mark_ready(waiting);
  std::shared_ptr<StreamProxy::Unit> refused;
  uint32_t s3 = 0;
  EXPECT_EQ(proxy.enqueue(ran.work(3), true, &refused, &s3), ncclInvalidUsage);
  EXPECT_TRUE(ran.order().empty());
}

TEST(StreamProxy, FinishRunsWhatBecomesReadyThenStops) {
  uint32_t flag = 0;
  RunOrder ran;
  StreamProxy proxy(&flag);
  std::shared_ptr<StreamProxy::Unit> first, second;
  uint32_t s1 = 0, s2 = 0;
  ASSERT_EQ(proxy.enqueue(ran.work(1), false, &first, &s1), ncclSuccess);
  ASSERT_EQ(proxy.enqueue(ran.work(2), true, &second, &s2), ncclSuccess);
  proxy.stop(StreamProxy::StopMode::kFinish, Deadline::after_seconds(60));
  std::thread stream([&] { StreamProxy::mark_ready(first); });
  proxy.join();
  stream.join();
  EXPECT_EQ(ran.order(), (std::vector<int>{1, 2}));
  EXPECT_EQ(read_flag(flag), s2);
  EXPECT_EQ(StreamProxy::wait(second), ncclSuccess);
}

TEST(StreamProxy, FinishAbandonsUnitsNotReadyByTheDeadline) {
  uint32_t flag = 0;
  RunOrder ran;
  StreamProxy proxy(&flag);
  std::shared_ptr<StreamProxy::Unit> ready, never;
  uint32_t s1 = 0, s2 = 0;
  ASSERT_EQ(proxy.enqueue(ran.work(1), true, &ready, &s1), ncclSuccess);
  ASSERT_EQ(proxy.enqueue(ran.work(2), false, &never, &s2), ncclSuccess);
  proxy.stop(StreamProxy::StopMode::kFinish, Deadline::after_seconds(0.2));
  proxy.join();
  EXPECT_EQ(ran.order(), (std::vector<int>{1}));
  EXPECT_EQ(read_flag(flag), s2);
  EXPECT_EQ(StreamProxy::wait(never), ncclInvalidUsage);
  EXPECT_NE(std::string(last_error()).find("destroyed"), std::string::npos) << last_error();
}

TEST(StreamProxy, AbandonOverridesAnEarlierFinish) {
  uint32_t flag = 0;
  RunOrder ran;
  StreamProxy proxy(&flag);
  std::shared_ptr<StreamProxy::Unit> never;
  uint32_t sequence = 0;
  ASSERT_EQ(proxy.enqueue(ran.work(1), false, &never, &sequence), ncclSuccess);
  proxy.stop(StreamProxy::StopMode::kFinish, Deadline::after_seconds(600));
  proxy.stop(StreamProxy::StopMode::kAbandon);
  proxy.join();  // at once, not after 600 s
  EXPECT_EQ(read_flag(flag), sequence);
  EXPECT_TRUE(ran.order().empty());
}

TEST(StreamProxy, DestructorAbandonsAndPublishes) {
  uint32_t flag = 0;
  RunOrder ran;
  std::shared_ptr<StreamProxy::Unit> never;
  uint32_t sequence = 0;
  {
    StreamProxy proxy(&flag);
    ASSERT_EQ(proxy.enqueue(ran.work(1), false, &never, &sequence), ncclSuccess);
  }
  EXPECT_EQ(read_flag(flag), sequence);
  // The unit outlives the proxy (a CUDA host function may still hold it).
  StreamProxy::mark_ready(never);
  EXPECT_EQ(StreamProxy::wait(never), ncclInvalidUsage);
}

}  // namespace
}  // namespace terse
