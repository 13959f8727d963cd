// A recording stand-in for libnccl.so.2, for the tests of terse's wrap mode without a GPU
// (plugin/comm_mode.h). It logs every call it receives, one line each, to the file
// RECORDING_NCCL_LOG names (appended; "pid function comm=... rank=... count=... datatype=...
// op=..."), and really runs the calls on host memory, so that an application under
// LD_PRELOAD=libterse.so TERSE_MODE=wrap gets correct results: ranks meet through a directory
// the unique id names (file_rendezvous.h), as threads of one process or as processes.
//
// How it differs from NCCL, on purpose:
// - Host memory only, and every call has completed when it returns (the stream is ignored).
//   ncclCommCuDevice says -1: a communicator without a device, which is how terse's wrap mode
//   knows to exchange its addresses in host memory (plugin/real_comm_exchange.h).
// - Every collective is an exchange of each rank's contribution through files: slow, simple,
//   and a barrier, so no rank runs ahead of what its peers still read.
// - RECORDING_NCCL_ASYNC_ERROR_COUNT=n: after a collective of exactly n elements completes, the
//   communicator's async error becomes ncclRemoteError and later calls fail with it (a real
//   NCCL's asynchronous failure, made deterministic).
// - RECORDING_NCCL_REFUSE_COUNT=n: an allreduce of exactly n elements is refused when it is
//   called (ncclInvalidArgument), as NCCL refuses a call's bad arguments; inside a group, as in
//   NCCL, the refusal fails the group's end, which then runs nothing.
// - ncclGroupSimulateEnd discards the group's calls (its inits still run) and estimates 1000 us
//   per call it discarded (NCCL's estimate comes from its tuning model), so that a test can tell
//   its part of an estimate from terse's. Its checks come in NCCL's order (an inner level ignores
//   simInfo; the group's error, then simInfo's magic). A group holding a nonblocking
//   communicator (ncclConfig_t blocking = 0; a split without a config inherits its parent's) is
//   run instead, and its end returns ncclInProgress, as NCCL launches a nonblocking group and
//   ignores simInfo; ncclGroupEnd of such a group returns ncclInProgress too. Its calls have
//   completed all the same, and its async error says ncclSuccess.
// - Its own collectives call ncclCommCount, and ncclCommInitRank calls ncclCommInitRankConfig,
//   through the dynamic linker (as some NCCL builds call their exported functions): under
//   libterse.so those calls reach terse first, which must hand them straight back
//   (plugin/real_nccl.h, the recursion guard).
#include <nccl.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "file_rendezvous.h"
#include "host_reduction.h"

struct ncclComm {
  std::string dir;
  int rank = 0;
  int nranks = 0;
  uint64_t exchanges = 0;                // collective exchanges so far (file names)
  uint64_t shrinks = 0;                  // ncclCommShrink calls so far (directory names)
  std::vector<uint64_t> sent, received;  // point-to-point messages per peer
  std::atomic<ncclResult_t> async_error{ncclSuccess};
  bool finalized = false;
  bool blocking = true;
  std::mutex ops_mutex;
  std::map<int, double> premul;  // PreMulSum operators: value -> scalar
  int next_op = ncclNumOps;
};

