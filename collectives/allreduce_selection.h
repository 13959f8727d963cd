// Where the default dense allreduce switches from recursive doubling to the ring (the two rows
// of algorithm_table.cpp carry this boundary; TERSE_ALGO=allreduce:ring or
// allreduce:recursive_doubling overrides it).
//
// The bound is on each rank's share of the message (bytes / nranks), because that is what the
// ring puts in one message while recursive doubling sends the whole buffer every round: once
// the whole buffer outgrows UCX's eager protocol (a few KiB over shared memory), every
// recursive-doubling round pays a rendezvous handshake and its latency advantage is gone.
//
// Measured with all_reduce_perf (float sum, ranks as processes on this 2-core machine, UCX 1.13
// over shared memory and cma, out-of-place time in us; TERSE_ALGO forcing each algorithm):
//
//   ranks  size    recursive doubling   ring
//   2      2 KiB    2.7                  7.0
//   2      4 KiB   12.7                  4.8
//   2      16 KiB 114                    8.1
//   4      2 KiB   13.6                 36.4
//   4      4 KiB   39.5                 33.3
//   4      16 KiB  82.0                 42.0
//   8      4 KiB   86.4                153
//   8      16 KiB 337                  151
//
// so the ring wins once each rank's share reaches about 2 KiB, at every rank count measured.
#pragma once

#include <cstddef>

namespace terse {

constexpr size_t kRingAllreduceMinBytesPerRank = size_t{2} << 10;

}  // namespace terse
