#include "plugin/net/driver/net_traffic.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>

#include "common/counter_rng.h"

namespace terse::test {
namespace {

using Clock = std::chrono::steady_clock;

uint16_t bf16_of(float value) {
  uint32_t bits;
  memcpy(&bits, &value, 4);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

struct Pending {
  void* request = nullptr;
  size_t index = 0;
  std::vector<uint8_t> buffer;
  void* mhandle = nullptr;
};

}  // namespace

void fill_message(size_t index, size_t size, bool gradient, uint8_t* out) {
  if (!gradient) {
    for (size_t i = 0; i < size; i += 8) {
      uint64_t word = mix64(index * 0x9e3779b97f4a7c15ull + i);
      memcpy(out + i, &word, std::min<size_t>(8, size - i));
    }
    return;
  }
  // Normal values of scale 1e-3 as bf16: exponents cluster, mantissas look random.
  for (size_t i = 0; i + 1 < size; i += 2) {
    uint64_t a = mix64(index * 1315423911ull + i);
    double u1 = ((a >> 11) + 1) * 0x1.0p-53;
    double u2 = (mix64(a) >> 11) * 0x1.0p-53;
    float value =
        static_cast<float>(1e-3 * std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    uint16_t bits = bf16_of(value);
    memcpy(out + i, &bits, 2);
  }
  if (size % 2 == 1) out[size - 1] = static_cast<uint8_t>(index);
}

std::string ping_pong(LoadedNet& net, void* send_comm, void* recv_comm, const Traffic& traffic,
                      bool sends_first) {
  for (size_t k = 0; k < traffic.sizes.size(); ++k) {
    Traffic one = traffic;
    one.sizes = {traffic.sizes[k]};
    one.in_flight = 1;
    for (int turn = 0; turn < 2; ++turn) {
      const bool sending = (turn == 0) == sends_first;
      std::string error =
          sending ? drive(net, send_comm, nullptr, one) : drive(net, nullptr, recv_comm, one);
      if (!error.empty()) {
        return std::string(sending ? "sending" : "receiving") + " message " + std::to_string(k) +
               " of " + std::to_string(one.sizes[0]) + " bytes: " + error;
      }
    }
  }
  return std::string();
}

Traffic pingpong_traffic(size_t receive_slack) {
  Traffic traffic;
  for (int round = 0; round < 40; ++round) {
    for (size_t size : {size_t{8}, size_t{1000}, size_t{16384}, size_t{16385}, size_t{100000}}) {
      traffic.sizes.push_back(size);
    }
  }
  traffic.receive_slack = receive_slack;
  traffic.seconds_allowed = 30;
  return traffic;
}

std::vector<size_t> sizes_up_to(size_t largest) {
  std::vector<size_t> sizes;
  for (size_t size = 1; size <= largest; size *= 2) {
    sizes.push_back(size);
    if (size >= 4 && size * 3 / 2 + 1 <= largest) sizes.push_back(size * 3 / 2 + 1);
  }
  return sizes;
}

std::string connect_and_accept(LoadedNet& net, int dev, void* handle, void** send_comm,
                               void* listen_comm, void** recv_comm, double seconds_allowed) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds_allowed);
  if (send_comm != nullptr) *send_comm = nullptr;
  if (recv_comm != nullptr) *recv_comm = nullptr;
  for (;;) {
    bool send_done = send_comm == nullptr || *send_comm != nullptr;
    bool recv_done = recv_comm == nullptr || *recv_comm != nullptr;
    if (send_done && recv_done) return std::string();
    if (Clock::now() > deadline) return "connect/accept did not finish before the deadline";
    if (!send_done) {
      ncclResult_t result = net.connect(dev, handle, send_comm);
      if (result != ncclSuccess) return "connect failed: " + std::to_string(result);
    }
    if (!recv_done) {
      ncclResult_t result = net.accept(listen_comm, recv_comm);
      if (result != ncclSuccess) return "accept failed: " + std::to_string(result);
    }
  }
}

std::string drive(LoadedNet& net, void* send_comm, void* recv_comm, const Traffic& traffic) {
  auto deadline = Clock::now() + std::chrono::duration<double>(traffic.seconds_allowed);
  std::deque<std::unique_ptr<Pending>> sends, receives;
  size_t next_send = send_comm ? 0 : traffic.sizes.size();
  size_t next_recv = recv_comm ? 0 : traffic.sizes.size();
  std::unique_ptr<Pending> unposted;  // a send whose isend returned no request yet
  std::vector<uint8_t> expected;
  while (next_send < traffic.sizes.size() || next_recv < traffic.sizes.size() || !sends.empty() ||
         !receives.empty() || unposted) {
    if (Clock::now() > deadline) {
      return "deadline passed with " + std::to_string(sends.size()) + " sends and " +
             std::to_string(receives.size()) + " receives outstanding (next send " +
             std::to_string(next_send) + ", next receive " + std::to_string(next_recv) + ")";
    }
    // Post receives.
    while (next_recv < traffic.sizes.size() &&
           static_cast<int>(receives.size()) < traffic.in_flight) {
      auto pending = std::make_unique<Pending>();
      pending->index = next_recv;
      size_t capacity = traffic.sizes[next_recv] + traffic.receive_slack;
      pending->buffer.assign(capacity, 0xEE);
      if (net.reg_mr(recv_comm, pending->buffer.data(), capacity, netabi::kPtrHost,
                     &pending->mhandle) != ncclSuccess) {
        return "regMr of a receive buffer failed";
      }
      void* data = pending->buffer.data();
      int tag = traffic.tag;
      ncclResult_t result =
          net.irecv(recv_comm, 1, &data, &capacity, &tag, &pending->mhandle, &pending->request);
      if (result != ncclSuccess) return "irecv failed: " + std::to_string(result);
      if (pending->request == nullptr) {  // NCCL would try again later
        net.dereg_mr(recv_comm, pending->mhandle);
        break;
      }
      receives.push_back(std::move(pending));
      ++next_recv;
    }
    // Post sends.
    while ((unposted || next_send < traffic.sizes.size()) &&
           static_cast<int>(sends.size()) < traffic.in_flight) {
      if (!unposted) {
        unposted = std::make_unique<Pending>();
        unposted->index = next_send;
        size_t size = traffic.sizes[next_send];
        unposted->buffer.resize(size);
        fill_message(next_send, size, traffic.gradient, unposted->buffer.data());
        if (net.reg_mr(send_comm, unposted->buffer.data(), size, netabi::kPtrHost,
                       &unposted->mhandle) != ncclSuccess) {
          return "regMr of a send buffer failed";
        }
        ++next_send;
      }
      ncclResult_t result = net.isend(send_comm, unposted->buffer.data(), unposted->buffer.size(),
                                      traffic.tag, unposted->mhandle, &unposted->request);
      if (result != ncclSuccess) return "isend failed: " + std::to_string(result);
      if (unposted->request == nullptr) break;  // no matching receive yet
      sends.push_back(std::move(unposted));
    }
    // Test the oldest of each.
    if (!sends.empty()) {
      int done = 0, size = -1;
      ncclResult_t result = net.test(sends.front()->request, &done, &size);
      if (result != ncclSuccess) return "test of a send failed: " + std::to_string(result);
      if (done) {
        Pending& pending = *sends.front();
        if (static_cast<size_t>(size) != pending.buffer.size()) {
          return "a send of " + std::to_string(pending.buffer.size()) + " bytes reported " +
                 std::to_string(size);
        }
        net.dereg_mr(send_comm, pending.mhandle);
        sends.pop_front();
      }
    }
    if (!receives.empty()) {
      int done = 0, size = -1;
      ncclResult_t result = net.test(receives.front()->request, &done, &size);
      if (result != ncclSuccess) return "test of a receive failed: " + std::to_string(result);
      if (done) {
        Pending& pending = *receives.front();
        size_t sent = traffic.sizes[pending.index];
        if (static_cast<size_t>(size) != sent) {
          return "message " + std::to_string(pending.index) + " of " + std::to_string(sent) +
                 " bytes arrived as " + std::to_string(size);
        }
        expected.resize(sent);
        fill_message(pending.index, sent, traffic.gradient, expected.data());
        if (memcmp(expected.data(), pending.buffer.data(), sent) != 0) {
          size_t at = 0;
          while (expected[at] == pending.buffer[at]) ++at;
          return "message " + std::to_string(pending.index) + " of " + std::to_string(sent) +
                 " bytes differs at byte " + std::to_string(at);
        }
        for (size_t i = sent; i < pending.buffer.size(); ++i) {
          if (pending.buffer[i] != 0xEE) {
            return "message " + std::to_string(pending.index) + " wrote past its " +
                   std::to_string(sent) + " bytes";
          }
        }
        net.dereg_mr(recv_comm, pending.mhandle);
        receives.pop_front();
      }
    }
  }
  return std::string();
}

}  // namespace terse::test
