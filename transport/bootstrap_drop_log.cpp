#include "transport/bootstrap_drop_log.h"

#include "common/log.h"

namespace terse {
namespace {

constexpr double kLineSeconds = 1.0;

}  // namespace

void BootstrapDropLog::dropped(const std::string& reason, const std::string& from) {
  ++total_;
  if (pending_count_ == 0 && quiet_until_.expired()) {
    TERSE_WARN("bootstrap root: dropped a connection from %s: %s", from.c_str(), reason.c_str());
    quiet_until_ = Deadline::after_seconds(kLineSeconds);
    return;
  }
  ++pending_[reason];
  ++pending_count_;
  last_from_ = from;
}

void BootstrapDropLog::flush_if_due() {
  if (pending_count_ > 0 && quiet_until_.expired()) write_summary();
}

void BootstrapDropLog::flush() {
  if (pending_count_ > 0) write_summary();
}

Deadline BootstrapDropLog::next_flush() const {
  return pending_count_ > 0 ? quiet_until_ : Deadline::after_seconds(3600);
}

void BootstrapDropLog::write_summary() {
  std::string reasons;
  for (const auto& [reason, count] : pending_) {
    reasons += (reasons.empty() ? "" : "; ") + std::to_string(count) + " " + reason;
  }
  TERSE_WARN("bootstrap root: dropped %zu more connections (%s), the last from %s", pending_count_,
             reasons.c_str(), last_from_.c_str());
  pending_.clear();
  pending_count_ = 0;
  quiet_until_ = Deadline::after_seconds(kLineSeconds);
}

}  // namespace terse
