// Which operating-system process a rank is, precisely enough to ask later whether it still
// exists. Ranks on one host talk over shared memory, where UCX cannot report a dead peer
// (transport_settings.h); for those the transport asks the kernel instead (is_gone()).
#pragma once

#include <cstdint>
#include <string>

namespace terse {

struct ProcessIdentity {
  // The kernel's boot id and the PID namespace: two processes with equal process spaces see the
  // same PIDs, so one can look the other up by `pid`. Empty when unknown (never equal then).
  std::string process_space;
  int32_t pid = 0;
  // The process start time (clock ticks after boot, /proc/<pid>/stat field 22): tells the
  // process apart from a later one that reuses its PID.
  uint64_t start_time = 0;
};

ProcessIdentity this_process();

// Whether `other` can be checked from this process with is_gone().
bool shares_process_space(const ProcessIdentity& mine, const ProcessIdentity& other);

// Whether `a` and `b` are the same process (ranks of it are threads).
bool same_process(const ProcessIdentity& a, const ProcessIdentity& b);

// True when the process has exited: no such PID, a zombie (killed but not yet reaped by its
// parent), or the PID now belongs to a process started later. Reads one /proc file: cheap
// enough for every few milliseconds, not for every message.
bool is_gone(const ProcessIdentity& process);

}  // namespace terse
