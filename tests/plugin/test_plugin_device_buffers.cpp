// Device buffers through the NCCL API (plugin/device_staging.h). Everywhere: host buffers take
// the host path (completed on return, the stream never touched) and count-0 calls need nothing.
// With a GPU: every collective on cudaMalloc memory at 2 and 4 ranks as threads, in place and
// out of place, sizes 0, 1, unaligned and 4 MiB; managed memory; a group over two streams; one
// thread driving two communicators that share a stream; the call returning before its stream
// has run; host calls, split and destroy keeping their place behind device calls; a failed
// collective releasing its stream with an async error; mixed and foreign-device buffers
// refused; the polling-kernel fallback; ncclMemAlloc's device memory. Without a GPU those skip
// and say why. Values are small integers, exact in float32; outputs are poisoned with NaN
// first, so an output never written cannot pass.
#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plugin_ranks.h"
#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

using plugin_test::failed;
using plugin_test::run_ranks;

// Not a stream: host-buffer calls must never use it (the runtime would fault or fail on it).
cudaStream_t not_a_stream() {
  return reinterpret_cast<cudaStream_t>(uintptr_t{0xdead0000});
}

TEST(PluginHostPath, HostBuffersCompleteOnReturnWithoutTouchingTheStream) {
  const int n = 2;
  const size_t count = 257;
  std::atomic<int> failures{0};
  auto error = run_ranks(n, [&](int rank, ncclComm_t comm) {
    std::vector<int32_t> send(count, rank + 1), recv(count, -1);
    if (failed(ncclAllReduce(send.data(), recv.data(), count, ncclInt32, ncclSum, comm,
                             not_a_stream()),
               "ncclAllReduce")) {
      ++failures;
      return;
    }
    for (int32_t value : recv) {
      if (value != 3) ++failures;  // complete on return: nothing to synchronise
    }
    std::vector<uint8_t> out(count, static_cast<uint8_t>(rank)), in(count, 99);
    const int peer = 1 - rank;
    if (failed(ncclGroupStart(), "ncclGroupStart") ||
        failed(ncclSend(out.data(), count, ncclUint8, peer, comm, not_a_stream()), "ncclSend") ||
        failed(ncclRecv(in.data(), count, ncclUint8, peer, comm, not_a_stream()), "ncclRecv") ||
        failed(ncclGroupEnd(), "ncclGroupEnd")) {
      ++failures;
      return;
    }
    for (uint8_t value : in) {
      if (value != peer) ++failures;
    }
  });
  EXPECT_EQ(error, "");
  EXPECT_EQ(failures.load(), 0);
}

TEST(PluginHostPath, CountZeroNeedsNoBuffersAndNoStream) {
  std::atomic<int> failures{0};
  auto error = run_ranks(2, [&](int, ncclComm_t comm) {
    if (failed(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, not_a_stream()),
               "ncclAllReduce") ||
        failed(ncclAllGather(nullptr, nullptr, 0, ncclFloat32, comm, not_a_stream()),
               "ncclAllGather")) {
      ++failures;
    }
  });
  EXPECT_EQ(error, "");
  EXPECT_EQ(failures.load(), 0);
}

#if TERSE_HAVE_CUDA

// Why the GPU tests cannot run here ("" when a device is present).
std::string missing_gpu() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(error) +
           "); the device-buffer tests need a GPU";
  }
  if (count == 0) return "no CUDA device (cudaGetDeviceCount reports 0)";
  return "";
}

#define REQUIRE_GPU()                              \
  do {                                             \
    const std::string missing = missing_gpu();     \
    if (!missing.empty()) GTEST_SKIP() << missing; \
  } while (0)

// Sets an environment variable for a scope (before any rank thread starts), restoring it after.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  bool had_ = false;
  std::string old_;
};

// Collects failures from every rank thread; the first one is kept for the report.
class Checker {
 public:
  void expect(const std::vector<float>& got, const std::vector<float>& want,
              const std::string& what) {
    if (got == want) return;
    size_t i = 0;
    while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
    std::string detail = what + ": ";
    if (got.size() != want.size()) {
      detail += std::to_string(got.size()) + " elements, expected " + std::to_string(want.size());
    } else {
      detail += "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                std::to_string(want[i]);
    }
    note(detail);
  }
  void expect_ok(bool ok, const std::string& what) {
    if (!ok) note(what);
  }
  void note(const std::string& failure) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++failures_;
    if (first_.empty()) first_ = failure;
  }
  int failures() const { return failures_.load(); }
  std::string first() {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_;
  }

 private:
  std::atomic<int> failures_{0};
  std::mutex mutex_;
  std::string first_;
};

