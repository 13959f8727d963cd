// delay_line QUEUE DELAY_US: holds every packet that netfilter queues to NFQUEUE number QUEUE
// for DELAY_US microseconds, then lets it go, in arrival order. perf/emulated_cluster.sh runs it
// in the switch namespace of its emulated cluster, behind `iptables -A FORWARD -j NFQUEUE` (the
// bridge's frames pass iptables with net.bridge.bridge-nf-call-iptables), to give every
// node-to-node path a one-way latency where the kernel has no `tc netem` (this machine's kernel
// is built without CONFIG_NET_SCH_NETEM).
//
// Cheap per packet: the kernel sends only each packet's metadata (NFQNL_COPY_META) and keeps GSO
// packets whole (NFQA_CFG_F_GSO: one 64 KiB TCP burst is one packet), and packets leave in
// batches: one NFQNL_MSG_VERDICT_BATCH accepts every queued packet up to an id. Since the delay
// is the same for every packet, arrival order is departure order, and a packet whose message was
// lost (ENOBUFS) still leaves with the next batch. The process asks for SCHED_FIFO so that busy
// ranks on the same cores do not stretch the delay (it says so when it cannot), and a timer
// slack of 1 ns.
//
// Runs until SIGTERM or SIGINT; packets still held then are dropped by the kernel with the queue.
// Prints one line once the queue is bound (what perf/emulated_cluster.sh waits for) and one with
// the packets and batches it let go when it ends.
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

namespace {

volatile sig_atomic_t stop = 0;
volatile sig_atomic_t stopped_by = 0;  // the pid that sent the signal, for the last line

void on_signal(int, siginfo_t* info, void*) {
  stop = 1;
  stopped_by = info != nullptr ? info->si_pid : 0;
}

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// One nfnetlink message under construction: header, nfgenmsg, attributes.
class Message {
 public:
  Message(uint16_t type, uint16_t queue, uint16_t flags) : bytes_(NLMSG_SPACE(sizeof(nfgenmsg))) {
    nlmsghdr* header = reinterpret_cast<nlmsghdr*>(bytes_.data());
    header->nlmsg_type = static_cast<uint16_t>((NFNL_SUBSYS_QUEUE << 8) | type);
    header->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | flags);
    nfgenmsg* general = static_cast<nfgenmsg*>(NLMSG_DATA(header));
    general->nfgen_family = AF_UNSPEC;
    general->version = NFNETLINK_V0;
    general->res_id = htons(queue);
  }

  void attribute(uint16_t type, const void* data, size_t length) {
    const size_t at = bytes_.size();
    bytes_.resize(at + NLA_ALIGN(NLA_HDRLEN + length));
    nlattr* attribute = reinterpret_cast<nlattr*>(bytes_.data() + at);
    attribute->nla_type = type;
    attribute->nla_len = static_cast<uint16_t>(NLA_HDRLEN + length);
    std::memcpy(bytes_.data() + at + NLA_HDRLEN, data, length);
  }

  bool send(int sock, uint32_t sequence) {
    nlmsghdr* header = reinterpret_cast<nlmsghdr*>(bytes_.data());
    header->nlmsg_len = static_cast<uint32_t>(bytes_.size());
    header->nlmsg_seq = sequence;
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    return sendto(sock, bytes_.data(), bytes_.size(), 0, reinterpret_cast<sockaddr*>(&kernel),
                  sizeof(kernel)) == static_cast<ssize_t>(bytes_.size());
  }

 private:
  std::vector<char> bytes_;
};

