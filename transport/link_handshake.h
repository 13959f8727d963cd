// The out-of-band side of a link (link.h): a TCP connection over which the two ends swap one
// frame each (their worker addresses, plus whatever the caller adds) without ever blocking, and
// which then stays open as the peer's lifeline: a frame the peer sends as it closes ("bye"), or
// end-of-file without one, which means its process is gone. The ncclNet plugin needs both,
// because NCCL calls connect/accept again and again until they finish, and because a link with
// UcxErrorMode::kNone (shared memory to a same-host peer) hears nothing from UCX when the peer
// dies.
//
// A frame is a 4-byte little-endian length and that many bytes (at most kMaxFrameBytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/result.h"
#include "transport/socket.h"

namespace terse {

constexpr size_t kMaxFrameBytes = 1 << 16;

// Sends one frame and receives one, in whichever order the socket allows.
class FrameExchange {
 public:
  FrameExchange() = default;
  explicit FrameExchange(const std::vector<uint8_t>& outgoing);

  // Moves what the socket takes and gives now. `*done` once both frames are through. Fails with
  // Result::kRemoteError when the peer closes or the frame it announces is too large.
  Result step(const Socket& socket, bool* done);
  const std::vector<uint8_t>& received() const { return incoming_; }

 private:
  std::vector<uint8_t> outgoing_;  // length prefix included
  size_t sent_ = 0;
  uint8_t length_bytes_[4] = {};
  size_t length_received_ = 0;
  std::vector<uint8_t> incoming_;
  size_t received_ = 0;
};

// Reads the lifeline after the exchange: at most one frame, then end-of-file.
class PeerLifeline {
 public:
  enum class State { kOpen, kClosedGracefully, kGone };

  // Reads whatever arrived without waiting and returns the state. Once a frame arrived,
  // `farewell()` holds it.
  State poll(const Socket& socket);
  State state() const { return state_; }
  const std::vector<uint8_t>& farewell() const { return farewell_; }

 private:
  std::vector<uint8_t> bytes_;  // the farewell frame so far, length prefix included
  std::vector<uint8_t> farewell_;
  State state_ = State::kOpen;
};

// Sends one frame, waiting at most until `deadline` (a close's last word; the peer's kernel takes
// it without the peer's help unless its buffer is full).
Result send_frame(const Socket& socket, const std::vector<uint8_t>& frame,
                  const Deadline& deadline);

}  // namespace terse
