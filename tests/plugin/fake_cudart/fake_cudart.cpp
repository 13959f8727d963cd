// A fake CUDA runtime (libcudart.so.<major>) for running the device-buffer tests of
// plugin_tests on a machine without a GPU: run.sh builds it and puts it first on
// LD_LIBRARY_PATH. It checks terse's side of device staging (stream order, copies, the join,
// host functions, the stream waits, shutdown), not CUDA's: a real GPU remains the test.
//
// What it models: each stream is a worker thread running its operations in order; host
// functions of every stream run on one shared callback thread, as CUDA's do; events order
// streams; cuStreamWaitValue32 (from cudaGetDriverEntryPointByVersion) and terse's polling
// kernel (the only kernel terse launches) spin on host memory; "device memory" is a PROT_NONE
// mapping whose pages only the fake's copies reach, through a second mapping, so any host
// access to device memory crashes. FAKE_NO_MEMOPS=1 hides cuStreamWaitValue32 (the fallback);
// FAKE_MEMOPS_RUN_PAST=1 gives one whose waits do not wait (a driver terse's probe must refuse).
//
// What CUDA waits for, as measured on an H200 (perf/stream_hold_probe, perf/RESULTS.md "First
// GPU runs"): cudaFree, cudaFreeHost and cudaDeviceSynchronize wait until every stream is idle;
// a copy from device memory into pageable host memory returns only once the stream ran it, and
// while a thread waits in one, cudaMalloc, cudaHostAlloc and cudaHostRegister wait for it (a
// lock of the driver's). A wait longer than FAKE_DEADLOCK_MS (default 20000) is taken for the
// deadlock it is on a GPU: the process aborts, naming the waiting call and thread, and each
// stream held by a wait on host memory and each thread in a pageable copy, with where they
// came from.
// CUDA's error reporting: a failed call's error is the thread's last error until read, and a
// kernel fault is sticky. Lazy loading: a kernel's first launch (or cudaFuncGetAttributes) waits
// for the device to be idle unless CUDA_MODULE_LOADING=EAGER. Failures on request: the n-th call
// of a named function (fakeCudaFailCall, FAKE_FAIL=<function>:<n>; "fault:<kernel>" makes a
// kernel fault). The kernels built for the host (tests/host_kernels) launch through
// fakeCudaLaunchHostKernel and read device memory through fakeCudaKernelView.
// FAKE_STREAM_JITTER_US delays each stream operation by a random time up to that bound.
// Not modelled: graphs, several devices, the legacy default stream's implicit synchronisation.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <execinfo.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

namespace {

struct Region {
  size_t size;
  cudaMemoryType type;
  char* alias;  // accessible view (device memory), else null
};
std::mutex regions_mutex;
std::map<uintptr_t, Region> regions;

bool find_region(const void* p, uintptr_t* base, Region* out) {
  std::lock_guard<std::mutex> lock(regions_mutex);
  auto it = regions.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == regions.begin()) return false;
  --it;
  if (reinterpret_cast<uintptr_t>(p) >= it->first + it->second.size) return false;
  *base = it->first;
  *out = it->second;
  return true;
}

char* accessible(const void* p) {
  uintptr_t base;
  Region r;
  if (find_region(p, &base, &r) && r.alias != nullptr) {
    return r.alias + (reinterpret_cast<uintptr_t>(p) - base);
  }
  return const_cast<char*>(static_cast<const char*>(p));
}

// One thread runs every host function, in the order streams reach them.
class CallbackThread {
 public:
  CallbackThread() : thread_([this] { loop(); }) { thread_.detach(); }
  void run(cudaHostFn_t fn, void* arg) {
    std::atomic<bool> done{false};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back([&] {
        fn(arg);
        done = true;
      });
    }
    cv_.notify_all();
    while (!done.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return !queue_.empty(); });
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::thread thread_;
};
CallbackThread& callbacks() {
  static CallbackThread* instance = new CallbackThread();
  return *instance;
}

// Where a call came from: the calling thread's name and a few frames (module+offset).
std::string call_site(const char* call) {
  char name[32] = "?";
  pthread_getname_np(pthread_self(), name, sizeof(name));
  void* frames[8];
  const int depth = backtrace(frames, 8);
  std::string site = std::string(call) + " on thread '" + name + "'";
  char** symbols = backtrace_symbols(frames, depth);
  for (int i = 2; symbols != nullptr && i < depth; ++i)
    site += std::string("\n      ") + symbols[i];
  free(symbols);
  return site;
}

