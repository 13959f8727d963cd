// Drives a send comm and/or a receive comm of a LoadedNet the way NCCL's proxy does: post while
// fewer than `in_flight` requests are outstanding (an isend that returns no request is posted
// again later), test the outstanding ones in order, one thread doing all of it. Message k has
// sizes[k] bytes whose content both ends compute alike (pattern_byte, or bf16 gradient-like
// values), so the receiver checks every byte and the size test() reports. Every wait has a
// deadline: a hang becomes a failure naming what was outstanding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plugin/net/driver/loaded_net.h"

namespace terse::test {

struct Traffic {
  std::vector<size_t> sizes;
  int in_flight = 8;
  size_t receive_slack = 0;  // receive buffers this much larger than the message
  bool gradient = false;     // bf16 gradient-like content (compressible) instead of hashed bytes
  int tag = 7;
  double seconds_allowed = 120;
};

// Fills `size` bytes of message `index`.
void fill_message(size_t index, size_t size, bool gradient, uint8_t* out);

// Runs the traffic; either comm may be null (the other end is another thread or process).
// Returns "" or what went wrong.
std::string drive(LoadedNet& net, void* send_comm, void* recv_comm, const Traffic& traffic);

// Ping-pong: message k goes one way, then back, one request at a time, and each side waits on
// that one request alone (a process waiting for its receive does not touch its send comm, as in
// a latency test). `sends_first` on one end, not on the other. The messages of `traffic.sizes`
// in turn; `in_flight` is ignored.
std::string ping_pong(LoadedNet& net, void* send_comm, void* recv_comm, const Traffic& traffic,
                      bool sends_first);

// The ping-pong's messages: 200, sizes on both sides of the default eager bound (16 KiB) in
// turn, receive buffers `receive_slack` bytes larger (so with slack every receive announces
// itself even for a message that goes eagerly).
Traffic pingpong_traffic(size_t receive_slack);

// Connects a send comm to `handle` and accepts on `listen_comm` in turns from one thread, either
// may be null; "" or what failed.
std::string connect_and_accept(LoadedNet& net, int dev, void* handle, void** send_comm,
                               void* listen_comm, void** recv_comm, double seconds_allowed = 60);

// 1 B to 64 MiB: every power of two and, between them, sizes that are not multiples of 4.
std::vector<size_t> sizes_up_to(size_t largest);

}  // namespace terse::test
