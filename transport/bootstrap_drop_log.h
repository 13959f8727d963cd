// What the bootstrap root says about connections it drops, at most one line a second. A port
// scanner or a stray job can open thousands of connections; one WARN line each would bury the
// job's own output (and cost the root time it owes the ranks). The first drop after a quiet
// second is logged at once with its reason and address; the ones after it are counted by reason
// and summed up in one line when the second is over.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "transport/deadline.h"

namespace terse {

class BootstrapDropLog {
 public:
  // One dropped connection from `from`, for `reason` (a short phrase: "silent for 2 s").
  void dropped(const std::string& reason, const std::string& from);
  // Writes the summary line if a second has passed since the last line and drops are pending.
  void flush_if_due();
  // Writes the pending summary now (the root is done).
  void flush();
  // When flush_if_due has something to write (far away when nothing is pending).
  Deadline next_flush() const;

  // Totals since the root started, for its closing INFO line.
  size_t total() const { return total_; }

 private:
  void write_summary();

  std::map<std::string, size_t> pending_;  // by reason
  size_t pending_count_ = 0;
  std::string last_from_;
  Deadline quiet_until_ = Deadline::after_seconds(0);
  size_t total_ = 0;
};

}  // namespace terse
