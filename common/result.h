// Error conventions (DESIGN.md section 8): every fallible call returns ncclResult_t and, on
// failure, leaves a sentence naming the argument and its value for ncclGetLastError().
#pragma once

#include <nccl.h>

#include <string>

namespace terse {

// Records `message` as this thread's last error and logs it at WARN; returns `code` so that
// callers can write `return fail(ncclInvalidArgument, "count %zu ...", n);`.
ncclResult_t fail(ncclResult_t code, const char* format, ...) __attribute__((format(printf, 2, 3)));

// The last error recorded on this thread ("" when none).
const char* last_error();
void clear_last_error();

// NCCL's names for result codes ("invalid argument", ...).
const char* result_string(ncclResult_t code);

}  // namespace terse

// Propagates a non-success result to the caller.
#define TERSE_CHECK(call)                      \
  do {                                         \
    ncclResult_t terse_check_result_ = (call); \
    if (terse_check_result_ != ncclSuccess) {  \
      return terse_check_result_;              \
    }                                          \
  } while (0)
