// Which CUDA calls wait for a stream that another thread holds? terse's device-buffer allreduce
// holds the caller's stream (cuStreamWaitValue32 on a mapped host flag, or a polling kernel)
// until its proxy thread has run the collective, and the proxy launches kernels, copies and
// allocations meanwhile. A call that waits for the held stream, or that makes later work of
// another stream wait for it, deadlocks that design. CUDA's documents name some such calls
// (cudaFree, synchronous copies and memsets, the legacy default stream, "implicit
// synchronization" after allocations, lazy loading), without saying which a given driver
// enforces; this program measures it.
//
// For each operation, in a child process of its own (so lazy loading and allocator state start
// fresh): a stream H of the child is held by a wait on a host flag, then a second thread runs the
// operation and launches a marker kernel on another stream S. The main thread watches for
// --timeout-ms: did the operation return (host blocked?), and did S's marker run (other work
// blocked?). Then it writes the flag and checks that H's own marker ran once the host released
// it (the wait really waited, and a host write really released it). Nothing here can hang: the
// flag is released after the timeout whatever happened.
//
// Usage: stream_hold_probe [--hold memop|kernel] [--timeout-ms N] [OPERATION...]
// Prints one line per operation: hold, operation, whether the call returned while held, whether
// another stream's kernel ran while held, the wait's own proof, and a verdict.
#include <cublas_v2.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

