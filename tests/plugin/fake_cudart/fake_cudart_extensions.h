// The CUDA runtime model's own entry points (fake_cudart.cpp), beyond CUDA's API, found at run
// time with dlsym so that a binary linked against the real runtime can use them when the model is
// loaded in its place (and learn that it is not, when they are missing).
#pragma once

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstddef>

namespace fake_cudart {

// Enqueues `run(work, fault, fault_bytes)` on `stream` as a launch of `kernel` (lazy loading,
// configuration, sticky faults as for a kernel); `release(work)` runs once either way.
using LaunchHostKernel = cudaError_t (*)(const void* kernel, const char* name, dim3 grid,
                                         dim3 block, cudaStream_t stream,
                                         int (*run)(void* work, char* fault, size_t fault_bytes),
                                         void* work, void (*release)(void* work));
// The address a kernel dereferences for `pointer` (device memory's accessible view).
using KernelView = void* (*)(const void* pointer);
// The first kernel fault's description, or "".
using KernelFault = const char* (*)();
// Makes the n-th call of `function` from now fail (n = 1: the next; "fault:<kernel>" a fault).
using FailCall = void (*)(const char* function, long n);

// The model's entry point `name`, or null where the model is not loaded.
template <typename Fn>
Fn entry(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace fake_cudart