// The rank threads meet here; false if the others did not come within five minutes (a rank
// that failed to get there), so a broken test fails instead of hanging.
class Barrier {
 public:
  explicit Barrier(int parties) : parties_(parties) {}
  bool wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int generation = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return true;
    }
    return changed_.wait_for(lock, std::chrono::minutes(5),
                             [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  const int parties_;
  int arrived_ = 0;
  int generation_ = 0;
};

// Everything a rank thread allocates: device buffers, two non-blocking streams, pinned host
// memory to upload and download through. Made before any rank starts a collective and freed
// after every rank has finished (run_rank_threads): with ranks as threads on one GPU, a
// cudaMalloc or cudaFree (which may synchronise the whole device) or a copy through pageable
// memory in one rank's thread could wait for another rank's stream, which waits for this
// rank's next call. That would be a deadlock of the test, not of terse; NCCL's threads-as-ranks
// users avoid the same. Each rank has its own streams: ranks sharing a stream would wait in
// turn, as NCCL's kernels would.
class RankMemory {
 public:
  RankMemory(int buffers, size_t floats, bool managed) : floats_(floats) {
    const size_t bytes = (floats == 0 ? 1 : floats) * sizeof(float);
    for (int i = 0; i < buffers; ++i) {
      void* memory = nullptr;
      const cudaError_t error =
          managed ? cudaMallocManaged(&memory, bytes) : cudaMalloc(&memory, bytes);
      if (error != cudaSuccess) return;
      device_.push_back(static_cast<float*>(memory));
    }
    for (cudaStream_t& stream : streams_) {
      if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return;
    }
    void* up = nullptr;
    void* down = nullptr;
    if (cudaMallocHost(&up, 2 * bytes) != cudaSuccess) return;
    upload_ = static_cast<float*>(up);
    if (cudaMallocHost(&down, bytes) != cudaSuccess) return;
    download_ = static_cast<float*>(down);
    ok_ = true;
  }
  ~RankMemory() {
    for (cudaStream_t stream : streams_) {
      if (stream != nullptr) cudaStreamSynchronize(stream);
    }
    for (float* buffer : device_) cudaFree(buffer);
    for (cudaStream_t stream : streams_) {
      if (stream != nullptr) cudaStreamDestroy(stream);
    }
    if (upload_ != nullptr) cudaFreeHost(upload_);
    if (download_ != nullptr) cudaFreeHost(download_);
  }
  RankMemory(const RankMemory&) = delete;
  RankMemory& operator=(const RankMemory&) = delete;

  bool ok() const { return ok_; }
  float* device(int index) const { return device_[static_cast<size_t>(index)]; }
  cudaStream_t stream(int index = 0) const { return streams_[static_cast<size_t>(index)]; }

  // Host -> device on the stream, before the collective, as an application produces its input.
  // The pinned area is reused only after reset_uploads() (once the streams are synchronised).
  bool put(cudaStream_t stream, float* device, const std::vector<float>& values) {
    if (values.empty()) return true;
    if (uploaded_ + values.size() > 2 * floats_) return false;
    float* staged = upload_ + uploaded_;
    std::copy(values.begin(), values.end(), staged);
    uploaded_ += values.size();
    return cudaMemcpyAsync(device, staged, values.size() * sizeof(float), cudaMemcpyHostToDevice,
                           stream) == cudaSuccess;
  }
  void reset_uploads() { uploaded_ = 0; }

  // NaN bytes, so that an output the collective never wrote does not compare equal.
  bool poison(cudaStream_t stream, float* device, size_t count) {
    return count == 0 ||
           cudaMemsetAsync(device, 0xff, count * sizeof(float), stream) == cudaSuccess;
  }

  // Device -> host on the stream after the collective, then waits for the stream.
  std::vector<float> get(cudaStream_t stream, const float* device, size_t count) {
    if (count > floats_) return std::vector<float>(count, -3000.0f);
    if (count > 0) {
      cudaMemcpyAsync(download_, device, count * sizeof(float), cudaMemcpyDeviceToHost, stream);
    }
    if (cudaStreamSynchronize(stream) != cudaSuccess) return std::vector<float>(count, -2000.0f);
    return std::vector<float>(download_, download_ + count);
  }

 private:
  size_t floats_ = 0;
  std::vector<float*> device_;
  cudaStream_t streams_[2] = {nullptr, nullptr};
  float* upload_ = nullptr;
  float* download_ = nullptr;
  size_t uploaded_ = 0;
  bool ok_ = false;
};

// `n` rank threads, each with its RankMemory (`buffers` device buffers of `floats` floats,
// managed memory if asked), allocated before and freed after every rank's body (barriers).
void run_rank_threads(int n, int buffers, size_t floats, bool managed, Checker* check,
                      const std::function<void(int rank, RankMemory& memory)>& body) {
  Barrier barrier(n);
  std::atomic<int> unready{0};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      RankMemory memory(buffers, floats, managed);
      if (!memory.ok()) {
        ++unready;
        check->note("rank " + std::to_string(rank) + " could not allocate its test memory");
      }
      check->expect_ok(barrier.wait(), "the ranks did not meet before their collectives");
      if (unready.load() == 0) body(rank, memory);
      check->expect_ok(barrier.wait(), "the ranks did not meet after their collectives");
    });
  }
  for (auto& thread : threads) thread.join();
}

// The same with a communicator per rank (ncclCommInitRank on the rank's thread, destroyed
// after its body).
void run_gpu_ranks(int n, int buffers, size_t floats, bool managed, Checker* check,
                   const std::function<void(int rank, ncclComm_t comm, RankMemory& memory)>& body) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    check->note(std::string("ncclGetUniqueId: ") + ncclGetLastError(nullptr));
    return;
  }
  run_rank_threads(n, buffers, floats, managed, check, [&](int rank, RankMemory& memory) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) {
      check->note(std::string("ncclCommInitRank: ") + ncclGetLastError(nullptr));
      return;
    }
    body(rank, comm, memory);
    check->expect_ok(ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
  });
}

float value(int rank, size_t i) {
  return static_cast<float>(rank + 1 + static_cast<int>(i % 13));
}

