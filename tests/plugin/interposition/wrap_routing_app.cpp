// An NCCL application for the wrap-mode routing tests (plugin/comm_mode.h): plain nccl.h, built
// twice, linked to the recording stand-in libnccl.so.2 (run under LD_PRELOAD=libterse.so) and
// linked to libterse (run with TERSE_NCCL_LIBRARY naming the stand-in).
//
//   wrap_routing_app SCENARIO NRANKS LAUNCH
//     SCENARIO routing:      every collective, send/recv, groups mixing forwarded and compressed
//                            calls, split, PreMulSum, registration, ncclMemAlloc; results
//                            checked against values computed here; then the stand-in's log
//                            (RECORDING_NCCL_LOG) checked against
//                            WRAP_EXPECT=wrap|wrap-uncompressed|engine: in wrap, each
//                            uncompressed call has its line and no compressed allreduce (counts
//                            4096 and 8192, which TERSE_POLICY compresses) has one; in
//                            wrap-uncompressed (auto left them alone) those have theirs too; in
//                            engine, this process sent the stand-in nothing.
//                            WRAP_RESULT_DIR: each rank writes its compressed results there
//                            (rank<r>.bin), for comparison with another mode's.
//              async_error:  a forwarded allreduce after which the stand-in fails the
//                            communicator (RECORDING_NCCL_ASYNC_ERROR_COUNT=777);
//                            ncclCommGetAsyncError must say ncclRemoteError.
//              shrink:       every rank but the last shrinks the communicator without it
//                            (the real NCCL's ncclCommShrink, then terse's side made from the
//                            new real one): on the new one an int32 allreduce (count 121)
//                            reaches the stand-in and a compressed one (4096) stays in terse,
//                            both checked; then every rank revokes the parent on both sides
//                            (its next allreduce refused) and destroys it.
//              simulate:     ncclGroupSimulateEnd in wrap mode, under TERSE_POLICY =
//                            simulate_schedule.yaml (float sums of 16 KiB and more: int8 from
//                            a tensor's step 1, uncompressed, so forwarded, at step 0) and
//                            RECORDING_NCCL_REFUSE_COUNT=5000. The estimate of a group holding
//                            a forwarded and a compressed allreduce is the stand-in's (1000 us a
//                            call) plus terse's alone; no buffer changes; a forwarded allreduce
//                            in a simulated group does not count as a step of its tensor (its
//                            first real call is still forwarded), one in a real group does (its
//                            next call is compressed), one the stand-in refused does not, nor
//                            does one in a group the refusal failed; an inner level's end
//                            returns the real NCCL's failure; a group of a nonblocking
//                            communicator runs (ncclInProgress) and its hand-off counts.
//                            Checked by results and terse's statistics and, ranks as processes,
//                            by the stand-in's log.
//              mode_error:   ncclGetUniqueId must fail with WRAP_EXPECT_ERROR (a result code
//                            number) and a message naming every word of WRAP_EXPECT_WORDS.
//     LAUNCH processes | threads | group-init (one thread creates every rank inside a group
//            with ncclCommInitRankConfig) | init-all (ncclCommInitAll).
// Exits 0 when every check passed, else 1 with the reasons on stderr.
#include <dlfcn.h>
#include <nccl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <terse/terse.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

std::mutex report_mutex;
int failures = 0;

void report(int rank, const std::string& what) {
  std::lock_guard<std::mutex> lock(report_mutex);
  fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  ++failures;
}

#define CHECK_NCCL(rank, call)                                                             \
  do {                                                                                     \
    const ncclResult_t result_ = (call);                                                   \
    if (result_ != ncclSuccess) {                                                          \
      report(rank, std::string(#call) + " failed: " + ncclGetErrorString(result_) + ": " + \
                       ncclGetLastError(nullptr));                                         \
      return;                                                                              \
    }                                                                                      \
  } while (0)

template <class T>
void expect_equal(int rank, const char* what, const std::vector<T>& got,
                  const std::vector<T>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      std::ostringstream text;
      text << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
      report(rank, text.str());
      return;
    }
  }
}

// A compressed allreduce's result: within 2% of the largest exact magnitude (int8 blockwise
// quantisation of inputs of this size is far closer), and bit for bit what another mode gives
// (compared by the test script).
void expect_close(int rank, const char* what, const std::vector<float>& got,
                  const std::vector<double>& exact) {
  double largest = 0;
  for (double value : exact) largest = std::max(largest, std::fabs(value));
  for (size_t i = 0; i < exact.size(); ++i) {
    if (!(std::fabs(got[i] - exact[i]) <= 0.02 * largest)) {
      std::ostringstream text;
      text << what << ": element " << i << " is " << got[i] << ", exact " << exact[i];
      report(rank, text.str());
      return;
    }
  }
}

float compressed_input(int rank, size_t i) {
  return static_cast<float>(std::sin(0.01 * static_cast<double>(i) + rank) * (rank + 1));
}

