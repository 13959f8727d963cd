#include "failing_new.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace failing_new {
namespace {

std::atomic<long> g_countdown{0};  // > 0: allocations left until the one that fails
std::atomic<long> g_counted{0};
std::atomic<bool> g_fired{false};
std::atomic<bool> g_counting{false};

void* allocate(std::size_t size, std::size_t alignment) {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_counted.fetch_add(1, std::memory_order_relaxed);
    if (g_countdown.load(std::memory_order_relaxed) > 0 && g_countdown.fetch_sub(1) == 1) {
      g_fired.store(true);
      throw std::bad_alloc();
    }
  }
  if (size == 0) size = 1;
  void* memory = alignment > alignof(std::max_align_t)
                     ? std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment)
                     : std::malloc(size);
  if (memory == nullptr) throw std::bad_alloc();
  return memory;
}

}  // namespace

void arm(long nth) {
  g_counting.store(false);
  g_fired.store(false);
  g_counted.store(0);
  g_countdown.store(nth);
}

void disarm() {
  g_counting.store(false);
  g_countdown.store(0);
}

void resume() {
  g_counting.store(true);
}

void pause() {
  g_counting.store(false);
}

long counted() {
  return g_counted.load();
}

bool fired() {
  return g_fired.load();
}

}  // namespace failing_new

void* operator new(std::size_t size) {
  return failing_new::allocate(size, 0);
}
void* operator new[](std::size_t size) {
  return failing_new::allocate(size, 0);
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  return failing_new::allocate(size, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  return failing_new::allocate(size, static_cast<std::size_t>(alignment));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return failing_new::allocate(size, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return failing_new::allocate(size, 0);
  } catch (...) {
    return nullptr;
  }
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