// What threads and streams are waiting for, for the deadlock report.
std::mutex waits_mutex;
std::condition_variable waits_changed;
std::map<const void*, std::string> held_streams;  // stream -> where its wait was enqueued
std::map<uint64_t, std::string> pageable_copies;  // copy id -> where it was called
uint64_t next_copy = 0;

long deadlock_ms() {
  const char* text = getenv("FAKE_DEADLOCK_MS");
  return text != nullptr && atol(text) > 0 ? atol(text) : 20000;
}

[[noreturn]] void report_deadlock(const std::string& waiter, const char* waiting_for) {
  std::string report = "fake CUDA runtime: deadlock: " + waiter + "\n  has waited " +
                       std::to_string(deadlock_ms()) + " ms for " + waiting_for + ";";
  {
    std::lock_guard<std::mutex> lock(waits_mutex);
    for (const auto& held : held_streams) report += "\n  stream held by " + held.second;
    for (const auto& copy : pageable_copies) report += "\n  thread in " + copy.second;
  }
  fprintf(stderr, "%s\n", report.c_str());
  fflush(stderr);
  abort();
}

// Waits until `done` (checked under waits_mutex) or the deadlock deadline.
template <typename Done>
void wait_or_report(const std::string& waiter, const char* waiting_for, Done done) {
  std::unique_lock<std::mutex> lock(waits_mutex);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadlock_ms());
  while (!done()) {
    if (waits_changed.wait_until(lock, deadline) == std::cv_status::timeout && !done()) {
      lock.unlock();
      report_deadlock(waiter, waiting_for);
    }
  }
}

// cudaMalloc and its kin: not while a thread waits in a pageable copy.
void allocation_lock(const char* call) {
  bool busy;
  {
    std::lock_guard<std::mutex> lock(waits_mutex);
    busy = !pageable_copies.empty();
  }
  if (busy) {
    wait_or_report(call_site(call), "the driver's lock, which a pageable copy keeps",
                   [] { return pageable_copies.empty(); });
  }
}

long jitter_us() {
  static const long jitter = [] {
    const char* text = getenv("FAKE_STREAM_JITTER_US");
    return text != nullptr && atol(text) > 0 ? atol(text) : 0L;
  }();
  return jitter;
}

struct FakeStream;
std::mutex streams_mutex;
std::set<FakeStream*>& all_streams() {
  static auto* streams = new std::set<FakeStream*>();
  return *streams;
}

struct FakeStream {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> ops;
  bool busy = false;
  FakeStream() {
    {
      std::lock_guard<std::mutex> lock(streams_mutex);
      all_streams().insert(this);
    }
    std::thread([this] { loop(); }).detach();
  }
  void push(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      ops.push_back(std::move(op));
    }
    cv.notify_all();
  }
  void loop() {
    std::minstd_rand random(static_cast<unsigned>(reinterpret_cast<uintptr_t>(this)));
    for (;;) {
      std::function<void()> op;
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return !ops.empty(); });
        op = std::move(ops.front());
        ops.pop_front();
        busy = true;
      }
      // FAKE_STREAM_JITTER_US=n: each operation starts up to n us late, so streams interleave
      // differently from run to run, as a GPU's do.
      if (jitter_us() > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(random() % (jitter_us() + 1)));
      }
      op();
      {
        std::lock_guard<std::mutex> lock(mutex);
        busy = false;
      }
      cv.notify_all();
      { std::lock_guard<std::mutex> lock(waits_mutex); }
      waits_changed.notify_all();
    }
  }
  void drain() {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return ops.empty() && !busy; });
  }
  bool idle() {
    std::lock_guard<std::mutex> lock(mutex);
    return ops.empty() && !busy;
  }
};

FakeStream* stream_of(cudaStream_t s) {
  static FakeStream* legacy = new FakeStream();
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return legacy;
  return reinterpret_cast<FakeStream*>(s);
}

struct FakeEvent {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t recorded = 0, completed = 0;
  std::chrono::steady_clock::time_point completed_at;  // for cudaEventElapsedTime
};

