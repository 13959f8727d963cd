// Heap allocations made by one thread while a scope is open: the compressed test binaries replace
// the global operator new (heap_allocations.cpp) to count them, so "no allocation once warm" is
// checked as allocations, not only as scratch growth (a std::vector made per call grows no
// scratch). Counts C++ allocations only: UCX's own malloc calls inside the transport are not
// terse's.
#pragma once

#include <cstdint>

namespace terse {
namespace test {

class HeapAllocationScope {
 public:
  HeapAllocationScope();
  ~HeapAllocationScope();
  HeapAllocationScope(const HeapAllocationScope&) = delete;
  HeapAllocationScope& operator=(const HeapAllocationScope&) = delete;

  // Allocations this thread made since the scope opened.
  uint64_t count() const;

 private:
  uint64_t start_;
  bool outer_;
};

}  // namespace test
}  // namespace terse
