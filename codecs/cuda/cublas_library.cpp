#include "codecs/cuda/cublas_library.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "common/result.h"

namespace terse {
namespace {

const std::string kSoname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);

// The folder of the libcudart this process runs (where the toolkit keeps libcublas too), or "".
std::string cudart_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDevice), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

template <typename Function>
bool find(void* handle, const char* name, Function* function, std::string* missing) {
  *function = reinterpret_cast<Function>(dlsym(handle, name));
  if (*function == nullptr && missing->empty()) *missing = name;
  return *function != nullptr;
}

struct Loaded {
  CublasLibrary library;
  ncclResult_t result = ncclSuccess;
  std::string why;
};

Loaded load() {
  Loaded loaded;
  void* handle = dlopen(kSoname.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string reason = handle == nullptr ? dlerror() : "";
  if (handle == nullptr) {
    const std::string folder = cudart_folder();
    if (!folder.empty()) {
      handle = dlopen((folder + kSoname).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) reason += std::string("; ") + dlerror();
    }
  }
  if (handle == nullptr) {
    loaded.result = ncclSystemError;
    loaded.why = "cannot load " + kSoname + ", which PowerSGD on device buffers needs: " + reason;
    return loaded;
  }
  std::string missing;
  CublasLibrary& library = loaded.library;
  find(handle, "cublasCreate_v2", &library.create, &missing);
  find(handle, "cublasDestroy_v2", &library.destroy, &missing);
  find(handle, "cublasSetMathMode", &library.set_math_mode, &missing);
  find(handle, "cublasSetStream_v2", &library.set_stream, &missing);
  find(handle, "cublasSgemm_v2", &library.sgemm, &missing);
  if (!missing.empty()) {
    loaded.result = ncclSystemError;
    loaded.why = kSoname + " has no " + missing;
  }
  // Kept loaded for the process's life: handles made from it live in thread-local storage.
  return loaded;
}

}  // namespace

ncclResult_t load_cublas(const CublasLibrary** library) {
  static const Loaded loaded = load();
  if (loaded.result != ncclSuccess) return fail(loaded.result, "%s", loaded.why.c_str());
  *library = &loaded.library;
  return ncclSuccess;
}

}  // namespace terse
