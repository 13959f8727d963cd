/* CHECK(call) for the C programs among the tests (c_application/, abi/): a call that does not
 * return ncclSuccess makes main() say which call, NCCL's name of the result and the library's
 * last error, and return 1. */
#ifndef TERSE_TESTS_PLUGIN_C_CHECK_H_
#define TERSE_TESTS_PLUGIN_C_CHECK_H_

#include <nccl.h>
#include <stdio.h>

#define CHECK(call)                                                               \
  do {                                                                            \
    ncclResult_t result_ = (call);                                                \
    if (result_ != ncclSuccess) {                                                 \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, ncclGetErrorString(result_), \
              ncclGetLastError(NULL));                                            \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

#endif /* TERSE_TESTS_PLUGIN_C_CHECK_H_ */