// Sends a configuration message and waits for the kernel's acknowledgement.
bool configure(int sock, Message message, uint32_t sequence, const char* what) {
  if (!message.send(sock, sequence)) {
    std::fprintf(stderr, "delay_line: cannot send %s: %s\n", what, std::strerror(errno));
    return false;
  }
  alignas(nlmsghdr) char buffer[8192];
  for (;;) {
    const ssize_t length = recv(sock, buffer, sizeof(buffer), 0);
    if (length < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "delay_line: no answer to %s: %s\n", what, std::strerror(errno));
      return false;
    }
    int remaining = static_cast<int>(length);
    for (nlmsghdr* header = reinterpret_cast<nlmsghdr*>(buffer); NLMSG_OK(header, remaining);
         header = NLMSG_NEXT(header, remaining)) {
      if (header->nlmsg_type == NLMSG_ERROR && header->nlmsg_seq == sequence) {
        const int error = static_cast<nlmsgerr*>(NLMSG_DATA(header))->error;
        if (error != 0) {
          std::fprintf(stderr, "delay_line: %s refused: %s\n", what, std::strerror(-error));
          return false;
        }
        return true;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s QUEUE DELAY_US\n", argv[0]);
    return 2;
  }
  char* end = nullptr;
  const long queue = std::strtol(argv[1], &end, 10);
  if (*end != '\0' || queue < 0 || queue > 65535) {
    std::fprintf(stderr, "delay_line: bad queue number %s\n", argv[1]);
    return 2;
  }
  const double delay_us = std::strtod(argv[2], &end);
  if (*end != '\0' || !(delay_us >= 0) || delay_us > 10e6) {
    std::fprintf(stderr, "delay_line: bad delay %s (microseconds, 0 to 10^7)\n", argv[2]);
    return 2;
  }
  const int64_t delay_ns = static_cast<int64_t>(delay_us * 1000);

  struct sigaction action {};
  action.sa_sigaction = on_signal;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  // The signals stay blocked except inside ppoll, which unblocks them atomically: one that came
  // between the check of `stop` and the wait would otherwise be noticed only by the next packet.
  sigset_t stopping, waiting;
  sigemptyset(&stopping);
  sigaddset(&stopping, SIGTERM);
  sigaddset(&stopping, SIGINT);
  sigprocmask(SIG_BLOCK, &stopping, &waiting);
  sigdelset(&waiting, SIGTERM);
  sigdelset(&waiting, SIGINT);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  sched_param priority{};
  priority.sched_priority = 10;
  if (sched_setscheduler(0, SCHED_FIFO, &priority) != 0) {
    std::fprintf(stderr, "delay_line: no SCHED_FIFO (%s); delays may stretch under load\n",
                 std::strerror(errno));
  }

  const int sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (sock < 0) {
    std::fprintf(stderr, "delay_line: no netfilter netlink socket: %s\n", std::strerror(errno));
    return 1;
  }
  const int buffer_bytes = 64 << 20;
  if (setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &buffer_bytes, sizeof(buffer_bytes)) != 0) {
    setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof(buffer_bytes));
  }
  const int one = 1;
  setsockopt(sock, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));
  sockaddr_nl self{};
  self.nl_family = AF_NETLINK;
  if (bind(sock, reinterpret_cast<sockaddr*>(&self), sizeof(self)) != 0) {
    std::fprintf(stderr, "delay_line: cannot bind netlink: %s\n", std::strerror(errno));
    return 1;
  }

  const uint16_t queue_number = static_cast<uint16_t>(queue);
  {
    Message bind_queue(NFQNL_MSG_CONFIG, queue_number, NLM_F_ACK);
    nfqnl_msg_config_cmd command{};
    command.command = NFQNL_CFG_CMD_BIND;
    command.pf = htons(AF_INET);
    bind_queue.attribute(NFQA_CFG_CMD, &command, sizeof(command));
    if (!configure(sock, bind_queue, 1, "binding the queue")) return 1;
  }
  {
    Message parameters(NFQNL_MSG_CONFIG, queue_number, NLM_F_ACK);
    nfqnl_msg_config_params copy{};
    copy.copy_range = htonl(0);
    copy.copy_mode = NFQNL_COPY_META;
    parameters.attribute(NFQA_CFG_PARAMS, &copy, sizeof(copy));
    const uint32_t maxlen = htonl(1u << 16);
    parameters.attribute(NFQA_CFG_QUEUE_MAXLEN, &maxlen, sizeof(maxlen));
    const uint32_t flags = htonl(NFQA_CFG_F_GSO);
    parameters.attribute(NFQA_CFG_MASK, &flags, sizeof(flags));
    parameters.attribute(NFQA_CFG_FLAGS, &flags, sizeof(flags));
    if (!configure(sock, parameters, 2, "the queue's parameters")) return 1;
  }
  std::printf("delay_line: queue %ld, %.1f us\n", queue, delay_us);
  std::fflush(stdout);

  struct Held {
    uint32_t id;
    int64_t due_ns;
  };
  std::deque<Held> held;
  std::vector<char> buffer(1 << 20);
  uint32_t sequence = 3;
  uint64_t packets = 0, batches = 0;
  while (!stop) {
    // Release every packet whose time has come, with one verdict for all of them.
    const int64_t now = now_ns();
    bool release = false;
    uint32_t last = 0;
    while (!held.empty() && held.front().due_ns <= now) {
      last = held.front().id;
      release = true;
      held.pop_front();
    }
    if (release) {
      Message verdict(NFQNL_MSG_VERDICT_BATCH, queue_number, 0);
      nfqnl_msg_verdict_hdr accept{};
      accept.verdict = htonl(NF_ACCEPT);
      accept.id = htonl(last);
      verdict.attribute(NFQA_VERDICT_HDR, &accept, sizeof(accept));
      if (!verdict.send(sock, sequence++)) {
        std::fprintf(stderr, "delay_line: verdict failed: %s\n", std::strerror(errno));
        return 1;
      }
      ++batches;
    }
    timespec wait{};
    timespec* timeout = nullptr;
    if (!held.empty()) {
      const int64_t left = std::max<int64_t>(held.front().due_ns - now_ns(), 0);
      wait.tv_sec = left / 1000000000;
      wait.tv_nsec = left % 1000000000;
      timeout = &wait;
    }
    pollfd readable{sock, POLLIN, 0};
    const int ready = ppoll(&readable, 1, timeout, &waiting);
    if (ready < 0 && errno != EINTR) {
      std::fprintf(stderr, "delay_line: poll failed: %s\n", std::strerror(errno));
      return 1;
    }
    if (ready <= 0) continue;
    for (;;) {
      const ssize_t length = recv(sock, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (length < 0) {
        if (errno == EAGAIN || errno == EINTR) break;
        if (errno == ENOBUFS) continue;  // lost messages; their packets leave with a later batch
        std::fprintf(stderr, "delay_line: receive failed: %s\n", std::strerror(errno));
        return 1;
      }
      const int64_t due = now_ns() + delay_ns;
      int remaining = static_cast<int>(length);
      for (nlmsghdr* header = reinterpret_cast<nlmsghdr*>(buffer.data());
           NLMSG_OK(header, remaining); header = NLMSG_NEXT(header, remaining)) {
        if (header->nlmsg_type != ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET)) continue;
        const int payload =
            static_cast<int>(header->nlmsg_len) - static_cast<int>(NLMSG_SPACE(sizeof(nfgenmsg)));
        char* at = static_cast<char*>(NLMSG_DATA(header)) + NLMSG_ALIGN(sizeof(nfgenmsg));
        for (nlattr* attribute = reinterpret_cast<nlattr*>(at); payload > 0;) {
          const long offset = reinterpret_cast<char*>(attribute) - at;
          if (offset + static_cast<long>(NLA_HDRLEN) > payload || attribute->nla_len < NLA_HDRLEN ||
              offset + attribute->nla_len > payload) {
            break;
          }
          if ((attribute->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR &&
              attribute->nla_len >= NLA_HDRLEN + sizeof(nfqnl_msg_packet_hdr)) {
            nfqnl_msg_packet_hdr packet{};
            std::memcpy(&packet, reinterpret_cast<char*>(attribute) + NLA_HDRLEN, sizeof(packet));
            held.push_back({ntohl(packet.packet_id), due});
            ++packets;
            break;
          }
          attribute = reinterpret_cast<nlattr*>(reinterpret_cast<char*>(attribute) +
                                                NLA_ALIGN(attribute->nla_len));
        }
      }
    }
  }
  // CPU time includes the rest of each packet's path that the verdict runs in this thread
  // (forwarding, the token bucket, and often the receiving node's TCP).
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("delay_line: %llu packets in %llu batches, %.2f s CPU; stopped by pid %d\n",
              static_cast<unsigned long long>(packets), static_cast<unsigned long long>(batches),
              usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                  (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6,
              static_cast<int>(stopped_by));
  close(sock);
  return 0;
}
