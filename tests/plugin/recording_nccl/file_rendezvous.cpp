#include "file_rendezvous.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

namespace recording_nccl {
namespace {

double timeout_seconds() {
  const char* text = getenv("RECORDING_NCCL_TIMEOUT_S");
  return text != nullptr ? atof(text) : 60.0;
}

std::string base_directory() {
  for (const char* name : {"RECORDING_NCCL_DIR", "TMPDIR"}) {
    const char* value = getenv(name);
    if (value != nullptr && value[0] != '\0') return value;
  }
  return "/tmp";
}

}  // namespace

bool make_directory(std::string* path) {
  std::string pattern = base_directory() + "/recording-nccl-XXXXXX";
  if (mkdtemp(&pattern[0]) == nullptr) return false;
  *path = pattern;
  return true;
}

bool publish(const std::string& dir, const std::string& name, const void* data, size_t bytes) {
  const std::string temporary = dir + "/." + name + ".tmp";
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return false;
  const char* next = static_cast<const char*>(data);
  size_t left = bytes;
  while (left > 0) {
    const ssize_t written = write(fd, next, left);
    if (written <= 0) {
      close(fd);
      return false;
    }
    next += written;
    left -= static_cast<size_t>(written);
  }
  close(fd);
  return rename(temporary.c_str(), (dir + "/" + name).c_str()) == 0;
}

bool fetch(const std::string& dir, const std::string& name, std::vector<char>* bytes,
           std::string* message) {
  const std::string path = dir + "/" + name;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds()));
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      *message = "recording stand-in: no " + path + " within RECORDING_NCCL_TIMEOUT_S";
      return false;
    }
    // Polling a condition with a deadline: the sleep only spaces the polls.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void remove_file(const std::string& dir, const std::string& name) {
  unlink((dir + "/" + name).c_str());
}

void remove_directory(const std::string& dir) {
  DIR* listing = opendir(dir.c_str());
  if (listing != nullptr) {
    while (dirent* entry = readdir(listing)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") unlink((dir + "/" + name).c_str());
    }
    closedir(listing);
  }
  rmdir(dir.c_str());
}

}  // namespace recording_nccl
