// Bandwidth and latency between two processes through libnccl-net-terse.so, driven as NCCL's
// proxy drives a net plugin (the v11 table unless -v). This process sends; the peer (this binary
// again, spawned with --peer, optionally under a prefix such as "ip netns exec NS") receives.
//
//   net_plugin_perf [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-W WINDOW]
//                   [-d random|bf16] [-v VERSION] [-p "PREFIX..."] [-y 1|0]
//
// -y 1 (default) yields the CPU after every call that found nothing done, as NCCL's idle proxy
// thread does; -y 0 spins instead, as ucx_perftest does, so the plugin's own cost shows.
// Per size: bandwidth = ITERS messages (more for small sizes: 64 MiB worth, up to 10000) sent
// with WINDOW in flight (the receiver posts WINDOW receives ahead, as NCCL does), timed from the
// first isend to the receiver's 1-byte acknowledgement of the last; latency = half the median
// round trip of as many ping-pongs (at most 1000). The
// message bytes are bf16 gradient-like values (-d bf16, compressible) or hashed bytes (-d
// random). The peer checks the last message of each size byte for byte. Prints a table and the
// same rows as JSON lines ("#json {...}") for scripts.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "plugin/net/driver/loaded_net.h"
#include "plugin/net/driver/net_traffic.h"

extern char** environ;

using namespace terse::test;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  size_t min_bytes = 8;
  size_t max_bytes = 64 << 20;
  size_t factor = 4;
  int iters = 20;
  int warmup = 3;
  int window = 8;
  std::string data = "bf16";
  int version = 11;
  std::string prefix;
  std::string peer_handle;  // set in the peer
  bool yield = true;        // -y
};

[[noreturn]] void die(const std::string& what) {
  fprintf(stderr, "net_plugin_perf: %s\n", what.c_str());
  exit(1);
}

void check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) die(std::string(what) + " failed with " + std::to_string(result));
}

std::string to_hex(const unsigned char* bytes, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < size; ++i) {
    text += digits[bytes[i] >> 4];
    text += digits[bytes[i] & 15];
  }
  return text;
}

void from_hex(const std::string& text, unsigned char* bytes, size_t size) {
  if (text.size() != 2 * size) die("a handle is " + std::to_string(2 * size) + " hex digits");
  for (size_t i = 0; i < size; ++i) bytes[i] = std::stoi(text.substr(2 * i, 2), nullptr, 16);
}

// Timed messages of `size`: at least -n, and small messages by the thousand (64 MiB worth, at
// most 10000) so that a size's figure is not one round trip's; ping-pongs at most 1000.
int stream_count(const Options& options, size_t size) {
  size_t many = std::min<size_t>(10000, (size_t{64} << 20) / size);
  return static_cast<int>(std::max<size_t>(options.iters, many));
}
int pingpong_count(const Options& options, size_t size) {
  return std::min(stream_count(options, size), 1000);
}

std::vector<size_t> sizes_of(const Options& options) {
  std::vector<size_t> sizes;
  for (size_t size = options.min_bytes; size <= options.max_bytes; size *= options.factor) {
    sizes.push_back(size);
    if (options.factor < 2) break;
  }
  return sizes;
}

// One side's comms and registered buffers (WINDOW of the largest size each way).
struct Side {
  LoadedNet net;
  bool yield = true;
  // The clock is read every 1024th retry: a read per retry was a sixth of an 8-byte round trip.
  static bool past(Clock::time_point deadline, unsigned* retries) {
    return (++*retries & 1023) == 0 && Clock::now() > deadline;
  }
  void idle() {
    if (yield) sched_yield();
  }
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  std::vector<std::vector<uint8_t>> send_buffers, recv_buffers;
  std::vector<void*> send_handles, recv_handles;
  std::vector<uint8_t> ack = std::vector<uint8_t>(8);
  void* ack_send_handle = nullptr;
  void* ack_recv_handle = nullptr;

  void register_buffers(const Options& options) {
    send_buffers.assign(options.window, std::vector<uint8_t>(options.max_bytes));
    recv_buffers.assign(options.window, std::vector<uint8_t>(options.max_bytes));
    send_handles.resize(options.window);
    recv_handles.resize(options.window);
    for (int i = 0; i < options.window; ++i) {
      fill_message(0, options.max_bytes, options.data == "bf16", send_buffers[i].data());
      check(net.reg_mr(send, send_buffers[i].data(), options.max_bytes, terse::netabi::kPtrHost,
                       &send_handles[i]),
            "regMr");
      check(net.reg_mr(recv, recv_buffers[i].data(), options.max_bytes, terse::netabi::kPtrHost,
                       &recv_handles[i]),
            "regMr");
    }
    check(net.reg_mr(send, ack.data(), ack.size(), terse::netabi::kPtrHost, &ack_send_handle),
          "regMr");
    check(net.reg_mr(recv, ack.data(), ack.size(), terse::netabi::kPtrHost, &ack_recv_handle),
          "regMr");
  }

