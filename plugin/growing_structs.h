// The structs of include/terse/terse.h that grow ("Structs that grow"): each begins with the
// caller's sizeof, and the library reads or writes only that many bytes, so a program built with
// an older header runs against a newer library and the reverse. The first growing layout's sizes
// are frozen here: a later version appends members and leaves these numbers alone.
#pragma once

#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "common/result.h"
#include "terse/terse.h"

namespace terse {

template <typename T>
struct FirstLayout;
template <>
struct FirstLayout<terseTensor> {
  static constexpr size_t kBytes = 96;
};
template <>
struct FirstLayout<terseStats> {
  static constexpr size_t kBytes = 4232;
};
template <>
struct FirstLayout<tersePsTensorDesc> {
  static constexpr size_t kBytes = 64;
};
template <>
struct FirstLayout<tersePsStats> {
  static constexpr size_t kBytes = 64;
};

// The caller's size of `given` (0 reads as the first layout's), refused below the first layout.
template <typename T>
ncclResult_t caller_size(const char* function, const char* what, size_t given, size_t* out) {
  static_assert(sizeof(T) >= FirstLayout<T>::kBytes, "a growing struct only grows");
  const size_t size = given == 0 ? FirstLayout<T>::kBytes : given;
  if (size < FirstLayout<T>::kBytes) {
    return fail(ncclInvalidArgument,
                "%s: %s->size is %zu, smaller than any layout of the struct this library knows "
                "(%zu): set it to sizeof the struct (its TERSE_*_INITIALIZER)",
                function, what, given, FirstLayout<T>::kBytes);
  }
  *out = size;
  return ncclSuccess;
}

// *out = the caller's struct as this library's: its first min(size, sizeof(T)) bytes, the rest
// (members the caller's header did not have) zero.
template <typename T>
ncclResult_t read_grown(const char* function, const char* what, const T& given, T* out) {
  size_t size = 0;
  TERSE_CHECK(caller_size<T>(function, what, given.size, &size));
  std::memset(out, 0, sizeof(T));
  std::memcpy(out, &given, std::min(size, sizeof(T)));
  out->size = sizeof(T);
  return ncclSuccess;
}

// Writes this library's `full` into the caller's struct: min(size, sizeof(T)) bytes, the
// caller's size kept.
template <typename T>
ncclResult_t write_grown(const char* function, const char* what, const T& full, T* out) {
  size_t size = 0;
  TERSE_CHECK(caller_size<T>(function, what, out->size, &size));
  const size_t caller = out->size;
  std::memcpy(out, &full, std::min(size, sizeof(T)));
  out->size = caller;
  return ncclSuccess;
}

}  // namespace terse