// Every stream idle (cudaFree, cudaFreeHost, cudaDeviceSynchronize).
bool every_stream_idle() {
  std::lock_guard<std::mutex> lock(streams_mutex);
  for (FakeStream* stream : all_streams()) {
    if (!stream->idle()) return false;
  }
  return true;
}
void wait_for_every_stream(const char* call) {
  if (every_stream_idle()) return;
  wait_or_report(call_site(call), "every stream to finish its work",
                 [] { return every_stream_idle(); });
}

// A stream op that waits for a host write: the stream is held meanwhile.
void spin_until(const volatile uint32_t* flag, uint32_t value, const void* stream,
                const std::string& site) {
  if (static_cast<int32_t>(*flag - value) >= 0) return;
  {
    std::lock_guard<std::mutex> lock(waits_mutex);
    held_streams[stream] = site;
  }
  while (static_cast<int32_t>(*flag - value) < 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  {
    std::lock_guard<std::mutex> lock(waits_mutex);
    held_streams.erase(stream);
  }
  waits_changed.notify_all();
}

CUresult CUDAAPI fake_wait_value_32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                    unsigned int) {
  const volatile uint32_t* flag = reinterpret_cast<const volatile uint32_t*>(addr);
  FakeStream* fake = stream_of(reinterpret_cast<cudaStream_t>(stream));
  const std::string site = call_site("cuStreamWaitValue32");
  if (getenv("FAKE_MEMOPS_RUN_PAST") != nullptr) return CUDA_SUCCESS;
  fake->push([flag, value, fake, site] { spin_until(flag, value, fake, site); });
  return CUDA_SUCCESS;
}

thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;
// A kernel's fault: every later call returns it, as after a sticky error on a GPU.
std::atomic<cudaError_t> sticky_error{cudaSuccess};
std::mutex fault_mutex;
std::string fault_text;

// Records a kernel fault: on stderr at once (a GPU tells nothing until the next
// synchronisation, and then not which kernel), and as the sticky error.
void record_fault(const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(fault_mutex);
    if (fault_text.empty()) fault_text = text;
  }
  fprintf(stderr, "fake CUDA runtime: kernel fault: %s\n", text.c_str());
  fflush(stderr);
  sticky_error = cudaErrorLaunchFailure;
}

// Lazy loading (CUDA 12.2 and later, unless CUDA_MODULE_LOADING=EAGER): a kernel's module is
// loaded at its first launch or attribute query, and loading waits for the device to be idle.
std::mutex loaded_mutex;
std::set<const void*> loaded_kernels;
bool loads_lazily() {
  const char* mode = getenv("CUDA_MODULE_LOADING");
  return mode == nullptr || std::strcmp(mode, "EAGER") != 0;
}
// One load at a time (the loader's lock): a second thread launching a kernel being loaded waits
// for that load, not for the device again.
void load_kernel(const void* kernel, const std::string& name) {
  std::lock_guard<std::mutex> lock(loaded_mutex);
  if (!loads_lazily() || loaded_kernels.count(kernel) != 0) return;
  wait_for_every_stream(("loading kernel " + name + " (lazy loading)").c_str());
  loaded_kernels.insert(kernel);
}

// Failures on request: the n-th call of a named function from now fails (fakeCudaFailCall, or
// FAKE_FAIL=<function>:<n> in the environment, read at the first call).
std::mutex failures_mutex;
std::map<std::string, long>& failures() {
  static auto* countdowns = [] {
    auto* made = new std::map<std::string, long>();
    if (const char* text = getenv("FAKE_FAIL")) {
      const std::string spec = text;
      const size_t colon = spec.rfind(':');
      if (colon != std::string::npos)
        (*made)[spec.substr(0, colon)] = atol(spec.c_str() + colon + 1);
    }
    return made;
  }();
  return *countdowns;
}
bool injected_failure(const char* function) {
  std::lock_guard<std::mutex> lock(failures_mutex);
  auto it = failures().find(function);
  if (it == failures().end() || it->second <= 0) return false;
  return --it->second == 0;
}

// At the start of each modelled call: after a kernel fault, the sticky error; a failure asked
// for, `injected`.
#define FAKE_ENTRY(injected)                                                    \
  do {                                                                          \
    if (sticky_error.load() != cudaSuccess) return result(sticky_error.load()); \
    if (injected_failure(__func__)) return result(injected);                    \
  } while (0)

