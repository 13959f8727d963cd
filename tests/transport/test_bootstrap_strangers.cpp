// The bootstrap root among strangers: port scanners, stray jobs, ranks holding another key.
// None of them may delay or disturb the ranks, flood the log, or learn anything they could use.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/result.h"
#include "transport/bootstrap_client.h"
#include "transport/bootstrap_messages.h"
#include "transport/socket.h"
#include "transport/unique_id.h"
#include "transport_test_support.h"

namespace terse {
namespace {

using test::run_ranks;
using test::ScopedEnv;
using Table = std::vector<std::vector<uint8_t>>;

std::vector<uint8_t> payload_of(int rank) {
  return std::vector<uint8_t>(static_cast<size_t>(rank) * 13 + 5, static_cast<uint8_t>(rank + 1));
}

class BootstrapStrangers : public ::testing::Test {
 protected:
  ScopedEnv ifname_{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family_{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv terse_comm_id_{"TERSE_COMM_ID", nullptr};
  ScopedEnv nccl_comm_id_{"NCCL_COMM_ID", nullptr};
  ScopedEnv secret_{"TERSE_COMM_SECRET", nullptr};
  ScopedEnv timeout_{"TERSE_TIMEOUT_S", "8"};
  const double timeout_seconds_ = 8;

  // Runs ranks 0..nranks-1 of `id` on threads; true when every one got the full table.
  bool run_job(const UniqueId& id, int nranks, std::vector<std::string>* errors) {
    std::vector<Result> results(nranks, Result::kInternalError);
    std::vector<Table> tables(nranks);
    errors->assign(nranks, "");
    run_ranks(nranks, [&](int rank) {
      results[rank] =
          bootstrap_allgather(id, rank, nranks, payload_of(rank), timeout_seconds_, &tables[rank]);
      (*errors)[rank] = last_error();
    });
    bool all = true;
    for (int rank = 0; rank < nranks; ++rank) {
      Table expected;
      for (int other = 0; other < nranks; ++other) expected.push_back(payload_of(other));
      all = all && results[rank] == Result::kSuccess && tables[rank] == expected;
    }
    return all;
  }
};

// Reads the challenge a root sends to every new connection.
BootstrapChallenge read_challenge(const Socket& socket, const Deadline& deadline) {
  uint8_t bytes[kBootstrapChallengeBytes] = {};
  EXPECT_EQ(socket.recv_all(bytes, sizeof(bytes), deadline, "the challenge"), Result::kSuccess);
  return decode_challenge(bytes);
}

TEST_F(BootstrapStrangers, WrongKeysAndGarbageChangeNothingAndAreToldNothingUseful) {
  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), Result::kSuccess) << last_error();
  UniqueIdFields fields;
  ASSERT_EQ(decode_unique_id(id, &fields), Result::kSuccess);
  Deadline deadline = Deadline::after_seconds(timeout_seconds_);

  // A silent connection must hold nobody up; garbage is dropped after the challenge.
  Socket silent, garbage, forger;
  ASSERT_EQ(Socket::connect(fields.root, deadline, &silent), Result::kSuccess);
  ASSERT_EQ(Socket::connect(fields.root, deadline, &garbage), Result::kSuccess);
  read_challenge(garbage, deadline);
  std::vector<uint8_t> junk(200, 'x');
  ASSERT_EQ(garbage.send_all(junk.data(), junk.size(), deadline, "junk"), Result::kSuccess);
  uint8_t byte = 0;
  EXPECT_EQ(garbage.recv_all(&byte, 1, deadline, "anything"), Result::kRemoteError);