void write_result(int rank, const char* name, const std::vector<float>& values) {
  const char* dir = getenv("WRAP_RESULT_DIR");
  if (dir == nullptr) return;
  std::ofstream out(std::string(dir) + "/" + name + ".rank" + std::to_string(rank) + ".bin",
                    std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
}

// Rank `rank`'s part of the routing scenario.
void routing(int rank, ncclComm_t comm) {
  int n = 0;
  int me = -1;
  CHECK_NCCL(rank, ncclCommCount(comm, &n));
  CHECK_NCCL(rank, ncclCommUserRank(comm, &me));
  if (me != rank) report(rank, "ncclCommUserRank says " + std::to_string(me));
  int device = -2;
  CHECK_NCCL(rank, ncclCommCuDevice(comm, &device));
  int version = 0;
  CHECK_NCCL(rank, ncclGetVersion(&version));
  if (version != NCCL_VERSION_CODE) report(rank, "ncclGetVersion: " + std::to_string(version));

  {  // int32 sum allreduce, count 101
    std::vector<int32_t> data(101), want(101);
    for (int i = 0; i < 101; ++i) {
      data[i] = rank * 1000 + i;
      want[i] = 1000 * n * (n - 1) / 2 + n * i;
    }
    CHECK_NCCL(rank, ncclAllReduce(data.data(), data.data(), 101, ncclInt32, ncclSum, comm, 0));
    expect_equal(rank, "int32 sum allreduce", data, want);
  }
  {  // float max allreduce, count 102
    std::vector<float> data(102), out(102), want(102);
    for (int i = 0; i < 102; ++i) {
      data[i] = static_cast<float>((rank + 1) * i);
      want[i] = static_cast<float>(n * i);
    }
    CHECK_NCCL(rank, ncclAllReduce(data.data(), out.data(), 102, ncclFloat, ncclMax, comm, 0));
    expect_equal(rank, "float max allreduce", out, want);
  }
  {  // float sum allreduce below the policy's 16 KiB, count 103: not compressed
    std::vector<float> data(103), out(103), want(103);
    for (int i = 0; i < 103; ++i) {
      data[i] = static_cast<float>(rank + i);
      want[i] = static_cast<float>(n * i + n * (n - 1) / 2);
    }
    CHECK_NCCL(rank, ncclAllReduce(data.data(), out.data(), 103, ncclFloat, ncclSum, comm, 0));
    expect_equal(rank, "small float sum allreduce", out, want);
  }
  {  // allgather, count 104
    std::vector<int32_t> data(104), out(104 * n), want(104 * n);
    for (int i = 0; i < 104; ++i) data[i] = rank * 100000 + i;
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < 104; ++i) want[r * 104 + i] = r * 100000 + i;
    }
    CHECK_NCCL(rank, ncclAllGather(data.data(), out.data(), 104, ncclInt32, comm, 0));
    expect_equal(rank, "allgather", out, want);
  }
  {  // broadcast from the last rank, count 105
    std::vector<int32_t> data(105), want(105);
    for (int i = 0; i < 105; ++i) {
      data[i] = rank == n - 1 ? 3 * i : -1;
      want[i] = 3 * i;
    }
    CHECK_NCCL(rank, ncclBroadcast(data.data(), data.data(), 105, ncclInt32, n - 1, comm, 0));
    expect_equal(rank, "broadcast", data, want);
  }
  {  // reduce-scatter, 106 per rank
    std::vector<int32_t> data(106 * n), out(106), want(106);
    for (int j = 0; j < 106 * n; ++j) data[j] = rank + j;
    for (int i = 0; i < 106; ++i) want[i] = n * (n - 1) / 2 + n * (rank * 106 + i);
    CHECK_NCCL(rank, ncclReduceScatter(data.data(), out.data(), 106, ncclInt32, ncclSum, comm, 0));
    expect_equal(rank, "reduce-scatter", out, want);
  }
  {  // reduce to rank 0, count 107
    std::vector<int32_t> data(107), out(107, -7), want(107);
    for (int i = 0; i < 107; ++i) {
      data[i] = rank + 2 * i;
      want[i] = rank == 0 ? n * (n - 1) / 2 + 2 * n * i : -7;
    }
    CHECK_NCCL(rank, ncclReduce(data.data(), out.data(), 107, ncclInt32, ncclSum, 0, comm, 0));
    expect_equal(rank, "reduce", out, want);
  }
  {  // send/recv around the ring, count 108
    std::vector<int32_t> data(108), out(108), want(108);
    const int from = (rank + n - 1) % n;
    for (int i = 0; i < 108; ++i) {
      data[i] = rank * 7 + i;
      want[i] = from * 7 + i;
    }
    CHECK_NCCL(rank, ncclGroupStart());
    CHECK_NCCL(rank, ncclSend(data.data(), 108, ncclInt32, (rank + 1) % n, comm, 0));
    CHECK_NCCL(rank, ncclRecv(out.data(), 108, ncclInt32, from, comm, 0));
    CHECK_NCCL(rank, ncclGroupEnd());
    expect_equal(rank, "send/recv", out, want);
  }
  {  // all-to-all, 109 per pair
    std::vector<int32_t> data(109 * n), out(109 * n), want(109 * n);
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < 109; ++i) {
        data[r * 109 + i] = rank * 1000 + r * 10 + i;
        want[r * 109 + i] = r * 1000 + rank * 10 + i;
      }
    }
    CHECK_NCCL(rank, ncclAlltoAll(data.data(), out.data(), 109, ncclInt32, comm, 0));
    expect_equal(rank, "all-to-all", out, want);
  }
  {  // PreMulSum (x2), count 110: created on both sides, forwarded with the real one's op
    float scalar = 2.0f;
    ncclRedOp_t op;
    CHECK_NCCL(rank,
               ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm));
    std::vector<float> data(110), want(110);
    for (int i = 0; i < 110; ++i) {
      data[i] = static_cast<float>(rank + i);
      want[i] = static_cast<float>(2 * (n * i + n * (n - 1) / 2));
    }
    CHECK_NCCL(rank, ncclAllReduce(data.data(), data.data(), 110, ncclFloat, op, comm, 0));
    expect_equal(rank, "PreMulSum allreduce", data, want);
    CHECK_NCCL(rank, ncclRedOpDestroy(op, comm));
  }
  {  // compressed: float sum of 4096 (16 KiB: the policy says int8)
    std::vector<float> data(4096), out(4096);
    std::vector<double> exact(4096, 0.0);
    for (size_t i = 0; i < 4096; ++i) {
      data[i] = compressed_input(rank, i);
      for (int r = 0; r < n; ++r) exact[i] += compressed_input(r, i);
    }
    CHECK_NCCL(rank, ncclAllReduce(data.data(), out.data(), 4096, ncclFloat, ncclSum, comm, 0));
    expect_close(rank, "compressed allreduce", out, exact);
    write_result(rank, "compressed4096", out);
  }
  {  // one group: a forwarded allgather (111), a compressed allreduce (8192), send/recv (112)
    std::vector<int32_t> gathered_in(111), gathered(111 * n), gathered_want(111 * n);
    for (int i = 0; i < 111; ++i) gathered_in[i] = rank * 3 + i;
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < 111; ++i) gathered_want[r * 111 + i] = r * 3 + i;
    }
    std::vector<float> data(8192), out(8192);
    std::vector<double> exact(8192, 0.0);
    for (size_t i = 0; i < 8192; ++i) {
      data[i] = compressed_input(rank, i + 5);
      for (int r = 0; r < n; ++r) exact[i] += compressed_input(r, i + 5);
    }
    std::vector<int32_t> sent(112), received(112), received_want(112);
    const int to = (rank + n - 1) % n;
    const int from = (rank + 1) % n;
    for (int i = 0; i < 112; ++i) {
      sent[i] = rank * 11 + i;
      received_want[i] = from * 11 + i;
    }
    CHECK_NCCL(rank, ncclGroupStart());
    CHECK_NCCL(rank, ncclAllGather(gathered_in.data(), gathered.data(), 111, ncclInt32, comm, 0));
    CHECK_NCCL(rank, ncclAllReduce(data.data(), out.data(), 8192, ncclFloat, ncclSum, comm, 0));
    CHECK_NCCL(rank, ncclRecv(received.data(), 112, ncclInt32, from, comm, 0));
    CHECK_NCCL(rank, ncclSend(sent.data(), 112, ncclInt32, to, comm, 0));
    CHECK_NCCL(rank, ncclGroupEnd());
    expect_equal(rank, "grouped allgather", gathered, gathered_want);
    expect_close(rank, "grouped compressed allreduce", out, exact);
    expect_equal(rank, "grouped send/recv", received, received_want);
    write_result(rank, "compressed8192", out);
  }
  {  // split by parity, then an int32 allreduce of 113 on the part
    ncclComm_t part = nullptr;
    CHECK_NCCL(rank, ncclCommSplit(comm, rank % 2, rank, &part, nullptr));
    int size = 0;
    CHECK_NCCL(rank, ncclCommCount(part, &size));
    std::vector<int32_t> data(113, rank + 1), want(113, 0);
    for (int r = rank % 2; r < n; r += 2) {
      for (int32_t& value : want) value += r + 1;
    }
    CHECK_NCCL(rank, ncclAllReduce(data.data(), data.data(), 113, ncclInt32, ncclSum, part, 0));
    expect_equal(rank, "allreduce on a split communicator", data, want);
    CHECK_NCCL(rank, ncclCommDestroy(part));
  }
  {  // memory: ncclMemAlloc / ncclCommRegister and their undoing
    void* memory = nullptr;
    void* handle = nullptr;
    CHECK_NCCL(rank, ncclMemAlloc(&memory, 4096));
    CHECK_NCCL(rank, ncclCommRegister(comm, memory, 4096, &handle));
    CHECK_NCCL(rank, ncclCommDeregister(comm, handle));
    const char* expect = getenv("WRAP_EXPECT");
    if (expect != nullptr && std::string(expect).rfind("wrap", 0) == 0) {
      // Symmetric-memory windows exist only on the real NCCL's side.
      ncclWindow_t window = nullptr;
      CHECK_NCCL(rank, ncclCommWindowRegister(comm, memory, 4096, &window, 0));
      CHECK_NCCL(rank, ncclCommWindowDeregister(comm, window));
    }
    CHECK_NCCL(rank, ncclMemFree(memory));
  }
  ncclResult_t async_error = ncclInternalError;
  CHECK_NCCL(rank, ncclCommGetAsyncError(comm, &async_error));
  if (async_error != ncclSuccess) report(rank, "ncclCommGetAsyncError is not ncclSuccess");
}