// One rank's pass over every collective at one size, in place or out of place, with two device
// buffers of at least nranks * count floats (`a` is the send buffer, `b` the receive buffer;
// in place uses `a` alone).
class EveryCollective {
 public:
  EveryCollective(int rank, int nranks, ncclComm_t comm, RankMemory* memory, size_t count,
                  bool in_place, Checker* check)
      : r_(rank),
        n_(nranks),
        comm_(comm),
        m_(memory),
        s_(memory->stream()),
        a_(memory->device(0)),
        b_(memory->device(1)),
        c_(count),
        in_place_(in_place),
        check_(check) {}

  void run() {
    all_reduce();
    broadcast();
    reduce();
    all_gather();
    reduce_scatter();
    all_to_all();
    gather();
    scatter();
    if (!in_place_) send_recv_ring();
  }

 private:
  std::string what(const char* call) const {
    return std::string(call) + " rank " + std::to_string(r_) + "/" + std::to_string(n_) +
           " count " + std::to_string(c_) + (in_place_ ? " in place" : " out of place");
  }
  bool ok(ncclResult_t result, const char* call) {
    if (result == ncclSuccess) return true;
    check_->note(what(call) + ": " + ncclGetErrorString(result) + ": " + ncclGetLastError(comm_));
    return false;
  }
  // Stages `input` at `at` and poisons `poisoned` floats at `out` (skipped when it is null).
  void prepare(float* at, const std::vector<float>& input, float* out, size_t poisoned) {
    const bool poisoned_ok = out == nullptr || m_->poison(s_, out, poisoned);
    check_->expect_ok(poisoned_ok && m_->put(s_, at, input), what("preparing the buffers"));
  }
  void check(const float* out, size_t count, const std::vector<float>& want, const char* call,
             bool compare = true) {
    const std::vector<float> got = m_->get(s_, out, count);
    m_->reset_uploads();
    if (compare) check_->expect(got, want, what(call));
  }
  std::vector<float> mine(size_t count) const {
    std::vector<float> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = value(r_, i);
    return values;
  }
  std::vector<float> sum_over_ranks(size_t count, size_t offset) const {
    std::vector<float> sums(count, 0.0f);
    for (size_t i = 0; i < count; ++i) {
      for (int b = 0; b < n_; ++b) sums[i] += value(b, offset + i);
    }
    return sums;
  }
  // Block b of a gathered buffer holds rank b's `value(b, i)`.
  std::vector<float> gathered() const {
    std::vector<float> values(c_ * n_);
    for (int b = 0; b < n_; ++b) {
      for (size_t i = 0; i < c_; ++i) values[b * c_ + i] = value(b, i);
    }
    return values;
  }

  void all_reduce() {
    float* out = in_place_ ? a_ : b_;
    prepare(a_, mine(c_), in_place_ ? nullptr : out, c_);
    if (!ok(ncclAllReduce(a_, out, c_, ncclFloat32, ncclSum, comm_, s_), "ncclAllReduce")) return;
    check(out, c_, sum_over_ranks(c_, 0), "ncclAllReduce");
  }

  void broadcast() {
    const int root = n_ - 1;
    std::vector<float> want(c_);
    for (size_t i = 0; i < c_; ++i) want[i] = value(root, i);
    float* out = in_place_ ? a_ : b_;
    if (r_ == root) {
      prepare(a_, want, in_place_ ? nullptr : out, c_);
    } else {
      prepare(a_, {}, out, c_);
    }
    if (!ok(ncclBroadcast(a_, out, c_, ncclFloat32, root, comm_, s_), "ncclBroadcast")) return;
    check(out, c_, want, "ncclBroadcast");
  }

  void reduce() {
    const int root = 0;
    float* out = in_place_ ? a_ : b_;
    prepare(a_, mine(c_), in_place_ ? nullptr : out, c_);
    if (!ok(ncclReduce(a_, out, c_, ncclFloat32, ncclSum, root, comm_, s_), "ncclReduce")) return;
    check(out, c_, sum_over_ranks(c_, 0), "ncclReduce", r_ == root);
  }

  void all_gather() {
    // In place: sendbuff is this rank's block of recvbuff.
    float* out = in_place_ ? a_ : b_;
    float* in = in_place_ ? a_ + r_ * c_ : a_;
    check_->expect_ok(m_->poison(s_, out, c_ * n_), what("poisoning"));
    prepare(in, mine(c_), nullptr, 0);
    if (!ok(ncclAllGather(in, out, c_, ncclFloat32, comm_, s_), "ncclAllGather")) return;
    check(out, c_ * n_, gathered(), "ncclAllGather");
  }

  void reduce_scatter() {
    // In place: recvbuff is this rank's block of sendbuff.
    std::vector<float> input(c_ * n_);
    for (size_t j = 0; j < input.size(); ++j) input[j] = value(r_, j);
    float* out = in_place_ ? a_ + r_ * c_ : b_;
    prepare(a_, input, in_place_ ? nullptr : out, c_);
    if (!ok(ncclReduceScatter(a_, out, c_, ncclFloat32, ncclSum, comm_, s_), "ncclReduceScatter")) {
      return;
    }
    check(out, c_, sum_over_ranks(c_, r_ * c_), "ncclReduceScatter");
  }

  void all_to_all() {
    std::vector<float> input(c_ * n_), want(c_ * n_);
    for (int b = 0; b < n_; ++b) {
      for (size_t i = 0; i < c_; ++i) {
        input[b * c_ + i] = value(r_, i) + 100.0f * b;
        want[b * c_ + i] = value(b, i) + 100.0f * r_;
      }
    }
    float* out = in_place_ ? a_ : b_;
    prepare(a_, input, in_place_ ? nullptr : out, c_ * n_);
    if (!ok(ncclAlltoAll(a_, out, c_, ncclFloat32, comm_, s_), "ncclAlltoAll")) return;
    check(out, c_ * n_, want, "ncclAlltoAll");
  }