  // A forger knows the protocol and claims rank 0 of 3, but signs with another key: it is told
  // that its code is wrong (an authenticated reply it cannot check) and changes nothing.
  ASSERT_EQ(Socket::connect(fields.root, deadline, &forger), Result::kSuccess);
  BootstrapChallenge challenge = read_challenge(forger, deadline);
  EXPECT_EQ(challenge.magic, kBootstrapChallengeMagic);
  BootstrapKey wrong;
  derive_bootstrap_key_from(fields.secret ^ 1, nullptr, 0, &wrong);
  BootstrapHello hello;
  hello.rank = 0;
  hello.nranks = 3;
  hello_mac(wrong, challenge.nonce, hello, nullptr, hello.mac);
  std::vector<uint8_t> bytes = encode_hello(hello);
  ASSERT_EQ(forger.send_all(bytes.data(), bytes.size(), deadline, "hello"), Result::kSuccess);
  uint8_t head[kBootstrapReplyHeaderBytes];
  ASSERT_EQ(forger.recv_all(head, sizeof(head), deadline, "reply"), Result::kSuccess);
  BootstrapReplyHeader reply = decode_reply_header(head);
  EXPECT_EQ(reply.status, static_cast<uint32_t>(Result::kInvalidUsage.code()));
  EXPECT_EQ(reply.body_bytes <= kMaxBootstrapErrorBytes, true);

  // A captured hello is useless on another connection: its code covers that connection's nonce.
  Socket replayer;
  ASSERT_EQ(Socket::connect(fields.root, deadline, &replayer), Result::kSuccess);
  BootstrapChallenge fresh = read_challenge(replayer, deadline);
  EXPECT_NE(memcmp(fresh.nonce, challenge.nonce, kBootstrapNonceBytes), 0);

  // A rank holding a stale id (right address, another secret) learns at once that the keys
  // differ, and the job's own ranks still complete (rank 0 of 3 is still free).
  UniqueIdFields stale = fields;
  stale.secret ^= 1;
  UniqueId stale_id;
  encode_unique_id(stale, &stale_id);
  Table ignored;
  EXPECT_EQ(bootstrap_allgather(stale_id, 1, 3, payload_of(1), timeout_seconds_, &ignored),
            Result::kRemoteError);
  EXPECT_NE(std::string(last_error()).find("does not authenticate"), std::string::npos)
      << last_error();

  std::vector<std::string> errors;
  EXPECT_TRUE(run_job(id, 3, &errors)) << errors[0] << " | " << errors[1] << " | " << errors[2];
}

TEST_F(BootstrapStrangers, CommSecretKeepsOutWhoeverKnowsOnlyTheId) {
  // With TERSE_COMM_ID the id's secret is a hash of the address: anyone who knows the address
  // holds it, as the outsider here holds this id's. TERSE_COMM_SECRET is what they lack.
  ScopedEnv secret("TERSE_COMM_SECRET", "job secret");
  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), Result::kSuccess) << last_error();
  UniqueIdFields fields;
  ASSERT_EQ(decode_unique_id(id, &fields), Result::kSuccess);

  // The outsider claims rank 1 of 2 with the id's secret but no TERSE_COMM_SECRET.
  BootstrapKey outsider;
  derive_bootstrap_key_from(fields.secret, nullptr, 0, &outsider);
  Socket socket;
  Deadline deadline = Deadline::after_seconds(timeout_seconds_);
  ASSERT_EQ(Socket::connect(fields.root, deadline, &socket), Result::kSuccess);
  BootstrapChallenge challenge = read_challenge(socket, deadline);
  BootstrapHello hello;
  hello.rank = 1;
  hello.nranks = 2;
  std::vector<uint8_t> payload = payload_of(1);
  hello.payload_bytes = static_cast<uint32_t>(payload.size());
  hello_mac(outsider, challenge.nonce, hello, payload.data(), hello.mac);
  std::vector<uint8_t> bytes = encode_hello(hello);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  ASSERT_EQ(socket.send_all(bytes.data(), bytes.size(), deadline, "hello"), Result::kSuccess);
  uint8_t head[kBootstrapReplyHeaderBytes];
  ASSERT_EQ(socket.recv_all(head, sizeof(head), deadline, "reply"), Result::kSuccess);
  EXPECT_EQ(decode_reply_header(head).status, static_cast<uint32_t>(Result::kInvalidUsage.code()));

  // It took nobody's place: the ranks that hold the secret complete.
  std::vector<std::string> errors;
  EXPECT_TRUE(run_job(id, 2, &errors)) << errors[0] << " | " << errors[1];
}

