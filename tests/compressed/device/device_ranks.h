// N ranks as threads running a compressed algorithm (scatter-reduce-allgather unless told
// otherwise) on device buffers through the CUDA execution backend
// (collectives/compressed/cuda_backend.h), each rank on its own stream with device residual memory,
// checked against the reference model (model/) as the host-buffer tests are. The DeviceCompute
// is the caller's: the real kernels on a GPU, the emulated ones under the fake CUDA runtime.
//
// Each call does on the rank's stream what an application would: copies the input into device
// memory and fills the output with a pattern (earlier work the collective must follow), runs the
// algorithm, copies the output back (later work that must see the result), then waits.
#pragma once

#include <nccl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "collectives/compressed/compressed_args.h"
#include "collectives/compressed/device_compute.h"
#include "collectives/compressed/memory/residual_memory.h"
#include "communicator_test_support.h"
#include "model/compressed_model.h"

namespace terse {
namespace test {

class DeviceRanks {
 public:
  using ComputeFactory = std::function<std::unique_ptr<DeviceCompute>()>;
  DeviceRanks(int nranks, const std::string& codec_spec, MemoryKind memory,
              const ComputeFactory& compute);
  ~DeviceRanks();

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

  // One call of `count` elements of `dtype` at `step` from inputs[r] (raw bytes); every rank's
  // result in outputs, each rank's error message in errors ("" when it succeeded).
  void allreduce(DType dtype, size_t count, const std::vector<std::vector<uint8_t>>& inputs,
                 double result_scale, uint64_t step, std::vector<std::vector<uint8_t>>* outputs,
                 std::vector<std::string>* errors);
  // The model's expectation for the last call (run beside it on the same inputs).
  const model::Expected& expected() const { return expected_; }
  const model::CompressedModel& reference() const { return *model_; }
  // Rank r's residual and owner residual after the last call, copied from the device.
  std::vector<float> residual(int rank);
  std::vector<float> owner_residual(int rank);
  const CompressionCounters& counters(int rank) const;
  void set_piece_bytes(size_t bytes) { piece_bytes_ = bytes; }
  // The compressed algorithm's table name: "sra" (the default), "ring", "tree", ...
  void set_algorithm(const std::string& name) { algorithm_ = name; }
  // hierarchical and rail: the algorithm between node leaders or along the rails ("": the
  // table's default), and each rank's node (empty: one node), for the call and the model.
  void set_inner(const std::string& name) { inner_ = name; }
  void set_hosts(const std::vector<std::string>& hosts) { hosts_ = hosts; }

  struct Rank;

 private:
  std::unique_ptr<CommunicatorWorld> world_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::unique_ptr<model::CompressedModel> model_;
  model::Expected expected_;
  MemoryKind memory_;
  size_t last_count_ = 0;
  DType last_dtype_ = DType::kFloat32;
  uint32_t next_sequence_ = 1;
  size_t piece_bytes_ = size_t{1} << 20;
  std::string algorithm_ = "sra";
  std::string inner_;
  std::vector<std::string> hosts_;
  bool ok_ = true;
  std::string error_;
};

// Copies `bytes` of device memory to the host in stream order and waits (test-side reads).
std::vector<uint8_t> read_device(const void* device, size_t bytes, void* stream);

}  // namespace test
}  // namespace terse
