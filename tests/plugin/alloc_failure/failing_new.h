// Allocation failure on demand: this test program replaces the global operator new (every form),
// and the replacement throws std::bad_alloc at the allocation chosen by arm(). libterse.so,
// linked dynamically against the same libstdc++, resolves operator new to these definitions,
// so its allocations (on any thread) fail too; UCX's malloc calls are not touched.
#pragma once

#include <cstddef>

namespace failing_new {

// The `nth` allocation counted from now (1 = the next) throws, once. 0 disarms. Only
// allocations made while counting is on (between resume() and pause(), off after arm) count:
// the test's own bookkeeping between calls never fails.
void arm(long nth);
void resume();
void pause();
void disarm();
// Allocations counted since the last arm (whether or not one failed).
long counted();
// Whether the armed allocation has been refused.
bool fired();

}  // namespace failing_new