namespace recording_nccl {
namespace {

constexpr char kIdMagic[] = "RECNCCL1";

thread_local std::string last_error;

ncclResult_t fail(ncclResult_t code, const char* format, ...) {
  char text[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  last_error = text;
  return code;
}

void log_call(const char* function, const ncclComm* comm, long long count = -1, int datatype = -1,
              int op = -1) {
  const char* path = getenv("RECORDING_NCCL_LOG");
  if (path == nullptr || path[0] == '\0') return;
  char line[512];
  const int n = snprintf(line, sizeof(line), "%d %s comm=%p rank=%d count=%lld datatype=%d op=%d\n",
                         static_cast<int>(getpid()), function, static_cast<const void*>(comm),
                         comm != nullptr ? comm->rank : -1, count, datatype, op);
  // One write per line with O_APPEND: lines of concurrent ranks never interleave.
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  if (write(fd, line, static_cast<size_t>(n)) != n) {
    // Nothing to do: a test that needs the line fails on its absence.
  }
  close(fd);
}

size_t type_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

bool is_float(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclFloat32 || type == ncclFloat64 || type == ncclBfloat16;
}

// One queued or immediate call.
enum class Kind {
  kAllReduce,
  kReduce,
  kBroadcast,
  kReduceScatter,
  kAllGather,
  kAlltoAll,
  kGather,
  kScatter,
  kSend,
  kRecv
};
struct Call {
  Kind kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  int op;
  int root;  // or peer
};

// Every rank contributes `bytes` (any length); `all` receives each rank's, in rank order.
ncclResult_t exchange(ncclComm* comm, const void* mine, size_t bytes,
                      std::vector<std::vector<char>>* all) {
  const uint64_t step = comm->exchanges++;
  auto name = [step](int rank) { return "c" + std::to_string(step) + ".r" + std::to_string(rank); };
  if (!publish(comm->dir, name(comm->rank), mine, bytes)) {
    return fail(ncclSystemError, "recording stand-in: cannot write in %s", comm->dir.c_str());
  }
  // Every rank read step - 2's files before it published step - 1, which this rank has read.
  if (step >= 2)
    remove_file(comm->dir, "c" + std::to_string(step - 2) + ".r" + std::to_string(comm->rank));
  all->resize(static_cast<size_t>(comm->nranks));
  std::string message;
  for (int rank = 0; rank < comm->nranks; ++rank) {
    if (!fetch(comm->dir, name(rank), &(*all)[rank], &message)) {
      return fail(ncclRemoteError, "%s", message.c_str());
    }
  }
  return ncclSuccess;
}

ncclResult_t reduce_all(ncclComm* comm, const std::vector<std::vector<char>>& all, size_t offset,
                        size_t count, ncclDataType_t type, int op, void* out) {
  Combine how = Combine::kSum;
  double scale = 1.0;
  bool divide_after = false;
  switch (op) {
    case ncclSum:
      break;
    case ncclProd:
      how = Combine::kProd;
      break;
    case ncclMax:
      how = Combine::kMax;
      break;
    case ncclMin:
      how = Combine::kMin;
      break;
    case ncclAvg:
      if (is_float(type)) {
        scale = 1.0 / comm->nranks;
      } else {
        divide_after = true;
      }
      break;
    default: {
      std::lock_guard<std::mutex> lock(comm->ops_mutex);
      const auto found = comm->premul.find(op);
      if (found == comm->premul.end()) return fail(ncclInvalidArgument, "op %d is unknown", op);
      scale = found->second;
    }
  }
  std::vector<char> acc(count * type_size(type));
  for (int rank = 0; rank < comm->nranks; ++rank) {
    if (!reduce(type, how, scale, rank == 0, all[rank].data() + offset, acc.data(), count)) {
      return fail(ncclInvalidArgument, "recording stand-in: datatype %d is not reduced here",
                  static_cast<int>(type));
    }
  }
  if (divide_after) divide(type, acc.data(), count, comm->nranks);
  if (!acc.empty()) std::memcpy(out, acc.data(), acc.size());
  return ncclSuccess;
}

ncclResult_t run_point_to_point(ncclComm* comm, const Call& call) {
  const size_t bytes = call.count * type_size(call.type);
  if (call.kind == Kind::kSend) {
    const std::string name = "p" + std::to_string(comm->rank) + "." + std::to_string(call.root) +
                             "." + std::to_string(comm->sent[call.root]++);
    if (!publish(comm->dir, name, call.send, bytes)) {
      return fail(ncclSystemError, "recording stand-in: cannot write %s", name.c_str());
    }
    return ncclSuccess;
  }
  const std::string name = "p" + std::to_string(call.root) + "." + std::to_string(comm->rank) +
                           "." + std::to_string(comm->received[call.root]++);
  std::vector<char> data;
  std::string message;
  if (!fetch(comm->dir, name, &data, &message)) return fail(ncclRemoteError, "%s", message.c_str());
  remove_file(comm->dir, name);
  if (data.size() != bytes) {
    return fail(ncclInvalidUsage, "recording stand-in: received %zu bytes, expected %zu",
                data.size(), bytes);
  }
  if (bytes > 0) std::memcpy(call.recv, data.data(), bytes);
  return ncclSuccess;
}

ncclResult_t run_collective(ncclComm* comm, const Call& call) {
  const size_t size = type_size(call.type);
  const size_t bytes = call.count * size;
  const size_t n = static_cast<size_t>(comm->nranks);
  const size_t me = static_cast<size_t>(comm->rank);
  const bool root = comm->rank == call.root;
  size_t contributed = 0;
  switch (call.kind) {
    case Kind::kAllReduce:
    case Kind::kReduce:
    case Kind::kAllGather:
    case Kind::kGather:
      contributed = bytes;
      break;
    case Kind::kBroadcast:
      contributed = root ? bytes : 0;
      break;
    case Kind::kReduceScatter:
    case Kind::kAlltoAll:
      contributed = bytes * n;
      break;
    case Kind::kScatter:
      contributed = root ? bytes * n : 0;
      break;
    default:
      break;
  }
  std::vector<std::vector<char>> all;
  if (ncclResult_t result = exchange(comm, call.send, contributed, &all)) return result;
  char* out = static_cast<char*>(call.recv);
  switch (call.kind) {
    case Kind::kAllReduce:
      return reduce_all(comm, all, 0, call.count, call.type, call.op, out);
    case Kind::kReduce:
      return root ? reduce_all(comm, all, 0, call.count, call.type, call.op, out) : ncclSuccess;
    case Kind::kReduceScatter:
      return reduce_all(comm, all, me * bytes, call.count, call.type, call.op, out);
    case Kind::kBroadcast:
      if (bytes > 0) std::memcpy(out, all[static_cast<size_t>(call.root)].data(), bytes);
      return ncclSuccess;
    case Kind::kAllGather:
      for (size_t r = 0; r < n && bytes > 0; ++r)
        std::memcpy(out + r * bytes, all[r].data(), bytes);
      return ncclSuccess;
    case Kind::kGather:
      for (size_t r = 0; root && r < n && bytes > 0; ++r) {
        std::memcpy(out + r * bytes, all[r].data(), bytes);
      }
      return ncclSuccess;
    case Kind::kAlltoAll:
      for (size_t r = 0; r < n && bytes > 0; ++r) {
        std::memcpy(out + r * bytes, all[r].data() + me * bytes, bytes);
      }
      return ncclSuccess;
    case Kind::kScatter:
      if (bytes > 0)
        std::memcpy(out, all[static_cast<size_t>(call.root)].data() + me * bytes, bytes);
      return ncclSuccess;
    default:
      return ncclSuccess;
  }
}

size_t async_error_count() {
  const char* text = getenv("RECORDING_NCCL_ASYNC_ERROR_COUNT");
  return text != nullptr ? static_cast<size_t>(strtoull(text, nullptr, 10)) : 0;
}

ncclResult_t run(ncclComm* comm, const Call& call) {
  if (comm->async_error.load() != ncclSuccess) {
    return fail(comm->async_error.load(), "recording stand-in: the communicator failed earlier");
  }
  const ncclResult_t result = call.kind == Kind::kSend || call.kind == Kind::kRecv
                                  ? run_point_to_point(comm, call)
                                  : run_collective(comm, call);
  if (result == ncclSuccess && call.kind != Kind::kSend && call.kind != Kind::kRecv &&
      call.count > 0 && call.count == async_error_count()) {
    comm->async_error.store(ncclRemoteError);
  }
  return result;
}

struct Group {
  int depth = 0;
  std::vector<std::pair<ncclComm*, Call>> calls;
  std::vector<std::function<ncclResult_t()>> inits;
  ncclResult_t error = ncclSuccess;  // the first call refused inside the group
  bool nonblocking = false;          // a call or init of a nonblocking communicator
};
thread_local Group group;

size_t refuse_count() {
  const char* text = getenv("RECORDING_NCCL_REFUSE_COUNT");
  return text != nullptr ? static_cast<size_t>(strtoull(text, nullptr, 10)) : 0;
}

// Runs `work` for each item on a thread of its own; the first failure.
ncclResult_t on_threads(const std::vector<std::function<ncclResult_t()>>& work) {
  std::vector<ncclResult_t> results(work.size(), ncclSuccess);
  std::vector<std::string> errors(work.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < work.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = work[i]();
      errors[i] = last_error;
    });
  }
  for (auto& thread : threads) thread.join();
  for (size_t i = 0; i < work.size(); ++i) {
    if (results[i] != ncclSuccess) return fail(results[i], "%s", errors[i].c_str());
  }
  return ncclSuccess;
}

// A group's calls: per communicator (each on its own thread), sends first, then the collectives
// in order, then the receives, so no order of sends and receives within a group can deadlock.
ncclResult_t run_group(const std::vector<std::pair<ncclComm*, Call>>& calls) {
  std::vector<ncclComm*> comms;
  for (const auto& entry : calls) {
    if (std::find(comms.begin(), comms.end(), entry.first) == comms.end()) {
      comms.push_back(entry.first);
    }
  }
  std::vector<std::function<ncclResult_t()>> work;
  for (ncclComm* comm : comms) {
    work.push_back([comm, &calls]() {
      for (int pass = 0; pass < 3; ++pass) {
        for (const auto& [owner, call] : calls) {
          if (owner != comm) continue;
          const int wanted = call.kind == Kind::kSend ? 0 : call.kind == Kind::kRecv ? 2 : 1;
          if (wanted != pass) continue;
          if (ncclResult_t result = run(comm, call)) return result;
        }
      }
      return ncclSuccess;
    });
  }
  return on_threads(work);
}

ncclResult_t submit(const char* function, ncclComm* comm, const Call& call) {
  log_call(function, comm, static_cast<long long>(call.count), static_cast<int>(call.type),
           call.op);
  if (comm == nullptr) return fail(ncclInvalidArgument, "%s: comm is null", function);
  // Through the dynamic linker on purpose (the file comment).
  int count = 0;
  if (ncclCommCount(comm, &count) != ncclSuccess || count != comm->nranks) {
    return fail(ncclInternalError, "%s: ncclCommCount says %d, not %d", function, count,
                comm->nranks);
  }
  ncclResult_t refused = ncclSuccess;
  if (static_cast<int>(call.type) < 0 || static_cast<int>(call.type) >= ncclNumTypes) {
    refused = fail(ncclInvalidArgument, "%s: datatype %d", function, static_cast<int>(call.type));
  } else if (call.kind == Kind::kAllReduce && call.count > 0 && call.count == refuse_count()) {
    refused = fail(ncclInvalidArgument, "%s: count %zu is refused (RECORDING_NCCL_REFUSE_COUNT)",
                   function, call.count);
  }
  if (refused != ncclSuccess) {
    if (group.depth > 0 && group.error == ncclSuccess) group.error = refused;
    return refused;
  }
  if (group.depth > 0) {
    group.calls.emplace_back(comm, call);
    group.nonblocking = group.nonblocking || !comm->blocking;
    return ncclSuccess;
  }
  return run(comm, call);
}

ncclResult_t join(ncclComm* comm) {
  std::vector<std::vector<char>> all;
  const int32_t mine = comm->nranks;
  if (ncclResult_t result = exchange(comm, &mine, sizeof(mine), &all)) return result;
  for (const auto& theirs : all) {
    int32_t nranks = 0;
    if (theirs.size() == sizeof(nranks)) std::memcpy(&nranks, theirs.data(), sizeof(nranks));
    if (nranks != comm->nranks) {
      return fail(ncclInvalidUsage, "recording stand-in: ranks disagree on nranks");
    }
  }
  return ncclSuccess;
}

ncclComm* new_comm(const std::string& dir, int rank, int nranks) {
  ncclComm* comm = new ncclComm();
  comm->dir = dir;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->sent.assign(static_cast<size_t>(nranks), 0);
  comm->received.assign(static_cast<size_t>(nranks), 0);
  return comm;
}

// Every rank has finished with every file before rank 0 removes the directory.
void leave(ncclComm* comm) {
  if (!comm->finalized) {
    std::vector<std::vector<char>> all;
    exchange(comm, nullptr, 0, &all);
  }
  const std::string left = "left.r" + std::to_string(comm->rank);
  publish(comm->dir, left, nullptr, 0);
  if (comm->rank == 0) {
    std::vector<char> unused;
    std::string message;
    for (int rank = 0; rank < comm->nranks; ++rank) {
      fetch(comm->dir, "left.r" + std::to_string(rank), &unused, &message);
    }
    remove_directory(comm->dir);
  }
}

// The outermost group taken off the thread: its inits, calls and state.
Group take_group() {
  Group taken = std::move(group);
  group = Group{};
  return taken;
}

// Runs a group's inits, then its calls; ncclInProgress for a nonblocking group that succeeded.
ncclResult_t run_taken(const Group& taken) {
  if (ncclResult_t result = on_threads(taken.inits)) return result;
  if (ncclResult_t result = run_group(taken.calls)) return result;
  return taken.nonblocking ? ncclInProgress : ncclSuccess;
}

}  // namespace
}  // namespace recording_nccl

