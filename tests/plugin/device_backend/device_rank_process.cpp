// One rank of the device-backend route's multi-process cases (device_rank_protocol.h).
#include <cuda_runtime.h>
#include <nccl.h>
#include <terse/terse.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "common/hex_bytes.h"
#include "plugin/device_backend/device_rank_protocol.h"

namespace {

int fail_with(int rank, const std::string& what) {
  fprintf(stderr, "plugin_device_rank_process rank %d: %s\n", rank, what.c_str());
  return 1;
}

bool write_file(const std::string& path, const void* data, size_t bytes) {
  FILE* file = fopen(path.c_str(), "wb");
  if (file == nullptr) return false;
  const bool written = fwrite(data, 1, bytes, file) == bytes;
  return fclose(file) == 0 && written;
}

// What the test asked for (device_rank_protocol.h), from the environment.
struct Scenario {
  int steps = device_rank_test::kDeviceRankSteps;
  size_t count = device_rank_test::kDeviceRankCount;
  bool in_place = false;
  int gate_step = -1;  // none
  int gate_calls = 1;  // calls enqueued behind the gate
  bool simulate = false;
  int inf_step = -1;          // none: rank 0's input element 5 is +Inf at this step
  bool host_buffers = false;  // the same program with malloc'd buffers
  int codec_step = -1;        // none
  std::string codec;          // set with terseCommSetCodec before codec_step
};

long env_number(const char* name, long fallback) {
  const char* value = getenv(name);
  return value != nullptr && *value != '\0' ? strtol(value, nullptr, 10) : fallback;
}

Scenario scenario_from_environment() {
  Scenario s;
  s.steps = static_cast<int>(env_number("PLUGIN_TEST_STEPS", s.steps));
  s.count = static_cast<size_t>(env_number("PLUGIN_TEST_COUNT", static_cast<long>(s.count)));
  s.in_place = env_number("PLUGIN_TEST_IN_PLACE", 0) != 0;
  s.gate_step = static_cast<int>(env_number("PLUGIN_TEST_GATE_STEP", -1));
  s.gate_calls = static_cast<int>(env_number("PLUGIN_TEST_GATE_CALLS", 1));
  s.simulate = env_number("PLUGIN_TEST_SIMULATE_AT_GATE", 0) != 0;
  s.inf_step = static_cast<int>(env_number("PLUGIN_TEST_INF_STEP", -1));
  s.host_buffers = env_number("PLUGIN_TEST_HOST_BUFFERS", 0) != 0;
  s.codec_step = static_cast<int>(env_number("PLUGIN_TEST_CODEC_STEP", -1));
  if (const char* codec = getenv("PLUGIN_TEST_CODEC")) s.codec = codec;
  return s;
}

// A host function that holds the stream until the rank's thread opens it (or 60 s pass).
struct Gate {
  std::atomic<bool> open{false};
  std::atomic<int> state{0};  // 0 closed, 1 passed, 2 gave up
};
void hold_until_open(void* argument) {
  Gate* gate = static_cast<Gate*>(argument);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!gate->open.load() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  gate->state = gate->open.load() ? 1 : 2;
}

int run(int rank, int nranks, const ncclUniqueId& id) {
  const Scenario scenario = scenario_from_environment();
  const size_t count = scenario.count;
  const char* dir = getenv("PLUGIN_TEST_RESULT_DIR");
  if (dir == nullptr) return fail_with(rank, "PLUGIN_TEST_RESULT_DIR is not set");
  if (const char* per_node = getenv("PLUGIN_TEST_RANKS_PER_NODE")) {
    const int k = atoi(per_node) > 0 ? atoi(per_node) : 1;
    setenv("TERSE_HOSTID", ("node" + std::to_string(rank / k)).c_str(), 1);
  }
  // The device is current before the communicator is made: it becomes the communicator's.
  if (cudaSetDevice(0) != cudaSuccess) return fail_with(rank, "cudaSetDevice(0) failed");
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    return fail_with(rank, std::string("ncclCommInitRank: ") + ncclGetLastError(nullptr));
  }
  const size_t bytes = count * sizeof(float);
  cudaStream_t stream = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  // Pinned inputs and outputs, one per step: copies between them and the device queue behind a
  // gate (a copy from or into pageable memory may wait for its stream to reach it).
  std::vector<float*> inputs(static_cast<size_t>(scenario.steps), nullptr);
  std::vector<float*> outputs(static_cast<size_t>(scenario.steps), nullptr);
  bool made = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess;
  if (scenario.host_buffers) {
    send = malloc(bytes);
    recv = malloc(bytes);
    made = made && send != nullptr && recv != nullptr;
  } else {
    made =
        made && cudaMalloc(&send, bytes) == cudaSuccess && cudaMalloc(&recv, bytes) == cudaSuccess;
  }
  for (int s = 0; s < scenario.steps && made; ++s) {
    made = cudaMallocHost(reinterpret_cast<void**>(&inputs[s]), bytes) == cudaSuccess &&
           cudaMallocHost(reinterpret_cast<void**>(&outputs[s]), bytes) == cudaSuccess;
    for (size_t i = 0; i < count && made; ++i) {
      inputs[s][i] = device_rank_test::device_rank_input(rank, s, i);
    }
    if (made && s == scenario.inf_step && rank == 0 && count > 5) {
      inputs[s][5] = std::numeric_limits<float>::infinity();
    }
  }
  if (!made) return fail_with(rank, "CUDA setup failed");
  void* out = scenario.in_place ? send : recv;
  const std::string prefix = std::string(dir) + "/rank" + std::to_string(rank);
  std::string lines;
  int code = 0;
  for (int step = 0; step < scenario.steps && code == 0;) {
    if (step == scenario.codec_step &&
        terseCommSetCodec(comm, scenario.codec.c_str()) != ncclSuccess) {
      code = fail_with(rank, std::string("terseCommSetCodec: ") + ncclGetLastError(comm));
      break;
    }
    const bool gated = step == scenario.gate_step;
    const int calls = gated ? std::min(scenario.gate_calls, scenario.steps - step) : 1;
    Gate gate;
    if (gated) cudaLaunchHostFunc(stream, hold_until_open, &gate);
    for (int s = step; s < step + calls && code == 0; ++s) {
      if (scenario.host_buffers) {
        memcpy(send, inputs[s], bytes);
        if (!scenario.in_place) memset(recv, 0x7f, bytes);
      } else {
        cudaMemcpyAsync(send, inputs[s], bytes, cudaMemcpyHostToDevice, stream);
        if (!scenario.in_place) cudaMemsetAsync(recv, 0x7f, bytes, stream);
      }
      if (ncclAllReduce(send, out, count, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) {
        code = fail_with(rank, std::string("ncclAllReduce: ") + ncclGetLastError(comm));
      }
      if (gated) {
        lines += "step" + std::to_string(s) + "_returned_first " +
                 (gate.state.load() == 0 ? "1" : "0") + "\n";
      }
      if (scenario.host_buffers) {
        memcpy(outputs[s], out, bytes);  // a host-buffer call is complete when it returns
      } else {
        cudaMemcpyAsync(outputs[s], out, bytes, cudaMemcpyDeviceToHost, stream);
      }
    }
    if (gated && scenario.simulate && code == 0) {
      // The tensor's next two calls, simulated while the gated ones wait for the stream.
      ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
      ncclResult_t result = ncclGroupStart();
      for (int k = 0; k < 2 && result == ncclSuccess; ++k) {
        result = ncclAllReduce(send, out, count, ncclFloat32, ncclSum, comm, stream);
      }
      if (result == ncclSuccess) result = ncclGroupSimulateEnd(&info);
      if (result != ncclSuccess) {
        code = fail_with(rank, std::string("ncclGroupSimulateEnd: ") + ncclGetLastError(comm));
      }
      lines += "estimate " + std::to_string(info.estimatedTime) + "\n";
    }
    gate.open = true;
    if (cudaStreamSynchronize(stream) != cudaSuccess) {
      code = fail_with(rank, "cudaStreamSynchronize failed");
      break;
    }
    if (gated)
      lines += std::string("gate ") + (gate.state.load() == 1 ? "passed" : "gave_up") + "\n";
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    terseStats stats{};
    if (code == 0 && (async != ncclSuccess || terseCommGetStats(comm, &stats) != ncclSuccess)) {
      code = fail_with(rank, std::string("after the allreduce: ") + ncclGetLastError(comm));
    }
    // Calls behind one gate share the statistics read after the last of them.
    for (int s = step; s < step + calls && code == 0; ++s) {
      if (!write_file(prefix + "_step" + std::to_string(s) + ".bin", outputs[s], bytes)) {
        code = fail_with(rank, "cannot write to " + std::string(dir));
        break;
      }
      const std::string p = "step" + std::to_string(s) + "_";
      lines += p + "algorithm " + stats.last_algorithm + "\n";
      lines +=
          p + "inner " + (stats.last_inner_algorithm[0] ? stats.last_inner_algorithm : "-") + "\n";
      lines += p + "codec " + (stats.last_codec[0] ? stats.last_codec : "-") + "\n";
      lines += p + "seed " + std::to_string(stats.last_seed) + "\n";
      lines += p + "step " + std::to_string(stats.last_step) + "\n";
      lines += p + "piece_bytes " + std::to_string(stats.last_piece_bytes) + "\n";
      lines += p + "to_host " + std::to_string(stats.pcie_bytes_to_host) + "\n";
      lines += p + "to_device " + std::to_string(stats.pcie_bytes_to_device) + "\n";
    }
    step += calls;
  }
  if (code == 0 && !write_file(prefix + ".txt", lines.data(), lines.size())) {
    code = fail_with(rank, "cannot write " + prefix + ".txt");
  }
  for (int s = 0; s < scenario.steps; ++s) {
    cudaFreeHost(inputs[s]);
    cudaFreeHost(outputs[s]);
  }
  if (scenario.host_buffers) {
    free(send);
    free(recv);
  } else {
    cudaFree(send);
    cudaFree(recv);
  }
  cudaStreamDestroy(stream);
  if (ncclCommDestroy(comm) != ncclSuccess && code == 0) {
    code = fail_with(rank, "ncclCommDestroy failed");
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s <rank> <nranks> <unique id in hex>\n", argv[0]);
    return 2;
  }
  ncclUniqueId id;
  if (!terse::hex_to_bytes(argv[3], id.internal, sizeof(id.internal))) {
    fprintf(stderr, "the unique id is not 256 hex digits\n");
    return 2;
  }
  return run(atoi(argv[1]), atoi(argv[2]), id);
}