__global__ void set_marker(volatile int* marker) {
  *marker = 1;
}
// Launched only by the operations that time a kernel's first launch.
__global__ void never_launched_before(volatile int* marker) {
  *marker = 2;
}
__global__ void poll_flag(const volatile uint32_t* flag) {
  while (*flag == 0) __nanosleep(1000);
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#define CHECK(call)                                                \
  do {                                                             \
    const cudaError_t check_error_ = (call);                       \
    if (check_error_ != cudaSuccess) {                             \
      fprintf(stderr, "stream_hold_probe: %s failed: %s\n", #call, \
              cudaGetErrorString(check_error_));                   \
      exit(3);                                                     \
    }                                                              \
  } while (0)

const char* const kOperations[] = {
    "none",                    // control: nothing between the hold and the marker
    "cudaMalloc",              // 64 MiB
    "cudaFree",                // of memory allocated before the hold
    "cudaMallocHost",          // 1 MiB pinned, default flags
    "cudaHostAllocMapped",     // 1 MiB pinned, mapped and portable (terse's staging)
    "cudaFreeHost",            // of pinned memory allocated before the hold
    "cudaHostRegister",        // 1 MiB of malloc'd memory
    "cudaMemset",              // synchronous memset of device memory
    "cudaMemcpyD2D",           // synchronous device-to-device copy
    "cudaMemcpyH2D",           // synchronous copy from pinned memory
    "memcpyAsyncPageableD2H",  // on S, into pageable memory
    "cudaMallocAsync",         // stream-ordered, on S
    "cudaFreeAsync",     // stream-ordered, on S, of memory from cudaMallocAsync before the hold
    "cudaStreamCreate",  // a blocking stream
    "cudaEventCreate",
    "legacyStreamKernel",     // a kernel on the legacy default stream
    "firstLaunch",            // the first launch of a kernel never launched in this process
    "cudaFuncGetAttributes",  // of a kernel never launched
    "cublasCreate",
    "cublasSgemmFirst",       // a handle made before the hold, its first sgemm during it
    "cudaDeviceSynchronize",  // control: must wait
};

struct Probe {
  cudaStream_t held = nullptr, other = nullptr;
  uint32_t* flag = nullptr;  // mapped pinned host memory
  int* held_marker = nullptr;
  int* other_marker = nullptr;
  // Made before the hold, for the operations that free or use them.
  void* device_buffer = nullptr;
  void* device_buffer2 = nullptr;
  void* pinned_buffer = nullptr;
  void* async_buffer = nullptr;
  cublasHandle_t blas = nullptr;
  float* blas_buffer = nullptr;
};

// Runs `operation` on this thread. Returns false where the operation itself failed.
bool run_operation(const std::string& operation, Probe& p, std::string* detail) {
  cudaError_t error = cudaSuccess;
  if (operation == "none") {
  } else if (operation == "cudaMalloc") {
    void* memory = nullptr;
    error = cudaMalloc(&memory, 64 << 20);
  } else if (operation == "cudaFree") {
    error = cudaFree(p.device_buffer);
  } else if (operation == "cudaMallocHost") {
    void* memory = nullptr;
    error = cudaMallocHost(&memory, 1 << 20);
  } else if (operation == "cudaHostAllocMapped") {
    void* memory = nullptr;
    error = cudaHostAlloc(&memory, 1 << 20, cudaHostAllocMapped | cudaHostAllocPortable);
  } else if (operation == "cudaFreeHost") {
    error = cudaFreeHost(p.pinned_buffer);
  } else if (operation == "cudaHostRegister") {
    void* memory = malloc(1 << 20);
    error = cudaHostRegister(memory, 1 << 20, cudaHostRegisterDefault);
  } else if (operation == "cudaMemset") {
    error = cudaMemset(p.device_buffer, 0, 1 << 20);
  } else if (operation == "cudaMemcpyD2D") {
    error = cudaMemcpy(p.device_buffer2, p.device_buffer, 1 << 20, cudaMemcpyDeviceToDevice);
  } else if (operation == "cudaMemcpyH2D") {
    error = cudaMemcpy(p.device_buffer, p.pinned_buffer, 1 << 20, cudaMemcpyHostToDevice);
  } else if (operation == "memcpyAsyncPageableD2H") {
    std::vector<char> pageable(1 << 20);
    error =
        cudaMemcpyAsync(pageable.data(), p.device_buffer, 1 << 20, cudaMemcpyDeviceToHost, p.other);
  } else if (operation == "cudaMallocAsync") {
    void* memory = nullptr;
    error = cudaMallocAsync(&memory, 64 << 20, p.other);
  } else if (operation == "cudaFreeAsync") {
    error = cudaFreeAsync(p.async_buffer, p.other);
  } else if (operation == "cudaStreamCreate") {
    cudaStream_t stream = nullptr;
    error = cudaStreamCreate(&stream);
  } else if (operation == "cudaEventCreate") {
    cudaEvent_t event = nullptr;
    error = cudaEventCreate(&event);
  } else if (operation == "legacyStreamKernel") {
    set_marker<<<1, 1, 0, cudaStreamLegacy>>>(static_cast<volatile int*>(p.device_buffer));
    error = cudaGetLastError();
  } else if (operation == "firstLaunch") {
    never_launched_before<<<1, 1, 0, p.other>>>(static_cast<volatile int*>(p.device_buffer));
    error = cudaGetLastError();
  } else if (operation == "cudaFuncGetAttributes") {
    cudaFuncAttributes attributes{};
    error = cudaFuncGetAttributes(&attributes, never_launched_before);
  } else if (operation == "cublasCreate") {
    cublasHandle_t handle = nullptr;
    const cublasStatus_t status = cublasCreate(&handle);
    if (status != CUBLAS_STATUS_SUCCESS) {
      *detail = "cublasCreate status " + std::to_string(static_cast<int>(status));
      return false;
    }
  } else if (operation == "cublasSgemmFirst") {
    const float one = 1.0f, zero = 0.0f;
    cublasSetStream(p.blas, p.other);
    const cublasStatus_t status =
        cublasSgemm(p.blas, CUBLAS_OP_N, CUBLAS_OP_N, 256, 256, 256, &one, p.blas_buffer, 256,
                    p.blas_buffer, 256, &zero, p.blas_buffer + 256 * 256, 256);
    if (status != CUBLAS_STATUS_SUCCESS) {
      *detail = "cublasSgemm status " + std::to_string(static_cast<int>(status));
      return false;
    }
  } else if (operation == "cudaDeviceSynchronize") {
    error = cudaDeviceSynchronize();
  } else {
    *detail = "unknown operation";
    return false;
  }
  if (error != cudaSuccess) {
    *detail = cudaGetErrorString(error);
    return false;
  }
  return true;
}

// One operation, in this process. Exit code 0; the result is the printed line.
int probe_one(const std::string& operation, const std::string& hold, int timeout_ms) {
  Probe p;
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));
  CHECK(cudaStreamCreateWithFlags(&p.held, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&p.other, cudaStreamNonBlocking));
  CHECK(cudaHostAlloc(&p.flag, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
  CHECK(cudaHostAlloc(&p.held_marker, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  CHECK(cudaHostAlloc(&p.other_marker, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  CHECK(cudaMalloc(&p.device_buffer, 1 << 20));
  CHECK(cudaMalloc(&p.device_buffer2, 1 << 20));
  CHECK(cudaMallocHost(&p.pinned_buffer, 1 << 20));
  CHECK(cudaMallocAsync(&p.async_buffer, 1 << 20, p.other));
  if (operation == "cublasSgemmFirst") {
    if (cublasCreate(&p.blas) != CUBLAS_STATUS_SUCCESS) {
      fprintf(stderr, "stream_hold_probe: cublasCreate failed\n");
      return 3;
    }
    CHECK(cudaMalloc(&p.blas_buffer, 2 * 256 * 256 * sizeof(float)));
    CHECK(cudaMemset(p.blas_buffer, 0, 2 * 256 * 256 * sizeof(float)));
  }
  *p.flag = 0;
  *p.held_marker = 0;
  *p.other_marker = 0;
  uint32_t* device_flag = nullptr;
  int *device_held_marker = nullptr, *device_other_marker = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag), p.flag, 0));
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_held_marker), p.held_marker, 0));
  CHECK(
      cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_other_marker), p.other_marker, 0));
  // The marker and polling kernels loaded and run once before the hold.
  set_marker<<<1, 1, 0, p.other>>>(static_cast<volatile int*>(p.device_buffer));
  *p.flag = 1;
  poll_flag<<<1, 1, 0, p.other>>>(device_flag);
  CHECK(cudaStreamSynchronize(p.other));
  *p.flag = 0;

  // The hold.
  if (hold == "memop") {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    CHECK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &function, 11070,
                                           cudaEnableDefault, &status));
    const CUresult waited = reinterpret_cast<PFN_cuStreamWaitValue32_v11070>(function)(
        p.held, reinterpret_cast<CUdeviceptr>(device_flag), 1, CU_STREAM_WAIT_VALUE_GEQ);
    if (waited != CUDA_SUCCESS) {
      fprintf(stderr, "stream_hold_probe: cuStreamWaitValue32 failed: %d\n", waited);
      return 3;
    }
  } else {
    poll_flag<<<1, 1, 0, p.held>>>(device_flag);
    CHECK(cudaGetLastError());
  }
  set_marker<<<1, 1, 0, p.held>>>(device_held_marker);
  CHECK(cudaGetLastError());
  // The wait must hold: the held marker stays 0 while the flag does.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const bool held_before = *static_cast<volatile int*>(p.held_marker) == 0;

  std::atomic<bool> returned{false};
  std::atomic<double> returned_ms{0};
  std::string detail;
  bool operation_ok = true;
  const double start = now_ms();
  std::thread worker([&] {
    operation_ok = run_operation(operation, p, &detail);
    returned_ms = now_ms() - start;
    returned = true;
    if (operation != "cudaDeviceSynchronize") {
      set_marker<<<1, 1, 0, p.other>>>(device_other_marker);
    }
  });
  bool other_ran = false;
  double other_ms = 0;
  while (now_ms() - start < timeout_ms) {
    if (!other_ran && *static_cast<volatile int*>(p.other_marker) == 1) {
      other_ran = true;
      other_ms = now_ms() - start;
    }
    if (returned && (other_ran || operation == "cudaDeviceSynchronize")) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const bool returned_while_held = returned;
  const bool still_held = *static_cast<volatile int*>(p.held_marker) == 0;
  // Release, then the held stream must run its marker.
  __atomic_store_n(p.flag, 1u, __ATOMIC_RELEASE);
  const double released = now_ms();
  bool released_ran = false;
  while (now_ms() - released < 5000) {
    if (*static_cast<volatile int*>(p.held_marker) == 1) {
      released_ran = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const double release_ms = now_ms() - released;
  worker.join();
  const bool wait_proven = held_before && still_held && released_ran;
  const char* verdict = !operation_ok          ? "FAILED"
                        : !wait_proven         ? "NO-HOLD"
                        : !returned_while_held ? "BLOCKS-HOST"
                        : (!other_ran && operation != "cudaDeviceSynchronize")
                            ? "BLOCKS-OTHER-STREAMS"
                            : "free";
  printf(
      "%-7s %-24s returned_while_held=%-3s (%.1f ms) other_stream_ran=%-3s (%.1f ms) "
      "wait_held=%s released_by_host_write=%s (%.2f ms) %s%s%s\n",
      hold.c_str(), operation.c_str(), returned_while_held ? "yes" : "no",
      static_cast<double>(returned_ms), other_ran ? "yes" : "no", other_ms,
      held_before && still_held ? "yes" : "no", released_ran ? "yes" : "no", release_ms, verdict,
      detail.empty() ? "" : ": ", detail.c_str());
  fflush(stdout);
  CHECK(cudaDeviceSynchronize());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string hold = "memop";
  int timeout_ms = 1500;
  std::vector<std::string> operations;
  bool child = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--hold" && i + 1 < argc) {
      hold = argv[++i];
    } else if (arg == "--timeout-ms" && i + 1 < argc) {
      timeout_ms = atoi(argv[++i]);
    } else if (arg == "--child") {
      child = true;
    } else if (arg == "-h" || arg == "--help") {
      printf("usage: %s [--hold memop|kernel] [--timeout-ms N] [OPERATION...]\noperations:",
             argv[0]);
      for (const char* name : kOperations) printf(" %s", name);
      printf("\n");
      return 0;
    } else {
      operations.push_back(arg);
    }
  }
  if (hold != "memop" && hold != "kernel") {
    fprintf(stderr, "stream_hold_probe: --hold must be memop or kernel, not '%s'\n", hold.c_str());
    return 2;
  }
  if (child) return probe_one(operations.at(0), hold, timeout_ms);
  if (operations.empty()) operations.assign(std::begin(kOperations), std::end(kOperations));
  int failures = 0;
  for (const std::string& operation : operations) {
    // A process of its own per operation: fresh lazy-loading and allocator state.
    const pid_t pid = fork();
    if (pid == 0) {
      std::vector<char*> args = {argv[0],
                                 const_cast<char*>("--child"),
                                 const_cast<char*>("--hold"),
                                 const_cast<char*>(hold.c_str()),
                                 const_cast<char*>("--timeout-ms"),
                                 const_cast<char*>(std::to_string(timeout_ms).c_str()),
                                 const_cast<char*>(operation.c_str()),
                                 nullptr};
      std::string timeout_text = std::to_string(timeout_ms);
      args[5] = const_cast<char*>(timeout_text.c_str());
      execv("/proc/self/exe", args.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      printf("%-7s %-24s the probe process failed (status %d)\n", hold.c_str(), operation.c_str(),
             status);
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