TEST_F(BootstrapStrangers, ARankWhoseConnectionIsDroppedConnectsAgain) {
  // A root played by the test: it drops the rank's first connection unanswered (as a flooded
  // root pushes out its longest-waiting one), first after accepting, then after the challenge,
  // and serves the third.
  SocketAddress loopback;
  ASSERT_EQ(SocketAddress::parse("127.0.0.1:1", "test", &loopback), Result::kSuccess);
  loopback.set_port(0);  // the listener picks a free port, and holds it
  Socket listener;
  ASSERT_EQ(Socket::listen(loopback, &listener), Result::kSuccess);
  UniqueIdFields fields;
  fields.root = listener.local_address();
  fields.secret = 0x5eed;
  UniqueId id;
  encode_unique_id(fields, &id);
  BootstrapKey key;
  derive_bootstrap_key_from(fields.secret, nullptr, 0, &key);

  Result result = Result::kInternalError;
  Table table;
  std::thread rank([&] { result = bootstrap_allgather(id, 0, 1, payload_of(0), 8, &table); });
  // Joined however the test ends (the rank gives up at its own 8 s deadline).
  struct JoinAtExit {
    std::thread& thread;
    ~JoinAtExit() {
      if (thread.joinable()) thread.join();
    }
  } join_rank{rank};
  Deadline deadline = Deadline::after_seconds(timeout_seconds_);
  auto accept_one = [&](Socket* socket) {
    SocketAddress peer;
    while (!socket->is_open() && !deadline.expired()) {
      ASSERT_EQ(listener.accept(socket, &peer), 0);
      pollfd entry{listener.fd(), POLLIN, 0};
      if (!socket->is_open()) poll(&entry, 1, 100);
    }
    ASSERT_TRUE(socket->is_open());
  };
  BootstrapChallenge challenge;
  challenge.nonce[0] = 42;
  const std::vector<uint8_t> challenge_bytes = encode_challenge(challenge);
  {
    Socket first;
    accept_one(&first);
  }  // closed unanswered
  {
    Socket second;
    accept_one(&second);
    ASSERT_EQ(second.send_all(challenge_bytes.data(), challenge_bytes.size(), deadline, "c"),
              Result::kSuccess);
  }  // closed after the challenge, the hello unread
  Socket third;
  accept_one(&third);
  ASSERT_EQ(third.send_all(challenge_bytes.data(), challenge_bytes.size(), deadline, "c"),
            Result::kSuccess);
  uint8_t head[kBootstrapHelloBytes];
  ASSERT_EQ(third.recv_all(head, sizeof(head), deadline, "hello"), Result::kSuccess);
  BootstrapHello hello = decode_hello(head);
  std::vector<uint8_t> payload(hello.payload_bytes);
  ASSERT_EQ(third.recv_all(payload.data(), payload.size(), deadline, "payload"), Result::kSuccess);
  uint8_t expected[kBootstrapMacBytes];
  hello_mac(key, challenge.nonce, hello, payload.data(), expected);
  EXPECT_TRUE(bootstrap_mac_equal(expected, hello.mac));
  const std::vector<uint8_t> body = encode_payload_table({payload});
  BootstrapReplyHeader reply;
  reply.body_bytes = body.size();
  uint8_t digest[kBootstrapDigestBytes];
  bootstrap_digest(body.data(), body.size(), digest);
  reply_mac(key, challenge.nonce, reply, digest, reply.mac);
  std::vector<uint8_t> bytes = encode_reply_header(reply);
  bytes.insert(bytes.end(), body.begin(), body.end());
  ASSERT_EQ(third.send_all(bytes.data(), bytes.size(), deadline, "reply"), Result::kSuccess);
  rank.join();
  EXPECT_EQ(result, Result::kSuccess) << last_error();
  EXPECT_EQ(table, Table{payload_of(0)});
}