  void gather() {
    // In place exists at the root only: its own block is already in recvbuff.
    const int root = 1 % n_;
    const bool here_in_place = in_place_ && r_ == root;
    float* out = b_;
    float* in = here_in_place ? b_ + r_ * c_ : a_;
    check_->expect_ok(m_->poison(s_, out, c_ * n_), what("poisoning"));
    prepare(in, mine(c_), nullptr, 0);
    if (!ok(ncclGather(in, out, c_, ncclFloat32, root, comm_, s_), "ncclGather")) return;
    check(out, c_ * n_, gathered(), "ncclGather", r_ == root);
  }

  void scatter() {
    // In place exists at the root only: its own block stays in sendbuff.
    const int root = 1 % n_;
    const bool here_in_place = in_place_ && r_ == root;
    std::vector<float> input(c_ * n_), want(c_);
    for (size_t j = 0; j < input.size(); ++j) input[j] = value(root, j);
    for (size_t i = 0; i < c_; ++i) want[i] = value(root, r_ * c_ + i);
    float* out = here_in_place ? a_ + r_ * c_ : b_;
    if (r_ == root) {
      prepare(a_, input, here_in_place ? nullptr : out, c_);
    } else {
      prepare(a_, {}, out, c_);
    }
    if (!ok(ncclScatter(a_, out, c_, ncclFloat32, root, comm_, s_), "ncclScatter")) return;
    check(out, c_, want, "ncclScatter");
  }

  void send_recv_ring() {
    const int next = (r_ + 1) % n_, previous = (r_ + n_ - 1) % n_;
    std::vector<float> want(c_);
    for (size_t i = 0; i < c_; ++i) want[i] = value(previous, i);
    prepare(a_, mine(c_), b_, c_);
    if (!ok(ncclGroupStart(), "ncclGroupStart") ||
        !ok(ncclRecv(b_, c_, ncclFloat32, previous, comm_, s_), "ncclRecv") ||
        !ok(ncclSend(a_, c_, ncclFloat32, next, comm_, s_), "ncclSend") ||
        !ok(ncclGroupEnd(), "ncclGroupEnd")) {
      return;
    }
    check(b_, c_, want, "ncclSend/ncclRecv");
  }

  int r_, n_;
  ncclComm_t comm_;
  RankMemory* m_;
  cudaStream_t s_;
  float* a_;
  float* b_;
  size_t c_;
  bool in_place_;
  Checker* check_;
};

class PluginDeviceBuffers : public ::testing::TestWithParam<int> {};

TEST_P(PluginDeviceBuffers, EveryCollectiveInAndOutOfPlace) {
  REQUIRE_GPU();
  const int n = GetParam();
  const size_t largest = size_t{1} << 20;  // 4 MiB of floats
  Checker check;
  run_gpu_ranks(
      n, 2, largest * n, false, &check, [&](int rank, ncclComm_t comm, RankMemory& memory) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, largest}) {
          for (bool in_place : {false, true}) {
            EveryCollective(rank, n, comm, &memory, count, in_place, &check).run();
          }
        }
        ncclResult_t async = ncclInternalError;
        check.expect_ok(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclSuccess,
                        "the communicator reports an async error after correct calls");
      });
  EXPECT_EQ(check.failures(), 0) << check.first();
}

INSTANTIATE_TEST_SUITE_P(Ranks, PluginDeviceBuffers, ::testing::Values(2, 4));

TEST(PluginDeviceMemory, ManagedMemoryIsStagedToo) {
  REQUIRE_GPU();
  Checker check;
  run_gpu_ranks(2, 2, 2 * 1001, /*managed=*/true, &check,
                [&](int rank, ncclComm_t comm, RankMemory& memory) {
                  EveryCollective(rank, 2, comm, &memory, 1001, false, &check).run();
                  EveryCollective(rank, 2, comm, &memory, 1001, true, &check).run();
                });
  EXPECT_EQ(check.failures(), 0) << check.first();
}

