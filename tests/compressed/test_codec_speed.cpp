// The codec speed probe (collectives/compressed/codec_speed.h) measures a codec's speed on a core,
// whatever else runs: ranks on one machine probe at the same moment and share its cores, and the
// planner applies that share itself. Here the probe runs at nice 10 on one CPU beside a busy
// thread at nice 0, which takes about nine tenths of that CPU: a probe timed by the wall clock
// reads a fraction of the speed it reads alone. The figure checked is top-k's encode, which
// takes tens of milliseconds, longer than a scheduler slice: a shorter run (top-k's decode, or
// int8) can pass whole between two of the busy thread's slices, and the best of the probe's runs
// then reads the full speed by either clock.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>

#include "codecs/codec_registry.h"
#include "collectives/compressed/codec_speed.h"

namespace terse {
namespace {

// Pins the calling thread to `cpu`.
bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

// A probe of `codec` from a thread of its own on `cpu`, at nice 10 when `starved` (a thread's
// priority can be lowered without privileges, not raised again: hence a thread per probe).
CodecSpeed probe_on(int cpu, Codec& codec, bool starved) {
  CodecSpeed speed;
  std::thread prober([&] {
    EXPECT_TRUE(pin_to(cpu));
    if (starved) {
      EXPECT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10), 0);
    }
    EXPECT_EQ(measure_codec_speed(codec, &speed), ncclSuccess);
  });
  prober.join();
  return speed;
}

TEST(CodecSpeed, AProbeStarvedOfItsCoreStillReadsTheSpeedOfACore) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  std::unique_ptr<Codec> codec;
  ASSERT_EQ(create_codec("topk:ratio=0.01", &codec), ncclSuccess);
  const CodecSpeed alone = probe_on(cpu, *codec, false);
  std::atomic<bool> stop{false}, spinning{false};
  std::thread busy([&] {
    pin_to(cpu);
    spinning = true;
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  while (!spinning) std::this_thread::yield();  // else the probe might run alone
  const CodecSpeed starved = probe_on(cpu, *codec, true);
  stop = true;
  busy.join();
  EXPECT_GT(starved.encode_bytes_per_s, 0.5 * alone.encode_bytes_per_s)
      << alone.encode_bytes_per_s / 1e9 << " GB/s alone, " << starved.encode_bytes_per_s / 1e9;
}

}  // namespace
}  // namespace terse