void async_error(int rank, ncclComm_t comm) {
  std::vector<int32_t> data(777, 1);
  CHECK_NCCL(rank, ncclAllReduce(data.data(), data.data(), 777, ncclInt32, ncclSum, comm, 0));
  ncclResult_t error = ncclSuccess;
  CHECK_NCCL(rank, ncclCommGetAsyncError(comm, &error));
  if (error != ncclRemoteError) {
    report(rank, std::string("ncclCommGetAsyncError says ") + ncclGetErrorString(error) +
                     ", not ncclRemoteError");
  }
  // The broken communicator refuses the next forwarded call, and says why.
  if (ncclAllReduce(data.data(), data.data(), 10, ncclInt32, ncclSum, comm, 0) == ncclSuccess) {
    report(rank, "an allreduce on the failed communicator succeeded");
  } else if (std::strstr(ncclGetLastError(nullptr), "real NCCL") == nullptr) {
    report(rank, std::string("the failure does not say it came from the real NCCL: ") +
                     ncclGetLastError(nullptr));
  }
}

bool one_rank_per_process = false;
std::vector<std::string> my_log_lines();
bool logged(const std::vector<std::string>& lines, const std::string& function, long count);
int count_logged(const std::vector<std::string>& lines, const std::string& function, long count);

// The exact sum of integer-valued floats (what a forwarded, uncompressed allreduce gives).
std::vector<float> integer_input(int rank, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(rank + static_cast<int>(i % 7));
  return values;
}
std::vector<float> integer_sum(int n, size_t count) {
  std::vector<float> sum(count, 0.0f);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> values = integer_input(r, count);
    for (size_t i = 0; i < count; ++i) sum[i] += values[i];
  }
  return sum;
}

