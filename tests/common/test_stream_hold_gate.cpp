// The rule the device route relies on (common/stream_hold_gate.h): inside a StreamHoldScope this
// thread may not allocate, and frees wait until a thread that holds nothing releases them.
#include "common/stream_hold_gate.h"

#include <gtest/gtest.h>

#include <thread>

namespace terse {
namespace {

TEST(StreamHoldGate, AllocationIsAllowedOnlyOutsideAScopeNestedOrNot) {
  EXPECT_TRUE(allocation_allowed());
  {
    StreamHoldScope outer;
    EXPECT_FALSE(allocation_allowed());
    {
      StreamHoldScope inner;
      EXPECT_FALSE(allocation_allowed());
    }
    EXPECT_FALSE(allocation_allowed()) << "the inner scope ended the outer one's hold";
  }
  EXPECT_TRUE(allocation_allowed());
}

TEST(StreamHoldGate, AScopeHoldsOnlyItsOwnThread) {
  StreamHoldScope hold;
  bool other_allowed = false;
  std::thread([&] { other_allowed = allocation_allowed(); }).join();
  EXPECT_TRUE(other_allowed);
  EXPECT_FALSE(allocation_allowed());
}

TEST(StreamHoldGate, FreesInsideAScopeWaitForAThreadThatHoldsNothing) {
  release_deferred();
  int released = 0;
  release_when_allowed([&] { ++released; });
  EXPECT_EQ(released, 1) << "outside a scope a release runs at once";
  {
    StreamHoldScope hold;
    release_when_allowed([&] { ++released; });
    release_when_allowed([&] { ++released; });
    EXPECT_EQ(released, 1);
    EXPECT_EQ(deferred_release_count(), 2);
    EXPECT_EQ(release_deferred(), 0) << "a holding thread releases nothing";
    EXPECT_EQ(released, 1);
  }
  int ran = 0;
  std::thread([&] { ran = release_deferred(); }).join();
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(released, 3);
  EXPECT_EQ(deferred_release_count(), 0);
}

TEST(StreamHoldGate, AllocationsAreCountedPerThread) {
  const unsigned long long before = allocations_on_this_thread();
  note_allocation();
  note_allocation();
  unsigned long long other = 0;
  std::thread([&] { other = allocations_on_this_thread(); }).join();
  EXPECT_EQ(allocations_on_this_thread(), before + 2);
  EXPECT_EQ(other, 0u);
}

}  // namespace
}  // namespace terse