// The call's result, also kept as the thread's last error when it failed.
cudaError_t result(cudaError_t error) {
  if (error != cudaSuccess) last_error = error;
  return error;
}
// Set by the emulated kernels (tests/compressed/device/emulated_compute.h) around their copies:
// those stand for a kernel's own reads and writes of device memory, which never wait.
thread_local bool emulated_kernel_copies = false;

}  // namespace

extern "C" {

// The fake's own switch (tests only): copies made by this thread while `on` are an emulated
// kernel's, which a real runtime would run as device work.
void fakeCudaEmulatedKernelCopies(int on) {
  emulated_kernel_copies = on != 0;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  current_device = device;
  return cudaSuccess;
}
// What names the device in a report (the perf binaries' "# Using devices" lines): an
// impossible bus id and a name no real GPU has, so a reader can tell the fake was loaded.
cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int length, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  snprintf(bus_id, static_cast<size_t>(length), "0000:fa:ce.0");
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  std::memset(properties, 0, sizeof(*properties));
  snprintf(properties->name, sizeof(properties->name), "fake CUDA device (tests)");
  return cudaSuccess;
}
// The attributes CUB's and terse's launch sizing read (a device of 132 SMs of compute capability
// 9.0, as an H200); any other reads 0.
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  if (value == nullptr) return cudaErrorInvalidValue;
  switch (attribute) {
    case cudaDevAttrMultiProcessorCount:
      *value = 132;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      break;
    case cudaDevAttrWarpSize:
      *value = 32;
      break;
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      break;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
      *value = 2048;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = 48 << 10;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = 227 << 10;
      break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = 228 << 10;
      break;
    case cudaDevAttrMaxGridDimX:
      *value = 0x7fffffff;
      break;
    case cudaDevAttrMaxGridDimY:
    case cudaDevAttrMaxGridDimZ:
      *value = 65535;
      break;
    default:
      *value = 0;
      break;
  }
  return cudaSuccess;
}
// As many resident blocks as the thread limit allows (no register or shared-memory model).
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void*,
                                                                   int block_size, size_t,
                                                                   unsigned int) {
  if (blocks == nullptr || block_size <= 0) return cudaErrorInvalidValue;
  *blocks = block_size >= 2048 ? 1 : 2048 / block_size;
  return cudaSuccess;
}
// CUDA's error reporting: a failed call's error is also the calling thread's last error, which
// cudaGetLastError returns and clears and cudaPeekAtLastError only returns; a kernel fault is
// sticky: the process's every later call returns it, and no call clears it.
cudaError_t cudaGetLastError(void) {
  const cudaError_t sticky = sticky_error.load();
  if (sticky != cudaSuccess) return sticky;
  const cudaError_t last = last_error;
  last_error = cudaSuccess;
  return last;
}
cudaError_t cudaPeekAtLastError(void) {
  const cudaError_t sticky = sticky_error.load();
  return sticky != cudaSuccess ? sticky : last_error;
}
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorMisalignedAddress:
      return "misaligned address";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    default:
      return "fake cuda error";
  }
}
const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorMisalignedAddress:
      return "cudaErrorMisalignedAddress";
    default:
      return "cudaErrorUnknown";
  }
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
  FAKE_ENTRY(cudaErrorMemoryAllocation);
  allocation_lock("cudaMalloc");
  if (size == 0) size = 1;
  const size_t page = 4096, bytes = (size + page - 1) / page * page;
  const int fd = memfd_create("fake-device", 0);
  if (fd < 0 || ftruncate(fd, bytes) != 0) return cudaErrorMemoryAllocation;
  void* device = mmap(nullptr, bytes, PROT_NONE, MAP_SHARED, fd, 0);
  void* alias = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  std::lock_guard<std::mutex> lock(regions_mutex);
  regions[reinterpret_cast<uintptr_t>(device)] = {bytes, cudaMemoryTypeDevice,
                                                  static_cast<char*>(alias)};
  *ptr = device;
  return cudaSuccess;
}
cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int) {
  void* memory = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  std::lock_guard<std::mutex> lock(regions_mutex);
  regions[reinterpret_cast<uintptr_t>(memory)] = {size, cudaMemoryTypeManaged, nullptr};
  *ptr = memory;
  return cudaSuccess;
}
// The memory itself, without CUDA's wait (cudaFreeAsync's stream-ordered free).
cudaError_t free_region(void* ptr) {
  std::lock_guard<std::mutex> lock(regions_mutex);
  auto it = regions.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == regions.end()) return cudaErrorInvalidValue;
  if (it->second.alias != nullptr) {
    munmap(ptr, it->second.size);
    munmap(it->second.alias, it->second.size);
  } else {
    free(ptr);
  }
  regions.erase(it);
  return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
  FAKE_ENTRY(cudaErrorUnknown);
  if (ptr == nullptr) return cudaSuccess;
  wait_for_every_stream("cudaFree");
  return free_region(ptr);
}
cudaError_t cudaDeviceSynchronize(void) {
  FAKE_ENTRY(cudaErrorUnknown);
  wait_for_every_stream("cudaDeviceSynchronize");
  return result(sticky_error.load());
}
// Stream-ordered allocation: the memory exists at once (work after it on the stream may use
// it), the free runs in stream order, after the work enqueued before it.
// (Measured: neither waits for a held stream.)
cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t) {
  FAKE_ENTRY(cudaErrorMemoryAllocation);
  return cudaMalloc(ptr, size);
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  FAKE_ENTRY(cudaErrorUnknown);
  stream_of(stream)->push([ptr] { free_region(ptr); });
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) {
  FAKE_ENTRY(cudaErrorMemoryAllocation);
  allocation_lock("cudaHostAlloc");
  void* memory = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  std::lock_guard<std::mutex> lock(regions_mutex);
  regions[reinterpret_cast<uintptr_t>(memory)] = {size, cudaMemoryTypeHost, nullptr};
  *ptr = memory;
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return cudaHostAlloc(ptr, size, 0);
}
cudaError_t cudaFreeHost(void* ptr) {
  wait_for_every_stream("cudaFreeHost");
  std::lock_guard<std::mutex> lock(regions_mutex);
  auto it = regions.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == regions.end() || it->second.type != cudaMemoryTypeHost) return cudaErrorInvalidValue;
  regions.erase(it);
  free(ptr);
  return cudaSuccess;
}
// Registered host memory is host memory to cudaPointerGetAttributes, as pinned memory is.
cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int) {
  FAKE_ENTRY(cudaErrorMemoryAllocation);
  allocation_lock("cudaHostRegister");
  if (ptr == nullptr || size == 0) return result(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(regions_mutex);
  if (!regions.emplace(reinterpret_cast<uintptr_t>(ptr), Region{size, cudaMemoryTypeHost, nullptr})
           .second) {
    return result(cudaErrorHostMemoryAlreadyRegistered);
  }
  return cudaSuccess;
}
cudaError_t cudaHostUnregister(void* ptr) {
  FAKE_ENTRY(cudaErrorUnknown);
  std::lock_guard<std::mutex> lock(regions_mutex);
  auto it = regions.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == regions.end() || it->second.type != cudaMemoryTypeHost) {
    return result(cudaErrorHostMemoryNotRegistered);
  }
  regions.erase(it);
  return cudaSuccess;
}
cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int) {
  *device = host;
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  std::memset(attributes, 0, sizeof(*attributes));
  uintptr_t base;
  Region r;
  attributes->type = cudaMemoryTypeUnregistered;
  attributes->device = -2;
  if (find_region(ptr, &base, &r)) {
    attributes->type = r.type;
    attributes->device = 0;
    attributes->devicePointer = const_cast<void*>(ptr);
  }
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  FAKE_ENTRY(cudaErrorUnknown);
  *stream = reinterpret_cast<cudaStream_t>(new FakeStream());
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}
// Priorities are accepted and not modelled.
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int) {
  return cudaStreamCreateWithFlags(stream, flags);
}
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = -5;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) {
  return cudaSuccess;
}  // leaked: work completes
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  FAKE_ENTRY(cudaErrorUnknown);
  stream_of(stream)->drain();
  return result(sticky_error.load());  // a fault of the work waited for
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  FAKE_ENTRY(cudaErrorUnknown);
  return stream_of(stream)->idle() ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* status) {
  *status = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind,
                            cudaStream_t stream) {
  FAKE_ENTRY(cudaErrorUnknown);
  uintptr_t base;
  Region source, destination;
  const bool from_device = find_region(src, &base, &source) && source.alias != nullptr;
  const bool to_pageable = !find_region(dst, &base, &destination);
  if (!(from_device && to_pageable) || emulated_kernel_copies) {
    stream_of(stream)->push(
        [dst, src, count] { std::memcpy(accessible(dst), accessible(src), count); });
    return cudaSuccess;
  }
  // Device to pageable memory: returns once the stream ran the copy, and keeps the driver's lock
  // (allocation_lock) meanwhile.
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(waits_mutex);
    id = next_copy++;
    pageable_copies[id] = call_site("cudaMemcpyAsync into pageable memory");
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  stream_of(stream)->push([dst, src, count, done] {
    std::memcpy(dst, accessible(src), count);
    {
      std::lock_guard<std::mutex> lock(waits_mutex);
      done->store(true);
    }
    waits_changed.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(waits_mutex);
    waits_changed.wait(lock, [&] { return done->load(); });
    pageable_copies.erase(id);
  }
  waits_changed.notify_all();
  return cudaSuccess;
}
// Synchronous, on no stream of the fake's: as measured, a plain cudaMemcpy does not wait for a
// stream held by a wait on host memory (the streams here are all non-blocking ones).
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind) {
  FAKE_ENTRY(cudaErrorUnknown);
  std::memcpy(accessible(dst), accessible(src), count);
  return cudaSuccess;
}
// Synchronous, as cudaMemcpy (on no stream of the model's).
cudaError_t cudaMemset(void* dst, int value, size_t count) {
  FAKE_ENTRY(cudaErrorUnknown);
  std::memset(accessible(dst), value, count);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t stream) {
  FAKE_ENTRY(cudaErrorUnknown);
  stream_of(stream)->push([dst, value, count] { std::memset(accessible(dst), value, count); });
  return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* arg) {
  FAKE_ENTRY(cudaErrorUnknown);
  stream_of(stream)->push([fn, arg] { callbacks().run(fn, arg); });
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  FAKE_ENTRY(cudaErrorUnknown);
  *event = reinterpret_cast<cudaEvent_t>(new FakeEvent());
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}
cudaError_t cudaEventDestroy(cudaEvent_t) {
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  FAKE_ENTRY(cudaErrorUnknown);
  FakeEvent* e = reinterpret_cast<FakeEvent*>(event);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    generation = ++e->recorded;
  }
  stream_of(stream)->push([e, generation] {
    {
      std::lock_guard<std::mutex> lock(e->mutex);
      if (e->completed < generation) e->completed = generation;
      e->completed_at = std::chrono::steady_clock::now();
    }
    e->cv.notify_all();
  });
  return cudaSuccess;
}
// Milliseconds between two completed events (host time: the model's streams are host threads).
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  FAKE_ENTRY(cudaErrorUnknown);
  if (ms == nullptr || start == nullptr || end == nullptr) return result(cudaErrorInvalidValue);
  FakeEvent* a = reinterpret_cast<FakeEvent*>(start);
  FakeEvent* b = reinterpret_cast<FakeEvent*>(end);
  std::scoped_lock lock(a->mutex, b->mutex);
  if (a->recorded == 0 || b->recorded == 0) return result(cudaErrorInvalidResourceHandle);
  if (a->completed < a->recorded || b->completed < b->recorded) return result(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(b->completed_at - a->completed_at).count();
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  FAKE_ENTRY(cudaErrorUnknown);
  FakeEvent* e = reinterpret_cast<FakeEvent*>(event);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    generation = e->recorded;
  }
  stream_of(stream)->push([e, generation] {
    std::unique_lock<std::mutex> lock(e->mutex);
    e->cv.wait(lock, [&] { return e->completed >= generation; });
  });
  return cudaSuccess;
}
// The compressed collectives' device backend waits on events from its driving thread.
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  FAKE_ENTRY(cudaErrorUnknown);
  FakeEvent* e = reinterpret_cast<FakeEvent*>(event);
  std::unique_lock<std::mutex> lock(e->mutex);
  const uint64_t generation = e->recorded;
  e->cv.wait(lock, [&] { return e->completed >= generation; });
  return result(sticky_error.load());
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  FAKE_ENTRY(cudaErrorUnknown);
  FakeEvent* e = reinterpret_cast<FakeEvent*>(event);
  std::lock_guard<std::mutex> lock(e->mutex);
  return e->completed >= e->recorded ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int,
                                             unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  if (std::strcmp(symbol, "cuStreamWaitValue32") == 0 && getenv("FAKE_NO_MEMOPS") == nullptr) {
    *fn = reinterpret_cast<void*>(&fake_wait_value_32);
    if (status) *status = cudaDriverEntryPointSuccess;
    return cudaSuccess;
  }
  *fn = nullptr;
  if (status) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}