// libterse's own API (terse.h), found at run time: this program is linked to the stand-in and
// sees libterse only when it is preloaded (or linked to it in the other build).
struct TerseApi {
  decltype(&terseCommGetStats) get_stats = nullptr;
};
TerseApi terse_api() {
  TerseApi api;
  api.get_stats =
      reinterpret_cast<decltype(&terseCommGetStats)>(dlsym(RTLD_DEFAULT, "terseCommGetStats"));
  return api;
}

// The allreduces terse counted on `comm` (every one, and those it compressed) as what
// terseCommGetStats says; {-1, -1} (reported) when it cannot say.
std::pair<long, long> counted(int rank, ncclComm_t comm) {
  const TerseApi api = terse_api();
  terseStats stats{};
  if (api.get_stats == nullptr || api.get_stats(comm, &stats) != ncclSuccess) {
    report(rank, "terseCommGetStats is not there or failed");
    return {-1, -1};
  }
  return {static_cast<long>(stats.calls), static_cast<long>(stats.compressed_calls)};
}

void expect_counted(int rank, ncclComm_t comm, const char* when, long calls, long compressed) {
  const std::pair<long, long> now = counted(rank, comm);
  if (now != std::pair<long, long>{calls, compressed}) {
    report(rank, std::string(when) + ": terse counted " + std::to_string(now.first) +
                     " allreduces, " + std::to_string(now.second) + " compressed; expected " +
                     std::to_string(calls) + ", " + std::to_string(compressed));
  }
}

