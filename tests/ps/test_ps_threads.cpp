// The parameter server with ranks as threads of this process (ncclCommInitAll, a thread per
// rank), as a framework that drives every GPU from one process would run it: inits whose server
// creation runs allgathers that need every rank at once, exact fp32/fp16/bf16 adds, a local
// argument error on one rank, frees with requests in flight, frees after the communicator
// was aborted or destroyed, and each handle's traffic counters (tersePsGetStats).
#include <gtest/gtest.h>
#include <nccl.h>
#include <terse/terse.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps_wire.h"
#include "transport_test_support.h"

namespace {

using terse::test::ScopedEnv;

// Every request ends by TERSE_TIMEOUT_S; a rank thread that takes far longer is hung.
constexpr int kTimeoutSeconds = 10;
constexpr auto kHung = std::chrono::seconds(6 * kTimeoutSeconds);

class PsThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(ncclCommInitAll(comms_, kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  }
  void TearDown() override {
    for (ncclComm_t& comm : comms_) {
      if (comm != nullptr) ncclCommDestroy(comm);
    }
  }

  // Runs `body(rank)` on a thread per rank and waits for all; a thread still running after
  // kHung is a hang (a deadlock cannot be joined): the process reports it and ends.
  void on_every_rank(const std::function<void(int)>& body) {
    std::mutex mutex;
    std::condition_variable done;
    int finished = 0;
    std::vector<std::thread> threads;
    for (int rank = 0; rank < kRanks; ++rank) {
      threads.emplace_back([&, rank] {
        body(rank);
        std::lock_guard<std::mutex> lock(mutex);
        ++finished;
        done.notify_all();
      });
    }
    std::unique_lock<std::mutex> lock(mutex);
    if (!done.wait_for(lock, kHung, [&] { return finished == kRanks; })) {
      fprintf(stderr, "PsThreads: rank threads still running after %lld s: hung\n",
              (long long)std::chrono::duration_cast<std::chrono::seconds>(kHung).count());
      std::fflush(stderr);
      std::_Exit(3);
    }
    lock.unlock();
    for (std::thread& thread : threads) thread.join();
  }

  static constexpr int kRanks = 3;
  ScopedEnv ifname_{"TERSE_SOCKET_IFNAME", "lo"};
  ScopedEnv family_{"TERSE_SOCKET_FAMILY", "AF_INET"};
  ScopedEnv codec_{"TERSE_CODEC", nullptr};
  ScopedEnv policy_{"TERSE_POLICY", nullptr};
  ScopedEnv split_{"TERSE_PS_SPLIT_BYTES", "1K"};
  ScopedEnv timeout_{"TERSE_TIMEOUT_S", std::to_string(kTimeoutSeconds).c_str()};
  ncclComm_t comms_[kRanks] = {};
};

// Exact conversions of small integers (every value used below is one).
uint16_t to_half(float value) {
  if (value == 0) return 0;
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const int exponent = int((bits >> 23) & 0xff) - 127 + 15;
  return uint16_t(sign | (uint32_t(exponent) << 10) | ((bits & 0x7fffffu) >> 13));
}
float from_half(uint16_t half) {
  if ((half & 0x7fff) == 0) return 0;
  const uint32_t sign = uint32_t(half & 0x8000u) << 16;
  const uint32_t exponent = uint32_t(((half >> 10) & 0x1f) - 15 + 127);
  const uint32_t bits = sign | (exponent << 23) | (uint32_t(half & 0x3ffu) << 13);
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}
uint16_t to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return uint16_t(bits >> 16);
}
float from_bf16(uint16_t value) {
  const uint32_t bits = uint32_t(value) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// Stores `values` as `type` (fp32, fp16 or bf16) into bytes.
std::vector<uint8_t> encode(const std::vector<float>& values, ncclDataType_t type) {
  const size_t size = type == ncclFloat32 ? 4 : 2;
  std::vector<uint8_t> out(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == ncclFloat32) {
      std::memcpy(&out[i * 4], &values[i], 4);
    } else {
      const uint16_t half = type == ncclFloat16 ? to_half(values[i]) : to_bf16(values[i]);
      std::memcpy(&out[i * 2], &half, 2);
    }
  }
  return out;
}
float decode_at(const std::vector<uint8_t>& bytes, size_t i, ncclDataType_t type) {
  if (type == ncclFloat32) {
    float value;
    std::memcpy(&value, &bytes[i * 4], 4);
    return value;
  }
  uint16_t half;
  std::memcpy(&half, &bytes[i * 2], 2);
  return type == ncclFloat16 ? from_half(half) : from_bf16(half);
}

