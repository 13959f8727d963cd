// The link layer (transport/link.h) alone, in one thread: links on a worker they share (as the
// engine's Transport places them) against links on workers of their own (as the ncclNet plugin
// places them), contiguous and gathered messages, and the close in steps.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "transport/deadline.h"
#include "transport/link.h"
#include "transport/ucx_context.h"
#include "transport/ucx_worker.h"

namespace terse {
namespace {

// Progresses both sides until `request` finished or a generous deadline passed.
ucs_status_t finish(TransferRequest* request, Link* a, Link* b) {
  const Deadline deadline = Deadline::after_seconds(20);
  while (request->status() == UCS_INPROGRESS && !deadline.expired()) {
    a->progress();
    b->progress();
  }
  return request->status();
}

class LinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Shared memory and loopback to this process: all a single-process test needs.
    ASSERT_EQ(UcxContext::create(4, "sm,self", &context_), Result::kSuccess) << last_error();
    ASSERT_EQ(UcxWorker::create(context_, &shared_), Result::kSuccess) << last_error();
  }

  // A link on the shared worker and its peer on a worker of its own, connected both ways.
  void connect_pair(int id, Link* near, std::unique_ptr<Link>* far) {
    *near = Link(shared_);
    ASSERT_EQ(Link::create(context_, far), Result::kSuccess) << last_error();
    std::vector<uint8_t> near_address, far_address;
    ASSERT_EQ(near->address(&near_address), Result::kSuccess);
    ASSERT_EQ((*far)->address(&far_address), Result::kSuccess);
    ASSERT_EQ(near->connect(far_address, UcxErrorMode::kNone, id), UCS_OK);
    ASSERT_EQ((*far)->connect(near_address, UcxErrorMode::kNone, id), UCS_OK);
  }

  std::shared_ptr<UcxContext> context_;
  std::shared_ptr<UcxWorker> shared_;
};

TEST_F(LinkTest, LinksSharingAWorkerEachReceiveTheirOwnPeersMessages) {
  Link near[2];
  std::unique_ptr<Link> far[2];
  for (int i = 0; i < 2; ++i) connect_pair(i, &near[i], &far[i]);
  ASSERT_FALSE(HasFatalFailure());
  // Receives on the shared worker, posted before the sends, tagged per peer as the engine tags
  // them by source rank; the sends leave in the opposite order.
  char landing[2][16] = {};
  TransferRequest receives[2], sends[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(near[i].recv(100 + i, landing[i], sizeof(landing[i]), &receives[i]),
              Result::kSuccess);
  }
  const std::string messages[2] = {"far zero", "far one, longer"};
  for (int i = 1; i >= 0; --i) {
    ASSERT_EQ(far[i]->send(100 + i, messages[i].data(), messages[i].size(), &sends[i]),
              Result::kSuccess);
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(finish(&sends[i], far[i].get(), &near[i]), UCS_OK);
    EXPECT_EQ(finish(&receives[i], &near[i], far[i].get()), UCS_OK);
    EXPECT_EQ(std::string(landing[i], receives[i].received_bytes()), messages[i]);
    EXPECT_EQ(receives[i].peer(), i);
  }
}

TEST_F(LinkTest, GatheredSendArrivesScatteredInOrder) {
  Link near;
  std::unique_ptr<Link> far;
  connect_pair(7, &near, &far);
  ASSERT_FALSE(HasFatalFailure());
  char head[3] = {'a', 'b', 'c'}, tail[5] = {'d', 'e', 'f', 'g', 'h'};
  const ucp_dt_iov_t gathered[2] = {{head, sizeof(head)}, {tail, sizeof(tail)}};
  char first[4] = {}, second[8] = {};
  const ucp_dt_iov_t scattered[2] = {{first, sizeof(first)}, {second, sizeof(second)}};
  TransferRequest send, receive;
  ASSERT_EQ(near.recv(5, scattered, 2, &receive), Result::kSuccess);
  ASSERT_EQ(far->send(5, gathered, 2, &send), Result::kSuccess);
  EXPECT_EQ(finish(&send, far.get(), &near), UCS_OK);
  EXPECT_EQ(finish(&receive, &near, far.get()), UCS_OK);
  EXPECT_EQ(receive.received_bytes(), 8u);
  EXPECT_EQ(std::string(first, 4), "abcd");
  EXPECT_EQ(std::string(second, 4), "efgh");
}

TEST_F(LinkTest, CloseInStepsEndsTheLinkAndLeavesTheSharedWorkerUsable) {
  Link near[2];
  std::unique_ptr<Link> far[2];
  for (int i = 0; i < 2; ++i) connect_pair(i, &near[i], &far[i]);
  ASSERT_FALSE(HasFatalFailure());
  near[0].start_close(/*force=*/false);
  EXPECT_FALSE(near[0].is_open());
  const Deadline deadline = Deadline::after_seconds(20);
  while (near[0].close_pending() && !deadline.expired()) near[0].progress();
  EXPECT_FALSE(near[0].close_pending());
  // A closed link refuses posts; its neighbour on the same worker still carries messages.
  char byte = 'x', landing = 0;
  TransferRequest refused, send, receive;
  EXPECT_EQ(near[0].send(1, &byte, 1, &refused), Result::kInternalError);
  EXPECT_FALSE(refused.posted());
  ASSERT_EQ(near[1].recv(2, &landing, 1, &receive), Result::kSuccess);
  ASSERT_EQ(far[1]->send(2, &byte, 1, &send), Result::kSuccess);
  EXPECT_EQ(finish(&receive, &near[1], far[1].get()), UCS_OK);
  EXPECT_EQ(finish(&send, far[1].get(), &near[1]), UCS_OK);
  EXPECT_EQ(landing, 'x');
  // The whole close in one call.
  EXPECT_TRUE(near[1].close(/*force=*/false, Deadline::after_seconds(20), [] { return false; }));
  EXPECT_FALSE(near[1].is_open());
}

TEST(LinkPlaceholder, IsClosedAndRefusesPosts) {
  Link placeholder;
  EXPECT_FALSE(placeholder.is_open());
  EXPECT_EQ(placeholder.peer_error(), UCS_OK);
  placeholder.start_close(/*force=*/true);
  EXPECT_FALSE(placeholder.close_pending());
  char byte = 0;
  TransferRequest request;
  EXPECT_EQ(placeholder.recv(1, &byte, 1, &request), Result::kInternalError);
}

}  // namespace
}  // namespace terse
