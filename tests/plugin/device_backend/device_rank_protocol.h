// How test_device_backend_route.cpp talks to plugin_device_rank_process, one rank of its
// multi-process cases: an application of <nccl.h>, <cuda_runtime.h> and <terse/terse.h> alone
// (under the fake CUDA runtime with the tests' build of libterse, its emulated kernels, when the
// test runs there: both inherited through LD_LIBRARY_PATH).
//
//   plugin_device_rank_process <rank> <nranks> <unique id in hex>
//
// With PLUGIN_TEST_RANKS_PER_NODE=k the rank sets TERSE_HOSTID=node<rank / k> before it creates
// its communicator (ranks as processes are the only way to put ranks on emulated nodes). Then,
// for each of PLUGIN_TEST_STEPS (default kDeviceRankSteps) steps, on device buffers and a stream
// of its own: its input (device_rank_input, from pinned memory) copied in, the output filled with
// a pattern (unless PLUGIN_TEST_IN_PLACE=1), ncclAllReduce (float sum) of PLUGIN_TEST_COUNT
// (default kDeviceRankCount) values, the output copied back into pinned memory, the stream
// synchronized. It writes, to PLUGIN_TEST_RESULT_DIR, rank<r>_step<s>.bin (the output) and
// rank<r>.txt ("name value" lines: per step its statistics: step<s>_algorithm, _inner, _codec,
// _seed, _step, _piece_bytes, _to_host, _to_device) and exits 0, or 1 saying why on stderr.
//
// PLUGIN_TEST_GATE_STEP=g: before step g a host function holds the stream until the rank's
// thread has enqueued PLUGIN_TEST_GATE_CALLS (default 1) steps behind it; it writes
// step<s>_returned_first 1 for each of those calls that returned while the gate was still
// closed (0 otherwise) and "gate passed" (or gave_up: 60 s went by). Their statistics are those
// read after the last of them. PLUGIN_TEST_SIMULATE_AT_GATE=1: before opening the gate, two more
// calls of the tensor in a group ended by ncclGroupSimulateEnd; "estimate" is its estimate.
// PLUGIN_TEST_CODEC_STEP=s with PLUGIN_TEST_CODEC=<spec>: terseCommSetCodec(<spec>) before step s.
// PLUGIN_TEST_INF_STEP=s: at step s, rank 0's input element 5 is +Inf.
// PLUGIN_TEST_HOST_BUFFERS=1: the same program with malloc'd send and receive buffers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace device_rank_test {

constexpr size_t kDeviceRankCount = 20004;  // chunks and blocks of unequal sizes
constexpr int kDeviceRankSteps = 3;

inline float device_rank_input(int rank, int step, size_t i) {
  const size_t r = static_cast<size_t>(rank), s = static_cast<size_t>(step);
  return static_cast<float>(((i * 37 + r * 101 + s * 7) % 1000) / 250.0 - 2.0) *
         (1.0f + 0.25f * static_cast<float>(rank));
}

}  // namespace device_rank_test
