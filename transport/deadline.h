// A point in time after which a wait gives up. Every blocking step in the transport (socket I/O,
// connect retries, UCX request completion) takes one, so no call can hang past it.
#pragma once

#include <algorithm>
#include <chrono>

namespace terse {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline after_seconds(double seconds) {
    return Deadline(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(seconds)));
  }
  static Deadline at(Clock::time_point when) { return Deadline(when); }

  bool expired() const { return Clock::now() >= when_; }
  Clock::time_point when() const { return when_; }

  double seconds_left() const {
    return std::max(0.0, std::chrono::duration<double>(when_ - Clock::now()).count());
  }

  // Milliseconds for poll(): never negative, rounded up so that a wait does not wake just
  // before the deadline and spin, and at most `cap_ms` so callers can re-check other state.
  int poll_timeout_ms(int cap_ms) const {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(when_ - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, cap_ms));
  }

  // The earlier of the two.
  Deadline min(const Deadline& other) const { return when_ <= other.when_ ? *this : other; }

 private:
  explicit Deadline(Clock::time_point when) : when_(when) {}
  Clock::time_point when_;
};

}  // namespace terse