// One group per rank: an allreduce on one stream, an allgather on another, and a send/recv
// ring split across both; the batch joins the streams before the proxy runs it.
TEST(PluginDeviceGroups, OneGroupOverTwoStreams) {
  REQUIRE_GPU();
  const int n = 2;
  const size_t count = 1000, gathered = 333, message = 77;
  Checker check;
  run_gpu_ranks(n, 5, count, false, &check, [&](int rank, ncclComm_t comm, RankMemory& memory) {
    cudaStream_t first = memory.stream(0), second = memory.stream(1);
    float* reduced = memory.device(0);
    float* mine = memory.device(1);
    float* all = memory.device(2);
    float* out = memory.device(3);
    float* in = memory.device(4);
    std::vector<float> reduce_input(count), gather_input(gathered), message_input(message);
    for (size_t i = 0; i < count; ++i) reduce_input[i] = value(rank, i);
    for (size_t i = 0; i < gathered; ++i) gather_input[i] = value(rank, i) * 2;
    for (size_t i = 0; i < message; ++i) message_input[i] = value(rank, i) + 50;
    check.expect_ok(
        memory.put(first, reduced, reduce_input) && memory.put(second, mine, gather_input) &&
            memory.put(first, out, message_input) && memory.poison(second, all, gathered * n) &&
            memory.poison(second, in, message),
        "preparing the buffers");
    const int next = (rank + 1) % n, previous = (rank + n - 1) % n;
    const bool issued =
        ncclGroupStart() == ncclSuccess &&
        ncclAllReduce(reduced, reduced, count, ncclFloat32, ncclSum, comm, first) == ncclSuccess &&
        ncclAllGather(mine, all, gathered, ncclFloat32, comm, second) == ncclSuccess &&
        ncclSend(out, message, ncclFloat32, next, comm, first) == ncclSuccess &&
        ncclRecv(in, message, ncclFloat32, previous, comm, second) == ncclSuccess &&
        ncclGroupEnd() == ncclSuccess;
    check.expect_ok(issued, std::string("the group: ") + ncclGetLastError(comm));
    if (!issued) return;
    std::vector<float> want_reduced(count), want_all(gathered * n), want_in(message);
    for (size_t i = 0; i < count; ++i) want_reduced[i] = value(0, i) + value(1, i);
    for (size_t j = 0; j < gathered * n; ++j) {
      want_all[j] = value(static_cast<int>(j / gathered), j % gathered) * 2;
    }
    for (size_t i = 0; i < message; ++i) want_in[i] = value(previous, i) + 50;
    check.expect(memory.get(first, reduced, count), want_reduced, "allreduce on stream 1");
    check.expect(memory.get(second, all, gathered * n), want_all, "allgather on stream 2");
    check.expect(memory.get(second, in, message), want_in, "recv on stream 2");
  });
  EXPECT_EQ(check.failures(), 0) << check.first();
}

