// The sparsifiers (Top-K, DGC, threshold, Random-K) on device buffers through the CUDA execution
// backend, against the fake CUDA runtime with the kernels emulated on the stream (as
// test_backend_ordering.cpp does for the dense codecs).
//
// Top-K's sparse allgather is checked against a model written here from the algorithm's
// documented rules alone (sparse_allgather.cpp, topk_codec.cpp), sharing no code with it: each
// rank's contribution v = x + residual, the k largest |v| kept (ties to the lower index), the
// residual v off the kept set and 0 on it, the sum in group-position order (the first message
// assigned, the others added), the chunked way's chunks each a tensor of its own, and the bytes
// that cross PCIe: each of a rank's messages to the host, every message it decodes to the device.
// The other sparsifiers, and Top-K on the re-encoding algorithms a planner may pick, are held
// to the reference model (model/) bit for bit, results and residuals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "codecs/codec_registry.h"
#include "collectives/compressed/memory/memory_kind.h"
#include "common/result.h"
#include "compressed_test_support.h"
#include "device_ranks.h"
#include "emulated_compute.h"

namespace terse {
namespace {

using test::DeviceRanks;
using test::EmulatedCompute;

constexpr size_t kHeaderBytes = 32;               // every message's header
constexpr size_t kPairBytes = 4 + sizeof(float);  // an fp32 (index, value) pair
size_t topk_message_bytes(size_t k) {
  return kHeaderBytes + k * kPairBytes;
}

struct Chunk {
  size_t offset;
  size_t count;
  size_t k;
};

// Exact Top-K with error feedback over allreduce calls, as the documentation states it.
class TopKAllgatherModel {
 public:
  TopKAllgatherModel(int nranks, size_t count) : n_(nranks), residuals_(nranks) {
    for (auto& residual : residuals_) residual.assign(count, 0.0f);
  }

  // One call: `chunks` (one chunk for the whole way); the result every rank holds, and whether
  // the call went dense (the union of the messages costs more than a dense ring).
  std::vector<float> call(const std::vector<std::vector<float>>& inputs,
                          const std::vector<Chunk>& chunks, float scale, bool* dense) {
    const size_t count = inputs[0].size();
    std::vector<float> sum(count, 0.0f);
    uint64_t message_bytes = 0;
    for (const Chunk& chunk : chunks) message_bytes += topk_message_bytes(chunk.k);
    // Equal messages of s bytes: the busiest link moves (n - 1) s; a dense ring 2 (n-1)/n 4 count.
    const uint64_t n = static_cast<uint64_t>(n_);
    *dense = n * (n - 1) * message_bytes > 2 * (n - 1) * sizeof(float) * uint64_t{count};
    for (const Chunk& chunk : chunks) {
      for (int r = 0; r < n_; ++r) {
        std::vector<float>& residual = residuals_[static_cast<size_t>(r)];
        std::vector<float> v(chunk.count);
        for (size_t i = 0; i < chunk.count; ++i) {
          v[i] = inputs[static_cast<size_t>(r)][chunk.offset + i] + residual[chunk.offset + i];
        }
        std::vector<size_t> order(chunk.count);
        std::iota(order.begin(), order.end(), size_t{0});
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
        std::vector<bool> kept(chunk.count, false);
        for (size_t j = 0; j < chunk.k; ++j) kept[order[j]] = true;
        for (size_t i = 0; i < chunk.count; ++i) {
          const size_t at = chunk.offset + i;
          residual[at] = kept[i] ? 0.0f : v[i];
          if (!kept[i]) continue;
          sum[at] = r == 0 ? v[i] : sum[at] + v[i];  // a dense ring sums in another order
        }
      }
    }
    for (float& value : sum) value *= scale;
    return sum;
  }

  const std::vector<float>& residual(int rank) const {
    return residuals_[static_cast<size_t>(rank)];
  }

