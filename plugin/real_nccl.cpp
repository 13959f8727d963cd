#include "plugin/real_nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "common/log.h"
#include "common/result.h"

namespace terse {
namespace {

thread_local int real_call_depth = 0;

struct Lookup {
  RealNccl table;
  bool found = false;
  std::string absence;
};

// The base address of libterse.so, to tell its own symbols from another library's.
const void* own_base() {
  Dl_info info{};
  dladdr(reinterpret_cast<const void*>(&own_base), &info);
  return info.dli_fbase;
}

// `name` from `handle`, unless it is libterse's own (or missing). Records the library's path.
void* resolve(void* handle, const char* name, std::string* path) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) return nullptr;
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fbase == own_base()) return nullptr;
  if (path->empty() && info.dli_fname != nullptr) *path = info.dli_fname;
  return symbol;
}

Lookup look_up() {
  Lookup lookup;
  void* handle = RTLD_NEXT;
  const char* library = getenv("TERSE_NCCL_LIBRARY");
  if (library != nullptr && library[0] != '\0') {
    handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      lookup.absence = std::string("TERSE_NCCL_LIBRARY=") + library +
                       " cannot be loaded: " + (why != nullptr ? why : "unknown reason");
      return lookup;
    }
  }
  std::string path;
#define TERSE_REAL_NCCL_RESOLVE(name) \
  lookup.table.name = reinterpret_cast<decltype(&::name)>(resolve(handle, #name, &path));
  TERSE_REAL_NCCL_FUNCTIONS(TERSE_REAL_NCCL_RESOLVE)
#undef TERSE_REAL_NCCL_RESOLVE
  const RealNccl& t = lookup.table;
  const bool complete = t.ncclGetUniqueId && t.ncclCommInitRankConfig && t.ncclCommDestroy &&
                        t.ncclGroupStart && t.ncclGroupEnd && t.ncclAllReduce && t.ncclAllGather;
  if (!complete) {
    lookup.absence =
        library != nullptr && library[0] != '\0'
            ? std::string("TERSE_NCCL_LIBRARY=") + library +
                  " is not a real NCCL (it lacks the NCCL API, or it is libterse itself)"
            : "no real NCCL is loaded behind libterse.so (preload libterse.so in front of an "
              "application linked to libnccl.so.2, or set TERSE_NCCL_LIBRARY)";
    return lookup;
  }
  lookup.table.path = path;
  lookup.found = true;
  return lookup;
}

const Lookup& lookup() {
  static const Lookup* found = new Lookup(look_up());  // outlives every static destructor
  return *found;
}

}  // namespace

const RealNccl* real_nccl() {
  return lookup().found ? &lookup().table : nullptr;
}

const std::string& real_nccl_absence() {
  return lookup().absence;
}

bool inside_real_nccl() {
  return real_call_depth > 0;
}

RealNcclCall::RealNcclCall() {
  ++real_call_depth;
}

RealNcclCall::~RealNcclCall() {
  --real_call_depth;
}

ncclResult_t missing_real_function(const char* name) {
  const RealNccl* real = real_nccl();
  return fail(ncclInvalidUsage, "the real NCCL (%s) has no %s",
              real != nullptr ? real->path.c_str() : "none found", name);
}

}  // namespace terse