// Only terse's polling kernel is launched this way: (const volatile uint32_t* flag, uint32_t seq).
// The kernels compiled for the host come through fakeCudaLaunchHostKernel.
cudaError_t cudaLaunchKernel(const void* kernel, dim3, dim3, void** args, size_t,
                             cudaStream_t stream) {
  if (sticky_error.load() != cudaSuccess) return sticky_error.load();
  load_kernel(kernel, "stream_wait_kernel");
  const volatile uint32_t* flag = *static_cast<const volatile uint32_t**>(args[0]);
  const uint32_t value = *static_cast<uint32_t*>(args[1]);
  FakeStream* fake = stream_of(stream);
  const std::string site = call_site("the polling kernel's launch");
  fake->push([flag, value, fake, site] { spin_until(flag, value, fake, site); });
  return cudaSuccess;
}
// Loads the kernel, as CUDA does (the way to load a kernel before any stream is held).
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* kernel) {
  if (attributes == nullptr || kernel == nullptr) return result(cudaErrorInvalidValue);
  load_kernel(kernel, "queried by cudaFuncGetAttributes");
  std::memset(attributes, 0, sizeof(*attributes));
  attributes->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}

// The tests' host build of the kernels (tests/host_kernels/simt.h) launches through here: `run`
// executes the grid on the stream's thread and returns non-zero with a description on a fault.
cudaError_t fakeCudaLaunchHostKernel(const void* kernel, const char* name, dim3 grid, dim3 block,
                                     cudaStream_t stream,
                                     int (*run)(void* work, char* fault, size_t fault_bytes),
                                     void* work, void (*release)(void* work)) {
  if (sticky_error.load() != cudaSuccess) {
    release(work);
    return result(sticky_error.load());
  }
  const unsigned long long threads = static_cast<unsigned long long>(block.x) * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 ||
      threads == 0 || threads > 1024 || block.z > 64) {
    release(work);
    return result(cudaErrorInvalidConfiguration);
  }
  if (injected_failure("cudaLaunchKernel")) {
    release(work);
    return result(cudaErrorLaunchOutOfResources);
  }
  load_kernel(kernel, name);
  const std::string label = name;
  // A fault on request ("fault:<kernel name>"): the kernel does not run and faults instead.
  const bool faults = injected_failure(("fault:" + label).c_str());
  stream_of(stream)->push([run, work, release, label, faults] {
    if (sticky_error.load() == cudaSuccess) {
      char fault[2048] = "";
      if (faults) {
        record_fault("kernel " + label + ": an illegal address (a fault on request)");
      } else if (run(work, fault, sizeof(fault)) != 0) {
        record_fault(fault);
      }
    }
    release(work);
  });
  return cudaSuccess;
}

