#include "compressed_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>

#include "codecs/codec_registry.h"
#include "codecs/tensor_key.h"
#include "collectives/communicator.h"
#include "collectives/compressed/compressed_error_bound.h"
#include "common/counter_rng.h"
#include "common/result.h"

namespace terse {
namespace test {
namespace {

constexpr uint64_t kTestComm = 0x7e57;

}  // namespace

std::vector<float> make_rank_input(int rank, size_t count, uint64_t salt) {
  std::vector<float> values(count);
  const uint64_t seed = salt * 1000003u + static_cast<uint64_t>(rank) * 7919u + 17u;
  for (size_t i = 0; i < count; ++i) {
    const double smooth = 0.5 * std::sin(0.01 * double(i) + double(rank));
    const double noise = 2.0 * counter_uniform(seed, i) - 1.0;
    values[i] = static_cast<float>(smooth + 0.5 * noise);
  }
  return values;
}

std::vector<uint8_t> to_dtype(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) store_element(bytes.data(), dtype, i, values[i]);
  return bytes;
}

std::vector<double> from_dtype(const std::vector<uint8_t>& bytes, DType dtype, size_t count) {
  std::vector<double> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = load_element(bytes.data(), dtype, i);
  return values;
}

CompressedRanks::CompressedRanks(int nranks, const std::string& codec_spec, MemoryKind memory,
                                 std::vector<std::string> hosts)
    : ranks_(static_cast<size_t>(nranks)), memory_(memory), hosts_(std::move(hosts)) {
  world_ = std::make_unique<CommunicatorWorld>(nranks);
  if (!world_->ok()) {
    ok_ = false;
    error_ = world_->error();
    return;
  }
  for (Rank& rank : ranks_) {
    if (create_codec(codec_spec, &rank.codec) != ncclSuccess) {
      ok_ = false;
      error_ = last_error();
      return;
    }
    rank.residuals = std::make_unique<ResidualMemory>();
  }
}

CompressedRanks::~CompressedRanks() = default;

std::vector<ncclResult_t> CompressedRanks::allreduce(
    const CompressedAlgorithmInfo& algorithm, DType dtype, size_t count,
    const std::vector<std::vector<uint8_t>>& inputs, std::vector<std::vector<uint8_t>>* outputs,
    double result_scale, bool in_place, uint64_t step, std::vector<std::string>* errors) {
  const int n = nranks();
  std::vector<ncclResult_t> results(static_cast<size_t>(n), ncclSuccess);
  outputs->assign(static_cast<size_t>(n), std::vector<uint8_t>(count * dtype_size(dtype)));
  if (errors != nullptr) errors->assign(static_cast<size_t>(n), "");
  const uint32_t sequence = next_sequence_++;
  world_->run([&](Communicator& comm) {
    const int r = comm.rank();
    Rank& rank = ranks_[static_cast<size_t>(r)];
    std::vector<uint8_t>& out = (*outputs)[static_cast<size_t>(r)];
    if (in_place) out = inputs[static_cast<size_t>(r)];

    CompressedArgs args;
    args.send = in_place ? out.data() : inputs[static_cast<size_t>(r)].data();
    args.recv = out.data();
    args.count = count;
    args.dtype = dtype;
    args.result_scale = result_scale;
    args.codec = rank.codec.get();
    args.encode.seed = 0x5eed0000u + step;
    args.encode.step = step;
    args.residuals = rank.residuals.get();
    args.memory = memory_;
    args.key.comm = kTestComm;
    args.key.name = "test.tensor";
    args.key.count = count;
    args.key.dtype = dtype;
    std::shared_ptr<ResidualEntry> entry;
    ncclResult_t result = ncclSuccess;
    const bool needs_entry = memory_ != MemoryKind::kNone ||
                             rank.codec->make_state(count, dtype, MatrixShape{}) != nullptr;
    if (needs_entry) {
      result = rank.residuals->acquire(args.key, *rank.codec, memory_, EntryOptions{}, &entry);
      args.entry = entry.get();
    }

    CompressedContext context;
    context.transport = comm.transport();
    context.sequence = sequence;
    context.deadline = comm.transport()->default_deadline();
    context.group = PeerGroup::whole(r, n);
    context.group.hosts = hosts_;
    context.piece_bytes = piece_bytes_;
    context.scratch = &rank.scratch;
    context.counters = &rank.counters;
    if (result == ncclSuccess) result = algorithm.run(args, context);
    results[static_cast<size_t>(r)] = result;
    if (result != ncclSuccess && errors != nullptr)
      (*errors)[static_cast<size_t>(r)] = last_error();
  });
  return results;
}

std::vector<float> CompressedRanks::residual(int rank, size_t count, DType dtype) {
  Rank& slot = ranks_[static_cast<size_t>(rank)];
  TensorKey key;
  key.comm = kTestComm;
  key.name = "test.tensor";
  key.count = count;
  key.dtype = dtype;
  if (!slot.residuals->contains(key)) return {};
  std::shared_ptr<ResidualEntry> entry;
  if (slot.residuals->acquire(key, *slot.codec, memory_, EntryOptions{}, &entry) != ncclSuccess ||
      entry->residual() == nullptr) {
    return {};
  }
  return std::vector<float>(entry->residual(), entry->residual() + count);
}

CaseReport check_case(const std::string& label, const Codec& codec, int lossy_steps, DType dtype,
                      size_t count, const std::vector<std::vector<uint8_t>>& inputs,
                      const std::vector<std::vector<uint8_t>>& outputs, double result_scale) {
  CaseReport report;
  CodecErrorBound codec_bound;
  EXPECT_EQ(codec_error_bound(codec, count, &codec_bound), ncclSuccess) << last_error();
  std::vector<double> exact(count, 0.0);
  double norm_sum = 0;
  for (const auto& input : inputs) {
    const std::vector<double> values = from_dtype(input, dtype, count);
    for (size_t i = 0; i < count; ++i) exact[i] += values[i];
    norm_sum += bound_norm(codec_bound.norm, values.data(), count);
  }
  double max_abs = 0;
  for (double& value : exact) {
    value *= result_scale;
    max_abs = std::max(max_abs, std::fabs(value));
  }
  report.bound =
      allreduce_error_bound(codec_bound, lossy_steps, norm_sum, result_scale, max_abs, dtype);
  int reported = 0;
  for (size_t r = 0; r < outputs.size(); ++r) {
    const std::vector<double> got = from_dtype(outputs[r], dtype, count);
    for (size_t i = 0; i < count; ++i) {
      const double error = std::fabs(got[i] - exact[i]);
      if (!(error <= report.bound)) {
        ++report.outside;
        if (reported++ < 3) {
          ADD_FAILURE() << label << ": rank " << r << " element " << i << " = " << got[i]
                        << ", exact " << exact[i] << ", error " << error << " > bound "
                        << report.bound;
        }
      }
      if (std::isfinite(error)) report.max_error = std::max(report.max_error, error);
    }
    if (outputs[r] != outputs[0]) {
      report.identical = false;
      ADD_FAILURE() << label << ": rank " << r << "'s result differs from rank 0's";
    }
  }
  return report;
}

CaseReport run_and_check(CompressedRanks& ranks, const CompressedAlgorithmInfo& algorithm,
                         DType dtype, size_t count, uint64_t salt, double result_scale,
                         bool in_place) {
  const int n = ranks.nranks();
  for (int r = 0; r < n; ++r) ranks.residuals(r).reset_all();
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(to_dtype(make_rank_input(r, count, salt), dtype));
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<std::string> errors;
  const std::string label = std::string(algorithm.name) + " " + ranks.codec(0).spec() +
                            " n=" + std::to_string(n) + " count=" + std::to_string(count) + " " +
                            dtype_name(dtype) + (in_place ? " in place" : "");
  const std::vector<ncclResult_t> results = ranks.allreduce(
      algorithm, dtype, count, inputs, &outputs, result_scale, in_place, salt, &errors);
  for (int r = 0; r < n; ++r) {
    if (results[static_cast<size_t>(r)] != ncclSuccess) {
      ADD_FAILURE() << label << ": rank " << r << " failed: " << errors[static_cast<size_t>(r)];
      return CaseReport{};
    }
  }
  return check_case(label, ranks.codec(0), algorithm.lossy_steps(n), dtype, count, inputs, outputs,
                    result_scale);
}

const std::vector<std::string>& reencoding_codecs() {
  static const std::vector<std::string> codecs = {"none",
                                                  "fp16",
                                                  "bf16",
                                                  "int8",
                                                  "int4",
                                                  "int2",
                                                  "int8:mode=absmax,rounding=stochastic",
                                                  "qsgd",
                                                  "terngrad",
                                                  "sign",
                                                  "topk:ratio=0.1",
                                                  "randomk:ratio=0.1",
                                                  "threshold:threshold=0.5"};
  return codecs;
}

void expect_result_is_sum_less_residuals(CompressedRanks& ranks,
                                         const CompressedAlgorithmInfo& algorithm, size_t count) {
  const int n = ranks.nranks();
  for (int r = 0; r < n; ++r) ranks.residuals(r).reset_all();
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<double> exact(count, 0.0);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> values = make_rank_input(r, count, 6);
    for (size_t i = 0; i < count; ++i) exact[i] += values[i];
    inputs.push_back(to_dtype(values, DType::kFloat32));
  }
  std::vector<std::vector<uint8_t>> outputs;
  ASSERT_EQ(ranks.allreduce(algorithm, DType::kFloat32, count, inputs, &outputs),
            std::vector<ncclResult_t>(static_cast<size_t>(n), ncclSuccess));
  const std::vector<double> got = from_dtype(outputs[0], DType::kFloat32, count);
  std::vector<double> residual_sum(count, 0.0);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> residual = ranks.residual(r, count, DType::kFloat32);
    ASSERT_EQ(residual.size(), count) << algorithm.name << " n=" << n << " rank " << r;
    size_t nonzero = 0;
    for (size_t i = 0; i < count; ++i) {
      residual_sum[i] += residual[i];
      if (residual[i] != 0.0f) ++nonzero;
    }
    EXPECT_GT(nonzero, count / 2) << algorithm.name << " n=" << n << " rank " << r;
  }
  for (size_t i = 0; i < count; ++i) {
    ASSERT_NEAR(got[i], exact[i] - residual_sum[i], 1e-5)
        << algorithm.name << " n=" << n << " element " << i;
  }
}

void expect_scratch_stops_growing(CompressedRanks& ranks, const CompressedAlgorithmInfo& algorithm,
                                  size_t count) {
  const int n = ranks.nranks();
  run_and_check(ranks, algorithm, DType::kFloat32, count, 1);
  std::vector<uint64_t> growths;
  for (int r = 0; r < n; ++r) growths.push_back(ranks.scratch(r).growths());
  for (int call = 0; call < 3; ++call) run_and_check(ranks, algorithm, DType::kFloat32, count, 2);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ranks.scratch(r).growths(), growths[static_cast<size_t>(r)])
        << algorithm.name << " rank " << r;
  }
}

}  // namespace test
}  // namespace terse
