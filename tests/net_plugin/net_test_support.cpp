#include "net_test_support.h"

#include <cstdarg>
#include <cstdio>
#include <map>
#include <memory>

namespace terse::test {
namespace {

std::mutex& lines_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::vector<std::string>& lines() {
  static std::vector<std::string> all;
  return all;
}

}  // namespace

void capture_logger(netabi::LogLevel level, unsigned long /*flags*/, const char* /*file*/,
                    int /*line*/, const char* format, ...) {
  char text[2048];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(lines_mutex());
  lines().push_back((level == netabi::kLogWarn ? "WARN " : "INFO ") + std::string(text));
}

std::vector<std::string> captured_lines() {
  std::lock_guard<std::mutex> lock(lines_mutex());
  return lines();
}

LoadedNet& net_for_version(int version) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<LoadedNet>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = loaded[version];
  if (!slot) {
    slot = std::make_unique<LoadedNet>();
    std::string error = slot->load(net_plugin_path(), version);
    EXPECT_EQ(error, "");
    EXPECT_EQ(slot->init(&capture_logger), ncclSuccess);
  }
  return *slot;
}

std::string open_pair(LoadedNet& net, CommPair* pair) {
  if (net.listen(0, pair->handle, &pair->listen) != ncclSuccess) return "listen failed";
  return connect_and_accept(net, 0, pair->handle, &pair->send, pair->listen, &pair->recv);
}

std::string close_pair(LoadedNet& net, CommPair* pair) {
  std::string error;
  if (pair->send && net.close_send(pair->send) != ncclSuccess) error += "closeSend failed; ";
  if (pair->recv && net.close_recv(pair->recv) != ncclSuccess) error += "closeRecv failed; ";
  if (pair->listen && net.close_listen(pair->listen) != ncclSuccess) error += "closeListen failed";
  *pair = CommPair{};
  return error;
}

}  // namespace terse::test
