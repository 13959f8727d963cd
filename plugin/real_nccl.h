// The real NCCL behind libterse.so, for wrap mode (comm_mode.h): a table of its entry points and
// the guard that keeps a real NCCL calling back into an interposed symbol from looping.
//
// Where it comes from, looked up once per process:
// - TERSE_NCCL_LIBRARY=/path/libnccl.so.2: dlopen'ed RTLD_LOCAL, for an application linked to
//   libterse instead of NCCL;
// - otherwise dlsym(RTLD_NEXT, ...): under LD_PRELOAD=libterse.so, an application linked to
//   libnccl.so.2 has the real library loaded after libterse, and RTLD_NEXT reaches it.
// A symbol that resolves into libterse.so itself (dladdr) never counts: TERSE_NCCL_LIBRARY
// naming libterse, or libterse installed as libnccl.so.2, finds no real NCCL.
//
// The guard: a real NCCL may call its own exported functions through the dynamic linker, and
// those resolve to libterse's interposed ones (the preload comes first; a library opened
// RTLD_LOCAL still binds to the global scope before itself). While this thread is inside a call
// into the real library, every terse entry point forwards its call, unchanged, straight to the
// real one (TERSE_FORWARD_NESTED).
#pragma once

#include <nccl.h>

#include <string>

// Every nccl.h function the real library may provide, as X(name).
#define TERSE_REAL_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)                  \
  X(ncclGetUniqueId)                 \
  X(ncclCommInitRank)                \
  X(ncclCommInitRankConfig)          \
  X(ncclCommInitRankScalable)        \
  X(ncclCommInitAll)                 \
  X(ncclCommSplit)                   \
  X(ncclCommShrink)                  \
  X(ncclCommRevoke)                  \
  X(ncclCommFinalize)                \
  X(ncclCommDestroy)                 \
  X(ncclCommAbort)                   \
  X(ncclCommGetAsyncError)           \
  X(ncclCommCount)                   \
  X(ncclCommCuDevice)                \
  X(ncclCommUserRank)                \
  X(ncclCommRegister)                \
  X(ncclCommDeregister)              \
  X(ncclCommWindowRegister)          \
  X(ncclCommWindowDeregister)        \
  X(ncclMemAlloc)                    \
  X(ncclMemFree)                     \
  X(ncclRedOpCreatePreMulSum)        \
  X(ncclRedOpDestroy)                \
  X(ncclAllReduce)                   \
  X(ncclReduce)                      \
  X(ncclBroadcast)                   \
  X(ncclBcast)                       \
  X(ncclReduceScatter)               \
  X(ncclAllGather)                   \
  X(ncclAlltoAll)                    \
  X(ncclGather)                      \
  X(ncclScatter)                     \
  X(ncclSend)                        \
  X(ncclRecv)                        \
  X(ncclGroupStart)                  \
  X(ncclGroupEnd)                    \
  X(ncclGroupSimulateEnd)            \
  X(ncclGetErrorString)              \
  X(ncclGetLastError)

namespace terse {

struct RealNccl {
#define TERSE_REAL_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  TERSE_REAL_NCCL_FUNCTIONS(TERSE_REAL_NCCL_MEMBER)
#undef TERSE_REAL_NCCL_MEMBER
  std::string path;  // the library the functions came from (dladdr), for logs and messages
};

// The real NCCL, or null when none was found (real_nccl_absence() says why). A library counts
// only when it has the functions wrap mode cannot do without (unique id, init, destroy, group,
// allreduce, allgather); the others may be null, and a call that needs one fails naming it.
const RealNccl* real_nccl();
const std::string& real_nccl_absence();

// Whether this thread is inside a call into the real NCCL.
bool inside_real_nccl();

// Calls `function` of the real NCCL with the guard held. ncclInvalidUsage naming it when the
// real library lacks it.
template <class Function, class... Args>
ncclResult_t call_real(Function function, const char* name, Args... args);

// The guard itself, for calls whose result is not an ncclResult_t.
class RealNcclCall {
 public:
  RealNcclCall();
  ~RealNcclCall();
  RealNcclCall(const RealNcclCall&) = delete;
  RealNcclCall& operator=(const RealNcclCall&) = delete;
};

ncclResult_t missing_real_function(const char* name);

template <class Function, class... Args>
ncclResult_t call_real(Function function, const char* name, Args... args) {
  if (function == nullptr) return missing_real_function(name);
  RealNcclCall guard;
  return function(args...);
}

}  // namespace terse

// First statement of every exported entry point: a call the real NCCL makes back into an nccl*
// symbol goes to the real function unchanged (its arguments are the real library's own handles).
#define TERSE_FORWARD_NESTED(name, ...)                                            \
  do {                                                                             \
    if (::terse::inside_real_nccl()) {                                             \
      return ::terse::call_real(::terse::real_nccl()->name, #name, ##__VA_ARGS__); \
    }                                                                              \
  } while (0)