 private:
  int n_;
  std::vector<std::vector<float>> residuals_;
};

// The chunked way's layout: C = min(64, ceil(count / (16 * piece_bytes / 4))) near-equal chunks
// (the first count % C one larger), each keeping round(ratio * chunk), at least 1.
std::vector<Chunk> ratio_chunks(size_t count, size_t piece_bytes, double ratio) {
  const size_t per_chunk = piece_bytes / sizeof(float) * 16;
  const size_t chunks = std::min<size_t>(64, (count + per_chunk - 1) / per_chunk);
  std::vector<Chunk> layout;
  size_t offset = 0;
  for (size_t c = 0; c < chunks; ++c) {
    const size_t elements = count / chunks + (c < count % chunks ? 1 : 0);
    const size_t k = std::max<size_t>(1, static_cast<size_t>(std::floor(ratio * elements + 0.5)));
    layout.push_back(Chunk{offset, elements, k});
    offset += elements;
  }
  return layout;
}

size_t bit_mismatches(const std::vector<float>& expected, const float* got, size_t count) {
  size_t mismatches = 0;
  for (size_t i = 0; i < count; ++i) {
    mismatches += std::memcmp(&expected[i], &got[i], sizeof(float)) != 0 ? 1 : 0;
  }
  return mismatches;
}

// `spec` (exact Top-K) through sparse allgather on device buffers, three fp32 steps with error
// feedback (the last an average), against TopKAllgatherModel: results and residuals bit for bit
// (within the ring's rounding where the call goes dense), and each rank's PCIe bytes exactly.
void expect_topk_matches_the_model(const std::string& spec, int n, size_t count, size_t piece_bytes,
                                   const std::vector<Chunk>& chunks, bool expect_dense) {
  std::vector<EmulatedCompute*> computes;
  DeviceRanks ranks(n, spec, MemoryKind::kResidual, [&] {
    auto compute = std::make_unique<EmulatedCompute>();
    computes.push_back(compute.get());
    return compute;
  });
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_algorithm("sparse_allgather");
  ranks.set_piece_bytes(piece_bytes);
  TopKAllgatherModel model(n, count);
  uint64_t messages = 0;
  for (const Chunk& chunk : chunks) messages += topk_message_bytes(chunk.k);
  for (uint64_t step = 0; step < 3; ++step) {
    const float scale = step == 2 ? 1.0f / static_cast<float>(n) : 1.0f;
    // Correlated across ranks, as gradients are: the ranks mostly keep the same positions,
    // so three or four values meet at an index and the order of the sum shows in its bits.
    const std::vector<float> shared = test::make_rank_input(0, count, 50 + step);
    std::vector<std::vector<float>> values;
    std::vector<std::vector<uint8_t>> inputs, outputs;
    for (int r = 0; r < n; ++r) {
      const std::vector<float> own = test::make_rank_input(r + 1, count, 80 + step);
      values.emplace_back(count);
      for (size_t i = 0; i < count; ++i) {
        values.back()[i] = shared[i] * (1.0f + 0.37f * static_cast<float>(r)) + 0.05f * own[i];
      }
      inputs.push_back(test::to_dtype(values.back(), DType::kFloat32));
    }
    std::vector<std::string> errors;
    ranks.allreduce(DType::kFloat32, count, inputs, scale, step, &outputs, &errors);
    bool dense = false;
    const std::vector<float> expected = model.call(values, chunks, scale, &dense);
    const std::string label = spec + " n=" + std::to_string(n) + " count=" + std::to_string(count) +
                              " step=" + std::to_string(step);
    ASSERT_EQ(dense, expect_dense) << label << ": the case does not test the branch it names";
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(errors[static_cast<size_t>(r)], "") << label;
      const float* got = reinterpret_cast<const float*>(outputs[static_cast<size_t>(r)].data());
      if (dense) {
        for (size_t i = 0; i < count; ++i) {
          ASSERT_NEAR(got[i], expected[i], 1e-5f * (1.0f + std::fabs(expected[i])))
              << label << " rank " << r << " element " << i;
        }
      } else {
        EXPECT_EQ(bit_mismatches(expected, got, count), 0u) << label << " rank " << r;
      }
      const std::vector<float> residual = ranks.residual(r);
      ASSERT_EQ(residual.size(), count) << label;
      EXPECT_EQ(bit_mismatches(model.residual(r), residual.data(), count), 0u)
          << label << " rank " << r << ": residual";
      // The counters add up over the calls.
      const uint64_t calls = step + 1;
      const CompressionCounters& counters = ranks.counters(r);
      EXPECT_EQ(counters.pcie_bytes_to_host, calls * messages) << label << " rank " << r;
      const uint64_t to_device =
          dense ? count * sizeof(float) : static_cast<uint64_t>(n) * messages;
      EXPECT_EQ(counters.pcie_bytes_to_device, calls * to_device) << label << " rank " << r;
    }
  }
  for (EmulatedCompute* compute : computes) EXPECT_EQ(compute->failures(), "") << spec;
}

// The whole way (a fixed k), sparse: each rank's one message, its peers' decoded on the device.
TEST(DeviceSparseAllgather, TopKWholeTensorEqualsAnIndependentModel) {
  for (int n : {2, 3, 4}) {
    expect_topk_matches_the_model("topk:k=40,method=exact", n, 3001, size_t{1} << 20,
                                  {Chunk{0, 3001, 40}}, /*expect_dense=*/false);
  }
}

// The chunked way (a ratio): five chunks of 1000 or 1001 elements, each its own Top-K.
TEST(DeviceSparseAllgather, TopKChunkedEqualsAnIndependentModel) {
  const size_t count = 5003, piece_bytes = 256;  // 1024 elements per chunk
  for (int n : {2, 3}) {
    expect_topk_matches_the_model("topk:ratio=0.02,method=exact", n, count, piece_bytes,
                                  ratio_chunks(count, piece_bytes, 0.02), /*expect_dense=*/false);
  }
}

// The dense branch: the ranks' selections together could cover the tensor, so the group sums
// the decoded messages in a ring on host memory and the sum crosses to the device once.
TEST(DeviceSparseAllgather, TopKDenseBranchEqualsAnIndependentModel) {
  expect_topk_matches_the_model("topk:k=400,method=exact", 3, 1000, size_t{1} << 20,
                                {Chunk{0, 1000, 400}}, /*expect_dense=*/true);
}

// Every sparsifier through the algorithm the planner's default picks for it (sparse allgather;
// Random-K with a shared seed: its own), and Top-K through the re-encoding algorithms: three
// steps (the last an average) on 3 ranks in fp32 and on 4 in bf16 (the model keeps one residual
// per rank, so one dtype per sequence) against the reference model bit for bit, results and
// (memory residual) residuals.
void expect_reference_model(const std::string& algorithm, const std::string& spec) {
  std::unique_ptr<Codec> codec;
  {
    std::string name;
    CodecParams params;
    ASSERT_EQ(parse_codec_spec(spec, &name, &params), ncclSuccess);
    ASSERT_EQ(create_codec(name, params, &codec), ncclSuccess) << last_error();
  }
  const MemoryKind memory = default_memory_kind(*codec);
  for (auto [n, dtype] : {std::pair{3, DType::kFloat32}, std::pair{4, DType::kBFloat16}}) {
    std::vector<EmulatedCompute*> computes;
    DeviceRanks ranks(n, spec, memory, [&] {
      auto compute = std::make_unique<EmulatedCompute>();
      computes.push_back(compute.get());
      return compute;
    });
    ASSERT_TRUE(ranks.ok()) << ranks.error();
    ranks.set_algorithm(algorithm);
    ranks.set_piece_bytes(1024);
    for (uint64_t step = 0; step < 3; ++step) {
      const double scale = step == 2 ? 1.0 / n : 1.0;
      const size_t count = 2001;
      std::vector<std::vector<uint8_t>> inputs, outputs;
      for (int r = 0; r < n; ++r) {
        inputs.push_back(test::to_dtype(test::make_rank_input(r, count, 60 + step), dtype));
      }
      std::vector<std::string> errors;
      ranks.allreduce(dtype, count, inputs, scale, step, &outputs, &errors);
      const std::string label = algorithm + " " + spec + " n=" + std::to_string(n) + " " +
                                dtype_name(dtype) + " step=" + std::to_string(step);
      for (int r = 0; r < n; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << label;
      const model::Comparison results = model::compare_all(ranks.expected(), dtype, outputs);
      EXPECT_EQ(results.mismatches, 0u) << label << ": " << results.first;
      if (memory != MemoryKind::kResidual) continue;
      for (int r = 0; r < n; ++r) {
        const model::Comparison residual =
            model::compare_residual(ranks.reference().residual(r), ranks.residual(r), 0);
        EXPECT_EQ(residual.mismatches, 0u) << label << " rank " << r << ": " << residual.first;
      }
    }
    for (EmulatedCompute* compute : computes) EXPECT_EQ(compute->failures(), "") << spec;
  }
}

TEST(DeviceSparseAllgather, EverySparsifierMatchesTheReferenceModel) {
  for (const std::string spec :
       {"topk:ratio=0.05,method=sampled", "topk:k=30,method=exact", "threshold:threshold=0.5",
        "dgc:ratio=0.05", "randomk:ratio=0.05,shared_seed=false,unbiased=false"}) {
    expect_reference_model("sparse_allgather", spec);
  }
  // A shared seed: the dense ring of the k values every rank picked at the same positions.
  expect_reference_model("randomk", "randomk:ratio=0.05");
  expect_reference_model("randomk", "randomk:ratio=0.05,unbiased=false");
}

// Shared-seed Random-K when a rank's message carries non-finite escapes (a host-buffer rank's
// NaN or Inf; here the emulated encode is the CPU's, which escapes them as that rank would): the
// summed message is decoded on the host, every rank's escapes added there, and the result crosses
// to the device whole, once. Every rank holds the model's result, non-finite where an input was.
TEST(DeviceSparseAllgather, SharedSeedRandomKCarriesNonFiniteElementsToTheDevice) {
  const int n = 3;
  const size_t count = 3001;
  DeviceRanks ranks(n, "randomk:ratio=0.05", MemoryKind::kNone,
                    [] { return std::make_unique<EmulatedCompute>(); });
  ASSERT_TRUE(ranks.ok()) << ranks.error();
  ranks.set_algorithm("randomk");
  std::vector<std::vector<uint8_t>> inputs, outputs;
  for (int r = 0; r < n; ++r) {
    std::vector<float> values = test::make_rank_input(r, count, 70);
    if (r == 1) values[7] = std::nanf("");
    if (r == 2) values[500] = INFINITY;
    inputs.push_back(test::to_dtype(values, DType::kFloat32));
  }
  std::vector<std::string> errors;
  ranks.allreduce(DType::kFloat32, count, inputs, 1.0, 0, &outputs, &errors);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    const float* got = reinterpret_cast<const float*>(outputs[static_cast<size_t>(r)].data());
    EXPECT_TRUE(std::isnan(got[7])) << "rank " << r;
    EXPECT_TRUE(std::isinf(got[500])) << "rank " << r;
    EXPECT_EQ(ranks.counters(r).pcie_bytes_to_device, count * sizeof(float)) << "rank " << r;
  }
  const model::Comparison results = model::compare_all(ranks.expected(), DType::kFloat32, outputs);
  EXPECT_EQ(results.mismatches, 0u) << results.first;
}

TEST(DeviceSparseReencoding, TopKOnTheReencodingAlgorithmsMatchesTheReferenceModel) {
  for (const std::string algorithm : {"sra", "ring", "recursive_doubling", "tree"}) {
    expect_reference_model(algorithm, "topk:k=30,method=exact");
  }
}

}  // namespace
}  // namespace terse
