#include "heap_allocations.h"

#include <cstdlib>
#include <new>

namespace terse {
namespace test {
namespace {

// Plain thread-locals (constant-initialised, no allocation of their own) so that counting an
// allocation never allocates.
thread_local bool counting = false;
thread_local uint64_t allocations = 0;

void* allocate(std::size_t bytes) {
  if (counting) ++allocations;
  void* memory = std::malloc(bytes == 0 ? 1 : bytes);
  if (memory == nullptr) throw std::bad_alloc();
  return memory;
}

void* allocate_aligned(std::size_t bytes, std::align_val_t alignment) {
  if (counting) ++allocations;
  const std::size_t align = static_cast<std::size_t>(alignment);
  // aligned_alloc wants a multiple of the alignment.
  const std::size_t rounded = ((bytes == 0 ? 1 : bytes) + align - 1) / align * align;
  void* memory = std::aligned_alloc(align, rounded);
  if (memory == nullptr) throw std::bad_alloc();
  return memory;
}

}  // namespace

HeapAllocationScope::HeapAllocationScope() : start_(allocations), outer_(!counting) {
  counting = true;
}

HeapAllocationScope::~HeapAllocationScope() {
  if (outer_) counting = false;
}

uint64_t HeapAllocationScope::count() const {
  return allocations - start_;
}

}  // namespace test
}  // namespace terse

void* operator new(std::size_t bytes) {
  return terse::test::allocate(bytes);
}
void* operator new[](std::size_t bytes) {
  return terse::test::allocate(bytes);
}
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return terse::test::allocate(bytes);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return terse::test::allocate(bytes);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t bytes, std::align_val_t alignment) {
  return terse::test::allocate_aligned(bytes, alignment);
}
void* operator new[](std::size_t bytes, std::align_val_t alignment) {
  return terse::test::allocate_aligned(bytes, alignment);
}
void operator delete(void* memory) noexcept {
  std::free(memory);
}
void operator delete[](void* memory) noexcept {
  std::free(memory);
}
void operator delete(void* memory, std::size_t) noexcept {
  std::free(memory);
}
void operator delete[](void* memory, std::size_t) noexcept {
  std::free(memory);
}
void operator delete(void* memory, std::align_val_t) noexcept {
  std::free(memory);
}
void operator delete[](void* memory, std::align_val_t) noexcept {
  std::free(memory);
}
void operator delete(void* memory, std::size_t, std::align_val_t) noexcept {
  std::free(memory);
}
void operator delete[](void* memory, std::size_t, std::align_val_t) noexcept {
  std::free(memory);
}
