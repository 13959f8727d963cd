// Transport between ranks running as threads of this process (each with its own UCX context and
// worker, as separate processes would have).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "exchange_patterns.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"
#include "transport_test_support.h"

namespace terse {
namespace {

using Clock = std::chrono::steady_clock;
using test::ScopedEnv;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A wait whose deadline is a second or less, or an abort (which bounds its own wait by a
// second), that takes this long has hung: a guard, not a measure (a loaded machine may take
// several times as long).
constexpr double kHangSeconds = 15;

class TransportThreads : public ::testing::Test {
 protected:
  ScopedEnv ifname_{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family_{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv terse_comm_id_{"TERSE_COMM_ID", nullptr};
  ScopedEnv nccl_comm_id_{"NCCL_COMM_ID", nullptr};
  ScopedEnv timeout_{"TERSE_TIMEOUT_S", "20"};

  // Creates a communicator of `nranks` threads and runs body(transport) on each.
  void run(int nranks, const std::function<void(Transport&)>& body) {
    UniqueId id;
    ASSERT_EQ(create_unique_id(&id), Result::kSuccess) << last_error();
    test::run_ranks(nranks, [&](int rank) {
      std::unique_ptr<Transport> transport;
      Result result = Transport::create(id, rank, nranks, &transport);
      ASSERT_EQ(result, Result::kSuccess) << "rank " << rank << ": " << last_error();
      body(*transport);
    });
  }
};

struct Shape {
  int nranks;
  const char* ucx_tls;     // nullptr: whatever UCX_TLS already says (UCX's own choice if unset)
  const char* error_mode;  // TERSE_UCX_ERROR_MODE; nullptr: the default (peer)
};

// Readable names in test listings instead of the struct's bytes.
void PrintTo(const Shape& shape, std::ostream* out) {
  *out << shape.nranks << " ranks, UCX_TLS=" << (shape.ucx_tls ? shape.ucx_tls : "(as set)")
       << ", TERSE_UCX_ERROR_MODE=" << (shape.error_mode ? shape.error_mode : "(default)");
}

class TransportExchange : public TransportThreads, public ::testing::WithParamInterface<Shape> {};

TEST_P(TransportExchange, RingAllToAllAndControlCollectives) {
  // The default shape leaves UCX_TLS as the caller set it (e.g. a whole run under UCX_TLS=tcp).
  std::optional<ScopedEnv> tls, error_mode;
  if (GetParam().ucx_tls != nullptr) tls.emplace("UCX_TLS", GetParam().ucx_tls);
  if (GetParam().error_mode != nullptr)
    error_mode.emplace("TERSE_UCX_ERROR_MODE", GetParam().error_mode);
  run(GetParam().nranks, [](Transport& transport) {
    std::string problem;
    uint32_t sequence = 1;
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{4093}, size_t{(1u << 20) + 3}}) {
      EXPECT_EQ(test::ring_exchange(transport, bytes, 2, sequence++, &problem), Result::kSuccess)
          << bytes << " bytes: " << problem << last_error();
    }
    for (int round = 0; round < 2; ++round) {
      EXPECT_EQ(test::all_to_all_exchange(transport, sequence++, &problem), Result::kSuccess)
          << problem << last_error();
    }
    EXPECT_EQ(test::control_collectives(transport, &problem), Result::kSuccess)
        << problem << last_error();
    for (int peer = 0; peer < transport.nranks(); ++peer) {
      EXPECT_EQ(transport.host_identity(peer), transport.host_identity(transport.rank()));
    }
  });
}

// Shared memory only forces the fallback to UCP_ERR_HANDLING_MODE_NONE (UCX 1.13 cannot report
// peer failure over it); "none" asks for that mode with every transport allowed.
INSTANTIATE_TEST_SUITE_P(Shapes, TransportExchange,
                         ::testing::Values(Shape{1, nullptr, nullptr}, Shape{2, nullptr, nullptr},
                                           Shape{3, nullptr, nullptr}, Shape{4, nullptr, nullptr},
                                           Shape{8, nullptr, nullptr}, Shape{2, "tcp", nullptr},
                                           Shape{4, "tcp", nullptr}, Shape{3, "shm,self", nullptr},
                                           Shape{3, nullptr, "none"}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           std::string name = std::to_string(info.param.nranks) + "ranks_";
                           name += info.param.ucx_tls ? info.param.ucx_tls : "default";
                           if (info.param.error_mode)
                             name += std::string("_errors_") + info.param.error_mode;
                           for (char& c : name) {
                             if (c == ',') c = '_';
                           }
                           return name;
                         });

TEST_F(TransportThreads, HostIdentityCanBeOverridden) {
  ScopedEnv host("TERSE_HOSTID", "pretend-node-7");
  run(2, [](Transport& transport) {
    EXPECT_EQ(transport.host_identity(0), "pretend-node-7");
    EXPECT_EQ(transport.host_identity(1), "pretend-node-7");
  });
}

TEST_F(TransportThreads, RanksOnOneHostHaveNoNetworkRendezvousThreshold) {
  // Only an endpoint to another host says what a network message costs (the cost model's input).
  run(2, [](Transport& transport) {
    EXPECT_EQ(transport.network_rendezvous_threshold(), std::nullopt);
  });
}

TEST_F(TransportThreads, LongerMessageThanBufferIsInvalidUsage) {
  run(2, [](Transport& transport) {
    std::vector<uint8_t> buffer(100, 1);
    std::vector<TransferRequest> requests(1);
    const uint32_t operation = make_operation(1, 0);
    if (transport.rank() == 0) {
      ASSERT_EQ(transport.send(1, operation, buffer.data(), 100, &requests[0]), Result::kSuccess);
      EXPECT_EQ(transport.wait(&requests), Result::kSuccess) << last_error();
    } else {
      ASSERT_EQ(transport.recv(0, operation, buffer.data(), 10, &requests[0]), Result::kSuccess);
      EXPECT_EQ(transport.wait(&requests), Result::kInvalidUsage);
      EXPECT_NE(std::string(last_error()).find("longer than the receive buffer"), std::string::npos)
          << last_error();
    }
    EXPECT_EQ(transport.barrier(), Result::kSuccess) << last_error();
  });
}

TEST_F(TransportThreads, ReceiveDeadlineNamesThePeerAndLeavesTheTransportUsable) {
  run(2, [](Transport& transport) {
    if (transport.rank() == 1) {
      uint8_t byte = 0;
      std::vector<TransferRequest> requests(1);
      ASSERT_EQ(transport.recv(0, make_operation(9, 2), &byte, 1, &requests[0]), Result::kSuccess);
      Clock::time_point start = Clock::now();
      EXPECT_EQ(transport.wait(requests.data(), 1, Deadline::after_seconds(0.3)),
                Result::kRemoteError);
      EXPECT_LT(seconds_since(start), kHangSeconds);
      std::string error = last_error();
      EXPECT_NE(error.find("receive of 1 bytes from rank 0"), std::string::npos) << error;
      EXPECT_NE(error.find("operation 9 step 2"), std::string::npos) << error;
      EXPECT_NE(requests[0].status(), UCS_INPROGRESS);
    }
    // The unmatched receive was cancelled, not the endpoints: the pair still talks.
    EXPECT_EQ(transport.barrier(), Result::kSuccess) << last_error();
  });
}

TEST_F(TransportThreads, StuckSendIsEndedByClosingItsEndpoint) {
  std::atomic<bool> sender_done{false};
  run(2, [&](Transport& transport) {
    if (transport.rank() == 1) {
      // Alive, but never posts the receive: the send can only end by the sender's deadline.
      while (!sender_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    std::vector<uint8_t> big(8u << 20, 3);
    std::vector<TransferRequest> requests(1);
    ASSERT_EQ(transport.send(1, make_operation(4, 0), big.data(), big.size(), &requests[0]),
              Result::kSuccess);
    Clock::time_point start = Clock::now();
    Result result = transport.wait(requests.data(), 1, Deadline::after_seconds(0.3));
    // Small messages may complete locally (eager); 8 MiB waits for the receiver (rendezvous).
    EXPECT_EQ(result, Result::kRemoteError);
    EXPECT_LT(seconds_since(start), kHangSeconds);
    EXPECT_NE(requests[0].status(), UCS_INPROGRESS);  // the buffer is free to reuse
    if (result == Result::kRemoteError) {
      uint8_t byte = 0;
      TransferRequest again;
      EXPECT_EQ(transport.send(1, make_operation(5, 0), &byte, 1, &again), Result::kRemoteError);
      EXPECT_NE(std::string(last_error()).find("closed after an earlier failure"),
                std::string::npos)
          << last_error();
    }
    sender_done.store(true);
    transport.abort();
  });
}

TEST_F(TransportThreads, InterruptEndsAWaitFromAnotherThread) {
  std::atomic<bool> waiter_done{false};
  run(2, [&](Transport& transport) {
    if (transport.rank() == 1) {
      // Stays alive (so UCX has no failure to report) but never sends.
      while (!waiter_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    uint8_t byte = 0;
    std::vector<TransferRequest> requests(1);
    ASSERT_EQ(transport.recv(1, make_operation(1, 0), &byte, 1, &requests[0]), Result::kSuccess);
    std::thread interrupter([&] {
      // Not a synchronisation: an interrupt before the wait fails it the same way (interrupt()
      // fails every later wait too). The pause only makes it likely to find the wait under way.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      transport.interrupt();
    });
    // Only the interrupt can end this wait before TERSE_TIMEOUT_S (20 s), and only it says
    // "interrupted": no clock is needed to tell.
    EXPECT_EQ(transport.wait(&requests), Result::kRemoteError);
    EXPECT_NE(std::string(last_error()).find("interrupted"), std::string::npos) << last_error();
    interrupter.join();
    waiter_done.store(true);
  });
}

TEST_F(TransportThreads, AbortReturnsPromptlyWithTransfersInFlightAndPeersNotice) {
  run(2, [](Transport& transport) {
    std::vector<uint8_t> big(8u << 20, 1);
    uint8_t byte = 0;
    std::vector<TransferRequest> requests(2);
    const int peer = 1 - transport.rank();
    if (transport.rank() == 0) {
      // Neither will ever be matched by rank 1.
      ASSERT_EQ(transport.recv(peer, make_operation(7, 0), &byte, 1, &requests[0]),
                Result::kSuccess);
      ASSERT_EQ(transport.send(peer, make_operation(8, 0), big.data(), big.size(), &requests[1]),
                Result::kSuccess);
      Clock::time_point start = Clock::now();
      transport.abort();
      EXPECT_LT(seconds_since(start), kHangSeconds);
      TransferRequest after;
      EXPECT_EQ(transport.send(peer, make_operation(9, 0), &byte, 1, &after),
                Result::kInvalidUsage);
    } else {
      // Waits for a message rank 0 never sends; must end by its deadline at the latest.
      ASSERT_EQ(transport.recv(peer, make_operation(6, 0), &byte, 1, &requests[0]),
                Result::kSuccess);
      Clock::time_point start = Clock::now();
      EXPECT_EQ(transport.wait(requests.data(), 1, Deadline::after_seconds(1)),
                Result::kRemoteError);
      EXPECT_LT(seconds_since(start), kHangSeconds);
    }
  });
}

TEST_F(TransportThreads, MisuseIsRefusedWithClearErrors) {
  run(2, [](Transport& transport) {
    uint8_t byte = 0;
    TransferRequest request;
    EXPECT_EQ(transport.send(0, make_control_operation(1, 0), &byte, 1, &request),
              Result::kInvalidArgument);
    EXPECT_NE(std::string(last_error()).find("control bit"), std::string::npos);
    EXPECT_EQ(transport.send(2, make_operation(1, 0), &byte, 1, &request),
              Result::kInvalidArgument);
    EXPECT_NE(std::string(last_error()).find("rank 2"), std::string::npos);
    EXPECT_EQ(transport.recv(-1, make_operation(1, 0), &byte, 1, &request),
              Result::kInvalidArgument);
    EXPECT_EQ(transport.send(0, make_operation(1, 0), nullptr, 4, &request),
              Result::kInvalidArgument);
    EXPECT_EQ(transport.send(0, make_operation(1, 0), &byte, 1, nullptr), Result::kInvalidArgument);

    // A request still in flight cannot be reused.
    ASSERT_EQ(transport.recv(transport.rank(), make_operation(2, 0), &byte, 1, &request),
              Result::kSuccess);
    EXPECT_EQ(transport.recv(transport.rank(), make_operation(3, 0), &byte, 1, &request),
              Result::kInvalidUsage);
    uint8_t value = 42;
    TransferRequest send;
    ASSERT_EQ(transport.send(transport.rank(), make_operation(2, 0), &value, 1, &send),
              Result::kSuccess);
    TransferRequest pair[2];
    pair[0] = std::move(request);
    pair[1] = std::move(send);
    EXPECT_EQ(transport.wait(pair, 2, transport.default_deadline()), Result::kSuccess)
        << last_error();
    EXPECT_EQ(byte, 42);

    EXPECT_EQ(transport.barrier(), Result::kSuccess);
    transport.close();
    EXPECT_EQ(transport.send(0, make_operation(1, 0), &byte, 1, &request), Result::kInvalidUsage);
  });
}

TEST_F(TransportThreads, AllgatherOfDifferentSizesIsInvalidUsage) {
  run(2, [](Transport& transport) {
    std::vector<uint8_t> mine(transport.rank() == 0 ? 8 : 16, 5);
    std::vector<uint8_t> all(2 * mine.size());
    EXPECT_EQ(transport.allgather(mine.data(), mine.size(), all.data()), Result::kInvalidUsage);
    EXPECT_NE(std::string(last_error()).find("same size"), std::string::npos) << last_error();
  });
}

TEST_F(TransportThreads, CreateRefusesBadArguments) {
  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), Result::kSuccess) << last_error();
  std::unique_ptr<Transport> transport;
  EXPECT_EQ(Transport::create(id, 2, 2, &transport), Result::kInvalidArgument);
  EXPECT_EQ(Transport::create(id, 0, kMaxTaggedRanks + 1, &transport), Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("nranks 65537"), std::string::npos);
  UniqueId zero{};
  EXPECT_EQ(Transport::create(zero, 0, 1, &transport), Result::kInvalidArgument);
  EXPECT_EQ(transport, nullptr);
  // The id is still good: nothing above reached its root.
  EXPECT_EQ(Transport::create(id, 0, 1, &transport), Result::kSuccess) << last_error();
}

}  // namespace
}  // namespace terse