// A rank's add to element i at step s: small integers, so every partial sum is exact in fp16
// (up to 2048) and bf16 (up to 256), in whatever order the owner applies them.
float addend(int rank, int step, size_t i) {
  return float((rank + 1) * int((i + size_t(step)) % 3));
}

// Every rank adds to a tensor of each type, whole (small) and split (over TERSE_PS_SPLIT_BYTES),
// from its own thread; each then receives exactly the initial values plus every rank's adds.
// Before the server was made without the process-wide lock around its allgathers, the second
// rank's init waited for the first's forever.
TEST_F(PsThreads, ExactAddsOfEveryTypeFromRanksThatAreThreads) {
  constexpr int kSteps = 4;
  const ncclDataType_t types[] = {ncclFloat32, ncclFloat16, ncclBfloat16};
  const size_t counts[] = {100, 3000};  // 2 bytes * 3000 > 1K: split over the ranks
  std::vector<std::string> failures(kRanks);
  on_every_rank([&](int rank) {
    std::string& failure = failures[size_t(rank)];
    auto check = [&](ncclResult_t result, const char* what) {
      if (result != ncclSuccess && failure.empty()) {
        failure = std::string(what) + ": " + ncclGetLastError(comms_[rank]);
      }
      return result == ncclSuccess;
    };
    for (ncclDataType_t type : types) {
      for (size_t count : counts) {
        std::vector<float> initial(count);
        for (size_t i = 0; i < count; ++i) initial[i] = float(i % 5);
        const std::vector<uint8_t> initial_bytes = encode(initial, type);
        tersePsTensorDesc desc{};
        desc.name = "threads";
        desc.data = initial_bytes.data();
        desc.count = count;
        desc.datatype = type;
        desc.push_codec = "none";
        desc.receive_codec = "none";
        tersePsHandle_t handle = nullptr;
        if (!check(tersePsInitList(comms_[rank], &desc, 1, &handle), "init")) return;
        for (int step = 0; step < kSteps; ++step) {
          std::vector<float> mine(count);
          for (size_t i = 0; i < count; ++i) mine[i] = addend(rank, step, i);
          const std::vector<uint8_t> bytes = encode(mine, type);
          tersePsRequest_t sync;
          if (!check(tersePsSend(handle, bytes.data(), tersePsAdd, &sync), "send")) return;
          if (!check(tersePsSync(sync), "send's sync")) return;
        }
        // Every rank's adds are applied once every rank's clock reached 1 (staleness 0).
        tersePsRequest_t sync;
        if (!check(tersePsClock(handle, 1, 0, &sync), "clock")) return;
        if (!check(tersePsSync(sync), "clock's sync")) return;
        std::vector<uint8_t> got(initial_bytes.size());
        if (!check(tersePsReceive(handle, got.data(), &sync), "receive")) return;
        if (!check(tersePsSync(sync), "receive's sync")) return;
        for (size_t i = 0; i < count && failure.empty(); ++i) {
          float want = initial[i];
          for (int r = 0; r < kRanks; ++r) {
            for (int step = 0; step < kSteps; ++step) want += addend(r, step, i);
          }
          const float value = decode_at(got, i, type);
          if (value != want) {
            failure = "type " + std::to_string(int(type)) + " count " + std::to_string(count) +
                      " element " + std::to_string(i) + ": " + std::to_string(value) + ", not " +
                      std::to_string(want);
          }
        }
        if (!check(tersePsFree(handle), "free")) return;
      }
    }
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(failures[size_t(rank)].empty())
        << "rank " << rank << ": " << failures[size_t(rank)];
  }
}

// The protocol's fixed sizes (ps/ps_wire.h's structs), for header_bytes.
constexpr uint64_t kRequestHeader = 48, kPayloadPrefix = 8, kReplyHeader = 224;
static_assert(sizeof(terse::PsRequestHeader) == kRequestHeader, "ps_wire.h changed");
static_assert(sizeof(terse::PsPayloadPrefix) == kPayloadPrefix, "ps_wire.h changed");
static_assert(sizeof(terse::PsReplyHeader) == kReplyHeader, "ps_wire.h changed");

// int8's message for `count` fp32 elements at its defaults (block 256, minmax), from the format
// int_quant_codecs.cpp documents: a 32-byte header, an fp32 scale and an fp32 minimum per block,
// one code byte per element.
uint64_t int8_message_bytes(uint64_t count) {
  const uint64_t blocks = (count + 255) / 256;
  return 32 + 4 * blocks + 4 * blocks + count;
}
// bf16's (cast_codecs.cpp): the 32-byte header, then 2 bytes per element.
uint64_t bf16_message_bytes(uint64_t count) {
  return 32 + 2 * count;
}

std::string describe(const tersePsStats& s) {
  return "sends " + std::to_string(s.sends) + " send_bytes " + std::to_string(s.send_bytes) +
         " send_uncompressed_bytes " + std::to_string(s.send_uncompressed_bytes) + " receives " +
         std::to_string(s.receives) + " receive_bytes " + std::to_string(s.receive_bytes) +
         " receive_uncompressed_bytes " + std::to_string(s.receive_uncompressed_bytes) +
         " header_bytes " + std::to_string(s.header_bytes);
}
bool operator==(const tersePsStats& a, const tersePsStats& b) {
  return a.sends == b.sends && a.send_bytes == b.send_bytes &&
         a.send_uncompressed_bytes == b.send_uncompressed_bytes && a.receives == b.receives &&
         a.receive_bytes == b.receive_bytes &&
         a.receive_uncompressed_bytes == b.receive_uncompressed_bytes &&
         a.header_bytes == b.header_bytes;
}

// Each rank's counters after a known sequence of requests equal a model computed here from the
// shard sizes and the codecs' documented formats: an exact tensor split over every rank (3 x 1000
// fp32: 5 adds, a copy, a zero, 2 receives, a clock) and int8 pushes with bf16 receives, split
// (shards of 1000: the last int8 block is short) and whole (100 elements on one owner).
TEST_F(PsThreads, StatsCountEveryPushAndReceiveExactly) {
  constexpr uint64_t kAdds = 5, kReceives = 2;
  struct Case {
    const char* name;
    size_t count;
    const char* push_codec;
    const char* receive_codec;
  };
  // 12000 bytes > TERSE_PS_SPLIT_BYTES (1K): one 1000-element shard per rank; 400 bytes: whole.
  const Case cases[] = {{"exact_split", 3000, "none", "none"},
                        {"int8_split", 3000, "int8", "bf16"},
                        {"int8_whole", 100, "int8", "bf16"}};
  std::vector<std::string> failures(kRanks);
  on_every_rank([&](int rank) {
    std::string& failure = failures[size_t(rank)];
    auto check = [&](ncclResult_t result, const std::string& what) {
      if (result != ncclSuccess && failure.empty()) {
        failure = what + ": " + ncclGetLastError(comms_[rank]);
      }
      return result == ncclSuccess;
    };
    for (const Case& c : cases) {
      std::vector<float> values(c.count);
      for (size_t i = 0; i < c.count; ++i) values[i] = float(i % 7) - 3.0f;
      tersePsTensorDesc desc{};
      desc.name = c.name;
      desc.data = values.data();
      desc.count = c.count;
      desc.datatype = ncclFloat32;
      desc.push_codec = c.push_codec;
      desc.receive_codec = c.receive_codec;
      tersePsHandle_t handle = nullptr;
      if (!check(tersePsInitList(comms_[rank], &desc, 1, &handle), std::string(c.name))) return;
      int nshards = 0;
      tersePsShard shards[kRanks];
      if (!check(tersePsGetLayout(handle, shards, kRanks, &nshards), "layout")) return;
      if (nshards != (c.count == 3000 ? kRanks : 1)) {
        failure = std::string(c.name) + ": " + std::to_string(nshards) + " shards";
        return;
      }
      tersePsStats stats{};
      tersePsStats want{};
      if (!check(tersePsGetStats(handle, &stats), "stats")) return;
      if (!(stats == want)) {
        failure = std::string(c.name) + " after init: " + describe(stats);
        return;
      }
      const bool exact = std::string(c.push_codec) == "none";
      // `made` is the call that set `sync` (evaluated before the body reads it).
      tersePsRequest_t sync = nullptr;
      auto sync_one = [&](ncclResult_t made, const char* what) {
        return check(made, what) && check(tersePsSync(sync), what);
      };
      for (uint64_t add = 0; add < kAdds; ++add) {
        if (!sync_one(tersePsSend(handle, values.data(), tersePsAdd, &sync), "add")) return;
      }
      uint64_t sends = kAdds, payloads = kAdds;
      if (exact) {
        if (!sync_one(tersePsSend(handle, values.data(), tersePsCopy, &sync), "copy")) {
          return;
        }
        if (!sync_one(tersePsSend(handle, nullptr, tersePsZero, &sync), "zero")) return;
        sends += 2;
        payloads += 1;  // a zero carries no values
      }
      std::vector<float> got(c.count);
      for (uint64_t r = 0; r < kReceives; ++r) {
        if (!sync_one(tersePsReceive(handle, got.data(), &sync), "receive")) return;
      }
      if (!sync_one(tersePsClock(handle, 1, 0, &sync), "clock")) return;

      // The model: per shard, what each message carries.
      uint64_t owners = 0;
      for (int s = 0; s < nshards; ++s) {
        const uint64_t count = shards[s].count;
        want.send_bytes += payloads * (exact ? count * 4 : int8_message_bytes(count));
        want.send_uncompressed_bytes += payloads * count * 4;
        want.receive_bytes += kReceives * (exact ? count * 4 : bf16_message_bytes(count));
        want.receive_uncompressed_bytes += kReceives * count * 4;
        bool seen = false;
        for (int t = 0; t < s; ++t) seen = seen || shards[t].owner == shards[s].owner;
        if (!seen) ++owners;
      }
      want.sends = sends;
      want.receives = kReceives;
      const uint64_t messages = uint64_t(nshards) * (sends + kReceives) + owners;  // 1 clock each
      want.header_bytes = messages * (kRequestHeader + kReplyHeader) +
                          uint64_t(nshards) * payloads * kPayloadPrefix;
      if (!check(tersePsGetStats(handle, &stats), "stats")) return;
      if (!(stats == want)) {
        failure = std::string(c.name) + ": " + describe(stats) + "; want " + describe(want);
        return;
      }
      if (!check(tersePsFree(handle), "free")) return;
    }
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(failures[size_t(rank)].empty())
        << "rank " << rank << ": " << failures[size_t(rank)];
  }
}

// One rank's bad push codec fails every rank at once with the same result and a sentence (the
// others' says which rank), instead of leaving them in init's collectives; a correct init
// right after works on every rank.
TEST_F(PsThreads, OneRanksBadArgumentFailsEveryRankAlikeAndPromptly) {
  std::vector<ncclResult_t> results(kRanks, ncclSuccess), again(kRanks, ncclInternalError);
  std::vector<std::string> messages(kRanks);
  std::vector<double> seconds(kRanks, 0);
  on_every_rank([&](int rank) {
    std::vector<float> data(64, 1.0f);
    tersePsTensorDesc desc{};
    desc.name = "bad_on_one";
    desc.data = data.data();
    desc.count = data.size();
    desc.datatype = ncclFloat32;
    desc.push_codec = rank == 1 ? "no_such_codec" : "none";
    tersePsHandle_t handle = nullptr;
    const auto start = std::chrono::steady_clock::now();
    results[size_t(rank)] = tersePsInitList(comms_[rank], &desc, 1, &handle);
    seconds[size_t(rank)] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    messages[size_t(rank)] = ncclGetLastError(comms_[rank]);
    desc.push_codec = "none";
    again[size_t(rank)] = tersePsInitList(comms_[rank], &desc, 1, &handle);
    if (again[size_t(rank)] == ncclSuccess) again[size_t(rank)] = tersePsFree(handle);
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(results[size_t(rank)], ncclInvalidArgument) << "rank " << rank;
    EXPECT_LT(seconds[size_t(rank)], kTimeoutSeconds / 2.0) << "rank " << rank;
    const std::string& message = messages[size_t(rank)];
    EXPECT_NE(message.find(rank == 1 ? "no_such_codec" : "rank 1"), std::string::npos)
        << "rank " << rank << ": " << message;
    EXPECT_EQ(again[size_t(rank)], ncclSuccess) << "rank " << rank << ": the next init";
  }
}

// A free while this rank's receive and add are in flight: the requests end (answered, or failed
// as closed under them), the free works, nothing is left writing into freed memory (ASan).
TEST_F(PsThreads, FreeWithRequestsInFlight) {
  std::vector<std::string> failures(kRanks);
  on_every_rank([&](int rank) {
    std::vector<float> data(50000, 1.0f), got(data.size());
    tersePsHandle_t handle = nullptr;
    if (tersePsInit(comms_[rank], "in_flight", data.data(), data.size(), ncclFloat32, &handle) !=
        ncclSuccess) {
      failures[size_t(rank)] = std::string("init: ") + ncclGetLastError(comms_[rank]);
      return;
    }
    tersePsRequest_t add, receive;
    tersePsSend(handle, data.data(), tersePsAdd, &add);
    tersePsReceive(handle, got.data(), &receive);
    const ncclResult_t freed = tersePsFree(handle);
    const ncclResult_t added = tersePsSync(add), received = tersePsSync(receive);
    if (freed != ncclSuccess) failures[size_t(rank)] = "free failed";
    for (ncclResult_t result : {added, received}) {
      if (result != ncclSuccess && result != ncclInvalidUsage && result != ncclRemoteError) {
        failures[size_t(rank)] = std::string("a request ended with ") + ncclGetErrorString(result);
      }
    }
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(failures[size_t(rank)].empty())
        << "rank " << rank << ": " << failures[size_t(rank)];
  }
}

// Handles outlive their communicator: after ncclCommAbort each free releases its side at once
// (ncclSuccess) without waiting for the others; after ncclCommDestroy it does the same and says
// the order was wrong (ncclInvalidUsage). Before handles held a use of the communicator, the
// free read the freed communicator.
TEST_F(PsThreads, FreeAfterTheCommunicatorWasAbortedOrDestroyed) {
  for (bool abort : {true, false}) {
    SCOPED_TRACE(abort ? "abort" : "destroy");
    std::vector<tersePsHandle_t> handles(kRanks, nullptr);
    std::vector<float> data(4096, 2.0f);
    on_every_rank([&](int rank) {
      EXPECT_EQ(tersePsInit(comms_[rank], "outlives", data.data(), data.size(), ncclFloat32,
                            &handles[size_t(rank)]),
                ncclSuccess)
          << ncclGetLastError(comms_[rank]);
    });
    for (ncclComm_t& comm : comms_) {
      EXPECT_EQ(abort ? ncclCommAbort(comm) : ncclCommDestroy(comm), ncclSuccess);
      comm = nullptr;
    }
    for (int rank = 0; rank < kRanks; ++rank) {
      if (handles[size_t(rank)] == nullptr) continue;
      const auto start = std::chrono::steady_clock::now();
      const ncclResult_t result = tersePsFree(handles[size_t(rank)]);
      EXPECT_EQ(result, abort ? ncclSuccess : ncclInvalidUsage) << ncclGetLastError(nullptr);
      if (!abort) {
        EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("destroyed"), std::string::npos);
      }
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                kTimeoutSeconds / 2.0);
    }
    // A fresh communicator (perhaps at a freed one's address) gets a server of its own.
    ASSERT_EQ(ncclCommInitAll(comms_, kRanks, nullptr), ncclSuccess);
    on_every_rank([&](int rank) {
      tersePsHandle_t handle = nullptr;
      ASSERT_EQ(tersePsInit(comms_[rank], "fresh", data.data(), data.size(), ncclFloat32, &handle),
                ncclSuccess)
          << ncclGetLastError(comms_[rank]);
      std::vector<float> got(data.size());
      tersePsRequest_t sync;
      ASSERT_EQ(tersePsReceive(handle, got.data(), &sync), ncclSuccess);
      EXPECT_EQ(tersePsSync(sync), ncclSuccess) << ncclGetLastError(comms_[rank]);
      EXPECT_EQ(got, data);
      EXPECT_EQ(tersePsFree(handle), ncclSuccess);
    });
  }
}

}  // namespace
