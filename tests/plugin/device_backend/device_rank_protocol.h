// How test_device_backend_route.cpp talks to plugin_device_rank_process, one rank of its
// multi-process cases: an application of <nccl.h>, <cuda_runtime.h> and <terse/terse.h> alone
// (under the fake CUDA runtime with the emulated kernels when the test runs there, inherited
// through LD_LIBRARY_PATH and TERSE_TEST_DEVICE_COMPUTE).
//
//   plugin_device_rank_process <rank> <nranks> <unique id in hex>
//
// With PLUGIN_TEST_RANKS_PER_NODE=k the rank sets TERSE_HOSTID=node<rank / k> before it creates
// its communicator (ranks as processes are the only way to put ranks on emulated nodes). Then,
// for each of kDeviceRankSteps steps, on device buffers and a stream of its own: its input
// (device_rank_input) copied in, the output filled with a pattern, ncclAllReduce (float sum) of
// kDeviceRankCount values, the output copied back, the stream synchronized. It writes, to
// PLUGIN_TEST_RESULT_DIR, rank<r>_step<s>.bin (the output) and rank<r>.txt ("name value" lines:
// per step its statistics: step<s>_algorithm, _inner, _seed, _step, _piece_bytes, _to_host,
// _to_device) and exits 0, or 1 saying why on stderr.
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