// One thread drives both ranks (ncclCommInitAll) and gives both the same stream: both
// communicators' inputs must be staged before the stream waits for either collective.
TEST(PluginDeviceGroups, OneThreadTwoCommunicatorsOneStream) {
  REQUIRE_GPU();
  const int n = 2;
  const size_t count = 4099;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  RankMemory memory(n, count, false);
  ASSERT_TRUE(memory.ok());
  const int devices[n] = {0, 0};
  ncclComm_t comms[n] = {};
  ASSERT_EQ(ncclCommInitAll(comms, n, devices), ncclSuccess) << ncclGetLastError(nullptr);
  for (int rank = 0; rank < n; ++rank) {
    int device = -1;
    EXPECT_EQ(ncclCommCuDevice(comms[rank], &device), ncclSuccess);
    EXPECT_EQ(device, 0);
  }
  cudaStream_t shared = memory.stream(0);
  for (int rank = 0; rank < n; ++rank) {
    std::vector<float> input(count);
    for (size_t i = 0; i < count; ++i) input[i] = value(rank, i);
    ASSERT_TRUE(memory.put(shared, memory.device(rank), input));
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int rank = 0; rank < n; ++rank) {
    ASSERT_EQ(ncclAllReduce(memory.device(rank), memory.device(rank), count, ncclFloat32, ncclSum,
                            comms[rank], shared),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<float> want(count);
  for (size_t i = 0; i < count; ++i) want[i] = value(0, i) + value(1, i);
  for (int rank = 0; rank < n; ++rank) {
    EXPECT_EQ(memory.get(shared, memory.device(rank), count), want) << "rank " << rank;
  }
  for (auto comm : comms) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// The call must return before its stream reaches it: rank 0's stream is held by a host
// function until the test opens it, which it does only after ncclAllReduce has returned. A
// call that waited for its stream would return only when the gate gives up (and fail here).
TEST(PluginDeviceStreams, CallReturnsBeforeItsStreamRuns) {
  REQUIRE_GPU();
  const size_t count = 1 << 16;
  enum GateState : int { kClosed = 0, kPassed = 1, kGaveUp = 2 };
  struct Gate {
    std::atomic<bool> open{false};
    std::atomic<int> state{kClosed};
  } gate;
  Checker check;
  run_gpu_ranks(2, 1, count, false, &check, [&](int rank, ncclComm_t comm, RankMemory& memory) {
    cudaStream_t stream = memory.stream();
    float* data = memory.device(0);
    std::vector<float> input(count), want(count);
    for (size_t i = 0; i < count; ++i) {
      input[i] = value(rank, i);
      want[i] = value(0, i) + value(1, i);
    }
    // Warm-up: creates the staging, so that the gated call allocates nothing.
    check.expect_ok(
        memory.put(stream, data, input) &&
            ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream) == ncclSuccess,
        "warm-up allreduce");
    check.expect(memory.get(stream, data, count), want, "warm-up result");
    memory.reset_uploads();
    if (rank == 0) {
      auto hold = [](void* argument) {
        Gate* held = static_cast<Gate*>(argument);
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (!held->open.load() && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        held->state = held->open.load() ? kPassed : kGaveUp;
      };
      check.expect_ok(cudaLaunchHostFunc(stream, hold, &gate) == cudaSuccess, "the gate");
    }
    check.expect_ok(memory.put(stream, data, input), "upload");
    const ncclResult_t result =
        ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream);
    if (rank == 0) {
      check.expect_ok(gate.state.load() == kClosed,
                      "ncclAllReduce returned only after its stream had passed the gate");
      gate.open = true;
    }
    check.expect_ok(result == ncclSuccess, "gated ncclAllReduce");
    check.expect(memory.get(stream, data, count), want, "gated result");
  });
  EXPECT_EQ(gate.state.load(), kPassed);
  EXPECT_EQ(check.failures(), 0) << check.first();
}

// Host-buffer calls, split and destroy on a communicator with device calls in flight keep
// their place after them (the engine must number operations alike on every rank).
TEST(PluginDeviceStreams, HostCallsSplitAndDestroyWaitForEarlierDeviceCalls) {
  REQUIRE_GPU();
  const int n = 2;
  const size_t count = 1 << 18;
  Checker check;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  run_rank_threads(n, 3, count, false, &check, [&](int rank, RankMemory& memory) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) {
      check.note(std::string("ncclCommInitRank: ") + ncclGetLastError(nullptr));
      return;
    }
    cudaStream_t stream = memory.stream();
    float* first = memory.device(0);
    float* second = memory.device(1);
    float* on_split = memory.device(2);
    std::vector<float> input(count), want(count);
    for (size_t i = 0; i < count; ++i) {
      input[i] = value(rank, i);
      want[i] = value(0, i) + value(1, i);
    }
    check.expect_ok(memory.put(stream, first, input) && memory.put(stream, second, input),
                    "upload");
    check.expect_ok(
        ncclAllReduce(first, first, count, ncclFloat32, ncclSum, comm, stream) == ncclSuccess,
        "device allreduce");
    // Host buffers: complete on return, after the device call before them.
    std::vector<int32_t> host(100, rank + 1), host_sum(100, -1);
    check.expect_ok(ncclAllReduce(host.data(), host_sum.data(), 100, ncclInt32, ncclSum, comm,
                                  stream) == ncclSuccess,
                    "host allreduce after a device one");
    for (int32_t sum : host_sum) check.expect_ok(sum == 3, "host allreduce result");
    ncclComm_t half = nullptr;
    check.expect_ok(ncclCommSplit(comm, 0, rank, &half, nullptr) == ncclSuccess && half != nullptr,
                    "split after a device call");
    check.expect_ok(
        ncclAllReduce(second, second, count, ncclFloat32, ncclSum, comm, stream) == ncclSuccess,
        "second device allreduce");
    // Destroyed while both device calls may still wait for the stream: they complete.
    check.expect_ok(ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
    check.expect(memory.get(stream, first, count), want, "first device allreduce");
    check.expect(memory.get(stream, second, count), want, "second device allreduce");
    memory.reset_uploads();
    if (half == nullptr) return;
    check.expect_ok(
        memory.put(stream, on_split, input) && ncclAllReduce(on_split, on_split, count, ncclFloat32,
                                                             ncclSum, half, stream) == ncclSuccess,
        "device allreduce on the split communicator");
    check.expect(memory.get(stream, on_split, count), want, "split allreduce");
    check.expect_ok(ncclCommDestroy(half) == ncclSuccess, "ncclCommDestroy of the split");
  });
  EXPECT_EQ(check.failures(), 0) << check.first();
}

// Rank 1 aborts; rank 0's device allreduce fails on the proxy (TERSE_TIMEOUT_S=5 at most): its
// stream must still complete, ncclCommGetAsyncError must report the failure, and later calls
// must fail with it at once.
TEST(PluginDeviceStreams, FailedCollectiveReleasesItsStreamAndReportsAnAsyncError) {
  REQUIRE_GPU();
  ScopedEnvironment timeout("TERSE_TIMEOUT_S", "5");
  const int n = 2;
  const size_t count = 1000;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::atomic<bool> aborted{false};
  Checker check;
  run_rank_threads(n, 1, count, false, &check, [&](int rank, RankMemory& memory) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) {
      check.note(std::string("ncclCommInitRank: ") + ncclGetLastError(nullptr));
      aborted = true;
      return;
    }
    if (rank == 1) {
      check.expect_ok(ncclCommAbort(comm) == ncclSuccess, "ncclCommAbort of rank 1");
      aborted = true;
      return;
    }
    while (!aborted.load()) std::this_thread::yield();
    cudaStream_t stream = memory.stream();
    float* data = memory.device(0);
    check.expect_ok(memory.put(stream, data, std::vector<float>(count, 1.0f)), "upload");
    // Enqueued: the failure comes later, on the proxy.
    check.expect_ok(
        ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream) == ncclSuccess,
        std::string("enqueueing the allreduce: ") + ncclGetLastError(comm));
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    cudaError_t state = cudaStreamQuery(stream);
    while (state == cudaErrorNotReady && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      state = cudaStreamQuery(stream);
    }
    check.expect_ok(state == cudaSuccess,
                    std::string("the stream did not complete: ") + cudaGetErrorString(state));
    ncclResult_t async = ncclSuccess;
    check.expect_ok(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess,
                    "ncclCommGetAsyncError reports no error after the failed allreduce");
    const ncclResult_t later = ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream);
    check.expect_ok(later == async && later != ncclSuccess,
                    std::string("a later call does not fail with the async error: ") +
                        ncclGetErrorString(later));
    check.expect_ok(ncclCommAbort(comm) == ncclSuccess, "ncclCommAbort of rank 0");
  });
  EXPECT_EQ(check.failures(), 0) << check.first();
}

