#include "transport_test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace terse {
namespace test {

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  const char* old = getenv(name);
  had_value_ = old != nullptr;
  if (had_value_) old_value_ = old;
  if (value != nullptr) {
    setenv(name, value, 1);
  } else {
    unsetenv(name);
  }
}

ScopedEnv::~ScopedEnv() {
  if (had_value_) {
    setenv(name_.c_str(), old_value_.c_str(), 1);
  } else {
    unsetenv(name_.c_str());
  }
}

void run_ranks(int nranks, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; ++rank) threads.emplace_back(body, rank);
  for (std::thread& thread : threads) thread.join();
}

int free_tcp_port(const char* host) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    length = sizeof(*v4);
  } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    length = sizeof(*v6);
  } else {
    return 0;
  }
  int fd = socket(storage.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&storage), length) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) == 0) {
    port = ntohs(storage.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
  }
  close(fd);
  return port;
}

}  // namespace test
}  // namespace terse