void simulate(int rank, ncclComm_t comm) {
  int n = 0;
  CHECK_NCCL(rank, ncclCommCount(comm, &n));
  // One simulated group of `calls`; its estimate.
  const auto simulated = [&](const std::vector<std::function<ncclResult_t()>>& calls,
                             float* estimate) {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    ncclResult_t result = ncclGroupStart();
    for (const auto& call : calls) {
      if (result == ncclSuccess) result = call();
    }
    if (result == ncclSuccess) result = ncclGroupSimulateEnd(&info);
    *estimate = info.estimatedTime;
    return result;
  };

  // X, 8192: step 0 forwarded for real, so its step 1 is compressed on terse's side.
  std::vector<float> x = integer_input(rank, 8192), x_out(8192, -7.0f);
  CHECK_NCCL(rank, ncclAllReduce(x.data(), x_out.data(), 8192, ncclFloat, ncclSum, comm, 0));
  expect_equal(rank, "step 0 of the 8192 tensor (forwarded)", x_out, integer_sum(n, 8192));
  expect_counted(rank, comm, "after X's step 0", 1, 0);
  const std::vector<float> x_kept = x_out;
  std::vector<int32_t> ints(121, rank), ints_out(121, -7);
  const auto forwarded_call = [&] {
    return ncclAllReduce(ints.data(), ints_out.data(), 121, ncclInt32, ncclSum, comm, 0);
  };
  const auto compressed_call = [&] {
    return ncclAllReduce(x.data(), x_out.data(), 8192, ncclFloat, ncclSum, comm, 0);
  };
  float mixed = 0, terse_part = 0, real_part = 0;
  CHECK_NCCL(rank, simulated({forwarded_call, compressed_call}, &mixed));
  CHECK_NCCL(rank, simulated({compressed_call}, &terse_part));
  CHECK_NCCL(rank, simulated({forwarded_call}, &real_part));
  if (real_part != 1000.0f) {
    report(rank, "the forwarded call alone is estimated " + std::to_string(real_part) +
                     " us, not the stand-in's 1000");
  }
  if (!(terse_part > 0)) report(rank, "terse's part is estimated " + std::to_string(terse_part));
  if (!(std::fabs(mixed - (1000.0f + terse_part)) <= 1e-4f * mixed)) {
    report(rank, "the mixed group is estimated " + std::to_string(mixed) + " us, not 1000 + " +
                     std::to_string(terse_part));
  }
  expect_equal(rank, "the 8192 tensor after simulations", x_out, x_kept);
  expect_equal(rank, "the int32 output after simulations", ints_out, std::vector<int32_t>(121, -7));
  expect_counted(rank, comm, "after the simulated groups", 1, 0);

  // Y, 4096: simulated at step 0 (forwarded), then its first real call is still step 0.
  std::vector<float> y = integer_input(rank, 4096), y_out(4096, -7.0f);
  float y_estimate = 0;
  CHECK_NCCL(rank, simulated({[&] {
                               return ncclAllReduce(y.data(), y_out.data(), 4096, ncclFloat,
                                                    ncclSum, comm, 0);
                             }},
                             &y_estimate));
  if (y_estimate != 1000.0f) {
    report(rank, "a step-0 allreduce of 4096 is estimated " + std::to_string(y_estimate) +
                     " us, not the stand-in's 1000");
  }
  expect_equal(rank, "the 4096 output after its simulation", y_out,
               std::vector<float>(4096, -7.0f));
  CHECK_NCCL(rank, ncclAllReduce(y.data(), y_out.data(), 4096, ncclFloat, ncclSum, comm, 0));
  expect_equal(rank, "step 0 of the 4096 tensor (forwarded)", y_out, integer_sum(n, 4096));
  expect_counted(rank, comm, "after Y's step 0", 2, 0);
  CHECK_NCCL(rank, ncclAllReduce(y.data(), y_out.data(), 4096, ncclFloat, ncclSum, comm, 0));
  expect_counted(rank, comm, "after Y's step 1", 3, 1);

  // Z, 6000: forwarded inside a real group, which counts its step at the group's end.
  std::vector<float> z = integer_input(rank, 6000), z_out(6000, -7.0f);
  CHECK_NCCL(rank, ncclGroupStart());
  CHECK_NCCL(rank, ncclAllReduce(z.data(), z_out.data(), 6000, ncclFloat, ncclSum, comm, 0));
  CHECK_NCCL(rank, ncclGroupEnd());
  expect_equal(rank, "step 0 of the 6000 tensor (forwarded in a group)", z_out,
               integer_sum(n, 6000));
  expect_counted(rank, comm, "after Z's step 0", 4, 1);
  CHECK_NCCL(rank, ncclAllReduce(z.data(), z_out.data(), 6000, ncclFloat, ncclSum, comm, 0));
  expect_counted(rank, comm, "after Z's step 1 (compressed)", 5, 2);

  // V, 7000 and W, 5000 (RECORDING_NCCL_REFUSE_COUNT=5000: the stand-in refuses W): in one
  // group, W's refusal fails the real group, which runs neither; so neither is counted.
  std::vector<float> v = integer_input(rank, 7000), v_out(7000, -7.0f);
  std::vector<float> w = integer_input(rank, 5000), w_out(5000, -7.0f);
  CHECK_NCCL(rank, ncclGroupStart());
  CHECK_NCCL(rank, ncclAllReduce(v.data(), v_out.data(), 7000, ncclFloat, ncclSum, comm, 0));
  if (ncclAllReduce(w.data(), w_out.data(), 5000, ncclFloat, ncclSum, comm, 0) !=
      ncclInvalidArgument) {
    report(rank, "the stand-in did not refuse the allreduce of 5000 in a group");
  }
  if (ncclGroupEnd() != ncclInvalidArgument) report(rank, "the failed group's end succeeded");
  expect_equal(rank, "the 7000 output after the failed group", v_out,
               std::vector<float>(7000, -7.0f));
  expect_counted(rank, comm, "after the failed group", 5, 2);
  // Alone, W is refused again (still at step 0, still handed off), and not counted either.
  if (ncclAllReduce(w.data(), w_out.data(), 5000, ncclFloat, ncclSum, comm, 0) !=
      ncclInvalidArgument) {
    report(rank, "the stand-in did not refuse the allreduce of 5000");
  }
  expect_counted(rank, comm, "after the refused allreduce", 5, 2);
  // V's step 0 is still to come: forwarded, exact.
  CHECK_NCCL(rank, ncclAllReduce(v.data(), v_out.data(), 7000, ncclFloat, ncclSum, comm, 0));
  expect_equal(rank, "step 0 of the 7000 tensor (forwarded)", v_out, integer_sum(n, 7000));
  expect_counted(rank, comm, "after V's step 0", 6, 2);

  // An inner level's end is the real NCCL's too: its failure is the call's. The real library's
  // group is closed behind terse's back, so that its inner end fails.
  void* real_library = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
  const auto real_group_end =
      real_library != nullptr
          ? reinterpret_cast<ncclResult_t (*)()>(dlsym(real_library, "ncclGroupEnd"))
          : nullptr;
  if (real_group_end == nullptr) {
    report(rank, "the stand-in's own ncclGroupEnd is not found");
  } else {
    CHECK_NCCL(rank, ncclGroupStart());
    CHECK_NCCL(rank, ncclGroupStart());
    CHECK_NCCL(rank, real_group_end());
    CHECK_NCCL(rank, real_group_end());
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    if (ncclGroupSimulateEnd(&info) != ncclInvalidUsage) {
      report(rank, "the inner simulated end hid the real NCCL's failure");
    }
    if (ncclGroupEnd() != ncclInvalidUsage) {
      report(rank, "the outer end hid the real NCCL's failure");
    }
  }
  if (real_library != nullptr) dlclose(real_library);

  // A nonblocking real communicator: NCCL launches the group instead of simulating it
  // (ncclInProgress, simInfo untouched), so terse's part runs too and the hand-off counts.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t nonblocking = nullptr;
  CHECK_NCCL(rank, ncclCommSplit(comm, 0, rank, &nonblocking, &config));
  std::vector<float> p(8192), p_out(8192, -7.0f);
  std::vector<double> p_exact(8192, 0.0);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = compressed_input(rank, i);
    for (int r = 0; r < n; ++r) p_exact[i] += compressed_input(r, i);
  }
  std::vector<float> q = integer_input(rank, 4096), q_out(4096, -7.0f);
  CHECK_NCCL(rank, ncclAllReduce(p.data(), p_out.data(), 8192, ncclFloat, ncclSum, nonblocking, 0));
  {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    CHECK_NCCL(rank, ncclGroupStart());
    CHECK_NCCL(rank,
               ncclAllReduce(q.data(), q_out.data(), 4096, ncclFloat, ncclSum, nonblocking, 0));
    CHECK_NCCL(rank,
               ncclAllReduce(p.data(), p_out.data(), 8192, ncclFloat, ncclSum, nonblocking, 0));
    const ncclResult_t ended = ncclGroupSimulateEnd(&info);
    if (ended != ncclInProgress) {
      report(rank, std::string("a nonblocking group's simulated end returned ") +
                       ncclGetErrorString(ended) +
                       ", not ncclInProgress: " + ncclGetLastError(nullptr));
    }
    if (info.estimatedTime != NCCL_UNDEF_FLOAT) {
      report(rank, "a nonblocking group's simulated end wrote an estimate");
    }
  }
  ncclResult_t async = ncclInProgress;
  while (async == ncclInProgress) CHECK_NCCL(rank, ncclCommGetAsyncError(nonblocking, &async));
  if (async != ncclSuccess) report(rank, "the nonblocking communicator failed");
  expect_equal(rank, "step 0 of the 4096 tensor on the nonblocking communicator (ran)", q_out,
               integer_sum(n, 4096));
  expect_close(rank, "step 1 of the 8192 tensor on the nonblocking communicator (ran)", p_out,
               p_exact);
  expect_counted(rank, nonblocking, "after the nonblocking group", 3, 1);
  // The hand-off counted: the 4096 tensor's next call is its step 1, compressed.
  CHECK_NCCL(rank, ncclAllReduce(q.data(), q_out.data(), 4096, ncclFloat, ncclSum, nonblocking, 0));
  expect_counted(rank, nonblocking, "after the 4096 tensor's step 1", 4, 2);
  CHECK_NCCL(rank, ncclCommDestroy(nonblocking));

  if (!one_rank_per_process) return;  // the log tells processes apart, not threads
  const std::vector<std::string> lines = my_log_lines();
  if (!logged(lines, "ncclGroupSimulateEnd", -1)) {
    report(rank, "the stand-in never saw ncclGroupSimulateEnd");
  }
  // 8192: X's step 0 (its simulated step 1 was terse's), and the nonblocking communicator's
  // step 0 of its own 8192 tensor. 4096: Y's simulated call and its real step 0 (step 1
  // compressed), and the nonblocking communicator's step 0 (step 1 compressed). 6000: the
  // grouped step 0 only (step 1 compressed). 7000: the failed group's and its step 0. 5000: the
  // two refused.
  for (const auto& [count, times] :
       {std::pair<long, int>{8192, 2}, {4096, 3}, {6000, 1}, {7000, 2}, {5000, 2}}) {
    const int seen = count_logged(lines, "ncclAllReduce", count);
    if (seen != times) {
      report(rank, "the stand-in saw " + std::to_string(seen) + " allreduces of " +
                       std::to_string(count) + ", expected " + std::to_string(times));
    }
  }
}