using namespace recording_nccl;  // NOLINT: this file is the library's C API

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  log_call("ncclGetVersion", nullptr);
  if (version == nullptr) return fail(ncclInvalidArgument, "version is null");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  log_call("ncclGetUniqueId", nullptr);
  if (id == nullptr) return fail(ncclInvalidArgument, "id is null");
  std::string dir;
  if (!make_directory(&dir) || dir.size() + sizeof(kIdMagic) >= sizeof(id->internal)) {
    return fail(ncclSystemError, "recording stand-in: cannot make a rendezvous directory");
  }
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, kIdMagic, sizeof(kIdMagic));
  std::memcpy(id->internal + sizeof(kIdMagic), dir.c_str(), dir.size());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  log_call("ncclCommInitRankConfig", nullptr, nranks, -1,
           config != nullptr ? config->blocking : -2);
  if (out == nullptr || nranks <= 0 || rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument, "recording stand-in: bad init arguments");
  }
  if (std::memcmp(id.internal, kIdMagic, sizeof(kIdMagic)) != 0) {
    return fail(ncclInvalidArgument, "recording stand-in: not a recording stand-in unique id");
  }
  ncclComm* comm = new_comm(std::string(id.internal + sizeof(kIdMagic)), rank, nranks);
  comm->blocking = config == nullptr || config->blocking != 0;
  *out = comm;
  if (group.depth > 0) {
    group.inits.push_back([comm] { return join(comm); });
    group.nonblocking = group.nonblocking || !comm->blocking;
    return ncclSuccess;
  }
  const ncclResult_t result = join(comm);
  if (result != ncclSuccess) {
    delete comm;
    *out = nullptr;
  }
  return result;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  log_call("ncclCommInitRank", nullptr, nranks);
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);  // through the linker
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* /*devlist*/) {
  log_call("ncclCommInitAll", nullptr, ndev);
  if (comms == nullptr || ndev <= 0) return fail(ncclInvalidArgument, "bad ncclCommInitAll");
  std::string dir;
  if (!make_directory(&dir)) return fail(ncclSystemError, "cannot make a rendezvous directory");
  std::vector<std::function<ncclResult_t()>> work;
  for (int rank = 0; rank < ndev; ++rank) {
    comms[rank] = new_comm(dir, rank, ndev);
    work.push_back([comm = comms[rank]] { return join(comm); });
  }
  return on_threads(work);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  log_call("ncclCommSplit", comm, color, -1, key);
  if (comm == nullptr || newcomm == nullptr) return fail(ncclInvalidArgument, "bad ncclCommSplit");
  const uint64_t step = comm->exchanges;
  const int32_t mine[2] = {color, key};
  std::vector<std::vector<char>> all;
  if (ncclResult_t result = exchange(comm, mine, sizeof(mine), &all)) return result;
  *newcomm = nullptr;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  std::vector<std::pair<int32_t, int>> members;  // (key, rank) of my color
  for (int rank = 0; rank < comm->nranks; ++rank) {
    int32_t theirs[2];
    std::memcpy(theirs, all[rank].data(), sizeof(theirs));
    if (theirs[0] == color) members.emplace_back(theirs[1], rank);
  }
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  while (members[static_cast<size_t>(new_rank)].second != comm->rank) ++new_rank;
  const std::string dir = comm->dir + ".s" + std::to_string(step) + "c" + std::to_string(color);
  mkdir(dir.c_str(), 0700);  // whoever comes first makes it
  ncclComm* made = new_comm(dir, new_rank, static_cast<int>(members.size()));
  made->blocking = config == nullptr ? comm->blocking : config->blocking != 0;
  if (ncclResult_t result = join(made)) {
    delete made;
    return result;
  }
  *newcomm = made;
  return ncclSuccess;
}