// ncclCommAbort while a device call still waits for its stream (held by a host function):
// abort returns at once, and the stream, once let go, completes instead of waiting for a
// collective that will never run.
TEST(PluginDeviceStreams, AbortReleasesAStreamStillWaiting) {
  REQUIRE_GPU();
  const int n = 2;
  const size_t count = 1000;
  struct Gate {
    std::atomic<bool> open{false};
    std::atomic<bool> passed{false};
  } gate;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  Checker check;
  run_rank_threads(n, 1, count, false, &check, [&](int rank, RankMemory& memory) {
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) {
      check.note(std::string("ncclCommInitRank: ") + ncclGetLastError(nullptr));
      return;
    }
    if (rank == 1) {
      check.expect_ok(ncclCommAbort(comm) == ncclSuccess, "ncclCommAbort of rank 1");
      return;
    }
    cudaStream_t stream = memory.stream();
    auto hold = [](void* argument) {
      Gate* held = static_cast<Gate*>(argument);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!held->open.load() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      held->passed = true;
    };
    check.expect_ok(cudaLaunchHostFunc(stream, hold, &gate) == cudaSuccess, "the gate");
    float* data = memory.device(0);
    check.expect_ok(memory.put(stream, data, std::vector<float>(count, 1.0f)), "upload");
    check.expect_ok(
        ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream) == ncclSuccess,
        "enqueueing the allreduce");
    check.expect_ok(ncclCommAbort(comm) == ncclSuccess, "ncclCommAbort of rank 0");
    check.expect_ok(!gate.passed.load(), "ncclCommAbort waited for the stream");
    gate.open = true;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    cudaError_t state = cudaStreamQuery(stream);
    while (state == cudaErrorNotReady && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      state = cudaStreamQuery(stream);
    }
    check.expect_ok(state == cudaSuccess, "the aborted call's stream did not complete");
  });
  EXPECT_EQ(check.failures(), 0) << check.first();
}

// The same collectives with the polling-kernel fallback forced (TERSE_STREAM_WAIT=kernel).
TEST(PluginDeviceStreams, PollingKernelFallbackWorksToo) {
  REQUIRE_GPU();
  ScopedEnvironment method("TERSE_STREAM_WAIT", "kernel");
  Checker check;
  run_gpu_ranks(2, 2, 2 * 1001, false, &check, [&](int rank, ncclComm_t comm, RankMemory& memory) {
    EveryCollective(rank, 2, comm, &memory, 1001, false, &check).run();
    EveryCollective(rank, 2, comm, &memory, 1001, true, &check).run();
  });
  EXPECT_EQ(check.failures(), 0) << check.first();
}

// The stream-wait probe (stream_wait.h) proves that a wait holds its stream until the host writes
// the word: a driver whose cuStreamWaitValue32 does not wait (the fake's FAKE_MEMOPS_RUN_PAST) is
// refused when TERSE_STREAM_WAIT=memop asks for it, and with the default the polling kernel takes
// over and the collectives are right. Only the fake runtime can be told to misbehave.
TEST(PluginDeviceStreams, AWaitThatDoesNotHoldIsRefusedByTheProbe) {
  REQUIRE_GPU();
  cudaDeviceProp properties{};
  ASSERT_EQ(cudaGetDeviceProperties(&properties, 0), cudaSuccess);
  if (std::string(properties.name).find("fake CUDA device") == std::string::npos) {
    GTEST_SKIP() << "needs the fake CUDA runtime, whose waits can be told not to wait";
  }
  ScopedEnvironment broken("FAKE_MEMOPS_RUN_PAST", "1");
  {
    ScopedEnvironment method("TERSE_STREAM_WAIT", "memop");
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    RankMemory memory(1, 16, false);
    ASSERT_TRUE(memory.ok());
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    const ncclResult_t result = ncclAllReduce(memory.device(0), memory.device(0), 16, ncclFloat32,
                                              ncclSum, comm, memory.stream(0));
    EXPECT_EQ(result, ncclInvalidUsage);
    const std::string message = ncclGetLastError(comm);
    EXPECT_NE(message.find("ran past a wait"), std::string::npos) << message;
    ncclCommDestroy(comm);
  }
  Checker check;
  run_gpu_ranks(2, 2, 2 * 1001, false, &check, [&](int rank, ncclComm_t comm, RankMemory& memory) {
    EveryCollective(rank, 2, comm, &memory, 1001, false, &check).run();
  });
  EXPECT_EQ(check.failures(), 0) << check.first();
}

// ncclRedOpCreatePreMulSum with the scalar in device memory (ncclScalarDevice, as PyTorch
// passes it): read in stream order at each call, so a new value written on the stream before
// the next call applies to that call. Host buffers cannot use such an operator.
TEST(PluginDeviceOps, PreMulSumScalarInDeviceMemoryIsReadInStreamOrder) {
  REQUIRE_GPU();
  const size_t count = 1001;
  Checker check;
  run_gpu_ranks(2, 2, count, false, &check, [&](int rank, ncclComm_t comm, RankMemory& memory) {
    cudaStream_t stream = memory.stream();
    float* data = memory.device(0);
    float* scalar = memory.device(1);
    check.expect_ok(memory.put(stream, scalar, {static_cast<float>(rank + 1)}), "scalar");
    ncclRedOp_t op;
    if (ncclRedOpCreatePreMulSum(&op, scalar, ncclFloat32, ncclScalarDevice, comm) != ncclSuccess) {
      check.note(std::string("ncclRedOpCreatePreMulSum: ") + ncclGetLastError(comm));
      return;
    }
    // Sum over ranks of 2 * (rank + 1), then with the scalars made ten times larger.
    for (float factor : {1.0f, 10.0f}) {
      check.expect_ok(
          memory.put(stream, scalar, {factor * (rank + 1)}) &&
              memory.put(stream, data, std::vector<float>(count, 2.0f)) &&
              ncclAllReduce(data, data, count, ncclFloat32, op, comm, stream) == ncclSuccess,
          std::string("PreMulSum allreduce: ") + ncclGetLastError(comm));
      check.expect(memory.get(stream, data, count), std::vector<float>(count, factor * 6.0f),
                   "PreMulSum with the scalar in device memory");
      memory.reset_uploads();
    }
    std::vector<float> host(count, 2.0f);
    check.expect_ok(ncclAllReduce(host.data(), host.data(), count, ncclFloat32, op, comm, stream) ==
                        ncclInvalidUsage,
                    "host buffers with a device scalar are not refused");
    check.expect_ok(ncclRedOpDestroy(op, comm) == ncclSuccess, "ncclRedOpDestroy");
    ncclRedOp_t immediate;
    check.expect_ok(ncclRedOpCreatePreMulSum(&immediate, scalar, ncclFloat32,
                                             ncclScalarHostImmediate, comm) == ncclInvalidArgument,
                    "a device pointer as ncclScalarHostImmediate is not refused");
  });
  EXPECT_EQ(check.failures(), 0) << check.first();
}

