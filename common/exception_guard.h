// Where C++ exceptions stop. terse's C API (nccl.h, terse.h) and its background threads must
// never let one out: an exception that crosses an extern "C" frame, or leaves a thread's body,
// ends the application (std::terminate). Allocation can fail anywhere (a job near its memory
// limit), and the standard library reports that, and failing to start a thread, by throwing.
//
// Every C entry point is a function-try-block whose handler returns
// result_of_current_exception(name); every thread body runs through call_guarded. Either way the
// failure becomes a result code with a sentence for ncclGetLastError: Result::kSystemError for what
// the system refused (memory, threads), Result::kInternalError for anything else.
#pragma once

#include <string>
#include <utility>

#include "common/result.h"

namespace terse {

// Call only inside a catch handler: classifies the exception being handled, records it as this
// thread's last error (naming `where`, the entry point or thread) and returns its code.
// Allocates nothing and never throws.
Result result_of_current_exception(const char* where) noexcept;

// Runs `body` (which returns a Result or an ncclResult_t); an exception becomes its result code.
template <class Body>
Result call_guarded(const char* where, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return result_of_current_exception(where);
  }
}

// The same on a thread whose failure another thread reports: on failure this thread's last error
// is copied to `*message` too (left empty when even that copy cannot be allocated).
template <class Body>
Result call_guarded(const char* where, Body&& body, std::string* message) noexcept {
  const Result result = call_guarded(where, std::forward<Body>(body));
  if (result != Result::kSuccess) {
    try {
      *message = last_error();
    } catch (...) {  // no memory even for the sentence: the code says enough
    }
  }
  return result;
}

}  // namespace terse
