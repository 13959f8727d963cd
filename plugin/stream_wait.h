// Making a CUDA stream wait until the stream proxy has published a sequence number, without
// blocking any host thread.
//
// Preferred: cuStreamWaitValue32 (CU_STREAM_WAIT_VALUE_GEQ, a cyclic >=) on the flag's device
// address, a stream memory operation the GPU's front end evaluates by itself. It is a driver
// API function; terse takes it from cudaGetDriverEntryPointByVersion instead of linking
// libcuda, because libterse.so must load on machines with no NVIDIA driver at all (every test
// machine without a GPU), where libcuda.so.1 does not exist; libcudart loads anywhere.
//
// Fallback, where the driver refuses stream memory operations (the probe at creation fails):
// a one-thread kernel that polls the flag (mapped pinned memory) with __nanosleep between
// reads. Not the blocking host function one might reach for first: CUDA runs every host
// function of a process on one driver thread, so a host function that blocks until the
// collective is done would stop the other ranks' "inputs staged" host functions from running,
// and ranks that are threads of one process would deadlock. The kernel occupies one SM thread
// while it waits and blocks nothing else.
//
// TERSE_STREAM_WAIT = auto (default: memop where the probe succeeds, else kernel) | memop |
// kernel. The fallback is reported once at WARN.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <memory>

namespace terse {

enum class StreamWaitMethod { kMemoryOperation, kPollingKernel };

class StreamWaiter {
 public:
  // For streams of `device` (current when called) waiting on `flag`, pinned host memory
  // allocated mapped. `probe_word` (the same kind of memory, 0, used once) is what the probe of
  // cuStreamWaitValue32 waits on and then writes. Reads TERSE_STREAM_WAIT.
  static ncclResult_t create(int device, const uint32_t* flag, uint32_t* probe_word,
                             std::unique_ptr<StreamWaiter>* out);

  // Enqueues on `stream`: wait until (int32_t)(*flag - sequence) >= 0.
  ncclResult_t wait(cudaStream_t stream, uint32_t sequence) const;

  StreamWaitMethod method() const { return method_; }

 private:
  StreamWaiter() = default;

  StreamWaitMethod method_ = StreamWaitMethod::kPollingKernel;
  uintptr_t flag_device_address_ = 0;
  void* wait_value_32_ = nullptr;  // the driver's cuStreamWaitValue32
};

const char* stream_wait_method_name(StreamWaitMethod method);

}  // namespace terse
