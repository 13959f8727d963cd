// The other process of test_net_plugin_processes.cpp: loads the plugin (version argv[1]),
// connects to the handle on argv[3] (hex), listens and prints its own handle (hex) on stdout,
// accepts the test's connection, then runs scenario argv[2]:
//   echo:  receives the test's traffic (sizes up to argv[4] bytes), sends the same back, and
//          waits for a last 1-byte message before it closes;
//   stall: prints "ready" and waits on stdin without touching its comms (the test kills it);
//   pingpong: answers pingpong_traffic(argv[4] bytes of receive slack) one message at a time
//          (net_traffic.h's ping_pong), then waits for a last 1-byte message before it closes;
//   blast: sends the test gradient-like traffic (sizes up to argv[4] bytes) and closes every
//          comm the moment its last send's test reports done;
//   devices (no handle needed): prints each device's name and speed, exits 3 when init fails.
// Exit 0 on success; the reason on stderr otherwise.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "plugin/net/driver/loaded_net.h"
#include "plugin/net/driver/net_traffic.h"

using namespace terse::test;

namespace {

std::string to_hex(const unsigned char* bytes, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < size; ++i) {
    text += digits[bytes[i] >> 4];
    text += digits[bytes[i] & 15];
  }
  return text;
}

bool from_hex(const std::string& text, unsigned char* bytes, size_t size) {
  if (text.size() != 2 * size) return false;
  for (size_t i = 0; i < size; ++i) bytes[i] = std::stoi(text.substr(2 * i, 2), nullptr, 16);
  return true;
}

int fail(const std::string& what) {
  fprintf(stderr, "net_plugin_peer: %s\n", what.c_str());
  return 1;
}

// Closes every comm; 0, or 1 with the reason.
int close_all(LoadedNet& net, void* send_comm, void* recv_comm, void* listen_comm) {
  if (net.close_send(send_comm) != ncclSuccess || net.close_recv(recv_comm) != ncclSuccess ||
      net.close_listen(listen_comm) != ncclSuccess) {
    return fail("close failed");
  }
  return 0;
}

// Waits for the test's last 1-byte message, then closes: only once the test has everything,
// since over TCP UCX completes a large send before the receiver has read all of it, and
// exiting then could cut it off.
int last_word_then_close(LoadedNet& net, void* send_comm, void* recv_comm, void* listen_comm) {
  Traffic last;
  last.sizes = {1};
  std::string error = drive(net, nullptr, recv_comm, last);
  if (!error.empty()) return fail("the last word: " + error);
  return close_all(net, send_comm, recv_comm, listen_comm);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3)
    return fail("usage: net_plugin_peer VERSION echo|stall|blast|devices [HANDLE_HEX [LARGEST]]");
  LoadedNet net;
  std::string error = net.load(net_plugin_path(), atoi(argv[1]));
  if (!error.empty()) return fail(error);
  if (net.init(nullptr) != ncclSuccess) {
    fail("init failed");
    return 3;
  }
  if (std::string(argv[2]) == "devices") {
    int count = 0;
    if (net.devices(&count) != ncclSuccess) return fail("devices failed");
    for (int dev = 0; dev < count; ++dev) {
      NetProperties props;
      if (net.properties(dev, &props) != ncclSuccess) return fail("getProperties failed");
      printf("%s %d\n", props.name.c_str(), props.speed);
    }
    return 0;
  }
  if (argc < 4) return fail("a handle is needed");
  unsigned char their_handle[terse::netabi::kHandleMaxBytes] = {};
  if (!from_hex(argv[3], their_handle, sizeof(their_handle))) return fail("bad handle");
  unsigned char my_handle[terse::netabi::kHandleMaxBytes] = {};
  void* listen_comm = nullptr;
  if (net.listen(0, my_handle, &listen_comm) != ncclSuccess) return fail("listen failed");
  printf("%s\n", to_hex(my_handle, sizeof(my_handle)).c_str());
  fflush(stdout);
  void* send_comm = nullptr;
  void* recv_comm = nullptr;
  error = connect_and_accept(net, 0, their_handle, &send_comm, listen_comm, &recv_comm);
  if (!error.empty()) return fail(error);
  std::string scenario = argv[2];
  if (scenario == "stall") {
    printf("ready\n");
    fflush(stdout);
    char byte;
    while (read(0, &byte, 1) > 0) {
    }
    return 0;
  }
  if (scenario == "pingpong") {
    Traffic traffic = pingpong_traffic(argc > 4 ? strtoull(argv[4], nullptr, 10) : 0);
    error = ping_pong(net, send_comm, recv_comm, traffic, /*sends_first=*/false);
    if (!error.empty()) return fail(error);
    return last_word_then_close(net, send_comm, recv_comm, listen_comm);
  }
  Traffic traffic;
  traffic.sizes = sizes_up_to(argc > 4 ? strtoull(argv[4], nullptr, 10) : 1 << 20);
  if (scenario == "blast") {
    // Gradient-like bytes, which the lossless mode frames; every comm closed as soon as the
    // last send's test said done.
    traffic.gradient = true;
    error = drive(net, send_comm, nullptr, traffic);
    if (!error.empty()) return fail("sending: " + error);
    return close_all(net, send_comm, recv_comm, listen_comm);
  }
  error = drive(net, nullptr, recv_comm, traffic);
  if (!error.empty()) return fail("receiving: " + error);
  error = drive(net, send_comm, nullptr, traffic);
  if (!error.empty()) return fail("sending: " + error);
  return last_word_then_close(net, send_comm, recv_comm, listen_comm);
}
