#include "device_ranks.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "codecs/codec_registry.h"
#include "collectives/communicator.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/compressed/cuda_backend.h"
#include "collectives/compressed/run_compressed_algorithm.h"
#include "common/result.h"

namespace terse {
namespace test {
namespace {

TensorKey device_key(size_t count, DType dtype) {
  TensorKey key;
  key.comm = 0xde71ce;
  key.name = "device.tensor";
  key.count = count;
  key.dtype = dtype;
  return key;
}

}  // namespace

struct DeviceRanks::Rank {
  std::unique_ptr<Codec> codec;
  std::unique_ptr<ResidualMemory> residuals;
  CompressionScratch scratch;
  CompressionCounters counters;
  cudaStream_t stream = nullptr;
  std::unique_ptr<CudaBackend> backend;
};

std::vector<uint8_t> read_device(const void* device, size_t bytes, void* stream) {
  std::vector<uint8_t> host(bytes);
  if (bytes == 0) return host;
  cudaMemcpyAsync(host.data(), device, bytes, cudaMemcpyDeviceToHost,
                  static_cast<cudaStream_t>(stream));
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  return host;
}

DeviceRanks::DeviceRanks(int nranks, const std::string& codec_spec, MemoryKind memory,
                         const ComputeFactory& compute)
    : memory_(memory) {
  world_ = std::make_unique<CommunicatorWorld>(nranks);
  if (!world_->ok()) {
    ok_ = false;
    error_ = world_->error();
    return;
  }
  model_ = std::make_unique<model::CompressedModel>(codec_spec, nranks, memory);
  for (int r = 0; r < nranks; ++r) {
    auto rank = std::make_unique<Rank>();
    std::string name;
    CodecParams params;
    if (parse_codec_spec(codec_spec, &name, &params) != ncclSuccess ||
        create_codec(name, params, &rank->codec) != ncclSuccess ||
        cudaStreamCreateWithFlags(&rank->stream, cudaStreamNonBlocking) != cudaSuccess ||
        CudaBackend::create(rank->stream, compute(), &rank->backend) != ncclSuccess) {
      ok_ = false;
      error_ = std::string("rank setup: ") + last_error();
      return;
    }
    rank->residuals = std::make_unique<ResidualMemory>();
    ranks_.push_back(std::move(rank));
  }
}

DeviceRanks::~DeviceRanks() {
  for (auto& rank : ranks_) {
    if (rank->stream != nullptr) cudaStreamSynchronize(rank->stream);
    rank->backend.reset();
    rank->residuals.reset();
    if (rank->stream != nullptr) cudaStreamDestroy(rank->stream);
  }
}

const CompressionCounters& DeviceRanks::counters(int rank) const {
  return ranks_[static_cast<size_t>(rank)]->counters;
}

void DeviceRanks::allreduce(DType dtype, size_t count,
                            const std::vector<std::vector<uint8_t>>& inputs, double result_scale,
                            uint64_t step, std::vector<std::vector<uint8_t>>* outputs,
                            std::vector<std::string>* errors) {
  const int n = world_->nranks();
  const size_t bytes = count * dtype_size(dtype);
  outputs->assign(static_cast<size_t>(n), std::vector<uint8_t>(bytes));
  errors->assign(static_cast<size_t>(n), "");
  const uint32_t sequence = next_sequence_++;
  const CompressedAlgorithmInfo* algorithm = find_compressed_algorithm(algorithm_);
  const CompressedAlgorithmInfo* inner =
      inner_.empty() ? nullptr : find_compressed_algorithm(inner_);
  if (algorithm == nullptr || (!inner_.empty() && inner == nullptr)) {
    errors->assign(static_cast<size_t>(n), "no compressed algorithm " + algorithm_ + " " + inner_);
    return;
  }
  world_->run([&](Communicator& comm) {
    const int r = comm.rank();
    Rank& rank = *ranks_[static_cast<size_t>(r)];
    std::string& error = (*errors)[static_cast<size_t>(r)];
    void* send = nullptr;
    void* recv = nullptr;
    const size_t allocated = bytes == 0 ? 1 : bytes;
    if (cudaMalloc(&send, allocated) != cudaSuccess ||
        cudaMalloc(&recv, allocated) != cudaSuccess) {
      error = "cudaMalloc failed";
      return;
    }
    // Earlier work on the stream: the input arrives, the output holds a pattern.
    cudaMemcpyAsync(send, inputs[static_cast<size_t>(r)].data(), bytes, cudaMemcpyHostToDevice,
                    rank.stream);
    cudaMemsetAsync(recv, 0x7f, bytes, rank.stream);

    CompressedArgs args;
    args.send = send;
    args.recv = recv;
    args.count = count;
    args.dtype = dtype;
    args.result_scale = result_scale;
    args.codec = rank.codec.get();
    args.encode.seed = 0x5eed0000u + step;
    args.encode.step = step;
    const std::unique_lock<std::mutex> held = comm.hold_transport();
    CompressedContext context;
    context.transport = comm.transport();
    context.sequence = sequence;
    context.deadline = comm.transport()->default_deadline();
    context.group = PeerGroup::whole(r, n);
    context.group.hosts = hosts_;
    context.inner = inner;
    context.piece_bytes = piece_bytes_;
    context.scratch = &rank.scratch;
    context.counters = &rank.counters;
    context.backend = rank.backend.get();
    std::shared_ptr<ResidualEntry> entry;
    ncclResult_t result = ncclSuccess;
    if (memory_ != MemoryKind::kNone) {
      EntryOptions options;
      options.memory = Memory::kDevice;
      options.stream = rank.stream;
      options.stage_count = algorithm->stage_elements(*rank.codec, count, dtype, context.group);
      if (inner != nullptr) {
        // A chosen inner algorithm's stage residual on a group of two or more node leaders or
        // rails, of the whole tensor: at least what any of them needs (the planner sizes it
        // exactly; more is never refused).
        PeerGroup two;
        two.ranks = {0, 1};
        options.stage_count = std::max(
            options.stage_count, inner->stage_elements(*rank.codec, count, DType::kFloat32, two));
      }
      result =
          rank.residuals->acquire(device_key(count, dtype), *rank.codec, memory_, options, &entry);
      if (result == ncclSuccess && entry == nullptr) {
        result = fail(ncclInternalError, "residual memory did not admit the tensor");
      }
      args.entry = entry.get();
    }
    if (result == ncclSuccess) result = run_compressed_algorithm(*algorithm, args, context);
    if (result != ncclSuccess) error = last_error();
    // Later work on the stream: the result leaves.
    cudaMemcpyAsync((*outputs)[static_cast<size_t>(r)].data(), recv, bytes, cudaMemcpyDeviceToHost,
                    rank.stream);
    cudaStreamSynchronize(rank.stream);
    cudaFree(send);
    cudaFree(recv);
  });
  model::CallSpec spec;
  spec.algorithm = algorithm_;
  spec.dtype = dtype;
  spec.count = count;
  spec.seed = 0x5eed0000u + step;
  spec.step = step;
  spec.piece_bytes = piece_bytes_;
  spec.result_scale = result_scale;
  spec.inner_algorithm = inner_;
  spec.hosts = hosts_;
  expected_ = model_->call(spec, inputs);
  last_count_ = count;
  last_dtype_ = dtype;
}

std::vector<float> DeviceRanks::residual(int rank) {
  Rank& r = *ranks_[static_cast<size_t>(rank)];
  const std::shared_ptr<ResidualEntry> entry =
      r.residuals->find(device_key(last_count_, last_dtype_));
  if (entry == nullptr || entry->residual() == nullptr) return {};
  const std::vector<uint8_t> bytes =
      read_device(entry->residual(), last_count_ * sizeof(float), r.stream);
  std::vector<float> values(last_count_);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

std::vector<float> DeviceRanks::owner_residual(int rank) {
  Rank& r = *ranks_[static_cast<size_t>(rank)];
  const std::shared_ptr<ResidualEntry> entry =
      r.residuals->find(device_key(last_count_, last_dtype_));
  if (entry == nullptr || entry->stage_residual() == nullptr) return {};
  const size_t chunk = reference().owner_residual(rank).size();
  const std::vector<uint8_t> bytes =
      read_device(entry->stage_residual(), chunk * sizeof(float), r.stream);
  std::vector<float> values(chunk);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

}  // namespace test
}  // namespace terse