void shrink(int rank, ncclComm_t comm) {
  int n = 0;
  CHECK_NCCL(rank, ncclCommCount(comm, &n));
  const int left_out = n - 1;
  if (rank != left_out) {
    int excluded[] = {left_out};
    ncclComm_t shrunk = nullptr;
    CHECK_NCCL(rank, ncclCommShrink(comm, excluded, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT));
    int size = 0, me = -1;
    CHECK_NCCL(rank, ncclCommCount(shrunk, &size));
    CHECK_NCCL(rank, ncclCommUserRank(shrunk, &me));
    if (size != n - 1 || me != rank) {
      report(rank, "the shrunk communicator is rank " + std::to_string(me) + " of " +
                       std::to_string(size));
    }
    std::vector<int32_t> data(121), want(121, 0);
    for (int i = 0; i < 121; ++i) {
      data[i] = rank * 1000 + i;
      for (int r = 0; r < n - 1; ++r) want[i] += r * 1000 + i;
    }
    CHECK_NCCL(rank, ncclAllReduce(data.data(), data.data(), 121, ncclInt32, ncclSum, shrunk, 0));
    expect_equal(rank, "allreduce on the shrunk communicator", data, want);
    std::vector<float> values(4096), out(4096);
    std::vector<double> exact(4096, 0.0);
    for (size_t i = 0; i < 4096; ++i) {
      values[i] = compressed_input(rank, i);
      for (int r = 0; r < n - 1; ++r) exact[i] += compressed_input(r, i);
    }
    CHECK_NCCL(rank, ncclAllReduce(values.data(), out.data(), 4096, ncclFloat, ncclSum, shrunk, 0));
    expect_close(rank, "compressed allreduce on the shrunk communicator", out, exact);
    CHECK_NCCL(rank, ncclCommDestroy(shrunk));
  }
  CHECK_NCCL(rank, ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  std::vector<float> values(4096, 1.0f);
  if (ncclAllReduce(values.data(), values.data(), 4096, ncclFloat, ncclSum, comm, 0) !=
      ncclInvalidUsage) {
    report(rank, "a compressed allreduce on the revoked communicator was not refused");
  }
  // The log tells processes apart, not threads: one rank per process only.
  if (one_rank_per_process) {
    const std::vector<std::string> lines = my_log_lines();
    if (rank != left_out && !logged(lines, "ncclCommShrink", -1)) {
      report(rank, "the stand-in never saw ncclCommShrink");
    }
    if (rank != left_out && !logged(lines, "ncclAllReduce", 121)) {
      report(rank, "the shrunk communicator's allreduce of 121 never reached the stand-in");
    }
    if (logged(lines, "ncclAllReduce", 4096)) {
      report(rank, "a compressed allreduce of 4096 reached the stand-in");
    }
    if (!logged(lines, "ncclCommRevoke", -1)) report(rank, "the stand-in never saw the revoke");
  }
}

// Which lines this process's calls left in the stand-in's log.
std::vector<std::string> my_log_lines() {
  std::vector<std::string> lines;
  const char* path = getenv("RECORDING_NCCL_LOG");
  if (path == nullptr) return lines;
  std::ifstream in(path);
  const std::string mine = std::to_string(getpid()) + " ";
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, mine.size(), mine) == 0) lines.push_back(line);
  }
  return lines;
}