// Opens `count` connections to `root` in a child process and holds them until told to stop:
// what a port scanner or a stray job does. The child only makes system calls (the parent has
// threads, so nothing but async-signal-safe calls may run between fork and _exit).
class ConnectionFlood {
 public:
  ConnectionFlood(const SocketAddress& root, int count) {
    int ready[2], stop[2];
    EXPECT_EQ(pipe(ready), 0);
    EXPECT_EQ(pipe(stop), 0);
    child_ = fork();
    if (child_ == 0) {
      close(ready[0]);
      close(stop[1]);
      rlimit limit{};
      getrlimit(RLIMIT_NOFILE, &limit);
      limit.rlim_cur = limit.rlim_max;
      setrlimit(RLIMIT_NOFILE, &limit);
      int opened = 0;
      for (; opened < count; ++opened) {
        int fd = socket(root.family(), SOCK_STREAM, 0);
        if (fd < 0 || ::connect(fd, root.get(), root.length()) != 0) break;
      }
      (void)!write(ready[1], &opened, sizeof(opened));
      char byte;
      (void)!read(stop[0], &byte, 1);  // returns when the parent closes its end
      _exit(0);
    }
    close(ready[1]);
    close(stop[0]);
    stop_ = stop[1];
    pollfd entry{ready[0], POLLIN, 0};
    if (poll(&entry, 1, 60000) == 1) (void)!read(ready[0], &opened_, sizeof(opened_));
    close(ready[0]);
  }
  ~ConnectionFlood() {
    close(stop_);
    int status = 0;
    waitpid(child_, &status, 0);
  }
  int opened() const { return opened_; }

 private:
  pid_t child_ = -1;
  int stop_ = -1;
  int opened_ = 0;
};

// Lowers this process's descriptor limit for the scope (the root then runs out long before the
// flood does, as on a machine with the usual limit of 1024) and restores it.
class ScopedDescriptorLimit {
 public:
  explicit ScopedDescriptorLimit(rlim_t soft) {
    getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = std::min<rlim_t>(soft, saved_.rlim_cur);
    setrlimit(RLIMIT_NOFILE, &lowered);
  }
  ~ScopedDescriptorLimit() { setrlimit(RLIMIT_NOFILE, &saved_); }

 private:
  rlimit saved_{};
};

size_t count_lines_with(const std::string& path, const std::string& text) {
  std::ifstream file(path);
  std::string line;
  size_t count = 0;
  while (std::getline(file, line)) count += line.find(text) != std::string::npos;
  return count;
}

TEST_F(BootstrapStrangers, TwoThousandIdleConnectionsDoNotDelayTheRanksOrFloodTheLog) {
  char log_path[] = "/tmp/terse_flood_log_XXXXXX";
  close(mkstemp(log_path));
  ScopedEnv debug("TERSE_DEBUG", "WARN");
  ScopedEnv debug_file("TERSE_DEBUG_FILE", log_path);
  reload_log_settings();
  ScopedDescriptorLimit limit(1024);

  UniqueId id;
  ASSERT_EQ(create_unique_id(&id), Result::kSuccess) << last_error();
  UniqueIdFields fields;
  ASSERT_EQ(decode_unique_id(id, &fields), Result::kSuccess);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> errors;
  bool completed = false;
  {
    ConnectionFlood flood(fields.root, 2000);
    // More than the root's descriptors: before the pending cap, the root stopped accepting and
    // the ranks waited behind the flood until its connections timed out (10 s, past the ranks'
    // 8 s), while logging a line per failed accept.
    ASSERT_EQ(flood.opened(), 2000) << "the flood could not open its connections; is the hard "
                                       "RLIMIT_NOFILE below 2100?";
    completed = run_job(id, 3, &errors);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(completed) << errors[0] << " | " << errors[1] << " | " << errors[2];

  ScopedEnv quiet("TERSE_DEBUG", "NONE");
  ScopedEnv no_file("TERSE_DEBUG_FILE", nullptr);
  reload_log_settings();
  // At most one line a second while the root served, plus its closing summary.
  size_t lines = count_lines_with(log_path, "bootstrap root: dropped");
  EXPECT_LE(lines, static_cast<size_t>(std::ceil(seconds)) + 2) << "over " << seconds << " s";
  EXPECT_GE(lines, 1u);  // the drops are reported, not hidden
  unlink(log_path);
}

}  // namespace
}  // namespace terse
