#include "transport/link_handshake.h"

#include <sys/socket.h>

#include <algorithm>

#include "common/result.h"

namespace terse {
namespace {

void put_length(uint32_t length, uint8_t* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(length >> (8 * i));
}

uint32_t get_length(const uint8_t* in) {
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i) length |= static_cast<uint32_t>(in[i]) << (8 * i);
  return length;
}

}  // namespace

FrameExchange::FrameExchange(const std::vector<uint8_t>& outgoing) {
  outgoing_.resize(4 + outgoing.size());
  put_length(static_cast<uint32_t>(outgoing.size()), outgoing_.data());
  std::copy(outgoing.begin(), outgoing.end(), outgoing_.begin() + 4);
}

Result FrameExchange::step(const Socket& socket, bool* done) {
  while (sent_ < outgoing_.size()) {
    ssize_t sent = socket.send_available(outgoing_.data() + sent_, outgoing_.size() - sent_);
    if (sent < 0) {
      return fail(Result::kRemoteError, "the link handshake with %s failed while sending",
                  socket.peer_address().to_string().c_str());
    }
    if (sent == 0) break;
    sent_ += static_cast<size_t>(sent);
  }
  while (length_received_ < 4) {
    ssize_t got = socket.recv_available(length_bytes_ + length_received_, 4 - length_received_);
    if (got < 0) {
      return fail(Result::kRemoteError, "%s closed the link handshake before its frame arrived",
                  socket.peer_address().to_string().c_str());
    }
    if (got == 0) break;
    length_received_ += static_cast<size_t>(got);
    if (length_received_ == 4) {
      uint32_t length = get_length(length_bytes_);
      if (length > kMaxFrameBytes) {
        return fail(Result::kRemoteError,
                    "%s announced a %u-byte handshake frame (at most %zu): not a terse link",
                    socket.peer_address().to_string().c_str(), length, kMaxFrameBytes);
      }
      incoming_.resize(length);
    }
  }
  while (length_received_ == 4 && received_ < incoming_.size()) {
    ssize_t got = socket.recv_available(incoming_.data() + received_, incoming_.size() - received_);
    if (got < 0) {
      return fail(Result::kRemoteError, "%s closed the link handshake in the middle of its frame",
                  socket.peer_address().to_string().c_str());
    }
    if (got == 0) break;
    received_ += static_cast<size_t>(got);
  }
  *done = sent_ == outgoing_.size() && length_received_ == 4 && received_ == incoming_.size();
  return Result::kSuccess;
}

PeerLifeline::State PeerLifeline::poll(const Socket& socket) {
  if (state_ != State::kOpen) return state_;
  for (;;) {
    size_t want = bytes_.size() < 4 ? 4 : 4 + get_length(bytes_.data());
    if (bytes_.size() >= 4 && want > 4 + kMaxFrameBytes) {
      state_ = State::kGone;  // not a farewell: treat the peer as broken
      return state_;
    }
    if (bytes_.size() == want && want > 4) {
      farewell_.assign(bytes_.begin() + 4, bytes_.end());
      state_ = State::kClosedGracefully;
      return state_;
    }
    uint8_t chunk[256];
    size_t take = std::min(sizeof(chunk), want - bytes_.size());
    ssize_t got = socket.recv_available(chunk, take);
    if (got == 0) return state_;
    if (got < 0) {
      // End-of-file (or a reset) before a whole farewell: the process went away without closing.
      state_ = State::kGone;
      return state_;
    }
    bytes_.insert(bytes_.end(), chunk, chunk + got);
  }
}

Result send_frame(const Socket& socket, const std::vector<uint8_t>& frame,
                  const Deadline& deadline) {
  std::vector<uint8_t> bytes(4 + frame.size());
  put_length(static_cast<uint32_t>(frame.size()), bytes.data());
  std::copy(frame.begin(), frame.end(), bytes.begin() + 4);
  return socket.send_all(bytes.data(), bytes.size(), deadline, "a link's farewell");
}

}  // namespace terse
