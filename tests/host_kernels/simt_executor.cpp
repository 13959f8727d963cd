// Runs a grid of simt.h's kernels on the host: each block's threads as fibers on the calling
// thread, which is a stream thread of the CUDA runtime model. A fiber runs until it
// reaches a barrier (__syncthreads, __syncwarp, a shuffle), so the order in which the block's
// threads see each other's writes is decided only by the kernel's own barriers; the scheduler
// runs the fibers in a shuffled order to show a kernel that relies on more.
#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "fake_cudart_extensions.h"
#include "simt.h"

#if !defined(__x86_64__)
#error "the host build of the kernels switches fibers with x86-64 code (simt_executor.cpp)"
#endif

// Saves the callee-saved registers and the stack pointer in *save, continues on `load` (a stack
// saved the same way, or prepared by new_fiber_stack). A function call as far as the compiler
// knows, so the caller-saved registers are the caller's business; no system call, unlike
// swapcontext, which also sets the signal mask: a kernel launch switches a million times.
extern "C" void terse_simt_switch(void** save, void* load);
asm(R"(
.pushsection .text
.globl terse_simt_switch
.type terse_simt_switch, @function
terse_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size terse_simt_switch, .-terse_simt_switch
.popsection
)");

namespace terse {
namespace simt {
namespace {

constexpr size_t kStackBytes = 256 << 10;

// A stack on which terse_simt_switch starts `entry` as if it had been called (the stack pointer
// 8 past a 16-byte boundary), with six zeroed registers for it to pop.
// Fiber t's stack top is t cache lines below its stack's end: stacks a power of two apart would
// put every fiber's top in the same cache set, and each switch would miss.
void* new_fiber_stack(char* stack, unsigned t, void (*entry)()) {
  auto** top = reinterpret_cast<void**>(
      (reinterpret_cast<uintptr_t>(stack) + kStackBytes - (t % 1024) * 64) & ~uintptr_t(15));
  *--top = nullptr;  // where entry's return address would be: it never returns
  *--top = reinterpret_cast<void*>(entry);
  for (int i = 0; i < 6; ++i) *--top = nullptr;
  return top;
}

enum class State { kRunnable, kAtBarrier, kDone };

struct Fiber {
  void* stack_pointer = nullptr;  // while switched out
  ThreadPlace place;
  unsigned warp = 0, lane = 0;
  State state = State::kRunnable;
  const char* waiting_at = "";
};

struct Warp {
  unsigned existing = 0;  // lanes the block has
  unsigned live = 0;      // lanes that have not exited
  unsigned arrived = 0, mask = 0;
  uint64_t generation = 0;  // barriers completed
  std::vector<Fiber*> waiting;
  // Two sets of exchange slots, used by alternate barriers: a lane can write the next exchange's
  // slot only after every lane reached that exchange's barrier, hence read this one's.
  uint64_t slots[2][32] = {};
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  unsigned live = 0;
  std::vector<Fiber*> at_block_barrier;
  // Fibers to run, in order; a barrier's last arrival moves its waiters here.
  std::vector<Fiber*> runnable;
  size_t next_runnable = 0;
  void* scheduler = nullptr;  // the scheduler's stack pointer while a fiber runs
  Fiber* current = nullptr;
  const std::function<void()>* body = nullptr;
  bool barrier_met = false;  // by thread 0, which runs first
  bool direct = false;       // the other threads run as plain calls (run_block)
  std::string fault;
};

// How a fault leaves a thread that runs as a plain call.
struct DirectFault {};

thread_local Block* running = nullptr;

// The calling thread's fiber stacks, kept between launches.
struct Stacks {
  std::vector<char*> stacks;
  char* at(size_t i) {
    while (stacks.size() <= i) {
      void* memory = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (memory == MAP_FAILED) {
        perror("simt: a fiber stack");
        abort();
      }
      stacks.push_back(static_cast<char*>(memory));
    }
    return stacks[i];
  }
};
thread_local Stacks stacks;

Fiber& me() {
  return *running->current;
}

// Leaves the running fiber (its stack pointer saved in *save) for the next runnable one, or for
// the scheduler when none is left: one switch per barrier arrival, not two.
void switch_from(void** save) {
  Block& block = *running;
  if (block.next_runnable < block.runnable.size()) {
    Fiber* next = block.runnable[block.next_runnable++];
    block.current = next;
    current_place = &next->place;
    terse_simt_switch(save, next->stack_pointer);
  } else {
    terse_simt_switch(save, block.scheduler);
  }
}

// Parks this fiber until a barrier's last arrival makes it runnable again.
void wait_at(std::vector<Fiber*>* waiters, const char* what) {
  Fiber& fiber = me();
  fiber.state = State::kAtBarrier;
  fiber.waiting_at = what;
  waiters->push_back(&fiber);
  switch_from(&fiber.stack_pointer);
}

void release(std::vector<Fiber*>* waiters) {
  for (Fiber* fiber : *waiters) {
    fiber->state = State::kRunnable;
    running->runnable.push_back(fiber);
  }
  waiters->clear();
}

// Leaves a fiber that finished, for good.
[[noreturn]] void leave() {
  void* abandoned;
  switch_from(&abandoned);
  abort();  // never resumed
}

[[noreturn]] void fault(const std::string& what) {
  Fiber& fiber = me();
  char where[128];
  snprintf(where, sizeof(where), " (block %u,%u,%u thread %u,%u,%u)", fiber.place.block.x,
           fiber.place.block.y, fiber.place.block.z, fiber.place.thread.x, fiber.place.thread.y,
           fiber.place.thread.z);
  if (running->fault.empty()) running->fault = what + where;
  fiber.state = State::kDone;
  if (running->direct) throw DirectFault();
  void* abandoned;
  terse_simt_switch(&abandoned, running->scheduler);  // the scheduler stops the block
  abort();
}

// A thread left the kernel: barriers of the block no longer wait for it.
void exit_thread() {
  Block& block = *running;
  Fiber& fiber = me();
  fiber.state = State::kDone;
  --block.live;
  block.warps[fiber.warp].live &= ~(1u << fiber.lane);
  if (!block.at_block_barrier.empty() && block.at_block_barrier.size() == block.live) {
    release(&block.at_block_barrier);
  }
}

void fiber_main() {
  (*running->body)();
  exit_thread();
  leave();
}

std::string describe_waits(const Block& block) {
  std::string text;
  for (const Fiber& fiber : block.fibers) {
    if (fiber.state == State::kDone) continue;
    char line[160];
    snprintf(line, sizeof(line), "\n    thread %u,%u,%u waits in %s", fiber.place.thread.x,
             fiber.place.thread.y, fiber.place.thread.z, fiber.waiting_at);
    text += line;
  }
  return text;
}

bool run_runnable(Block& block);

// Runs one block; false with block.fault set on a fault.
bool run_block(Block& block, const Grid& grid, uint3 index, std::mt19937_64& random) {
  const unsigned threads = grid.block.x * grid.block.y * grid.block.z;
  block.fibers.assign(threads, Fiber());
  block.warps.assign((threads + 31) / 32, Warp());
  block.live = threads;
  block.at_block_barrier.clear();
  block.body = &grid.thread;
  block.runnable.clear();
  block.next_runnable = 0;
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& fiber = block.fibers[t];
    fiber.place.thread = uint3{t % grid.block.x, (t / grid.block.x) % grid.block.y,
                               t / (grid.block.x * grid.block.y)};
    fiber.place.block = index;
    fiber.place.block_dim = grid.block;
    fiber.place.grid_dim = grid.grid;
    fiber.warp = t / 32;
    fiber.lane = t % 32;
    block.warps[fiber.warp].existing |= 1u << fiber.lane;
    block.warps[fiber.warp].live |= 1u << fiber.lane;
  }
  // Thread 0 first, on a fiber. If it met no barrier, the block's other threads run as plain
  // calls, in a shuffled order: a million fiber switches fewer for an elementwise kernel. One of
  // them reaching a barrier after all is a fault (barriers must be reached by the whole block).
  block.barrier_met = false;
  block.fibers[0].stack_pointer = new_fiber_stack(stacks.at(0), 0, fiber_main);
  block.runnable.push_back(&block.fibers[0]);
  if (!run_runnable(block)) return false;
  std::vector<unsigned> order(threads - 1);
  std::iota(order.begin(), order.end(), 1u);
  std::shuffle(order.begin(), order.end(), random);
  if (!block.barrier_met && block.fibers[0].state == State::kDone) {
    block.direct = true;
    try {
      for (unsigned t : order) {
        Fiber& fiber = block.fibers[t];
        block.current = &fiber;
        current_place = &fiber.place;
        (*block.body)();
        fiber.state = State::kDone;
        --block.live;
      }
    } catch (const DirectFault&) {
      block.direct = false;
      return false;
    }
    block.direct = false;
    return true;
  }
  for (unsigned t : order) {
    Fiber& fiber = block.fibers[t];
    fiber.stack_pointer = new_fiber_stack(stacks.at(t), t, fiber_main);
    block.runnable.push_back(&fiber);
  }
  if (!run_runnable(block)) return false;
  if (block.live != 0) {
    block.fault = "a barrier that some of the block's threads never reach" + describe_waits(block);
    return false;
  }
  return true;
}

// Runs the runnable fibers until none is left; false on a fault.
bool run_runnable(Block& block) {
  while (block.next_runnable < block.runnable.size()) {
    Fiber& fiber = *block.runnable[block.next_runnable++];
    block.current = &fiber;
    current_place = &fiber.place;
    // Back here when no fiber is runnable (switch_from), or on a fault.
    terse_simt_switch(&block.scheduler, fiber.stack_pointer);
    if (!block.fault.empty()) return false;
  }
  block.runnable.clear();
  block.next_runnable = 0;
  return true;
}

}  // namespace

thread_local const ThreadPlace* current_place = nullptr;

// A barrier call: thread 0 notes it; a thread running as a plain call cannot wait.
void meet_barrier(const char* what) {
  Block& block = *running;
  block.barrier_met = true;
  if (block.direct) {
    fault(std::string(what) + ", which thread 0 of the block did not reach");
  }
}

void sync_block(const char* what) {
  Block& block = *running;
  meet_barrier(what);
  if (block.at_block_barrier.size() + 1 == block.live) {
    release(&block.at_block_barrier);
    return;
  }
  wait_at(&block.at_block_barrier, what);
}

void sync_warp(unsigned mask) {
  Block& block = *running;
  Fiber& fiber = me();
  Warp& warp = block.warps[fiber.warp];
  const unsigned bit = 1u << fiber.lane;
  meet_barrier("a warp-synchronous call");
  char text[160];
  if ((mask & bit) == 0) {
    snprintf(text, sizeof(text), "a warp-synchronous call with mask %#x by lane %u, not in it",
             mask, fiber.lane);
    fault(text);
  }
  if ((mask & ~warp.existing) != 0 || (mask & ~warp.live) != 0) {
    snprintf(text, sizeof(text),
             "a warp-synchronous call with mask %#x, which names lanes that %s (lanes %#x)", mask,
             (mask & ~warp.existing) != 0 ? "the block does not have" : "have exited",
             (mask & ~warp.existing) != 0 ? mask & ~warp.existing : mask & ~warp.live);
    fault(text);
  }
  if (warp.arrived == 0) {
    warp.mask = mask;
  } else if (warp.mask != mask) {
    snprintf(text, sizeof(text), "lanes of one warp meet with masks %#x and %#x", warp.mask, mask);
    fault(text);
  }
  warp.arrived |= bit;
  if (warp.arrived == mask) {
    warp.arrived = 0;
    ++warp.generation;
    release(&warp.waiting);
    return;
  }
  wait_at(&warp.waiting, "a warp-synchronous call");
}

uint64_t warp_exchange(unsigned mask, uint64_t mine, unsigned source, const char* what) {
  Fiber& fiber = me();
  Warp& warp = running->warps[fiber.warp];
  if ((mask & (1u << source)) == 0) {
    char text[160];
    snprintf(text, sizeof(text), "%s by lane %u reads lane %u, outside its mask %#x", what,
             fiber.lane, source, mask);
    fault(text);
  }
  uint64_t* slots = warp.slots[warp.generation & 1];
  slots[fiber.lane] = mine;
  sync_warp(mask);
  return slots[source];
}

namespace {

// Runs every block of `grid`; 0, or 1 with the fault's description in `fault`.
int run_grid(void* work, char* fault_text, size_t fault_bytes) {
  const Grid& grid = *static_cast<const Grid*>(work);
  if (!grid.fault.empty()) {
    snprintf(fault_text, fault_bytes, "kernel %s: %s", grid.name, grid.fault.c_str());
    return 1;
  }
  std::vector<uint3> blocks;
  for (unsigned z = 0; z < grid.grid.z; ++z)
    for (unsigned y = 0; y < grid.grid.y; ++y)
      for (unsigned x = 0; x < grid.grid.x; ++x) blocks.push_back(uint3{x, y, z});
  static std::atomic<uint64_t> launches{0};
  std::mt19937_64 random(launches.fetch_add(1) * 0x9e3779b97f4a7c15ull + 1);
  std::shuffle(blocks.begin(), blocks.end(), random);
  Block block;
  Block* outer = running;
  running = &block;
  for (const uint3& index : blocks) {
    if (!run_block(block, grid, index, random)) {
      snprintf(fault_text, fault_bytes, "kernel %s: %s", grid.name, block.fault.c_str());
      running = outer;
      return 1;
    }
  }
  running = outer;
  return 0;
}

}  // namespace

void* kernel_view(const void* pointer) {
  static const fake_cudart::KernelView view =
      fake_cudart::entry<fake_cudart::KernelView>("fakeCudaKernelView");
  return view != nullptr ? view(pointer) : const_cast<void*>(pointer);
}

cudaError_t enqueue(const void* kernel, Grid grid, cudaStream_t stream) {
  static const fake_cudart::LaunchHostKernel launch =
      fake_cudart::entry<fake_cudart::LaunchHostKernel>("fakeCudaLaunchHostKernel");
  if (launch == nullptr) {
    fprintf(stderr,
            "simt: kernel %s launched without the CUDA runtime model (tests/plugin/fake_cudart) "
            "loaded: the host-built kernels run only under it\n",
            grid.name);
    return cudaErrorNoDevice;
  }
  auto* work = new Grid(std::move(grid));
  return launch(kernel, work->name, work->grid, work->block, stream, run_grid, work,
                [](void* w) { delete static_cast<Grid*>(w); });
}

}  // namespace simt
}  // namespace terse
