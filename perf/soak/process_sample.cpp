#include "perf/soak/process_sample.h"

#include <dirent.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace terse {
namespace soak {
namespace {

// The number after "<field>:" in /proc/self/status.
void read_status(ProcessSample* sample) {
  FILE* file = std::fopen("/proc/self/status", "r");
  if (file == nullptr) return;
  char line[256];
  while (std::fgets(line, sizeof(line), file) != nullptr) {
    const auto field = [&](const char* name, uint64_t* out) {
      const size_t n = std::strlen(name);
      if (std::strncmp(line, name, n) == 0 && line[n] == ':') {
        *out = std::strtoull(line + n + 1, nullptr, 10);
      }
    };
    field("VmRSS", &sample->rss_kb);
    field("VmHWM", &sample->hwm_kb);
    field("Threads", &sample->threads);
  }
  std::fclose(file);
}

uint64_t count_fds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  uint64_t entries = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++entries;
  }
  closedir(dir);
  return entries > 0 ? entries - 1 : 0;  // the directory's own descriptor
}

}  // namespace

ProcessSample sample_process() {
  ProcessSample sample;
  read_status(&sample);
  sample.fds = count_fds();
  const struct mallinfo2 info = mallinfo2();
  sample.heap_bytes = static_cast<uint64_t>(info.uordblks) + static_cast<uint64_t>(info.hblkhd);
  return sample;
}

}  // namespace soak
}  // namespace terse