// Only the remaining ranks call it; they meet in a directory of their own, named by how many
// shrinks the parent has seen.
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* /*config*/, int shrinkFlags) {
  log_call("ncclCommShrink", comm, excludeRanksCount, -1, shrinkFlags);
  if (comm == nullptr || newcomm == nullptr || excludeRanksCount < 0 ||
      (excludeRanksCount > 0 && excludeRanksList == nullptr)) {
    return fail(ncclInvalidArgument, "bad ncclCommShrink");
  }
  std::vector<bool> leaves(static_cast<size_t>(comm->nranks), false);
  for (int i = 0; i < excludeRanksCount; ++i) {
    const int rank = excludeRanksList[i];
    if (rank < 0 || rank >= comm->nranks || rank == comm->rank) {
      return fail(ncclInvalidArgument, "bad rank in excludeRanksList");
    }
    leaves[static_cast<size_t>(rank)] = true;
  }
  int new_rank = 0, members = 0;
  for (int rank = 0; rank < comm->nranks; ++rank) {
    if (leaves[static_cast<size_t>(rank)]) continue;
    if (rank < comm->rank) ++new_rank;
    ++members;
  }
  const std::string dir = comm->dir + ".k" + std::to_string(comm->shrinks++);
  mkdir(dir.c_str(), 0700);  // whoever comes first makes it
  ncclComm* made = new_comm(dir, new_rank, members);
  if (ncclResult_t result = join(made)) {
    delete made;
    return result;
  }
  *newcomm = made;
  return ncclSuccess;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  log_call("ncclCommRevoke", comm, revokeFlags);
  if (comm == nullptr || revokeFlags != NCCL_REVOKE_DEFAULT) {
    return fail(ncclInvalidArgument, "bad ncclCommRevoke");
  }
  return ncclSuccess;  // every call here completed before it returned: nothing to stop
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  log_call("ncclCommFinalize", comm);
  if (comm == nullptr) return fail(ncclInvalidArgument, "comm is null");
  std::vector<std::vector<char>> all;
  if (ncclResult_t result = exchange(comm, nullptr, 0, &all)) return result;
  comm->finalized = true;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  log_call("ncclCommDestroy", comm);
  if (comm == nullptr) return ncclSuccess;
  leave(comm);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  log_call("ncclCommAbort", comm);
  delete comm;  // its files stay: its peers may be gone
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  log_call("ncclCommGetAsyncError", comm);
  if (comm == nullptr || error == nullptr) return fail(ncclInvalidArgument, "bad arguments");
  *error = comm->async_error.load();
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  log_call("ncclCommCount", comm);
  if (comm == nullptr || count == nullptr) return fail(ncclInvalidArgument, "bad arguments");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  log_call("ncclCommCuDevice", comm);
  if (comm == nullptr || device == nullptr) return fail(ncclInvalidArgument, "bad arguments");
  *device = -1;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  log_call("ncclCommUserRank", comm);
  if (comm == nullptr || rank == nullptr) return fail(ncclInvalidArgument, "bad arguments");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  log_call("ncclCommRegister", comm, static_cast<long long>(size));
  if (comm == nullptr || handle == nullptr) return fail(ncclInvalidArgument, "bad arguments");
  *handle = buff;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* /*handle*/) {
  log_call("ncclCommDeregister", comm);
  return comm == nullptr ? fail(ncclInvalidArgument, "comm is null") : ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int /*winFlags*/) {
  log_call("ncclCommWindowRegister", comm, static_cast<long long>(size));
  if (comm == nullptr || win == nullptr) return fail(ncclInvalidArgument, "bad arguments");
  *win = reinterpret_cast<ncclWindow_t>(buff);  // opaque to the caller; nothing to map here
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t /*win*/) {
  log_call("ncclCommWindowDeregister", comm);
  return comm == nullptr ? fail(ncclInvalidArgument, "comm is null") : ncclSuccess;
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  log_call("ncclMemAlloc", nullptr, static_cast<long long>(size));
  if (ptr == nullptr || size == 0) return fail(ncclInvalidArgument, "bad arguments");
  return posix_memalign(ptr, 4096, size) == 0 ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclMemFree(void* ptr) {
  log_call("ncclMemFree", nullptr);
  free(ptr);
  return ncclSuccess;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t /*residence*/, ncclComm_t comm) {
  log_call("ncclRedOpCreatePreMulSum", comm, -1, static_cast<int>(datatype));
  if (comm == nullptr || op == nullptr || scalar == nullptr) {
    return fail(ncclInvalidArgument, "bad arguments");
  }
  double value = 0;
  switch (datatype) {
    case ncclFloat32:
      value = *static_cast<const float*>(scalar);
      break;
    case ncclFloat64:
      value = *static_cast<const double*>(scalar);
      break;
    default:
      return fail(ncclInvalidArgument, "recording stand-in: PreMulSum of float or double only");
  }
  std::lock_guard<std::mutex> lock(comm->ops_mutex);
  const int made = comm->next_op++;
  comm->premul[made] = value;
  *op = static_cast<ncclRedOp_t>(made);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  log_call("ncclRedOpDestroy", comm, -1, -1, static_cast<int>(op));
  if (comm == nullptr) return fail(ncclInvalidArgument, "comm is null");
  std::lock_guard<std::mutex> lock(comm->ops_mutex);
  return comm->premul.erase(static_cast<int>(op)) == 1 ? ncclSuccess
                                                       : fail(ncclInvalidArgument, "no such op");
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  return submit("ncclAllReduce", comm, {Kind::kAllReduce, send, recv, count, type, op, 0});
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t) {
  return submit("ncclReduce", comm, {Kind::kReduce, send, recv, count, type, op, root});
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t) {
  return submit("ncclBroadcast", comm, {Kind::kBroadcast, send, recv, count, type, -1, root});
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  log_call("ncclBcast", comm, static_cast<long long>(count), static_cast<int>(type));
  return ncclBroadcast(buff, buff, count, type, root, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  return submit("ncclReduceScatter", comm, {Kind::kReduceScatter, send, recv, count, type, op, 0});
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t) {
  return submit("ncclAllGather", comm, {Kind::kAllGather, send, recv, count, type, -1, 0});
}

ncclResult_t ncclAlltoAll(const void* send, void* recv, size_t count, ncclDataType_t type,
                          ncclComm_t comm, cudaStream_t) {
  return submit("ncclAlltoAll", comm, {Kind::kAlltoAll, send, recv, count, type, -1, 0});
}

ncclResult_t ncclGather(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                        ncclComm_t comm, cudaStream_t) {
  return submit("ncclGather", comm, {Kind::kGather, send, recv, count, type, -1, root});
}

ncclResult_t ncclScatter(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                         ncclComm_t comm, cudaStream_t) {
  return submit("ncclScatter", comm, {Kind::kScatter, send, recv, count, type, -1, root});
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t) {
  return submit("ncclSend", comm, {Kind::kSend, send, nullptr, count, type, -1, peer});
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t) {
  return submit("ncclRecv", comm, {Kind::kRecv, nullptr, recv, count, type, -1, peer});
}

ncclResult_t ncclGroupStart() {
  log_call("ncclGroupStart", nullptr);
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  log_call("ncclGroupEnd", nullptr);
  if (group.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group.depth > 0) return ncclSuccess;
  const Group taken = take_group();
  if (taken.error != ncclSuccess) return fail(taken.error, "a call of the group was refused");
  return run_taken(taken);
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  log_call("ncclGroupSimulateEnd", nullptr);
  if (group.depth == 0) {
    return fail(ncclInvalidUsage, "ncclGroupSimulateEnd without ncclGroupStart");
  }
  if (--group.depth > 0) return ncclSuccess;
  const Group taken = take_group();
  if (taken.error != ncclSuccess) return fail(taken.error, "a call of the group was refused");
  if (simInfo == nullptr) return run_taken(taken);
  const ncclSimInfo_t initial = NCCL_SIM_INFO_INITIALIZER;
  if (simInfo->magic != initial.magic) {
    return fail(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo not initialised");
  }
  if (taken.nonblocking) return run_taken(taken);
  if (ncclResult_t result = on_threads(taken.inits)) return result;
  if (!taken.calls.empty()) {
    simInfo->estimatedTime = 1000.0f * static_cast<float>(taken.calls.size());
  }
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  log_call("ncclGetErrorString", nullptr, -1, -1, static_cast<int>(result));
  return result == ncclSuccess ? "no error" : "recording stand-in error";
}

const char* ncclGetLastError(ncclComm_t comm) {
  log_call("ncclGetLastError", comm);
  return last_error.c_str();
}

}  // extern "C"
