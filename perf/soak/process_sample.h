// What this process holds now, from /proc/self and the allocator: resident memory, heap in use,
// threads and open file descriptors (the soak's checkpoints, flatness.h).
#pragma once

#include <cstdint>

namespace terse {
namespace soak {

struct ProcessSample {
  uint64_t rss_kb = 0;      // VmRSS of /proc/self/status
  uint64_t hwm_kb = 0;      // VmHWM: the peak resident set
  uint64_t heap_bytes = 0;  // malloc's bytes in use (mallinfo2: uordblks + hblkhd)
  uint64_t threads = 0;     // Threads of /proc/self/status
  uint64_t fds = 0;         // entries of /proc/self/fd, less the one listing them
};

// Reads them; a field that cannot be read stays 0.
ProcessSample sample_process();

}  // namespace soak
}  // namespace terse
