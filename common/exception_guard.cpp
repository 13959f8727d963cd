#include "common/exception_guard.h"

#include <exception>
#include <new>
#include <system_error>

#include "common/result.h"

namespace terse {

Result result_of_current_exception(const char* where) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return fail(Result::kSystemError, "%s: out of memory", where);
  } catch (const std::system_error& error) {
    return fail(Result::kSystemError, "%s: the system refused: %s", where, error.what());
  } catch (const std::exception& error) {
    return fail(Result::kInternalError, "%s: unexpected exception: %s", where, error.what());
  } catch (...) {
    return fail(Result::kInternalError, "%s: unexpected exception of unknown type", where);
  }
}

}  // namespace terse
