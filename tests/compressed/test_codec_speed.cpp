// The codec speed probe (collectives/compressed/codec_speed.h) measures a codec's speed on a core,
// whatever else runs: ranks on one machine probe at the same moment and share its cores, and the
// planner applies that share itself. Here the probe runs at the lowest priority on one CPU beside
// a busy thread, which takes nearly all of that CPU: a probe timed by the wall clock would read a
// few percent of the speed it reads alone.
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

// A probe of `codec` from a thread of its own on `cpu`, at nice 19 when `starved` (a thread's
// priority can be lowered without privileges, not raised again: hence a thread per probe).
CodecSpeed probe_on(int cpu, Codec& codec, bool starved) {
  CodecSpeed speed;
  std::thread prober([&] {
    EXPECT_TRUE(pin_to(cpu));
    if (starved) {
      EXPECT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19), 0);
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
  ASSERT_EQ(create_codec("int8", &codec), ncclSuccess);
  const CodecSpeed alone = probe_on(cpu, *codec, false);
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    pin_to(cpu);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  const CodecSpeed starved = probe_on(cpu, *codec, true);
  stop = true;
  busy.join();
  EXPECT_GT(starved.encode_bytes_per_s, 0.6 * alone.encode_bytes_per_s)
      << alone.encode_bytes_per_s / 1e9 << " GB/s alone, " << starved.encode_bytes_per_s / 1e9;
  EXPECT_GT(starved.decode_bytes_per_s, 0.6 * alone.decode_bytes_per_s)
      << alone.decode_bytes_per_s / 1e9 << " GB/s alone, " << starved.decode_bytes_per_s / 1e9;
}

}  // namespace
}  // namespace terse
