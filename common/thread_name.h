// Names terse's background threads ("terse-root", "terse-close", ...), as NCCL names its own:
// they show in top -H, gdb and /proc/<pid>/task/<tid>/comm, so a user (or a test) can tell what
// a process is running.
#pragma once

#include <pthread.h>

namespace terse {

// `name` at most 15 characters (the kernel's limit); longer names are cut.
inline void name_this_thread(const char* name) {
  char cut[16] = {};
  for (int i = 0; i < 15 && name[i] != '\0'; ++i) cut[i] = name[i];
  pthread_setname_np(pthread_self(), cut);
}

}  // namespace terse