// One rank, one thread: refusals, count 0 and ncclMemAlloc.
class PluginDeviceSingleRank : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    memory_ = std::make_unique<RankMemory>(1, 16, false);
    ASSERT_TRUE(memory_->ok());
    ASSERT_EQ(ncclCommInitAll(&comm_, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  }
  void TearDown() override {
    if (comm_ != nullptr) {
      EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
    }
    memory_.reset();
  }
  static void expect_error(ncclResult_t result, ncclResult_t code,
                           const std::vector<std::string>& needles) {
    EXPECT_EQ(result, code) << ncclGetErrorString(result);
    const std::string message = ncclGetLastError(nullptr);
    for (const auto& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos) << "message: " << message;
    }
  }
  std::unique_ptr<RankMemory> memory_;
  ncclComm_t comm_ = nullptr;
};

TEST_F(PluginDeviceSingleRank, HostAndDeviceBuffersInOneCallAreRefusedNamingTheArgument) {
  float* device = memory_->device(0);
  std::vector<float> host(16, 1.0f);
  expect_error(ncclAllReduce(host.data(), device, 16, ncclFloat32, ncclSum, comm_, nullptr),
               ncclInvalidUsage, {"sendbuff", "host memory", "device memory"});
  expect_error(ncclAllReduce(device, host.data(), 16, ncclFloat32, ncclSum, comm_, nullptr),
               ncclInvalidUsage, {"recvbuff", "host memory"});
  // Inside a group the refusal fails the group, which runs nothing.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllGather(host.data(), device, 16, ncclFloat32, comm_, nullptr), ncclInvalidUsage);
  expect_error(ncclGroupEnd(), ncclInvalidUsage, {"ran nothing", "sendbuff"});
  // The refusals left the communicator healthy.
  ncclResult_t async = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
}

TEST_F(PluginDeviceSingleRank, DeviceBuffersOfAnotherDeviceAreRefused) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  if (devices < 2) GTEST_SKIP() << "needs two CUDA devices; this machine has " << devices;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  void* elsewhere = nullptr;
  ASSERT_EQ(cudaMalloc(&elsewhere, 64), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  expect_error(
      ncclAllReduce(memory_->device(0), elsewhere, 16, ncclFloat32, ncclSum, comm_, nullptr),
      ncclInvalidUsage, {"recvbuff", "device 1", "uses device 0"});
  cudaFree(elsewhere);
}

TEST_F(PluginDeviceSingleRank, MemAllocReturnsDeviceMemoryThatCollectivesTake) {
  void* memory = nullptr;
  ASSERT_EQ(ncclMemAlloc(&memory, 4000), ncclSuccess) << ncclGetLastError(nullptr);
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, memory), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attributes.device, 0);
  cudaStream_t stream = memory_->stream();
  float* data = static_cast<float*>(memory);
  std::vector<float> input(16);
  for (size_t i = 0; i < input.size(); ++i) input[i] = value(0, i);
  ASSERT_TRUE(memory_->put(stream, data, input));
  ASSERT_EQ(ncclAllReduce(data, data, 16, ncclFloat32, ncclSum, comm_, stream), ncclSuccess)
      << ncclGetLastError(nullptr);
  EXPECT_EQ(memory_->get(stream, data, 16), input);  // one rank: the sum is its own input
  EXPECT_EQ(ncclMemFree(memory), ncclSuccess);
  int not_allocated = 0;
  expect_error(ncclMemFree(&not_allocated), ncclInvalidArgument, {"ncclMemAlloc"});
}

TEST_F(PluginDeviceSingleRank, CountZeroOnDeviceBuffersTouchesNothing) {
  float* device = memory_->device(0);
  cudaStream_t stream = memory_->stream();
  EXPECT_EQ(ncclAllReduce(device, device, 0, ncclFloat32, ncclSum, comm_, stream), ncclSuccess);
  EXPECT_EQ(ncclBroadcast(device, device, 0, ncclFloat32, 0, comm_, stream), ncclSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

#else  // !TERSE_HAVE_CUDA

TEST(PluginDeviceBuffers, NeedACudaBuild) {
  GTEST_SKIP() << "terse was built without CUDA (TERSE_CUDA=OFF): no device buffers to test";
}

#endif  // TERSE_HAVE_CUDA

}  // namespace
