// The "simulate" scenario of plugin_rank_process: ncclGroupSimulateEnd through libterse's public
// API only (plugin_rank_protocol.h describes it). Each rank checks here what it can see alone
// (buffers untouched, statistics unmoved, the next real call still meeting its peers) and writes
// what needs every rank or a model to $PLUGIN_TEST_RESULT_DIR, for the test to check:
//   rank<r>_step<s>.bin   the output of the tensor's real allreduce at step s (fp32)
//   rank<r>.txt           "name value" lines: the estimates, and per real step its statistics
#include <nccl.h>
#include <terse/terse.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "plugin_rank_protocol.h"

namespace plugin_test {
namespace {

int fail_with(int rank, const std::string& what) {
  fprintf(stderr, "plugin_rank_process rank %d: %s\n", rank, what.c_str());
  return kPluginRankWrongResult;
}

#define REQUIRE_OK(call)                                                                    \
  do {                                                                                      \
    if ((call) != ncclSuccess) {                                                            \
      return fail_with(rank, std::string(#call) + " failed: " + ncclGetLastError(nullptr)); \
    }                                                                                       \
  } while (0)

template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  return std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

bool write_file(const std::string& path, const void* data, size_t bytes) {
  FILE* file = fopen(path.c_str(), "wb");
  if (file == nullptr) return false;
  const bool written = fwrite(data, 1, bytes, file) == bytes;
  return fclose(file) == 0 && written;
}

}  // namespace

int run_simulate(ncclComm_t comm, int rank, int nranks) {
  const char* dir = getenv("PLUGIN_TEST_RESULT_DIR");
  if (dir == nullptr) return fail_with(rank, "PLUGIN_TEST_RESULT_DIR is not set");
  const int next = (rank + 1) % nranks, previous = (rank + nranks - 1) % nranks;

  // Step 0 of the tensor for real.
  std::vector<float> send0(kSimulateCount), send1(kSimulateCount), tensor(kSimulateCount);
  for (size_t i = 0; i < kSimulateCount; ++i) {
    send0[i] = simulate_input(rank, 0, i);
    send1[i] = simulate_input(rank, 1, i);
  }
  terseStats stats0{}, stats1{}, before{}, after{};
  REQUIRE_OK(ncclAllReduce(send0.data(), tensor.data(), kSimulateCount, ncclFloat32, ncclSum, comm,
                           nullptr));
  REQUIRE_OK(terseCommGetStats(comm, &stats0));
  const std::vector<float> step0 = tensor;

  // What the simulated group names: the tensor's next step, a broadcast, an int32 allreduce
  // and a send/recv ring, each output holding a pattern it must keep.
  const std::vector<float> send1_copy = send1;
  std::vector<float> bcast_send(kSimulateBroadcastCount, 1.5f + rank);
  std::vector<float> bcast_recv(kSimulateBroadcastCount, -7.0f);
  std::vector<int32_t> int_send(kSimulateIntCount, rank + 1), int_recv(kSimulateIntCount, -7);
  std::vector<float> p2p_send(kSimulateP2pCount, 2.5f + rank), p2p_recv(kSimulateP2pCount, -7.0f);
  const auto snapshot = [&] {
    return std::vector<std::vector<uint8_t>>{
        {reinterpret_cast<const uint8_t*>(tensor.data()),
         reinterpret_cast<const uint8_t*>(tensor.data() + tensor.size())},
        {reinterpret_cast<const uint8_t*>(bcast_recv.data()),
         reinterpret_cast<const uint8_t*>(bcast_recv.data() + bcast_recv.size())},
        {reinterpret_cast<const uint8_t*>(int_recv.data()),
         reinterpret_cast<const uint8_t*>(int_recv.data() + int_recv.size())},
        {reinterpret_cast<const uint8_t*>(p2p_recv.data()),
         reinterpret_cast<const uint8_t*>(p2p_recv.data() + p2p_recv.size())}};
  };
  const std::vector<std::vector<uint8_t>> outputs_before = snapshot();

  const auto tensor_call = [&] {
    return ncclAllReduce(send1.data(), tensor.data(), kSimulateCount, ncclFloat32, ncclSum, comm,
                         nullptr);
  };
  const auto bcast_call = [&] {
    return ncclBroadcast(bcast_send.data(), bcast_recv.data(), kSimulateBroadcastCount, ncclFloat32,
                         0, comm, nullptr);
  };
  const auto int_call = [&] {
    return ncclAllReduce(int_send.data(), int_recv.data(), kSimulateIntCount, ncclInt32, ncclSum,
                         comm, nullptr);
  };
  const auto p2p_calls = [&] {
    const ncclResult_t sent =
        ncclSend(p2p_send.data(), kSimulateP2pCount, ncclFloat32, next, comm, nullptr);
    if (sent != ncclSuccess) return sent;
    return ncclRecv(p2p_recv.data(), kSimulateP2pCount, ncclFloat32, previous, comm, nullptr);
  };
  // One simulated group of `calls`: its estimate, in microseconds.
  const auto simulate = [&](std::initializer_list<std::function<ncclResult_t()>> calls,
                            float* estimate) {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    ncclResult_t result = ncclGroupStart();
    for (const auto& call : calls) {
      if (result == ncclSuccess) result = call();
    }
    if (result == ncclSuccess) result = ncclGroupSimulateEnd(&info);
    *estimate = info.estimatedTime;
    return result;
  };

  REQUIRE_OK(terseCommGetStats(comm, &before));
  float whole = 0, tensor_alone = 0, bcast_alone = 0, int_alone = 0, p2p_alone = 0, larger = 0;
  REQUIRE_OK(simulate({tensor_call, bcast_call, int_call, p2p_calls}, &whole));
  REQUIRE_OK(simulate({tensor_call}, &tensor_alone));
  REQUIRE_OK(simulate({bcast_call}, &bcast_alone));
  REQUIRE_OK(simulate({int_call}, &int_alone));
  REQUIRE_OK(simulate({p2p_calls}, &p2p_alone));
  // A tensor twice as large (another buffer, so another tensor).
  std::vector<float> large_send(2 * kSimulateCount, 1.0f), large_recv(2 * kSimulateCount, -7.0f);
  REQUIRE_OK(simulate({[&] {
                        return ncclAllReduce(large_send.data(), large_recv.data(),
                                             2 * kSimulateCount, ncclFloat32, ncclSum, comm,
                                             nullptr);
                      }},
                      &larger));
  REQUIRE_OK(terseCommGetStats(comm, &after));

  if (!same(send1, send1_copy) || snapshot() != outputs_before) {
    return fail_with(rank, "a simulated group changed a buffer");
  }
  for (float value : large_recv) {
    if (value != -7.0f) return fail_with(rank, "a simulated allreduce wrote its output");
  }
  // Every field a call moves (terse.h): a simulated call must move none.
  if (after.calls != before.calls || after.compressed_calls != before.compressed_calls ||
      after.raw_bytes != before.raw_bytes || after.wire_bytes != before.wire_bytes ||
      after.residual_step != before.residual_step ||
      after.residual_entries != before.residual_entries || after.last_step != before.last_step ||
      after.last_seed != before.last_seed ||
      after.last_predicted_seconds != before.last_predicted_seconds ||
      after.pcie_bytes_to_host != before.pcie_bytes_to_host ||
      after.pcie_bytes_to_device != before.pcie_bytes_to_device ||
      std::strcmp(after.last_codec, before.last_codec) != 0 ||
      std::strcmp(after.last_algorithm, before.last_algorithm) != 0) {
    return fail_with(rank, "a simulated group moved the statistics (calls " +
                               std::to_string(before.calls) + " -> " + std::to_string(after.calls) +
                               ", last_predicted_seconds " +
                               std::to_string(before.last_predicted_seconds) + " -> " +
                               std::to_string(after.last_predicted_seconds) + ")");
  }

  // The tensor's next step for real: its peers must be at the same point.
  REQUIRE_OK(tensor_call());
  REQUIRE_OK(terseCommGetStats(comm, &stats1));

  // Two calls of the tensor in one simulated group are its steps 2 and 3: under a schedule
  // active every second step, the first compresses and the second does not.
  REQUIRE_OK(terseCommSetPolicy(comm, "rules:\n  - codec: int8\n    schedule: {every: 2}\n"));
  float twice = 0;
  REQUIRE_OK(simulate({tensor_call, tensor_call}, &twice));

  const std::string prefix = std::string(dir) + "/rank" + std::to_string(rank);
  if (!write_file(prefix + "_step0.bin", step0.data(), step0.size() * sizeof(float)) ||
      !write_file(prefix + "_step1.bin", tensor.data(), tensor.size() * sizeof(float))) {
    return fail_with(rank, "cannot write the outputs to " + std::string(dir));
  }
  FILE* file = fopen((prefix + ".txt").c_str(), "w");
  if (file == nullptr) return fail_with(rank, "cannot write " + prefix + ".txt");
  fprintf(file,
          "whole %.9g\ntensor %.9g\nbroadcast %.9g\nint %.9g\np2p %.9g\nlarger %.9g\ntwice %.9g\n",
          whole, tensor_alone, bcast_alone, int_alone, p2p_alone, larger, twice);
  const terseStats* steps[] = {&stats0, &stats1};
  for (int s = 0; s < 2; ++s) {
    fprintf(file, "step%d_codec %s\nstep%d_algorithm %s\nstep%d_seed %llu\nstep%d_step %llu\n", s,
            steps[s]->last_codec, s, steps[s]->last_algorithm, s,
            static_cast<unsigned long long>(steps[s]->last_seed), s,
            static_cast<unsigned long long>(steps[s]->last_step));
    fprintf(file, "step%d_piece_bytes %llu\nstep%d_predicted_seconds %.9g\n", s,
            static_cast<unsigned long long>(steps[s]->last_piece_bytes), s,
            steps[s]->last_predicted_seconds);
  }
  if (fclose(file) != 0) return fail_with(rank, "cannot write " + prefix + ".txt");
  return kPluginRankOk;
}

}  // namespace plugin_test