int count_logged(const std::vector<std::string>& lines, const std::string& function, long count) {
  const std::string name = " " + function + " ";
  const std::string counted = " count=" + std::to_string(count) + " ";
  int seen = 0;
  for (const std::string& line : lines) {
    if (line.find(name) != std::string::npos &&
        (count < 0 || line.find(counted) != std::string::npos)) {
      ++seen;
    }
  }
  return seen;
}

bool logged(const std::vector<std::string>& lines, const std::string& function, long count) {
  return count_logged(lines, function, count) > 0;
}

void check_log(int rank) {
  const std::string expect = getenv("WRAP_EXPECT") != nullptr ? getenv("WRAP_EXPECT") : "";
  const std::vector<std::string> lines = my_log_lines();
  if (expect == "engine") {
    if (!lines.empty()) report(rank, "engine mode, yet the stand-in logged: " + lines.front());
    return;
  }
  // wrap-uncompressed: TERSE_CODEC=auto kept every allreduce uncompressed, so all of them,
  // the 4096 and 8192 ones included, reach the stand-in.
  const bool all_uncompressed = expect == "wrap-uncompressed";
  if (expect != "wrap" && !all_uncompressed) return;
  const std::pair<const char*, long> forwarded[] = {{"ncclAllReduce", 101},
                                                    {"ncclAllReduce", 102},
                                                    {"ncclAllReduce", 103},
                                                    {"ncclAllGather", 104},
                                                    {"ncclBroadcast", 105},
                                                    {"ncclReduceScatter", 106},
                                                    {"ncclReduce", 107},
                                                    {"ncclSend", 108},
                                                    {"ncclRecv", 108},
                                                    {"ncclAlltoAll", 109},
                                                    {"ncclAllReduce", 110},
                                                    {"ncclAllGather", 111},
                                                    {"ncclSend", 112},
                                                    {"ncclRecv", 112},
                                                    {"ncclAllReduce", 113},
                                                    {"ncclCommSplit", -1},
                                                    {"ncclRedOpCreatePreMulSum", -1},
                                                    {"ncclRedOpDestroy", -1},
                                                    {"ncclCommRegister", -1},
                                                    {"ncclCommDeregister", -1},
                                                    {"ncclCommWindowRegister", 4096},
                                                    {"ncclCommWindowDeregister", -1},
                                                    {"ncclMemAlloc", -1},
                                                    {"ncclMemFree", -1},
                                                    {"ncclGroupStart", -1},
                                                    {"ncclGroupEnd", -1},
                                                    {"ncclCommGetAsyncError", -1},
                                                    {"ncclGetVersion", -1},
                                                    {"ncclCommDestroy", -1}};
  for (const auto& [function, count] : forwarded) {
    if (!logged(lines, function, count)) {
      report(rank, std::string("wrap mode, but the stand-in never saw ") + function +
                       (count >= 0 ? " of count " + std::to_string(count) : ""));
    }
  }
  for (long count : {4096L, 8192L}) {
    const bool seen = logged(lines, "ncclAllReduce", count);
    if (all_uncompressed && !seen) {
      report(rank, "auto left the allreduce of " + std::to_string(count) +
                       " uncompressed, yet it never reached the stand-in");
    } else if (!all_uncompressed && seen) {
      report(rank,
             "the compressed allreduce of " + std::to_string(count) + " reached the stand-in");
    }
  }
}