  // Posts until it gets a request (NCCL's retry), then returns it.
  void* post_send(void* data, size_t size, void* mhandle) {
    void* request = nullptr;
    auto deadline = Clock::now() + std::chrono::seconds(300);
    unsigned retries = 0;
    while (request == nullptr) {
      check(net.isend(send, data, size, 1, mhandle, &request), "isend");
      if (past(deadline, &retries)) die("isend found no receive for 300 s");
      if (request == nullptr) idle();
    }
    return request;
  }
  void* post_recv(void* data, size_t size, void* mhandle) {
    void* request = nullptr;
    int tag = 1;
    auto deadline = Clock::now() + std::chrono::seconds(300);
    unsigned retries = 0;
    while (request == nullptr) {
      check(net.irecv(recv, 1, &data, &size, &tag, &mhandle, &request), "irecv");
      if (past(deadline, &retries)) die("irecv returned no request for 300 s");
      if (request == nullptr) idle();
    }
    return request;
  }
  int wait(void* request) {
    int done = 0, size = 0;
    auto deadline = Clock::now() + std::chrono::seconds(300);
    unsigned retries = 0;
    while (!done) {
      check(net.test(request, &done, &size), "test");
      if (past(deadline, &retries)) die("a request did not finish in 300 s");
      if (!done) idle();
    }
    return size;
  }

  // ITERS messages of `size` with WINDOW in flight, then (receiver) an acknowledgement.
  void stream_send(size_t size, int iters, int window) {
    std::vector<void*> requests(window, nullptr);
    for (int i = 0; i < iters; ++i) {
      int slot = i % window;
      if (requests[slot]) wait(requests[slot]);
      requests[slot] = post_send(send_buffers[slot].data(), size, send_handles[slot]);
    }
    for (void* request : requests) {
      if (request) wait(request);
    }
    wait(post_recv(ack.data(), 1, ack_recv_handle));
  }
  void stream_receive(size_t size, int iters, int window) {
    std::vector<void*> requests(window, nullptr);
    int posted = 0, completed = 0;
    while (completed < iters) {
      while (posted < iters && posted - completed < window) {
        int slot = posted % window;
        requests[slot] = post_recv(recv_buffers[slot].data(), size, recv_handles[slot]);
        ++posted;
      }
      int slot = completed % window;
      if (static_cast<size_t>(wait(requests[slot])) != size) die("a message arrived short");
      ++completed;
    }
    wait(post_send(ack.data(), 1, ack_send_handle));
  }
};

int run_peer(const Options& options) {
  Side side;
  side.yield = options.yield;
  std::string error = side.net.load(net_plugin_path(), options.version);
  if (!error.empty()) die(error);
  check(side.net.init(nullptr), "init");
  unsigned char theirs[terse::netabi::kHandleMaxBytes], mine[terse::netabi::kHandleMaxBytes] = {};
  from_hex(options.peer_handle, theirs, sizeof(theirs));
  check(side.net.listen(0, mine, &side.listen), "listen");
  printf("%s\n", to_hex(mine, sizeof(mine)).c_str());
  fflush(stdout);
  error = connect_and_accept(side.net, 0, theirs, &side.send, side.listen, &side.recv, 120);
  if (!error.empty()) die(error);
  side.register_buffers(options);
  std::vector<uint8_t> expected(options.max_bytes);
  for (size_t size : sizes_of(options)) {
    int count = stream_count(options, size);
    side.stream_receive(size, options.warmup, options.window);
    side.stream_receive(size, count, options.window);
    // The last message landed in its slot: compare it with what was sent.
    int slot = (count - 1) % options.window;
    fill_message(0, options.max_bytes, options.data == "bf16", expected.data());
    if (memcmp(side.recv_buffers[slot].data(), expected.data(), size) != 0) {
      die("a " + std::to_string(size) + "-byte message arrived changed");
    }
    for (int i = 0; i < options.warmup + pingpong_count(options, size); ++i) {
      side.wait(side.post_recv(side.recv_buffers[0].data(), size, side.recv_handles[0]));
      side.wait(side.post_send(side.send_buffers[0].data(), size, side.send_handles[0]));
    }
  }
  // Close only once the other side has everything: over TCP, UCX 1.13 completes a large send
  // before the receiver has read all of it, and a process that exits then can cut it off.
  side.wait(side.post_recv(side.ack.data(), 1, side.ack_recv_handle));
  check(side.net.close_send(side.send), "closeSend");
  check(side.net.close_recv(side.recv), "closeRecv");
  check(side.net.close_listen(side.listen), "closeListen");
  return 0;
}

