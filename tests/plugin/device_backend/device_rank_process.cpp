// One rank of the device-backend route's multi-process cases (device_rank_protocol.h).
#include <cuda_runtime.h>
#include <nccl.h>
#include <terse/terse.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "launch/hex_bytes.h"
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

int run(int rank, int nranks, const ncclUniqueId& id) {
  using device_rank_test::kDeviceRankCount;
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
  const size_t bytes = kDeviceRankCount * sizeof(float);
  cudaStream_t stream = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMalloc(&send, bytes) != cudaSuccess || cudaMalloc(&recv, bytes) != cudaSuccess) {
    return fail_with(rank, "CUDA setup failed");
  }
  const std::string prefix = std::string(dir) + "/rank" + std::to_string(rank);
  std::string lines;
  int code = 0;
  for (int step = 0; step < device_rank_test::kDeviceRankSteps && code == 0; ++step) {
    std::vector<float> input(kDeviceRankCount), output(kDeviceRankCount);
    for (size_t i = 0; i < kDeviceRankCount; ++i) {
      input[i] = device_rank_test::device_rank_input(rank, step, i);
    }
    cudaMemcpyAsync(send, input.data(), bytes, cudaMemcpyHostToDevice, stream);
    cudaMemsetAsync(recv, 0x7f, bytes, stream);
    if (ncclAllReduce(send, recv, kDeviceRankCount, ncclFloat32, ncclSum, comm, stream) !=
        ncclSuccess) {
      code = fail_with(rank, std::string("ncclAllReduce: ") + ncclGetLastError(comm));
      break;
    }
    cudaMemcpyAsync(output.data(), recv, bytes, cudaMemcpyDeviceToHost, stream);
    if (cudaStreamSynchronize(stream) != cudaSuccess) {
      code = fail_with(rank, "cudaStreamSynchronize failed");
      break;
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    terseStats stats{};
    if (async != ncclSuccess || terseCommGetStats(comm, &stats) != ncclSuccess) {
      code = fail_with(rank, std::string("after the allreduce: ") + ncclGetLastError(comm));
      break;
    }
    if (!write_file(prefix + "_step" + std::to_string(step) + ".bin", output.data(), bytes)) {
      code = fail_with(rank, "cannot write to " + std::string(dir));
      break;
    }
    const std::string s = "step" + std::to_string(step) + "_";
    lines += s + "algorithm " + stats.last_algorithm + "\n";
    lines +=
        s + "inner " + (stats.last_inner_algorithm[0] ? stats.last_inner_algorithm : "-") + "\n";
    lines += s + "seed " + std::to_string(stats.last_seed) + "\n";
    lines += s + "step " + std::to_string(stats.last_step) + "\n";
    lines += s + "piece_bytes " + std::to_string(stats.last_piece_bytes) + "\n";
    lines += s + "to_host " + std::to_string(stats.pcie_bytes_to_host) + "\n";
    lines += s + "to_device " + std::to_string(stats.pcie_bytes_to_device) + "\n";
  }
  if (code == 0 && !write_file(prefix + ".txt", lines.data(), lines.size())) {
    code = fail_with(rank, "cannot write " + prefix + ".txt");
  }
  cudaFree(send);
  cudaFree(recv);
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
  if (!terse_test::hex_to_bytes(argv[3], id.internal, sizeof(id.internal))) {
    fprintf(stderr, "the unique id is not 256 hex digits\n");
    return 2;
  }
  return run(atoi(argv[1]), atoi(argv[2]), id);
}