void mode_error() {
  ncclUniqueId id;
  const ncclResult_t result = ncclGetUniqueId(&id);
  const int expected =
      atoi(getenv("WRAP_EXPECT_ERROR") != nullptr ? getenv("WRAP_EXPECT_ERROR") : "0");
  if (static_cast<int>(result) != expected) {
    report(0, "ncclGetUniqueId returned " + std::to_string(result) + ", expected " +
                  std::to_string(expected));
  }
  const std::string message = ncclGetLastError(nullptr);
  std::istringstream words(getenv("WRAP_EXPECT_WORDS") != nullptr ? getenv("WRAP_EXPECT_WORDS")
                                                                  : "");
  for (std::string word; words >> word;) {
    if (message.find(word) == std::string::npos) {
      report(0, "the message does not name " + word + ": " + message);
    }
  }
}

using Body = std::function<void(int, ncclComm_t)>;

void run_on_threads(int n, const std::vector<ncclComm_t>& comms, const Body& body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      body(rank, comms[rank]);
      if (getenv("WRAP_ABORT") != nullptr) {
        ncclCommAbort(comms[rank]);
      } else if (ncclCommDestroy(comms[rank]) != ncclSuccess) {
        report(rank, std::string("ncclCommDestroy: ") + ncclGetLastError(nullptr));
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

std::string to_hex(const ncclUniqueId& id) {
  std::string hex;
  char byte[3];
  for (char c : id.internal) {
    snprintf(byte, sizeof(byte), "%02x", static_cast<unsigned char>(c));
    hex += byte;
  }
  return hex;
}

ncclUniqueId from_hex(const std::string& hex) {
  ncclUniqueId id;
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    id.internal[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return id;
}

// Ranks as processes: this process made the id; each rank is this program again.
int spawn_ranks(const char* self, const char* scenario, int n) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  const std::string hex = to_hex(id);
  std::vector<pid_t> children;
  for (int rank = 0; rank < n; ++rank) {
    const std::string n_text = std::to_string(n);
    const std::string rank_text = std::to_string(rank);
    std::vector<char*> argv = {const_cast<char*>(self),
                               const_cast<char*>(scenario),
                               const_cast<char*>(n_text.c_str()),
                               const_cast<char*>("rank"),
                               const_cast<char*>(rank_text.c_str()),
                               const_cast<char*>(hex.c_str()),
                               nullptr};
    pid_t child = 0;
    if (posix_spawn(&child, self, nullptr, nullptr, argv.data(), environ) != 0) {
      fprintf(stderr, "cannot spawn rank %d\n", rank);
      return 1;
    }
    children.push_back(child);
  }
  int failed = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s routing|shrink|simulate|async_error|mode_error NRANKS LAUNCH\n",
            argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  const int n = atoi(argv[2]);
  const std::string launch = argv[3];
  if (scenario == "mode_error") {
    mode_error();
    return failures == 0 ? 0 : 1;
  }
  const Body body = scenario == "routing"    ? Body(routing)
                    : scenario == "shrink"   ? Body(shrink)
                    : scenario == "simulate" ? Body(simulate)
                                             : Body(async_error);
  if (launch == "processes") return spawn_ranks(argv[0], argv[1], n);
  std::vector<ncclComm_t> comms(n, nullptr);
  if (launch == "rank") {  // one rank of "processes"
    one_rank_per_process = true;
    const int rank = atoi(argv[4]);
    if (ncclCommInitRank(&comms[0], n, from_hex(argv[5]), rank) != ncclSuccess) {
      report(rank, std::string("ncclCommInitRank: ") + ncclGetLastError(nullptr));
      return 1;
    }
    body(rank, comms[0]);
    if (getenv("WRAP_ABORT") != nullptr) {
      ncclCommAbort(comms[0]);
    } else if (ncclCommDestroy(comms[0]) != ncclSuccess) {
      report(rank, "ncclCommDestroy failed");
    }
    if (scenario == "routing") check_log(rank);
    return failures == 0 ? 0 : 1;
  }
  if (launch == "init-all") {
    if (ncclCommInitAll(comms.data(), n, nullptr) != ncclSuccess) {
      report(-1, std::string("ncclCommInitAll: ") + ncclGetLastError(nullptr));
      return 1;
    }
  } else {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      report(-1, std::string("ncclGetUniqueId: ") + ncclGetLastError(nullptr));
      return 1;
    }
    if (launch == "group-init") {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      bool ok = ncclGroupStart() == ncclSuccess;
      for (int rank = 0; ok && rank < n; ++rank) {
        ok = ncclCommInitRankConfig(&comms[rank], n, id, rank, &config) == ncclSuccess;
      }
      if (ncclGroupEnd() != ncclSuccess || !ok) {
        report(-1, std::string("init inside a group: ") + ncclGetLastError(nullptr));
        return 1;
      }
    } else {  // threads
      std::vector<std::thread> threads;
      for (int rank = 0; rank < n; ++rank) {
        threads.emplace_back([&, rank] {
          if (ncclCommInitRank(&comms[rank], n, id, rank) != ncclSuccess) {
            report(rank, std::string("ncclCommInitRank: ") + ncclGetLastError(nullptr));
          }
        });
      }
      for (auto& thread : threads) thread.join();
      if (failures > 0) return 1;
    }
  }
  run_on_threads(n, comms, body);
  if (scenario == "routing") check_log(-1);
  return failures == 0 ? 0 : 1;
}