int run_main(const Options& options, char* self) {
  Side side;
  side.yield = options.yield;
  std::string error = side.net.load(net_plugin_path(), options.version);
  if (!error.empty()) die(error);
  check(side.net.init(nullptr), "init");
  unsigned char mine[terse::netabi::kHandleMaxBytes] = {};
  check(side.net.listen(0, mine, &side.listen), "listen");
  // The peer: [prefix...] self --peer HANDLE, with the same options.
  std::vector<std::string> words;
  std::istringstream prefix(options.prefix);
  for (std::string word; prefix >> word;) words.push_back(word);
  char self_path[4096];
  ssize_t length = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
  words.push_back(length > 0 ? std::string(self_path, length) : std::string(self));
  for (const std::string& word :
       {std::string("-b"),     std::to_string(options.min_bytes),
        std::string("-e"),     std::to_string(options.max_bytes),
        std::string("-f"),     std::to_string(options.factor),
        std::string("-n"),     std::to_string(options.iters),
        std::string("-w"),     std::to_string(options.warmup),
        std::string("-W"),     std::to_string(options.window),
        std::string("-d"),     options.data,
        std::string("-v"),     std::to_string(options.version),
        std::string("-y"),     options.yield ? std::string("1") : std::string("0"),
        std::string("--peer"), to_hex(mine, sizeof(mine))}) {
    words.push_back(word);
  }
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) die("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  pid_t pid = -1;
  if (posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) {
    die(std::string("cannot start the peer ") + argv[0]);
  }
  close(out[1]);
  std::string line;
  char c;
  while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
  unsigned char theirs[terse::netabi::kHandleMaxBytes];
  from_hex(line, theirs, sizeof(theirs));
  error = connect_and_accept(side.net, 0, theirs, &side.send, side.listen, &side.recv, 120);
  if (!error.empty()) die(error);
  side.register_buffers(options);
  printf("# net_plugin_perf: ncclNet v%d, data %s, %d iterations (+%d warm-up), window %d, %s\n",
         options.version, options.data.c_str(), options.iters, options.warmup, options.window,
         options.yield ? "yielding between calls" : "spinning");
  printf("%12s %12s %12s\n", "bytes", "bw GB/s", "lat us");
  for (size_t size : sizes_of(options)) {
    int count = stream_count(options, size);
    side.stream_send(size, options.warmup, options.window);
    auto start = Clock::now();
    side.stream_send(size, count, options.window);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    double bandwidth = size * static_cast<double>(count) / seconds / 1e9;
    std::vector<double> round_trips;
    for (int i = 0; i < options.warmup + pingpong_count(options, size); ++i) {
      auto begin = Clock::now();
      side.wait(side.post_send(side.send_buffers[0].data(), size, side.send_handles[0]));
      side.wait(side.post_recv(side.recv_buffers[0].data(), size, side.recv_handles[0]));
      if (i >= options.warmup) {
        round_trips.push_back(std::chrono::duration<double>(Clock::now() - begin).count());
      }
    }
    std::sort(round_trips.begin(), round_trips.end());
    double latency_us = round_trips[round_trips.size() / 2] / 2 * 1e6;
    printf("%12zu %12.3f %12.2f\n", size, bandwidth, latency_us);
    printf("#json {\"bytes\": %zu, \"bw_gbps\": %.6f, \"lat_us\": %.3f}\n", size, bandwidth,
           latency_us);
    fflush(stdout);
  }
  side.wait(side.post_send(side.ack.data(), 1, side.ack_send_handle));  // the peer may close
  check(side.net.close_send(side.send), "closeSend");
  check(side.net.close_recv(side.recv), "closeRecv");
  check(side.net.close_listen(side.listen), "closeListen");
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("the peer failed");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) die("usage: see the comment at the top of perf/net_plugin_perf.cpp");
    std::string value = argv[++i];
    if (flag == "-b")
      options.min_bytes = strtoull(value.c_str(), nullptr, 10);
    else if (flag == "-e")
      options.max_bytes = strtoull(value.c_str(), nullptr, 10);
    else if (flag == "-f")
      options.factor = strtoull(value.c_str(), nullptr, 10);
    else if (flag == "-n")
      options.iters = atoi(value.c_str());
    else if (flag == "-w")
      options.warmup = atoi(value.c_str());
    else if (flag == "-W")
      options.window = atoi(value.c_str());
    else if (flag == "-d")
      options.data = value;
    else if (flag == "-v")
      options.version = atoi(value.c_str());
    else if (flag == "-p")
      options.prefix = value;
    else if (flag == "-y")
      options.yield = value != "0";
    else if (flag == "--peer")
      options.peer_handle = value;
    else
      die("unknown option " + flag);
  }
  if (options.min_bytes < 1 || options.max_bytes < options.min_bytes || options.iters < 1 ||
      options.window < 1 || options.window > 32 || options.warmup < 0 ||
      (options.data != "bf16" && options.data != "random")) {
    die("bad options: need 1 <= -b <= -e, -n >= 1, 1 <= -W <= 32, -d bf16|random");
  }
  signal(SIGPIPE, SIG_IGN);
  return options.peer_handle.empty() ? run_main(options, argv[0]) : run_peer(options);
}
