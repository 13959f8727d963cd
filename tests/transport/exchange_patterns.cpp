#include "exchange_patterns.h"

#include <cstdio>
#include <functional>
#include <vector>

#include "transport/tag_layout.h"

namespace terse {
namespace test {
namespace {

constexpr size_t kSizes[] = {0, 1, 7, 4093, 65537, (3u << 20) + 5};

void fill(std::vector<uint8_t>* buffer, size_t offset, size_t bytes, int from, int to,
          uint32_t operation) {
  for (size_t i = 0; i < bytes; ++i) (*buffer)[offset + i] = pattern_byte(from, to, operation, i);
}

bool check(const std::vector<uint8_t>& buffer, size_t offset, size_t bytes, int from, int to,
           uint32_t operation, std::string* problem) {
  for (size_t i = 0; i < bytes; ++i) {
    if (buffer[offset + i] != pattern_byte(from, to, operation, i)) {
      char text[200];
      snprintf(text, sizeof(text),
               "rank %d: byte %zu of the %zu-byte message from rank %d (operation 0x%x) is 0x%02x, "
               "expected 0x%02x",
               to, i, bytes, from, operation, buffer[offset + i],
               pattern_byte(from, to, operation, i));
      *problem = text;
      return false;
    }
  }
  return true;
}

}  // namespace

uint8_t pattern_byte(int from, int to, uint32_t operation, size_t index) {
  uint64_t x = (static_cast<uint64_t>(from) << 48) ^ (static_cast<uint64_t>(to) << 32) ^
               (static_cast<uint64_t>(operation) << 8) ^ index;
  x *= 0x9e3779b97f4a7c15ull;
  return static_cast<uint8_t>(x >> 56);
}

size_t all_to_all_message_bytes(int from, int to, uint32_t sequence) {
  return kSizes[(from * 7 + to * 3 + sequence) % (sizeof(kSizes) / sizeof(kSizes[0]))];
}

Result ring_exchange(Transport& transport, size_t bytes, int rounds, uint32_t sequence,
                     std::string* problem) {
  const int rank = transport.rank(), n = transport.nranks();
  const int right = (rank + 1) % n, left = (rank - 1 + n) % n;
  std::vector<uint8_t> send(bytes + 1), recv(bytes + 1);
  for (int round = 0; round < rounds; ++round) {
    uint32_t operation = make_operation(sequence, static_cast<uint32_t>(round));
    fill(&send, 1, bytes, rank, right, operation);
    std::fill(recv.begin(), recv.end(), 0);
    std::vector<TransferRequest> requests(2);
    TERSE_CHECK(transport.recv(left, operation, recv.data() + 1, bytes, &requests[0]));
    TERSE_CHECK(transport.send(right, operation, send.data() + 1, bytes, &requests[1]));
    TERSE_CHECK(transport.wait(&requests));
    if (requests[0].received_bytes() != bytes) {
      *problem = "ring: received " + std::to_string(requests[0].received_bytes()) + " bytes, not " +
                 std::to_string(bytes);
      return Result::kInternalError;
    }
    if (!check(recv, 1, bytes, left, rank, operation, problem)) return Result::kInternalError;
  }
  return Result::kSuccess;
}

Result all_to_all_exchange(Transport& transport, uint32_t sequence, std::string* problem) {
  const int rank = transport.rank(), n = transport.nranks();
  const uint32_t operation = make_operation(sequence, 0);
  std::vector<std::vector<uint8_t>> sends(n), recvs(n);
  std::vector<TransferRequest> requests(2 * n);
  for (int peer = 0; peer < n; ++peer) {
    size_t in = all_to_all_message_bytes(peer, rank, sequence);
    recvs[peer].assign(in + 1, 0);
    TERSE_CHECK(transport.recv(peer, operation, recvs[peer].data() + 1, in, &requests[peer]));
  }
  for (int peer = 0; peer < n; ++peer) {
    size_t out = all_to_all_message_bytes(rank, peer, sequence);
    sends[peer].assign(out + 1, 0);
    fill(&sends[peer], 1, out, rank, peer, operation);
    TERSE_CHECK(transport.send(peer, operation, sends[peer].data() + 1, out, &requests[n + peer]));
  }
  TERSE_CHECK(transport.wait(&requests));
  for (int peer = 0; peer < n; ++peer) {
    size_t in = all_to_all_message_bytes(peer, rank, sequence);
    if (requests[peer].received_bytes() != in) {
      *problem = "all-to-all: received " + std::to_string(requests[peer].received_bytes()) +
                 " bytes from rank " + std::to_string(peer) + ", not " + std::to_string(in);
      return Result::kInternalError;
    }
    if (!check(recvs[peer], 1, in, peer, rank, operation, problem)) return Result::kInternalError;
  }
  return Result::kSuccess;
}

Result control_collectives(Transport& transport, std::string* problem) {
  const int rank = transport.rank(), n = transport.nranks();
  TERSE_CHECK(transport.barrier());
  struct Entry {
    uint64_t rank;
    uint64_t host_hash;
  };
  std::vector<Entry> all(n);
  Entry mine{static_cast<uint64_t>(rank), std::hash<std::string>()(transport.host_identity(rank))};
  TERSE_CHECK(transport.allgather(&mine, sizeof(mine), all.data()));
  for (int peer = 0; peer < n; ++peer) {
    if (all[peer].rank != static_cast<uint64_t>(peer) ||
        all[peer].host_hash != std::hash<std::string>()(transport.host_identity(peer))) {
      *problem = "allgather: entry " + std::to_string(peer) + " holds rank " +
                 std::to_string(all[peer].rank) + " or a host identity that differs";
      return Result::kInternalError;
    }
  }
  return transport.barrier();
}

}  // namespace test
}  // namespace terse