// What a kernel dereferences for `pointer`: device memory's accessible view.
void* fakeCudaKernelView(const void* pointer) {
  return accessible(pointer);
}

// Makes the n-th call of `function` from now fail (n = 1: the next one); n = 0 cancels (tests).
void fakeCudaFailCall(const char* function, long n) {
  std::lock_guard<std::mutex> lock(failures_mutex);
  failures()[function] = n;
}

// The first kernel fault's description, or "" (tests).
const char* fakeCudaKernelFault(void) {
  std::lock_guard<std::mutex> lock(fault_mutex);
  return fault_text.c_str();
}

// What nvcc's generated code registers: nothing to do here.
void** __cudaRegisterFatBinary(void*) {
  static void* handle = nullptr;
  return &handle;
}
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
void __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*,
                            dim3*, int*) {}
// The codecs' kernels keep __device__ variables (linked into the compressed-collective tests).
void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}
unsigned __cudaPopCallConfiguration(dim3*, dim3*, size_t*, void*) {
  return 0;
}
unsigned __cudaPushCallConfiguration(dim3, dim3, size_t, void*) {
  return 0;
}
cudaError_t __cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t) {
  return cudaSuccess;
}
cudaError_t __cudaGetKernel(void**, const void*) {
  return cudaSuccess;
}

}  // extern "C"
