// Error conventions (docs/design.md section 8): every fallible call returns a result code and, on
// failure, leaves a sentence naming the argument and its value for ncclGetLastError().
//
// The lower layers (common/, transport/, topology/) return terse::Result and know nothing of
// NCCL; the upper layers (codecs/, collectives/, plugin/, ps/) return ncclResult_t. Result copies
// ncclResult_t's numbering, so the lower layers' result converts to and from ncclResult_t (or the
// ncclNet ABI's copy of it in plugin/net/net_abi.h) implicitly: an upper layer returns, compares
// and TERSE_CHECKs a Result as it would an ncclResult_t. static_asserts hold the numbers to
// nccl.h's (plugin/error_calls.cpp) and to the ncclNet ABI's (plugin/net/net_abi_checks.cpp).
#pragma once

#include <iosfwd>
#include <type_traits>

namespace terse {

// An unscoped enum, as C headers declare their result codes (only those convert to int). At
// namespace scope: nvcc's front end does not see conversions constrained by a class's own private
// variable template.
template <class Enum>
inline constexpr bool kIsCResultEnum =
    std::conjunction_v<std::is_enum<Enum>, std::is_convertible<Enum, int>>;

class Result {
 public:
  // NCCL's codes, under NCCL's numbers (defined below the class).
  static const Result kSuccess;             // 0
  static const Result kUnhandledCudaError;  // 1
  static const Result kSystemError;         // 2
  static const Result kInternalError;       // 3
  static const Result kInvalidArgument;     // 4
  static const Result kInvalidUsage;        // 5
  static const Result kRemoteError;         // 6
  static const Result kInProgress;          // 7

  // Success.
  constexpr Result() = default;
  // From an enum numbered as ncclResult_t is (ncclResult_t itself, in the upper layers). Any
  // unscoped enum is accepted because this header cannot name NCCL's: converting another one
  // (ucs_status_t) compiles and is wrong, so lower-layer code keeps UCX statuses and results
  // apart by name. Scoped enums (terse's own) are refused.
  template <class Enum, std::enable_if_t<kIsCResultEnum<Enum>, int> = 0>
  constexpr Result(Enum code) : code_(static_cast<int>(code)) {}
  // To such an enum: an upper layer returns or stores a Result as its ncclResult_t.
  template <class Enum, std::enable_if_t<kIsCResultEnum<Enum>, int> = 0>
  constexpr operator Enum() const {
    return static_cast<Enum>(code_);
  }

  // The number, for switch statements, messages and wire formats, and back (a number read from
  // outside should be checked against the codes above first).
  constexpr int code() const { return code_; }
  static constexpr Result from_code(int code) { return Result(Number{code}); }
  constexpr bool ok() const { return code_ == 0; }

  friend constexpr bool operator==(Result a, Result b) { return a.code_ == b.code_; }
  friend constexpr bool operator!=(Result a, Result b) { return a.code_ != b.code_; }
  // Against such an enum, exact matches: otherwise nvcc's front end finds the built-in enum
  // comparison (through the conversion above) as good as the ones above, and gives up.
  template <class Enum, std::enable_if_t<kIsCResultEnum<Enum>, int> = 0>
  friend constexpr bool operator==(Result a, Enum b) {
    return a == Result(b);
  }
  template <class Enum, std::enable_if_t<kIsCResultEnum<Enum>, int> = 0>
  friend constexpr bool operator==(Enum a, Result b) {
    return Result(a) == b;
  }
  template <class Enum, std::enable_if_t<kIsCResultEnum<Enum>, int> = 0>
  friend constexpr bool operator!=(Result a, Enum b) {
    return a != Result(b);
  }
  template <class Enum, std::enable_if_t<kIsCResultEnum<Enum>, int> = 0>
  friend constexpr bool operator!=(Enum a, Result b) {
    return Result(a) != b;
  }

 private:
  struct Number {
    int value;
  };
  constexpr explicit Result(Number number) : code_(number.value) {}

  int code_ = 0;
};

inline constexpr Result Result::kSuccess{Number{0}};
inline constexpr Result Result::kUnhandledCudaError{Number{1}};
inline constexpr Result Result::kSystemError{Number{2}};
inline constexpr Result Result::kInternalError{Number{3}};
inline constexpr Result Result::kInvalidArgument{Number{4}};
inline constexpr Result Result::kInvalidUsage{Number{5}};
inline constexpr Result Result::kRemoteError{Number{6}};
inline constexpr Result Result::kInProgress{Number{7}};

// Records `message` as this thread's last error and logs it at WARN; returns `code` so that
// callers can write `return fail(Result::kInvalidArgument, "count %zu ...", n);` (or
// `fail(ncclInvalidArgument, ...)` above the lower layers).
Result fail(Result code, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Records `message` as this thread's last error again, without logging it: for an error already
// recorded (and logged) that other calls have since overwritten. Returns `code`.
Result restore_error(Result code, const char* message);

// The last error recorded on this thread ("" when none).
const char* last_error();
void clear_last_error();

// NCCL's names for result codes ("invalid argument", ...).
const char* result_string(Result code);

// How GoogleTest prints a Result: its name and number.
void PrintTo(Result code, std::ostream* out);

}  // namespace terse

// Propagates a failure to the caller. `call` may return a Result or an ncclResult_t, and the
// caller may return either: the value converts on the way out.
#define TERSE_CHECK(call)                             \
  do {                                                \
    const auto terse_check_result_ = (call);          \
    if (!::terse::Result(terse_check_result_).ok()) { \
      return terse_check_result_;                     \
    }                                                 \
  } while (0)
