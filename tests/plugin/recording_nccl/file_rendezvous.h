// How the recording stand-in's ranks (threads of one process or separate processes) meet: a
// directory named by the unique id, where each rank publishes a file per step (written under a
// temporary name, then renamed, so a reader sees a whole file or none) and reads its peers'.
// Every wait polls for a file with a deadline (RECORDING_NCCL_TIMEOUT_S, default 60 s), so a
// missing peer is an error, never a hang.
#pragma once

#include <string>
#include <vector>

namespace recording_nccl {

// A fresh directory for one communicator: under RECORDING_NCCL_DIR, else TMPDIR, else /tmp.
bool make_directory(std::string* path);

// Writes `bytes` as `dir/name`, atomically visible.
bool publish(const std::string& dir, const std::string& name, const void* data, size_t bytes);
// Waits for `dir/name` and reads it; false at the deadline (the message says which file).
bool fetch(const std::string& dir, const std::string& name, std::vector<char>* bytes,
           std::string* message);
void remove_file(const std::string& dir, const std::string& name);
// Removes `dir` and everything in it.
void remove_directory(const std::string& dir);

}  // namespace recording_nccl
